//! The service levels a storm must be ridden out within, and one policy's verdict
//! against them: what the report puts on its first line and what `stormgate plan`
//! searches the quotas for.
//!
//! The levels are the product's promises: every ticket has a summary; P1 and P2
//! technicians get their LLM summary within the technician deadline (the dispatcher's
//! own table, [`DeadlinePolicy`]), read at the 95th percentile of time from arrival;
//! every P1–P3 ticket that needed a technician summary gets one from a model, not the
//! extractive fallback; and no call is refused with a 429. Tickets whose every
//! technician job was cancelled (resolved or replaced before it ran) needed none.

use serde::{Deserialize, Serialize};

use crate::deadline_policy::DeadlinePolicy;
use crate::job::SummaryKind;
use crate::lab::report::{PolicyReport, thousands};
use crate::severity::Severity;

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

/// Judges one policy's figures.
pub fn verdict(p: &PolicyReport, slo: &Slo) -> Verdict {
    let mut checks = vec![Check {
        name: "tickets without a summary".into(),
        measured: thousands(p.summaries.none),
        bound: "0".into(),
        met: p.summaries.none == 0,
    }];
    for (severity, bound) in [
        (Severity::P1, slo.p1_seconds),
        (Severity::P2, slo.p2_seconds),
    ] {
        let tickets = p.tickets_by_severity.get(severity.as_str()).copied();
        let p95 = p.llm_summary_seconds.get(severity.as_str()).map(|x| x.p95);
        let (measured, met) = match (p95, tickets) {
            (Some(v), _) => (format!("{} s", thousands(v.round() as u64)), v <= bound),
            // No ticket of this severity: nothing to be late.
            (None, Some(0) | None) => ("no tickets".to_owned(), true),
            (None, Some(_)) => ("none summarized".to_owned(), false),
        };
        checks.push(Check {
            name: format!("{severity} LLM summary p95"),
            measured,
            bound: format!("≤ {bound:.0} s"),
            met,
        });
    }
    let missing: u64 = Severity::ALL
        .iter()
        .filter(|s| **s <= slo.llm_up_to)
        .filter_map(|s| p.without_llm_summary.get(s.as_str()))
        .sum();
    checks.push(Check {
        name: format!("P1–{} tickets without an LLM summary", slo.llm_up_to),
        measured: thousands(missing),
        bound: "0".into(),
        met: missing == 0,
    });
    checks.push(Check {
        name: "HTTP 429s".into(),
        measured: thousands(p.http_429),
        bound: "0".into(),
        met: p.http_429 == 0,
    });
    Verdict {
        met: checks.iter().all(|c| c.met),
        checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_068_730), "1,068,730");
    }

    #[test]
    fn the_default_levels_are_the_technician_deadlines() {
        let slo = Slo::default();
        assert_eq!(slo.p1_seconds, 30.0);
        assert_eq!(slo.p2_seconds, 45.0);
    }
}
