//! Dead letters end to end against a real redis-server: a malformed event and a valid
//! event the store refused are dead-lettered by ingest, listed, and re-submitted, by the
//! `stormgate dead-letters` command and by the `dead-letters` HTTP function.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::support;

use std::process::{Command, Output};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use stormgate_handlers::app::app;
use stormgate_handlers::config::Settings;
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::redis_connector::NAMESPACE;
use stormgate_handlers::state::AppState;
use stormgate_handlers::system_clock::SystemClock;
use stormgate_shared::classifier::Classifier;
use stormgate_shared::event::CdcHeaders;
use stormgate_shared::ingest::{
    BatchOutcome, IngestContext, IngestPolicy, RawEvent, classify_batch,
};
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::store::{DeadLetter, Store};
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::ticket_id::TicketId;
use tower::ServiceExt;

const TOPIC: &str = "servicenow.incident";
const MALFORMED: &str = r#"{"sys_id": "abc", oops"#;

fn event(value: &str, offset: i64) -> RawEvent {
    RawEvent {
        value: value.as_bytes().to_vec(),
        headers: CdcHeaders {
            action: Some("update".into()),
            table_name: Some("incident".into()),
        },
        topic: Some(TOPIC.into()),
        partition: Some(3),
        offset: Some(offset),
    }
}

/// Dead-letters two events through ingest, as `classify` would: the malformed one, and
/// ticket 7, valid, whose key in Redis holds a value of the wrong type so that the store
/// refuses it. Then repairs the key, as an operator would. Returns ticket 7's id.
async fn dead_letter_two_events(redis: &RedisServer, store: &dyn Store) -> TicketId {
    let ticket: TicketId = support::sys_id(7).parse().unwrap();
    let key = format!("{{{NAMESPACE}}}:ticket:{}", ticket.as_str());
    let mut raw = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("not a hash")
        .query_async(&mut raw)
        .await
        .unwrap();

    let classifier = Classifier::embedded().unwrap();
    let policy = IngestPolicy::default();
    let ctx = IngestContext {
        store,
        clock: &SystemClock,
        classifier: &classifier,
        policy: &policy,
    };
    let valid = support::incident(7, "2").to_string();
    let outcome = classify_batch(&[event(MALFORMED, 300), event(&valid, 301)], &ctx)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        BatchOutcome {
            dead_lettered: 2,
            ..BatchOutcome::default()
        }
    );

    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut raw)
        .await
        .unwrap();
    ticket
}

