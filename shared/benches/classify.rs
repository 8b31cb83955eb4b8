//! Classify+enqueue throughput: batches of 100 storm tickets with 8–20 KB alarm logs, per
//! core (single-threaded runtime), and where the time goes (parse, bounding, classify,
//! extractive summary, snapshot encoding, store).
//!
//! `cargo bench -p stormgate-shared --bench classify`; divan reports tickets/s per stage.

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench setup

use std::cell::Cell;

use divan::Bencher;
use divan::counter::ItemsCount;
use stormgate_shared::classifier::Classifier;
use stormgate_shared::classifier::features::{AlarmCounts, FeatureInput};
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::event::{CdcHeaders, parse_event};
use stormgate_shared::extractive;
use stormgate_shared::ingest::{IngestContext, IngestPolicy, RawEvent, classify_batch, prepare};
use stormgate_shared::log_bounding::{BoundedLog, bound_lines};
use stormgate_shared::sample_events::{rng, storm_event};
use stormgate_shared::snapshot::TicketSnapshot;
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::ticket::Ticket;

const BATCH: usize = 100;

fn main() {
    divan::main();
}

fn batch(seed: u64, version: u64) -> Vec<RawEvent> {
    let mut r = rng(seed);
    (0..BATCH as u64)
        .map(|n| {
            // Log sizes spread over 8–20 KB.
            let log_bytes = 8 * 1024 + (n as usize * 12 * 1024 / BATCH);
            let value = storm_event(&mut r, n + 1, version, log_bytes)
                .to_string()
                .into_bytes();
            RawEvent {
                value,
                headers: CdcHeaders::default(),
                topic: Some("t".into()),
                partition: Some(0),
                offset: Some(n as i64),
            }
        })
        .collect()
}

fn parsed(events: &[RawEvent]) -> Vec<Ticket> {
    let policy = IngestPolicy::default();
    events
        .iter()
        .map(|e| parse_event(&e.value, &e.headers, policy.parse_limits).unwrap())
        .collect()
}

fn bounded(tickets: &[Ticket]) -> Vec<BoundedLog> {
    let policy = IngestPolicy::default();
    tickets
        .iter()
        .map(|t| bound_lines(t.alarm_lines(), policy.bounding))
        .collect()
}

#[divan::bench]
fn stage_1_parse(bencher: Bencher) {
    let events = batch(1, 1);
    let policy = IngestPolicy::default();
    bencher.counter(ItemsCount::new(BATCH)).bench(|| {
        for e in &events {
            divan::black_box(parse_event(&e.value, &e.headers, policy.parse_limits).is_ok());
        }
    });
}

#[divan::bench]
fn stage_2_bound_log(bencher: Bencher) {
    let tickets = parsed(&batch(1, 1));
    let policy = IngestPolicy::default();
    bencher.counter(ItemsCount::new(BATCH)).bench(|| {
        for t in &tickets {
            divan::black_box(bound_lines(t.alarm_lines(), policy.bounding));
        }
    });
}

#[divan::bench]
fn stage_3_classify(bencher: Bencher) {
    let tickets = parsed(&batch(1, 1));
    let logs = bounded(&tickets);
    let classifier = Classifier::embedded().unwrap();
    bencher.counter(ItemsCount::new(BATCH)).bench(|| {
        for (t, log) in tickets.iter().zip(&logs) {
            divan::black_box(classifier.predict(&FeatureInput::from_ticket(t, log)));
        }
    });
}

#[divan::bench]
fn stage_4_technician_summary(bencher: Bencher) {
    let tickets = parsed(&batch(1, 1));
    let logs = bounded(&tickets);
    let classifier = Classifier::embedded().unwrap();
    let snapshots: Vec<TicketSnapshot> = tickets
        .into_iter()
        .zip(&logs)
        .map(|(t, log)| {
            let p = classifier.predict(&FeatureInput::from_ticket(&t, log));
            let routing = p.routing.min(t.severity);
            TicketSnapshot::new(t, log.clone(), p, routing, EpochMillis(0))
        })
        .collect();
    // As ingest makes it: from the bounded log and its alarm counts in hand.
    bencher.counter(ItemsCount::new(BATCH)).bench(|| {
        for (s, log) in snapshots.iter().zip(&logs) {
            let counts = AlarmCounts::from_bounded(log);
            divan::black_box(extractive::technician_from(s, log, counts));
        }
    });
}

#[divan::bench]
fn stage_5_prepare_record_all_cpu(bencher: Bencher) {
    let events = batch(1, 1);
    let classifier = Classifier::embedded().unwrap();
    let policy = IngestPolicy::default();
    let store = MemoryStore::new();
    let clock = ManualClock::starting_at(EpochMillis(1_764_410_400_000));
    let ctx = IngestContext {
        store: &store,
        clock: &clock,
        classifier: &classifier,
        policy: &policy,
    };
    bencher.counter(ItemsCount::new(BATCH)).bench(|| {
        for e in &events {
            let t = parse_event(&e.value, &e.headers, policy.parse_limits).unwrap();
            divan::black_box(prepare(t, &ctx, EpochMillis(0)).is_ok());
        }
    });
}

#[divan::bench]
fn classify_and_enqueue_memory_store(bencher: Bencher) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let events = batch(1, 1);
    let classifier = Classifier::embedded().unwrap();
    let policy = IngestPolicy::default();
    let clock = ManualClock::starting_at(EpochMillis(1_764_410_400_000));
    bencher
        .counter(ItemsCount::new(BATCH))
        .with_inputs(MemoryStore::new)
        .bench_local_values(|store| {
            let ctx = IngestContext {
                store: &store,
                clock: &clock,
                classifier: &classifier,
                policy: &policy,
            };
            let outcome = runtime.block_on(classify_batch(&events, &ctx)).unwrap();
            assert_eq!(outcome.accepted as usize, BATCH);
            store
        });
}

/// Against a local `redis-server` (started here): every batch is a new version of the same
/// 100 tickets, so each one is accepted and supersedes the previous version's jobs.
#[divan::bench]
fn classify_and_enqueue_redis_store(bencher: Bencher) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start().unwrap();
    let store = server.store("bench").unwrap();
    let classifier = Classifier::embedded().unwrap();
    let policy = IngestPolicy::default();
    let clock = ManualClock::starting_at(EpochMillis(1_764_410_400_000));
    let version = Cell::new(0u64);
    bencher
        .counter(ItemsCount::new(BATCH))
        .with_inputs(|| {
            version.set(version.get() + 1);
            batch(1, version.get())
        })
        .bench_local_values(|events| {
            let ctx = IngestContext {
                store: &store,
                clock: &clock,
                classifier: &classifier,
                policy: &policy,
            };
            let outcome = runtime.block_on(classify_batch(&events, &ctx)).unwrap();
            assert_eq!(outcome.accepted as usize, BATCH);
            events
        });
    eprintln!("redis round trips over the run: {}", store.round_trips());
}
