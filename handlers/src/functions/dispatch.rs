//! `dispatch` (timer, every 5 s): leases jobs per tier, reserves their tokens with the
//! governor, and hands each leased group to its tier's queue.

use axum::extract::State;

use crate::app::AppState;
use crate::error::ApiError;
use crate::invocation::{InvocationRequest, InvocationResponse};

pub const TIMER_BINDING: &str = "timer";
/// Queue output bindings, one per tier (queues `summarize-premium` / `summarize-standard`).
pub const PREMIUM_QUEUE_BINDING: &str = "premiumQueue";
pub const STANDARD_QUEUE_BINDING: &str = "standardQueue";

pub async fn run(
    State(_state): State<AppState>,
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    let _timer = invocation.timer(TIMER_BINDING)?;
    Err(ApiError::NotImplemented("dispatching"))
}
