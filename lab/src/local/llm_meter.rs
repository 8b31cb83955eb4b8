//! A metering reverse proxy between the handler and Azure OpenAI (the product's
//! simulator, or a real endpoint): the handler's `AZURE_OPENAI_ENDPOINT` points here;
//! every chat-completions request is forwarded unchanged (path, query, `api-key` or
//! `Authorization`, body) and its answer comes back unchanged (status, throttle headers,
//! body). On the way it counts what the storm lab reports: calls and 429s per
//! deployment, 429s per minute, billed tokens (`usage`), and each deployment's sliding
//! minute at Azure's arrival estimate ([`stormgate_shared::metering`]), so a run against
//! a real deployment gets the same figures as one against the simulator.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::replay::DeploymentTotals;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::metering::{DeploymentMeter, Quota, arrival_charge};

use crate::functions_host::runtime::wall_clock;

#[derive(Debug)]
struct Counted {
    totals: DeploymentTotals,
    meter: DeploymentMeter,
}

#[derive(Debug)]
struct Shared {
    upstream: String,
    started: EpochMillis,
    deployments: BTreeMap<String, Counted>,
    throttles_per_minute: BTreeMap<u64, u64>,
    failed_upstream: u64,
}

/// The running proxy; stops when dropped.
#[derive(Debug)]
pub struct LlmMeter {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LlmMeter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One deployment the meter knows: its name, model and quota (for its window's share).
#[derive(Debug, Clone)]
pub struct MeteredDeployment {
    pub name: String,
    pub model: String,
    pub tpm: u64,
    pub rpm: u64,
}

impl LlmMeter {
    /// Proxies to `upstream` (`https://<account>.openai.azure.com` or the simulator).
    pub async fn start(
        upstream: &str,
        deployments: &[MeteredDeployment],
    ) -> anyhow::Result<LlmMeter> {
        let started = wall_clock();
        let shared = Arc::new(Mutex::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            started,
            deployments: deployments
                .iter()
                .map(|d| {
                    (
                        d.name.clone(),
                        Counted {
                            totals: DeploymentTotals {
                                model: d.model.clone(),
                                tpm: d.tpm,
                                rpm: d.rpm,
                                ..DeploymentTotals::default()
                            },
                            meter: DeploymentMeter::new(Quota::new(d.tpm, d.rpm)),
                        },
                    )
                })
                .collect(),
            throttles_per_minute: BTreeMap::new(),
            failed_upstream: 0,
        }));
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(300))
            .build()?;
        let app = Router::new()
            .route(
                "/openai/deployments/{deployment}/chat/completions",
                post(forward),
            )
            .with_state((shared.clone(), client));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the LLM meter stopped");
            }
        });
        Ok(LlmMeter { addr, shared, task })
    }

    /// `http://127.0.0.1:<port>/`: the endpoint to give the handler.
    pub fn endpoint(&self) -> String {
        format!("http://{}/", self.addr)
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Per deployment: calls, 429s, billed tokens, the peak of its sliding minute.
    pub fn totals(&self) -> BTreeMap<String, DeploymentTotals> {
        self.shared()
            .deployments
            .iter()
            .map(|(name, c)| {
                let mut totals = c.totals.clone();
                totals.peak_window_tokens = c.meter.peak_tokens();
                (name.clone(), totals)
            })
            .collect()
    }

    /// 429s per minute since the meter started.
    pub fn throttles_per_minute(&self) -> BTreeMap<u64, u64> {
        self.shared().throttles_per_minute.clone()
    }

    /// Tokens in each deployment's sliding minute now.
    pub fn window_tokens(&self, now: EpochMillis) -> BTreeMap<String, u64> {
        self.shared()
            .deployments
            .iter_mut()
            .map(|(name, c)| (name.clone(), c.meter.tokens_in_window(now)))
            .collect()
    }

    /// Requests the upstream never answered (connection refused, timeout).
    pub fn failed_upstream(&self) -> u64 {
        self.shared().failed_upstream
    }
}

type MeterState = (Arc<Mutex<Shared>>, reqwest::Client);

/// The arrival estimate of a chat-completions body: prompt characters / 4 + max_tokens.
fn arrival_estimate(body: &Value) -> u64 {
    let chars: u64 = body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .map(|m| match &m["content"] {
                    Value::String(s) => s.chars().count() as u64,
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .map(|t| t.chars().count() as u64)
                        .sum(),
                    _ => 0,
                })
                .sum()
        })
        .unwrap_or(0);
    let max_tokens = body["max_tokens"]
        .as_u64()
        .or_else(|| body["max_completion_tokens"].as_u64())
        .unwrap_or(0);
    arrival_charge(chars, u32::try_from(max_tokens).unwrap_or(u32::MAX)).0
}

async fn forward(
    State((shared, client)): State<MeterState>,
    Path(deployment): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let estimate = arrival_estimate(&parsed);
    let upstream = {
        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
        let now = wall_clock();
        if let Some(c) = s.deployments.get_mut(&deployment) {
            c.totals.calls += 1;
            c.meter.charge_foreign(now, estimate);
        }
        s.upstream.clone()
    };
    let path = uri.path_and_query().map_or("", |p| p.as_str());
    let mut request = client.post(format!("{upstream}{path}")).body(body);
    for name in ["api-key", "authorization", "content-type"] {
        if let Some(value) = headers.get(name) {
            request = request.header(name, value);
        }
    }
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(e) => {
            shared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .failed_upstream += 1;
            return (StatusCode::BAD_GATEWAY, e.to_string()).into_response();
        }
    };
    let status = answer.status();
    let mut response_headers = HeaderMap::new();
    for (name, value) in answer.headers() {
        let name = name.as_str();
        let kept = name.starts_with("retry-after")
            || name.starts_with("x-ratelimit")
            || name == "content-type"
            || name == "apim-request-id";
        if kept && let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
            response_headers.insert(name, value.clone());
        }
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    {
        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
        let minute = wall_clock().since(s.started).as_secs() / 60;
        if status == StatusCode::TOO_MANY_REQUESTS {
            *s.throttles_per_minute.entry(minute).or_default() += 1;
        }
        if let Some(c) = s.deployments.get_mut(&deployment) {
            if status == StatusCode::TOO_MANY_REQUESTS {
                c.totals.throttled += 1;
            } else if status.is_success() {
                let usage: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                c.totals.prompt_tokens += usage["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
                c.totals.completion_tokens +=
                    usage["usage"]["completion_tokens"].as_u64().unwrap_or(0);
            }
        }
    }
    (status, response_headers, bytes).into_response()
}
