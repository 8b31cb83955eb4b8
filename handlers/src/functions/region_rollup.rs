//! `GET /api/regions/{region}/rollup`: the latest executive roll-up of one region,
//! with its metadata and the counts it was built from. 404 when none was made yet.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};
use stormgate_shared::region_key::RegionKey;
use stormgate_shared::region_rollup::RegionRollup;

use crate::error::ApiError;
use crate::state::AppState;

/// Region names are short labels; anything longer is not one.
const MAX_REGION_CHARS: usize = 64;

pub async fn get(
    State(state): State<AppState>,
    Path(region): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if region.trim().is_empty() || region.chars().count() > MAX_REGION_CHARS {
        return Err(ApiError::BadRequest(format!(
            "a region name has 1 to {MAX_REGION_CHARS} characters"
        )));
    }
    let store = state.store().await?;
    let rollup = store
        .rollup(&RegionKey::of(&region))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no roll-up for region {region:?} yet")))?;
    Ok(Json(rollup_json(&rollup)))
}

/// A roll-up as the read API answers it: the fields a ticket's summary has (see
/// `summaries::summary_json`), the region's name as the roll-up was made for it, and
/// the counts it was built from.
fn rollup_json(r: &RegionRollup) -> Value {
    json!({
        "text": r.text,
        "version": r.version,
        "tier": r.tier,
        "model": r.model,
        "degraded": r.degraded,
        "tokens_used": r.tokens_used,
        "prompt_version": r.prompt_version,
        "created_at": r.created_at,
        "created_at_utc": r.created_at.to_string(),
        "region": r.region.name(),
        "facts": r.facts,
    })
}
