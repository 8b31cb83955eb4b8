//! The service levels a storm must be ridden out within, and the shape of one policy's
//! verdict against them (the report judges its figures, `report::verdict`): what the
//! report puts on its first line and what `stormgate plan` searches the quotas for.
//!
//! The levels are the product's promises: every ticket has a summary; P1 and P2
//! technicians get their LLM summary within the technician deadline (the dispatcher's
//! own table, [`DeadlinePolicy`]), read at the 95th percentile of time from arrival;
//! every P1–P3 ticket that needed a technician summary gets one from a model, not the
//! extractive fallback; and no call is refused with a 429. Tickets whose every
//! technician job was cancelled (resolved or replaced before it ran) needed none.

use serde::{Deserialize, Serialize};

use stormgate_shared::deadline_policy::DeadlinePolicy;
use stormgate_shared::job::SummaryKind;
use stormgate_shared::severity::Severity;

/// The levels checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Seconds to the LLM summary (p95) allowed for P1 and P2: the technician deadlines.
    pub p1_seconds: f64,
    pub p2_seconds: f64,
    /// Severities up to this one must all be LLM-summarized.
    pub llm_up_to: Severity,
}

impl Default for Slo {
    fn default() -> Self {
        let deadlines = DeadlinePolicy::default();
        let bound = |s| deadlines.wait(s, SummaryKind::Technician).as_secs_f64();
        Slo {
            p1_seconds: bound(Severity::P1),
            p2_seconds: bound(Severity::P2),
            llm_up_to: Severity::P3,
        }
    }
}

/// One level, measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    /// What was measured, with its unit.
    pub measured: String,
    /// What it had to be.
    pub bound: String,
    pub met: bool,
}

/// A policy against every level.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub met: bool,
    pub checks: Vec<Check>,
}

impl Verdict {
    /// `meets the SLOs` or `misses: …` naming what failed, for the first line of a report.
    pub fn line(&self, policy: &str) -> String {
        if self.met {
            let all: Vec<String> = self
                .checks
                .iter()
                .map(|c| format!("{} {}", c.name, c.measured))
                .collect();
            format!("{policy}: MEETS the SLOs ({})", all.join("; "))
        } else {
            let missed: Vec<String> = self
                .checks
                .iter()
                .filter(|c| !c.met)
                .map(|c| format!("{} {} (needs {})", c.name, c.measured, c.bound))
                .collect();
            format!("{policy}: MISSES the SLOs: {}", missed.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_levels_are_the_technician_deadlines() {
        let slo = Slo::default();
        assert_eq!(slo.p1_seconds, 30.0);
        assert_eq!(slo.p2_seconds, 45.0);
    }
}
