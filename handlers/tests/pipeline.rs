//! The pipeline end to end through the real `handler` process and a real `redis-server`:
//! a host-shaped Kafka batch to `classify`, `dispatch` timer ticks, each queue message
//! checked as the tier function's input, and the store's state after each step. With the
//! handler pointed at the Azure OpenAI simulator over plain http (a loopback endpoint)
//! and at a local ServiceNow Table API, the queue messages go on to the tier functions
//! and every ticket ends with an LLM summary served by `GET /api/summaries/{ticket}` and
//! written back as a work note.
//!
//! Lives here rather than in `tests/` because `CARGO_BIN_EXE_handler` guarantees the
//! binary is built. The HTTP routes are called directly, as the Functions host forwards
//! them after checking the function key: the handler listens on 127.0.0.1 only and
//! leaves keys to the host. The same path also runs through the router in process.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use stormgate_handlers::config::Settings;
use stormgate_handlers::functions::dispatch::{PREMIUM_QUEUE_BINDING, STANDARD_QUEUE_BINDING};
use stormgate_handlers::functions::summarize::HANDOFF_BINDING;
use stormgate_handlers::invocation::InvocationRequest;
use stormgate_shared::dispatcher::AdmittedGroup;
use stormgate_shared::job::Tier;
use stormgate_shared::store::Store;
use stormgate_shared::testing::redis_server::RedisServer;
use support::{incident, kafka_invocation, queue_invocation, queue_messages, timer_invocation};

const HANDLER: &str = env!("CARGO_BIN_EXE_handler");

/// The handler process, killed when dropped.
struct Handler {
    child: Child,
    base: String,
}

impl Drop for Handler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_handler(redis_url: &str) -> Handler {
    start_handler_with(redis_url, &[])
}

