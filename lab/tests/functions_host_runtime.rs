//! The host emulation's real-time driver (`functions_host::runtime`) against a real HTTP
//! server standing in for a handler: what the platform would do with the app's own
//! definitions, each behaviour observed from the invocations the server receives.
//! Where a test needs shorter waits than the repository's host.json, it changes that
//! setting on the parsed definition and says so.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};
use stormgate_lab::functions_host::AppDefinition;
use stormgate_lab::functions_host::app_definition::Trigger;
use stormgate_lab::functions_host::retry_policy::RetryPolicy;
use stormgate_lab::functions_host::runtime::{HostEvent, HostRuntime};

/// One invocation the stand-in received.
#[derive(Debug, Clone)]
struct Received {
    function: String,
    body: Value,
    at: Instant,
}

/// How the stand-in answers.
#[derive(Default)]
struct Behaviour {
    /// Messages `dispatch` hands to `summarize-standard` on its first tick.
    handoffs: usize,
    /// `classify` fails this many times before it succeeds.
    classify_failures: usize,
    /// Tier deliveries of a message whose body has `"fail": true` fail.
    tier_latency: Duration,
}

#[derive(Default)]
struct Server {
    behaviour: Behaviour,
    received: Mutex<Vec<Received>>,
    running: AtomicUsize,
    most_running: AtomicUsize,
    dispatches: AtomicUsize,
    classify_calls: AtomicUsize,
}

async fn invoke(
    State(server): State<Arc<Server>>,
    Path(function): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> impl IntoResponse {
    server.received.lock().unwrap().push(Received {
        function: function.clone(),
        body: body.clone(),
        at: Instant::now(),
    });
    match function.as_str() {
        "classify" => {
            let n = server.classify_calls.fetch_add(1, Ordering::SeqCst);
            if n < server.behaviour.classify_failures {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    axum::Json(json!({"error": "store"})),
                );
            }
            (
                StatusCode::OK,
                axum::Json(json!({"Outputs": {}, "ReturnValue": {}})),
            )
        }
        "dispatch" => {
            let tick = server.dispatches.fetch_add(1, Ordering::SeqCst);
            let messages: Vec<Value> = if tick == 0 {
                (0..server.behaviour.handoffs)
                    .map(|i| json!({"n": i, "fail": i == 0}))
                    .collect()
            } else {
                Vec::new()
            };
            (
                StatusCode::OK,
                axum::Json(json!({"Outputs": {"standardQueue": messages}, "ReturnValue": {}})),
            )
        }
        _ => {
            let now = server.running.fetch_add(1, Ordering::SeqCst) + 1;
            server.most_running.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(server.behaviour.tier_latency).await;
            server.running.fetch_sub(1, Ordering::SeqCst);
            let message: Value =
                serde_json::from_str(body["Data"]["handoff"].as_str().unwrap()).unwrap();
            if message["fail"] == true {
                // A failed invocation's outputs must be discarded.
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    axum::Json(json!({"Outputs": {"notifications": [{"from": "failed"}]}})),
                );
            }
            (
                StatusCode::OK,
                axum::Json(
                    json!({"Outputs": {"notifications": [{"n": message["n"]}]}, "ReturnValue": {}}),
                ),
            )
        }
    }
}

async fn serve(behaviour: Behaviour) -> (Arc<Server>, String) {
    let server = Arc::new(Server {
        behaviour,
        ..Server::default()
    });
    let app = Router::new()
        .route("/{function}", post(invoke))
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (server, base)
}

fn settings() -> BTreeMap<String, String> {
    [("KAFKA_NOTIFICATIONS_TOPIC".to_owned(), "notices".to_owned())].into()
}

