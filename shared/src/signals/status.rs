//! The status document: every signal's current value at one instant, read from the store,
//! the governor, the series and the controls. `GET /api/status` answers it as JSON, the
//! console draws it, `stormgate status` prints it, and the `dispatch` tick logs its gauges
//! ([`super::emit`]) and adds them to the series ([`Status::gauge_batch`]).
//!
//! Rates ("per minute") are those of the last complete minute of the series (the minute
//! before the one `at` falls in); queue depths, ages, windows, states and what waits are
//! read live. docs/operations.md, *Status*, documents every field.

use serde::{Deserialize, Serialize};

use super::lag::median_from_histogram;
use super::series::{Day, Minute, MinuteBucket, bucket_of, field, rate_of_total};
use super::verdict::{Verdict, verdict};
use super::{FleetConfig, PartitionLag, RedisMemory, SignalBatch, SignalError, SignalStore};
use crate::clock::EpochMillis;
use crate::controls::{AuditRecord, ControlState, Setting};
use crate::governor::{DeploymentName, Governor, GovernorError};
use crate::job::{SummaryKind, Tier};
use crate::severity::Severity;
use crate::store::{AgingPolicy, DeadLetterStats, SeverityBreakdown, Store, StoreError};
use crate::ticket_id::TicketId;

/// Jobs shown at the top of each queue.
pub const TOP_JOBS: usize = 10;
/// Oldest pending jobs looked at per tier and severity for how far behind it is.
pub const OLDEST_SCANNED: usize = 50;
/// Audit entries shown.
pub const AUDIT_SHOWN: usize = 20;

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

