//! Fault suite: the handler process killed with SIGKILL in the middle of `dispatch` and
//! in the middle of a tier function, then started again. Nothing the dead process held
//! is lost: the hand-off messages of a tier invocation that died are redelivered by the
//! queue, and the jobs a dying `dispatch` tick had leased (whose messages never left)
//! come back when their leases expire. Every accepted ticket ends with its final
//! summaries, each written once.
//!
//! Mechanism proven: lease expiry and reclaim (`STORMGATE_TEST_DISABLE=lease_reclaim`
//! makes this test fail).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::time::Duration;

use fault_rig::{Rig, RigOptions};
use serde_json::Value;
use stormgate_e2e::functions_host::{FunctionsHost, timer_invocation};
use stormgate_e2e::tickets::event;
use stormgate_shared::job::Tier;
use stormgate_shared::store::Store;

/// Production's lease (`DispatchConfig::default().lease_for`) and a second to spare.
const PAST_THE_LEASE: Duration = Duration::from_secs(301);

/// Twelve P1 tickets of three fibre cuts (each gets a technician and a customer job).
fn storm() -> Vec<Value> {
    (1..=12).map(|n| event(n, n.div_ceil(4), 1)).collect()
}

async fn leased(rig: &Rig, tier: Tier) -> u64 {
    rig.store.queue_stats(tier).await.unwrap().leased
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_killed_mid_dispatch_and_mid_summarize_loses_no_job_and_repeats_none() {
    let mut rig = Rig::start(RigOptions::default()).await;
    let events = storm();
    let expected = Rig::expected_jobs(&events);
    let all = rig.topic.produce(events);
    rig.classify(all).await;

    // Mid-dispatch. Another instance spent premium's window 7 s ago, so the tick leases
    // the best group and waits inside its budget for the window to free: killed then,
    // its answer (the queue messages) never reaches the host.
    rig.spend_window(Tier::Premium).await;
    rig.advance_clock(Duration::from_secs(7));
    let url = rig.handler_url();
    let tick = tokio::spawn(async move {
        FunctionsHost::new()
            .invoke(&url, "dispatch", &timer_invocation())
            .await
    });
    let store = rig.store.clone();
    rig.eventually(Duration::from_secs(10), "the tick to lease a group", || {
        let store = store.clone();
        async move { store.queue_stats(Tier::Premium).await.unwrap().leased > 0 }
    })
    .await;
    rig.handler.kill();
    assert!(
        !tick.await.unwrap().is_success(),
        "the tick died unanswered"
    );
    let orphaned = leased(&rig, Tier::Premium).await;
    assert!(orphaned > 0);

    // Mid-summarize. Restarted, the handler hands out everything else; its tier
    // invocations are inside their Azure OpenAI calls (slow ones) when it is killed again.
    rig.handler.restart().await;
    rig.advance_clock(Duration::from_secs(5));
    let tick = rig.host.dispatch(&rig.handler_url()).await;
    assert!(tick.is_success(), "{:?} {}", tick.status, tick.body);
    let handed_off = rig.host.queued(Tier::Premium) + rig.host.queued(Tier::Standard);
    assert!(handed_off > 0, "{}", tick.body);
    rig.slow_answers(Duration::from_secs(5));
    let kill = rig.handler.kill_switch();
    let url = rig.handler_url();
    let (answers, ()) = tokio::join!(rig.host.deliver(&url), async {
        tokio::time::sleep(Duration::from_millis(800)).await;
        kill.fire();
    });
    assert!(answers.iter().all(|a| !a.is_success()), "killed mid-call");
    let in_flight = rig.llm.exchanges().len();
    assert!(
        in_flight > 0,
        "the tier invocations were calling Azure OpenAI"
    );
    rig.slow_answers(Duration::ZERO);
    assert_eq!(
        rig.host.queued(Tier::Premium) + rig.host.queued(Tier::Standard),
        handed_off,
        "the queue keeps every message whose invocation failed"
    );

    // The host starts the handler again and redelivers, no sooner than the queue's
    // visibility timeout after the failure: by then the dead invocations' claims on
    // their calls have run out, so the redelivery makes the calls. The orphaned group
    // has no message anywhere: only its lease running out brings it back.
    rig.handler.restart().await;
    rig.advance_clock(fault_rig::QUEUE_VISIBILITY_TIMEOUT);
    let url = rig.handler_url();
    rig.host.deliver(&url).await;
    assert_eq!(leased(&rig, Tier::Premium).await, orphaned);
    rig.advance_clock(PAST_THE_LEASE);
    let ticks = rig.settle(10).await;

    rig.assert_every_job_settled(&expected).await;
    let reclaimed: u64 = ticks
        .iter()
        .map(|t| t["counters"]["reclaimed"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(reclaimed, orphaned, "the orphaned leases were reclaimed");
    rig.assert_nothing_duplicated(1);
}
