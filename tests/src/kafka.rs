//! A Kafka topic as the `classify` trigger sees it: records with partition and offset,
//! delivered in batches exactly as the host encodes a `cardinality: many`,
//! `dataType: string` batch (a string holding a JSON array of strings, each a
//! `KafkaEventData` with base64 header values). Tests deliver ranges again (replay after
//! a consumer-group reset), twice (at-least-once), or out of order.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use base64::Engine;
use serde_json::{Value, json};

pub const TOPIC: &str = "servicenow.incident";

/// One record of the topic.
#[derive(Debug, Clone, PartialEq)]
pub struct KafkaRecord {
    pub partition: i64,
    pub offset: i64,
    /// The ServiceNow incident event (the record's value).
    pub event: Value,
}

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
    let header = base64::engine::general_purpose::STANDARD.encode("incident");
    let action = base64::engine::general_purpose::STANDARD.encode("update");
    let encoded: Vec<String> = records
        .iter()
        .map(|r| {
            json!({
                "Offset": r.offset, "Partition": r.partition, "Topic": TOPIC,
                "Timestamp": "2027-01-15T08:30:00Z", "Key": r.event["sys_id"],
                "Value": r.event.to_string(),
                "Headers": [{"Key": "table_name", "Value": header},
                            {"Key": "action", "Value": action}],
            })
            .to_string()
        })
        .collect();
    json!({
        "Data": {"events": serde_json::to_string(&encoded).unwrap()},
        "Metadata": {"sys": {"MethodName": "classify", "UtcNow": "2027-01-15T08:30:01Z", "RandGuid": "r"}}
    })
}
