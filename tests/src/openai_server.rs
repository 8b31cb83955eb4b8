//! A local HTTP server speaking the Azure OpenAI chat-completions REST shape, scripted
//! per test: successes with `usage` and `x-ratelimit-remaining-*` headers, 429s in each
//! header variant Azure uses, 5xx, slow answers, content-filter and context-length 400s.
//! It records every request so tests can count calls and check what was sent.
//!
//! Its default answer is a deliberately leaky model: it echoes the ticket text it was
//! given, so the customer-notice scrubber is tested against the worst case.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// How a 429 tells the client when to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottleVariant {
    /// `retry-after: N` only.
    RetryAfter(u64),
    /// `retry-after-ms: N` (and a rounded-up `retry-after`).
    RetryAfterMs(u64),
    /// Only `x-ratelimit-reset-tokens: Ns` (Go duration).
    ResetTokens(u64),
    /// No header at all: "Please retry after N seconds" in the message.
    MessageOnly(u64),
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with this text; `None` echoes the request's user content (a leaky model).
    Ok(Option<String>),
    Throttle(ThrottleVariant),
    Status(u16, Value),
    ContentFilter,
    ContextLength,
    /// Waits before answering with the inner reply.
    Slow(Duration, Box<Reply>),
}

/// What the server saw.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub at: Instant,
    pub deployment: String,
    pub api_version: Option<String>,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Debug, Default)]
struct Inner {
    script: VecDeque<Reply>,
    default: Option<Reply>,
    requests: Vec<Recorded>,
}

/// A running fake endpoint; stops when dropped.
pub struct FakeAzureOpenAi {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeAzureOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeAzureOpenAi {
    pub async fn start() -> FakeAzureOpenAi {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route(
                "/openai/deployments/{deployment}/chat/completions",
                post(chat_completions),
            )
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeAzureOpenAi { addr, inner, task }
    }

    /// `http://127.0.0.1:<port>`: the client's `AZURE_OPENAI_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers the next requests with these replies, in order.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.inner.lock().unwrap().script.extend(replies);
    }

    /// What to answer once the script is used up (default: the leaky echo).
    pub fn set_default(&self, reply: Reply) {
        self.inner.lock().unwrap().default = Some(reply);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().unwrap().requests.clone()
    }
}

async fn chat_completions(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(deployment): Path<String>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::Json<Value>,
) -> Response {
    let reply = {
        let mut inner = inner.lock().unwrap();
        inner.requests.push(Recorded {
            at: Instant::now(),
            deployment,
            api_version: query.get("api-version").cloned(),
            headers,
            body: body.0.clone(),
        });
        inner
            .script
            .pop_front()
            .or_else(|| inner.default.clone())
            .unwrap_or(Reply::Ok(None))
    };
    answer(reply, &body.0).await
}

async fn answer(reply: Reply, request: &Value) -> Response {
    let mut reply = reply;
    while let Reply::Slow(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    match reply {
        Reply::Ok(text) => {
            let text = text.unwrap_or_else(|| echo(request));
            let prompt_tokens = request.to_string().len() as u64 / 4;
            let completion_tokens = text.len() as u64 / 4 + 1;
            (
                [
                    ("x-ratelimit-remaining-tokens", "9000"),
                    ("x-ratelimit-remaining-requests", "53"),
                ],
                axum::Json(json!({
                    "id": "chatcmpl-local",
                    "object": "chat.completion",
                    "created": 1_800_000_000u64,
                    "model": "gpt-4o-2024-08-06",
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop"
                    }],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens
                    }
                })),
            )
                .into_response()
        }
        Reply::Throttle(variant) => throttle(variant),
        Reply::Status(status, body) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            axum::Json(body),
        )
            .into_response(),
        Reply::ContentFilter => (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {
                "code": "content_filter",
                "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
                "param": "prompt",
                "status": 400,
                "innererror": {"code": "ResponsibleAIPolicyViolation",
                               "content_filter_result": {"violence": {"filtered": true, "severity": "high"}}}
            }})),
        )
            .into_response(),
        Reply::ContextLength => (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {
                "code": "context_length_exceeded",
                "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
                "param": "messages",
                "type": "invalid_request_error"
            }})),
        )
            .into_response(),
        Reply::Slow(..) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

fn throttle(variant: ThrottleVariant) -> Response {
    let seconds = match variant {
        ThrottleVariant::RetryAfter(s)
        | ThrottleVariant::ResetTokens(s)
        | ThrottleVariant::MessageOnly(s) => s,
        ThrottleVariant::RetryAfterMs(ms) => ms.div_ceil(1000),
    };
    let message = format!(
        "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version \
         2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. \
         Please retry after {seconds} seconds. Please go here: https://aka.ms/oai/quotaincrease \
         if you would like to further increase the default rate limit."
    );
    let mut headers = HeaderMap::new();
    let mut set = |k: &'static str, v: String| {
        headers.insert(k, v.parse().unwrap());
    };
    match variant {
        ThrottleVariant::RetryAfter(s) => set("retry-after", s.to_string()),
        ThrottleVariant::RetryAfterMs(ms) => {
            set("retry-after-ms", ms.to_string());
            set("retry-after", ms.div_ceil(1000).to_string());
        }
        ThrottleVariant::ResetTokens(s) => set("x-ratelimit-reset-tokens", format!("{s}s")),
        ThrottleVariant::MessageOnly(_) => {}
    }
    (
        StatusCode::TOO_MANY_REQUESTS,
        headers,
        axum::Json(json!({"error": {"code": "429", "message": message}})),
    )
        .into_response()
}

/// The user message's text without the delimiter tags: what a careless model might say.
fn echo(request: &Value) -> String {
    let user = request["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    user.lines()
        .filter(|l| !l.starts_with("<ticket") && !l.starts_with("</ticket"))
        .collect::<Vec<_>>()
        .join(" ")
}
