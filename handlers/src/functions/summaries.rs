//! `GET /api/summaries/{ticket}`: the latest stored summary of each kind of one ticket,
//! named by its `sys_id` or its number (`INC0012345`), with the metadata a reader needs
//! to trust it (version, tier, model or `extractive`, degraded flag, tokens, prompt
//! version, time) and why the ticket was routed where it was (ServiceNow's priority, the
//! classifier's prediction and route-up, the tiers). 404 when the ticket is unknown or has
//! no summary; 400 when the path is neither a `sys_id` nor a ticket number.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Map, Value, json};
use stormgate_shared::control_actions::ticket_id;
use stormgate_shared::job::SummaryKind;
use stormgate_shared::routing_explanation::explain;
use stormgate_shared::snapshot::SnapshotLoad;
use stormgate_shared::summary::Summary;

use crate::error::ApiError;
use crate::state::AppState;

pub async fn get(
    State(state): State<AppState>,
    Path(ticket): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let store = state.store().await?;
    let id = ticket_id(store.as_ref(), &ticket).await?;
    let mut kinds = Map::new();
    let mut number = None;
    for kind in [SummaryKind::Technician, SummaryKind::Customer] {
        if let Some(summary) = store.summary(&id, kind).await? {
            number.get_or_insert_with(|| summary.number.clone());
            kinds.insert(kind.as_str().to_owned(), summary_json(&summary));
        }
    }
    if kinds.is_empty() {
        return Err(ApiError::NotFound(format!("no summaries for ticket {id}")));
    }
    let routing = match store.load_snapshot(&id, None).await? {
        SnapshotLoad::Current { snapshot, .. } => {
            serde_json::to_value(explain(&snapshot, &state.ingest.tiers))?
        }
        SnapshotLoad::Unreadable { reason, .. } => {
            tracing::warn!(ticket = %id, error = %reason, "unreadable snapshot: routing not explained");
            Value::Null
        }
        SnapshotLoad::Missing | SnapshotLoad::Superseded { .. } => Value::Null,
    };
    Ok(Json(json!({
        "ticket": id.as_str(),
        "number": number,
        "summaries": kinds,
        "routing": routing,
    })))
}

/// One summary as the read APIs answer it.
pub fn summary_json(s: &Summary) -> Value {
    json!({
        "text": s.text,
        "version": s.version,
        "tier": s.tier,
        "model": s.model,
        "degraded": s.degraded,
        "tokens_used": s.tokens_used,
        "prompt_version": s.prompt_version,
        "created_at": s.created_at,
        "created_at_utc": s.created_at.to_string(),
    })
}
