//! Collecting the status document ([`super::status`]) at one instant: the store's queues,
//! the governor's windows, the series' last complete minute, the controls and their audit,
//! then the verdict it reads as ([`super::verdict`]).

use super::lag::median_from_histogram;
use super::series::{Day, Minute, MinuteBucket, bucket_of, field, rate_of_total};
use super::status::{
    AUDIT_SHOWN, DeploymentState, DeploymentStatus, IngestStatus, LagStatus, OLDEST_SCANNED,
    PartitionLagStatus, QueueStatus, QueuedJob, RedisStatus, SeverityStatus, SinkStatus,
    SinksStatus, Status, StoredCount, SummariesStatus, TOP_JOBS, UsageToday, Verdict, WindowStatus,
};
use super::verdict::verdict;
use super::{FleetConfig, SignalError, SignalStore};
use crate::clock::EpochMillis;
use crate::controls::{AuditRecord, ControlState};
use crate::governor::{Governor, GovernorError};
use crate::job::{SummaryKind, Tier};
use crate::severity::Severity;
use crate::store::{AgingPolicy, SeverityBreakdown, Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Governor(#[from] GovernorError),
    #[error(transparent)]
    Signals(#[from] SignalError),
}

/// What [`collect`] reads.
#[derive(Clone, Copy)]
pub struct StatusInputs<'a> {
    pub store: &'a dyn Store,
    /// The governor with the controls in force applied ([`Governor::with_controls`]).
    pub governor: &'a Governor,
    pub signals: &'a dyn SignalStore,
    pub controls: &'a ControlState,
    pub audit: &'a [AuditRecord],
    /// Audit entries the stream's cap has dropped ([`ControlStore::audit_trimmed`]).
    ///
    /// [`ControlStore::audit_trimmed`]: crate::controls::ControlStore::audit_trimmed
    pub audit_trimmed: u64,
    /// Work notes in the ServiceNow outbox (queued for a retry, due or not); 0 without write-back.
    pub work_notes_in_outbox: u64,
    pub config: &'a FleetConfig,
    pub aging: AgingPolicy,
    pub now: EpochMillis,
}

/// Reads everything and builds the status at `inputs.now`.
pub async fn collect(inputs: &StatusInputs<'_>) -> Result<Status, StatusError> {
    let now = inputs.now;
    let store = inputs.store;
    let mut breakdowns = Vec::with_capacity(Tier::LLM.len());
    let mut queues = Vec::with_capacity(Tier::LLM.len());
    for tier in Tier::LLM {
        let breakdown = store.severity_breakdown(tier, OLDEST_SCANNED).await?;
        let top = store
            .pending_jobs(tier, TOP_JOBS, inputs.aging)
            .await?
            .into_iter()
            .map(|job| QueuedJob {
                job: job.id.to_string(),
                ticket: job.id.ticket.clone(),
                number: job.number.clone(),
                kind: job.id.kind,
                severity: job.severity,
                age_ms: now.0.saturating_sub(job.enqueued_at.0),
                due_in_ms: signed_difference(job.deadline.0, now.0),
            })
            .collect();
        let control = inputs.controls.tier(tier);
        queues.push(QueueStatus {
            tier,
            paused: control.is_paused(),
            extractive_only: control.is_extractive_only(),
            pending: breakdown.pending.iter().sum(),
            held: breakdown.held.iter().sum(),
            leased: breakdown.leased.iter().sum(),
            top,
        });
        breakdowns.push(breakdown);
    }
    let severities = Severity::ALL
        .iter()
        .map(|&s| severity_status(s, &breakdowns, inputs.config, now))
        .collect();

    let this_minute = Minute::of(now);
    let rates_minute = this_minute.back(1);
    let buckets = inputs
        .signals
        .minutes(this_minute.back(4), this_minute)
        .await?;
    let last = bucket_of(&buckets, rates_minute)
        .cloned()
        .unwrap_or_default();
    let usage = inputs.signals.day_usage(Day::of(now)).await?;
    let rate = |field: &str| {
        rate_of_total(&buckets, field)
            .into_iter()
            .find(|(m, _)| *m == rates_minute)
            .map_or(0, |(_, r)| r)
    };

    let mut deployments = Vec::new();
    for gauges in inputs.governor.gauges(now).await? {
        let name = gauges.deployment.clone();
        let config = inputs.config.deployment(&name);
        let control = inputs.controls.deployment(&name);
        let tier_control = inputs.controls.tier(gauges.tier);
        let budget = inputs.governor.budget(&name);
        let tpm = budget.map_or(0, |b| b.tpm);
        let rpm = budget.map_or(0, |b| b.rpm());
        let state = match (
            &control.down,
            gauges.ledger.down_until,
            gauges.ledger.cooldown_until,
        ) {
            (Some(mark), _, _) => DeploymentState::MarkedDown { mark: mark.clone() },
            (None, Some(until), _) => DeploymentState::Down { until },
            (None, None, Some(until)) => DeploymentState::CoolingDown { until },
            (None, None, None) => DeploymentState::Ok,
        };
        let prompt = usage
            .get(&field::prompt_tokens(&name))
            .copied()
            .unwrap_or(0);
        let completion = usage
            .get(&field::completion_tokens(&name))
            .copied()
            .unwrap_or(0);
        let spend_usd = config.map_or(0.0, |c| {
            prompt as f64 * c.price_input_per_1m / 1e6
                + completion as f64 * c.price_output_per_1m / 1e6
        });
        let spilled = Tier::LLM
            .iter()
            .chain([&Tier::Extractive])
            .map(|&to| last.get(&field::spilled(gauges.tier, to)))
            .sum();
        deployments.push(DeploymentStatus {
            tier: gauges.tier,
            deployment: name.clone(),
            model: config.map(|c| c.model.clone()).unwrap_or_default(),
            state,
            tpm,
            rpm,
            headroom: control
                .headroom()
                .unwrap_or(inputs.governor.policy().headroom)
                .fraction(),
            tpm_override: control.tpm.clone(),
            headroom_override: control.headroom.clone(),
            window: WindowStatus {
                window_ms: gauges.limits.window_ms,
                tokens: gauges.ledger.window_tokens,
                token_limit: gauges.limits.tokens,
                requests: gauges.ledger.window_requests,
                request_limit: gauges.limits.requests,
            },
            minute_tokens: gauges.ledger.minute_tokens,
            minute_token_limit: gauges.limits.minute_tokens,
            requests_per_minute: rate(&field::admitted_total(&name)),
            admitted_total: gauges.ledger.admitted,
            throttles_per_minute: rate(&field::throttles_total(&name)),
            throttles_total: gauges.ledger.throttles,
            spilled_per_minute: spilled,
            today: UsageToday {
                prompt_tokens: prompt,
                completion_tokens: completion,
                calls: usage.get(&field::calls(&name)).copied().unwrap_or(0),
                spend_usd,
            },
            paused: tier_control.is_paused(),
            extractive_only: tier_control.is_extractive_only(),
        });
    }

    let mut lag_partitions: Vec<PartitionLagStatus> = inputs
        .signals
        .lag()
        .await?
        .into_iter()
        .map(|lag| PartitionLagStatus {
            age_ms: now.0.saturating_sub(lag.measured_at.0),
            lag,
        })
        .collect();
    lag_partitions
        .sort_by(|a, b| (&a.lag.topic, a.lag.partition).cmp(&(&b.lag.topic, b.lag.partition)));
    let ingest = IngestStatus {
        events_per_minute: last.get(field::EVENTS),
        accepted_per_minute: last.get(field::ACCEPTED),
        skipped_per_minute: last.get(field::SKIPPED),
        dead_lettered_per_minute: last.get(field::DEAD_LETTERED),
        lag: LagStatus {
            p50_ms: median_from_histogram(&[&last]),
            max_ms: last
                .has(field::LAG_MAX_MS)
                .then(|| last.get(field::LAG_MAX_MS)),
            partitions: lag_partitions,
        },
    };

    let summaries = SummariesStatus {
        stored_per_minute: stored_counts(&last),
    };
    let notices = store.owed_stats(SummaryKind::Customer, now).await?;
    let notes = store.owed_stats(SummaryKind::Technician, now).await?;
    let sinks = SinksStatus {
        notices: SinkStatus {
            delivered_per_minute: last.get(field::NOTICES_DELIVERED),
            waiting: notices.due + notices.claimed,
            in_outbox: 0,
        },
        work_notes: SinkStatus {
            delivered_per_minute: last.get(field::WORK_NOTES_DELIVERED),
            waiting: notes.due + notes.claimed + inputs.work_notes_in_outbox,
            in_outbox: inputs.work_notes_in_outbox,
        },
    };

    let mut status = Status {
        at: now,
        at_utc: now.to_string(),
        rates_minute: rates_minute.start(),
        verdict: Verdict::default(),
        ingest,
        severities,
        queues,
        deployments,
        summaries,
        sinks,
        dead_letters: store.dead_letter_stats().await?,
        redis: inputs.signals.memory().await?.map(RedisStatus::from),
        controls: inputs.controls.clone(),
        audit: inputs.audit.iter().take(AUDIT_SHOWN).cloned().collect(),
        audit_trimmed_total: inputs.audit_trimmed,
    };
    status.verdict = verdict(&status);
    Ok(status)
}

fn signed_difference(a: u64, b: u64) -> i64 {
    if a >= b {
        i64::try_from(a - b).unwrap_or(i64::MAX)
    } else {
        -i64::try_from(b - a).unwrap_or(i64::MAX)
    }
}

fn severity_status(
    severity: Severity,
    breakdowns: &[SeverityBreakdown],
    config: &FleetConfig,
    now: EpochMillis,
) -> SeverityStatus {
    let i = severity.index();
    let oldest_jobs = breakdowns.iter().flat_map(|b| b.oldest[i].iter());
    let oldest = oldest_jobs
        .clone()
        .min_by_key(|j| (j.enqueued_at, j.deadline));
    let behind_ms = oldest_jobs
        .map(|j| now.0.saturating_sub(j.deadline.0))
        .max()
        .unwrap_or(0);
    SeverityStatus {
        severity,
        queued: breakdowns.iter().map(|b| b.pending[i]).sum(),
        held: breakdowns.iter().map(|b| b.held[i]).sum(),
        in_flight: breakdowns.iter().map(|b| b.leased[i]).sum(),
        oldest_age_ms: oldest.map(|j| now.0.saturating_sub(j.enqueued_at.0)),
        oldest_allowed_ms: oldest.map(|j| j.deadline.0.saturating_sub(j.enqueued_at.0)),
        deadline_ms: config
            .deadlines
            .wait(severity, SummaryKind::Technician)
            .as_millis()
            .try_into()
            .unwrap_or(u64::MAX),
        behind_ms,
    }
}

/// The `stored:<tier>:<kind>` counters of a bucket.
fn stored_counts(bucket: &MinuteBucket) -> Vec<StoredCount> {
    let mut counts = Vec::new();
    for tier in [Tier::Premium, Tier::Standard, Tier::Extractive] {
        for kind in SummaryKind::ALL {
            let count = bucket.get(&field::stored(tier, kind));
            if count > 0 {
                counts.push(StoredCount { tier, kind, count });
            }
        }
    }
    counts
}
