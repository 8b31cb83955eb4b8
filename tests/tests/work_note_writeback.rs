//! ServiceNow write-back as the deployed handler wires it (`tier_runtime::build` from the
//! settings): a technician summary made by `summarize-premium` ends up PATCHed to a local
//! server speaking the Table API shape; a 429's Retry-After is honoured; with the server
//! down the summary is still stored and served, and the `dispatch` tick delivers the note
//! once the server is back. Real Redis, the simulator over HTTP, the real router.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use stormgate_e2e::servicenow_server::{FakeServiceNow, ReceivedNote, SnReply};
use stormgate_e2e::tickets::{event, record};
use stormgate_handlers::app::app;
use stormgate_handlers::config::{
    OpenAiAuth, RedisAuth, RedisSettings, ServiceNowSettings, Settings,
};
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::redis_connector::RedisConnector;
use stormgate_handlers::secrets::Secret;
use stormgate_handlers::state::AppState;
use stormgate_handlers::tier_runtime;
use stormgate_lab::simulator::{DeploymentConfig, Latency, SimulatorConfig};
use stormgate_lab::simulator_http::{SimulatorHandle, spawn_simulator};
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::store::Store;
use stormgate_shared::testing::redis_server::RedisServer;
use tower::ServiceExt;

const T0: EpochMillis = EpochMillis(1_800_000_000_000);
const USER: &str = "stormgate.integration";
const PASSWORD: &str = "s3cret";

struct Rig {
    _redis: RedisServer,
    _simulator: SimulatorHandle,
    servicenow: FakeServiceNow,
    store: Arc<dyn Store>,
    state: AppState,
    clock: ManualClock,
}

impl Rig {
    async fn start() -> Rig {
        let redis = RedisServer::start().unwrap();
        let servicenow = FakeServiceNow::start(USER, PASSWORD).await;
        let mut settings = Settings::example();
        settings.premium.tokens_per_minute = 1_000_000;
        settings.standard.tokens_per_minute = 1_000_000;
        let deployments = [&settings.premium, &settings.standard]
            .iter()
            .map(|t| {
                let mut d = DeploymentConfig::new(t.deployment.as_str(), "gpt-4o", 1_000_000);
                d.latency = Latency {
                    first_token_ms: 5,
                    per_output_token_ms: 0,
                };
                d
            })
            .collect();
        let simulator = spawn_simulator(SimulatorConfig::new(9, deployments))
            .await
            .unwrap();
        settings.openai.endpoint = simulator.endpoint();
        settings.openai.auth = OpenAiAuth::ApiKey(Secret::new("simulator-key"));
        settings.servicenow = Some(ServiceNowSettings {
            instance_url: servicenow.instance_url(),
            username: USER.into(),
            password: Secret::new(PASSWORD),
        });
        let connector = RedisConnector::with_namespace(
            RedisSettings {
                url: Secret::new(redis.url()),
                auth: RedisAuth::Url,
            },
            "writeback",
        );
        let clock = ManualClock::starting_at(T0);
        let state = AppState::new(
            settings.clone(),
            LazyStore::new(Arc::new(connector.clone())),
            Arc::new(clock.clone()),
        );
        let runtime =
            tier_runtime::build(&settings, Arc::new(clock.clone()), &connector, 7).unwrap();
        let state = state.with_summarization(runtime);
        let store = state.store().await.unwrap();
        Rig {
            _redis: redis,
            _simulator: simulator,
            servicenow,
            store,
            state,
            clock,
        }
    }

