//! The invocation payloads the host sends a custom handler, per trigger: `{Data,
//! Metadata}` with the trigger's value under its binding name, encoded as the host
//! encodes it (a timer's info and a queue message as JSON strings; a Kafka batch with
//! `cardinality: many`, `dataType: string` as a string holding a JSON array of strings,
//! each a `KafkaEventData` whose header values are base64). A retried invocation carries
//! `Metadata.RetryContext`.

use base64::Engine;
use serde_json::{Value, json};
use stormgate_shared::clock::EpochMillis;

/// One record of a Kafka topic.
#[derive(Debug, Clone, PartialEq)]
pub struct KafkaRecord {
    pub partition: i64,
    pub offset: i64,
    /// The ServiceNow incident event (the record's value).
    pub event: Value,
}

/// The topic name the Kafka records of the emulation carry.
pub const INCIDENT_TOPIC: &str = "servicenow.incident";

fn rfc3339(at: EpochMillis) -> String {
    jiff::Timestamp::from_millisecond(i64::try_from(at.0).unwrap_or(i64::MAX))
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// The `cardinality: many` Kafka invocation of `binding` for these records.
pub fn kafka_batch(binding: &str, records: &[KafkaRecord], now: EpochMillis) -> Value {
    let engine = base64::engine::general_purpose::STANDARD;
    let (table, action) = (engine.encode("incident"), engine.encode("update"));
    let timestamp = rfc3339(now);
    let encoded: Vec<String> = records
        .iter()
        .map(|r| {
            json!({
                "Offset": r.offset, "Partition": r.partition, "Topic": INCIDENT_TOPIC,
                "Timestamp": timestamp, "Key": r.event["sys_id"],
                "Value": r.event.to_string(),
                "Headers": [{"Key": "table_name", "Value": table},
                            {"Key": "action", "Value": action}],
            })
            .to_string()
        })
        .collect();
    let array = Value::from(encoded).to_string();
    json!({
        "Data": {binding: array},
        "Metadata": {"sys": {"MethodName": "classify", "UtcNow": timestamp, "RandGuid": "r"}}
    })
}

/// What a timer invocation says about its schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerFiring {
    pub last: EpochMillis,
    pub next: EpochMillis,
    /// The host fired it later than scheduled (the previous run overran).
    pub past_due: bool,
}

/// A timer invocation of `binding` (the host sends the timer info as a string).
pub fn timer(function: &str, binding: &str, firing: TimerFiring, now: EpochMillis) -> Value {
    let info = json!({
        "Schedule": {"AdjustForDST": true},
        "ScheduleStatus": {"Last": rfc3339(firing.last), "Next": rfc3339(firing.next),
                           "LastUpdated": rfc3339(firing.last)},
        "IsPastDue": firing.past_due
    });
    json!({
        "Data": {binding: info.to_string()},
        "Metadata": {"sys": {"MethodName": function, "UtcNow": rfc3339(now), "RandGuid": "t"}}
    })
}

/// The invocation for one queue message of `binding`: its JSON as a string, with the
/// queue's metadata (`DequeueCount` counts this delivery).
pub fn queue_message(
    binding: &str,
    body: &Value,
    id: &str,
    dequeue_count: u32,
    inserted: EpochMillis,
) -> Value {
    json!({
        "Data": {binding: body.to_string()},
        "Metadata": {"DequeueCount": dequeue_count.to_string(), "Id": id,
                     "PopReceipt": "p", "InsertionTime": rfc3339(inserted)}
    })
}

/// `invocation` as the host sends it on retry number `retry` of a function whose policy
/// allows `max_retry_count` (-1: without end).
pub fn with_retry_context(mut invocation: Value, retry: u32, max_retry_count: i64) -> Value {
    if let Some(metadata) = invocation
        .get_mut("Metadata")
        .and_then(Value::as_object_mut)
    {
        let context =
            json!({"RetryCount": retry, "MaxRetryCount": max_retry_count, "Exception": null});
        metadata.insert("RetryContext".into(), Value::String(context.to_string()));
    }
    invocation
}
