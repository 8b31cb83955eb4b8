//! A local HTTP server speaking the ServiceNow Table API shape for incident work notes:
//! `PATCH /api/now/table/incident/{sys_id}` with basic auth, `{"result": {...}}` on
//! success, 429 with `Retry-After` and `X-RateLimit-*` headers when scripted to.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::patch;
use base64::Engine;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnReply {
    Ok,
    /// 429 with `Retry-After: N`.
    RateLimited(u64),
    Status(u16),
    /// Holds the request this many milliseconds, then answers 503: an instance that
    /// hangs, so that a test can act while a note is on its way.
    Hang(u64),
}

/// One accepted work note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedNote {
    pub sys_id: String,
    pub work_notes: String,
}

#[derive(Debug, Default)]
struct Inner {
    script: VecDeque<SnReply>,
    /// The answer once the script is used up (`Ok` when unset).
    default: Option<SnReply>,
    attempts: usize,
    notes: Vec<ReceivedNote>,
    user: String,
    password: String,
}

pub struct FakeServiceNow {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    running: Option<Running>,
}

/// The serving task and how to stop it.
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeServiceNow {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.task.abort();
        }
    }
}

impl FakeServiceNow {
    /// Accepts only `user`/`password` (basic auth).
    pub async fn start(user: &str, password: &str) -> FakeServiceNow {
        let inner = Arc::new(Mutex::new(Inner {
            user: user.into(),
            password: password.into(),
            ..Inner::default()
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let running = serve(listener, inner.clone());
        FakeServiceNow {
            addr,
            inner,
            running: Some(running),
        }
    }

    /// Takes the instance down: open connections are closed and new ones refused.
    pub async fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            let _ = running.stop.send(());
            let _ = running.task.await;
        }
    }

    /// Brings the instance back on the same address, with what it had received.
    pub async fn restart(&mut self) {
        self.stop().await;
        let listener = tokio::net::TcpListener::bind(self.addr).await.unwrap();
        self.running = Some(serve(listener, self.inner.clone()));
    }

    pub fn instance_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn script(&self, replies: impl IntoIterator<Item = SnReply>) {
        self.inner.lock().unwrap().script.extend(replies);
    }

    /// What to answer once the script is used up: `Status(503)` is ServiceNow down.
    pub fn set_default(&self, reply: SnReply) {
        self.inner.lock().unwrap().default = Some(reply);
    }

    pub fn notes(&self) -> Vec<ReceivedNote> {
        self.inner.lock().unwrap().notes.clone()
    }

    /// Every PATCH that reached the server, accepted or not.
    pub fn attempts(&self) -> usize {
        self.inner.lock().unwrap().attempts
    }
}

fn serve(listener: tokio::net::TcpListener, inner: Arc<Mutex<Inner>>) -> Running {
    let app = Router::new()
        .route("/api/now/table/incident/{sys_id}", patch(update_incident))
        .with_state(inner);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    Running { stop, task }
}

async fn update_incident(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(sys_id): Path<String>,
    headers: HeaderMap,
    body: axum::Json<Value>,
) -> Response {
    match answer(&inner, sys_id, &headers, &body) {
        Ok(response) => response,
        Err(hang) => {
            tokio::time::sleep(hang).await;
            (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(json!({"error": {"message": "timed out"}, "status": "failure"})),
            )
                .into_response()
        }
    }
}

/// The answer to one PATCH, or how long to hang before failing it.
fn answer(
    inner: &Mutex<Inner>,
    sys_id: String,
    headers: &HeaderMap,
    body: &Value,
) -> Result<Response, std::time::Duration> {
    let mut inner = inner.lock().unwrap();
    inner.attempts += 1;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", inner.user, inner.password))
    );
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return Ok((
            StatusCode::UNAUTHORIZED,
            axum::Json(
                json!({"error": {"message": "User Not Authenticated"}, "status": "failure"}),
            ),
        )
            .into_response());
    }
    let reply = inner
        .script
        .pop_front()
        .or(inner.default)
        .unwrap_or(SnReply::Ok);
    Ok(match reply {
        SnReply::Ok => {
            let note = body["work_notes"].as_str().unwrap_or_default().to_owned();
            inner.notes.push(ReceivedNote {
                sys_id: sys_id.clone(),
                work_notes: note,
            });
            axum::Json(json!({"result": {"sys_id": sys_id}})).into_response()
        }
        SnReply::RateLimited(seconds) => (
            StatusCode::TOO_MANY_REQUESTS,
            [
                ("retry-after", seconds.to_string()),
                ("x-ratelimit-limit", "100".to_owned()),
                ("x-ratelimit-reset", "1800000000".to_owned()),
            ],
            axum::Json(json!({"error": {"message": "Rate limit exceeded"}, "status": "failure"})),
        )
            .into_response(),
        SnReply::Hang(ms) => return Err(std::time::Duration::from_millis(ms)),
        SnReply::Status(status) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            axum::Json(json!({"error": {"message": "No Record found"}, "status": "failure"})),
        )
            .into_response(),
    })
}
