//! `classify`: a Kafka batch of the shared topic's records in; incident events classified,
//! stored with an instant extractive summary, and queued for LLM summaries; other records
//! skipped and counted.
//!
//! Answers 2xx with the batch's counts only when every record is stored, recognised as
//! stored, dead-lettered or skipped. Otherwise it answers 503 and logs the batch's topic,
//! partitions and offset ranges: the function's retry policy (function.json, without
//! limit) has the host deliver the batch again, and the offsets stay uncommitted until it
//! succeeds (docs/operations.md, *Redis unreachable*).

use std::collections::BTreeMap;

use axum::extract::State;
use stormgate_shared::event::CdcHeaders;
use stormgate_shared::fault_switches::{self, Mechanism};
use stormgate_shared::ingest::{BatchIngest, BatchOutcome, IngestContext, RawEvent};
use stormgate_shared::store::{DeadLetter, Store};

use crate::error::ApiError;
use crate::invocation::{InvocationRequest, InvocationResponse, KafkaEvent};
use crate::signals::{self, LagSamples};
use crate::state::AppState;

/// The kafkaTrigger binding's name in function.json.
pub const EVENTS_BINDING: &str = "events";

pub async fn run(
    State(state): State<AppState>,
    mut invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    // The batch's text is the only copy of it kept: records are decoded one at a time
    // and each is classified before the next is decoded.
    let mut records = invocation.take_kafka_records(EVENTS_BINDING)?;
    drop(invocation);
    let mut coordinates = BatchCoordinates::default();
    // Each record's consumer lag is measured against this instant.
    let mut lags = LagSamples::at(state.clock.now());
    let result = classify(&state, &mut records, &mut coordinates, &mut lags).await;
    match result {
        Ok(outcome) => {
            signals::classify(state.signals.as_ref(), lags.now(), &outcome, &lags.samples).await;
            tracing::info!(
                accepted = outcome.accepted,
                duplicate_or_stale = outcome.duplicate_or_stale,
                dead_lettered = outcome.dead_lettered,
                skipped = outcome.skipped.total(),
                skipped_other_table = outcome.skipped.other_table,
                skipped_heartbeat = outcome.skipped.heartbeat,
                skipped_not_an_incident = outcome.skipped.not_an_incident,
                skipped_other_format = outcome.skipped.other_format,
                "classify batch"
            );
            InvocationResponse::new()
                .with_return_value(outcome)
                .map_err(|e| ApiError::Internal(e.to_string()))
        }
        Err(error) => {
            // Records not read before the failure (the store or the model could not be
            // had) still belong to the batch the host delivers again.
            for decoded in records.by_ref() {
                match decoded {
                    Ok(event) => coordinates.add(&event),
                    Err(_) => coordinates.undecodable += 1,
                }
            }
            coordinates.log_failure(&error);
            Err(error)
        }
    }
}

/// Where a batch's records sit in the topic: per (topic, partition), the first and last
/// offset and the count, so that a failed batch can be found (and, if need be, replayed).
#[derive(Debug, Default)]
struct BatchCoordinates {
    /// Per (topic, partition).
    ranges: BTreeMap<(String, Option<i64>), OffsetRange>,
    undecodable: u32,
}

/// The first and last offset of a partition's records in a batch, and their count.
#[derive(Debug, Default)]
struct OffsetRange {
    first: Option<i64>,
    last: Option<i64>,
    events: u32,
}

impl BatchCoordinates {
    fn add(&mut self, event: &KafkaEvent) {
        let key = (event.topic.clone().unwrap_or_default(), event.partition);
        let range = self.ranges.entry(key).or_default();
        if let Some(offset) = event.offset {
            range.first = Some(range.first.map_or(offset, |first| first.min(offset)));
            range.last = Some(range.last.map_or(offset, |last| last.max(offset)));
        }
        range.events += 1;
    }

    /// One ERROR line per partition: the batch is not acknowledged and comes again.
    fn log_failure(&self, error: &ApiError) {
        for ((topic, partition), range) in &self.ranges {
            // -1 for what the host did not say.
            tracing::error!(
                topic = %topic,
                partition = partition.unwrap_or(-1),
                first_offset = range.first.unwrap_or(-1),
                last_offset = range.last.unwrap_or(-1),
                events = range.events,
                error = %error,
                "classify batch failed: not acknowledged, the host delivers it again"
            );
        }
        if self.ranges.is_empty() {
            tracing::error!(
                undecodable = self.undecodable,
                error = %error,
                "classify batch failed: not acknowledged, the host delivers it again"
            );
        }
    }
}

async fn classify(
    state: &AppState,
    records: &mut crate::invocation::KafkaRecords,
    coordinates: &mut BatchCoordinates,
    lags: &mut LagSamples,
) -> Result<BatchOutcome, ApiError> {
    let store = state.store().await?;
    let classifier = state.classifier()?;
    let ctx = IngestContext {
        store: store.as_ref(),
        clock: state.clock.as_ref(),
        classifier,
        policy: &state.ingest,
    };
    let mut batch = BatchIngest::new(&ctx);
    // The batch element of each event given to `batch`, to decode it again should the
    // store refuse its record.
    let mut elements = Vec::with_capacity(records.size_hint().0);
    let mut rejected = Vec::new();
    for (element, decoded) in records.by_ref().enumerate() {
        match decoded {
            Ok(event) => {
                coordinates.add(&event);
                lags.add(&event);
                elements.push(element);
                batch.add(&raw_event(event));
            }
            Err(not_an_event) => {
                coordinates.undecodable += 1;
                rejected.push(not_an_event);
            }
        }
    }
    let raw_again = |index: usize| {
        let element = *elements.get(index)?;
        records.element(element)?.ok().map(raw_event)
    };
    let mut outcome = match batch.finish(raw_again).await {
        Ok(report) => report.outcome,
        Err(error) if fault_switches::is_off(Mechanism::ClassifyFailure) => {
            // The design being proven against: the batch is acknowledged unstored.
            tracing::warn!(%error, "classify batch not stored");
            BatchOutcome::default()
        }
        Err(error) => return Err(ApiError::Unavailable(error.to_string())),
    };
    let store = store.as_ref();
    for rejected in rejected {
        let entry = DeadLetter {
            reason: format!("not a Kafka event: {}", rejected.reason),
            raw: rejected.raw,
            // The record around the value could not be read: there is no event to replay.
            headers: Default::default(),
            replayable: false,
            topic: None,
            partition: None,
            offset: None,
            at: state.clock.now(),
        };
        dead_letter(store, &entry).await?;
        outcome.dead_lettered += 1;
    }
    Ok(outcome)
}

async fn dead_letter(store: &dyn Store, entry: &DeadLetter) -> Result<(), ApiError> {
    store.dead_letter(entry).await.map(|_| ()).map_err(|e| {
        ApiError::Unavailable(format!(
            "an undecodable Kafka record could not be dead-lettered: {e}"
        ))
    })
}

/// The ticket parser's input: the value and the CDC headers, with the Kafka coordinates.
/// The value is moved, not copied.
pub fn raw_event(event: KafkaEvent) -> RawEvent {
    let headers = CdcHeaders {
        action: event.header_text("action").map(str::to_owned),
        table_name: event.header_text("table_name").map(str::to_owned),
    };
    RawEvent {
        value: event.value.into_bytes(),
        headers,
        topic: event.topic,
        partition: event.partition,
        offset: event.offset,
    }
}
