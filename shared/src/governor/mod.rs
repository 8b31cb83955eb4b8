//! The token governor: admits LLM calls within each deployment's TPM/RPM budget, fleet-wide.
//!
//! # What it mirrors
//! Azure OpenAI charges a call at arrival: its estimated prompt tokens plus `max_tokens`.
//! Quota is per deployment, each deployment's RPM is its model's ratio to the TPM (1 per
//! 1,000 for gpt-4.1, 6 for gpt-4o: [`DeploymentBudget::rpm`]), and requests are evaluated
//! over short windows (1 s or 10 s), so a minute's budget sent in one burst is refused. The
//! governor charges at least what any reading of that estimate counts
//! ([`crate::metering::request_arrival_charge`]: 3/8 token per prompt character plus framing,
//! plus `max_tokens`), keeps a configurable [`Headroom`], charges each call as it is sent
//! (not the billed `usage`, which is not what the limiter counts), gives back what a failed
//! call did not cost ([`Governor::reconcile`]), and turns any worker's 429 into a cooldown every
//! instance respects ([`Governor::report_throttle`]); a Retry-After at or beyond
//! [`GovernorPolicy::down_after`] (a daily quota says 86400 s) marks the deployment down
//! so work spills instead of waiting. What the deployment says it has left
//! (`x-ratelimit-remaining-*`, [`Governor::observe_remaining`]) is the service's own view:
//! when it is less than the window has free (another app shares the deployment, or the
//! service charged more than we estimated), the shortfall is held back as an external
//! reservation until the window has moved on, so the fleet stops admitting what Azure
//! would reject (see [`ledger`] for the rule).
//!
//! # The algorithm: an exact sliding-window log over the minute and a short window
//! Each deployment keeps the log of admissions in the last 60 s with their current
//! charges. The dispatcher admits a call (a *hold*, [`Governor::admit`]); when the tier worker
//! sends it, the call is admitted again at that instant in the hold's place
//! ([`Governor::send`]: the hold's entry leaves the log, the send's enters at the send time), and
//! retries are admitted at their send time too. So every entry of the log that stands for a
//! call sent to Azure carries the instant it was sent, however long the Storage-queue hand-off
//! took. A call is admitted at `t` only if
//! - over the entries admitted in `(t − 60 s, t]`, `charged + cost ≤ L_min = TPM·(1 − h)`
//!   (Azure's per-minute token counter), and
//! - over the entries admitted in `(t − W, t]` (W, the [`ShortWindow`], divides 10 s),
//!   `charged + cost ≤ L_tok = min(L_min, b·L_min·W/60 s)` and
//!   `count + 1 ≤ L_req = RPM·(1 − h)·W/60 s` (Azure's short request window; `b` is the
//!   [`BurstFactor`], so a short window may hold `b` times its even share of tokens,
//!   which keeps calls from fragmenting the window, but never the whole minute's), and
//! - for a send, fewer than `L_send = max(1, RPM·(1 − h)/60)` sends in `(t − 1 s, t]`
//!   (Azure's 1 s evaluation; holds do not count there).
//!
//! Chosen over a token bucket because a bucket of rate `r` and burst `b` lets
//! `b + 60 s·r` through in a minute: to *prove* the minute bound it must run below the
//! quota rate for good, while the window log runs at the full quota rate and its
//! bound is exact (no bucket-boundary slack as with fixed sub-buckets). Its state is
//! bounded by the RPM, a few hundred entries for real deployments.
//!
//! # Proof of the bounds
//! Let `[s, s + L)` be any window of length `L` (60 s, or W) and `e` the last admission
//! in it, at `t_e < s + L`. Every admission `u` in the window has `s ≤ u ≤ t_e`, so
//! `u > t_e − L`: it was in the log when `e` was checked, with a charge at least its
//! final one (charges only drop, by refunds — a reported overrun is the service's
//! usage, not an admission). Hence any 60 s holds at most `L_min = TPM·(1 − h)` charged
//! tokens, and any W at most `L_tok` tokens and `L_req` requests. A 10 s window is the
//! disjoint union of `10 s/W` windows of length `W`, so it holds at most `RPM·(1 − h)/6`
//! requests, and a minute at most `RPM·(1 − h)`. (For a deployment so small that
//! `RPM·(1 − h)·W/60 s < 1`, `L_req` is raised to 1 only if Azure's own `RPM·W/60 s ≥ 1`:
//! never above Azure's limit.) Removing an entry (a hold its send replaces) only lowers what
//! any window holds, so the argument stands with holds in the log; the same argument over the
//! log of sends alone gives at most `L_send` sends in any 1 s. The entries are stamped with the
//! callers' clocks, so these are bounds on send times; Azure sees them shifted by the network
//! latency, which the headroom absorbs. The property tests in `tests/governor_props.rs` check
//! these statements on random arrivals, sizes and completion times, and `tests/strict_metering.rs`
//! checks them on the simulator's own record of a storm replay.
//!
//! A refund frees budget as soon as the call is answered: the request actually sent is
//! usually smaller than its reservation (a group shares one system prompt, a retry may
//! shorten the prompt).
//!
//! State lives behind the [`Ledger`] trait: [`MemoryLedger`] for one process,
//! [`RedisLedger`] for a fleet (one Lua script per operation, atomic across instances).

