//! The `classify` function on a host-shaped Kafka batch against a real redis-server: mixed
//! valid, duplicate, stale, superseding, closed, oversized-log, malformed, oversized and
//! undecodable events in one invocation, as the Functions host delivers it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use base64::Engine;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use stormgate_handlers::app::{AppState, app};
use stormgate_handlers::config::Settings;
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::redis_connector::NAMESPACE;
use stormgate_handlers::system_clock::SystemClock;
use stormgate_shared::job::{JobId, SummaryKind};
use stormgate_shared::sample_events::{rng, storm_event, sys_id};
use stormgate_shared::store::Store;
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::ticket_id::TicketId;
use tower::ServiceExt;

const TOPIC: &str = "servicenow.incident";

/// One `KafkaEventData` as the host serializes it: header values in base64.
fn record(offset: i64, value: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({
        "Offset": offset, "Partition": 4, "Topic": TOPIC, "Timestamp": "2026-11-29T10:00:00Z",
        "Key": null, "Value": value,
        "Headers": [{"Key": "action", "Value": b64("update")}, {"Key": "table_name", "Value": b64("incident")}],
    })
    .to_string()
}

fn id(n: u64) -> TicketId {
    sys_id(n).parse().unwrap()
}

/// Tickets 1..=5 at v3; 1 v3 again (duplicate); 2 v1 (stale); 3 v4 (supersedes); 6 closed;
/// 7 with a 200 KB log (bounded, accepted); then not JSON, no `sys_mod_count`, a 3 MB
/// event (over the 2 MiB limit), and an element that is not a Kafka record at all.
fn mixed_invocation() -> Value {
    let mut r = rng(42);
    let mut records = Vec::new();
    let mut v3 = Vec::new();
    for n in 1..=5u64 {
        let e = storm_event(&mut r, n, 3, 8 * 1024 + n as usize * 2_000);
        records.push(record(100 + n as i64, &e.to_string()));
        v3.push(e);
    }
    records.push(record(200, &v3[0].to_string()));
    records.push(record(201, &storm_event(&mut r, 2, 1, 9_000).to_string()));
    records.push(record(202, &storm_event(&mut r, 3, 4, 12_000).to_string()));
    let mut closed = storm_event(&mut r, 6, 9, 8_000);
    closed["state"] = "7".into();
    records.push(record(203, &closed.to_string()));
    records.push(record(
        204,
        &storm_event(&mut r, 7, 1, 200 * 1024).to_string(),
    ));
    records.push(record(300, r#"{"sys_id": "abc", oops"#));
    let mut no_version = storm_event(&mut r, 8, 1, 8_000);
    no_version.as_object_mut().unwrap().remove("sys_mod_count");
    records.push(record(301, &no_version.to_string()));
    records.push(record(
        302,
        &storm_event(&mut r, 9, 1, 3 * 1024 * 1024).to_string(),
    ));
    records.push(r#"{"Offset": "not a number", "Value": 17}"#.to_owned());
    json!({
        "Data": {"events": serde_json::to_string(&records).unwrap()},
        "Metadata": {"sys": {"MethodName": "classify", "UtcNow": "2026-11-29T10:00:01Z", "RandGuid": "r"}}
    })
}

async fn classify(store: Arc<dyn Store>, invocation: &Value) -> Value {
    let router = app(AppState::new(
        Settings::example(),
        LazyStore::ready(store),
        Arc::new(SystemClock),
    ));
    let response = router
        .oneshot(
            Request::post("/classify")
                .header("content-type", "application/json")
                .body(Body::from(invocation.to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap()
}

#[tokio::test]
async fn a_host_shaped_mixed_batch_is_counted_stored_once_per_version_and_dead_lettered_with_reasons()
 {
    let redis = RedisServer::start().unwrap();
    let store: Arc<dyn Store> = Arc::new(redis.store(NAMESPACE).unwrap());
    let invocation = mixed_invocation();

    let body = classify(store.clone(), &invocation).await;

    assert_eq!(
        body["ReturnValue"],
        json!({"accepted": 8, "duplicate_or_stale": 2, "dead_lettered": 4, "lost": 0}),
        "{body}"
    );
    for (n, version) in [(1, 3), (2, 3), (3, 4), (4, 3), (5, 3), (6, 9), (7, 1)] {
        let summary = store
            .summary(&id(n), SummaryKind::Technician)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("ticket {n} has no summary"));
        assert_eq!(summary.version, version, "ticket {n}");
        let (stored, _) = store.ticket_snapshot(&id(n)).await.unwrap().unwrap();
        assert_eq!(stored, version, "ticket {n}");
    }
    for rejected in [8, 9] {
        assert_eq!(store.ticket_snapshot(&id(rejected)).await.unwrap(), None);
    }
    let superseded = JobId {
        ticket: id(3),
        version: 3,
        kind: SummaryKind::Technician,
    };
    assert!(!store.job_exists(&superseded).await.unwrap());

    let letters = store.dead_letters(10).await.unwrap();
    let reason_at = |offset: Option<i64>| {
        letters
            .iter()
            .find(|(_, l)| l.offset == offset)
            .map(|(_, l)| l.reason.clone())
            .unwrap_or_else(|| panic!("no dead letter at offset {offset:?}: {letters:?}"))
    };
    assert!(reason_at(Some(300)).contains("not JSON"));
    assert!(reason_at(Some(301)).contains("sys_mod_count"));
    assert!(reason_at(Some(302)).contains("exceeds"));
    assert!(reason_at(None).starts_with("not a Kafka event"));
    for (_, letter) in letters.iter().filter(|(_, l)| l.offset.is_some()) {
        assert_eq!(letter.topic.as_deref(), Some(TOPIC));
        assert_eq!(letter.partition, Some(4));
        assert_eq!(letter.headers.action.as_deref(), Some("update"));
    }

    // The host redelivering the same batch stores nothing new.
    let again = classify(store.clone(), &invocation).await;
    assert_eq!(
        again["ReturnValue"],
        json!({"accepted": 0, "duplicate_or_stale": 10, "dead_lettered": 4, "lost": 0}),
        "{again}"
    );
}
