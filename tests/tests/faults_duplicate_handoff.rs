//! Fault suite: a hand-off message delivered twice. Storage queues deliver at least
//! once: an instance that lost its hold on a message (or died) sees the message go to
//! another instance while its own calls are still in flight, or after they are done.
//! Two handler processes get every message of a dispatch tick at the same moment, then
//! one of them gets them all once more: each group's call is made once (counted on the
//! wire by the recording proxy in front of the simulator), every job ends with its
//! summary, and no customer is notified twice. A call slower than a claim's life keeps
//! its claim: the invocation making it renews it while it runs.
//!
//! Mechanism proven: claims on calls (`STORMGATE_TEST_DISABLE=call_claims` makes these
//! tests fail).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::time::Duration;

use fault_rig::{Rig, RigOptions};
use serde_json::Value;
use stormgate_e2e::functions_host::{FunctionsHost, QueuedMessage};
use stormgate_e2e::tickets::event;
use stormgate_handlers::functions::summarize::CLAIM_RENEWAL;
use stormgate_shared::ingest::IngestPolicy;
use stormgate_shared::job::Tier;
use stormgate_shared::summarize::DEFAULT_CALL_CLAIM;

/// 40 P1 tickets of ten fibre cuts: 80 jobs, coalesced into a call per cut and kind.
fn storm() -> Vec<Value> {
    (1..=40).map(|n| event(n, n.div_ceil(4), 1)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_delivered_twice_makes_its_calls_once() {
    let mut rig = Rig::start(RigOptions::default()).await;
    let other = rig.start_instance("second-instance").await;
    let events = storm();
    let expected = Rig::expected_jobs(&events);
    assert_eq!(expected.len(), 80);
    let all = rig.topic.produce(events);
    rig.classify(all).await;
    // Past the coalescing holds: one tick hands every group out.
    rig.advance_clock(IngestPolicy::default().coalesce_hold);
    rig.dispatch().await;
    let mut messages: Vec<(Tier, QueuedMessage)> = Vec::new();
    for tier in Tier::LLM {
        messages.extend(rig.host.take_queued(tier).into_iter().map(|m| (tier, m)));
    }
    let handed_off: usize = messages
        .iter()
        .map(|(_, m)| m.body["leases"].as_array().unwrap().len())
        .sum();
    assert_eq!(handed_off, 80, "every job went out in this tick");

    // Both instances get every message at once; answers are slow, so each delivery's
    // call is in flight while the other delivery of its message arrives.
    rig.slow_answers(Duration::from_millis(400));
    let first = rig.handler_url();
    let second = other.base_url();
    let deliveries = messages.iter().flat_map(|(tier, message)| {
        [first.as_str(), second.as_str()].map(|base| rig.host.deliver_message(base, *tier, message))
    });
    let answers = futures_util::future::join_all(deliveries).await;
    rig.slow_answers(Duration::ZERO);
    for answer in &answers {
        assert!(answer.is_success(), "{:?} {}", answer.status, answer.body);
        rig.host.record(answer);
    }
    let calls = rig.llm.exchanges().len();
    assert_eq!(
        calls,
        messages.len(),
        "one call per handed-off group, however many deliveries"
    );

    // A third delivery of each, after the calls are done, calls nothing.
    for (tier, message) in &messages {
        let answer = rig.host.deliver_message(&second, *tier, message).await;
        assert!(answer.is_success(), "{:?} {}", answer.status, answer.body);
        rig.host.record(&answer);
    }
    assert_eq!(
        rig.llm.exchanges().len(),
        calls,
        "a done call is not made again"
    );

    rig.settle(5).await;
    rig.assert_every_job_settled(&expected).await;
    rig.assert_every_customer_notified(&expected);
    rig.assert_nothing_duplicated(1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_call_keeps_its_claim_for_as_long_as_its_invocation_runs() {
    let mut rig = Rig::start(RigOptions::default()).await;
    let other = rig.start_instance("second-instance").await;
    let events: Vec<Value> = (1..=4).map(|n| event(n, 1, 1)).collect();
    let expected = Rig::expected_jobs(&events);
    let all = rig.topic.produce(events);
    rig.classify(all).await;
    rig.advance_clock(IngestPolicy::default().coalesce_hold);
    rig.dispatch().await;
    let mut messages: Vec<(Tier, QueuedMessage)> = Vec::new();
    for tier in Tier::LLM {
        messages.extend(rig.host.take_queued(tier).into_iter().map(|m| (tier, m)));
    }
    assert!(!messages.is_empty());

    // The first instance's calls take long; while they are in flight, more than a
    // claim's life passes on the clock.
    rig.slow_answers(Duration::from_secs(10));
    let first = rig.handler_url();
    let running: Vec<_> = messages
        .iter()
        .cloned()
        .map(|(tier, message)| {
            let base = first.clone();
            tokio::spawn(async move {
                FunctionsHost::new()
                    .deliver_message(&base, tier, &message)
                    .await
            })
        })
        .collect();
    let llm = &rig.llm;
    rig.eventually(Duration::from_secs(10), "every call in flight", || async {
        llm.exchanges().len() == messages.len()
    })
    .await;
    // Time passes in steps shorter than a claim's life, each as long as a renewal
    // takes to come round: the running invocations renew their claims meanwhile.
    let step = DEFAULT_CALL_CLAIM * 6 / 10;
    for _ in 0..2 {
        rig.advance_clock(step);
        tokio::time::sleep(CLAIM_RENEWAL + Duration::from_millis(300)).await;
    }
    assert!(step * 2 > DEFAULT_CALL_CLAIM);

    // The messages reach the second instance too: it makes no call.
    for (tier, message) in &messages {
        let answer = rig
            .host
            .deliver_message(&other.base_url(), *tier, message)
            .await;
        assert!(answer.is_success(), "{:?} {}", answer.status, answer.body);
        let report = &answer.body["ReturnValue"];
        assert_eq!(report["llm_calls"], 0, "{report}");
        assert_eq!(
            report["in_flight_elsewhere"],
            message.body["leases"].as_array().unwrap().len(),
            "{report}"
        );
        rig.host.record(&answer);
    }
    rig.slow_answers(Duration::ZERO);
    for delivery in running {
        let answer = delivery.await.unwrap();
        assert!(answer.is_success(), "{:?} {}", answer.status, answer.body);
        rig.host.record(&answer);
    }
    assert_eq!(rig.llm.exchanges().len(), messages.len());
    rig.settle(5).await;
    rig.assert_every_job_settled(&expected).await;
    rig.assert_every_customer_notified(&expected);
    rig.assert_nothing_duplicated(1);
}
