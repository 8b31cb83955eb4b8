//! The Azure OpenAI simulator over HTTP: the chat-completions REST shape on 127.0.0.1,
//! in real time, around the same [`SimulatorCore`] the storm lab runs in virtual time.
//!
//! Routes:
//! - `POST /openai/deployments/{d}/chat/completions?api-version=...` — `api-key` header
//!   or `Authorization: Bearer <token>` required; answers Azure's JSON shapes: a
//!   completion with `usage` and `x-ratelimit-remaining-*`, or `{"error":{"code","message"}}`
//!   with 401, 400 (bad body, content filter, context length), 404 (deployment), 429
//!   (with the headers of the deployment's [`HeaderVariant`](crate::simulator::HeaderVariant)), 500.
//! - `GET`/`PUT /admin/deployments/{d}/faults` — read or switch fault injection at run time.
//! - `GET /admin/deployments/{d}/stats` — counters and recent arrival instants.
//! - `GET /` — liveness.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::simulator::{
    self, Faults, Outcome, SimCompletion, SimulatorConfig, SimulatorCore, ThrottleAnswer,
};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use stormgate_shared::clock::{Clock, EpochMillis};
use stormgate_shared::llm::{ChatMessage, ChatRequest, Role};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use stormgate_handlers::system_clock::SystemClock;

/// A running simulator. Dropping it stops the server.
#[derive(Debug)]
pub struct SimulatorHandle {
    pub addr: SocketAddr,
    core: Arc<SimulatorCore>,
    server: JoinHandle<()>,
}

impl SimulatorHandle {
    /// `http://127.0.0.1:<port>`: what `AZURE_OPENAI_ENDPOINT` points at in tests.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The simulator's state, for tests that switch faults or read counters directly.
    pub fn core(&self) -> &Arc<SimulatorCore> {
        &self.core
    }

    /// Stops the server; requests in flight are dropped.
    pub async fn shutdown(mut self) {
        self.server.abort();
        let _ = (&mut self.server).await;
    }
}

impl Drop for SimulatorHandle {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Starts the simulator on a free port of 127.0.0.1.
pub async fn spawn_simulator(config: SimulatorConfig) -> std::io::Result<SimulatorHandle> {
    spawn_simulator_on(config, 0).await
}

/// Starts the simulator on 127.0.0.1:`port` (0 picks a free port).
pub async fn spawn_simulator_on(
    config: SimulatorConfig,
    port: u16,
) -> std::io::Result<SimulatorHandle> {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    let addr = listener.local_addr()?;
    let core = Arc::new(SimulatorCore::new(&config));
    let app = router(core.clone());
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "simulator server stopped");
        }
    });
    Ok(SimulatorHandle { addr, core, server })
}

/// The simulator's routes over `core`.
pub fn router(core: Arc<SimulatorCore>) -> Router {
    Router::new()
        .route("/", get(|| async { "stormgate Azure OpenAI simulator" }))
        .route(
            "/openai/deployments/{deployment}/chat/completions",
            post(chat_completions),
        )
        .route(
            "/admin/deployments/{deployment}/faults",
            get(get_faults).put(put_faults),
        )
        .route("/admin/deployments/{deployment}/stats", get(get_stats))
        .with_state(core)
}

#[derive(Debug, Deserialize)]
struct ApiVersion {
    #[serde(rename = "api-version")]
    api_version: Option<String>,
}

/// The part of a chat-completions body the simulator reads.
#[derive(Debug, Deserialize)]
struct ChatBody {
    messages: Vec<MessageBody>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    temperature: Option<f32>,
}

#[derive(Debug, Deserialize)]
struct MessageBody {
    role: String,
    #[serde(default)]
    content: Content,
}

/// Message content: a string, or the newer list of typed parts.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Text(String::new())
    }
}

#[derive(Debug, Deserialize)]
struct Part {
    #[serde(default)]
    text: String,
}

impl Content {
    fn into_text(self) -> String {
        match self {
            Content::Text(t) => t,
            Content::Parts(parts) => parts
                .into_iter()
                .map(|p| p.text)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

async fn chat_completions(
    State(core): State<Arc<SimulatorCore>>,
    Path(deployment): Path<String>,
    Query(query): Query<ApiVersion>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&headers, core.api_key()) {
        return error(
            StatusCode::UNAUTHORIZED,
            "401",
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure to \
             provide a valid key for an active subscription and use a correct regional API \
             endpoint for your resource.",
        );
    }
    if query.api_version.as_deref().is_none_or(str::is_empty) {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
    }
    let parsed: ChatBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!("Invalid request body: {e}"),
            );
        }
    };
    let Some(request) = chat_request(&core, deployment, parsed) else {
        return error(
            StatusCode::NOT_FOUND,
            "DeploymentNotFound",
            simulator::DEPLOYMENT_NOT_FOUND_MESSAGE,
        );
    };
    let outcome = core.decide(&request, now());
    answer(&core, outcome).await
}

