//! `summarize-premium` and `summarize-standard` (queue triggers): run the shared
//! summarize step on one handed-off group of leases for that tier, then acknowledge.

use axum::extract::State;
use serde_json::Value;
use stormgate_shared::job::Tier;

use crate::app::AppState;
use crate::error::ApiError;
use crate::invocation::{InvocationRequest, InvocationResponse};

/// The queueTrigger binding's name in both tiers' function.json.
pub const HANDOFF_BINDING: &str = "handoff";

pub async fn premium(
    state: State<AppState>,
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    summarize(state, Tier::Premium, invocation).await
}

pub async fn standard(
    state: State<AppState>,
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    summarize(state, Tier::Standard, invocation).await
}

async fn summarize(
    State(_state): State<AppState>,
    _tier: Tier,
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    let _handoff: Value = invocation.queue_message(HANDOFF_BINDING)?;
    Err(ApiError::NotImplemented("summarization"))
}
