//! Fault suite: a long Redis outage only delays ingest.
//!
//! The Kafka trigger commits a batch's offsets once the host's retry loop for it ends,
//! succeeded or not (tests/fixtures/platform/retry-and-offsets.json). `classify`'s retry
//! policy (function-defs/classify/function.json) therefore retries without limit: a
//! batch that cannot be stored is delivered again and again, its offsets stay
//! uncommitted, the topic holds the backlog (consumer lag grows), and ingest resumes when
//! Redis returns. The host emulation follows the policy read from function.json, on a
//! virtual clock the handler reads too; with a bounded policy (the former 5 retries) the
//! first batch is committed unstored about 40 s into the outage.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::time::Duration;

use fault_rig::{Rig, RigOptions};
use serde_json::Value;
use stormgate_e2e::functions_host::{PlatformFacts, retry_policy_of};
use stormgate_e2e::tickets::event;
use stormgate_shared::store::Store;
use stormgate_shared::ticket_id::TicketId;

const OUTAGE: Duration = Duration::from_secs(30 * 60);
/// Records keep arriving for this long (two tickets a minute).
const RUN: Duration = Duration::from_secs(45 * 60);
const PRODUCE_EVERY: Duration = Duration::from_secs(60);
/// host.json `extensions.kafka.maxBatchSize`.
const MAX_BATCH: usize = 100;

/// The world's virtual time and the producer on it.
struct Timeline {
    now: Duration,
    produced_until: Duration,
    next_ticket: u16,
    link_down: bool,
}

impl Timeline {
    /// Moves every instance's clock on by `d`, producing what the producer sends
    /// meanwhile and ending the outage when its time has come.
    fn advance(&mut self, rig: &mut Rig, d: Duration) {
        self.now += d;
        rig.advance_clock(d);
        self.catch_up(rig);
    }

    fn catch_up(&mut self, rig: &mut Rig) {
        while self.produced_until <= self.now.min(RUN) {
            let (a, b) = (self.next_ticket, self.next_ticket + 1);
            rig.topic
                .produce([event(a, a.div_ceil(4), 1), event(b, b.div_ceil(4), 1)]);
            self.next_ticket += 2;
            self.produced_until += PRODUCE_EVERY;
        }
        if self.link_down && self.now >= OUTAGE {
            rig.link.up();
            self.link_down = false;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_30_minute_redis_outage_only_delays_ingest_and_loses_nothing() {
    let facts = PlatformFacts::load();
    let policy = retry_policy_of("classify").expect("classify has a retry policy");
    let mut rig = Rig::start(RigOptions::default()).await;
    rig.link.down();
    let mut time = Timeline {
        now: Duration::ZERO,
        produced_until: Duration::ZERO,
        next_ticket: 1,
        link_down: true,
    };
    time.catch_up(&mut rig);

    let mut committed = 0;
    let mut committed_unstored: Vec<std::ops::Range<usize>> = Vec::new();
    let mut first_loss_at = None;
    let (mut failures, mut max_lag) = (0, 0);
    loop {
        max_lag = max_lag.max(rig.topic.len() - committed);
        if committed == rig.topic.len() {
            if time.now >= RUN {
                break;
            }
            time.advance(&mut rig, PRODUCE_EVERY);
            continue;
        }
        // The partition's next batch, delivered under the function's retry policy.
        let batch = committed..rig.topic.len().min(committed + MAX_BATCH);
        let mut retry = 0;
        loop {
            let answer = rig
                .host
                .classify(&rig.handler_url(), rig.topic.records(batch.clone()))
                .await;
            if answer.is_success() {
                break;
            }
            failures += 1;
            max_lag = max_lag.max(rig.topic.len() - committed);
            retry += 1;
            match policy.delay_before(retry) {
                Some(delay) => time.advance(&mut rig, delay),
                None => {
                    assert!(facts.commits_when_retries_end_in_failure);
                    committed_unstored.push(batch.clone());
                    first_loss_at.get_or_insert(time.now);
                    break;
                }
            }
        }
        committed = batch.end;
    }

    assert!(
        committed_unstored.is_empty(),
        "offsets committed without their events stored (the retry policy first gave up \
         {first_loss_at:?} into the outage): {committed_unstored:?}"
    );
    let produced = rig.topic.len();
    let mut missing = Vec::new();
    for n in 1..=produced as u16 {
        let id: TicketId = format!("{n:032x}").parse().unwrap();
        if rig.store.ticket_snapshot(&id).await.unwrap().is_none() {
            missing.push(n);
        }
    }
    assert!(missing.is_empty(), "tickets never stored: {missing:?}");
    assert!(failures >= 10, "the outage failed {failures} invocations");
    assert!(
        max_lag >= 60,
        "the backlog waited in the topic: at most {max_lag} records behind"
    );

    // Every failed invocation named its batch's place in the topic.
    let log = rig.handler.log_tail(1_000_000);
    let failed: Vec<Value> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line.to_string().contains("classify batch failed"))
        .collect();
    assert!(
        failed.len() >= failures,
        "{} failure lines for {failures} failures",
        failed.len()
    );
    for line in &failed {
        let text = line.to_string();
        for field in [
            "servicenow.incident",
            "\"partition\"",
            "\"first_offset\"",
            "\"last_offset\"",
        ] {
            assert!(text.contains(field), "{field} missing from {text}");
        }
    }
}
