//! `GET /api/regions/{region}/rollup`: the latest executive roll-up of one region,
//! with its metadata and the counts it was built from. 404 when none was made yet.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};
use stormgate_shared::job::SummaryKind;
use stormgate_shared::rollup::region_key;

use crate::error::ApiError;
use crate::functions::summaries::summary_json;
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
        .summary(&region_key(&region), SummaryKind::Rollup)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no roll-up for region {region:?} yet")))?;
    let mut body = summary_json(&rollup);
    if let Some(object) = body.as_object_mut() {
        object.insert("region".into(), json!(rollup.number));
        object.insert("facts".into(), rollup.input.clone());
    }
    Ok(Json(body))
}