async fn until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn queue_messages_run_in_batches_and_a_failing_one_is_retried_after_the_visibility_timeout_then_poisoned()
 {
    let mut app = AppDefinition::built_in().unwrap();
    // The repository's 15 s visibility timeout, shortened so five deliveries fit a test.
    app.host.queues.visibility_timeout = Duration::from_millis(300);
    app.functions
        .retain(|name, _| name == "dispatch" || name == "summarize-standard");
    let queues = app.host.queues;
    let (server, base) = serve(Behaviour {
        handoffs: 30,
        tier_latency: Duration::from_millis(400),
        ..Behaviour::default()
    })
    .await;
    let (host, mut events) = HostRuntime::start(Arc::new(app), base, settings());
    let mut poisoned = Vec::new();
    let started = Instant::now();
    while poisoned.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never poisoned"
        );
        if let Ok(Some(HostEvent::Poisoned { queue, message })) =
            tokio::time::timeout(Duration::from_millis(100), events.recv()).await
        {
            poisoned.push((queue, message));
        }
    }
    until(
        Duration::from_secs(10),
        "every good message delivered",
        || host.published().len() >= 29,
    )
    .await;
    assert_eq!(poisoned[0].0, "summarize-standard-poison");
    assert_eq!(poisoned[0].1["n"], 0);

    // Concurrency: a batch of `batchSize`, the next fetched once running ones fall to
    // `newBatchThreshold`: never more than the two together, at least a whole batch.
    let most = server.most_running.load(Ordering::SeqCst) as u32;
    assert!(
        most >= queues.batch_size && most <= queues.batch_size + queues.new_batch_threshold,
        "{most} deliveries ran at once"
    );
    // The failing message: exactly maxDequeueCount deliveries, each with its count,
    // never two closer than the visibility timeout.
    let received = server.received.lock().unwrap().clone();
    let failing: Vec<&Received> = received
        .iter()
        .filter(|r| r.function == "summarize-standard")
        .filter(|r| {
            r.body["Data"]["handoff"]
                .as_str()
                .unwrap()
                .contains("\"fail\":true")
        })
        .collect();
    assert_eq!(failing.len() as u32, queues.max_dequeue_count);
    for (i, r) in failing.iter().enumerate() {
        assert_eq!(r.body["Metadata"]["DequeueCount"], (i + 1).to_string());
    }
    for pair in failing.windows(2) {
        assert!(pair[1].at.duration_since(pair[0].at) >= queues.visibility_timeout);
    }
    // Only successes' Kafka outputs were published, on the topic the binding names.
    let published = host.published();
    assert!(
        published
            .iter()
            .all(|(topic, m)| topic == "notices" && m["from"].is_null())
    );
    assert_eq!(published.len(), 29);
}

#[tokio::test]
async fn kafka_records_arrive_in_batches_of_max_batch_size_and_a_failed_batch_is_retried_by_the_function_s_policy()
 {
    let mut app = AppDefinition::built_in().unwrap();
    let max_batch = app.host.kafka.max_batch_size;
    let classify = app.functions.get_mut("classify").unwrap();
    let max_retries = classify.retry.unwrap().max_retries();
    // The repository's policy (exponential from 2 s), with the waits shortened.
    let shortened = RetryPolicy::ExponentialBackoff {
        max_retries,
        minimum: Duration::from_millis(100),
        maximum: Duration::from_millis(400),
    };
    classify.retry = Some(shortened);
    app.functions.retain(|name, _| name == "classify");
    let (server, base) = serve(Behaviour {
        classify_failures: 2,
        ..Behaviour::default()
    })
    .await;
    let (host, _events) = HostRuntime::start(Arc::new(app), base, settings());
    let records = 2 * max_batch + 7;
    host.produce((0..records).map(|i| json!({"sys_id": format!("{i:032x}")})));
    until(Duration::from_secs(20), "every record delivered", || {
        host.kafka_backlog() == 0 && server.classify_calls.load(Ordering::SeqCst) >= 5
    })
    .await;
    let received = server.received.lock().unwrap().clone();
    let batches: Vec<&Received> = received
        .iter()
        .filter(|r| r.function == "classify")
        .collect();
    let sizes: Vec<usize> = batches
        .iter()
        .map(|r| {
            let outer: Vec<String> =
                serde_json::from_str(r.body["Data"]["events"].as_str().unwrap()).unwrap();
            outer.len()
        })
        .collect();
    // The first batch three times (two failures, then the retry that succeeds).
    assert_eq!(sizes, vec![max_batch, max_batch, max_batch, max_batch, 7]);
    assert!(batches[0].body["Metadata"]["RetryContext"].is_null());
    let context: Value = serde_json::from_str(
        batches[1].body["Metadata"]["RetryContext"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(context["RetryCount"], 1);
    // classify retries without limit: -1, as the host writes it.
    assert_eq!(context["MaxRetryCount"], shortened.max_retry_count());
    // The second retry waits the minimum plus one minimum (the host's curve).
    assert!(batches[2].at.duration_since(batches[1].at) >= Duration::from_millis(200));
}

#[tokio::test]
async fn a_timer_fires_on_its_schedule_and_says_when_it_last_and_next_fired() {
    let mut app = AppDefinition::built_in().unwrap();
    // dispatch's */5 schedule, made every second so that the test is short.
    let dispatch = app.functions.get_mut("dispatch").unwrap();
    if let Trigger::Timer { schedule, .. } = &mut dispatch.trigger {
        **schedule = "* * * * * *".parse().unwrap();
    }
    app.functions.retain(|name, _| name == "dispatch");
    let (server, base) = serve(Behaviour::default()).await;
    let (_host, _events) = HostRuntime::start(Arc::new(app), base, settings());
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let ticks = server.dispatches.load(Ordering::SeqCst);
    assert!((3..=4).contains(&ticks), "{ticks} ticks in 3.5 s");
    let received = server.received.lock().unwrap().clone();
    let info: Value =
        serde_json::from_str(received[1].body["Data"]["timer"].as_str().unwrap()).unwrap();
    let last: jiff::Timestamp = info["ScheduleStatus"]["Last"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let next: jiff::Timestamp = info["ScheduleStatus"]["Next"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!((next - last).get_seconds(), 2, "{info}");
    assert_eq!(info["IsPastDue"], false);
}