/// The handler with the example settings, `redis_url`, generous quotas, and `extra`.
fn start_handler_with(redis_url: &str, extra: &[(&str, String)]) -> Handler {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut vars: Vec<(String, String)> = Settings::example_vars()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .filter(|(k, _)| !k.ends_with("_TPM") && !k.ends_with("_RPM") && k != "STORMGATE_REDIS_URL")
        .collect();
    vars.extend([
        ("STORMGATE_REDIS_URL".to_owned(), redis_url.to_owned()),
        ("STORMGATE_PREMIUM_TPM".to_owned(), "1000000".to_owned()),
        ("STORMGATE_STANDARD_TPM".to_owned(), "1000000".to_owned()),
        // A gpt-4o deployment's ratio: 6 requests per minute per 1,000 tokens.
        ("STORMGATE_PREMIUM_RPM".to_owned(), "6000".to_owned()),
        ("STORMGATE_STANDARD_RPM".to_owned(), "6000".to_owned()),
        // The real clock runs here: jobs must not wait out coalescing holds.
        ("STORMGATE_COALESCE_HOLD_SECONDS".to_owned(), "0".to_owned()),
        ("FUNCTIONS_CUSTOMHANDLER_PORT".to_owned(), port.to_string()),
        ("RUST_LOG".to_owned(), "warn".to_owned()),
    ]);
    vars.retain(|(k, _)| !extra.iter().any(|(name, _)| name == k));
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    let child = Command::new(HANDLER)
        .env_clear()
        .envs(vars)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Handler {
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

async fn wait_until_answering(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.get(format!("{base}/")).send().await.is_err() {
        assert!(Instant::now() < deadline, "handler never answered GET /");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn invoke(client: &reqwest::Client, base: &str, function: &str, body: &Value) -> Value {
    let response = client
        .post(format!("{base}/{function}"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert!(status.is_success(), "{function}: {status} {body}");
    body
}

/// A local server speaking the ServiceNow Table API shape for work notes: accepts
/// `PATCH /api/now/table/incident/{sys_id}` with the expected basic auth and records
/// `(sys_id, work_notes)`.
async fn table_api(
    user: &str,
    password: &str,
) -> (String, Arc<std::sync::Mutex<Vec<(String, String)>>>) {
    use axum::extract::{Path, State};
    use axum::http::{HeaderMap, StatusCode};
    use base64::Engine;

    type Notes = Arc<std::sync::Mutex<Vec<(String, String)>>>;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    );
    let notes: Notes = Arc::default();
    let patch = move |State(notes): State<Notes>,
                      Path(sys_id): Path<String>,
                      headers: HeaderMap,
                      axum::Json(body): axum::Json<Value>| {
        let authorized = headers
            .get("authorization")
            .is_some_and(|v| v.to_str().ok() == Some(expected.as_str()));
        async move {
            if !authorized {
                return StatusCode::UNAUTHORIZED;
            }
            let text = body["work_notes"].as_str().unwrap_or_default().to_owned();
            notes.lock().unwrap().push((sys_id, text));
            StatusCode::OK
        }
    };
    let router = axum::Router::new()
        .route(
            "/api/now/table/incident/{sys_id}",
            axum::routing::patch(patch),
        )
        .with_state(notes.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (url, notes)
}

#[tokio::test]
async fn every_accepted_ticket_is_handed_to_exactly_one_tier_message() {
    let redis = RedisServer::start().unwrap();
    let handler = start_handler(&redis.url());
    let client = reqwest::Client::new();
    wait_until_answering(&client, &handler.base).await;
    // The handler's keys, read directly.
    let store: Arc<dyn Store> = Arc::new(redis.store("stormgate").unwrap());

    let events: Vec<Value> = [(11, "1"), (12, "2"), (13, "3"), (14, "4"), (15, "5")]
        .iter()
        .map(|(n, p)| incident(*n, p))
        .collect();
    let classified = invoke(
        &client,
        &handler.base,
        "classify",
        &kafka_invocation(&events),
    )
    .await;
    assert_eq!(classified["ReturnValue"]["accepted"], events.len());
    let mut queued = 0;
    for tier in Tier::LLM {
        queued += store.queue_stats(tier).await.unwrap().pending;
    }
    assert!(queued >= events.len() as u64);

    let mut handed_off = Vec::new();
    for _ in 0..3 {
        let tick = invoke(&client, &handler.base, "dispatch", &timer_invocation()).await;
        for (binding, tier) in [
            (PREMIUM_QUEUE_BINDING, Tier::Premium),
            (STANDARD_QUEUE_BINDING, Tier::Standard),
        ] {
            for message in queue_messages(&tick, binding) {
                let invocation = queue_invocation(HANDOFF_BINDING, &message).to_string();
                let group: AdmittedGroup = InvocationRequest::from_slice(invocation.as_bytes())
                    .unwrap()
                    .queue_message(HANDOFF_BINDING)
                    .unwrap();
                assert_eq!(group.tier, tier);
                handed_off.extend(group.leases.into_iter().map(|l| l.job.id.to_string()));
            }
        }
    }
    let total = handed_off.len();
    handed_off.sort();
    handed_off.dedup();
    assert_eq!(handed_off.len(), total, "a job was handed out twice");
    assert_eq!(total as u64, queued, "every accepted job was handed out");
    for tier in Tier::LLM {
        let stats = store.queue_stats(tier).await.unwrap();
        assert_eq!(stats.pending, 0);
    }
}

/// The deployed handler, pointed at the simulator over plain http on 127.0.0.1 and at a
/// local Table API for work notes: classify, dispatch and the tier functions as the host
/// calls them, then the LLM summaries read back through `GET /api/summaries/{ticket}`.
#[tokio::test]
async fn the_handler_process_summarizes_through_the_simulator_and_writes_work_notes_back() {
    use stormgate_lab::simulator::{DeploymentConfig, Latency, SimulatorConfig};
    use stormgate_lab::simulator_http::spawn_simulator;

    let redis = RedisServer::start().unwrap();
    let deployments = ["premium-deployment", "standard-deployment"]
        .iter()
        .map(|name| {
            let mut d = DeploymentConfig::new(name, "gpt-4o-2024-08-06", 1_000_000);
            d.latency = Latency {
                first_token_ms: 5,
                per_output_token_ms: 0,
            };
            d
        })
        .collect();
    let simulator = spawn_simulator(SimulatorConfig::new(8, deployments))
        .await
        .unwrap();
    let (servicenow_url, work_notes) = table_api("stormgate.integration", "s3cret").await;
    let handler = start_handler_with(
        &redis.url(),
        &[
            ("AZURE_OPENAI_ENDPOINT", simulator.endpoint()),
            ("AZURE_OPENAI_AUTH", "api_key".to_owned()),
            ("AZURE_OPENAI_API_KEY", "simulator-key".to_owned()),
            ("SERVICENOW_INSTANCE_URL", servicenow_url),
            ("SERVICENOW_USERNAME", "stormgate.integration".to_owned()),
            ("SERVICENOW_PASSWORD", "s3cret".to_owned()),
        ],
    );
    let client = reqwest::Client::new();
    wait_until_answering(&client, &handler.base).await;

    let tickets = [(31, "1"), (32, "2"), (33, "4"), (34, "5")];
    let events: Vec<Value> = tickets.iter().map(|(n, p)| incident(*n, p)).collect();
    let classified = invoke(
        &client,
        &handler.base,
        "classify",
        &kafka_invocation(&events),
    )
    .await;
    assert_eq!(classified["ReturnValue"]["accepted"], tickets.len());

    let mut llm_calls = 0;
    for _ in 0..3 {
        let tick = invoke(&client, &handler.base, "dispatch", &timer_invocation()).await;
        for (binding, function) in [
            (PREMIUM_QUEUE_BINDING, "summarize-premium"),
            (STANDARD_QUEUE_BINDING, "summarize-standard"),
        ] {
            for message in queue_messages(&tick, binding) {
                let invocation = queue_invocation(HANDOFF_BINDING, &message);
                let done = invoke(&client, &handler.base, function, &invocation).await;
                llm_calls += done["ReturnValue"]["llm_calls"].as_u64().unwrap();
            }
        }
    }
    assert!(llm_calls >= 1);
    let simulated: u64 = ["premium-deployment", "standard-deployment"]
        .iter()
        .map(|d| simulator.core().stats(d).unwrap().succeeded)
        .sum();
    assert_eq!(simulated, llm_calls, "every call reached the simulator");

    let notes = work_notes.lock().unwrap().clone();
    for (n, _) in tickets {
        let sys_id = support::sys_id(n);
        let response = client
            .get(format!("{}/api/summaries/{sys_id}", handler.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "ticket {n}");
        let body: Value = response.json().await.unwrap();
        let technician = &body["summaries"]["technician"];
        assert_eq!(technician["degraded"], false, "ticket {n}: {body}");
        assert_ne!(technician["model"], "extractive", "ticket {n}: {body}");
        let text = technician["text"].as_str().unwrap();
        assert!(
            notes.iter().any(|(id, note)| *id == sys_id && note == text),
            "ticket {n}: its technician summary is a work note: {notes:?}"
        );
    }
    let unknown = client
        .get(format!("{}/api/summaries/{}", handler.base, "f".repeat(32)))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
}

/// The whole pipeline in one process, through the router: the tier functions get the
/// handler's own governor (the one `dispatch` admits with) and talk to the Azure OpenAI
/// simulator over HTTP. Every accepted ticket ends with an LLM technician summary.
#[tokio::test]
async fn classify_dispatch_summarize_ends_with_an_llm_summary_for_every_ticket() {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use stormgate_handlers::app::app;
    use stormgate_handlers::config::{RedisAuth, RedisSettings};
    use stormgate_handlers::lazy_store::LazyStore;
    use stormgate_handlers::openai::{AzureOpenAiClient, OpenAiAuth, OpenAiConfig};
    use stormgate_handlers::redis_connector::RedisConnector;
    use stormgate_handlers::secrets::Secret;
    use stormgate_handlers::state::AppState;
    use stormgate_handlers::system_clock::SystemClock;
    use stormgate_handlers::tier_runtime::EdgeClients;
    use stormgate_lab::simulator::{DeploymentConfig, Latency, SimulatorConfig};
    use stormgate_lab::simulator_http::spawn_simulator;
    use tower::ServiceExt;

    let redis = RedisServer::start().unwrap();
    let mut settings = Settings::example();
    settings.premium.tokens_per_minute = 1_000_000;
    settings.standard.tokens_per_minute = 1_000_000;
    // Every job is served on the ticks after classify: no coalescing holds here.
    settings.coalesce_hold = std::time::Duration::ZERO;
    let deployments: Vec<DeploymentConfig> = [&settings.premium, &settings.standard]
        .iter()
        .map(|t| {
            let mut d =
                DeploymentConfig::new(t.deployment.as_str(), "gpt-4o-2024-08-06", 1_000_000);
            d.latency = Latency {
                first_token_ms: 5,
                per_output_token_ms: 0,
            };
            d
        })
        .collect();
    let simulator = spawn_simulator(SimulatorConfig::new(5, deployments))
        .await
        .unwrap();
    let connector = RedisConnector::with_namespace(
        RedisSettings {
            url: Secret::new(redis.url()),
            auth: RedisAuth::Url,
        },
        "pipeline",
    );
    let clock = Arc::new(SystemClock);
    let client = AzureOpenAiClient::new(
        OpenAiConfig {
            endpoint: simulator.endpoint(),
            api_version: "2024-10-21".into(),
            timeout: Duration::from_secs(5),
        },
        OpenAiAuth::ApiKey("simulator-key".into()),
        clock.clone(),
    )
    .unwrap();
    let clients = EdgeClients {
        llm: Some(Arc::new(client)),
        ..EdgeClients::default()
    };
    let state = AppState::assemble(
        settings,
        LazyStore::new(Arc::new(connector)),
        clock,
        clients,
        7,
    );
    let send = |method: &str, path: String, body: Option<Value>| {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body.map_or(Body::empty(), |b| Body::from(b.to_string())))
            .unwrap();
        let router = app(state.clone());
        async move {
            let response = router.oneshot(request).await.unwrap();
            let status = response.status();
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            assert!(status.is_success(), "{status} {body}");
            body
        }
    };

    let tickets = [(21, "1"), (22, "2"), (23, "4"), (24, "5")];
    let events: Vec<Value> = tickets.iter().map(|(n, p)| incident(*n, p)).collect();
    send("POST", "/classify".into(), Some(kafka_invocation(&events))).await;
    let tick = send("POST", "/dispatch".into(), Some(timer_invocation())).await;
    let mut delivered = 0;
    for (binding, function) in [
        (PREMIUM_QUEUE_BINDING, "/summarize-premium"),
        (STANDARD_QUEUE_BINDING, "/summarize-standard"),
    ] {
        for message in queue_messages(&tick, binding) {
            let invocation = queue_invocation(HANDOFF_BINDING, &message);
            let done = send("POST", function.into(), Some(invocation)).await;
            delivered += done["ReturnValue"]["acked"].as_u64().unwrap();
        }
    }
    assert!(delivered >= tickets.len() as u64);
    for (n, _) in tickets {
        let body = send(
            "GET",
            format!("/api/summaries/{}", support::sys_id(n)),
            None,
        )
        .await;
        let technician = &body["summaries"]["technician"];
        assert_eq!(technician["degraded"], false, "ticket {n}: {body}");
        assert_ne!(technician["model"], "extractive", "ticket {n}: {body}");
    }
}
