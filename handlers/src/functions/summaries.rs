//! `GET /api/summaries/{ticket}`: the stored summaries of one ticket.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::Value;

use crate::app::AppState;
use crate::error::ApiError;

pub async fn get(
    State(_state): State<AppState>,
    Path(_ticket): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Err(ApiError::NotImplemented("the summary read API"))
}
