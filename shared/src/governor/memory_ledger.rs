//! The in-process ledger: the ledger rules on a mutex, for tests, the storm lab and
//! single-instance runs. Semantics are those of the Redis ledger, checked by the same
//! conformance suite.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;

use super::budget::{DeploymentName, WindowLimits};
use super::ledger::{
    Admission, ExternalUsage, Ledger, LedgerError, LedgerSnapshot, Reconciliation,
    ReportedRemaining, Reservation, ReservationId, ThrottleKind,
};
use crate::clock::EpochMillis;
use crate::tokens::Tokens;

#[derive(Debug, Default)]
pub struct MemoryLedger {
    deployments: Mutex<HashMap<DeploymentName, WindowState>>,
}

/// One deployment's sliding-window log and counters.
#[derive(Debug, Default)]
struct WindowState {
    latest_now: u64,
    seq: u64,
    /// Admissions still in the window, oldest first: (admitted at, id).
    entries: VecDeque<(u64, u64)>,
    charges: HashMap<u64, u64>,
    reconciled: HashSet<u64>,
    window_tokens: u64,
    cooldown_until: u64,
    down_until: u64,
    /// The external reservation and when it ends (see the ledger rules).
    ext_tokens: u64,
    ext_requests: u64,
    ext_until: u64,
    admitted: u64,
    deferred: u64,
    reserved_tokens: u64,
    used_tokens: u64,
    refunded_tokens: u64,
    throttles: u64,
    shortfalls: u64,
}

impl WindowState {
    /// Moves the ledger's timeline to `now` (never backwards) and drops expired entries.
    fn advance(&mut self, now: EpochMillis, window_ms: u64) -> u64 {
        let t = self.latest_now.max(now.0);
        self.latest_now = t;
        while let Some(&(at, id)) = self.entries.front() {
            if at.saturating_add(window_ms) > t {
                break;
            }
            self.entries.pop_front();
            let charge = self.charges.remove(&id).unwrap_or(0);
            self.window_tokens = self.window_tokens.saturating_sub(charge);
            self.reconciled.remove(&id);
        }
        t
    }

    /// The external reservation in force at `t`: (tokens, requests).
    fn external(&self, t: u64) -> (u64, u64) {
        if self.ext_until > t {
            (self.ext_tokens, self.ext_requests)
        } else {
            (0, 0)
        }
    }

    /// When the oldest entries (and the external reservation, at its end) will have
    /// left the window enough for `cost` to fit.
    fn room_at(&self, limits: &WindowLimits, cost: u64, t: u64) -> u64 {
        let (ext_tokens, ext_requests) = self.external(t);
        let mut excess_tokens =
            (self.window_tokens + ext_tokens + cost) as i128 - i128::from(limits.tokens);
        let mut excess_requests =
            (self.entries.len() as u64 + ext_requests + 1) as i128 - i128::from(limits.requests);
        let mut external_held = ext_tokens > 0 || ext_requests > 0;
        for &(at, id) in &self.entries {
            let leaves_at = at + limits.window_ms;
            if external_held && self.ext_until <= leaves_at {
                external_held = false;
                excess_tokens -= i128::from(ext_tokens);
                excess_requests -= i128::from(ext_requests);
                if excess_tokens <= 0 && excess_requests <= 0 {
                    return self.ext_until;
                }
            }
            excess_tokens -= i128::from(self.charges.get(&id).copied().unwrap_or(0));
            excess_requests -= 1;
            if excess_tokens <= 0 && excess_requests <= 0 {
                return leaves_at;
            }
        }
        if external_held {
            excess_tokens -= i128::from(ext_tokens);
            excess_requests -= i128::from(ext_requests);
            if excess_tokens <= 0 && excess_requests <= 0 {
                return self.ext_until;
            }
        }
        t + limits.window_ms
    }

    /// Applies a report of what the deployment has left (see the ledger rules).
    fn observe(&mut self, limits: &WindowLimits, reported: ReportedRemaining, t: u64) {
        let (ext_tokens, ext_requests) = self.external(t);
        let count = self.entries.len() as u64;
        // The external reservation that leaves exactly `remaining` free, if larger.
        let needed = |limit: u64, charged: u64, held: u64, remaining: Option<u64>| {
            remaining
                .map(|r| limit.saturating_sub(charged).saturating_sub(r))
                .filter(|&needed| needed > held)
        };
        let tokens = needed(
            limits.tokens,
            self.window_tokens,
            ext_tokens,
            reported.tokens,
        );
        let requests = needed(limits.requests, count, ext_requests, reported.requests);
        if tokens.is_none() && requests.is_none() {
            return;
        }
        self.ext_tokens = tokens.unwrap_or(ext_tokens);
        self.ext_requests = requests.unwrap_or(ext_requests);
        self.ext_until = t + limits.window_ms;
        self.shortfalls += 1;
    }

