//! `GET /api/status` (function key): every signal's current value as one JSON document
//! ([`stormgate_shared::signals::status::Status`], documented field by field in
//! docs/operations.md, *Status*), with the one-line verdict on top. The console reads it,
//! and so does `stormgate status`; the `dispatch` tick builds the same document each tick
//! for the signal lines and the series.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use crate::error::ApiError;
use crate::signals;
use crate::state::AppState;

pub async fn get(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let store = state.store().await?;
    let now = state.clock.now();
    let controls = state.controls.state(now).await?;
    let governor = state.governor.with_controls(&controls, now);
    let status = signals::current_status(&state, store.as_ref(), &controls, &governor, now).await?;
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(status)))
}
