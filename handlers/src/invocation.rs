//! The Azure Functions custom-handler invocation payload: `{Data, Metadata}` in,
//! `{Outputs, Logs, ReturnValue}` out.
//!
//! The host does not send plain JSON values: a string binding value arrives JSON-encoded
//! inside the JSON, arrays and integers may arrive as JSON strings, and a Kafka batch
//! (`cardinality: many`, `dataType: string`) is a string holding a JSON array of strings,
//! each a serialized `KafkaEventData`. Everything here decodes layer by layer with serde
//! ([`decode_layered`]) and accepts the plain form as well, so tests and the host agree.

use std::borrow::Cow;
use std::fmt;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use base64::Engine;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::error::ApiError;

/// How many string layers [`decode_layered`] peels before giving up. The host adds at most
/// two; the bound keeps a hostile payload of nested strings from costing more.
const MAX_ENCODING_LAYERS: usize = 4;

/// Why a payload (or one part of it) could not be decoded. The message names the part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{context}: {reason}")]
pub struct DecodeError {
    pub context: String,
    pub reason: String,
}

impl DecodeError {
    fn new(context: impl Into<String>, reason: impl fmt::Display) -> Self {
        DecodeError {
            context: context.into(),
            reason: reason.to_string(),
        }
    }
}

impl From<DecodeError> for ApiError {
    fn from(e: DecodeError) -> Self {
        ApiError::BadRequest(e.to_string())
    }
}

/// Decodes `value` as `T`, peeling JSON-string layers the host may have added.
///
/// A value that already is a `T` is taken as it is (the plain form); a string that is not
/// a `T` is parsed as JSON and tried again, up to [`MAX_ENCODING_LAYERS`] times. Only the
/// layers parsed out of strings are owned: `value` itself is never copied.
pub fn decode_layered<T: DeserializeOwned>(value: &Value, context: &str) -> Result<T, DecodeError> {
    let mut current = Cow::Borrowed(value);
    for _ in 0..MAX_ENCODING_LAYERS {
        let direct_error = match T::deserialize(current.as_ref()) {
            Ok(decoded) => return Ok(decoded),
            Err(e) => e,
        };
        let Value::String(text) = current.as_ref() else {
            return Err(DecodeError::new(context, direct_error));
        };
        let inner: Value = serde_json::from_str(text).map_err(|_| {
            DecodeError::new(context, format!("{direct_error} (nor is the string JSON)"))
        })?;
        current = Cow::Owned(inner);
    }
    Err(DecodeError::new(
        context,
        "too many layers of JSON-in-a-string encoding",
    ))
}

/// Decodes a string binding value: a JSON-encoded string is unwrapped once, anything else
/// that is a string is taken literally (the plain form). Non-strings are an error.
pub fn decode_string(value: &Value, context: &str) -> Result<String, DecodeError> {
    match value {
        Value::String(text) => match serde_json::from_str::<String>(text) {
            Ok(inner) => Ok(inner),
            Err(_) => Ok(text.clone()),
        },
        other => Err(DecodeError::new(
            context,
            format!("expected a string, found {}", json_kind(other)),
        )),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What the host POSTs to `/<FunctionName>` for a non-HTTP trigger.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct InvocationRequest {
    /// Input binding values by binding name, as the host encoded them.
    #[serde(rename = "Data", default)]
    pub data: Map<String, Value>,
    #[serde(rename = "Metadata", default)]
    pub metadata: InvocationMetadata,
}

impl InvocationRequest {
    /// Parses the HTTP body the host sent. The error names what was wrong with it.
    pub fn from_slice(body: &[u8]) -> Result<Self, DecodeError> {
        serde_json::from_slice(body).map_err(|e| DecodeError::new("invocation body", e))
    }

    /// The raw value of input binding `name`; an error naming it when absent.
    pub fn binding(&self, name: &str) -> Result<&Value, DecodeError> {
        self.data
            .get(name)
            .ok_or_else(|| DecodeError::new(format!("binding {name:?}"), "missing from Data"))
    }

    /// Input binding `name` decoded as `T`, whatever layers of encoding the host added.
    pub fn decode_binding<T: DeserializeOwned>(&self, name: &str) -> Result<T, DecodeError> {
        decode_layered(self.binding(name)?, &format!("binding {name:?}"))
    }

    /// Takes input binding `name` out of the request as a Kafka batch whose records are
    /// decoded one at a time, as they are consumed (see [`KafkaRecords`]).
    pub fn take_kafka_records(&mut self, name: &str) -> Result<KafkaRecords, DecodeError> {
        let context = format!("binding {name:?}");
        let value = self
            .data
            .remove(name)
            .ok_or_else(|| DecodeError::new(&context, "missing from Data"))?;
        KafkaRecords::decode(value, &context)
    }

    /// Input binding `name` as a timer-trigger payload.
    pub fn timer(&self, name: &str) -> Result<TimerInfo, DecodeError> {
        self.decode_binding(name)
    }

    /// Input binding `name` as a queue message whose content is the JSON form of `T`.
    pub fn queue_message<T: DeserializeOwned>(&self, name: &str) -> Result<T, DecodeError> {
        self.decode_binding(name)
    }
}

impl<S: Send + Sync> FromRequest<S> for InvocationRequest {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let body = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::BadRequest(format!("invocation body could not be read: {e}")))?;
        Ok(InvocationRequest::from_slice(&body)?)
    }
}

