//! Fault suite: both deployments' budgets far too small for any call (1,000 TPM each), so
//! `dispatch` settles every job itself with the extractive fallback. What was settled
//! there reaches the same sinks as what a tier function settles: each customer-impacting
//! ticket's version is named by exactly one customer notice on the notifications topic
//! (one notice per affected service and place and invocation, not one per ticket), and
//! each ticket's technician summary is written to ServiceNow as a work note, once. The
//! invocation reports say how many notices and notes went out and how many wait. A tick
//! that dies after settling its jobs, before it answers, leaves their notices and notes
//! to the ticks after it: they go out once all the same.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fault_rig::{Rig, RigOptions};
use serde_json::Value;
use stormgate_e2e::functions_host::{FunctionsHost, timer_invocation};
use stormgate_e2e::servicenow_server::SnReply;
use stormgate_e2e::tickets::event;
use stormgate_shared::ingest::IngestPolicy;
use stormgate_shared::job::SummaryKind;
use stormgate_shared::sinks::DELIVERY_HOLD;
use stormgate_shared::store::Store;

/// 50 P1 tickets (each customer-impacting: a technician and a customer job) of five
/// fibre cuts in one region.
fn storm() -> Vec<Value> {
    (1..=50).map(|n| event(n, n.div_ceil(10), 1)).collect()
}

