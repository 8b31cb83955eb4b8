//! A Kafka topic as the `classify` trigger sees it: records with partition and offset,
//! delivered in batches exactly as the host encodes a `cardinality: many`,
//! `dataType: string` batch (a string holding a JSON array of strings, each a
//! `KafkaEventData` with base64 header values). Tests deliver ranges again (replay after
//! a consumer-group reset), twice (at-least-once), or out of order.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use serde_json::Value;
pub use stormgate_lab::functions_host::KafkaRecord;
use stormgate_lab::functions_host::payloads::{INCIDENT_TOPIC, kafka_batch};
use stormgate_lab::functions_host::runtime::wall_clock;

pub const TOPIC: &str = INCIDENT_TOPIC;

/// A topic's records in the order they were produced, one partition.
#[derive(Debug, Clone, Default)]
pub struct Topic {
    records: Vec<KafkaRecord>,
}

impl Topic {
    pub fn new() -> Topic {
        Topic::default()
    }

    /// Appends events; returns their offsets.
    pub fn produce(&mut self, events: impl IntoIterator<Item = Value>) -> std::ops::Range<usize> {
        let first = self.records.len();
        for event in events {
            let offset = self.records.len() as i64;
            self.records.push(KafkaRecord {
                partition: 0,
                offset,
                event,
            });
        }
        first..self.records.len()
    }

    pub fn records(&self, range: std::ops::Range<usize>) -> &[KafkaRecord] {
        &self.records[range]
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// The `classify` invocation the host sends for these records.
pub fn batch_invocation(records: &[KafkaRecord]) -> Value {
    kafka_batch("events", records, wall_clock())
}