/// The typed request, or `None` for an unknown deployment. Without `max_tokens` the
/// request reserves the deployment's whole context, as Azure does.
fn chat_request(core: &SimulatorCore, deployment: String, body: ChatBody) -> Option<ChatRequest> {
    core.model(&deployment)?;
    let messages: Vec<ChatMessage> = body
        .messages
        .into_iter()
        .map(|m| ChatMessage {
            role: match m.role.as_str() {
                "system" | "developer" => Role::System,
                "assistant" => Role::Assistant,
                _ => Role::User,
            },
            content: m.content.into_text(),
        })
        .collect();
    let max_tokens = body
        .max_tokens
        .or(body.max_completion_tokens)
        .unwrap_or(u32::MAX / 2);
    Some(ChatRequest {
        deployment,
        messages,
        max_tokens,
        temperature: body.temperature.unwrap_or(1.0),
    })
}

async fn answer(core: &SimulatorCore, outcome: Outcome) -> Response {
    match outcome {
        Outcome::Success {
            completion,
            latency,
        } => {
            tokio::time::sleep(latency).await;
            success(completion)
        }
        Outcome::Throttled(t) => throttled(&t),
        Outcome::ServerError { latency } => {
            tokio::time::sleep(latency).await;
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalServerError",
                simulator::SERVER_ERROR_MESSAGE,
            )
        }
        Outcome::Timeout => {
            tokio::time::sleep(core.hang()).await;
            error(
                StatusCode::REQUEST_TIMEOUT,
                "Timeout",
                "The operation was timeout.",
            )
        }
        Outcome::ContentFiltered => error(
            StatusCode::BAD_REQUEST,
            "content_filter",
            simulator::CONTENT_FILTER_MESSAGE,
        ),
        Outcome::ContextLengthExceeded { requested, limit } => error(
            StatusCode::BAD_REQUEST,
            "context_length_exceeded",
            &simulator::context_length_message(requested, limit),
        ),
        Outcome::UnknownDeployment => error(
            StatusCode::NOT_FOUND,
            "DeploymentNotFound",
            simulator::DEPLOYMENT_NOT_FOUND_MESSAGE,
        ),
    }
}

fn success(c: SimCompletion) -> Response {
    let created = now().as_millis() / 1000;
    let body = json!({
        "id": c.id,
        "object": "chat.completion",
        "created": created,
        "model": c.model,
        "choices": [{
            "index": 0,
            "finish_reason": c.finish_reason,
            "message": {"role": "assistant", "content": c.text},
        }],
        "usage": {
            "prompt_tokens": c.usage.prompt_tokens,
            "completion_tokens": c.usage.completion_tokens,
            "total_tokens": c.usage.total_tokens,
        },
    });
    let mut response = axum::Json(body).into_response();
    let h = response.headers_mut();
    insert(
        h,
        "x-ratelimit-remaining-tokens",
        c.remaining_tokens.to_string(),
    );
    insert(
        h,
        "x-ratelimit-remaining-requests",
        c.remaining_requests.to_string(),
    );
    response
}

fn throttled(t: &ThrottleAnswer) -> Response {
    let mut response = error(StatusCode::TOO_MANY_REQUESTS, "429", &t.message());
    for (name, value) in t.header_pairs() {
        insert(response.headers_mut(), name, value);
    }
    response
}

fn insert(headers: &mut HeaderMap, name: &'static str, value: String) {
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert(HeaderName::from_static(name), v);
    }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

fn authorized(headers: &HeaderMap, api_key: &str) -> bool {
    let key_ok = headers
        .get("api-key")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == api_key);
    let bearer_ok = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|token| !token.trim().is_empty());
    key_ok || bearer_ok
}

async fn get_faults(
    State(core): State<Arc<SimulatorCore>>,
    Path(deployment): Path<String>,
) -> Response {
    match core.faults(&deployment) {
        Ok(f) => axum::Json(f).into_response(),
        Err(e) => error(StatusCode::NOT_FOUND, "DeploymentNotFound", &e.to_string()),
    }
}

async fn put_faults(
    State(core): State<Arc<SimulatorCore>>,
    Path(deployment): Path<String>,
    body: Bytes,
) -> Response {
    let faults: Faults = match serde_json::from_slice(&body) {
        Ok(f) => f,
        Err(e) => return error(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string()),
    };
    match core.set_faults(&deployment, faults.clone()) {
        Ok(()) => axum::Json(faults).into_response(),
        Err(e) => error(StatusCode::NOT_FOUND, "DeploymentNotFound", &e.to_string()),
    }
}

async fn get_stats(
    State(core): State<Arc<SimulatorCore>>,
    Path(deployment): Path<String>,
) -> Response {
    match core.stats(&deployment) {
        Ok(s) => axum::Json::<Value>(json!(s)).into_response(),
        Err(e) => error(StatusCode::NOT_FOUND, "DeploymentNotFound", &e.to_string()),
    }
}

/// The wall clock, as the meter's time (the simulator serves in real time).
fn now() -> EpochMillis {
    SystemClock.now()
}

/// Reads a simulator configuration: TOML when the file name ends in `.toml`, else JSON.
pub fn load_config(path: &std::path::Path) -> anyhow::Result<SimulatorConfig> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let config = if path.extension().is_some_and(|e| e == "toml") {
        toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} is not a simulator config: {e}", path.display()))?
    } else {
        serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} is not a simulator config: {e}", path.display()))?
    };
    Ok(config)
}
