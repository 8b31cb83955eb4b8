//! Dispatch policy: aging, leases, group size and the tick's time budget, with
//! production defaults and a serde form for configuration.
//!
//! Deadlines are not here: each job carries the one its [`crate::deadline_policy`]
//! gave it at ingest, and the dispatcher spills by that. Aging bounds every wait: a job
//! is promoted one severity step per `aging_step` (default 5 min), so a P5 competes as a P1
//! after 4 steps.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration_secs;
use crate::store::AgingPolicy;

/// Everything `dispatch_once` is tuned by. Deserializes from configuration with every
/// field optional (defaults below) and refuses combinations that cannot work.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "DispatchConfigFile", into = "DispatchConfigFile")]
pub struct DispatchConfig {
    aging_step: Duration,
    lease_for: Duration,
    max_group: usize,
    tick_budget: Duration,
    max_groups_per_tier: usize,
    contested_share: f64,
}

/// The configuration file's form of [`DispatchConfig`] (durations in seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DispatchConfigFile {
    /// Waiting this long promotes a job one severity step.
    #[serde(with = "duration_secs")]
    pub aging_step: Duration,
    /// How long a leased job stays ours: dispatch, queue hand-off, the call with its
    /// retries, storing and acknowledging must fit in it.
    #[serde(with = "duration_secs")]
    pub lease_for: Duration,
    /// Jobs coalesced into one LLM call at most.
    pub max_group: usize,
    /// How long one tick may wait for budget to refill (less than the timer period).
    #[serde(with = "duration_secs")]
    pub tick_budget: Duration,
    /// Groups leased per tier per tick at most.
    pub max_groups_per_tier: usize,
    /// A deployment is contested while its sliding minute holds at least this share of
    /// the governor's budget for it (or it is cooling down after a throttle): jobs the tier
    /// table lets use the LLM only while calm are then settled extractive (0 to 1].
    pub contested_share: f64,
}

impl Default for DispatchConfigFile {
    fn default() -> Self {
        DispatchConfigFile {
            aging_step: Duration::from_secs(300),
            lease_for: Duration::from_secs(300),
            max_group: 8,
            tick_budget: Duration::from_secs(4),
            max_groups_per_tier: 500,
            contested_share: DEFAULT_CONTESTED_SHARE,
        }
    }
}

/// The default of [`DispatchConfigFile::contested_share`]: half the minute. The long tail
/// may use the standard deployment's spare half; the other half stays for the work the
/// tier table always sends to the LLM (P3 technician summaries, customer notices, P1/P2
/// technician summaries spilled from premium).
pub const DEFAULT_CONTESTED_SHARE: f64 = 0.5;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchConfigError {
    #[error(
        "lease_for ({lease_for:?}) must exceed tick_budget ({tick_budget:?}) by at least a minute"
    )]
    LeaseTooShort {
        lease_for: Duration,
        tick_budget: Duration,
    },
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("contested_share must be more than 0 and at most 1")]
    ContestedShare,
}

impl TryFrom<DispatchConfigFile> for DispatchConfig {
    type Error = DispatchConfigError;

    fn try_from(f: DispatchConfigFile) -> Result<Self, Self::Error> {
        // Leased jobs wait through the tick and then through the worker's call.
        if f.lease_for < f.tick_budget + Duration::from_secs(60) {
            return Err(DispatchConfigError::LeaseTooShort {
                lease_for: f.lease_for,
                tick_budget: f.tick_budget,
            });
        }
        if f.max_group == 0 {
            return Err(DispatchConfigError::Zero("max_group"));
        }
        if f.max_groups_per_tier == 0 {
            return Err(DispatchConfigError::Zero("max_groups_per_tier"));
        }
        if f.aging_step.is_zero() {
            return Err(DispatchConfigError::Zero("aging_step"));
        }
        if !(f.contested_share > 0.0 && f.contested_share <= 1.0) {
            return Err(DispatchConfigError::ContestedShare);
        }
        Ok(DispatchConfig {
            aging_step: f.aging_step,
            lease_for: f.lease_for,
            max_group: f.max_group,
            tick_budget: f.tick_budget,
            max_groups_per_tier: f.max_groups_per_tier,
            contested_share: f.contested_share,
        })
    }
}

impl From<DispatchConfig> for DispatchConfigFile {
    fn from(c: DispatchConfig) -> Self {
        DispatchConfigFile {
            aging_step: c.aging_step,
            lease_for: c.lease_for,
            max_group: c.max_group,
            tick_budget: c.tick_budget,
            max_groups_per_tier: c.max_groups_per_tier,
            contested_share: c.contested_share,
        }
    }
}

impl Default for DispatchConfig {
    fn default() -> Self {
        let defaults = DispatchConfigFile::default();
        DispatchConfig {
            aging_step: defaults.aging_step,
            lease_for: defaults.lease_for,
            max_group: defaults.max_group,
            tick_budget: defaults.tick_budget,
            max_groups_per_tier: defaults.max_groups_per_tier,
            contested_share: defaults.contested_share,
        }
    }
}

impl DispatchConfig {
    pub fn aging(&self) -> AgingPolicy {
        AgingPolicy {
            promote_every: self.aging_step,
        }
    }

    pub fn lease_for(&self) -> Duration {
        self.lease_for
    }

    pub fn max_group(&self) -> usize {
        self.max_group
    }

    pub fn tick_budget(&self) -> Duration {
        self.tick_budget
    }

    pub fn max_groups_per_tier(&self) -> usize {
        self.max_groups_per_tier
    }

    pub fn contested_share(&self) -> f64 {
        self.contested_share
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_overrides_some_fields_and_keeps_the_rest() {
        let c: DispatchConfig =
            serde_json::from_str(r#"{"aging_step": 30, "max_group": 4}"#).unwrap();
        assert_eq!(c.aging().promote_every, Duration::from_secs(30));
        assert_eq!(c.max_group(), 4);
        assert_eq!(c.lease_for(), Duration::from_secs(300));
        let back: DispatchConfig =
            serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn configuration_that_cannot_work_is_refused() {
        assert!(serde_json::from_str::<DispatchConfig>(r#"{"lease_for": 30}"#).is_err());
        assert!(serde_json::from_str::<DispatchConfig>(r#"{"max_group": 0}"#).is_err());
        assert!(serde_json::from_str::<DispatchConfig>(r#"{"contested_share": 0}"#).is_err());
        assert!(serde_json::from_str::<DispatchConfig>(r#"{"contested_share": 1.5}"#).is_err());
        assert!(serde_json::from_str::<DispatchConfig>(r#"{"no_such_field": 1}"#).is_err());
        assert!(
            serde_json::from_str::<DispatchConfig>(r#"{"deadlines": {}}"#).is_err(),
            "deadlines belong to the deadline policy ingest applies"
        );
    }
}
