//! What each function adds to the signal series ([`stormgate_shared::signals`]) and the
//! signal lines it logs: `classify` its batch's counts and consumer lag, the tier
//! functions the summaries they stored and what the deployments billed, `dispatch` the
//! jobs it settled and spilled, what the sinks took, and the status gauges of the tick.
//!
//! Recording is best effort: a batch that is stored, or a tick whose messages are built,
//! must not fail because its signals could not be written (failing it would redeliver a
//! batch already stored and count it twice). A failure is logged as a warning, and the
//! gap shows in the series.

use stormgate_shared::clock::EpochMillis;
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::ingest::BatchOutcome;
use stormgate_shared::job::{JobId, Tier};
use stormgate_shared::llm::Usage;
use stormgate_shared::signals::collect::{StatusInputs, collect};
use stormgate_shared::signals::emit::{self, IngestCounts};
use stormgate_shared::signals::lag;
use stormgate_shared::signals::series::field;
use stormgate_shared::signals::status::{AUDIT_SHOWN, Status};
use stormgate_shared::signals::{SignalBatch, SignalStore};

use stormgate_shared::controls::ControlState;
use stormgate_shared::dispatcher::DispatchOutcome;
use stormgate_shared::governor::Governor;
use stormgate_shared::job::SummaryKind;
use stormgate_shared::store::Store;
use stormgate_shared::summarize::{SummarizeOutcome, SummarySource};

use crate::deliveries::{self, SinkReport};
use crate::error::ApiError;
use crate::invocation::KafkaEvent;
use crate::state::AppState;

/// Adds `batch` to the series; a failure is logged, never returned.
pub async fn record(signals: &dyn SignalStore, batch: &SignalBatch) {
    if batch.is_empty() {
        return;
    }
    if let Err(error) = signals.record(batch).await {
        tracing::warn!(%error, "signals not recorded");
    }
}

impl KafkaEvent {
    /// The record's Kafka timestamp. The trigger passes `KafkaEventData.Timestamp`, the
    /// message's `Timestamp.UtcDateTime` (a .NET `DateTime` of kind UTC, serialized as
    /// ISO 8601 with a `Z`); a timestamp without offset is read as UTC, a number as epoch
    /// milliseconds. `None` when absent or unreadable.
    pub fn timestamp_millis(&self) -> Option<EpochMillis> {
        match self.timestamp.as_ref()? {
            serde_json::Value::String(text) => parse_timestamp(text),
            serde_json::Value::Number(n) => n.as_u64().map(EpochMillis),
            _ => None,
        }
    }
}

fn parse_timestamp(text: &str) -> Option<EpochMillis> {
    let text = text.trim();
    let millis = match text.parse::<jiff::Timestamp>() {
        Ok(ts) => ts.as_millisecond(),
        Err(_) => text
            .parse::<jiff::civil::DateTime>()
            .ok()?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp()
            .as_millisecond(),
    };
    u64::try_from(millis).ok().map(EpochMillis)
}

/// The consumer lag of one batch's records, measured at one instant.
#[derive(Debug)]
pub struct LagSamples {
    now: EpochMillis,
    pub samples: lag::LagSamples,
}

impl LagSamples {
    pub fn at(now: EpochMillis) -> LagSamples {
        LagSamples {
            now,
            samples: lag::LagSamples::default(),
        }
    }

    pub fn now(&self) -> EpochMillis {
        self.now
    }

    /// One record of the batch.
    pub fn add(&mut self, event: &KafkaEvent) {
        self.samples.add(
            event.topic.as_deref(),
            event.partition,
            event.timestamp_millis(),
            self.now,
        );
    }
}

/// A successful `classify` batch: its counts and its partitions' lag, logged and recorded.
pub async fn classify(
    signals: &dyn SignalStore,
    now: EpochMillis,
    outcome: &BatchOutcome,
    lags: &lag::LagSamples,
) {
    let counts = IngestCounts {
        events: u64::from(outcome.accepted)
            + u64::from(outcome.duplicate_or_stale)
            + u64::from(outcome.dead_lettered)
            + u64::from(outcome.skipped.total()),
        accepted: outcome.accepted.into(),
        duplicate_or_stale: outcome.duplicate_or_stale.into(),
        skipped: outcome.skipped.total().into(),
        dead_lettered: outcome.dead_lettered.into(),
        unstamped: lags.unstamped,
    };
    let partitions = lags.per_partition(now);
    emit::ingest(&counts, &partitions);
    let mut batch = SignalBatch::at(now);
    batch
        .count(field::EVENTS, counts.events)
        .count(field::ACCEPTED, counts.accepted)
        .count(field::SKIPPED, counts.skipped)
        .count(field::DEAD_LETTERED, counts.dead_lettered);
    lags.record_into(&mut batch);
    record(signals, &batch).await;
}

/// One `dispatch` tick: the status it leaves (logged as signal lines, its gauges into the
/// series), the jobs it settled with the extractive summary, those it spilled, what the
/// sinks took, and the fleet's configuration for readers without the settings.
pub async fn dispatch_tick(
    state: &AppState,
    store: &dyn Store,
    controls: &ControlState,
    governor: &Governor,
    outcome: &DispatchOutcome,
    summarized: &[JobId],
    sinks: &SinkReport,
) {
    let now = state.clock.now();
    let mut batch = match current_status(state, store, controls, governor, now).await {
        Ok(status) => {
            emit::status(&status);
            status.gauge_batch()
        }
        Err(error) => {
            tracing::warn!(%error, "status not read this tick: its gauges are missing from the series");
            SignalBatch::at(now)
        }
    };
    stored(&mut batch, Tier::Extractive, summarized);
    for group in &outcome.spilled {
        batch.count(
            field::spilled(group.from, group.to),
            group.leases.len() as u64,
        );
    }
    delivered(&mut batch, sinks);
    batch.config = Some(state.fleet_config());
    record(state.signals.as_ref(), &batch).await;
}

