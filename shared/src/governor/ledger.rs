//! The ledger: where admission state lives, behind one trait with two backends.
//!
//! [`MemoryLedger`](super::memory_ledger::MemoryLedger) serves one process (tests, the
//! storm lab); [`RedisLedger`](super::redis_ledger::RedisLedger) serves a fleet, each
//! operation one atomic Lua script. Both implement exactly the rules below, and one
//! conformance suite runs against both.
//!
//! Rules, per deployment:
//! - The ledger runs on its own timeline: `t = max(now, latest now seen)`, so a caller
//!   whose clock lags cannot slip an admission into a window that was already closed.
//! - A deployment marked down (until `d > t`) answers `Down`; else one cooling down
//!   (until `c > t`) answers `CoolingDown`.
//! - Otherwise the call is admitted iff, over the entries admitted in `(t − 60 s, t]`,
//!   `charged + cost ≤ limits.minute_tokens`, and over those admitted in `(t − W, t]`,
//!   `charged + cost ≤ limits.tokens` and `count + 1 ≤ limits.requests`; admitting
//!   records `(t, cost)`. Else it answers `Deferred` at the first instant at which the
//!   expiry of the oldest entries would make room in both (ignoring future refunds):
//!   both conditions only get easier as entries leave, so that instant is the later of
//!   the two windows' own.
//! - Reconciling a reservation still in the window sets its charge to what the call was
//!   charged (a refund when smaller). Reconciling twice is a no-op the second time.
//! - External usage: the deployment itself reports what it has left
//!   (`x-ratelimit-remaining-tokens` / `-requests`). When it reports fewer tokens (or
//!   requests) than the ledger has free — tokens: the smaller of the short window's and
//!   the minute's `limit − charged − external`; requests: the short window's — the
//!   shortfall is added to the external reservation, so that exactly what the deployment
//!   reported is free; the reservation (tokens and requests) then lasts until `t + W`.
//!   Another app sharing the deployment, or the service charging more than we estimate,
//!   is thereby held back until the window has moved on. A report of as much or more
//!   changes nothing: the window's own limits stay the bound. While it lasts, the
//!   external reservation counts in every admission, in the minute and the short window
//!   alike (`charged + external + cost ≤ limit`, `count + external + 1 ≤ limit`), and a
//!   deferral's `retry_at` accounts for its release at its end.
//! - Sending: the call an admission pays for takes its place in the windows at the instant it
//!   is sent ([`Ledger::admit_send`]). A send is admitted under the same rules, computed as if
//!   the reservation it replaces (the dispatcher's hold, if any, still in the window) were gone,
//!   plus one more: fewer than `limits.send_requests` sends in `(t − 1 s, t]`. Admitting it
//!   removes the replaced entry (its charge leaves both windows) and records `(t, cost)` as a
//!   sent entry; a deferral leaves the replaced entry where it was, and its `retry_at` also
//!   waits for the 1 s window. Holds never count in the 1 s window: only sends do. A send's
//!   charge counts as used at once; reconciling it later (a failed call, given back) adjusts
//!   the charge and the used total by the difference, once.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::budget::WindowLimits;
use crate::clock::EpochMillis;
use crate::deployment_name::DeploymentName;
use crate::tokens::Tokens;

/// A reservation's number, unique per deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ReservationId(pub u64);

/// Proof of admission: travels with the admitted group to the tier worker, which
/// reconciles it with what the limiter charged the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub id: ReservationId,
    pub deployment: DeploymentName,
    /// Charged at admission: estimated prompt tokens + max_tokens.
    pub tokens: Tokens,
    /// On the ledger's timeline.
    pub admitted_at: EpochMillis,
    /// A send ([`Ledger::admit_send`]): its charge counts as used already, so settling it at
    /// that same charge changes nothing and needs no round trip to the ledger.
    #[serde(default)]
    pub sent: bool,
}

/// What the ledger answers for one admission request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Admission {
    Admitted(Reservation),
    /// The window is spent; room appears at `retry_at` unless someone else takes it.
    Deferred {
        retry_at: EpochMillis,
    },
    /// A 429 set a cooldown on this deployment.
    CoolingDown {
        until: EpochMillis,
    },
    /// A huge Retry-After (daily quota) took the deployment out until then.
    Down {
        until: EpochMillis,
    },
    /// Larger than any window can ever hold: it will never be admitted here.
    TooLarge {
        tokens: Tokens,
        limit: Tokens,
    },
}

