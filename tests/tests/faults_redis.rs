//! Fault suite: Redis restarted, crashed or unreachable under a running pipeline.
//!
//! - With AOF on (the operations guide's recommendation), a Redis crash in the middle of
//!   the tier functions' work is recovered by the pipeline's own retries (queue
//!   redelivery, the next timer tick, the classify retry policy): no operator action,
//!   every ticket ends summarized, nothing is summarized twice beyond the calls that
//!   were in flight. Proven against `redis_aof` (Redis without persistence).
//! - What a crash can lose is bounded: with AOF, a crash of the Redis process loses no
//!   batch `classify` acknowledged; without persistence it loses Redis's state and
//!   nothing else, and replaying the topic's retained range restores every summary.
//! - Redis unreachable when `classify` runs, or the link cut in the middle of the
//!   batch's write: the invocation fails (the batch is not acknowledged as stored),
//!   every ticket is either wholly stored or absent, and redelivering the batch completes
//!   it without duplicates. Proven against `classify_failure`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use fault_rig::{ExpectedJob, Rig, RigOptions};
use serde_json::Value;
use stormgate_e2e::tickets::event;
use stormgate_shared::job::{JobId, SummaryKind};
use stormgate_shared::store::Store;
use stormgate_shared::ticket_id::TicketId;

/// Tickets `from..=to`, four to an outage, version 1.
fn tickets(from: u16, to: u16) -> Vec<Value> {
    (from..=to).map(|n| event(n, n.div_ceil(4), 1)).collect()
}

