//! `GET /api/dead-letters` lists rejected events (with the stream's size, cap and the
//! count its cap trimmed in `X-Dead-Letters-*` headers); `POST /api/dead-letters`
//! re-submits them.
//!
//! Re-submission is [`stormgate_shared::dead_letters::resubmit`], the same as
//! `stormgate dead-letters resubmit`: each entry's event runs through `classify` again with
//! its original CDC headers and Kafka coordinates, and leaves the stream once stored; an
//! event rejected again is kept under a new entry with the new reason.

use axum::Json;
use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};
use stormgate_shared::dead_letters::{ResubmitError, ResubmitReport, Selection, resubmit};
use stormgate_shared::ingest::IngestContext;
use stormgate_shared::store::DeadLetter;

use crate::error::ApiError;
use crate::state::AppState;

/// Most entries listed or re-submitted at once.
pub const MAX_ENTRIES: usize = 1000;

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    pub limit: Option<usize>,
}

/// One listed entry: its stream id and the dead letter.
#[derive(Debug, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    #[serde(flatten)]
    pub letter: DeadLetter,
}

/// The stream's length, its cap (0: none) and how many entries the cap trimmed in total.
pub const TOTAL_HEADER: &str = "x-dead-letters-total";
pub const CAP_HEADER: &str = "x-dead-letters-cap";
pub const TRIMMED_HEADER: &str = "x-dead-letters-trimmed-total";

pub async fn list(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<([(&'static str, String); 3], Json<Vec<Entry>>), ApiError> {
    let store = state.store().await?;
    let limit = query.limit.unwrap_or(100).min(MAX_ENTRIES);
    let entries = store.dead_letters(limit).await?;
    let stats = store.dead_letter_stats().await?;
    Ok((
        [
            (TOTAL_HEADER, stats.entries.to_string()),
            (CAP_HEADER, stats.cap.to_string()),
            (TRIMMED_HEADER, stats.trimmed_total.to_string()),
        ],
        Json(
            entries
                .into_iter()
                .map(|(id, letter)| Entry { id, letter })
                .collect(),
        ),
    ))
}

/// `{"ids": [...]}` re-submits those entries; an empty body or no ids re-submits all
/// among the oldest [`MAX_ENTRIES`].
#[derive(Debug, Default, Deserialize)]
pub struct ResubmitRequest {
    #[serde(default)]
    pub ids: Vec<String>,
}

pub async fn resubmit_entries(
    State(state): State<AppState>,
    body: Option<Json<ResubmitRequest>>,
) -> Result<Json<ResubmitReport>, ApiError> {
    let request = body.map(|Json(b)| b).unwrap_or_default();
    let store = state.store().await?;
    let classifier = state.classifier()?;
    let ctx = IngestContext {
        store: store.as_ref(),
        clock: state.clock.as_ref(),
        classifier,
        policy: &state.ingest,
    };
    let selection = if request.ids.is_empty() {
        Selection::All
    } else {
        Selection::Ids(request.ids)
    };
    let report = resubmit(&ctx, &selection, MAX_ENTRIES)
        .await
        .map_err(|e| match e {
            ResubmitError::Unavailable(e) => ApiError::Unavailable(e),
            ResubmitError::Corrupt(e) => ApiError::Internal(e),
        })?;
    Ok(Json(report))
}