/// `Metadata`: trigger metadata by name, plus the two entries every handler may need.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct InvocationMetadata {
    #[serde(default, deserialize_with = "layered_option")]
    pub sys: Option<SysMetadata>,
    /// Present when the function has a retry policy.
    #[serde(rename = "RetryContext", default, deserialize_with = "layered_option")]
    pub retry_context: Option<RetryContext>,
    /// Every other trigger metadata entry (e.g. a queue message's `DequeueCount`).
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl InvocationMetadata {
    /// Trigger metadata entry `name` decoded as `T`, if present.
    pub fn get<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, DecodeError> {
        self.other
            .get(name)
            .map(|v| decode_layered(v, &format!("metadata {name:?}")))
            .transpose()
    }

    /// How many times the queue has delivered this message (1 on the first delivery).
    pub fn dequeue_count(&self) -> Result<Option<u64>, DecodeError> {
        self.get("DequeueCount")
    }
}

fn layered_option<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Option::<Value>::deserialize(deserializer)?;
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => decode_layered(&v, "metadata")
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// `Metadata.sys`: which function ran, when, with a random id per invocation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct SysMetadata {
    #[serde(rename = "MethodName", default)]
    pub method_name: Option<String>,
    #[serde(rename = "UtcNow", default)]
    pub utc_now: Option<String>,
    #[serde(rename = "RandGuid", default)]
    pub rand_guid: Option<String>,
}

/// `Metadata.RetryContext`, present when a function.json retry policy is active.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct RetryContext {
    #[serde(rename = "RetryCount", default, deserialize_with = "layered_u32")]
    pub retry_count: u32,
    #[serde(rename = "MaxRetryCount", default, deserialize_with = "layered_u32")]
    pub max_retry_count: u32,
    #[serde(rename = "Exception", default)]
    pub exception: Option<Value>,
}

fn layered_u32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    let value = Value::deserialize(deserializer)?;
    decode_layered(&value, "retry count").map_err(serde::de::Error::custom)
}

/// A timer-trigger payload: `{Schedule, ScheduleStatus, IsPastDue}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct TimerInfo {
    #[serde(rename = "Schedule", default)]
    pub schedule: Option<Value>,
    #[serde(rename = "ScheduleStatus", default)]
    pub schedule_status: Option<ScheduleStatus>,
    #[serde(rename = "IsPastDue", default)]
    pub is_past_due: bool,
}

/// When the timer last fired and will fire next, as the host's timestamps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct ScheduleStatus {
    #[serde(rename = "Last", default)]
    pub last: Option<String>,
    #[serde(rename = "Next", default)]
    pub next: Option<String>,
    #[serde(rename = "LastUpdated", default)]
    pub last_updated: Option<String>,
}