pub mod budget;
pub mod ledger;
pub mod memory_ledger;
mod overrides;
pub mod redis_ledger;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use budget::{BurstFactor, DeploymentBudget, ShortWindow, WindowLimits};
pub use ledger::{
    Admission, ExternalUsage, Ledger, LedgerError, LedgerSnapshot, Reconciliation,
    ReportedRemaining, Reservation, ReservationId, ThrottleKind,
};
pub use memory_ledger::MemoryLedger;
pub use redis_ledger::RedisLedger;

use crate::clock::EpochMillis;
use crate::deployment_name::DeploymentName;
use crate::headroom::Headroom;
use crate::job::Tier;
use crate::tokens::Tokens;

/// A throttle hint this long or longer means the deployment is down (a daily quota says
/// 86400 s), not cooling down. The governor ([`GovernorPolicy::down_after`]) and the retry
/// layer ([`crate::retry::RetryPolicy::down_threshold`]) both default to it, so a deployment
/// the retry layer gives up on is also one the governor stops admitting to.
pub const DOWN_AFTER: Duration = Duration::from_secs(600);

/// How the governor treats every deployment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GovernorPolicy {
    /// Fraction of each quota left unused (`STORMGATE_GOVERNOR_HEADROOM`).
    pub headroom: Headroom,
    /// The sliding window admissions are counted over, in milliseconds.
    pub window: ShortWindow,
    /// How many even shares of the minute's tokens one short window may hold.
    pub burst: BurstFactor,
    /// A Retry-After this long or longer marks the deployment down instead of cooling it down.
    #[serde(with = "crate::duration_secs")]
    pub down_after: Duration,
}

impl Default for GovernorPolicy {
    fn default() -> Self {
        GovernorPolicy {
            headroom: Headroom::DEFAULT,
            window: ShortWindow::DEFAULT,
            burst: BurstFactor::DEFAULT,
            down_after: DOWN_AFTER,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GovernorError {
    #[error("no budget configured for deployment {0}")]
    UnknownDeployment(DeploymentName),
    #[error("no deployment configured for tier {0}")]
    UnknownTier(Tier),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// What a 429 did to its deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Throttle {
    CoolingDown { until: EpochMillis },
    Down { until: EpochMillis },
}

/// One deployment's gauges: limits and the fleet-wide ledger state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentGauges {
    pub tier: Tier,
    pub deployment: DeploymentName,
    pub limits: WindowLimits,
    pub remaining_tokens: u64,
    pub remaining_requests: u64,
    #[serde(flatten)]
    pub ledger: LedgerSnapshot,
}

/// A deployment's sliding minute as the governor counts it ([`Governor::minute_use`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinuteUse {
    /// Tokens charged to the last 60 s, plus any external reservation.
    pub tokens: u64,
    /// The governor's minute budget: TPM × (1 − headroom).
    pub budget: u64,
    /// Cooling down or down after a throttle.
    pub throttled: bool,
}

impl MinuteUse {
    /// The share of the budget in use (1 when the budget is zero).
    pub fn share(&self) -> f64 {
        if self.budget == 0 {
            1.0
        } else {
            self.tokens as f64 / self.budget as f64
        }
    }
}

#[derive(Debug, Clone)]
struct Configured {
    budget: DeploymentBudget,
    limits: WindowLimits,
}

/// Per-deployment admission over a shared [`Ledger`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Governor {
    ledger: Arc<dyn Ledger>,
    policy: GovernorPolicy,
    deployments: BTreeMap<DeploymentName, Configured>,
    /// Deployments an operator marked down, until when (see [`Governor::with_controls`]).
    marked_down: BTreeMap<DeploymentName, EpochMillis>,
}

