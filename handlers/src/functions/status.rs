//! `GET /api/status` (function key): every signal's current value as one JSON document
//! ([`stormgate_shared::signals::status::Status`], documented field by field in
//! docs/operations.md, *Status*), with the one-line verdict on top. The console reads it,
//! and so does `stormgate status`; the `dispatch` tick builds the same document each tick
//! for the signal lines and the series.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::controls::ControlState;
use stormgate_shared::governor::Governor;
use stormgate_shared::signals::status::{AUDIT_SHOWN, Status, StatusInputs, collect};
use stormgate_shared::store::Store;

use crate::app::AppState;
use crate::deliveries;
use crate::error::ApiError;

pub async fn get(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let store = state.store().await?;
    let now = state.clock.now();
    let controls = state.controls.state(now).await?;
    let governor = state.governor.with_controls(&controls, now);
    let status = current(&state, store.as_ref(), &controls, &governor, now).await?;
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(status)))
}

/// The status at `now`, under the controls read for it and the governor they make.
pub async fn current(
    state: &AppState,
    store: &dyn Store,
    controls: &ControlState,
    governor: &Governor,
    now: EpochMillis,
) -> Result<Status, ApiError> {
    let audit = state.controls.audit(AUDIT_SHOWN).await?;
    let audit_trimmed = state.controls.audit_trimmed().await?;
    let work_notes_in_outbox = deliveries::outbox_pending(state)
        .await
        .map_err(|e| ApiError::Unavailable(format!("the ServiceNow outbox: {e}")))?;
    let config = state.fleet_config();
    Ok(collect(&StatusInputs {
        store,
        governor,
        signals: state.signals.as_ref(),
        controls,
        audit: &audit,
        audit_trimmed,
        work_notes_in_outbox,
        config: &config,
        aging: state.dispatch.aging(),
        now,
    })
    .await?)
}
