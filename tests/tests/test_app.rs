//! `spawn_app`: the handler as its binary assembles it ([`AppState::from_settings`]),
//! served by the real router on a port of its own (port 0), over a real redis-server
//! started on a free port, its LLM calls going to the simulator's HTTP server or to a
//! recording Azure OpenAI server. The clock is the test's, so time moves when it says.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use serde_json::{Value, json};
use stormgate_handlers::app::app;
use stormgate_handlers::config::{OpenAiAuth, RedisAuth, RedisSettings, Settings};
use stormgate_handlers::secrets::Secret;
use stormgate_handlers::state::AppState;
use stormgate_lab::simulator::SimulatorConfig;
use stormgate_lab::simulator_http::{SimulatorHandle, spawn_simulator};
use stormgate_shared::clock::Clock;
use stormgate_shared::store::Store;
use stormgate_shared::testing::redis_server::RedisServer;
use tokio::task::JoinHandle;

/// Where the app's LLM calls go.
pub enum Llm {
    /// The simulator's HTTP server, started for the app with these deployments.
    Simulator(SimulatorConfig),
    /// A server the test started (one that records prompts, say).
    Endpoint(String),
}

/// A running app and what it runs on; everything stops when it is dropped.
pub struct TestApp {
    /// `http://127.0.0.1:<port>`.
    pub address: String,
    /// The state the router serves: its governor and store are the app's own.
    pub state: AppState,
    pub store: Arc<dyn Store>,
    /// The simulator, when the app calls it.
    pub simulator: Option<SimulatorHandle>,
    /// Held so that redis-server runs as long as the app.
    _redis: RedisServer,
    http: reqwest::Client,
    server: JoinHandle<()>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Starts redis-server and the LLM side, points `settings` at them and serves the
/// assembled handler on port 0.
pub async fn spawn_app(mut settings: Settings, llm: Llm, clock: Arc<dyn Clock>) -> TestApp {
    let redis = RedisServer::start().unwrap();
    settings.redis = RedisSettings {
        url: Secret::new(redis.url()),
        auth: RedisAuth::Url,
    };
    let simulator = match llm {
        Llm::Simulator(config) => {
            let simulator = spawn_simulator(config).await.unwrap();
            settings.openai.endpoint = simulator.endpoint();
            settings.openai.auth = OpenAiAuth::ApiKey(Secret::new("simulator-key"));
            Some(simulator)
        }
        Llm::Endpoint(endpoint) => {
            settings.openai.endpoint = endpoint;
            settings.openai.auth = OpenAiAuth::ApiKey(Secret::new("key"));
            None
        }
    };
    let state = AppState::from_settings(settings, clock, std::process::id().into()).unwrap();
    let store = state.store().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let router = app(state.clone());
    let server = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    TestApp {
        address,
        state,
        store,
        simulator,
        _redis: redis,
        http: reqwest::Client::new(),
        server,
    }
}

impl TestApp {
    /// POSTs `body` to `path`; the status and the answer's JSON (null when not JSON).
    pub async fn post(&self, path: &str, body: &Value) -> (reqwest::StatusCode, Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.address))
            .json(body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let bytes = response.bytes().await.unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// GETs `path`; the answer's JSON, which must be a success.
    pub async fn get(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    }

    /// Invokes `function` as the Functions host does; the answer, which must be a success.
    pub async fn invoke(&self, function: &str, invocation: Value) -> Value {
        let (status, body) = self.post(&format!("/{function}"), &invocation).await;
        assert!(status.is_success(), "{function}: {status} {body}");
        body
    }

    /// One `dispatch` timer tick; the whole answer (outputs and return value).
    pub async fn dispatch(&self) -> Value {
        let timer = json!({"Schedule": {}, "ScheduleStatus": null, "IsPastDue": false});
        self.invoke(
            "dispatch",
            json!({"Data": {"timer": timer.to_string()}, "Metadata": {}}),
        )
        .await
    }

    /// The simulator the app calls.
    pub fn simulator(&self) -> &SimulatorHandle {
        self.simulator
            .as_ref()
            .expect("the app calls the simulator")
    }
}