fn sum(reports: &[Value], path: &[&str]) -> u64 {
    reports
        .iter()
        .map(|r| path.iter().fold(r, |v, key| &v[*key]).as_u64().unwrap_or(0))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_settled_by_dispatch_reach_the_notifications_topic_and_servicenow() {
    let mut rig = Rig::start(RigOptions {
        tpm: 1_000,
        servicenow: true,
        ..RigOptions::default()
    })
    .await;
    let events = storm();
    let expected = Rig::expected_jobs(&events);
    let customer_jobs: BTreeSet<(String, u64)> = expected
        .iter()
        .filter(|j| j.kind == SummaryKind::Customer)
        .map(|j| (j.ticket.as_str().to_owned(), j.version))
        .collect();
    assert_eq!(
        customer_jobs.len(),
        50,
        "every ticket is customer-impacting"
    );
    let all = rig.topic.produce(events.clone());
    rig.classify(all).await;
    let ticks = rig.settle(10).await;

    rig.assert_every_job_settled(&expected).await;
    assert!(
        rig.llm.exchanges().is_empty(),
        "no call fits a 1,000 TPM budget: dispatch settles every job itself"
    );
    let settled_by_dispatch = sum(&ticks, &["extractive", "summarized"]);
    assert_eq!(settled_by_dispatch, expected.len() as u64, "{ticks:?}");

    // Every customer job's version is named by exactly one notice.
    let named = fault_rig::notified(&rig.host.notices);
    let named_versions: BTreeSet<(String, u64)> = named.keys().cloned().collect();
    assert_eq!(
        named_versions,
        customer_jobs,
        "{} notices published for {} customer jobs settled",
        rig.host.notices.len(),
        customer_jobs.len()
    );
    rig.assert_nothing_duplicated(0);
    // One notice per affected service and place per tick, each naming its tickets.
    for notice in &rig.host.notices {
        assert_eq!(notice["service"], "internet service", "{notice}");
        assert_eq!(notice["region"], "north", "{notice}");
        assert_eq!(notice["degraded"], true, "{notice}");
        let text = notice["text"].as_str().unwrap();
        assert!(
            text.contains("internet service in the north area"),
            "{text}"
        );
    }
    let ticks_with_notices = ticks
        .iter()
        .filter(|t| t["sinks"]["notices"]["published"].as_u64().unwrap_or(0) > 0)
        .count();
    assert_eq!(rig.host.notices.len(), ticks_with_notices, "{ticks:?}");
    assert!(rig.host.notices.len() < customer_jobs.len());

    // Every technician summary reached ServiceNow once, as stored.
    let notes = rig.servicenow.as_ref().unwrap().notes();
    let mut per_ticket: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for note in notes {
        per_ticket
            .entry(note.sys_id)
            .or_default()
            .push(note.work_notes);
    }
    for job in expected
        .iter()
        .filter(|j| j.kind == SummaryKind::Technician)
    {
        let stored = rig
            .store
            .summary(&job.ticket, SummaryKind::Technician)
            .await
            .unwrap()
            .unwrap();
        assert!(stored.degraded);
        assert_eq!(
            per_ticket
                .get(job.ticket.as_str())
                .cloned()
                .unwrap_or_default(),
            vec![stored.text],
            "the work notes ServiceNow got for {}",
            job.number
        );
    }

    // The ticks said so: notices and notes out, none waiting.
    assert_eq!(
        sum(&ticks, &["sinks", "notices", "tickets"]),
        customer_jobs.len() as u64,
        "{ticks:?}"
    );
    assert_eq!(
        sum(&ticks, &["sinks", "work_notes", "delivered"]),
        50,
        "{ticks:?}"
    );
    let last = ticks.last().unwrap();
    assert_eq!(last["sinks"]["notices"]["waiting"], 0, "{last}");
    assert_eq!(last["sinks"]["work_notes"]["waiting"], 0, "{last}");
}

/// Ten P1 tickets of one fibre cut.
fn one_cut() -> Vec<Value> {
    (1..=10).map(|n| event(n, 1, 1)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_that_dies_after_settling_leaves_its_notices_and_notes_to_the_next_ticks() {
    let mut rig = Rig::start(RigOptions {
        tpm: 1_000,
        servicenow: true,
        ..RigOptions::default()
    })
    .await;
    // ServiceNow hangs: the tick's outbox drain waits on it after the jobs are settled.
    rig.servicenow
        .as_ref()
        .unwrap()
        .set_default(SnReply::Hang(10_000));
    let events = one_cut();
    let expected = Rig::expected_jobs(&events);
    let all = rig.topic.produce(events);
    rig.classify(all).await;
    rig.advance_clock(IngestPolicy::default().coalesce_hold);

    // The tick settles every job, then dies waiting on ServiceNow: its answer, and the
    // customer notices in it, never reach the host.
    let url = rig.handler_url();
    let tick = tokio::spawn(async move {
        FunctionsHost::new()
            .invoke(&url, "dispatch", &timer_invocation())
            .await
    });
    rig.eventually(
        Duration::from_secs(10),
        "a work note to reach ServiceNow",
        || async { rig.servicenow.as_ref().unwrap().attempts() > 0 },
    )
    .await;
    rig.handler.kill();
    assert!(
        !tick.await.unwrap().is_success(),
        "the tick died unanswered"
    );
    rig.assert_every_job_settled(&expected).await;
    assert!(rig.host.notices.is_empty());

    // Started again, with ServiceNow back: the notes the dead tick had put in the
    // outbox go out, but for the one it was sending; its claimed notices are held.
    rig.handler.restart().await;
    rig.servicenow.as_ref().unwrap().set_default(SnReply::Ok);
    let tick = rig.dispatch().await;
    assert_eq!(tick["sinks"]["notices"]["published"], 0, "{tick}");
    assert_eq!(tick["sinks"]["notices"]["waiting"], 10, "{tick}");
    assert_eq!(tick["sinks"]["work_notes"]["delivered"], 9, "{tick}");
    assert_eq!(tick["sinks"]["work_notes"]["waiting"], 1, "{tick}");
    // Once the claims have run out (the notices' and the outbox's), the next tick
    // delivers the rest, once.
    rig.advance_clock(DELIVERY_HOLD.max(Duration::from_secs(121)));
    let tick = rig.dispatch().await;
    assert_eq!(tick["sinks"]["notices"]["published"], 1, "{tick}");
    assert_eq!(tick["sinks"]["notices"]["tickets"], 10, "{tick}");
    assert_eq!(tick["sinks"]["work_notes"]["delivered"], 1, "{tick}");
    assert_eq!(tick["sinks"]["notices"]["waiting"], 0, "{tick}");
    assert_eq!(tick["sinks"]["work_notes"]["waiting"], 0, "{tick}");

    rig.assert_every_customer_notified(&expected);
    rig.assert_nothing_duplicated(0);
    let notes = rig.servicenow.as_ref().unwrap().notes();
    let per_ticket: BTreeSet<&str> = notes.iter().map(|n| n.sys_id.as_str()).collect();
    assert_eq!(
        (notes.len(), per_ticket.len()),
        (10, 10),
        "one note per ticket"
    );
}
