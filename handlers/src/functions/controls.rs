//! `POST /api/controls` (admin: the host's master key): one operator action, checked,
//! applied and audited ([`stormgate_shared::control_actions`]). The body names the
//! operator and the action, e.g. `{"by": "alice", "action": "pause", "tier": "premium"}`;
//! the answer says what the action did, the controls now in force and the latest audit
//! entries. A request that cannot apply is a 400 (or 404 for an unknown deployment or
//! ticket) and changes nothing.
//!
//! The function's `authLevel` is `admin`: the host lets only its master key through
//! (function and host keys are refused before the handler sees the request), so reading
//! the status never gives the power to change the pipeline.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use stormgate_shared::control_actions::{ControlContext, ControlOutcome, ControlRequest, apply};
use stormgate_shared::controls::{AuditRecord, ControlState};
use stormgate_shared::ingest::IngestContext;
use stormgate_shared::signals::status::AUDIT_SHOWN;

use crate::error::ApiError;
use crate::state::AppState;

/// What an applied action answers.
#[derive(Debug, Serialize)]
pub struct ControlAnswer {
    pub outcome: ControlOutcome,
    /// The controls in force after it.
    pub controls: ControlState,
    pub audit: Vec<AuditRecord>,
}

pub async fn post(
    State(state): State<AppState>,
    body: Result<Json<ControlRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<ControlAnswer>, ApiError> {
    let Json(request) =
        body.map_err(|e| ApiError::BadRequest(format!("not a control request: {e}")))?;
    let store = state.store().await?;
    let classifier = state.classifier()?;
    let ingest = IngestContext {
        store: store.as_ref(),
        clock: state.clock.as_ref(),
        classifier,
        policy: &state.ingest,
    };
    let now = state.clock.now();
    let ctx = ControlContext {
        controls: state.controls.as_ref(),
        store: store.as_ref(),
        governor: &state.governor,
        ingest: Some(&ingest),
        policy: &state.ingest,
        now,
        source: "http",
    };
    let outcome = apply(&ctx, &request).await?;
    Ok(Json(ControlAnswer {
        outcome,
        controls: state.controls.state(now).await?,
        audit: state.controls.audit(AUDIT_SHOWN).await?,
    }))
}
