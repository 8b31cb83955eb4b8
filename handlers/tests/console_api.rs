//! The console's routes through the router, against the in-memory store and a manual
//! clock: the read API by ticket number with the routing explained, the status and series
//! documents after real `classify` and `dispatch` invocations, the console page, and the
//! controls (applied, audited, refused with a typed error).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use stormgate_handlers::app::app;
use stormgate_handlers::config::Settings;
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::state::AppState;
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::store::memory::MemoryStore;
use tower::ServiceExt;

/// 2026-11-29T10:00:30Z: thirty seconds after the records' Kafka timestamps.
const NOW: EpochMillis = EpochMillis(1_795_946_430_000);

fn router() -> (Router, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::starting_at(NOW));
    let state = AppState::new(
        Settings::example(),
        LazyStore::ready(Arc::new(MemoryStore::new())),
        clock.clone(),
    );
    (app(state), clock)
}

async fn send(router: &Router, request: Request<Body>) -> (StatusCode, Vec<u8>, String) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body.to_vec(), content_type)
}

async fn get(router: &Router, path: &str) -> (StatusCode, Value) {
    let (status, body, _) = send(router, Request::get(path).body(Body::empty()).unwrap()).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

async fn post(router: &Router, path: &str, body: &Value) -> (StatusCode, Value) {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, body, _) = send(router, request).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_ticket_is_read_by_its_number_with_why_it_was_routed_there() {
    let (router, _) = router();
    let (status, body) = post(
        &router,
        "/classify",
        &support::kafka_invocation(&[support::incident(7, "3")]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, by_id) = get(&router, &format!("/api/summaries/{}", support::sys_id(7))).await;
    assert_eq!(status, StatusCode::OK, "{by_id}");
    let number = by_id["number"].as_str().unwrap().to_owned();
    assert!(number.starts_with("INC"), "{number}");

    let (status, by_number) = get(
        &router,
        &format!("/api/summaries/{}", number.to_lowercase()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{by_number}");
    assert_eq!(by_number["ticket"], support::sys_id(7));
    let routing = &by_number["routing"];
    assert_eq!(routing["servicenow_priority"], "P3");
    assert!(routing["predicted"].is_string(), "{routing}");
    assert_eq!(routing["probabilities"].as_array().unwrap().len(), 5);
    let reason = routing["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("ServiceNow priority P3; the classifier predicted"),
        "{reason}"
    );
    assert!(routing["technician_tier"].is_string(), "{routing}");
    // The basis is kept with the snapshot and agrees with the severity routed at.
    let basis = routing["routing_basis"]["basis"].as_str().unwrap();
    let raised = routing["raised_above_priority"].as_bool().unwrap();
    assert_eq!(basis == "service_now", !raised, "{routing}");
    let tier: stormgate_shared::tier_table::TierChoice = routing["technician_tier"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        reason.contains(&format!("technician summary: {tier}")),
        "{reason}"
    );

    let (status, _) = get(&router, "/api/summaries/INC9999999").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "an unknown number");
    let (status, _) = get(&router, "/api/summaries/not-a-ticket!").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_status_and_series_say_what_classify_and_dispatch_did() {
    let (router, clock) = router();
    let events: Vec<Value> = (1..=4).map(|n| support::incident(n, "2")).collect();
    let (status, _) = post(&router, "/classify", &support::kafka_invocation(&events)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = post(&router, "/dispatch", &support::timer_invocation()).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let (status, doc) = get(&router, "/api/status").await;
    assert_eq!(status, StatusCode::OK, "{doc}");
    assert!(doc["verdict"]["text"].is_string());
    // Every record was stamped 30 s before the handler's clock.
    let partition = &doc["ingest"]["lag"]["partitions"][0];
    assert_eq!(partition["topic"], "servicenow.incident");
    assert_eq!(partition["records"], 4);
    assert_eq!(partition["max_ms"], 30_000);
    assert_eq!(partition["p50_ms"], 30_000);
    assert_eq!(doc["deployments"].as_array().unwrap().len(), 2);
    assert_eq!(doc["deployments"][0]["tier"], "premium");
    assert_eq!(doc["severities"].as_array().unwrap().len(), 5);

    // A minute on, the classify minute is the one the rates are of.
    clock.advance(Duration::from_secs(60));
    let (_, doc) = get(&router, "/api/status").await;
    assert_eq!(doc["ingest"]["events_per_minute"], 4, "{}", doc["ingest"]);
    assert_eq!(doc["ingest"]["accepted_per_minute"], 4);

    let (status, series) = get(&router, "/api/series?minutes=5").await;
    assert_eq!(status, StatusCode::OK, "{series}");
    let points = series["points"].as_array().unwrap();
    assert_eq!(points.len(), 5);
    assert_eq!(points[3]["events"], 4);
    assert_eq!(points[3]["lag_max_ms"], 30_000);
    let (status, _) = get(&router, "/api/series?minutes=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = get(&router, "/api/series?minutes=100000").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_console_is_one_self_contained_page_that_loads_nothing_from_elsewhere() {
    let (router, _) = router();
    let (status, body, content_type) = send(
        &router,
        Request::get("/api/console?code=k")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "text/html; charset=utf-8");
    let page = String::from_utf8(body).unwrap();
    assert!(
        page.starts_with("<!doctype html>"),
        "{}",
        &page[..40.min(page.len())]
    );
    // The SVG namespace is a name, not a place: anything else would be a fetch.
    let page = page.replace("\"http://www.w3.org/2000/svg\"", "SVG_NAMESPACE");
    for external in ["http://", "https://", "<link", "src=", "@import", "url("] {
        assert!(!page.contains(external), "the page refers to {external}");
    }
    let response = router
        .clone()
        .oneshot(Request::get("/api/console").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let csp = response.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap();
    assert!(csp.starts_with("default-src 'none'"), "{csp}");
    assert!(csp.contains("connect-src 'self'"), "{csp}");
}

#[tokio::test]
async fn a_control_is_applied_audited_and_shown_in_the_status() {
    let (router, clock) = router();
    let (status, answer) = post(
        &router,
        "/api/controls",
        &json!({"by": "alice", "action": "pause", "tier": "premium", "minutes": 10}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["outcome"]["effect"], "changed");
    assert_eq!(answer["outcome"]["control"], "tier:premium:paused");
    assert_eq!(answer["audit"][0]["action"], "pause");
    assert_eq!(answer["audit"][0]["by"], "alice");
    assert_eq!(answer["audit"][0]["source"], "http");

    let (_, doc) = get(&router, "/api/status").await;
    assert_eq!(doc["queues"][0]["paused"], true);
    assert_eq!(doc["deployments"][0]["paused"], true);
    assert!(
        doc["verdict"]["text"]
            .as_str()
            .unwrap()
            .contains("premium paused by alice"),
        "{}",
        doc["verdict"]
    );
    assert_eq!(doc["audit"][0]["action"], "pause");

    // It ends by itself ten minutes on, and the end is audited.
    clock.advance(Duration::from_secs(600));
    let (_, doc) = get(&router, "/api/status").await;
    assert_eq!(doc["queues"][0]["paused"], false);
    assert_eq!(doc["audit"][0]["action"], "expired");

    for (request, expected) in [
        (
            json!({"by": "alice", "action": "sleep"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"action": "pause", "tier": "premium"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"by": "alice", "action": "mark_down", "deployment": "nope"}),
            StatusCode::NOT_FOUND,
        ),
        (
            json!({"by": "alice", "action": "resummarize", "ticket": "INC0000404"}),
            StatusCode::NOT_FOUND,
        ),
        (
            json!({"by": "alice", "action": "override_headroom", "deployment": "premium-deployment",
                   "headroom": 2.0, "minutes": 5}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (status, body) = post(&router, "/api/controls", &request).await;
        assert_eq!(status, expected, "{request} → {body}");
        assert!(body["error"].is_string(), "{body}");
    }
    let (_, doc) = get(&router, "/api/status").await;
    assert_eq!(
        doc["audit"].as_array().unwrap().len(),
        2,
        "refusals are not audited"
    );
}