impl Governor {
    pub fn new(
        ledger: Arc<dyn Ledger>,
        policy: GovernorPolicy,
        budgets: impl IntoIterator<Item = DeploymentBudget>,
    ) -> Self {
        let deployments = budgets
            .into_iter()
            .map(|budget| {
                let limits =
                    WindowLimits::for_budget(&budget, policy.headroom, policy.window, policy.burst);
                (budget.deployment.clone(), Configured { budget, limits })
            })
            .collect();
        Governor {
            ledger,
            policy,
            deployments,
            marked_down: BTreeMap::new(),
        }
    }

    pub fn policy(&self) -> &GovernorPolicy {
        &self.policy
    }

    /// The deployment serving `tier`, if any.
    pub fn deployment_for(&self, tier: Tier) -> Option<&DeploymentName> {
        self.deployments
            .values()
            .find(|c| c.budget.tier == tier)
            .map(|c| &c.budget.deployment)
    }

    pub fn limits(&self, deployment: &DeploymentName) -> Option<WindowLimits> {
        self.deployments.get(deployment).map(|c| c.limits)
    }

    fn configured(&self, deployment: &DeploymentName) -> Result<&Configured, GovernorError> {
        self.deployments
            .get(deployment)
            .ok_or_else(|| GovernorError::UnknownDeployment(deployment.clone()))
    }

    /// Admits one call charging `cost` (estimated prompt tokens + max_tokens) at `now`.
    pub async fn admit(
        &self,
        deployment: &DeploymentName,
        cost: Tokens,
        now: EpochMillis,
    ) -> Result<Admission, GovernorError> {
        let limits = self.configured(deployment)?.limits;
        if cost > limits.largest_call() || limits.requests == 0 {
            return Ok(Admission::TooLarge {
                tokens: cost,
                limit: limits.largest_call(),
            });
        }
        if let Some(&until) = self.marked_down.get(deployment)
            && until > now
        {
            return Ok(Admission::Down { until });
        }
        let admission = self.ledger.admit(deployment, &limits, cost, now).await?;
        if let Admission::Deferred { retry_at } = admission {
            tracing::debug!(
                event = "governor.deferred",
                deployment = %deployment,
                tokens = cost.0,
                retry_at = retry_at.0,
            );
        }
        Ok(admission)
    }

    /// Admits the call that is about to be sent, now, charging `cost` (the estimate of the request
    /// exactly as sent), in place of `replacing` (the dispatcher's hold for it, if any): the call
    /// takes the hold's place in the windows at the instant it goes out, and no more than
    /// [`WindowLimits::send_requests`] calls go out in any second (see the module docs).
    pub async fn send(
        &self,
        deployment: &DeploymentName,
        cost: Tokens,
        replacing: Option<&Reservation>,
        now: EpochMillis,
    ) -> Result<Admission, GovernorError> {
        let limits = self.configured(deployment)?.limits;
        if cost > limits.largest_call() || limits.requests == 0 {
            return Ok(Admission::TooLarge {
                tokens: cost,
                limit: limits.largest_call(),
            });
        }
        let replacing = replacing
            .filter(|hold| &hold.deployment == deployment)
            .map(|hold| hold.id);
        Ok(self
            .ledger
            .admit_send(deployment, &limits, cost, replacing, now)
            .await?)
    }