/// One Kafka record, as the Kafka extension serializes `KafkaEventData`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KafkaEvent {
    #[serde(
        rename = "Offset",
        alias = "offset",
        default,
        deserialize_with = "layered_option"
    )]
    pub offset: Option<i64>,
    #[serde(
        rename = "Partition",
        alias = "partition",
        default,
        deserialize_with = "layered_option"
    )]
    pub partition: Option<i64>,
    #[serde(rename = "Topic", alias = "topic", default)]
    pub topic: Option<String>,
    #[serde(rename = "Timestamp", alias = "timestamp", default)]
    pub timestamp: Option<Value>,
    #[serde(rename = "Key", alias = "key", default)]
    pub key: Option<Value>,
    /// The message body as text. A producer's JSON object given in plain form is kept as
    /// its JSON text so the ticket parser sees one shape.
    #[serde(rename = "Value", alias = "value", deserialize_with = "message_text")]
    pub value: String,
    #[serde(
        rename = "Headers",
        alias = "headers",
        default,
        deserialize_with = "nullable_headers"
    )]
    pub headers: Vec<KafkaHeader>,
}

impl KafkaEvent {
    /// The first header named `key`, as UTF-8 text if it is text.
    pub fn header_text(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.key == key)
            .and_then(|h| std::str::from_utf8(&h.value).ok())
    }
}

fn message_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::String(text) => Ok(text),
        Value::Null => Err(serde::de::Error::custom("Value is null")),
        other => Ok(other.to_string()),
    }
}

fn nullable_headers<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<KafkaHeader>, D::Error> {
    Ok(Option::<Vec<KafkaHeader>>::deserialize(deserializer)?.unwrap_or_default())
}

/// A Kafka record header; the extension sends the bytes base64-encoded.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KafkaHeader {
    #[serde(rename = "Key", alias = "key")]
    pub key: String,
    #[serde(
        rename = "Value",
        alias = "value",
        default,
        deserialize_with = "base64_bytes"
    )]
    pub value: Vec<u8>,
}

fn base64_bytes<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    match Option::<String>::deserialize(deserializer)? {
        None => Ok(Vec::new()),
        Some(text) => base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(|e| serde::de::Error::custom(format!("header value is not base64: {e}"))),
    }
}

/// An element of a batch that is not a Kafka record: kept whole so it can be dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedKafkaEvent {
    /// The element as received (one layer of encoding removed).
    pub raw: String,
    pub reason: String,
}

/// A decoded Kafka batch. Elements decode independently: one bad record must not cost
/// the rest of the batch, because the extension commits offsets whatever we answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaBatch {
    pub events: Vec<Result<KafkaEvent, RejectedKafkaEvent>>,
}

impl KafkaBatch {
    /// Decodes a batch in the host's form (a string holding a JSON array of strings, each
    /// a `KafkaEventData` JSON) or any plainer form (arrays of objects, a single record).
    pub fn decode(value: &Value, context: &str) -> Result<KafkaBatch, DecodeError> {
        let events = KafkaRecords::decode(value.clone(), context)?.collect();
        Ok(KafkaBatch { events })
    }

    pub fn accepted(&self) -> impl Iterator<Item = &KafkaEvent> {
        self.events.iter().filter_map(|e| e.as_ref().ok())
    }

    pub fn rejected(&self) -> impl Iterator<Item = &RejectedKafkaEvent> {
        self.events.iter().filter_map(|e| e.as_ref().err())
    }
}

/// A Kafka batch whose records are decoded as they are taken, in order, each exactly once.
///
/// In the host's form the batch is one string holding a JSON array of strings. That string
/// is kept as the only copy of the batch; the array is scanned once for where each
/// element starts and ends, and an element is unescaped and decoded only when it is
/// taken, so besides the batch text just one decoded record is alive at a time.
#[derive(Debug)]
pub struct KafkaRecords {
    elements: Elements,
    next: usize,
}

#[derive(Debug)]
enum Elements {
    /// The host's form: the array's text and each element's byte range in it.
    Text {
        text: String,
        spans: Vec<std::ops::Range<usize>>,
    },
    /// A plainer form: the elements as values.
    Values(Vec<Value>),
    /// Cardinality one: a single record where a batch was expected.
    Single(KafkaEvent),
}

impl KafkaRecords {
    /// Locates the elements of a batch in any of the forms [`KafkaBatch::decode`] takes.
    pub fn decode(value: Value, context: &str) -> Result<KafkaRecords, DecodeError> {
        let elements = match value {
            Value::Array(elements) => Elements::Values(elements),
            Value::String(text) => match element_spans(&text) {
                Some(spans) => Elements::Text { text, spans },
                None => layered_elements(&Value::String(text), context)?,
            },
            other => layered_elements(&other, context)?,
        };
        Ok(KafkaRecords { elements, next: 0 })
    }

