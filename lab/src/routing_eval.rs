//! Routing evaluated on a trace: what the classifier's route-up does to where tickets go,
//! with the one-level bound of [`stormgate_shared::routing`] and without it, side by side.
//!
//! Each ticket is judged on its opening version (what `classify` sees first) through the
//! product's own parse, log bounding, classifier and routing. Its true severity is the
//! trace's: a scenario's planned severity, or the priority of an export's *last* row of the
//! ticket (what it turned out to be, as in the classifier's training). The figures, for
//! both rules:
//!
//! - **premium share**: tickets routed P1 or P2 (the default tier table's premium rows);
//! - **P1/P2 recall**: tickets truly P1 or P2 routed P1 or P2;
//! - **over-routed share**: tickets routed more severe than their true severity;
//! - **lifted on uncertainty beyond one level**: the bound's own check, zero by construction
//!   under the bounded rule.
//!
//! `docs/classifier-report.md` records them for the seed storm and the UCI excerpt
//! (`lab/tests/routing_evaluation.rs` computes them and checks the bound).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::scenario::render_event;
use crate::trace::TraceEvent;
use stormgate_shared::classifier::Classifier;
use stormgate_shared::classifier::features::{AlarmCounts, FeatureInput};
use stormgate_shared::event::{CdcHeaders, ParseLimits, parse_event};
use stormgate_shared::log_bounding::{BoundingLimits, bound_lines};
use stormgate_shared::routing::{self, RoutingBasis};
use stormgate_shared::severity::Severity;

/// The figures of one routing rule over a set of tickets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoutingFigures {
    pub tickets: u64,
    pub true_p1_p2: u64,
    pub routed_p1_p2: u64,
    pub true_p1_p2_routed_p1_p2: u64,
    pub over_routed: u64,
    /// Routed more than one level above ServiceNow's priority without evidence.
    pub lifted_beyond_one_level_without_evidence: u64,
    /// Tickets by ServiceNow priority (rows) and routing (columns), P1 first.
    pub servicenow_by_routing: [[u64; 5]; 5],
}

impl RoutingFigures {
    fn count(&mut self, truth: Severity, servicenow: Severity, routed: Severity, evidence: bool) {
        self.tickets += 1;
        let premium = routed <= Severity::P2;
        self.true_p1_p2 += u64::from(truth <= Severity::P2);
        self.routed_p1_p2 += u64::from(premium);
        self.true_p1_p2_routed_p1_p2 += u64::from(truth <= Severity::P2 && premium);
        self.over_routed += u64::from(routed < truth);
        self.lifted_beyond_one_level_without_evidence +=
            u64::from(!evidence && servicenow.rank() > routed.rank() + 1);
        self.servicenow_by_routing[servicenow.index()][routed.index()] += 1;
    }

    pub fn premium_share(&self) -> f64 {
        ratio(self.routed_p1_p2, self.tickets)
    }

    pub fn p1_p2_recall(&self) -> f64 {
        ratio(self.true_p1_p2_routed_p1_p2, self.true_p1_p2)
    }

    pub fn over_routed_share(&self) -> f64 {
        ratio(self.over_routed, self.tickets)
    }
}

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 { 0.0 } else { n as f64 / d as f64 }
}

/// Both rules over the same tickets, and the bounded rule's reasons.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoutingComparison {
    /// The rule before the bound: the route-up, floored at ServiceNow's priority.
    pub unbounded: RoutingFigures,
    /// The product's rule ([`stormgate_shared::routing::route`]).
    pub bounded: RoutingFigures,
    /// Tickets by the bounded rule's basis (`servicenow`, `uncertainty`, `evidence:<kind>`).
    pub by_basis: BTreeMap<String, u64>,
    /// Opening versions the event parser refused (not counted above).
    pub rejected: u64,
}