/// The status document. See the module docs and docs/operations.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub at: EpochMillis,
    pub at_utc: String,
    /// The minute the per-minute rates are of.
    pub rates_minute: EpochMillis,
    pub verdict: Verdict,
    pub ingest: IngestStatus,
    pub severities: Vec<SeverityStatus>,
    pub queues: Vec<QueueStatus>,
    pub deployments: Vec<DeploymentStatus>,
    pub summaries: SummariesStatus,
    pub sinks: SinksStatus,
    pub dead_letters: DeadLetterStats,
    /// `None` where the store has no server (in memory).
    pub redis: Option<RedisStatus>,
    pub controls: ControlState,
    /// The latest audit entries, newest first.
    pub audit: Vec<AuditRecord>,
    /// Audit entries the stream's cap has dropped, ever.
    #[serde(default)]
    pub audit_trimmed_total: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IngestStatus {
    pub events_per_minute: u64,
    pub accepted_per_minute: u64,
    pub skipped_per_minute: u64,
    pub dead_lettered_per_minute: u64,
    pub lag: LagStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LagStatus {
    /// The minute's median over every record (from the histogram: the upper edge of the
    /// bin holding it) and its largest, in ms; `None` without records that minute.
    pub p50_ms: Option<u64>,
    pub max_ms: Option<u64>,
    /// Per partition, the latest batch's lag, and how long ago it was measured.
    pub partitions: Vec<PartitionLagStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLagStatus {
    #[serde(flatten)]
    pub lag: PartitionLag,
    pub age_ms: u64,
}

/// One severity over both LLM tiers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeverityStatus {
    pub severity: Severity,
    /// Waiting to be leased.
    pub queued: u64,
    /// Waiting out a coalescing hold.
    pub held: u64,
    /// Leased: handed to a tier function, or being settled.
    pub in_flight: u64,
    /// How long the oldest queued job has waited, and how long its deadline allows it.
    pub oldest_age_ms: Option<u64>,
    pub oldest_allowed_ms: Option<u64>,
    /// The technician deadline of the severity (the tightest), for charts.
    pub deadline_ms: u64,
    /// How far past its deadline the latest of the oldest queued jobs is (0: none late).
    pub behind_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStatus {
    pub tier: Tier,
    pub paused: bool,
    pub extractive_only: bool,
    pub pending: u64,
    pub held: u64,
    pub leased: u64,
    /// The next jobs to be served, in serve order.
    pub top: Vec<QueuedJob>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedJob {
    pub job: String,
    pub ticket: TicketId,
    pub number: String,
    pub kind: SummaryKind,
    pub severity: Severity,
    pub age_ms: u64,
    /// Until its deadline; negative when it has passed.
    pub due_in_ms: i64,
}

/// Whether a deployment takes calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum DeploymentState {
    Ok,
    /// A 429 set a fleet-wide cooldown.
    CoolingDown {
        until: EpochMillis,
    },
    /// A huge Retry-After (daily quota) took it out.
    Down {
        until: EpochMillis,
    },
    /// An operator marked it down.
    MarkedDown {
        mark: Setting,
    },
}

impl DeploymentState {
    pub fn name(&self) -> &'static str {
        match self {
            DeploymentState::Ok => "ok",
            DeploymentState::CoolingDown { .. } => "cooling_down",
            DeploymentState::Down { .. } => "down",
            DeploymentState::MarkedDown { .. } => "marked_down",
        }
    }

    /// Down for either reason: its work spills.
    pub fn is_down(&self) -> bool {
        matches!(
            self,
            DeploymentState::Down { .. } | DeploymentState::MarkedDown { .. }
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentStatus {
    pub tier: Tier,
    pub deployment: DeploymentName,
    pub model: String,
    #[serde(flatten)]
    pub state: DeploymentState,
    /// The tokens and requests per minute it is governed by (an override's, if any).
    pub tpm: u64,
    pub rpm: u64,
    pub headroom: f64,
    /// TPM and headroom overrides in force.
    pub tpm_override: Option<Setting>,
    pub headroom_override: Option<Setting>,
    /// The governor's short window now: charged tokens and requests against its limits.
    pub window: WindowStatus,
    /// Tokens charged to the last 60 s, against `TPM × (1 − headroom)`.
    pub minute_tokens: u64,
    pub minute_token_limit: u64,
    pub requests_per_minute: u64,
    /// Calls admitted since the ledger began (what `requests_per_minute` is the rate of).
    pub admitted_total: u64,
    pub throttles_per_minute: u64,
    pub throttles_total: u64,
    /// Jobs its tier handed to the next tier.
    pub spilled_per_minute: u64,
    pub today: UsageToday,
    /// The tier's controls.
    pub paused: bool,
    pub extractive_only: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowStatus {
    pub window_ms: u64,
    pub tokens: u64,
    pub token_limit: u64,
    pub requests: u64,
    pub request_limit: u64,
}

/// What the deployment billed since 00:00 UTC (its answers' `usage`), and its price.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UsageToday {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub calls: u64,
    pub spend_usd: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummariesStatus {
    pub stored_per_minute: Vec<StoredCount>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCount {
    pub tier: Tier,
    pub kind: SummaryKind,
    pub count: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinksStatus {
    pub notices: SinkStatus,
    pub work_notes: SinkStatus,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkStatus {
    pub delivered_per_minute: u64,
    /// Owed and not yet made (due, or claimed by an invocation in progress), and for work
    /// notes those in the ServiceNow outbox too.
    pub waiting: u64,
    /// Of `waiting`, work notes in the ServiceNow outbox (queued after a failed write);
    /// always 0 for customer notices.
    #[serde(default)]
    pub in_outbox: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedisStatus {
    pub used_memory: u64,
    pub maxmemory: u64,
    pub used_memory_percent: Option<u64>,
}

impl From<RedisMemory> for RedisStatus {
    fn from(m: RedisMemory) -> Self {
        RedisStatus {
            used_memory: m.used_memory,
            maxmemory: m.maxmemory,
            used_memory_percent: m.used_percent(),
        }
    }
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

impl Status {
    /// The gauges of this status, for the series: per severity, per deployment (its
    /// running totals, so that readers get rates), what waits, Redis memory.
    pub fn gauge_batch(&self) -> SignalBatch {
        let mut batch = SignalBatch::at(self.at);
        for s in &self.severities {
            batch
                .max(field::queued(s.severity), s.queued)
                .max(field::held(s.severity), s.held)
                .max(field::in_flight(s.severity), s.in_flight)
                .max(field::behind_ms(s.severity), s.behind_ms);
            if let Some(age) = s.oldest_age_ms {
                batch.max(field::oldest_age_ms(s.severity), age);
            }
        }
        for d in &self.deployments {
            batch
                .max(field::minute_tokens(&d.deployment), d.minute_tokens)
                .max(field::admitted_total(&d.deployment), d.admitted_total)
                .max(field::throttles_total(&d.deployment), d.throttles_total)
                .max(field::down(&d.deployment), u64::from(d.state.is_down()));
        }
        batch
            .max(field::NOTICES_WAITING, self.sinks.notices.waiting)
            .max(field::WORK_NOTES_WAITING, self.sinks.work_notes.waiting);
        if let Some(redis) = self.redis {
            batch
                .max(field::REDIS_USED_MEMORY, redis.used_memory)
                .max(field::REDIS_MAXMEMORY, redis.maxmemory);
        }
        batch
    }
}
