//! Event decode + parse: what `/classify` does with the host's HTTP body before any
//! classification: the invocation JSON, the Kafka batch's layers of JSON-in-a-string,
//! each `KafkaEventData`, and the ServiceNow event itself. Host-shaped batches of 100
//! storm tickets with 8–20 KB alarm logs (the load test's own batches).
//!
//! `serde_layers_floor` is the yardstick beside them: the least any decoder that peels the
//! host's layers with serde one at a time (as REFERENCE.md prescribes) must do to reach each
//! ticket's text, with nothing kept but the texts and no records built.
//!
//! Run: `cargo bench -p stormgate-cli --bench invocation_decode`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // bench setup

use std::collections::HashMap;

use divan::Bencher;
use divan::counter::{BytesCount, ItemsCount};
use stormgate_cli::loadtest::batches::BatchTemplate;
use stormgate_handlers::functions::classify::{EVENTS_BINDING, raw_event};
use stormgate_handlers::invocation::InvocationRequest;
use stormgate_shared::event::parse_event;
use stormgate_shared::ingest::{IngestPolicy, RawEvent};

/// The invocation body reduced to what the floor needs: string bindings.
#[derive(serde::Deserialize)]
struct BodyFloor {
    #[serde(rename = "Data")]
    data: HashMap<String, String>,
}

/// A `KafkaEventData` reduced to its value.
#[derive(serde::Deserialize)]
struct RecordFloor {
    #[serde(rename = "Value")]
    value: String,
}

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

/// The floor of the layered decode, per event: the body's batch string, the array's
/// element strings and each record's `Value`, each unescaped by serde exactly once.
#[divan::bench]
fn serde_layers_floor(bencher: Bencher) {
    let body = body();
    bencher.counter(ItemsCount::new(EVENTS)).bench(|| {
        let request: BodyFloor = serde_json::from_slice(divan::black_box(&body)).unwrap();
        let elements: Vec<String> = serde_json::from_str(&request.data[EVENTS_BINDING]).unwrap();
        let texts: Vec<String> = elements
            .iter()
            .map(|e| serde_json::from_str::<RecordFloor>(e).unwrap().value)
            .collect();
        assert_eq!(texts.len(), EVENTS);
        texts
    });
}
