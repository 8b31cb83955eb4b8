//! The in-process ledger: the ledger rules on a mutex, for tests, the storm lab and
//! single-instance runs. Semantics are those of the Redis ledger, checked by the same
//! conformance suite.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;

use super::budget::{MINUTE_MS, SEND_WINDOW_MS, WindowLimits};
use super::ledger::{
    Admission, ExternalUsage, Ledger, LedgerError, LedgerSnapshot, Reconciliation,
    ReportedRemaining, Reservation, ReservationId, ThrottleKind,
};
use crate::clock::EpochMillis;
use crate::deployment_name::DeploymentName;
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
    /// Admissions of the last minute, oldest first: (admitted at, id).
    entries: VecDeque<(u64, u64)>,
    charges: HashMap<u64, u64>,
    reconciled: HashSet<u64>,
    /// Sends, whose charge counts as used until they are reconciled (see the ledger rules).
    settled_at_send: HashSet<u64>,
    /// Charged tokens of every entry (the last minute's).
    minute_tokens: u64,
    /// The entries of the short window (the newest of `entries`), and their charges:
    /// kept as they come and go so that no admission walks the window.
    short: VecDeque<(u64, u64)>,
    short_tokens: u64,
    /// Instants of the calls sent in the last [`SEND_WINDOW_MS`], oldest first.
    sent: VecDeque<u64>,
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
    /// Moves the ledger's timeline to `now` (never backwards) and drops the entries
    /// older than the short window from it, and those older than a minute altogether.
    fn advance(&mut self, now: EpochMillis, window_ms: u64) -> u64 {
        let t = self.latest_now.max(now.0);
        self.latest_now = t;
        while let Some(&(at, id)) = self.short.front() {
            if at.saturating_add(window_ms) > t {
                break;
            }
            self.short.pop_front();
            self.short_tokens = self.short_tokens.saturating_sub(self.charge(id));
        }
        while let Some(&at) = self.sent.front() {
            if at.saturating_add(SEND_WINDOW_MS) > t {
                break;
            }
            self.sent.pop_front();
        }
        while let Some(&(at, id)) = self.entries.front() {
            if at.saturating_add(MINUTE_MS) > t {
                break;
            }
            self.entries.pop_front();
            let charge = self.charges.remove(&id).unwrap_or(0);
            self.minute_tokens = self.minute_tokens.saturating_sub(charge);
            self.reconciled.remove(&id);
            self.settled_at_send.remove(&id);
        }
        t
    }

    fn charge(&self, id: u64) -> u64 {
        self.charges.get(&id).copied().unwrap_or(0)
    }

    /// Tokens and requests of the short window (as of the last `advance`).
    fn short_totals(&self) -> (u64, u64) {
        (self.short_tokens, self.short.len() as u64)
    }

    /// Whether reservation `id` is still in the short window: ids grow with time.
    fn in_short_window(&self, id: u64) -> bool {
        self.short.front().is_some_and(|&(_, first)| id >= first)
    }

    /// The external reservation in force at `t`: (tokens, requests).
    fn external(&self, t: u64) -> (u64, u64) {
        if self.ext_until > t {
            (self.ext_tokens, self.ext_requests)
        } else {
            (0, 0)
        }
    }

    /// What could be admitted at `t` without waiting: (tokens, requests).
    fn free(&self, limits: &WindowLimits, t: u64) -> (u64, u64) {
        self.free_without(limits, t, None)
    }

    /// A hold's share of the windows while it is still in them: (its charge, whether it is in
    /// the short window). `(0, false)` when there is none, or it has left the minute.
    fn hold_share(&self, hold: Option<u64>) -> (u64, bool) {
        match hold {
            Some(id) if self.charges.contains_key(&id) => {
                (self.charge(id), self.short.iter().any(|&(_, i)| i == id))
            }
            _ => (0, false),
        }
    }

    /// What could be admitted at `t` if entry `hold` were gone: (tokens, requests).
    fn free_without(&self, limits: &WindowLimits, t: u64, hold: Option<u64>) -> (u64, u64) {
        let (ext_tokens, ext_requests) = self.external(t);
        let (short_tokens, short_requests) = self.short_totals();
        let (held, in_short) = self.hold_share(hold);
        let (short_tokens, short_requests) = if in_short {
            (
                short_tokens.saturating_sub(held),
                short_requests.saturating_sub(1),
            )
        } else {
            (short_tokens, short_requests)
        };
        let minute_tokens = self.minute_tokens.saturating_sub(held);
        let tokens = limits.tokens.saturating_sub(short_tokens + ext_tokens).min(
            limits
                .minute_tokens
                .saturating_sub(minute_tokens + ext_tokens),
        );
        let requests = limits
            .requests
            .saturating_sub(short_requests + ext_requests);
        (tokens, requests)
    }

    /// When the oldest entries (and the external reservation, at its end) will have
    /// left both windows enough for `cost` to fit. Both conditions only get easier as
    /// entries leave, so it is the later of the two windows' own instants.
    fn room_at(&self, limits: &WindowLimits, cost: u64, t: u64) -> u64 {
        self.room_at_without(limits, cost, t, None)
    }

    /// [`Self::room_at`] as if entry `hold` were gone.
    fn room_at_without(&self, limits: &WindowLimits, cost: u64, t: u64, hold: Option<u64>) -> u64 {
        let (ext_tokens, ext_requests) = self.external(t);
        let ext = (self.ext_until, ext_tokens, ext_requests);
        let (held, in_short) = self.hold_share(hold);
        let other = |id: u64| Some(id) != hold;
        let minute = earliest_room(
            i128::from(self.minute_tokens.saturating_sub(held) + ext_tokens + cost)
                - i128::from(limits.minute_tokens),
            0,
            self.entries
                .iter()
                .filter(|&&(_, id)| other(id))
                .map(|&(at, id)| (at + MINUTE_MS, self.charge(id), 0)),
            ext,
            t,
        )
        .unwrap_or(t + MINUTE_MS);
        let (short_tokens, short_requests) = self.short_totals();
        let (short_tokens, short_requests) = if in_short {
            (
                short_tokens.saturating_sub(held),
                short_requests.saturating_sub(1),
            )
        } else {
            (short_tokens, short_requests)
        };
        let short = earliest_room(
            i128::from(short_tokens + ext_tokens + cost) - i128::from(limits.tokens),
            i128::from(short_requests + ext_requests + 1) - i128::from(limits.requests),
            self.short
                .iter()
                .filter(|&&(_, id)| other(id))
                .map(|&(at, id)| (at + limits.window_ms, self.charge(id), 1)),
            ext,
            t,
        )
        .unwrap_or(t + limits.window_ms);
        minute.max(short)
    }

    /// When the 1 s window of sends has room for one more: `t` if it has now.
    fn send_room_at(&self, limits: &WindowLimits, t: u64) -> u64 {
        let sent = self.sent.len() as u64;
        if sent < limits.send_requests {
            return t;
        }
        // The send that must leave the window for one more to fit.
        let index = usize::try_from(sent - limits.send_requests).unwrap_or(0);
        self.sent.get(index).map_or(t, |&at| at + SEND_WINDOW_MS)
    }

    /// Takes entry `id` out of the ledger (a hold a send replaces); its charge leaves both
    /// windows. Answers the charge it had.
    fn release(&mut self, id: u64) -> u64 {
        let Some(charge) = self.charges.remove(&id) else {
            return 0;
        };
        self.settled_at_send.remove(&id);
        self.entries.retain(|&(_, i)| i != id);
        let before = self.short.len();
        self.short.retain(|&(_, i)| i != id);
        if self.short.len() < before {
            self.short_tokens = self.short_tokens.saturating_sub(charge);
        }
        self.minute_tokens = self.minute_tokens.saturating_sub(charge);
        self.reconciled.remove(&id);
        charge
    }

    /// Applies a report of what the deployment has left (see the ledger rules).
    fn observe(&mut self, limits: &WindowLimits, reported: ReportedRemaining, t: u64) {
        let (ext_tokens, ext_requests) = self.external(t);
        let (free_tokens, free_requests) = self.free(limits, t);
        // The external reservation that leaves exactly `remaining` free, if larger.
        let needed = |free: u64, held: u64, remaining: Option<u64>| {
            remaining
                .map(|r| (free + held).saturating_sub(r))
                .filter(|&needed| needed > held)
        };
        let tokens = needed(free_tokens, ext_tokens, reported.tokens);
        let requests = needed(free_requests, ext_requests, reported.requests);
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

/// The first instant at which departures (time, tokens, requests), taken in time order
/// together with the external reservation's `(until, tokens, requests)`, bring both
/// excesses to zero or below; `t` if they already are, `None` if they never do.
fn earliest_room(
    mut excess_tokens: i128,
    mut excess_requests: i128,
    departures: impl Iterator<Item = (u64, u64, u64)>,
    (ext_until, ext_tokens, ext_requests): (u64, u64, u64),
    t: u64,
) -> Option<u64> {
    if excess_tokens <= 0 && excess_requests <= 0 {
        return Some(t);
    }
    let mut external_held = ext_tokens > 0 || ext_requests > 0;
    let mut leave = |at: u64, tokens: u64, requests: u64| {
        excess_tokens -= i128::from(tokens);
        excess_requests -= i128::from(requests);
        (excess_tokens <= 0 && excess_requests <= 0).then_some(at)
    };
    for (at, tokens, requests) in departures {
        if external_held && ext_until <= at {
            external_held = false;
            if let Some(room) = leave(ext_until, ext_tokens, ext_requests) {
                return Some(room);
            }
        }
        if let Some(room) = leave(at, tokens, requests) {
            return Some(room);
        }
    }
    if external_held {
        return leave(ext_until, ext_tokens, ext_requests);
    }
    None
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
            let (free_tokens, free_requests) = s.free(limits, t);
            let fits = cost.0 <= free_tokens && free_requests >= 1;
            if !fits {
                s.deferred += 1;
                return Admission::Deferred {
                    retry_at: EpochMillis(s.room_at(limits, cost.0, t)),
                };
            }
            s.seq += 1;
            s.entries.push_back((t, s.seq));
            s.short.push_back((t, s.seq));
            s.charges.insert(s.seq, cost.0);
            s.minute_tokens += cost.0;
            s.short_tokens += cost.0;
            s.admitted += 1;
            s.reserved_tokens += cost.0;
            Admission::Admitted(Reservation {
                id: ReservationId(s.seq),
                deployment: deployment.clone(),
                tokens: cost,
                admitted_at: EpochMillis(t),
                sent: false,
            })
        })
    }

    async fn admit_send(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        cost: Tokens,
        replacing: Option<ReservationId>,
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
            let hold = replacing.map(|r| r.0);
            let (free_tokens, free_requests) = s.free_without(limits, t, hold);
            let send_room = s.send_room_at(limits, t);
            let fits = cost.0 <= free_tokens && free_requests >= 1 && send_room <= t;
            if !fits {
                s.deferred += 1;
                let room = s.room_at_without(limits, cost.0, t, hold);
                return Admission::Deferred {
                    retry_at: EpochMillis(room.max(send_room)),
                };
            }
            let released = hold.map_or(0, |id| s.release(id));
            if hold.is_none() {
                s.admitted += 1;
            }
            s.refunded_tokens += released;
            s.seq += 1;
            s.entries.push_back((t, s.seq));
            s.short.push_back((t, s.seq));
            s.sent.push_back(t);
            s.charges.insert(s.seq, cost.0);
            s.settled_at_send.insert(s.seq);
            s.minute_tokens += cost.0;
            s.short_tokens += cost.0;
            s.reserved_tokens += cost.0;
            s.used_tokens += cost.0;
            Admission::Admitted(Reservation {
                id: ReservationId(s.seq),
                deployment: deployment.clone(),
                tokens: cost,
                admitted_at: EpochMillis(t),
                sent: true,
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
            let counted = if s.settled_at_send.remove(&id) {
                s.charges.get(&id).copied().unwrap_or(0)
            } else {
                0
            };
            s.used_tokens = (s.used_tokens + used.0).saturating_sub(counted);
            let Some(charge) = s.charges.get_mut(&id) else {
                return Reconciliation::Settled;
            };
            let before = *charge;
            *charge = used.0;
            s.reconciled.insert(id);
            s.minute_tokens = s.minute_tokens - before + used.0;
            if s.in_short_window(id) {
                s.short_tokens = s.short_tokens - before + used.0;
            }
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

    async fn clear_throttle(&self, deployment: &DeploymentName) -> Result<(), LedgerError> {
        self.with_state(deployment, |s| {
            s.cooldown_until = 0;
            s.down_until = 0;
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
            let (window_tokens, window_requests) = s.short_totals();
            LedgerSnapshot {
                window_tokens,
                window_requests,
                minute_tokens: s.minute_tokens,
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
