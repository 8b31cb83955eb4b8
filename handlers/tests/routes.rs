//! The router as the Functions host sees it, driven in-process with `oneshot`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use stormgate_handlers::app::{FUNCTIONS, INVOCATION_ID_HEADER, app};
use stormgate_handlers::config::{LogFormat, Settings};
use stormgate_handlers::lazy_store::{ConnectStore, LazyStore};
use stormgate_handlers::state::AppState;
use stormgate_handlers::system_clock::SystemClock;
use stormgate_handlers::telemetry;
use stormgate_shared::controls::ControlStore;
use stormgate_shared::controls::redis::RedisControls;
use stormgate_shared::governor::{Ledger, MemoryLedger};
use stormgate_shared::redis_link::RedisLink;
use stormgate_shared::signals::SignalStore;
use stormgate_shared::signals::redis::RedisSignals;
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::store::{Store, StoreError};
use tower::ServiceExt;

/// A store that cannot be reached: proves which routes never need one.
struct Unreachable;

#[async_trait]
impl ConnectStore for Unreachable {
    async fn connect(&self) -> Result<Arc<dyn Store>, StoreError> {
        Err(StoreError::Unavailable(
            "connection refused to 10.0.0.1:6380 password=hunter2".into(),
        ))
    }

    fn ledger(&self) -> Arc<dyn Ledger> {
        Arc::new(MemoryLedger::new())
    }

    fn signals(&self) -> Arc<dyn SignalStore> {
        Arc::new(RedisSignals::new(
            Arc::new(RedisLink::unconnectable()),
            &"unreachable".parse().unwrap(),
        ))
    }

    fn controls(&self) -> Arc<dyn ControlStore> {
        Arc::new(RedisControls::new(
            Arc::new(RedisLink::unconnectable()),
            &"unreachable".parse().unwrap(),
        ))
    }
}

fn router_with(store: LazyStore) -> Router {
    app(AppState::new(
        Settings::example(),
        store,
        Arc::new(SystemClock),
    ))
}

/// A router whose store can never be reached.
fn router() -> Router {
    router_with(LazyStore::new(Arc::new(Unreachable)))
}

/// A router over the embedded in-memory store.
fn router_with_memory_store() -> Router {
    router_with(LazyStore::ready(Arc::new(MemoryStore::new())))
}

async fn send(request: Request<Body>) -> (StatusCode, Vec<u8>) {
    send_to(router(), request).await
}

async fn send_to(router: Router, request: Request<Body>) -> (StatusCode, Vec<u8>) {
    let response = router.oneshot(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body.to_vec())
}

async fn post_json(path: &str, body: impl Into<Body>) -> (StatusCode, Value) {
    post_json_to(router(), path, body).await
}

async fn post_json_to(router: Router, path: &str, body: impl Into<Body>) -> (StatusCode, Value) {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .header(INVOCATION_ID_HEADER, "3f1e7d0a-0000-4000-8000-000000000001")
        .body(body.into())
        .unwrap();
    let (status, bytes) = send_to(router, request).await;
    (
        status,
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes))),
    )
}

fn kafka_event_data(offset: i64, value: &str) -> String {
    json!({"Offset": offset, "Partition": 0, "Topic": "servicenow.incident", "Timestamp": "2026-11-29T10:00:00Z",
           "Key": null, "Value": value, "Headers": [{"Key": "table_name", "Value": "aW5jaWRlbnQ="}]})
    .to_string()
}

/// `Data.events` exactly as the host sends a `cardinality: many`, `dataType: string` batch.
fn host_shaped_kafka_invocation() -> Value {
    let records = vec![
        kafka_event_data(1, r#"{"sys_id":"a","number":"INC1"}"#),
        kafka_event_data(2, "{}"),
    ];
    json!({
        "Data": {"events": serde_json::to_string(&records).unwrap()},
        "Metadata": {"sys": {"MethodName": "classify", "UtcNow": "2026-11-29T10:00:01Z", "RandGuid": "x"}}
    })
}

#[tokio::test]
async fn root_answers_at_once_without_touching_the_store() {
    let (status, body) = send(Request::get("/").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!body.is_empty());
}

fn assert_invocation_response(status: StatusCode, body: &Value) {
    assert!(status.is_success(), "{status} {body}");
    for field in ["Outputs", "Logs", "ReturnValue"] {
        assert!(body.get(field).is_some(), "{field} missing from {body}");
    }
}

#[tokio::test]
async fn classify_accepts_a_host_shaped_double_encoded_kafka_batch() {
    let invocation = host_shaped_kafka_invocation().to_string();
    let (status, body) = post_json_to(router_with_memory_store(), "/classify", invocation).await;
    assert_invocation_response(status, &body);
}

#[tokio::test]
async fn classify_accepts_a_plain_kafka_batch() {
    let plain = json!({"Data": {"events": [{"Offset": 1, "Partition": 0, "Topic": "t", "Value": "{}"}]}, "Metadata": {}});
    let (status, body) =
        post_json_to(router_with_memory_store(), "/classify", plain.to_string()).await;
    assert_invocation_response(status, &body);
}

#[tokio::test]
async fn classify_fails_the_invocation_without_leaking_when_the_store_is_unreachable() {
    let (status, body) = post_json("/classify", host_shaped_kafka_invocation().to_string()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body["error"].is_string());
    assert!(
        !body.to_string().contains("hunter2") && !body.to_string().contains("10.0.0.1"),
        "{body}"
    );
}

#[tokio::test]
async fn garbage_gets_a_json_4xx_naming_the_problem() {
    let (status, body) = post_json("/classify", "\u{0}not json{{").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"].as_str().unwrap().contains("invocation body"),
        "{body}"
    );

    let (status, body) = post_json("/classify", json!({"Data": {"events": 42}}).to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().contains("events"), "{body}");

    let (status, body) = post_json("/dispatch", json!({"Data": {}}).to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().contains("timer"), "{body}");
}

