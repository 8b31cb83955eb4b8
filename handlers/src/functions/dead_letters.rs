//! `GET /api/dead-letters` lists rejected events; `POST /api/dead-letters` re-submits them.

use axum::Json;
use axum::extract::State;
use serde_json::Value;

use crate::app::AppState;
use crate::error::ApiError;

pub async fn list(State(_state): State<AppState>) -> Result<Json<Value>, ApiError> {
    Err(ApiError::NotImplemented("dead-letter listing"))
}

pub async fn resubmit(State(_state): State<AppState>) -> Result<Json<Value>, ApiError> {
    Err(ApiError::NotImplemented("dead-letter re-submission"))
}