    /// Settles a reservation with what the deployment's limiter charged the call (its
    /// arrival estimate of the request sent); `Tokens::ZERO` when the call was never made.
    pub async fn reconcile(
        &self,
        reservation: &Reservation,
        used: Tokens,
    ) -> Result<Reconciliation, GovernorError> {
        self.configured(&reservation.deployment)?;
        if reservation.sent && used == reservation.tokens {
            // A send's charge is counted as it goes out: settling it at that charge changes
            // nothing, so an admitted job costs the ledger two round trips, its hold and its send.
            return Ok(Reconciliation::Settled);
        }
        Ok(self.ledger.reconcile(reservation, used).await?)
    }

    /// Records a 429 from `deployment` asking to wait `retry_after`, for every instance.
    pub async fn report_throttle(
        &self,
        deployment: &DeploymentName,
        retry_after: Duration,
        now: EpochMillis,
    ) -> Result<Throttle, GovernorError> {
        self.configured(deployment)?;
        let kind = if retry_after >= self.policy.down_after {
            ThrottleKind::Down
        } else {
            ThrottleKind::CoolingDown
        };
        let until = self
            .ledger
            .throttle(deployment, kind, now.plus(retry_after))
            .await?;
        let throttle = match kind {
            ThrottleKind::CoolingDown => Throttle::CoolingDown { until },
            ThrottleKind::Down => Throttle::Down { until },
        };
        tracing::warn!(
            event = "governor.throttled",
            deployment = %deployment,
            retry_after_ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX),
            state = ?kind,
            until = until.0,
        );
        Ok(throttle)
    }

    /// Records what `deployment` reported it has left at `now` (its
    /// `x-ratelimit-remaining-*` headers); a report of less than the window has free
    /// holds the shortfall back from admissions until the window has moved on.
    pub async fn observe_remaining(
        &self,
        deployment: &DeploymentName,
        reported: ReportedRemaining,
        now: EpochMillis,
    ) -> Result<ExternalUsage, GovernorError> {
        let limits = self.configured(deployment)?.limits;
        if reported.is_empty() {
            return Ok(ExternalUsage::default());
        }
        let external = self
            .ledger
            .observe_remaining(deployment, &limits, reported, now)
            .await?;
        if external.until.is_some() {
            tracing::debug!(
                event = "governor.external_usage",
                deployment = %deployment,
                reported_tokens = reported.tokens,
                reported_requests = reported.requests,
                held_tokens = external.tokens,
                held_requests = external.requests,
                until = external.until.map_or(0, |t| t.0),
            );
        }
        Ok(external)
    }

    /// How much of its minute `deployment` has spent at `now`: the tokens its sliding
    /// minute holds (with any external reservation) against the governor's budget for it,
    /// and whether it is cooling down or down. One ledger read.
    pub async fn minute_use(
        &self,
        deployment: &DeploymentName,
        now: EpochMillis,
    ) -> Result<MinuteUse, GovernorError> {
        let limits = self.configured(deployment)?.limits;
        let ledger = self.ledger.snapshot(deployment, &limits, now).await?;
        let throttled = [ledger.cooldown_until, ledger.down_until]
            .into_iter()
            .flatten()
            .any(|until| until > now);
        Ok(MinuteUse {
            tokens: ledger.minute_tokens + ledger.external.tokens,
            budget: limits.minute_tokens,
            throttled,
        })
    }

    /// Gauges of every configured deployment, tier order.
    pub async fn gauges(&self, now: EpochMillis) -> Result<Vec<DeploymentGauges>, GovernorError> {
        let mut out = Vec::with_capacity(self.deployments.len());
        for c in self.deployments.values() {
            let ledger = self
                .ledger
                .snapshot(&c.budget.deployment, &c.limits, now)
                .await?;
            out.push(DeploymentGauges {
                tier: c.budget.tier,
                deployment: c.budget.deployment.clone(),
                limits: c.limits,
                remaining_tokens: c
                    .limits
                    .tokens
                    .saturating_sub(ledger.window_tokens)
                    .saturating_sub(ledger.external.tokens)
                    .min(
                        c.limits
                            .minute_tokens
                            .saturating_sub(ledger.minute_tokens)
                            .saturating_sub(ledger.external.tokens),
                    ),
                remaining_requests: c
                    .limits
                    .requests
                    .saturating_sub(ledger.window_requests)
                    .saturating_sub(ledger.external.requests),
                ledger,
            });
        }
        out.sort_by_key(|g| g.tier);
        Ok(out)
    }
}
