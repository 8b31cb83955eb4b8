//! What the handler tests send as the Functions host would: ServiceNow incident events
//! in a host-shaped Kafka batch, timer invocations, and queue-triggered hand-offs.

// Each test binary uses part of this module.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use base64::Engine;
use serde_json::{Value, json};
use stormgate_shared::sample_events;

/// A realistic storm ticket: ticket `n`, ServiceNow priority `priority` ("1".."5"), in
/// progress, with a few kilobytes of alarm log. Priorities 4 and 5 describe one slow
/// line rather than an outage, so that the classifier leaves them low.
pub fn incident(n: u64, priority: &str) -> Value {
    let mut rng = sample_events::rng(n);
    let mut event = sample_events::storm_event(&mut rng, n, 1, 3_000);
    event["priority"] = json!(priority);
    event["state"] = json!("2");
    if matches!(priority, "4" | "5") {
        event["short_description"] = json!("Customer reports slow speeds in the evening");
        event["description"] = json!(
            "One residential line, speed test 40 of 100 Mbit/s. No alarms on the access node."
        );
        event["u_customers_affected"] = json!("1");
        event["u_alarm_log"] = json!("");
        event["parent_incident"] = Value::Null;
    }
    event
}

/// The `sys_id` of [`incident`] `n`.
pub fn sys_id(n: u64) -> String {
    sample_events::sys_id(n)
}

/// A `classify` invocation exactly as the host sends a `cardinality: many`,
/// `dataType: string` Kafka batch: `Data.events` is a string holding a JSON array of
/// strings, each a `KafkaEventData` whose header values are base64.
pub fn kafka_invocation(events: &[Value]) -> Value {
    let header = base64::engine::general_purpose::STANDARD.encode("incident");
    let records: Vec<String> = events
        .iter()
        .enumerate()
        .map(|(offset, event)| {
            json!({
                "Offset": offset, "Partition": 0, "Topic": "servicenow.incident",
                "Timestamp": "2026-11-29T10:00:00Z", "Key": null,
                "Value": event.to_string(),
                "Headers": [{"Key": "table_name", "Value": header}],
            })
            .to_string()
        })
        .collect();
    json!({
        "Data": {"events": serde_json::to_string(&records).unwrap()},
        "Metadata": {"sys": {"MethodName": "classify", "UtcNow": "2026-11-29T10:00:01Z", "RandGuid": "r"}}
    })
}

/// A `dispatch` timer invocation (the host sends the timer info as a JSON string).
pub fn timer_invocation() -> Value {
    let timer = json!({
        "Schedule": {"AdjustForDST": true},
        "ScheduleStatus": {"Last": "2026-11-29T10:00:00+00:00", "Next": "2026-11-29T10:00:05+00:00",
                           "LastUpdated": "2026-11-29T10:00:00+00:00"},
        "IsPastDue": false
    });
    json!({
        "Data": {"timer": timer.to_string()},
        "Metadata": {"sys": {"MethodName": "dispatch", "UtcNow": "2026-11-29T10:00:05Z", "RandGuid": "t"}}
    })
}

/// The invocation the host sends a queue-triggered function for one queue message:
/// the message's JSON as a string, with the queue's metadata.
pub fn queue_invocation(binding: &str, message: &Value) -> Value {
    json!({
        "Data": {binding: message.to_string()},
        "Metadata": {"DequeueCount": "1", "Id": "m", "PopReceipt": "p",
                     "InsertionTime": "2026-11-29T10:00:05+00:00"}
    })
}

/// The messages a response put in queue output binding `name` (none when absent).
pub fn queue_messages(response: &Value, name: &str) -> Vec<Value> {
    match &response["Outputs"][name] {
        Value::Null => Vec::new(),
        Value::Array(messages) => messages.clone(),
        other => panic!("{name} is not an array of messages: {other}"),
    }
}