    fn external_usage(&self, t: u64) -> ExternalUsage {
        let (tokens, requests) = self.external(t);
        ExternalUsage {
            tokens,
            requests,
            until: (self.ext_until > t && (tokens > 0 || requests > 0))
                .then_some(EpochMillis(self.ext_until)),
        }
    }
}

impl MemoryLedger {
    pub fn new() -> Self {
        MemoryLedger::default()
    }

    fn with_state<T>(
        &self,
        deployment: &DeploymentName,
        f: impl FnOnce(&mut WindowState) -> T,
    ) -> Result<T, LedgerError> {
        let mut map = self
            .deployments
            .lock()
            .map_err(|_| LedgerError::Corrupt("ledger mutex poisoned".into()))?;
        Ok(f(map.entry(deployment.clone()).or_default()))
    }
}

#[async_trait]
impl Ledger for MemoryLedger {
    async fn admit(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        cost: Tokens,
        now: EpochMillis,
    ) -> Result<Admission, LedgerError> {
        self.with_state(deployment, |s| {
            let t = s.advance(now, limits.window_ms);
            if s.down_until > t {
                return Admission::Down {
                    until: EpochMillis(s.down_until),
                };
            }
            if s.cooldown_until > t {
                return Admission::CoolingDown {
                    until: EpochMillis(s.cooldown_until),
                };
            }
            let (ext_tokens, ext_requests) = s.external(t);
            let fits = s.window_tokens + ext_tokens + cost.0 <= limits.tokens
                && (s.entries.len() as u64) + ext_requests < limits.requests;
            if !fits {
                s.deferred += 1;
                return Admission::Deferred {
                    retry_at: EpochMillis(s.room_at(limits, cost.0, t)),
                };
            }
            s.seq += 1;
            s.entries.push_back((t, s.seq));
            s.charges.insert(s.seq, cost.0);
            s.window_tokens += cost.0;
            s.admitted += 1;
            s.reserved_tokens += cost.0;
            Admission::Admitted(Reservation {
                id: ReservationId(s.seq),
                deployment: deployment.clone(),
                tokens: cost,
                admitted_at: EpochMillis(t),
            })
        })
    }

    async fn reconcile(
        &self,
        reservation: &Reservation,
        used: Tokens,
    ) -> Result<Reconciliation, LedgerError> {
        self.with_state(&reservation.deployment, |s| {
            let id = reservation.id.0;
            if s.reconciled.contains(&id) {
                return Reconciliation::Settled;
            }
            s.used_tokens += used.0;
            let Some(charge) = s.charges.get_mut(&id) else {
                return Reconciliation::Settled;
            };
            let before = *charge;
            *charge = used.0;
            s.reconciled.insert(id);
            s.window_tokens = s.window_tokens - before + used.0;
            if used.0 <= before {
                s.refunded_tokens += before - used.0;
                Reconciliation::Refunded(Tokens(before - used.0))
            } else {
                Reconciliation::Overran(Tokens(used.0 - before))
            }
        })
    }

    async fn throttle(
        &self,
        deployment: &DeploymentName,
        kind: ThrottleKind,
        until: EpochMillis,
    ) -> Result<EpochMillis, LedgerError> {
        self.with_state(deployment, |s| {
            s.throttles += 1;
            let slot = match kind {
                ThrottleKind::CoolingDown => &mut s.cooldown_until,
                ThrottleKind::Down => &mut s.down_until,
            };
            *slot = (*slot).max(until.0);
            EpochMillis(*slot)
        })
    }

    async fn observe_remaining(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        reported: ReportedRemaining,
        now: EpochMillis,
    ) -> Result<ExternalUsage, LedgerError> {
        self.with_state(deployment, |s| {
            let t = s.advance(now, limits.window_ms);
            s.observe(limits, reported, t);
            s.external_usage(t)
        })
    }

    async fn snapshot(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        now: EpochMillis,
    ) -> Result<LedgerSnapshot, LedgerError> {
        self.with_state(deployment, |s| {
            let t = s.advance(now, limits.window_ms);
            LedgerSnapshot {
                window_tokens: s.window_tokens,
                window_requests: s.entries.len() as u64,
                cooldown_until: (s.cooldown_until > t).then_some(EpochMillis(s.cooldown_until)),
                down_until: (s.down_until > t).then_some(EpochMillis(s.down_until)),
                external: s.external_usage(t),
                admitted: s.admitted,
                deferred: s.deferred,
                reserved_tokens: s.reserved_tokens,
                used_tokens: s.used_tokens,
                refunded_tokens: s.refunded_tokens,
                throttles: s.throttles,
                shortfalls: s.shortfalls,
            }
        })
    }
}
