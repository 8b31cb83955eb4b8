//! Fault suite: Azure OpenAI throttling storms, 5xx bursts, timeouts and a daily quota
//! (Retry-After 86400 s), against the product's simulator over HTTP with the real
//! client, retry layer and governor. Measured on the wire (the recording proxy): calls
//! per job never exceed the retry bound, retries do not come back in synchronized
//! waves, and every job still ends with a summary (the LLM's or the fallback), its
//! customer notice delivered.
//!
//! Mechanisms proven: `retry_bound`, `retry_jitter`, `extractive_fallback`,
//! `fleet_cooldown` (each, switched off, makes a test here fail).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fault_rig::{PREMIUM, Rig, RigOptions, STANDARD, request_kind};
use serde_json::Value;
use stormgate_e2e::recording_proxy::Exchange;
use stormgate_e2e::tickets::event;
use stormgate_lab::simulator::{Faults, HeaderVariant};
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::retry::RetryPolicy;
use stormgate_shared::store::Store;

/// Tickets `from..=to`, each its own outage: one tier invocation per job, all at once.
fn separate_outages(from: u16, to: u16) -> Vec<Value> {
    (from..=to).map(|n| event(n, n, 1)).collect()
}

/// Arrival instants of each job's calls, per (ticket number, kind), in order.
fn calls_per_job(exchanges: &[Exchange]) -> BTreeMap<(String, SummaryKind), Vec<Instant>> {
    let mut calls: BTreeMap<(String, SummaryKind), Vec<Instant>> = BTreeMap::new();
    for e in exchanges {
        let Some(kind) = request_kind(e) else {
            continue;
        };
        for number in e.ticket_numbers() {
            calls.entry((number, kind)).or_default().push(e.at);
        }
    }
    calls
}

fn assert_within_the_call_bound(calls: &BTreeMap<(String, SummaryKind), Vec<Instant>>) {
    let bound = RetryPolicy::default().max_attempts as usize;
    let over: Vec<_> = calls
        .iter()
        .filter(|(_, c)| c.len() > bound)
        .map(|(job, c)| (job, c.len()))
        .collect();
    assert!(over.is_empty(), "jobs over {bound} calls: {over:?}");
}

/// How the retries (every call after a job's first) arrived on the wire.
#[derive(Debug)]
struct RetrySpread {
    retries: usize,
    /// The most retries arriving within any 50 ms: a synchronized wave puts a whole
    /// round of retries there (all of them within a few tens of milliseconds).
    largest_burst: usize,
    /// First to last retry, in milliseconds.
    span_ms: u128,
}

impl RetrySpread {
    const BURST: Duration = Duration::from_millis(50);

    fn measure(calls: &BTreeMap<(String, SummaryKind), Vec<Instant>>) -> RetrySpread {
        let mut retries: Vec<Instant> = calls
            .values()
            .flat_map(|c| c.iter().skip(1))
            .copied()
            .collect();
        retries.sort();
        let largest_burst = (0..retries.len())
            .map(|i| {
                retries[i..]
                    .iter()
                    .take_while(|t| t.duration_since(retries[i]) < Self::BURST)
                    .count()
            })
            .max()
            .unwrap_or(0);
        RetrySpread {
            retries: retries.len(),
            largest_burst,
            span_ms: match (retries.first(), retries.last()) {
                (Some(a), Some(b)) => (*b - *a).as_millis(),
                _ => 0,
            },
        }
    }

