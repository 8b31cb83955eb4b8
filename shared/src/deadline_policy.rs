//! Deadlines: how long each queued summary may wait for the LLM, by severity and kind.
//!
//! This is the one table of deadlines. Ingest stamps `enqueued_at + wait` on every job
//! it queues ([`crate::ingest`]), and the dispatcher spills a job whose tier cannot admit
//! it before that stamped instant ([`crate::dispatcher`]); the summarizer's retries stop
//! at it too. Nothing else computes a deadline, so no two parts can disagree about one.
//! Waiting costs nothing visible: the instant extractive summary stored at ingest is
//! there the whole time.
//!
//! A deadline is a promise made when the job is queued: changing the policy changes the
//! deadlines of jobs queued afterwards, not of jobs already waiting.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::duration_secs;
use crate::job::SummaryKind;
use crate::severity::Severity;

/// A duration for each severity, P1 first; in seconds in configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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

    pub const fn minutes(p1: u64, p2: u64, p3: u64, p4: u64, p5: u64) -> PerSeverity {
        PerSeverity::secs(p1 * 60, p2 * 60, p3 * 60, p4 * 60, p5 * 60)
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

/// How long each queued kind of summary may wait for the LLM, per severity. Parsed, not
/// validated: a value of this type has no zero deadline and never gives a less severe
/// ticket less time than a more severe one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "DeadlineTable", into = "DeadlineTable")]
pub struct DeadlinePolicy {
    technician: PerSeverity,
    customer: PerSeverity,
}

/// The configuration form of [`DeadlinePolicy`]: seconds per severity for each kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadlineTable {
    pub technician: PerSeverity,
    pub customer: PerSeverity,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeadlinePolicyError {
    #[error("the {kind} deadline of {severity} must be more than zero")]
    Zero {
        kind: SummaryKind,
        severity: Severity,
    },
    #[error(
        "the {kind} deadline of {less_severe} ({less_severe_wait:?}) is shorter than that of the more severe {more_severe} ({more_severe_wait:?})"
    )]
    LessSevereSooner {
        kind: SummaryKind,
        more_severe: Severity,
        more_severe_wait: Duration,
        less_severe: Severity,
        less_severe_wait: Duration,
    },
}

impl Default for DeadlinePolicy {
    fn default() -> Self {
        DeadlinePolicy {
            // The engineer on a P1 or P2 gets the LLM summary within the minute: a job
            // that cannot start in time on premium goes to standard while standard can
            // still make it. The extractive summary is there from the start.
            technician: PerSeverity::secs(30, 45, 15 * 60, 60 * 60, 240 * 60),
            // Customers are told at once by the extractive notice; the LLM one may take longer.
            customer: PerSeverity::minutes(5, 10, 30, 120, 480),
        }
    }
}

impl DeadlinePolicy {
    pub fn new(
        technician: PerSeverity,
        customer: PerSeverity,
    ) -> Result<DeadlinePolicy, DeadlinePolicyError> {
        check(SummaryKind::Technician, &technician)?;
        check(SummaryKind::Customer, &customer)?;
        Ok(DeadlinePolicy {
            technician,
            customer,
        })
    }

    pub fn technician(&self) -> &PerSeverity {
        &self.technician
    }

    pub fn customer(&self) -> &PerSeverity {
        &self.customer
    }

    /// How long a queued job of this severity and kind may wait for its LLM summary.
    /// (Roll-ups are not queued: the roll-up timer calls the model itself, within its own
    /// admission wait.)
    pub fn wait(&self, severity: Severity, kind: SummaryKind) -> Duration {
        match kind {
            SummaryKind::Technician => self.technician.get(severity),
            SummaryKind::Customer => self.customer.get(severity),
        }
    }

    /// The deadline of a job queued at `enqueued_at`: what ingest stamps on it.
    pub fn deadline(
        &self,
        enqueued_at: EpochMillis,
        severity: Severity,
        kind: SummaryKind,
    ) -> EpochMillis {
        enqueued_at.plus(self.wait(severity, kind))
    }
}

fn check(kind: SummaryKind, table: &PerSeverity) -> Result<(), DeadlinePolicyError> {
    for severity in Severity::ALL {
        if table.get(severity).is_zero() {
            return Err(DeadlinePolicyError::Zero { kind, severity });
        }
    }
    for pair in Severity::ALL.windows(2) {
        let [more_severe, less_severe] = [pair[0], pair[1]];
        let (more_severe_wait, less_severe_wait) = (table.get(more_severe), table.get(less_severe));
        if less_severe_wait < more_severe_wait {
            return Err(DeadlinePolicyError::LessSevereSooner {
                kind,
                more_severe,
                more_severe_wait,
                less_severe,
                less_severe_wait,
            });
        }
    }
    Ok(())
}

impl TryFrom<DeadlineTable> for DeadlinePolicy {
    type Error = DeadlinePolicyError;

    fn try_from(t: DeadlineTable) -> Result<Self, Self::Error> {
        DeadlinePolicy::new(t.technician, t.customer)
    }
}

impl From<DeadlinePolicy> for DeadlineTable {
    fn from(p: DeadlinePolicy) -> Self {
        DeadlineTable {
            technician: p.technician,
            customer: p.customer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_give_a_p1_technician_half_a_minute_and_a_p5_notice_eight_hours() {
        let p = DeadlinePolicy::default();
        assert_eq!(
            p.deadline(EpochMillis(1_000), Severity::P1, SummaryKind::Technician),
            EpochMillis(31_000)
        );
        assert_eq!(
            p.wait(Severity::P5, SummaryKind::Customer),
            Duration::from_secs(8 * 3_600)
        );
        assert!(DeadlinePolicy::new(p.technician, p.customer).is_ok());
    }

    #[test]
    fn configuration_in_seconds_round_trips() {
        let p: DeadlinePolicy = serde_json::from_str(
            r#"{"technician": {"p1": 45, "p2": 90, "p3": 300, "p4": 900, "p5": 1800},
                "customer": {"p1": 120, "p2": 300, "p3": 600, "p4": 1800, "p5": 3600}}"#,
        )
        .unwrap();
        assert_eq!(
            p.wait(Severity::P1, SummaryKind::Technician),
            Duration::from_secs(45)
        );
        let back: DeadlinePolicy =
            serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn a_zero_or_inverted_deadline_is_refused_naming_it() {
        let fine = PerSeverity::secs(60, 120, 300, 900, 1_800);
        let zero = PerSeverity::secs(60, 0, 300, 900, 1_800);
        let inverted = PerSeverity::secs(60, 120, 300, 200, 1_800);
        assert_eq!(
            DeadlinePolicy::new(zero, fine),
            Err(DeadlinePolicyError::Zero {
                kind: SummaryKind::Technician,
                severity: Severity::P2
            })
        );
        let error = DeadlinePolicy::new(fine, inverted).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the customer deadline of P4 (200s) is shorter than that of the more severe P3 (300s)"
        );
        let json = r#"{"technician": {"p1": 0, "p2": 1, "p3": 1, "p4": 1, "p5": 1},
                       "customer": {"p1": 1, "p2": 1, "p3": 1, "p4": 1, "p5": 1}}"#;
        assert!(serde_json::from_str::<DeadlinePolicy>(json).is_err());
        assert!(serde_json::from_str::<DeadlinePolicy>(r#"{"rollup": {}}"#).is_err());
    }
}