/// What reconciling a reservation did to the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "tokens", rename_all = "snake_case")]
pub enum Reconciliation {
    /// The unused part went back into the window.
    Refunded(Tokens),
    /// The call used more than reserved; the excess is charged to the window.
    Overran(Tokens),
    /// The reservation already left the window (or was reconciled before): nothing to adjust.
    Settled,
}

/// Which kind of throttle a 429 sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThrottleKind {
    CoolingDown,
    Down,
}

/// What a deployment reported it has left (`x-ratelimit-remaining-*`); `None` when
/// the header was absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReportedRemaining {
    pub tokens: Option<u64>,
    pub requests: Option<u64>,
}

impl ReportedRemaining {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_none() && self.requests.is_none()
    }
}

/// The external reservation a deployment's own report set: budget the window holds
/// back until `until` (zeros and no `until` when none is active).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExternalUsage {
    pub tokens: u64,
    pub requests: u64,
    pub until: Option<EpochMillis>,
}

/// A deployment's ledger state, fleet-wide, for gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LedgerSnapshot {
    /// Tokens charged to the current short window (reservations, refunds applied).
    pub window_tokens: u64,
    pub window_requests: u64,
    /// Tokens charged to the last 60 s.
    pub minute_tokens: u64,
    pub cooldown_until: Option<EpochMillis>,
    pub down_until: Option<EpochMillis>,
    /// The external reservation in force (see the module docs).
    pub external: ExternalUsage,
    /// Cumulative since the ledger was created.
    pub admitted: u64,
    pub deferred: u64,
    pub reserved_tokens: u64,
    pub used_tokens: u64,
    pub refunded_tokens: u64,
    pub throttles: u64,
    /// Reports of less remaining than the window had free.
    pub shortfalls: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("governor ledger unavailable: {0}")]
    Unavailable(String),
    #[error("governor ledger answered something unexpected: {0}")]
    Corrupt(String),
}

impl From<redis::RedisError> for LedgerError {
    fn from(e: redis::RedisError) -> Self {
        LedgerError::Unavailable(e.to_string())
    }
}

/// Admission state for any number of deployments. See the module docs for the rules.
#[async_trait]
pub trait Ledger: Send + Sync + std::fmt::Debug {
    /// Admits a call costing `cost` now, or says why not. Never answers `TooLarge`
    /// (the governor checks that before asking).
    async fn admit(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        cost: Tokens,
        now: EpochMillis,
    ) -> Result<Admission, LedgerError>;

    /// Admits the call that is about to be sent, now, in place of `replacing` (the dispatcher's
    /// hold for it, when there is one): see the module docs. Never answers `TooLarge`.
    async fn admit_send(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        cost: Tokens,
        replacing: Option<ReservationId>,
        now: EpochMillis,
    ) -> Result<Admission, LedgerError>;

    /// Sets a reservation's charge to what the call was charged.
    async fn reconcile(
        &self,
        reservation: &Reservation,
        used: Tokens,
    ) -> Result<Reconciliation, LedgerError>;

    /// Extends (never shortens) the deployment's cooldown or down time to `until`;
    /// answers the resulting until.
    async fn throttle(
        &self,
        deployment: &DeploymentName,
        kind: ThrottleKind,
        until: EpochMillis,
    ) -> Result<EpochMillis, LedgerError>;

    /// Records what the deployment reported it has left at `now`; answers the external
    /// reservation in force afterwards.
    async fn observe_remaining(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        reported: ReportedRemaining,
        now: EpochMillis,
    ) -> Result<ExternalUsage, LedgerError>;

    async fn snapshot(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        now: EpochMillis,
    ) -> Result<LedgerSnapshot, LedgerError>;

    /// Ends the deployment's cooldown and down time now (an operator marked it up: the
    /// quota is back before the Retry-After said). The throttle count is kept.
    async fn clear_throttle(&self, deployment: &DeploymentName) -> Result<(), LedgerError>;
}
