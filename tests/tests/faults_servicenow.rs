//! Fault suite: ServiceNow write-back throttled (429 with a long Retry-After) or down
//! (5xx). Summaries are stored and served by the read API regardless; the notes wait in
//! the Redis outbox and reach ServiceNow once it takes them again, each exactly once.
//!
//! Mechanism proven: the work-note outbox (`STORMGATE_TEST_DISABLE=work_note_outbox`
//! makes these tests fail).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::collections::BTreeMap;
use std::time::Duration;

use fault_rig::{Rig, RigOptions};
use serde_json::Value;
use stormgate_e2e::servicenow_server::SnReply;
use stormgate_e2e::tickets::event;
use stormgate_shared::job::SummaryKind;
use stormgate_shared::store::Store;

fn tickets() -> Vec<Value> {
    (1..=8).map(|n| event(n, n.div_ceil(4), 1)).collect()
}

async fn servicenow_rig() -> Rig {
    Rig::start(RigOptions {
        servicenow: true,
        ..RigOptions::default()
    })
    .await
}

/// Every ticket's LLM technician summary is stored and the read API on the handler
/// serves it.
async fn assert_summaries_served(rig: &Rig, events: &[Value]) {
    for event in events {
        let sys_id = event["sys_id"].as_str().unwrap();
        let read = rig.read_api(sys_id).await;
        assert_eq!(read.status, Some(200), "{sys_id}: {}", read.body);
        let technician = &read.body["summaries"]["technician"];
        assert_eq!(technician["degraded"], false, "{}", read.body);
        assert_ne!(technician["model"], "extractive", "{}", read.body);
    }
}

/// ServiceNow holds exactly one note per ticket: its stored technician summary.
async fn assert_each_note_delivered_once(rig: &Rig, events: &[Value]) {
    let notes = rig.servicenow.as_ref().unwrap().notes();
    let mut per_ticket: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for note in notes {
        per_ticket
            .entry(note.sys_id)
            .or_default()
            .push(note.work_notes);
    }
    for event in events {
        let sys_id = event["sys_id"].as_str().unwrap();
        let stored = rig
            .store
            .summary(&sys_id.parse().unwrap(), SummaryKind::Technician)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            per_ticket.get(sys_id).cloned().unwrap_or_default(),
            vec![stored.text],
            "the work notes ServiceNow got for {sys_id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_servicenow_delays_work_notes_not_summaries_and_they_catch_up() {
    let mut rig = servicenow_rig().await;
    // The integration user's hourly limit is spent: two minutes to wait.
    rig.servicenow
        .as_ref()
        .unwrap()
        .set_default(SnReply::RateLimited(120));
    let events = tickets();
    let expected = Rig::expected_jobs(&events);
    let all = rig.topic.produce(events.clone());
    rig.classify(all).await;
    rig.settle(10).await;

    rig.assert_every_job_settled(&expected).await;
    assert_summaries_served(&rig, &events).await;
    let servicenow = rig.servicenow.as_ref().unwrap();
    assert!(servicenow.notes().is_empty());
    let attempts = servicenow.attempts();

    // While Retry-After runs no instance calls ServiceNow; once it has passed, the
    // dispatch tick delivers the whole backlog.
    rig.advance_clock(Duration::from_secs(60));
    rig.dispatch().await;
    assert_eq!(
        rig.servicenow.as_ref().unwrap().attempts(),
        attempts,
        "ServiceNow was called during its Retry-After"
    );
    rig.servicenow.as_ref().unwrap().set_default(SnReply::Ok);
    rig.advance_clock(Duration::from_secs(61));
    let tick = rig.dispatch().await;
    assert_eq!(
        tick["work_notes"]["delivered"], 8,
        "every waiting note is delivered once ServiceNow takes them: {}",
        tick["work_notes"]
    );
    assert_each_note_delivered_once(&rig, &events).await;
    rig.assert_nothing_duplicated(1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servicenow_outage_delays_work_notes_not_summaries_and_they_catch_up() {
    let mut rig = servicenow_rig().await;
    rig.servicenow
        .as_ref()
        .unwrap()
        .set_default(SnReply::Status(503));
    let events = tickets();
    let expected = Rig::expected_jobs(&events);
    let all = rig.topic.produce(events.clone());
    rig.classify(all).await;
    rig.settle(10).await;

    rig.assert_every_job_settled(&expected).await;
    assert_summaries_served(&rig, &events).await;

    // Still down at the next attempt, back at the one after: the outbox backs off
    // (a minute, then two) and delivers when it can.
    rig.advance_clock(Duration::from_secs(61));
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["delivered"], 0, "{tick}");
    // The status counts the notes the outbox holds as waiting: an outage is never a quiet 0.
    let status: Value = reqwest::get(format!("{}/api/status", rig.handler_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let notes = &status["sinks"]["work_notes"];
    assert_eq!(notes["in_outbox"], 8, "{notes}");
    assert_eq!(notes["waiting"], 8, "{notes}");
    rig.servicenow.as_ref().unwrap().set_default(SnReply::Ok);
    rig.advance_clock(Duration::from_secs(121));
    let tick = rig.dispatch().await;
    assert_eq!(
        tick["work_notes"]["delivered"], 8,
        "every waiting note is delivered once ServiceNow takes them: {}",
        tick["work_notes"]
    );
    assert_each_note_delivered_once(&rig, &events).await;
    rig.assert_nothing_duplicated(1);
}
