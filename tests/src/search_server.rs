//! A local HTTP server speaking the Azure AI Search query REST shape:
//! `POST /indexes/{index}/docs/search?api-version=...` with an `api-key` header, answered
//! with `{"value": [documents...]}` or a scripted error status. It records every request.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One search as the server saw it.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub index: String,
    pub api_version: Option<String>,
    pub api_key: Option<String>,
    pub body: Value,
}

#[derive(Debug, Default)]
struct Inner {
    documents: Vec<Value>,
    /// Answer this status instead of documents.
    failing: Option<u16>,
    requests: Vec<SearchRequest>,
}

/// A running fake search service; stops when dropped.
pub struct FakeSearch {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeSearch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeSearch {
    /// Answers every search with `documents`.
    pub async fn start(documents: Vec<Value>) -> FakeSearch {
        let inner = Arc::new(Mutex::new(Inner {
            documents,
            ..Inner::default()
        }));
        let app = Router::new()
            .route("/indexes/{index}/docs/search", post(search))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeSearch { addr, inner, task }
    }

    /// `http://127.0.0.1:<port>`: the `STORMGATE_SEARCH_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on, answer every search with this error status.
    pub fn fail_with(&self, status: u16) {
        self.inner.lock().unwrap().failing = Some(status);
    }

    pub fn requests(&self) -> Vec<SearchRequest> {
        self.inner.lock().unwrap().requests.clone()
    }
}

async fn search(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(index): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    inner.requests.push(SearchRequest {
        index,
        api_version: query.get("api-version").cloned(),
        api_key: headers
            .get("api-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: body.0,
    });
    if let Some(status) = inner.failing {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return (
            status,
            axum::Json(json!({"error": {"code": "Failure", "message": "scripted failure"}})),
        )
            .into_response();
    }
    let value: Vec<Value> = inner
        .documents
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut d = d.clone();
            d["@search.score"] = json!(10.0 - i as f64);
            d
        })
        .collect();
    axum::Json(json!({"@odata.context": "https://fake/$metadata", "value": value})).into_response()
}