fn ticket_id(n: u16) -> TicketId {
    format!("{n:032x}").parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_aof_a_redis_crash_mid_run_is_recovered_by_the_pipeline_itself() {
    let mut rig = Rig::start(RigOptions {
        aof: true,
        latency: Duration::from_millis(300),
        ..RigOptions::default()
    })
    .await;
    let first = tickets(1, 12);
    let second = tickets(13, 20);
    let expected: BTreeSet<ExpectedJob> =
        Rig::expected_jobs(&[first.clone(), second.clone()].concat());
    let first = rig.topic.produce(first);
    let second = rig.topic.produce(second);
    rig.classify(first).await;
    let tick = rig.host.dispatch(&rig.handler_url()).await;
    assert!(tick.is_success(), "{}", tick.body);

    // Redis is killed while the tier functions are inside their LLM calls, and comes
    // back on its own (the platform restarts it).
    let url = rig.handler_url();
    let redis = &mut rig.redis;
    let (answers, ()) = tokio::join!(rig.host.deliver(&url), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        tokio::task::block_in_place(|| redis.crash_and_restart().unwrap());
    });
    assert!(
        answers.iter().any(|a| !a.is_success()),
        "the crash hit invocations in flight"
    );

    // Nobody intervenes: new tickets arrive, timers tick, the queue redelivers.
    rig.classify_retrying(second).await;
    rig.settle(20).await;

    rig.assert_every_job_settled(&expected).await;
    // A call in flight at the crash may be made again when its message is redelivered.
    rig.assert_nothing_duplicated(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_aof_a_redis_crash_loses_no_batch_classify_acknowledged() {
    let mut rig = Rig::start(RigOptions {
        aof: true,
        ..RigOptions::default()
    })
    .await;
    // One ticket per batch, as fast as the handler takes them, then the crash at once:
    // the last acknowledgement is milliseconds old.
    let range = rig.topic.produce(tickets(1, 24));
    for offset in range.clone() {
        let outcome = rig.classify(offset..offset + 1).await;
        assert_eq!(outcome["accepted"], 1);
    }
    let crashed_at = Instant::now();
    rig.crash_redis().await;

    let mut lost = Vec::new();
    for n in 1..=24 {
        if rig
            .store
            .ticket_snapshot(&ticket_id(n))
            .await
            .unwrap()
            .is_none()
        {
            lost.push(n);
        }
    }
    assert!(
        lost.is_empty(),
        "tickets acknowledged before the crash ({:?} ago at most) and lost: {lost:?}",
        crashed_at.elapsed()
    );
    // And the pipeline goes on from the restored state.
    let expected = Rig::expected_jobs(&tickets(1, 24));
    rig.settle(20).await;
    rig.assert_every_job_settled(&expected).await;
    rig.assert_nothing_duplicated(1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_persistence_a_crash_loses_redis_state_only_and_a_topic_replay_restores_it() {
    let mut rig = Rig::start(RigOptions::default()).await;
    let events = tickets(1, 12);
    let expected = Rig::expected_jobs(&events);
    let all = rig.topic.produce(events);
    rig.classify(all.clone()).await;
    rig.settle(10).await;
    rig.assert_every_job_settled(&expected).await;
    rig.assert_every_customer_notified(&expected);

    rig.crash_redis().await;
    // What is lost: everything Redis held (summaries, queues, governor state).
    for n in 1..=12 {
        let id = ticket_id(n);
        assert!(rig.store.ticket_snapshot(&id).await.unwrap().is_none());
        assert!(
            rig.store
                .summary(&id, SummaryKind::Technician)
                .await
                .unwrap()
                .is_none()
        );
    }
    let answer = rig.read_api(ticket_id(1).as_str()).await;
    assert_eq!(answer.status, Some(404), "{}", answer.body);

    // The recovery path: the consumer group reset to the first lost offset, the range
    // delivered again. Every ticket is summarized again, once.
    rig.classify_retrying(all).await;
    rig.settle(10).await;
    rig.assert_every_job_settled(&expected).await;
    // Redis forgot which notices were sent: customers get each one once more, no more.
    let named = fault_rig::notified(&rig.host.notices);
    let customer_jobs = expected
        .iter()
        .filter(|j| j.kind == SummaryKind::Customer)
        .count();
    assert_eq!(named.len(), customer_jobs, "{named:?}");
    assert!(named.values().all(|n| *n == 2), "{named:?}");
    let answers = fault_rig::llm_answers_per_job(&rig.llm.exchanges());
    assert!(answers.values().all(|n| *n == 2), "{answers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classify_fails_while_redis_is_unreachable_and_leaves_nothing_behind() {
    let mut rig = Rig::start(RigOptions::default()).await;
    let warm = tickets(1, 4);
    let late = tickets(5, 12);
    let expected = Rig::expected_jobs(&[warm.clone(), late.clone()].concat());
    let warm = rig.topic.produce(warm);
    let late = rig.topic.produce(late);
    rig.classify(warm).await;

    rig.link.down();
    let answer = rig
        .host
        .classify(&rig.handler_url(), rig.topic.records(late.clone()))
        .await;
    assert!(
        !answer.is_success(),
        "classify must not acknowledge a batch it could not store: {:?} {}",
        answer.status,
        answer.body
    );
    rig.link.up();
    for n in 5..=12 {
        assert_absent(&rig, n, &expected).await;
    }

    rig.classify_retrying(late).await;
    rig.settle(10).await;
    rig.assert_every_job_settled(&expected).await;
    rig.assert_nothing_duplicated(1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_cut_mid_batch_fails_classify_and_leaves_each_ticket_whole_or_absent() {
    let mut rig = Rig::start(RigOptions::default()).await;
    let warm = tickets(1, 4);
    let measure = tickets(5, 12);
    let late = tickets(13, 20);
    let expected = Rig::expected_jobs(&[warm.clone(), measure.clone(), late.clone()].concat());
    let warm = rig.topic.produce(warm);
    let measure = rig.topic.produce(measure);
    let late = rig.topic.produce(late);
    // Once connected, a batch of the same shape tells how many bytes its write is; the
    // next batch's write is cut in its middle.
    rig.classify(warm).await;
    let before = rig.link.forwarded();
    rig.classify(measure).await;
    let batch_bytes = rig.link.forwarded() - before;
    rig.link.cut_after(batch_bytes / 2);

    let answer = rig
        .host
        .classify(&rig.handler_url(), rig.topic.records(late.clone()))
        .await;
    assert!(
        !answer.is_success(),
        "classify must not acknowledge a batch it could not store: {:?} {}",
        answer.status,
        answer.body
    );
    assert!(rig.link.is_down(), "the cut happened");
    rig.link.up();
    let mut whole = 0;
    for n in 13..=20 {
        if rig
            .store
            .ticket_snapshot(&ticket_id(n))
            .await
            .unwrap()
            .is_some()
        {
            assert_whole(&rig, n, &expected).await;
            whole += 1;
        } else {
            assert_absent(&rig, n, &expected).await;
        }
    }
    assert!(
        (1..8).contains(&whole),
        "the cut fell inside the batch: {whole} of 8 tickets stored"
    );

    // Redelivered by the host's retry policy: the stored tickets are duplicates, the
    // rest are accepted.
    let outcome = rig.classify_retrying(late).await;
    assert_eq!(outcome["accepted"], 8 - whole, "{outcome}");
    assert_eq!(outcome["duplicate_or_stale"], whole, "{outcome}");
    rig.settle(10).await;
    rig.assert_every_job_settled(&expected).await;
    rig.assert_nothing_duplicated(1);
}

fn jobs_of(n: u16, expected: &BTreeSet<ExpectedJob>) -> Vec<JobId> {
    expected
        .iter()
        .filter(|j| j.ticket == ticket_id(n))
        .map(|j| JobId {
            ticket: j.ticket.clone(),
            version: j.version,
            kind: j.kind,
        })
        .collect()
}

/// Snapshot, instant summary and every job ingest queues for the ticket.
async fn assert_whole(rig: &Rig, n: u16, expected: &BTreeSet<ExpectedJob>) {
    let id = ticket_id(n);
    assert!(
        rig.store
            .summary(&id, SummaryKind::Technician)
            .await
            .unwrap()
            .is_some(),
        "ticket {n}: stored without its instant summary"
    );
    for job in jobs_of(n, expected) {
        assert!(
            rig.store.job_exists(&job).await.unwrap(),
            "ticket {n}: stored without its job {job}"
        );
    }
}

/// No snapshot, no summary, no job.
async fn assert_absent(rig: &Rig, n: u16, expected: &BTreeSet<ExpectedJob>) {
    let id = ticket_id(n);
    assert!(rig.store.ticket_snapshot(&id).await.unwrap().is_none());
    for kind in SummaryKind::ALL {
        assert!(
            rig.store.summary(&id, kind).await.unwrap().is_none(),
            "ticket {n}: a {kind} summary without its snapshot"
        );
    }
    for job in jobs_of(n, expected) {
        assert!(
            !rig.store.job_exists(&job).await.unwrap(),
            "ticket {n}: job {job} without its snapshot"
        );
    }
}
