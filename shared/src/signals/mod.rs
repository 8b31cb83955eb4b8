//! Signals: what the product measures about itself while it runs, kept as a bounded
//! per-minute time series in the store next to the work, so that a console, a command
//! line and an alert all read the same numbers.
//!
//! Every invocation adds what it saw to the minute it ran in ([`SignalBatch`]): `classify`
//! its events, skips, dead letters and the consumer lag of each partition; `dispatch` the
//! gauges of the tick (queues per severity, deployments, sinks, Redis memory); the tier
//! functions the summaries they stored and the tokens the deployments billed. A minute's
//! bucket holds counters (added) and gauges (the largest value the minute saw), keyed by
//! the field names of [`series::field`]. Buckets are kept for [`HORIZON`] on the product's
//! clock and trimmed by the writes themselves; each bucket also expires in Redis by itself
//! a little later, so the bound holds where nothing writes. The tokens each deployment
//! billed are kept per UTC day, for today's spend.
//!
//! [`collect`] turns the store, the governor, the series and the controls into the one
//! [`status`] document `GET /api/status`, the console and `stormgate status` show;
//! [`verdict`] reads it into one line; [`emit`] logs its gauges as JSON lines with the
//! names [`catalog`] lists, which the alert rules in `infra/` query.
//!
//! Two backends implement [`SignalStore`]: [`memory`] (one process) and [`redis`] (the
//! fleet; every change one Lua script); `tests/signals_conformance.rs` runs the same tests
//! against both.

pub mod catalog;
pub mod chart;
pub mod collect;
pub mod emit;
pub mod lag;
pub mod memory;
pub mod redis;
pub mod series;
pub mod status;
pub mod verdict;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::deadline_policy::DeadlinePolicy;
use crate::deployment_name::DeploymentName;
use crate::governor::GovernorPolicy;
use crate::job::Tier;

pub use lag::PartitionLag;
pub use series::{Day, Minute, MinuteBucket};

/// How far back the series goes: about a day of minutes.
pub const HORIZON: Duration = Duration::from_secs(24 * 3600);

/// How long after the horizon Redis expires a bucket by itself, should no write trim it.
pub const EXPIRY_GRACE: Duration = Duration::from_secs(3600);

/// How many UTC days of billed usage are kept (today and yesterday).
pub const DAYS_KEPT: u64 = 2;

#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("signal store unavailable: {0}")]
    Unavailable(String),
    #[error("signal store answered something unexpected: {0}")]
    Corrupt(String),
}

impl From<::redis::RedisError> for SignalError {
    fn from(e: ::redis::RedisError) -> Self {
        if matches!(e.kind(), ::redis::ErrorKind::UnexpectedReturnType) {
            SignalError::Corrupt(e.to_string())
        } else {
            SignalError::Unavailable(e.to_string())
        }
    }
}

/// What one invocation adds to the series at `at`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SignalBatch {
    pub at: EpochMillis,
    /// Added to the minute's counters.
    pub counts: BTreeMap<String, u64>,
    /// The minute keeps the largest value it is given for each.
    pub maxima: BTreeMap<String, u64>,
    /// The latest lag measured per partition; replaces what was kept for it.
    pub lag: Vec<PartitionLag>,
    /// Added to the UTC day's usage counters (tokens billed, calls), per deployment.
    pub usage: BTreeMap<String, u64>,
    /// The fleet's configuration, for readers that have no settings of their own.
    pub config: Option<FleetConfig>,
}

impl SignalBatch {
    pub fn at(at: EpochMillis) -> SignalBatch {
        SignalBatch {
            at,
            ..SignalBatch::default()
        }
    }

    /// Adds `n` to a counter (zero is not written).
    pub fn count(&mut self, field: impl Into<String>, n: u64) -> &mut Self {
        if n > 0 {
            *self.counts.entry(field.into()).or_default() += n;
        }
        self
    }

    /// Offers `value` as the minute's largest for a gauge.
    pub fn max(&mut self, field: impl Into<String>, value: u64) -> &mut Self {
        let entry = self.maxima.entry(field.into()).or_default();
        *entry = (*entry).max(value);
        self
    }

    /// Adds `n` to a usage counter of the day (zero is not written).
    pub fn usage(&mut self, field: impl Into<String>, n: u64) -> &mut Self {
        if n > 0 {
            *self.usage.entry(field.into()).or_default() += n;
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
            && self.maxima.is_empty()
            && self.lag.is_empty()
            && self.usage.is_empty()
            && self.config.is_none()
    }
}

/// One Azure OpenAI deployment as the fleet is configured, with its prices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentConfig {
    pub tier: Tier,
    pub deployment: DeploymentName,
    pub model: String,
    /// Tokens per minute (`STORMGATE_<TIER>_TPM`).
    pub tpm: u64,
    /// Requests per minute (`STORMGATE_<TIER>_RPM`).
    pub rpm: u64,
    /// USD per million prompt tokens and per million completion tokens.
    pub price_input_per_1m: f64,
    pub price_output_per_1m: f64,
}

/// What readers without the handler's settings (`stormgate status`) need to interpret
/// the store: the deployments, the governor's policy and the deadline table. `dispatch`
/// publishes it with every tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetConfig {
    pub deployments: Vec<DeploymentConfig>,
    pub policy: GovernorPolicy,
    pub deadlines: DeadlinePolicy,
}

impl DeploymentConfig {
    /// The quota the governor enforces for this deployment.
    pub fn budget(&self) -> crate::governor::DeploymentBudget {
        crate::governor::DeploymentBudget {
            tier: self.tier,
            deployment: self.deployment.clone(),
            tpm: self.tpm,
            rpm: self.rpm,
        }
    }
}

impl FleetConfig {
    pub fn deployment(&self, name: &DeploymentName) -> Option<&DeploymentConfig> {
        self.deployments.iter().find(|d| &d.deployment == name)
    }
}

/// What Redis says about its memory (`INFO memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedisMemory {
    pub used_memory: u64,
    /// 0 when Redis reports no limit.
    pub maxmemory: u64,
}

impl RedisMemory {
    /// `used_memory` as a percentage of `maxmemory`; `None` without a limit.
    pub fn used_percent(&self) -> Option<u64> {
        (self.maxmemory > 0).then(|| {
            let percent = self.used_memory.saturating_mul(100) / self.maxmemory;
            percent.min(10_000)
        })
    }
}

/// Where the signal series lives. See the module docs for what it keeps and its bounds.
#[async_trait]
pub trait SignalStore: Send + Sync + std::fmt::Debug {
    /// Adds a batch to the minute (and day) of `batch.at`, and trims what the horizon
    /// left behind.
    async fn record(&self, batch: &SignalBatch) -> Result<(), SignalError>;

    /// The kept buckets of the minutes `from..=to`, oldest first; minutes nothing was
    /// recorded in are absent.
    async fn minutes(&self, from: Minute, to: Minute) -> Result<Vec<MinuteBucket>, SignalError>;

    /// The latest lag measured per partition, by topic and partition.
    async fn lag(&self) -> Result<Vec<PartitionLag>, SignalError>;

    /// The usage counters of one UTC day.
    async fn day_usage(&self, day: Day) -> Result<BTreeMap<String, u64>, SignalError>;

    /// The fleet's configuration as last published, if any.
    async fn config(&self) -> Result<Option<FleetConfig>, SignalError>;

    /// The memory of the store's server; `None` where there is no server (in memory).
    async fn memory(&self) -> Result<Option<RedisMemory>, SignalError>;
}