impl RoutingComparison {
    /// Routes one opening version whose true severity is `truth`.
    pub fn add(&mut self, classifier: &Classifier, truth: Severity, record: &serde_json::Value) {
        let raw = record.to_string();
        let Ok(ticket) = parse_event(
            raw.as_bytes(),
            &CdcHeaders::default(),
            ParseLimits::default(),
        ) else {
            self.rejected += 1;
            return;
        };
        let log = bound_lines(ticket.alarm_lines(), BoundingLimits::default());
        let input = FeatureInput::with_log_alarms(&ticket, AlarmCounts::from_bounded(&log));
        let prediction = classifier.predict(&input);
        let evidence = routing::evidence_of(&input);
        let bounded = routing::route(ticket.severity, prediction.routing, evidence);
        let unbounded = prediction.routing.min(ticket.severity);
        let has_evidence = evidence.is_some();
        self.unbounded
            .count(truth, ticket.severity, unbounded, has_evidence);
        self.bounded
            .count(truth, ticket.severity, bounded.severity, has_evidence);
        let basis = match bounded.basis {
            RoutingBasis::ServiceNow => "servicenow".to_owned(),
            RoutingBasis::Uncertainty => "uncertainty".to_owned(),
            RoutingBasis::Evidence(e) => {
                let facts: Vec<&str> = [
                    (e.customers_reported, "customers"),
                    (e.high_impact, "impact high"),
                    (e.outage_alarms, "outage alarms"),
                ]
                .into_iter()
                .filter_map(|(present, name)| present.then_some(name))
                .collect();
                format!("evidence ({})", facts.join(" + "))
            }
        };
        *self.by_basis.entry(basis).or_default() += 1;
    }

    /// Every ticket of a trace, judged on its opening version; the true severity of a
    /// recorded ticket is its last row's priority.
    pub fn of_trace(classifier: &Classifier, seed: u64, events: &[TraceEvent]) -> Self {
        let mut opening: BTreeMap<String, serde_json::Value> = BTreeMap::new();
        let mut truth: BTreeMap<String, Severity> = BTreeMap::new();
        let mut order = Vec::new();
        for e in events {
            let number = e.number();
            if !opening.contains_key(&number) {
                let record = match e {
                    TraceEvent::Planned(p) => render_event(seed, p),
                    TraceEvent::Recorded(r) => r.record.clone(),
                };
                opening.insert(number.clone(), record);
                order.push(number.clone());
            }
            truth.insert(number, e.severity());
        }
        let mut comparison = RoutingComparison::default();
        for number in order {
            if let (Some(record), Some(&t)) = (opening.get(&number), truth.get(&number)) {
                comparison.add(classifier, t, record);
            }
        }
        comparison
    }

    /// The before/after table and the bounded rule's reasons, as Markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| rule | tickets | premium share (routed P1/P2) | P1/P2 recall | routed above true severity | lifted > 1 level without evidence |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
        for (name, f) in [
            ("route-up, ServiceNow floor (before)", &self.unbounded),
            ("one level without evidence (after)", &self.bounded),
        ] {
            let _ = writeln!(
                out,
                "| {name} | {} | {:.1} % ({}) | {:.3} ({} of {}) | {:.1} % ({}) | {} |",
                f.tickets,
                100.0 * f.premium_share(),
                f.routed_p1_p2,
                f.p1_p2_recall(),
                f.true_p1_p2_routed_p1_p2,
                f.true_p1_p2,
                100.0 * f.over_routed_share(),
                f.over_routed,
                f.lifted_beyond_one_level_without_evidence,
            );
        }
        let reasons: Vec<String> = self
            .by_basis
            .iter()
            .map(|(basis, n)| format!("{basis} {n}"))
            .collect();
        let _ = writeln!(
            out,
            "\nRouted by (after): {}; opening versions refused by the parser: {}.",
            reasons.join(", "),
            self.rejected
        );
        let _ = writeln!(
            out,
            "\n| ServiceNow priority \\ routed (before → after) | P1 | P2 | P3 | P4 | P5 |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
        for s in Severity::ALL {
            let cells: Vec<String> = (0..5)
                .map(|r| {
                    format!(
                        "{} → {}",
                        self.unbounded.servicenow_by_routing[s.index()][r],
                        self.bounded.servicenow_by_routing[s.index()][r]
                    )
                })
                .collect();
            let _ = writeln!(out, "| **{s}** | {} |", cells.join(" | "));
        }
        out
    }
}
