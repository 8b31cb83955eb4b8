//! `classify`: a Kafka batch of ticket events in; tickets classified, stored with an
//! instant extractive summary, and queued for LLM summaries.

use axum::extract::State;

use crate::app::AppState;
use crate::error::ApiError;
use crate::invocation::{InvocationRequest, InvocationResponse};

/// The kafkaTrigger binding's name in function.json.
pub const EVENTS_BINDING: &str = "events";
/// The Kafka output binding for customer notifications.
pub const NOTIFICATIONS_BINDING: &str = "notifications";

pub async fn run(
    State(_state): State<AppState>,
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    let _batch = invocation.kafka_batch(EVENTS_BINDING)?;
    Err(ApiError::NotImplemented("classification"))
}