    /// No synchronized waves: enough retries to judge, and no 50 ms holding more than a
    /// fifth of them (random spreading over the backoff windows puts a few there; a
    /// wave puts a whole round).
    fn assert_no_waves(&self) {
        eprintln!("retry spread: {self:?}");
        assert!(self.retries >= 6, "too few retries to judge: {self:?}");
        assert!(self.span_ms >= 500, "retries all at one moment: {self:?}");
        assert!(
            self.largest_burst <= (self.retries / 5).max(2),
            "retries came back in a synchronized wave: {self:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttling_storm_keeps_the_call_bound_spreads_retries_and_delivers_fallbacks() {
    let mut rig = Rig::start(RigOptions {
        faults: Faults {
            throttle_rate: 1.0,
            throttle_retry_after_ms: 300,
            headers: HeaderVariant::Full,
            ..Faults::default()
        },
        ..RigOptions::default()
    })
    .await;
    let events = separate_outages(1, 16);
    let expected = Rig::expected_jobs(&events);
    let all = rig.topic.produce(events);
    rig.classify(all).await;
    rig.settle(10).await;

    let calls = calls_per_job(&rig.llm.exchanges());
    assert_within_the_call_bound(&calls);
    RetrySpread::measure(&calls).assert_no_waves();
    rig.assert_every_job_settled(&expected).await;
    rig.assert_every_customer_notified(&expected);
    rig.assert_nothing_duplicated(1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_burst_is_retried_within_the_bound_without_waves_and_summaries_follow() {
    let mut rig = Rig::start(RigOptions {
        faults: Faults {
            server_error_rate: 1.0,
            ..Faults::default()
        },
        ..RigOptions::default()
    })
    .await;
    let events = separate_outages(1, 16);
    let expected = Rig::expected_jobs(&events);
    let all = rig.topic.produce(events);
    rig.classify(all).await;
    // The burst ends 1.5 s in; retries still in their budget meet a healthy service.
    let core = rig.simulator.core().clone();
    let burst = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        for deployment in [PREMIUM, STANDARD] {
            core.set_faults(deployment, Faults::default()).unwrap();
        }
    });
    rig.settle(10).await;
    burst.await.unwrap();

    let calls = calls_per_job(&rig.llm.exchanges());
    assert_within_the_call_bound(&calls);
    RetrySpread::measure(&calls).assert_no_waves();
    rig.assert_every_job_settled(&expected).await;
    rig.assert_every_customer_notified(&expected);
    rig.assert_nothing_duplicated(1);
    let llm = fault_rig::llm_answers_per_job(&rig.llm.exchanges()).len();
    assert!(
        llm * 2 >= expected.len(),
        "most jobs got their LLM summary once the burst ended: {llm} of {}",
        expected.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_retried_within_the_bound_without_waves_and_fall_back() {
    let mut rig = Rig::start(RigOptions {
        faults: Faults {
            timeout_rate: 1.0,
            ..Faults::default()
        },
        hang: Duration::from_millis(300),
        ..RigOptions::default()
    })
    .await;
    let events = separate_outages(1, 8);
    let expected = Rig::expected_jobs(&events);
    let all = rig.topic.produce(events);
    rig.classify(all).await;
    rig.settle(10).await;

    let calls = calls_per_job(&rig.llm.exchanges());
    assert_within_the_call_bound(&calls);
    RetrySpread::measure(&calls).assert_no_waves();
    rig.assert_every_job_settled(&expected).await;
    rig.assert_every_customer_notified(&expected);
    for job in &expected {
        let summary = rig
            .store
            .summary(&job.ticket, job.kind)
            .await
            .unwrap()
            .unwrap();
        assert!(summary.degraded, "{} {}: {summary:?}", job.number, job.kind);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daily_quota_is_not_waited_out_the_fleet_stops_calling_and_work_spills() {
    let mut rig = Rig::start(RigOptions::default()).await;
    rig.simulator
        .core()
        .set_faults(
            PREMIUM,
            Faults {
                daily_quota_exhausted: true,
                ..Faults::default()
            },
        )
        .unwrap();
    let first = separate_outages(1, 8);
    let later = separate_outages(9, 16);
    let expected = Rig::expected_jobs(&[first.clone(), later.clone()].concat());
    let first = rig.topic.produce(first);
    let later = rig.topic.produce(later);

    // The first wave: every premium call admitted before the quota was known meets the
    // 86400 s answer once, and its job falls back at once instead of waiting a day.
    rig.classify(first).await;
    let started = Instant::now();
    rig.settle(1).await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "a daily quota was waited out: {:?}",
        started.elapsed()
    );
    let wave = premium_calls(&rig);
    assert!(wave > 0);

    // Later tickets: the fleet knows premium is down; their work spills to standard and
    // premium is not called again.
    rig.classify(later).await;
    rig.settle(10).await;
    assert_eq!(
        premium_calls(&rig),
        wave,
        "premium was called again after it answered Retry-After 86400"
    );
    rig.assert_every_job_settled(&expected).await;
    rig.assert_every_customer_notified(&expected);
    rig.assert_nothing_duplicated(1);
    for job in expected.iter().filter(|j| j.number.as_str() > "INC0010008") {
        let summary = rig
            .store
            .summary(&job.ticket, job.kind)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (summary.tier, summary.degraded),
            (Tier::Standard, false),
            "{} {}",
            job.number,
            job.kind
        );
    }
}

fn premium_calls(rig: &Rig) -> usize {
    rig.llm
        .exchanges()
        .iter()
        .filter(|e| e.deployment == PREMIUM)
        .count()
}