    /// How many elements the batch has, taken or not.
    pub fn len(&self) -> usize {
        match &self.elements {
            Elements::Text { spans, .. } => spans.len(),
            Elements::Values(values) => values.len(),
            Elements::Single(_) => 1,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `index` decoded again, whether taken already or not (to dead-letter a
    /// record whose decoded form is gone).
    pub fn element(&self, index: usize) -> Option<Result<KafkaEvent, RejectedKafkaEvent>> {
        Some(match &self.elements {
            Elements::Text { text, spans } => {
                let span = spans.get(index)?.clone();
                decode_element_text(text.get(span).unwrap_or_default(), index)
            }
            Elements::Values(values) => decode_kafka_element(values.get(index)?, index),
            Elements::Single(event) => match index {
                0 => Ok(event.clone()),
                _ => return None,
            },
        })
    }
}

impl Iterator for KafkaRecords {
    type Item = Result<KafkaEvent, RejectedKafkaEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        let decoded = self.element(self.next)?;
        self.next += 1;
        Some(decoded)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.len().saturating_sub(self.next);
        (left, Some(left))
    }
}

/// Where each element of a JSON array starts and ends in `text`; `None` when `text` is
/// not a JSON array. Nothing is unescaped or copied.
fn element_spans(text: &str) -> Option<Vec<std::ops::Range<usize>>> {
    let elements: Vec<&serde_json::value::RawValue> = serde_json::from_str(text).ok()?;
    let base = text.as_ptr() as usize;
    Some(
        elements
            .iter()
            .map(|raw| {
                // Each raw element borrows from `text`: its offset is a subtraction of addresses.
                let start = raw.get().as_ptr() as usize - base;
                start..start + raw.get().len()
            })
            .collect(),
    )
}

/// The elements of any form but the two common ones, peeled layer by layer.
fn layered_elements(value: &Value, context: &str) -> Result<Elements, DecodeError> {
    match decode_layered::<Vec<Value>>(value, context) {
        Ok(elements) => Ok(Elements::Values(elements)),
        // cardinality one: a single record where a batch was expected.
        Err(batch_error) => match decode_layered::<KafkaEvent>(value, context) {
            Ok(event) => Ok(Elements::Single(event)),
            Err(_) => Err(DecodeError::new(
                context,
                format!("not a Kafka batch: {}", batch_error.reason),
            )),
        },
    }
}

/// One element of the host's form, from its JSON text in the batch. The common case (a
/// string holding a well-formed `KafkaEventData`) unescapes the element once and
/// deserializes the record straight from that text, moving its `Value` out; anything else
/// takes the general path through a `serde_json::Value`, so the outcome and the reason are
/// the same as there.
fn decode_element_text(raw: &str, index: usize) -> Result<KafkaEvent, RejectedKafkaEvent> {
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::String(text)) => match serde_json::from_str::<KafkaEvent>(&text) {
            Ok(event) => Ok(event),
            Err(_) => decode_kafka_element(&Value::String(text), index),
        },
        Ok(element) => decode_kafka_element(&element, index),
        // The array was scanned as JSON, so its elements are JSON.
        Err(e) => Err(RejectedKafkaEvent {
            raw: raw.to_owned(),
            reason: DecodeError::new(format!("batch element {index}"), e).to_string(),
        }),
    }
}

fn decode_kafka_element(element: &Value, index: usize) -> Result<KafkaEvent, RejectedKafkaEvent> {
    decode_layered::<KafkaEvent>(element, &format!("batch element {index}")).map_err(|e| {
        RejectedKafkaEvent {
            raw: match element {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            },
            reason: e.to_string(),
        }
    })
}

/// What a handler answers the host for a non-HTTP trigger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InvocationResponse {
    /// Output binding values by binding name.
    #[serde(rename = "Outputs")]
    pub outputs: Map<String, Value>,
    /// Lines the host writes to the function's log.
    #[serde(rename = "Logs")]
    pub logs: Vec<String>,
    #[serde(rename = "ReturnValue")]
    pub return_value: Option<Value>,
}

