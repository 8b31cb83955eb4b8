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
use stormgate_shared::region_key::RegionKey;
use stormgate_shared::region_rollup::RegionRollup;
use stormgate_shared::store::Store;
use stormgate_shared::summary::{EXTRACTIVE_MODEL, PutOutcome, Summary};
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
    let rollup = RegionRollup::llm(
        RegionKey::of("north"),
        EpochMillis(1_800_000_000_000),
        "North: steady.".into(),
        Tier::Standard,
        "gpt-4o-2024-08-06",
        Tokens(612),
        "rollup/v1",
    )
    .with_facts(serde_json::json!({"open": 3, "trend": "steady"}));
    store.put_rollup(&rollup).await.unwrap();
    let (status, body) = get(store.clone(), "/api/regions/North/rollup").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["text"], "North: steady.");
    assert_eq!(body["region"], "north");
    assert_eq!(body["facts"]["open"], 3);
    assert_eq!(body["tier"], "standard");
    let (status, _) = get(store, "/api/regions/south/rollup").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A roll-up as the deployed layout holds it: a `rollup` summary in the summary hash of
/// the region's key (what the handler wrote before roll-ups had their own key type).
const DEPLOYED_ROLLUP: &str = r#"{"ticket":"642a9f4e3ef8bd6689c62e008bee52d0","number":"north","version":1800000000000,"kind":"rollup","text":"North: steady.","tier":"standard","model":"gpt-4o-2024-08-06","degraded":false,"tokens_used":612,"created_at":1800000000000,"prompt_version":"rollup/v1","input":{"open":3,"trend":"steady"}}"#;

#[tokio::test]
async fn a_rollup_stored_in_the_deployed_layout_is_served_field_for_field() {
    let redis = RedisServer::start().unwrap();
    let client = redis::Client::open(redis.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("HSET")
        .arg("{read-api}:summary:642a9f4e3ef8bd6689c62e008bee52d0")
        .arg(&[
            "rollup",
            DEPLOYED_ROLLUP,
            "rollup:version",
            "1800000000000",
            "rollup:rank",
            "2",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(redis.store("read-api").unwrap());
    let (status, body) = get(store.clone(), "/api/regions/%20North/rollup").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        serde_json::json!({
            "text": "North: steady.",
            "version": 1_800_000_000_000_u64,
            "tier": "standard",
            "model": "gpt-4o-2024-08-06",
            "degraded": false,
            "tokens_used": 612,
            "prompt_version": "rollup/v1",
            "created_at": 1_800_000_000_000_u64,
            "created_at_utc": EpochMillis(1_800_000_000_000).to_string(),
            "region": "north",
            "facts": {"open": 3, "trend": "steady"},
        })
    );
    // An older roll-up of the same region does not replace the deployed one.
    let older = RegionRollup::fallback(
        RegionKey::of("North"),
        EpochMillis(1_799_999_999_000),
        "North: older.".into(),
    );
    assert_eq!(
        store.put_rollup(&older).await.unwrap(),
        PutOutcome::Superseded
    );
}
