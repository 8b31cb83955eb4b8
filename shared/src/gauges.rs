//! Operational gauges: queue depth and oldest age per tier and severity, and per
//! deployment the tokens reserved, used and remaining, admissions, deferrals and
//! cooldowns; emitted as structured `tracing` events with stable field names.
//!
//! Events (target `stormgate::gauges`, level INFO), one per line in JSON logs:
//! - `event="queue"`: `tier`, `pending`, `held` (queued on a coalescing hold, not in
//!   `pending`), `leased`, `oldest_age_ms`, and per severity
//!   `p1_pending`…`p5_pending`, `p1_oldest_age_ms`…`p5_oldest_age_ms` (-1 when empty);
//! - `event="deployment"`: `tier`, `deployment`, `window_tokens`, `window_requests`, `minute_tokens`,
//!   `remaining_tokens`, `remaining_requests`, `limit_tokens`, `limit_requests`,
//!   `admitted_total`, `deferred_total`, `reserved_tokens_total`, `used_tokens_total`,
//!   `refunded_tokens_total`, `throttles_total`, `cooldown_until_ms`, `down_until_ms`
//!   (0 when not throttled), `external_tokens`, `external_requests` (held back because
//!   the deployment reported less remaining than the window had free) and
//!   `shortfalls_total` (such reports);
//! - `event="dispatch"` (from [`crate::dispatcher`]): the tick's counters.

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::governor::{DeploymentGauges, Governor, GovernorError};
use crate::job::Tier;
use crate::severity::Severity;
use crate::store::{QueueStats, Store, StoreError};

/// The tracing target every gauge event is logged under.
pub const TARGET: &str = "stormgate::gauges";

/// One severity's share of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeverityGauge {
    pub severity: Severity,
    pub pending: u64,
    pub oldest_age_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueGauge {
    pub tier: Tier,
    pub pending: u64,
    #[serde(default)]
    pub held: u64,
    pub leased: u64,
    pub oldest_age_ms: Option<u64>,
    pub by_severity: Vec<SeverityGauge>,
}

impl QueueGauge {
    pub fn from_stats(tier: Tier, stats: &QueueStats, now: EpochMillis) -> Self {
        let age = |t: Option<EpochMillis>| t.map(|t| now.0.saturating_sub(t.0));
        QueueGauge {
            tier,
            pending: stats.pending,
            held: stats.held,
            leased: stats.leased,
            oldest_age_ms: age(stats.oldest_enqueued_at),
            by_severity: Severity::ALL
                .iter()
                .map(|&severity| SeverityGauge {
                    severity,
                    pending: stats.pending_by_severity[severity.index()],
                    oldest_age_ms: age(stats.oldest_by_severity[severity.index()]),
                })
                .collect(),
        }
    }
}

/// A snapshot of every queue and deployment at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gauges {
    pub at: EpochMillis,
    pub queues: Vec<QueueGauge>,
    pub deployments: Vec<DeploymentGauges>,
}

#[derive(Debug, thiserror::Error)]
pub enum GaugeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Governor(#[from] GovernorError),
}

impl Gauges {
    /// Reads the LLM tiers' queues and every configured deployment.
    pub async fn collect(
        store: &dyn Store,
        governor: &Governor,
        now: EpochMillis,
    ) -> Result<Gauges, GaugeError> {
        let mut queues = Vec::with_capacity(Tier::LLM.len());
        for tier in Tier::LLM {
            queues.push(QueueGauge::from_stats(
                tier,
                &store.queue_stats(tier).await?,
                now,
            ));
        }
        Ok(Gauges {
            at: now,
            queues,
            deployments: governor.gauges(now).await?,
        })
    }

    /// Logs one event per queue and per deployment.
    pub fn emit(&self) {
        for q in &self.queues {
            emit_queue(q);
        }
        for d in &self.deployments {
            emit_deployment(d);
        }
    }
}

fn signed(v: Option<u64>) -> i64 {
    v.map_or(-1, |v| i64::try_from(v).unwrap_or(i64::MAX))
}

fn emit_queue(q: &QueueGauge) {
    let s = |i: usize| q.by_severity.get(i).copied();
    let pending = |i: usize| s(i).map_or(0, |g| g.pending);
    let oldest = |i: usize| signed(s(i).and_then(|g| g.oldest_age_ms));
    tracing::info!(
        target: TARGET,
        event = "queue",
        tier = q.tier.as_str(),
        pending = q.pending,
        held = q.held,
        leased = q.leased,
        oldest_age_ms = signed(q.oldest_age_ms),
        p1_pending = pending(0),
        p2_pending = pending(1),
        p3_pending = pending(2),
        p4_pending = pending(3),
        p5_pending = pending(4),
        p1_oldest_age_ms = oldest(0),
        p2_oldest_age_ms = oldest(1),
        p3_oldest_age_ms = oldest(2),
        p4_oldest_age_ms = oldest(3),
        p5_oldest_age_ms = oldest(4),
    );
}

fn emit_deployment(d: &DeploymentGauges) {
    tracing::info!(
        target: TARGET,
        event = "deployment",
        tier = d.tier.as_str(),
        deployment = d.deployment.as_str(),
        window_tokens = d.ledger.window_tokens,
        window_requests = d.ledger.window_requests,
        minute_tokens = d.ledger.minute_tokens,
        remaining_tokens = d.remaining_tokens,
        remaining_requests = d.remaining_requests,
        limit_tokens = d.limits.tokens,
        limit_requests = d.limits.requests,
        admitted_total = d.ledger.admitted,
        deferred_total = d.ledger.deferred,
        reserved_tokens_total = d.ledger.reserved_tokens,
        used_tokens_total = d.ledger.used_tokens,
        refunded_tokens_total = d.ledger.refunded_tokens,
        throttles_total = d.ledger.throttles,
        external_tokens = d.ledger.external.tokens,
        external_requests = d.ledger.external.requests,
        shortfalls_total = d.ledger.shortfalls,
        cooldown_until_ms = d.ledger.cooldown_until.map_or(0, |t| t.0),
        down_until_ms = d.ledger.down_until.map_or(0, |t| t.0),
    );
}