impl InvocationResponse {
    pub fn new() -> Self {
        InvocationResponse::default()
    }

    /// Sets output binding `name`. Prefer objects or arrays to bare strings: the host
    /// base64-decodes an output string that happens to be valid base64 unless the
    /// binding declares `"dataType": "binary"`.
    pub fn with_output(
        mut self,
        name: &str,
        value: impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        self.outputs
            .insert(name.to_owned(), serde_json::to_value(value)?);
        Ok(self)
    }

    pub fn with_log(mut self, line: impl Into<String>) -> Self {
        self.logs.push(line.into());
        self
    }

    pub fn with_return_value(mut self, value: impl Serialize) -> Result<Self, serde_json::Error> {
        self.return_value = Some(serde_json::to_value(value)?);
        Ok(self)
    }
}

impl axum::response::IntoResponse for InvocationResponse {
    fn into_response(self) -> axum::response::Response {
        axum::Json(self).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn host_kafka_event(offset: i64, value: &str) -> String {
        json!({
            "Offset": offset, "Partition": 0, "Topic": "incidents",
            "Timestamp": "2026-11-29T10:00:00.000Z", "Key": null, "Value": value,
            "Headers": [{"Key": "table_name", "Value": "aW5jaWRlbnQ="}]
        })
        .to_string()
    }

    /// The exact shape the host sends: a string holding a JSON array of strings.
    fn host_kafka_batch(values: &[&str]) -> Value {
        let elements: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| host_kafka_event(i as i64 + 100, v))
            .collect();
        Value::String(serde_json::to_string(&elements).unwrap())
    }

