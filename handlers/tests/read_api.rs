//! The summary read APIs over the router, against a real redis-server store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use stormgate_handlers::app::app;
use stormgate_handlers::config::Settings;
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::state::AppState;
use stormgate_handlers::system_clock::SystemClock;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::rollup::region_key;
use stormgate_shared::store::Store;
use stormgate_shared::summary::{EXTRACTIVE_MODEL, Summary};
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::tokens::Tokens;
use tower::ServiceExt;

const TICKET: &str = "0123456789abcdef0123456789abcdef";

fn summary(version: u64, kind: SummaryKind, tier: Tier, text: &str) -> Summary {
    Summary {
        ticket: TICKET.parse().unwrap(),
        number: "INC0012345".into(),
        version,
        kind,
        text: text.into(),
        tier,
        model: if tier == Tier::Extractive {
            EXTRACTIVE_MODEL.into()
        } else {
            "gpt-4o-2024-08-06".into()
        },
        degraded: tier == Tier::Extractive && version > 1,
        tokens_used: Tokens(if tier == Tier::Extractive { 0 } else { 612 }),
        created_at: EpochMillis(1_800_000_000_000 + version),
        prompt_version: (tier != Tier::Extractive).then(|| format!("{kind}/v1")),
        input: Value::Null,
    }
}

async fn get(store: Arc<dyn Store>, path: &str) -> (StatusCode, Value) {
    let router = app(AppState::new(
        Settings::example(),
        LazyStore::ready(store),
        Arc::new(SystemClock),
    ));
    let response = router
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn the_latest_summary_of_each_kind_is_served_with_its_metadata() {
    let redis = RedisServer::start().unwrap();
    let store: Arc<dyn Store> = Arc::new(redis.store("read-api").unwrap());
    for s in [
        summary(1, SummaryKind::Technician, Tier::Extractive, "instant v1"),
        summary(1, SummaryKind::Technician, Tier::Premium, "llm v1"),
        summary(2, SummaryKind::Technician, Tier::Extractive, "fallback v2"),
        summary(
            2,
            SummaryKind::Customer,
            Tier::Standard,
            "customers notice v2",
        ),
    ] {
        store.put_summary(&s).await.unwrap();
    }
    let (status, body) = get(store, &format!("/api/summaries/{}", TICKET.to_uppercase())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ticket"], TICKET);
    assert_eq!(body["number"], "INC0012345");
    let tech = &body["summaries"]["technician"];
    assert_eq!(tech["text"], "fallback v2");
    assert_eq!(tech["version"], 2);
    assert_eq!(tech["tier"], "extractive");
    assert_eq!(tech["model"], "extractive");
    assert_eq!(tech["degraded"], true);
    let customer = &body["summaries"]["customer"];
    assert_eq!(customer["tier"], "standard");
    assert_eq!(customer["model"], "gpt-4o-2024-08-06");
    assert_eq!(customer["tokens_used"], 612);
    assert_eq!(customer["prompt_version"], "customer/v1");
    assert_eq!(customer["degraded"], false);
}

#[tokio::test]
async fn unknown_tickets_are_404_and_malformed_ids_400() {
    let redis = RedisServer::start().unwrap();
    let store: Arc<dyn Store> = Arc::new(redis.store("read-api").unwrap());
    let (status, body) = get(store.clone(), &format!("/api/summaries/{TICKET}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _) = get(store, "/api/summaries/not-a-sys-id").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_region_rollup_is_served_and_unknown_regions_are_404() {
    let redis = RedisServer::start().unwrap();
    let store: Arc<dyn Store> = Arc::new(redis.store("read-api").unwrap());
    let mut rollup = summary(
        1_800_000_000_000,
        SummaryKind::Rollup,
        Tier::Standard,
        "North: steady.",
    );
    rollup.ticket = region_key("north");
    rollup.number = "north".into();
    rollup.input = serde_json::json!({"open": 3, "trend": "steady"});
    store.put_summary(&rollup).await.unwrap();
    let (status, body) = get(store.clone(), "/api/regions/North/rollup").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["text"], "North: steady.");
    assert_eq!(body["region"], "north");
    assert_eq!(body["facts"]["open"], 3);
    assert_eq!(body["tier"], "standard");
    let (status, _) = get(store, "/api/regions/south/rollup").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
