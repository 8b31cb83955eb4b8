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
use stormgate_handlers::app::app;
use stormgate_handlers::config::Settings;
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::redis_connector::NAMESPACE;
use stormgate_handlers::state::AppState;
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

/// One `KafkaEventData` with the given headers (none: a producer that sends none).
fn record_with(offset: i64, value: &str, headers: &[(&str, &str)]) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let headers: Vec<Value> = headers
        .iter()
        .map(|(k, v)| json!({"Key": k, "Value": b64(v)}))
        .collect();
    json!({
        "Offset": offset, "Partition": 4, "Topic": TOPIC, "Timestamp": "2026-11-29T10:00:00Z",
        "Key": null, "Value": value, "Headers": headers,
    })
    .to_string()
}

/// The ReturnValue's `skipped` when no record was.
fn none_skipped() -> Value {
    json!({"other_table": 0, "heartbeat": 0, "not_an_incident": 0, "other_format": 0})
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
        json!({"accepted": 8, "duplicate_or_stale": 2, "dead_lettered": 4, "skipped": none_skipped()}),
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
        json!({"accepted": 0, "duplicate_or_stale": 10, "dead_lettered": 4, "skipped": none_skipped()}),
        "{again}"
    );
}

/// `POST /classify` on a router over `store`: the answer's status and body.
async fn classify_answer(store: Arc<dyn Store>, invocation: &Value) -> (u16, Value) {
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
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn batch_of(records: Vec<String>) -> Value {
    json!({
        "Data": {"events": serde_json::to_string(&records).unwrap()},
        "Metadata": {"sys": {"MethodName": "classify", "UtcNow": "2026-11-29T10:00:01Z", "RandGuid": "r"}}
    })
}

const TICKETS: u64 = 40;

async fn used_memory(connection: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(connection)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// Fills Redis with 8 KB values until less than `headroom` bytes are left below
/// `limit`; the number of values written.
async fn fill(
    connection: &mut redis::aio::MultiplexedConnection,
    limit: u64,
    headroom: u64,
) -> u64 {
    let mut filler = 0;
    while used_memory(connection).await + headroom < limit {
        redis::cmd("SET")
            .arg(format!("filler:{filler}"))
            .arg(vec![b'x'; 8 * 1024])
            .query_async::<()>(connection)
            .await
            .unwrap();
        filler += 1;
    }
    filler
}

async fn stored_count(store: &dyn Store) -> u64 {
    let mut stored = 0;
    for n in 1..=TICKETS {
        if store.ticket_snapshot(&id(n)).await.unwrap().is_some() {
            stored += 1;
        }
    }
    stored
}

/// Redis at `maxmemory` with `noeviction` takes part of a batch and refuses the rest
/// (OOM): the invocation must not answer 2xx while any of its events is neither stored
/// nor dead-lettered, and once memory is freed the retried batch stores everything.
#[tokio::test]
async fn a_full_redis_never_gets_a_2xx_for_a_batch_it_did_not_store_and_the_retry_stores_it() {
    const LIMIT: u64 = 8 * 1024 * 1024;
    let redis =
        RedisServer::start_with(&[("maxmemory", "8mb"), ("maxmemory-policy", "noeviction")])
            .unwrap();
    let store: Arc<dyn Store> = Arc::new(redis.store(NAMESPACE).unwrap());
    let client = redis::Client::open(redis.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let mut r = rng(7);
    let records: Vec<String> = (1..=TICKETS)
        .map(|n| {
            record(
                500 + n as i64,
                &storm_event(&mut r, n, 1, 8 * 1024).to_string(),
            )
        })
        .collect();
    let invocation = batch_of(records);

    // How much room makes Redis take part of the batch depends on its allocator and on
    // how the pipeline's bytes arrive: search for it, each try on an emptied Redis. Every
    // answer on the way must already keep the rule.
    let (mut low, mut high) = (0u64, 4 * 1024 * 1024);
    let mut found = None;
    for _ in 0..16 {
        let headroom = (low + high) / 2;
        redis::cmd("FLUSHALL")
            .query_async::<()>(&mut admin)
            .await
            .unwrap();
        let filler = fill(&mut admin, LIMIT, headroom).await;
        let (status, body) = classify_answer(store.clone(), &invocation).await;
        let stored = stored_count(store.as_ref()).await;
        let letters = store.dead_letters(100).await.unwrap().len() as u64;
        assert!(
            !(200..300).contains(&status) || stored + letters == TICKETS,
            "answered {status} with {stored} of {TICKETS} events stored and {letters} \
             dead-lettered: {body}"
        );
        match stored {
            0 => low = headroom,
            TICKETS => high = headroom,
            _ => {
                found = Some((filler, stored));
                break;
            }
        }
    }
    let (filler, partly) = found.expect("some room lets Redis take part of the batch");

    // Memory freed: the host's retry of the same batch stores the rest; the stored
    // ones are recognised.
    for n in 0..filler {
        redis::cmd("DEL")
            .arg(format!("filler:{n}"))
            .query_async::<()>(&mut admin)
            .await
            .unwrap();
    }
    let (status, body) = classify_answer(store.clone(), &invocation).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ReturnValue"]["accepted"], TICKETS - partly, "{body}");
    assert_eq!(body["ReturnValue"]["duplicate_or_stale"], partly, "{body}");
    assert_eq!(stored_count(store.as_ref()).await, TICKETS);
    assert!(store.dead_letters(100).await.unwrap().is_empty());
}

/// The topic is shared: out of 100 records, 5 are incidents (one of them invalid). The
/// other tables' records (with a `table_name` header or, like a `problem` record, without
/// one), heartbeats and other formats are skipped and counted by reason; only the
/// incident that fails validation is dead-lettered.
#[tokio::test]
async fn a_shared_topic_mix_stores_the_incidents_skips_the_rest_and_dead_letters_only_bad_incidents()
 {
    let redis = RedisServer::start().unwrap();
    let store: Arc<dyn Store> = Arc::new(redis.store(NAMESPACE).unwrap());
    let mut r = rng(5);
    let mut records = Vec::new();
    let mut offset = 0;
    let mut next = || {
        offset += 1;
        offset
    };
    let incident = [("action", "update"), ("table_name", "incident")];
    // Four good incidents: two with the CDC headers, two without (INC number and fields).
    for n in 1..=2u64 {
        let event = storm_event(&mut r, n, 1, 4_000).to_string();
        records.push(record_with(next(), &event, &incident));
    }
    for n in 3..=4u64 {
        let event = storm_event(&mut r, n, 1, 4_000).to_string();
        records.push(record_with(next(), &event, &[]));
    }
    // One incident that fails validation: dead-lettered.
    let mut broken = storm_event(&mut r, 5, 1, 4_000);
    broken["state"] = "five".into();
    records.push(record_with(next(), &broken.to_string(), &incident));
    // 40 records of other tables, announced by their header.
    for n in 0..40u64 {
        let table = ["change_request", "problem", "sys_user", "incident_task"][n as usize % 4];
        let mut other = storm_event(&mut r, 100 + n, 1, 1_000);
        other["number"] = format!("CHG{:07}", n).into();
        records.push(record_with(
            next(),
            &other.to_string(),
            &[("table_name", table)],
        ));
    }
    // 20 problem records without any header: PRB numbers, incident-like fields.
    for n in 0..20u64 {
        let mut problem = storm_event(&mut r, 200 + n, 1, 1_000);
        problem["number"] = format!("PRB{:07}", n).into();
        records.push(record_with(next(), &problem.to_string(), &[]));
    }
    // 15 heartbeats: empty values and JSON keep-alives.
    for n in 0..15 {
        let value = if n % 3 == 0 {
            String::new()
        } else {
            json!({"type": "heartbeat", "ts": 1_764_410_400_000u64 + n}).to_string()
        };
        records.push(record_with(next(), &value, &[]));
    }
    // 20 values in other formats: XML, plain text, JSON arrays and scalars.
    for n in 0..20 {
        let value = match n % 4 {
            0 => format!("<record><number>INC{n:07}</number></record>"),
            1 => format!("router {n} says hello"),
            2 => "[1, 2, 3]".to_owned(),
            _ => "42".to_owned(),
        };
        records.push(record_with(next(), &value, &[]));
    }
    assert_eq!(records.len(), 100);

    let (status, body) = classify_answer(store.clone(), &batch_of(records)).await;

    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["ReturnValue"],
        json!({"accepted": 4, "duplicate_or_stale": 0, "dead_lettered": 1, "skipped": {
            "other_table": 40, "heartbeat": 15, "not_an_incident": 20, "other_format": 20}}),
        "{body}"
    );
    let letters = store.dead_letters(1_000).await.unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert!(letters[0].1.reason.contains("state"), "{letters:?}");
    for n in 1..=4 {
        assert!(
            store.ticket_snapshot(&id(n)).await.unwrap().is_some(),
            "incident {n}"
        );
    }
    for n in 200..220 {
        assert!(
            store.ticket_snapshot(&id(n)).await.unwrap().is_none(),
            "problem record {n} was taken for an incident"
        );
    }
}