    #[test]
    fn kafka_batch_decodes_from_the_hosts_double_encoded_form() {
        let batch = KafkaBatch::decode(
            &host_kafka_batch(&["{\"sys_id\":\"a\"}", "plain text"]),
            "events",
        )
        .unwrap();
        let events: Vec<_> = batch.accepted().collect();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].offset, Some(100));
        assert_eq!(events[0].value, "{\"sys_id\":\"a\"}");
        assert_eq!(events[1].value, "plain text");
        assert_eq!(events[0].header_text("table_name"), Some("incident"));
    }

    #[test]
    fn kafka_batch_decodes_from_the_plain_form() {
        let plain = json!([{"Offset": "7", "Partition": 1, "Topic": "t", "Value": {"sys_id": "b"}, "Headers": null}]);
        let batch = KafkaBatch::decode(&plain, "events").unwrap();
        let event = batch.accepted().next().unwrap();
        assert_eq!(
            event.offset,
            Some(7),
            "an integer sent as a string is accepted"
        );
        assert_eq!(event.value, "{\"sys_id\":\"b\"}");
        assert!(event.headers.is_empty());
    }

    #[test]
    fn one_bad_element_is_rejected_alone_and_kept_for_dead_lettering() {
        let batch = KafkaBatch::decode(
            &json!([host_kafka_event(1, "ok"), "{\"Offset\": 2}", 17]),
            "events",
        )
        .unwrap();
        assert_eq!(batch.accepted().count(), 1);
        let rejected: Vec<_> = batch.rejected().collect();
        assert_eq!(rejected.len(), 2);
        assert_eq!(rejected[0].raw, "{\"Offset\": 2}");
        assert!(
            rejected[0].reason.contains("batch element 1"),
            "{}",
            rejected[0].reason
        );
    }

    #[test]
    fn header_values_that_are_not_base64_reject_the_record() {
        let element = json!({"Value": "x", "Headers": [{"Key": "k", "Value": "%%%"}]});
        let batch = KafkaBatch::decode(&json!([element]), "events").unwrap();
        assert!(batch.rejected().next().unwrap().reason.contains("base64"));
    }

    #[test]
    fn a_batch_that_is_neither_array_nor_record_is_an_error_naming_the_binding() {
        let err = KafkaBatch::decode(&json!("not json at all"), "binding \"events\"").unwrap_err();
        assert!(err.to_string().contains("binding \"events\""), "{err}");
    }

    #[test]
    fn string_bindings_are_unwrapped_once_and_plain_strings_kept() {
        assert_eq!(decode_string(&json!("\"hello\""), "b").unwrap(), "hello");
        assert_eq!(decode_string(&json!("hello"), "b").unwrap(), "hello");
        assert!(decode_string(&json!(3), "b").is_err());
    }

    #[test]
    fn timer_payload_decodes_in_both_forms() {
        let timer = json!({"Schedule": {"AdjustForDST": true},
            "ScheduleStatus": {"Last": "2026-11-29T10:00:00Z", "Next": "2026-11-29T10:00:05Z", "LastUpdated": "x"},
            "IsPastDue": false});
        let plain: InvocationRequest =
            serde_json::from_value(json!({"Data": {"timer": timer}})).unwrap();
        let encoded: InvocationRequest =
            serde_json::from_value(json!({"Data": {"timer": timer.to_string()}})).unwrap();
        assert_eq!(
            plain.timer("timer").unwrap(),
            encoded.timer("timer").unwrap()
        );
        assert_eq!(
            plain
                .timer("timer")
                .unwrap()
                .schedule_status
                .unwrap()
                .next
                .as_deref(),
            Some("2026-11-29T10:00:05Z")
        );
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Handoff {
        tier: String,
    }

    #[test]
    fn queue_message_decodes_whether_the_json_is_encoded_once_or_twice() {
        let body = json!({"tier": "premium"}).to_string();
        for data in [
            json!(body.clone()),
            json!(serde_json::to_string(&body).unwrap()),
            json!({"tier": "premium"}),
        ] {
            let request: InvocationRequest = serde_json::from_value(
                json!({"Data": {"msg": data}, "Metadata": {"DequeueCount": "2"}}),
            )
            .unwrap();
            assert_eq!(
                request.queue_message::<Handoff>("msg").unwrap(),
                Handoff {
                    tier: "premium".into()
                }
            );
            assert_eq!(request.metadata.dequeue_count().unwrap(), Some(2));
        }
    }

    #[test]
    fn metadata_sys_and_retry_context_decode_from_objects_or_strings() {
        let request: InvocationRequest = serde_json::from_value(json!({
            "Data": {},
            "Metadata": {
                "sys": {"MethodName": "classify", "UtcNow": "2026-11-29T10:00:00Z", "RandGuid": "g"},
                "RetryContext": json!({"RetryCount": "1", "MaxRetryCount": 3, "Exception": null}).to_string()
            }
        }))
        .unwrap();
        assert_eq!(
            request.metadata.sys.unwrap().method_name.as_deref(),
            Some("classify")
        );
        let retry = request.metadata.retry_context.unwrap();
        assert_eq!((retry.retry_count, retry.max_retry_count), (1, 3));
    }

    #[test]
    fn missing_binding_is_named_in_the_error() {
        let err = InvocationRequest::default().binding("events").unwrap_err();
        assert!(err.to_string().contains("\"events\""));
    }

    #[test]
    fn encoding_layers_are_bounded() {
        let mut value = json!([1]);
        for _ in 0..10 {
            value = Value::String(value.to_string());
        }
        assert!(decode_layered::<Vec<u8>>(&value, "deep").is_err());
    }

    #[test]
    fn response_serializes_with_the_hosts_field_names() {
        let response = InvocationResponse::new()
            .with_output("premiumQueue", json!({"tier": "premium"}))
            .unwrap()
            .with_log("dispatched 1 group")
            .with_return_value(3)
            .unwrap();
        assert_eq!(
            serde_json::to_value(&response).unwrap(),
            json!({"Outputs": {"premiumQueue": {"tier": "premium"}}, "Logs": ["dispatched 1 group"], "ReturnValue": 3})
        );
    }

    /// The decoder as it was before records were decoded lazily: every layer parsed into
    /// a `serde_json::Value`, cloned before each try. The property tests hold the lazy
    /// decoder to it.
    fn reference_layered<T: DeserializeOwned>(
        value: &Value,
        context: &str,
    ) -> Result<T, DecodeError> {
        let mut current = value.clone();
        for _ in 0..MAX_ENCODING_LAYERS {
            let direct_error = match T::deserialize(&current) {
                Ok(decoded) => return Ok(decoded),
                Err(e) => e,
            };
            let Value::String(text) = &current else {
                return Err(DecodeError::new(context, direct_error));
            };
            current = serde_json::from_str(text).map_err(|_| {
                DecodeError::new(context, format!("{direct_error} (nor is the string JSON)"))
            })?;
        }
        Err(DecodeError::new(
            context,
            "too many layers of JSON-in-a-string encoding",
        ))
    }

    fn reference_batch(value: &Value, context: &str) -> Result<KafkaBatch, DecodeError> {
        let elements = match reference_layered::<Vec<Value>>(value, context) {
            Ok(elements) => elements,
            Err(batch_error) => match reference_layered::<KafkaEvent>(value, context) {
                Ok(event) => {
                    return Ok(KafkaBatch {
                        events: vec![Ok(event)],
                    });
                }
                Err(_) => {
                    return Err(DecodeError::new(
                        context,
                        format!("not a Kafka batch: {}", batch_error.reason),
                    ));
                }
            },
        };
        let events = elements
            .iter()
            .enumerate()
            .map(|(i, e)| {
                reference_layered::<KafkaEvent>(e, &format!("batch element {i}")).map_err(|err| {
                    RejectedKafkaEvent {
                        raw: match e {
                            Value::String(text) => text.clone(),
                            other => other.to_string(),
                        },
                        reason: err.to_string(),
                    }
                })
            })
            .collect();
        Ok(KafkaBatch { events })
    }

    /// A batch element as a producer might get it wrong or right: well-formed records,
    /// duplicate and aliased keys, integers as strings, bad base64, values of every type,
    /// extra layers of encoding, text that is not JSON.
    fn arbitrary_element() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let value_json = prop_oneof![
            "[a-z{}\"\\\\ :,\\[\\]0-9\u{e9}\u{1F600}\\n]{0,24}"
                .prop_map(|v| serde_json::to_string(&v).unwrap()),
            Just("null".to_owned()),
            Just("{\"sys_id\":\"a\",\"n\":[1,2.5,true]}".to_owned()),
            Just("17".to_owned()),
        ];
        let offset = prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<i64>().prop_map(|n| format!("\"{n}\"")),
            Just("null".to_owned()),
            Just("\"x\"".to_owned()),
            Just("1.5".to_owned()),
        ];
        let header = prop_oneof![
            Just("{\"Key\":\"table_name\",\"Value\":\"aW5jaWRlbnQ=\"}".to_owned()),
            Just("{\"key\":\"action\",\"value\":null}".to_owned()),
            Just("{\"Key\":\"k\",\"Value\":\"%%%\"}".to_owned()),
            Just("{\"Value\":\"aW5j\"}".to_owned()),
        ];
        let headers = prop_oneof![
            prop::collection::vec(header, 0..3).prop_map(|h| format!("[{}]", h.join(","))),
            Just("null".to_owned()),
            Just("\"[]\"".to_owned()),
        ];
        let record = (value_json, offset.clone(), offset, headers, any::<u8>()).prop_map(
            |(value, offset, partition, headers, shape)| {
                let mut fields = vec![
                    format!("\"Offset\":{offset}"),
                    format!("\"Partition\":{partition}"),
                    "\"Topic\":\"incidents\"".to_owned(),
                    "\"Timestamp\":\"2026-11-29T10:00:00.000Z\"".to_owned(),
                    "\"Key\":null".to_owned(),
                    format!("\"Value\":{value}"),
                    format!("\"Headers\":{headers}"),
                ];
                match shape % 8 {
                    0 => fields.push(format!("\"offset\":{offset}")),
                    1 => fields.push("\"Topic\":\"again\"".to_owned()),
                    2 => fields.retain(|f| !f.starts_with("\"Value\"")),
                    3 => fields.reverse(),
                    4 => fields.push("\"Extra\":{\"deep\":[[[]]]}".to_owned()),
                    _ => {}
                }
                format!("{{{}}}", fields.join(","))
            },
        );
        prop_oneof![
            8 => record.clone(),
            1 => record.prop_map(|r| serde_json::to_string(&r).unwrap()),
            1 => "[a-z{}\" ]{0,12}",
            1 => Just("[1,2]".to_owned()),
        ]
    }

    /// Whole batches: host form (a string of an array of strings), elements given as
    /// objects or numbers, extra outer layers, single records and non-batches.
    fn arbitrary_batch() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        (
            proptest::collection::vec(arbitrary_element(), 0..6),
            0u8..6,
            any::<bool>(),
        )
            .prop_map(|(elements, form, raw_objects)| {
                let items: Vec<Value> = elements
                    .iter()
                    .map(|e| match serde_json::from_str::<Value>(e) {
                        Ok(object @ Value::Object(_)) if raw_objects => object,
                        _ => Value::String(e.clone()),
                    })
                    .collect();
                let array = Value::Array(items);
                match form {
                    0 => array,
                    1 | 2 => Value::String(array.to_string()),
                    3 => Value::String(Value::String(array.to_string()).to_string()),
                    4 => elements
                        .first()
                        .map_or(Value::Null, |e| Value::String(e.clone())),
                    _ => Value::String(format!("{} trailing", array)),
                }
            })
    }

    /// Any JSON value, shaped like what reaches a binding (records, arrays of strings, scalars).
    fn arbitrary_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".{0,16}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop::sample::select(vec![
                        "Offset",
                        "Partition",
                        "Value",
                        "Headers",
                        "Key",
                        "Topic",
                        "value",
                        "RetryCount",
                        "x"
                    ]),
                    inner,
                    0..6,
                )
                .prop_map(|m| Value::Object(
                    m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
                )),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            if let Ok(request) = InvocationRequest::from_slice(&bytes) {
                for value in request.data.values() {
                    let _ = KafkaBatch::decode(value, "any");
                }
            }
        }

        #[test]
        fn arbitrary_json_in_any_binding_never_panics(value in arbitrary_json(), encode in proptest::prelude::any::<bool>()) {
            let value = if encode { Value::String(value.to_string()) } else { value };
            let mut request = InvocationRequest {
                data: Map::from_iter([("events".to_owned(), value.clone())]),
                metadata: serde_json::from_value(serde_json::json!({"DequeueCount": value.clone(), "RetryContext": value})).unwrap_or_default(),
            };
            let _ = request.timer("events");
            let _ = request.queue_message::<Value>("events");
            let _ = decode_string(request.binding("events").unwrap(), "events");
            let _ = request.metadata.dequeue_count();
            // Last: it takes the binding out of the request.
            if let Ok(records) = request.take_kafka_records("events") {
                records.for_each(drop);
            }
        }

        #[test]
        fn lazy_decoding_agrees_with_decoding_through_serde_json_values(batch in arbitrary_batch()) {
            let lazy = KafkaBatch::decode(&batch, "events");
            let reference = reference_batch(&batch, "events");
            proptest::prop_assert_eq!(lazy, reference);
        }

        #[test]
        fn records_taken_one_at_a_time_are_the_batch_in_order(batch in arbitrary_batch()) {
            let mut request = InvocationRequest {
                data: Map::from_iter([("events".to_owned(), batch.clone())]),
                metadata: InvocationMetadata::default(),
            };
            match (request.take_kafka_records("events"), reference_batch(&batch, "binding \"events\"")) {
                (Ok(records), Ok(reference)) => {
                    proptest::prop_assert_eq!(records.size_hint().0, reference.events.len());
                    proptest::prop_assert_eq!(records.collect::<Vec<_>>(), reference.events);
                }
                (Err(lazy), Err(reference)) => proptest::prop_assert_eq!(lazy, reference),
                (lazy, reference) => proptest::prop_assert!(false, "lazy {lazy:?}, reference {reference:?}"),
            }
            proptest::prop_assert!(request.binding("events").is_err(), "the binding was taken");
        }

        #[test]
        fn any_encoding_depth_up_to_two_round_trips(values in proptest::collection::vec("[a-z{}\" ]{0,12}", 0..5), depth in 0usize..3) {
            let elements: Vec<String> = values.iter().enumerate().map(|(i, v)| host_kafka_event(i as i64, v)).collect();
            let mut encoded = serde_json::to_value(&elements).unwrap();
            for _ in 0..depth {
                encoded = Value::String(encoded.to_string());
            }
            let batch = KafkaBatch::decode(&encoded, "events").unwrap();
            let decoded: Vec<String> = batch.accepted().map(|e| e.value.clone()).collect();
            proptest::prop_assert_eq!(decoded, values);
        }
    }
}
