//! The status document: every signal's current value at one instant, read from the store,
//! the governor, the series and the controls ([`super::collect`]), and the verdict it reads
//! as ([`super::verdict`]). `GET /api/status` answers it as JSON, the
//! console draws it, `stormgate status` prints it, and the `dispatch` tick logs its gauges
//! ([`super::emit`]) and adds them to the series ([`Status::gauge_batch`]).
//!
//! Rates ("per minute") are those of the last complete minute of the series (the minute
//! before the one `at` falls in); queue depths, ages, windows, states and what waits are
//! read live. docs/operations.md, *Status*, documents every field.

use serde::{Deserialize, Serialize};

use super::series::field;
use super::{PartitionLag, RedisMemory, SignalBatch};
use crate::clock::EpochMillis;
use crate::controls::{AuditRecord, ControlState, Setting};
use crate::deployment_name::DeploymentName;
use crate::job::{SummaryKind, Tier};
use crate::severity::Severity;
use crate::store::DeadLetterStats;
use crate::ticket_id::TicketId;

/// Jobs shown at the top of each queue.
pub const TOP_JOBS: usize = 10;
/// Oldest pending jobs looked at per tier and severity for how far behind it is.
pub const OLDEST_SCANNED: usize = 50;
/// Audit entries shown.
pub const AUDIT_SHOWN: usize = 20;

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

/// How serious the status is, and each reason for it. The verdict is part of the
/// document; [`super::verdict`] reads it from the rest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    #[default]
    Ok,
    Warning,
    Critical,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warning => "warning",
            Level::Critical => "critical",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub level: Level,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub level: Level,
    /// The line: every reason, most serious first, or "keeping up".
    pub text: String,
    pub reasons: Vec<Reason>,
}

impl Default for Verdict {
    fn default() -> Self {
        Verdict {
            level: Level::Ok,
            text: KEEPING_UP.to_owned(),
            reasons: Vec::new(),
        }
    }
}

pub const KEEPING_UP: &str = "keeping up";

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
