//! Host-shaped Kafka batches for the load test: what the Functions host POSTs to
//! `/classify` for a `cardinality: many`, `dataType: string` Kafka trigger.
//!
//! A batch is rendered once as a template whose ticket ids carry a placeholder; each
//! request copies it and writes its own serial there, so every request brings new
//! tickets (nothing is a duplicate) without the load generator re-encoding megabytes.

use std::ops::RangeInclusive;

use base64::Engine;
use serde_json::{Value, json};
use stormgate_shared::sample_events::{rng, storm_event};

/// Eight characters no rendered event contains elsewhere; replaced by a hex serial.
const SERIAL_MARK: &[u8; 8] = b"QQQQQQQQ";

/// A rendered batch body with the positions of its serial placeholders.
#[derive(Debug, Clone)]
pub struct BatchTemplate {
    body: Vec<u8>,
    marks: Vec<usize>,
    events: usize,
    event_bytes: usize,
}

#[derive(Debug, thiserror::Error)]
#[error("batch template has {found} serial placeholders for {events} events")]
pub struct TemplateError {
    found: usize,
    events: usize,
}

impl BatchTemplate {
    /// `events` storm tickets with alarm logs spread evenly over `log_bytes`, seeded.
    pub fn new(
        events: usize,
        log_bytes: RangeInclusive<usize>,
        seed: u64,
    ) -> Result<Self, TemplateError> {
        let mut r = rng(seed);
        let (low, high) = (*log_bytes.start(), *log_bytes.end());
        let mut event_bytes = 0;
        let elements: Vec<String> = (0..events)
            .map(|i| {
                let size = low + (high - low) * i / events.saturating_sub(1).max(1);
                let mut event = storm_event(&mut r, i as u64 + 1, 1, size);
                event["sys_id"] = Value::String(ticket_sys_id(i));
                let value = event.to_string();
                event_bytes += value.len();
                kafka_event_data(i, value)
            })
            .collect();
        let body = json!({
            "Data": {"events": Value::String(serde_json::Value::from(elements).to_string())},
            "Metadata": {"sys": {"MethodName": "classify", "UtcNow": "2026-11-29T21:40:00Z", "RandGuid": "0b6f1f5e-1c1b-4e0e-9a55-3f7f3c2f0a01"}},
        })
        .to_string()
        .into_bytes();
        let marks: Vec<usize> = body
            .windows(SERIAL_MARK.len())
            .enumerate()
            .filter(|(_, w)| *w == SERIAL_MARK)
            .map(|(at, _)| at)
            .collect();
        if marks.len() != events {
            return Err(TemplateError {
                found: marks.len(),
                events,
            });
        }
        Ok(BatchTemplate {
            body,
            marks,
            events,
            event_bytes,
        })
    }

    /// The body of request `serial`: the template with its tickets made unique.
    pub fn body(&self, serial: u32) -> Vec<u8> {
        let mut body = self.body.clone();
        let hex = format!("{serial:08x}");
        for &at in &self.marks {
            body[at..at + SERIAL_MARK.len()].copy_from_slice(hex.as_bytes());
        }
        body
    }

    pub fn events(&self) -> usize {
        self.events
    }

    /// Bytes of the events' JSON, before the host's layers of string encoding.
    pub fn event_bytes(&self) -> usize {
        self.event_bytes
    }

    /// Bytes of the HTTP body.
    pub fn body_bytes(&self) -> usize {
        self.body.len()
    }
}

/// 32 hex digits once the placeholder holds the serial: `5707`, serial, event index.
fn ticket_sys_id(index: usize) -> String {
    let mark = String::from_utf8_lossy(SERIAL_MARK);
    format!("5707{mark}{index:020x}")
}

/// One record as the Kafka extension serializes `KafkaEventData`, headers base64.
fn kafka_event_data(offset: usize, value: String) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({
        "Offset": offset, "Partition": 0, "Topic": "servicenow.incident",
        "Timestamp": "2026-11-29T21:40:00.000Z", "Key": null, "Value": value,
        "Headers": [
            {"Key": "table_name", "Value": b64("incident")},
            {"Key": "action", "Value": b64("update")},
        ],
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormgate_handlers::functions::classify::{EVENTS_BINDING, raw_event};
    use stormgate_handlers::invocation::InvocationRequest;
    use stormgate_shared::event::parse_event;
    use stormgate_shared::ingest::IngestPolicy;

    #[test]
    fn every_event_of_a_rendered_batch_parses_as_a_distinct_ticket_of_its_serial() {
        let template = BatchTemplate::new(5, 8_000..=20_000, 7).unwrap();
        let body = template.body(0x2a);
        let mut request = InvocationRequest::from_slice(&body).unwrap();
        let records = request.take_kafka_records(EVENTS_BINDING).unwrap();
        let limits = IngestPolicy::default().parse_limits;
        let ids: Vec<String> = records
            .map(|e| {
                let e = e.unwrap();
                let raw = raw_event(e);
                parse_event(&raw.value, &raw.headers, limits)
                    .unwrap()
                    .id
                    .to_string()
            })
            .collect();
        assert_eq!(ids.len(), 5);
        assert_eq!(ids[0], "57070000002a00000000000000000000");
        assert_eq!(ids[4], "57070000002a00000000000000000004");
        assert!(template.event_bytes() >= 5 * 8_000);
    }
}
