//! `GET /api/summaries/{ticket}`: the latest stored summary of each kind of one ticket,
//! with the metadata a reader needs to trust it (version, tier, model or `extractive`,
//! degraded flag, tokens, prompt version, time). 404 when the ticket has none.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Map, Value, json};
use stormgate_shared::job::SummaryKind;
use stormgate_shared::summary::Summary;
use stormgate_shared::ticket_id::TicketId;

use crate::app::AppState;
use crate::error::ApiError;

pub async fn get(
    State(state): State<AppState>,
    Path(ticket): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id: TicketId =
        ticket
            .parse()
            .map_err(|e: stormgate_shared::ticket_id::TicketIdParseError| {
                ApiError::BadRequest(e.to_string())
            })?;
    let store = state.store().await?;
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
    Ok(Json(json!({
        "ticket": id.as_str(),
        "number": number,
        "summaries": kinds,
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
