//! `rollup` (timer, every minute): executive summary for each region whose roll-up is due.

use axum::extract::State;

use crate::app::AppState;
use crate::error::ApiError;
use crate::invocation::{InvocationRequest, InvocationResponse};

pub const TIMER_BINDING: &str = "timer";

pub async fn run(
    State(_state): State<AppState>,
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    let _timer = invocation.timer(TIMER_BINDING)?;
    Err(ApiError::NotImplemented("regional roll-up"))
}