/// One tier invocation: the summaries it stored (the LLM's under its tier, fallbacks
/// under the extractive one), what its deployment billed, what the sinks took.
pub async fn summarized(
    state: &AppState,
    tier: Tier,
    deployment: &str,
    outcome: &SummarizeOutcome,
    sinks: &SinkReport,
) {
    let mut batch = SignalBatch::at(state.clock.now());
    let (mut by_llm, mut by_fallback) = (Vec::new(), Vec::new());
    for (job, source) in &outcome.summaries {
        let Some(id) = parse_job_id(job) else {
            continue;
        };
        match source {
            SummarySource::Llm => by_llm.push(id),
            SummarySource::Extractive { .. } => by_fallback.push(id),
        }
    }
    stored(&mut batch, tier, &by_llm);
    stored(&mut batch, Tier::Extractive, &by_fallback);
    match deployment.parse::<DeploymentName>() {
        Ok(name) => billed(
            &mut batch,
            &name,
            outcome.billed,
            outcome.calls.len() as u64,
        ),
        Err(error) => tracing::warn!(%error, "billed usage not recorded"),
    }
    delivered(&mut batch, sinks);
    record(state.signals.as_ref(), &batch).await;
}

/// Summaries stored by `tier` for these jobs: counted by kind in the series, and logged
/// as a `stored` line when there are any.
pub fn stored<'a>(batch: &mut SignalBatch, tier: Tier, jobs: impl IntoIterator<Item = &'a JobId>) {
    let mut counts = [0u64; 2];
    for id in jobs {
        batch.count(field::stored(tier, id.kind), 1);
        counts[kind_index(id.kind)] += 1;
    }
    if counts.iter().any(|&n| n > 0) {
        // Roll-ups are not jobs: the event's `rollup` field, which dashboards read, is 0.
        emit::stored(tier, counts[0], counts[1], 0);
    }
}

fn kind_index(kind: SummaryKind) -> usize {
    match kind {
        SummaryKind::Technician => 0,
        SummaryKind::Customer => 1,
    }
}

/// A job id as [`JobId`]'s `Display` writes it (`<sys_id>:<version>:<kind>`).
fn parse_job_id(text: &str) -> Option<JobId> {
    let mut parts = text.splitn(3, ':');
    Some(JobId {
        ticket: parts.next()?.parse().ok()?,
        version: parts.next()?.parse().ok()?,
        kind: parts.next()?.parse().ok()?,
    })
}

/// What the sinks took in an invocation.
pub fn delivered(batch: &mut SignalBatch, sinks: &SinkReport) {
    batch
        .count(field::NOTICES_DELIVERED, sinks.notices.published)
        .count(field::WORK_NOTES_DELIVERED, sinks.work_notes.delivered);
}

/// What a deployment billed for an invocation's calls (its answers' `usage`), and the
/// calls made.
pub fn billed(batch: &mut SignalBatch, deployment: &DeploymentName, usage: Usage, calls: u64) {
    batch
        .usage(field::prompt_tokens(deployment), usage.prompt_tokens)
        .usage(
            field::completion_tokens(deployment),
            usage.completion_tokens,
        )
        .usage(field::calls(deployment), calls);
}

/// The status at `now`, under the controls read for it and the governor they make.
pub async fn current_status(
    state: &AppState,
    store: &dyn Store,
    controls: &ControlState,
    governor: &Governor,
    now: EpochMillis,
) -> Result<Status, ApiError> {
    let audit = state.controls.audit(AUDIT_SHOWN).await?;
    let audit_trimmed = state.controls.audit_trimmed().await?;
    let work_notes_in_outbox = deliveries::outbox_pending(state)
        .await
        .map_err(|e| ApiError::Unavailable(format!("the ServiceNow outbox: {e}")))?;
    let config = state.fleet_config();
    Ok(collect(&StatusInputs {
        store,
        governor,
        signals: state.signals.as_ref(),
        controls,
        audit: &audit,
        audit_trimmed,
        work_notes_in_outbox,
        config: &config,
        aging: state.dispatch.aging(),
        now,
    })
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_timestamps_are_read_as_the_extension_writes_them() {
        // 2026-11-29T10:00:00Z
        let at = EpochMillis(1_795_946_400_000);
        assert_eq!(parse_timestamp("2026-11-29T10:00:00Z"), Some(at));
        assert_eq!(
            parse_timestamp("2026-11-29T10:00:00.1234567Z"),
            Some(EpochMillis(at.0 + 123))
        );
        assert_eq!(parse_timestamp("2026-11-29T11:00:00+01:00"), Some(at));
        assert_eq!(
            parse_timestamp("2026-11-29T10:00:00"),
            Some(at),
            "no offset: UTC"
        );
        assert_eq!(parse_timestamp("yesterday"), None);
        assert_eq!(
            parse_timestamp("1960-01-01T00:00:00Z"),
            None,
            "before the epoch"
        );
    }
}