fn stormgate(redis: &RedisServer, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_stormgate"))
        .arg("dead-letters")
        .args(["--redis", &redis.url()])
        .args(args)
        .output()
        .unwrap();
    eprintln!(
        "stormgate dead-letters {args:?}\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// The remaining entry is the malformed event, with its coordinates and headers, under
/// a new id and a fresh reason; ticket 7 is stored with its instant summary.
async fn assert_only_the_malformed_event_stays(store: &dyn Store, ticket: &TicketId) {
    let left = store.dead_letters(10).await.unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    let (_, letter) = &left[0];
    assert_eq!(letter.raw, MALFORMED);
    assert!(letter.reason.contains("not JSON"), "{}", letter.reason);
    assert_eq!(
        (letter.topic.as_deref(), letter.partition, letter.offset),
        (Some(TOPIC), Some(3), Some(300))
    );
    assert_eq!(letter.headers.table_name.as_deref(), Some("incident"));
    assert!(store.ticket_snapshot(ticket).await.unwrap().is_some());
    assert!(
        store
            .summary(ticket, SummaryKind::Technician)
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn the_cli_lists_dead_letters_and_resubmits_them_keeping_what_fails_again() {
    let redis = RedisServer::start().unwrap();
    let store = redis.store(NAMESPACE).unwrap();
    let ticket = dead_letter_two_events(&redis, &store).await;
    let ids: Vec<String> = store
        .dead_letters(10)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let [malformed_id, refused_id] = [ids[0].clone(), ids[1].clone()];

    let listing = stdout(&stormgate(&redis, &[]));
    assert!(listing.contains(&format!("{malformed_id}  ")), "{listing}");
    assert!(listing.contains(&format!("{refused_id}  ")), "{listing}");
    assert!(listing.contains("topic servicenow.incident partition 3 offset 300"));
    assert!(listing.contains("topic servicenow.incident partition 3 offset 301"));
    assert!(listing.contains("reason: event is not JSON"), "{listing}");
    assert!(
        listing.contains("reason: store refused the record"),
        "{listing}"
    );
    assert!(listing.contains(&format!("value:  {MALFORMED} (22 bytes stored)")));
    assert!(listing.contains("2 dead letters listed"));
    assert!(
        listing.contains("2 in the stream; 0 trimmed by its cap"),
        "{listing}"
    );
    let json: Value =
        serde_json::from_str(&stdout(&stormgate(&redis, &["list", "--json"]))).unwrap();
    assert_eq!(json[1]["id"], refused_id.as_str());
    assert_eq!(json[1]["offset"], 301);
    let listed: DeadLetter = serde_json::from_value(json[0].clone()).unwrap();
    assert_eq!(listed.raw, MALFORMED);

    // As the handler would with STORMGATE_COALESCE_HOLD_SECONDS=0: its jobs are not held.
    let one = stdout(&stormgate(
        &redis,
        &["resubmit", &refused_id, "--coalesce-hold-seconds", "0"],
    ));
    assert!(
        one.contains(&format!("{refused_id}: accepted; removed")),
        "{one}"
    );
    assert!(one.contains("resubmitted 1: 1 accepted"));
    let standard = store.queue_stats(Tier::Standard).await.unwrap();
    assert_eq!((standard.pending, standard.held), (1, 0), "{standard:?}");

    let all = stdout(&stormgate(&redis, &["resubmit", "--all"]));
    assert!(
        all.contains(&format!(
            "{malformed_id}: rejected again: event is not JSON"
        )),
        "{all}"
    );
    assert!(all.contains("resubmitted 1: 0 accepted, 0 already stored, 1 rejected again"));
    assert_only_the_malformed_event_stays(&store, &ticket).await;
    let (new_id, _) = &store.dead_letters(1).await.unwrap()[0];
    assert!(all.contains(&format!("kept as {new_id}")), "{all}");

    let missing = stormgate(&redis, &["resubmit", &refused_id]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stdout).contains("not found"));
    assert_eq!(store.dead_letters(10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_http_function_resubmits_through_the_same_path() {
    let redis = RedisServer::start().unwrap();
    let store: Arc<dyn Store> = Arc::new(redis.store(NAMESPACE).unwrap());
    let ticket = dead_letter_two_events(&redis, store.as_ref()).await;
    let router = app(AppState::new(
        Settings::example(),
        LazyStore::ready(store.clone()),
        Arc::new(SystemClock),
    ));
    let response = router
        .clone()
        .oneshot(
            Request::post("/api/dead-letters")
                .header("content-type", "application/json")
                .body(Body::from(json!({"ids": []}).to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["resubmitted"], 2, "{body}");
    assert_eq!(body["accepted"], 1, "{body}");
    assert_eq!(body["rejected_again"], 1, "{body}");
    assert_eq!(body["entries"][0]["outcome"], "rejected_again", "{body}");
    assert_eq!(body["entries"][1]["outcome"], "accepted", "{body}");
    assert_only_the_malformed_event_stays(store.as_ref(), &ticket).await;

    // The listing says how full the stream is and what its cap trimmed.
    let response = router
        .oneshot(
            Request::get("/api/dead-letters")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let header = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(header("x-dead-letters-total"), "1");
    assert_eq!(header("x-dead-letters-cap"), "5000");
    assert_eq!(header("x-dead-letters-trimmed-total"), "0");
}
