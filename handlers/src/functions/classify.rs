//! `classify`: a Kafka batch of ticket events in; tickets classified, stored with an
//! instant extractive summary, and queued for LLM summaries.
//!
//! Answers 2xx with the batch's counts unless nothing could be stored: the Kafka extension
//! commits offsets even for failed invocations (docs/ticket-events.md).

use axum::extract::State;
use stormgate_shared::event::CdcHeaders;
use stormgate_shared::fault_switches::{self, Mechanism};
use stormgate_shared::ingest::{BatchIngest, BatchOutcome, IngestContext, RawEvent};
use stormgate_shared::store::{DeadLetter, Store};

use crate::app::AppState;
use crate::classifier_loader::classifier;
use crate::error::ApiError;
use crate::invocation::{InvocationRequest, InvocationResponse, KafkaEvent};

/// The kafkaTrigger binding's name in function.json.
pub const EVENTS_BINDING: &str = "events";
/// The Kafka output binding for customer notifications.
pub const NOTIFICATIONS_BINDING: &str = "notifications";

pub async fn run(
    State(state): State<AppState>,
    mut invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    // The batch's text is the only copy of it kept: records are decoded one at a time
    // and each is classified before the next is decoded.
    let mut records = invocation.take_kafka_records(EVENTS_BINDING)?;
    drop(invocation);
    let store = state.store().await?;
    let classifier = classifier(&state.settings)?;
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
                elements.push(element);
                batch.add(&raw_event(event));
            }
            Err(not_an_event) => rejected.push(not_an_event),
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
        dead_letter(store.as_ref(), &entry, &mut outcome).await;
    }
    tracing::info!(?outcome, "classify batch");
    InvocationResponse::new()
        .with_return_value(outcome)
        .map_err(|e| ApiError::Internal(e.to_string()))
}

async fn dead_letter(store: &dyn Store, entry: &DeadLetter, outcome: &mut BatchOutcome) {
    match store.dead_letter(entry).await {
        Ok(_) => outcome.dead_lettered += 1,
        Err(e) => {
            outcome.lost += 1;
            tracing::error!(error = %e, reason = %entry.reason, "malformed Kafka event could not be dead-lettered");
        }
    }
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
