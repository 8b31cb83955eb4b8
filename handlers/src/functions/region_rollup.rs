//! `GET /api/regions/{region}/rollup`: the latest executive roll-up of one region.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::Value;

use crate::app::AppState;
use crate::error::ApiError;

pub async fn get(
    State(_state): State<AppState>,
    Path(_region): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Err(ApiError::NotImplemented("the regional roll-up read API"))
}
