//! Event decode + parse: what `/classify` does with the host's HTTP body before any
//! classification: the invocation JSON, the Kafka batch's layers of JSON-in-a-string,
//! each `KafkaEventData`, and the ServiceNow event itself. Host-shaped batches of 100
//! storm tickets with 8–20 KB alarm logs (the load test's own batches).
//!
//! Run: `cargo bench -p stormgate-handlers --bench invocation_decode`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench setup

use divan::Bencher;
use divan::counter::{BytesCount, ItemsCount};
use stormgate_handlers::cli::loadtest::batches::BatchTemplate;
use stormgate_handlers::functions::classify::{EVENTS_BINDING, raw_event};
use stormgate_handlers::invocation::InvocationRequest;
use stormgate_shared::event::parse_event;
use stormgate_shared::ingest::{IngestPolicy, RawEvent};

const EVENTS: usize = 100;

fn main() {
    divan::main();
}

fn body() -> Vec<u8> {
    BatchTemplate::new(EVENTS, 8 * 1024..=20 * 1024, 1)
        .unwrap()
        .body(1)
}

fn decode(body: &[u8]) -> Vec<RawEvent> {
    let mut request = InvocationRequest::from_slice(body).unwrap();
    let records = request.take_kafka_records(EVENTS_BINDING).unwrap();
    records.filter_map(Result::ok).map(raw_event).collect()
}

/// HTTP body to the parser's input (`RawEvent`s), per event.
#[divan::bench]
fn decode_host_batch(bencher: Bencher) {
    let body = body();
    bencher.counter(ItemsCount::new(EVENTS)).bench(|| {
        let events = decode(divan::black_box(&body));
        assert_eq!(events.len(), EVENTS);
        events
    });
}

/// HTTP body to parsed tickets, per event; bytes are the HTTP body's.
#[divan::bench]
fn decode_and_parse_host_batch(bencher: Bencher) {
    let body = body();
    let limits = IngestPolicy::default().parse_limits;
    bencher
        .counter(ItemsCount::new(EVENTS))
        .counter(BytesCount::new(body.len()))
        .bench(|| {
            decode(divan::black_box(&body))
                .iter()
                .map(|e| parse_event(&e.value, &e.headers, limits).is_ok())
                .filter(|ok| *ok)
                .count()
        });
}
