//! `GET /api/series?minutes=N` (function key): the last `N` minutes of the signal series
//! (180 by default, at most a day), one point per minute as charts read it
//! ([`stormgate_shared::signals::chart`]). The console draws its charts from it.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use serde::Deserialize;
use stormgate_shared::signals::Minute;
use stormgate_shared::signals::chart::chart;

use crate::error::ApiError;
use crate::state::AppState;

/// Minutes answered when none are asked for, and the most that may be.
pub const DEFAULT_MINUTES: u64 = 180;
pub const MAX_MINUTES: u64 = 24 * 60;

#[derive(Debug, Deserialize)]
pub struct SeriesQuery {
    pub minutes: Option<u64>,
}

pub async fn get(
    State(state): State<AppState>,
    Query(query): Query<SeriesQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let minutes = query.minutes.unwrap_or(DEFAULT_MINUTES);
    if !(1..=MAX_MINUTES).contains(&minutes) {
        return Err(ApiError::BadRequest(format!(
            "minutes must be between 1 and {MAX_MINUTES}, got {minutes}"
        )));
    }
    let to = Minute::of(state.clock.now());
    let from = to.back(minutes - 1);
    // One minute more: the first minute's rates need the one before.
    let buckets = state.signals.minutes(from.back(1), to).await?;
    let deployments: Vec<_> = state
        .fleet_config()
        .deployments
        .into_iter()
        .map(|d| (d.tier, d.deployment))
        .collect();
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        Json(chart(&buckets, &deployments, from, to)),
    ))
}