#[tokio::test]
async fn unknown_routes_get_a_json_404() {
    let (status, body) = post_json("/no-such-function", "{}").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body["error"].is_string());
}

#[tokio::test]
async fn health_is_ok_while_the_store_is_unreachable() {
    let (status, body) = send(Request::get("/api/health").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["status"], "ok");
}

#[tokio::test]
async fn every_function_in_the_table_has_a_route() {
    for function in FUNCTIONS {
        let request = Request::post(function.path())
            .body(Body::from("{}"))
            .unwrap();
        let (status, _) = send(request).await;
        assert_ne!(
            status,
            StatusCode::NOT_FOUND,
            "{} at {}",
            function.name,
            function.path()
        );
    }
}

/// Collects log output for assertions.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> tracing_subscriber::fmt::MakeWriter<'w> for Captured {
    type Writer = Captured;
    fn make_writer(&'w self) -> Captured {
        self.clone()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn log_lines_of_an_invocation_carry_the_hosts_invocation_id() {
    let out = Captured::default();
    let subscriber = telemetry::subscriber(LogFormat::Json, Some("info"), out.clone()).unwrap();
    let _guard = tracing::subscriber::set_default(subscriber);

    let (status, _) = post_json("/classify", "garbage").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rejected = lines
        .iter()
        .find(|l| l["message"] == "rejected request")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        rejected["span"]["invocation_id"],
        "3f1e7d0a-0000-4000-8000-000000000001"
    );
    assert_eq!(rejected["span"]["path"], "/classify");
}

#[tokio::test]
async fn a_kafka_batch_larger_than_axums_default_limit_is_accepted() {
    let big_value = "x".repeat(64 * 1024);
    let records: Vec<String> = (0..64).map(|i| kafka_event_data(i, &big_value)).collect();
    let invocation =
        json!({"Data": {"events": serde_json::to_string(&records).unwrap()}, "Metadata": {}});
    let body = invocation.to_string();
    assert!(body.len() > 4 * 1024 * 1024);
    let (status, body) = post_json("/classify", body).await;
    assert_ne!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_ne!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
}

#[tokio::test]
async fn classify_counts_records_the_store_refused_apart_from_those_it_stored() {
    use stormgate_shared::sample_events::{rng, storm_event, sys_id};
    use stormgate_shared::testing::redis_server::RedisServer;

    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let store = Arc::new(server.store("routes").unwrap());
    // A foreign value at the second ticket's key: the store refuses that record alone.
    let client = redis::Client::open(server.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("SET")
        .arg(format!("{{routes}}:ticket:{}", sys_id(2)))
        .arg("not a hash")
        .query_async::<()>(&mut admin)
        .await
        .unwrap();
    let mut r = rng(5);
    let values: Vec<String> = (1..=3)
        .map(|n| storm_event(&mut r, n, 1, 9_000).to_string())
        .collect();
    let records: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, v)| kafka_event_data(40 + i as i64, v))
        .collect();
    let invocation =
        json!({"Data": {"events": serde_json::to_string(&records).unwrap()}, "Metadata": {}});

    let router = router_with(LazyStore::ready(store.clone()));
    let (status, body) = post_json_to(router, "/classify", invocation.to_string()).await;

    assert_invocation_response(status, &body);
    assert_eq!(
        body["ReturnValue"],
        json!({"accepted": 2, "duplicate_or_stale": 0, "dead_lettered": 1, "skipped":
            {"other_table": 0, "heartbeat": 0, "not_an_incident": 0, "other_format": 0}})
    );
    let letters = store.dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 1);
    let (_, letter) = &letters[0];
    assert!(
        letter.reason.starts_with("store refused the record"),
        "{}",
        letter.reason
    );
    assert_eq!(letter.offset, Some(41));
    assert_eq!(
        letter.raw, values[1],
        "the refused event's value, decoded again"
    );
}

/// A batch `classify` cannot store fails (the host delivers it again), and its log names
/// where it sits in the topic: per partition, the topic, the first and last offset and
/// the count, so that the batch can be found.
#[tokio::test(flavor = "current_thread")]
async fn a_failed_classify_batch_logs_its_topic_partition_and_offset_range() {
    let out = Captured::default();
    let subscriber = telemetry::subscriber(LogFormat::Json, Some("info"), out.clone()).unwrap();
    let _guard = tracing::subscriber::set_default(subscriber);
    let records: Vec<String> = (17..=19)
        .map(|offset| kafka_event_data(offset, r#"{"sys_id":"a"}"#))
        .collect();
    let invocation =
        json!({"Data": {"events": serde_json::to_string(&records).unwrap()}, "Metadata": {}});

    let (status, _) = post_json("/classify", invocation.to_string()).await;

    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let failed = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("classify batch failed"))
        })
        .unwrap_or_else(|| panic!("no failure line naming the batch:\n{text}"));
    assert_eq!(failed["level"], "ERROR", "{failed}");
    assert_eq!(failed["topic"], "servicenow.incident", "{failed}");
    assert_eq!(failed["partition"], 0, "{failed}");
    assert_eq!(failed["first_offset"], 17, "{failed}");
    assert_eq!(failed["last_offset"], 19, "{failed}");
    assert_eq!(failed["events"], 3, "{failed}");
}
