//! `GET /api/health` (anonymous): the handler process is up and serving.
//!
//! It does not touch Redis: a liveness probe that fails while Redis restarts would get
//! healthy instances recycled in the middle of a storm.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::state::AppState;

pub async fn get(State(state): State<AppState>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "store_connected": state.store.is_connected(),
    }))
}
