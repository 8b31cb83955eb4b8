//! Leak corpus: for every ticket in `fixtures/leak_corpus/`, neither the extractive customer
//! notification nor a leaky LLM draft (after scrubbing) contains any planted internal detail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::PathBuf;

use stormgate_shared::classifier::Classifier;
use stormgate_shared::classifier::features::FeatureInput;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::event::{CdcHeaders, ParseLimits, parse_event};
use stormgate_shared::extractive;
use stormgate_shared::log_bounding::{BoundingLimits, bound_lines};
use stormgate_shared::scrubber::{find_leaks, scrub};
use stormgate_shared::snapshot::TicketSnapshot;

#[derive(serde::Deserialize)]
struct Case {
    ticket: serde_json::Value,
    llm_output: String,
    planted: Vec<String>,
}

fn cases() -> Vec<(String, Case)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/leak_corpus");
    let mut out: Vec<(String, Case)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            (
                p.display().to_string(),
                serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 4, "leak corpus is missing");
    out
}

fn snapshot(ticket: &serde_json::Value) -> TicketSnapshot {
    let t = parse_event(
        ticket.to_string().as_bytes(),
        &CdcHeaders::default(),
        ParseLimits::default(),
    )
    .unwrap();
    let log = bound_lines(t.alarm_lines(), BoundingLimits::default());
    let prediction = Classifier::embedded()
        .unwrap()
        .predict(&FeatureInput::from_ticket(&t, &log));
    let routing = prediction.routing.min(t.severity);
    TicketSnapshot::new(t, log, prediction, routing, EpochMillis(0))
}

fn assert_clean(name: &str, what: &str, text: &str, case: &Case, snap: &TicketSnapshot) {
    let lower = text.to_lowercase();
    for planted in &case.planted {
        assert!(
            !lower.contains(&planted.to_lowercase()),
            "{name} {what}: {planted:?} leaked in {text:?}"
        );
    }
    let leaks = find_leaks(text, &snap.scrub_context());
    assert!(leaks.is_empty(), "{name} {what}: {leaks:?} in {text:?}");
}

#[test]
fn extractive_customer_notifications_leak_nothing() {
    for (name, case) in cases() {
        let snap = snapshot(&case.ticket);
        let text = extractive::customer(&snap).text;
        assert!(text.len() > 40, "{name}: {text:?}");
        assert_clean(&name, "extractive", &text, &case, &snap);
    }
}

#[test]
fn scrubbed_llm_drafts_leak_nothing() {
    for (name, case) in cases() {
        let snap = snapshot(&case.ticket);
        // The draft really is leaky before scrubbing, so the assertion below can fail.
        assert!(
            !find_leaks(&case.llm_output, &snap.scrub_context()).is_empty(),
            "{name}: draft has no leak"
        );
        let scrubbed = scrub(&case.llm_output, &snap.scrub_context());
        assert!(scrubbed.removed > 0);
        assert_clean(&name, "llm draft", &scrubbed.text, &case, &snap);
    }
}
