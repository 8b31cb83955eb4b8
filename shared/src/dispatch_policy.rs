//! Dispatch policy: deadlines per severity and kind, aging, leases, group size and the
//! tick's time budget, with production defaults and a serde form for configuration.
//!
//! Deadlines say how long a job may wait for an LLM summary in its tier before it
//! spills to the next one (premium → standard → extractive); the instant extractive
//! summary stored at ingest covers the wait. Aging bounds every wait: a job is promoted
//! one severity step per `aging_step`, so a P5 competes as a P1 after 4 steps.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::duration_secs;
use crate::job::SummaryKind;
use crate::severity::Severity;
use crate::store::AgingPolicy;

/// A duration for each severity, P1 first; in seconds in configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerSeverity {
    #[serde(with = "duration_secs")]
    pub p1: Duration,
    #[serde(with = "duration_secs")]
    pub p2: Duration,
    #[serde(with = "duration_secs")]
    pub p3: Duration,
    #[serde(with = "duration_secs")]
    pub p4: Duration,
    #[serde(with = "duration_secs")]
    pub p5: Duration,
}

impl PerSeverity {
    pub const fn secs(p1: u64, p2: u64, p3: u64, p4: u64, p5: u64) -> PerSeverity {
        PerSeverity {
            p1: Duration::from_secs(p1),
            p2: Duration::from_secs(p2),
            p3: Duration::from_secs(p3),
            p4: Duration::from_secs(p4),
            p5: Duration::from_secs(p5),
        }
    }

    pub fn get(&self, severity: Severity) -> Duration {
        match severity {
            Severity::P1 => self.p1,
            Severity::P2 => self.p2,
            Severity::P3 => self.p3,
            Severity::P4 => self.p4,
            Severity::P5 => self.p5,
        }
    }
}

/// How long each kind of summary may wait for the LLM, per severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deadlines {
    pub technician: PerSeverity,
    pub customer: PerSeverity,
    pub rollup: PerSeverity,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            // The engineer on a P1 needs the summary within the minute.
            technician: PerSeverity::secs(60, 120, 300, 900, 1_800),
            // Customers are told at once by the extractive notice; the LLM one may take longer.
            customer: PerSeverity::secs(120, 300, 600, 1_800, 3_600),
            // Roll-ups are periodic: a late LLM roll-up is superseded by the next one.
            rollup: PerSeverity::secs(600, 600, 900, 900, 900),
        }
    }
}

impl Deadlines {
    pub fn get(&self, severity: Severity, kind: SummaryKind) -> Duration {
        match kind {
            SummaryKind::Technician => self.technician.get(severity),
            SummaryKind::Customer => self.customer.get(severity),
            SummaryKind::Rollup => self.rollup.get(severity),
        }
    }
}

/// Everything `dispatch_once` is tuned by. Deserializes from configuration with every
/// field optional (defaults below) and refuses combinations that cannot work.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "DispatchConfigFile", into = "DispatchConfigFile")]
pub struct DispatchConfig {
    deadlines: Deadlines,
    aging_step: Duration,
    lease_for: Duration,
    max_group: usize,
    tick_budget: Duration,
    max_groups_per_tier: usize,
}

/// The configuration file's form of [`DispatchConfig`] (durations in seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DispatchConfigFile {
    pub deadlines: Deadlines,
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
}

impl Default for DispatchConfigFile {
    fn default() -> Self {
        DispatchConfigFile {
            deadlines: Deadlines::default(),
            aging_step: Duration::from_secs(60),
            lease_for: Duration::from_secs(300),
            max_group: 8,
            tick_budget: Duration::from_secs(4),
            max_groups_per_tier: 500,
        }
    }
}

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
        Ok(DispatchConfig {
            deadlines: f.deadlines,
            aging_step: f.aging_step,
            lease_for: f.lease_for,
            max_group: f.max_group,
            tick_budget: f.tick_budget,
            max_groups_per_tier: f.max_groups_per_tier,
        })
    }
}

impl From<DispatchConfig> for DispatchConfigFile {
    fn from(c: DispatchConfig) -> Self {
        DispatchConfigFile {
            deadlines: c.deadlines,
            aging_step: c.aging_step,
            lease_for: c.lease_for,
            max_group: c.max_group,
            tick_budget: c.tick_budget,
            max_groups_per_tier: c.max_groups_per_tier,
        }
    }
}

impl Default for DispatchConfig {
    fn default() -> Self {
        let defaults = DispatchConfigFile::default();
        DispatchConfig {
            deadlines: defaults.deadlines,
            aging_step: defaults.aging_step,
            lease_for: defaults.lease_for,
            max_group: defaults.max_group,
            tick_budget: defaults.tick_budget,
            max_groups_per_tier: defaults.max_groups_per_tier,
        }
    }
}

impl DispatchConfig {
    /// How long a job of this severity and kind may wait for its LLM summary.
    pub fn deadline_for(&self, severity: Severity, kind: SummaryKind) -> Duration {
        self.deadlines.get(severity, kind)
    }

    /// The deadline of a job enqueued at `enqueued_at` (what ingest writes into `Job`).
    pub fn job_deadline(
        &self,
        enqueued_at: EpochMillis,
        severity: Severity,
        kind: SummaryKind,
    ) -> EpochMillis {
        enqueued_at.plus(self.deadline_for(severity, kind))
    }

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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_give_a_p1_technician_a_minute() {
        let c = DispatchConfig::default();
        assert_eq!(
            c.deadline_for(Severity::P1, SummaryKind::Technician),
            Duration::from_secs(60)
        );
        assert_eq!(
            c.job_deadline(EpochMillis(1_000), Severity::P1, SummaryKind::Technician),
            EpochMillis(61_000)
        );
    }

    #[test]
    fn configuration_overrides_some_fields_and_keeps_the_rest() {
        let c: DispatchConfig = serde_json::from_str(
            r#"{"aging_step": 30, "max_group": 4,
                "deadlines": {"technician": {"p1": 45, "p2": 90, "p3": 300, "p4": 900, "p5": 1800},
                              "customer": {"p1": 120, "p2": 300, "p3": 600, "p4": 1800, "p5": 3600},
                              "rollup": {"p1": 600, "p2": 600, "p3": 900, "p4": 900, "p5": 900}}}"#,
        )
        .unwrap();
        assert_eq!(c.aging().promote_every, Duration::from_secs(30));
        assert_eq!(c.max_group(), 4);
        assert_eq!(c.lease_for(), Duration::from_secs(300));
        assert_eq!(
            c.deadline_for(Severity::P1, SummaryKind::Technician),
            Duration::from_secs(45)
        );
        let back: DispatchConfig =
            serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn configuration_that_cannot_work_is_refused() {
        assert!(serde_json::from_str::<DispatchConfig>(r#"{"lease_for": 30}"#).is_err());
        assert!(serde_json::from_str::<DispatchConfig>(r#"{"max_group": 0}"#).is_err());
        assert!(serde_json::from_str::<DispatchConfig>(r#"{"no_such_field": 1}"#).is_err());
    }
}
