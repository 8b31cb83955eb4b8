//! Routing evaluated on the seed storm and on the UCI history excerpt: the one-level bound
//! holds, premium takes no more tickets, and no ticket is routed below ServiceNow's priority.
//! Prints the before/after tables docs/classifier-report.md records; the whole seed storm
//! (30,612 tickets, minutes in a debug build) is ignored by default:
//! `cargo test --release -p stormgate-lab --test integration routing_evaluation:: -- --ignored --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stormgate_lab::history::{HistoryOptions, read_history};
use stormgate_lab::routing_eval::RoutingComparison;
use stormgate_lab::scenario::Scenario;
use stormgate_lab::trace::TraceEvent;
use stormgate_shared::classifier::Classifier;
use stormgate_shared::clock::EpochMillis;

fn seed_storm(scenario: Scenario) -> RoutingComparison {
    let events: Vec<TraceEvent> = scenario
        .plan(2026)
        .unwrap()
        .into_iter()
        .map(TraceEvent::Planned)
        .collect();
    RoutingComparison::of_trace(&Classifier::embedded().unwrap(), 2026, &events)
}

fn uci_excerpt() -> RoutingComparison {
    let history = read_history(
        include_bytes!("../../shared/tests/fixtures/uci_incident_excerpt.csv").as_slice(),
        "uci_incident_excerpt.csv",
        &HistoryOptions::new(EpochMillis(1_700_000_000_000), 60.0),
    )
    .unwrap();
    RoutingComparison::of_trace(&Classifier::embedded().unwrap(), 0, &history.events)
}

fn check(name: &str, c: &RoutingComparison) {
    println!("## {name}\n\n{}", c.to_markdown());
    assert!(c.bounded.tickets > 0, "{name}: no tickets");
    assert_eq!(c.rejected, 0, "{name}: the parser refused opening versions");
    assert_eq!(
        c.bounded.lifted_beyond_one_level_without_evidence, 0,
        "{name}: uncertainty alone lifted a ticket more than one level"
    );
    assert!(
        c.bounded.routed_p1_p2 <= c.unbounded.routed_p1_p2,
        "{name}: the bound sent more tickets to premium"
    );
    // ServiceNow's own priority is the floor under both rules.
    for f in [&c.bounded, &c.unbounded] {
        for servicenow in 0..5 {
            for routed in servicenow + 1..5 {
                assert_eq!(f.servicenow_by_routing[servicenow][routed], 0, "{name}");
            }
        }
    }
}

#[test]
fn seed_storm_routing_is_bounded_and_sends_no_more_tickets_to_premium() {
    let c = seed_storm(Scenario::seed_storm().unwrap().compressed(0.1));
    check(
        "seed storm compressed to a tenth (seed 2026), opening versions",
        &c,
    );
    // The bound is what keeps these out of premium's reach: the rule before it lifted them.
    assert!(c.unbounded.lifted_beyond_one_level_without_evidence > 0);
}

#[test]
#[ignore = "the whole seed storm, minutes in a debug build: run with --release -- --ignored"]
fn the_whole_seed_storm_routing_is_bounded() {
    let c = seed_storm(Scenario::seed_storm().unwrap());
    check("seed storm (seed 2026), opening versions", &c);
}

#[test]
fn uci_routing_is_bounded_and_keeps_servicenow_p1_p2() {
    let c = uci_excerpt();
    check("UCI excerpt, opening rows, truth = last row's priority", &c);
}
