//! The signal lines: what [`super::catalog`] lists, logged as structured `tracing` events
//! under the gauges' target. Alert rules query these names; change one only together
//! with the catalog (a test holds the two together).

use super::PartitionLag;
use super::status::Status;
use crate::controls::AuditEntry;
use crate::gauges::TARGET;

/// -1 for none: log fields stay numbers, so a query can compare them.
fn signed(v: Option<u64>) -> i64 {
    v.map_or(-1, |v| i64::try_from(v).unwrap_or(i64::MAX))
}

/// The status's gauges: one line per severity and per deployment, Redis memory and the
/// verdict. The `dispatch` tick logs them.
pub fn status(status: &Status) {
    for s in &status.severities {
        tracing::info!(
            target: TARGET,
            event = "severity",
            severity = s.severity.as_str(),
            queued = s.queued,
            held = s.held,
            in_flight = s.in_flight,
            oldest_age_ms = signed(s.oldest_age_ms),
            oldest_allowed_ms = signed(s.oldest_allowed_ms),
            deadline_ms = s.deadline_ms,
            behind_ms = s.behind_ms,
        );
    }
    for d in &status.deployments {
        tracing::info!(
            target: TARGET,
            event = "deployment_status",
            tier = d.tier.as_str(),
            deployment = d.deployment.as_str(),
            state = d.state.name(),
            down = d.state.is_down(),
            tpm = d.tpm,
            rpm = d.rpm,
            minute_tokens = d.minute_tokens,
            minute_token_limit = d.minute_token_limit,
            requests_per_minute = d.requests_per_minute,
            throttles_per_minute = d.throttles_per_minute,
            throttles_total = d.throttles_total,
            spilled_per_minute = d.spilled_per_minute,
            prompt_tokens_today = d.today.prompt_tokens,
            completion_tokens_today = d.today.completion_tokens,
            spend_today_usd = d.today.spend_usd,
            paused = d.paused,
            extractive_only = d.extractive_only,
        );
    }
    if let Some(redis) = status.redis {
        tracing::info!(
            target: TARGET,
            event = "redis",
            used_memory = redis.used_memory,
            maxmemory = redis.maxmemory,
            used_memory_percent = signed(redis.used_memory_percent),
        );
    }
    tracing::info!(
        target: TARGET,
        event = "verdict",
        verdict_level = status.verdict.level.as_str(),
        verdict_text = status.verdict.text.as_str(),
    );
}

/// What one `classify` batch settled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IngestCounts {
    pub events: u64,
    pub accepted: u64,
    pub duplicate_or_stale: u64,
    pub skipped: u64,
    pub dead_lettered: u64,
    /// Records without a Kafka timestamp the product could read (no lag sample).
    pub unstamped: u64,
}

/// A `classify` batch's counts and its partitions' lag.
pub fn ingest(counts: &IngestCounts, lags: &[PartitionLag]) {
    tracing::info!(
        target: TARGET,
        event = "ingest",
        events = counts.events,
        accepted = counts.accepted,
        duplicate_or_stale = counts.duplicate_or_stale,
        skipped = counts.skipped,
        dead_lettered = counts.dead_lettered,
        unstamped = counts.unstamped,
    );
    for lag in lags {
        tracing::info!(
            target: TARGET,
            event = "consumer_lag",
            topic = lag.topic.as_str(),
            partition = lag.partition,
            records = lag.records,
            lag_p50_ms = lag.p50_ms,
            lag_max_ms = lag.max_ms,
        );
    }
}

/// Summaries `tier` stored that settled jobs in one invocation, by kind.
pub fn stored(tier: crate::job::Tier, technician: u64, customer: u64, rollup: u64) {
    tracing::info!(
        target: TARGET,
        event = "stored",
        tier = tier.as_str(),
        technician,
        customer,
        rollup,
    );
}

/// An operator's action, as audited.
pub fn control(entry: &AuditEntry) {
    tracing::info!(
        target: TARGET,
        event = "control",
        action = entry.action.as_str(),
        control_target = entry.target.as_str(),
        by = entry.by.as_str(),
        detail = entry.detail.as_str(),
        source = entry.source.as_str(),
    );
}
