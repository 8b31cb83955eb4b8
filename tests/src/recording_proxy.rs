//! A recording reverse proxy in front of the Azure OpenAI simulator: the handler's
//! `AZURE_OPENAI_ENDPOINT` points here, every request is recorded as it arrives (time,
//! deployment, body) and forwarded unchanged, and the simulator's answer (status,
//! throttle headers, body) goes back unchanged. Tests read what was really sent on the
//! wire: how many calls each job cost, when retries came, what the prompts carried.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

/// One request the handler sent.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub at: Instant,
    pub deployment: String,
    pub headers: HeaderMap,
    pub body: Value,
    /// The simulator's status; `None` while in flight or when the caller gave up first.
    pub status: Option<u16>,
}

impl Exchange {
    /// The system message's text.
    pub fn system(&self) -> &str {
        self.message("system")
    }

    /// The user message's text.
    pub fn user(&self) -> &str {
        self.message("user")
    }

    fn message(&self, role: &str) -> &str {
        self.body["messages"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["role"] == role))
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
    }

    /// The ticket numbers of the `<ticket number="...">` blocks in the user message.
    pub fn ticket_numbers(&self) -> BTreeSet<String> {
        self.ticket_blocks().into_iter().map(|(n, _)| n).collect()
    }

    /// Each `<ticket number="N">...</ticket>` block of the user message: N and the body.
    pub fn ticket_blocks(&self) -> Vec<(String, String)> {
        self.user()
            .split("<ticket number=\"")
            .skip(1)
            .filter_map(|rest| {
                let (number, rest) = rest.split_once("\">")?;
                let body = rest.split("</ticket>").next()?;
                Some((number.to_owned(), body.to_owned()))
            })
            .collect()
    }
}

#[derive(Debug, Default)]
struct Shared {
    upstream: String,
    exchanges: Vec<Exchange>,
}

/// A running proxy; stops when dropped.
pub struct RecordingProxy {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RecordingProxy {
    /// Proxies to `upstream` (`http://127.0.0.1:<port>`, the simulator).
    pub async fn start(upstream: &str) -> RecordingProxy {
        let shared = Arc::new(Mutex::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            exchanges: Vec::new(),
        }));
        let state = (shared.clone(), reqwest::Client::new());
        let app = Router::new()
            .route(
                "/openai/deployments/{deployment}/chat/completions",
                post(forward),
            )
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        RecordingProxy { addr, shared, task }
    }

    /// `http://127.0.0.1:<port>/`: the endpoint to give the handler.
    pub fn endpoint(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Every request so far, in arrival order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.shared.lock().unwrap().exchanges.clone()
    }
}

type ProxyState = (Arc<Mutex<Shared>>, reqwest::Client);

async fn forward(
    State((shared, client)): State<ProxyState>,
    Path(deployment): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (index, upstream) = {
        let mut shared = shared.lock().unwrap();
        shared.exchanges.push(Exchange {
            at: Instant::now(),
            deployment,
            headers: headers.clone(),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            status: None,
        });
        (shared.exchanges.len() - 1, shared.upstream.clone())
    };
    let mut request = client.post(format!("{upstream}{uri}")).body(body);
    for name in ["api-key", "authorization", "content-type"] {
        if let Some(value) = headers.get(name) {
            request = request.header(name, value);
        }
    }
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = answer.status();
    shared.lock().unwrap().exchanges[index].status = Some(status.as_u16());
    let mut response_headers = HeaderMap::new();
    for (name, value) in answer.headers() {
        let name = name.as_str();
        if name.starts_with("retry-after")
            || name.starts_with("x-ratelimit")
            || name == "content-type"
        {
            response_headers.insert(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.clone(),
            );
        }
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    (status, response_headers, bytes).into_response()
}
