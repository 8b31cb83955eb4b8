//! `GET /api/dead-letters` lists rejected events; `POST /api/dead-letters` re-submits them.
//!
//! Re-submission runs the event through `classify` again (without its original CDC headers,
//! which dead letters do not keep). An entry leaves the stream once its event is stored or
//! found already stored; an event that is rejected again gets a fresh entry with the new
//! reason and the old one is removed.

use axum::Json;
use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};
use stormgate_shared::ingest::{IngestContext, IngestPolicy, RawEvent, classify_batch};
use stormgate_shared::store::DeadLetter;

use crate::app::AppState;
use crate::classifier_loader::classifier;
use crate::error::ApiError;

/// Most entries listed or re-submitted at once.
pub const MAX_ENTRIES: usize = 1000;

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    #[serde(flatten)]
    pub letter: DeadLetter,
}

pub async fn list(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Vec<Entry>>, ApiError> {
    let store = state.store().await?;
    let limit = query.limit.unwrap_or(100).min(MAX_ENTRIES);
    let entries = store.dead_letters(limit).await?;
    Ok(Json(
        entries
            .into_iter()
            .map(|(id, letter)| Entry { id, letter })
            .collect(),
    ))
}

/// `{"ids": [...]}` re-submits those entries; an empty body or no ids re-submits all listed.
#[derive(Debug, Default, Deserialize)]
pub struct ResubmitRequest {
    #[serde(default)]
    pub ids: Vec<String>,
}

#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ResubmitOutcome {
    pub resubmitted: u32,
    pub accepted: u32,
    pub duplicate_or_stale: u32,
    pub rejected_again: u32,
}

pub async fn resubmit(
    State(state): State<AppState>,
    body: Option<Json<ResubmitRequest>>,
) -> Result<Json<ResubmitOutcome>, ApiError> {
    let request = body.map(|Json(b)| b).unwrap_or_default();
    let store = state.store().await?;
    let classifier = classifier(&state.settings)?;
    let policy = IngestPolicy::default();
    let ctx = IngestContext {
        store: store.as_ref(),
        clock: state.clock.as_ref(),
        classifier,
        policy: &policy,
    };
    let mut result = ResubmitOutcome::default();
    for (id, letter) in store.dead_letters(MAX_ENTRIES).await? {
        if !request.ids.is_empty() && !request.ids.contains(&id) {
            continue;
        }
        let event = RawEvent {
            value: letter.raw.into_bytes(),
            headers: Default::default(),
            topic: letter.topic,
            partition: letter.partition,
            offset: letter.offset,
        };
        let outcome = classify_batch(std::slice::from_ref(&event), &ctx)
            .await
            .map_err(|e| ApiError::Unavailable(e.to_string()))?;
        result.resubmitted += 1;
        result.accepted += outcome.accepted;
        result.duplicate_or_stale += outcome.duplicate_or_stale;
        result.rejected_again += outcome.dead_lettered + outcome.lost;
        if outcome.lost == 0 {
            store.remove_dead_letter(&id).await?;
        }
    }
    Ok(Json(result))
}
