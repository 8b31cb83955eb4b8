//! `classify`: a Kafka batch of ticket events in; tickets classified, stored with an
//! instant extractive summary, and queued for LLM summaries.
//!
//! Answers 2xx with the batch's counts unless nothing could be stored: the Kafka extension
//! commits offsets even for failed invocations (docs/ticket-events.md).

use axum::extract::State;
use stormgate_shared::event::CdcHeaders;
use stormgate_shared::ingest::{BatchOutcome, IngestContext, RawEvent, classify_batch};
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
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    let batch = invocation.kafka_batch(EVENTS_BINDING)?;
    let store = state.store().await?;
    let classifier = classifier(&state.settings)?;
    let events: Vec<RawEvent> = batch.accepted().map(raw_event).collect();
    let ctx = IngestContext {
        store: store.as_ref(),
        clock: state.clock.as_ref(),
        classifier,
        policy: &state.ingest,
    };
    let mut outcome = classify_batch(&events, &ctx)
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    for rejected in batch.rejected() {
        let entry = DeadLetter {
            reason: format!("not a Kafka event: {}", rejected.reason),
            raw: rejected.raw.clone(),
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
pub fn raw_event(event: &KafkaEvent) -> RawEvent {
    RawEvent {
        value: event.value.as_bytes().to_vec(),
        headers: CdcHeaders {
            action: event.header_text("action").map(str::to_owned),
            table_name: event.header_text("table_name").map(str::to_owned),
        },
        topic: event.topic.clone(),
        partition: event.partition,
        offset: event.offset,
    }
}