    async fn send(&self, request: Request<Body>) -> Value {
        let response = app(self.state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert!(status.is_success(), "{status} {body}");
        body
    }

    async fn invoke(&self, function: &str, invocation: Value) -> Value {
        let request = Request::post(format!("/{function}"))
            .header("content-type", "application/json")
            .body(Body::from(invocation.to_string()))
            .unwrap();
        self.send(request).await
    }

    /// One `dispatch` timer tick; its `ReturnValue`.
    async fn dispatch(&self) -> Value {
        let timer = json!({"Schedule": {}, "ScheduleStatus": null, "IsPastDue": false});
        let body = self
            .invoke(
                "dispatch",
                json!({"Data": {"timer": timer.to_string()}, "Metadata": {}}),
            )
            .await;
        let messages = body["Outputs"]["premiumQueue"].as_array().cloned();
        for message in messages.unwrap_or_default() {
            let handoff = json!({"Data": {"handoff": message.to_string()}, "Metadata": {"DequeueCount": "1"}});
            let done = self.invoke("summarize-premium", handoff).await;
            assert_eq!(done["ReturnValue"]["acked"], 1, "{done}");
        }
        body["ReturnValue"].clone()
    }

    /// A P1 ticket with a technician job, as `classify` stores it.
    async fn ticket(&self, n: u16) -> String {
        let incident = event(n, n, 1);
        let record = record(&incident, &[SummaryKind::Technician], Tier::Premium, T0);
        self.store.ingest(&[record]).await.unwrap();
        incident["sys_id"].as_str().unwrap().to_owned()
    }

    /// The technician summary the read API serves for `sys_id`.
    async fn served_technician_summary(&self, sys_id: &str) -> Value {
        let request = Request::get(format!("/api/summaries/{sys_id}"))
            .body(Body::empty())
            .unwrap();
        self.send(request).await["summaries"]["technician"].clone()
    }
}

#[tokio::test]
async fn technician_summaries_reach_servicenow_through_429s_and_outages() {
    let mut rig = Rig::start().await;

    // A 429 first: the summary is stored and served, the note waits for Retry-After.
    rig.servicenow.script([SnReply::RateLimited(2)]);
    let first = rig.ticket(1).await;
    let tick = rig.dispatch().await;
    assert_eq!(tick["counters"]["admitted_jobs"], 1, "{tick}");
    let summary = rig.served_technician_summary(&first).await;
    assert_eq!(summary["degraded"], false, "{summary}");
    assert_ne!(summary["model"], "extractive", "{summary}");
    assert_eq!(rig.servicenow.attempts(), 1);
    assert!(rig.servicenow.notes().is_empty());

    rig.clock.advance(Duration::from_secs(1));
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["delivered"], 0, "{tick}");
    assert_eq!(
        rig.servicenow.attempts(),
        1,
        "nothing is sent before Retry-After"
    );

    rig.clock.advance(Duration::from_secs(1));
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["delivered"], 1, "{tick}");
    let first_note = ReceivedNote {
        sys_id: first.clone(),
        work_notes: summary["text"].as_str().unwrap().to_owned(),
    };
    assert_eq!(rig.servicenow.notes(), std::slice::from_ref(&first_note));

    // ServiceNow down: the summary is stored and served regardless.
    rig.servicenow.stop().await;
    let second = rig.ticket(2).await;
    rig.dispatch().await;
    let summary = rig.served_technician_summary(&second).await;
    assert_eq!(summary["degraded"], false, "{summary}");
    let second_note = ReceivedNote {
        sys_id: second.clone(),
        work_notes: summary["text"].as_str().unwrap().to_owned(),
    };

    // Still down when the note comes due: tried once more, kept for later.
    rig.clock.advance(Duration::from_secs(61));
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["queued"], 1, "{tick}");

    // Back up: the note goes out when due again, exactly once.
    rig.servicenow.restart().await;
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["delivered"], 0, "not due yet: {tick}");
    rig.clock.advance(Duration::from_secs(121));
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["delivered"], 1, "{tick}");
    assert_eq!(rig.servicenow.notes(), [first_note, second_note]);
    rig.clock.advance(Duration::from_secs(3_600));
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["delivered"], 0, "{tick}");
    assert_eq!(rig.servicenow.notes().len(), 2, "no note is sent twice");
}
