//! Fault suite: Kafka delivers at least once, and operators replay ranges. The same
//! batch twice, a replay after the summaries were written, newer versions before older
//! ones, and finally the whole topic again: each (ticket, version, kind) is summarized
//! exactly once, superseded versions never, and the read API serves the latest.
//!
//! Mechanism proven: ingest's idempotency on `sys_id` + `sys_mod_count`
//! (`STORMGATE_TEST_DISABLE=ingest_dedup` makes this test fail).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::collections::{BTreeMap, BTreeSet};

use fault_rig::{Rig, RigOptions, llm_answers_per_job, ticket_version};
use serde_json::Value;
use stormgate_shared::job::SummaryKind;

fn outage(n: u16) -> u16 {
    n.div_ceil(4)
}

/// Every (ticket number, version, kind) a set of versions asks to summarize.
fn jobs_of(events: &[Value]) -> BTreeSet<(String, u64, SummaryKind)> {
    events
        .iter()
        .flat_map(|e| Rig::expected_jobs(std::slice::from_ref(e)))
        .map(|j| (j.number, j.version, j.kind))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicated_replayed_and_reordered_deliveries_summarize_each_version_once() {
    let mut rig = Rig::start(RigOptions::default()).await;
    let v1: Vec<Value> = (1..=8).map(|n| ticket_version(n, outage(n), 1)).collect();
    let v2: Vec<Value> = (1..=4).map(|n| ticket_version(n, outage(n), 2)).collect();
    let v3: Vec<Value> = (1..=2).map(|n| ticket_version(n, outage(n), 3)).collect();
    let first = rig.topic.produce(v1.clone());

    // At least once: the batch arrives twice before anything is dispatched.
    let mut deliveries = vec![("first delivery", rig.classify(first.clone()).await, 8)];
    deliveries.push(("redelivery", rig.classify(first.clone()).await, 0));
    rig.settle(10).await;

    // A consumer-group reset replays the range after its summaries were written.
    deliveries.push(("replay", rig.classify(first).await, 0));
    rig.settle(10).await;

    // Newer versions out of order: version 3 of tickets 1-2 lands before version 2 of
    // tickets 1-4, in one batch (version 2 of tickets 1-2 is stale); then version 2
    // arrives once more on its own.
    let third = rig.topic.produce(v3.clone());
    let second = rig.topic.produce(v2.clone());
    let reordered = rig.classify(third.start..second.end).await;
    deliveries.push(("version 3 then version 2", reordered, 4));
    deliveries.push(("version 2 again", rig.classify(second).await, 0));
    rig.settle(10).await;

    // Finally the whole topic from offset 0.
    let everything = rig.classify(0..rig.topic.len()).await;
    deliveries.push(("whole topic", everything, 0));
    rig.settle(10).await;

    let all: Vec<Value> = [v1.clone(), v2.clone(), v3.clone()].concat();
    rig.assert_every_job_settled(&Rig::expected_jobs(&all))
        .await;
    rig.assert_nothing_duplicated(1);
    // Exactly one LLM summary per version that was current when its turn came: every
    // version 1, version 2 of tickets 3-4, version 3 of tickets 1-2; never version 2
    // of tickets 1-2, which arrived superseded.
    let summarized: BTreeMap<_, _> = llm_answers_per_job(&rig.llm.exchanges());
    let wanted: BTreeSet<_> = jobs_of(&v1)
        .into_iter()
        .chain(jobs_of(&v2[2..]))
        .chain(jobs_of(&v3))
        .collect();
    assert_eq!(
        summarized.keys().cloned().collect::<BTreeSet<_>>(),
        wanted,
        "LLM summaries made per (ticket, version, kind)"
    );
    // What classify said it did.
    for (delivery, outcome, accepted) in deliveries {
        assert_eq!(outcome["accepted"], accepted, "{delivery}: {outcome}");
    }
    for n in 1..=8u16 {
        let latest = match n {
            1 | 2 => 3,
            3 | 4 => 2,
            _ => 1,
        };
        let read = rig.read_api(&format!("{n:032x}")).await;
        assert_eq!(
            read.body["summaries"]["technician"]["version"], latest,
            "{}",
            read.body
        );
    }
}
