//! The Functions host's key check in front of the handler's HTTP routes, as a proxy: a
//! request to `/api/<route>` is let through only with the key its function's `authLevel`
//! asks for (read from `function-defs/*/function.json`), given as the `x-functions-key`
//! header or the `code` query parameter (the header first), as the host does:
//! - `anonymous`: no key;
//! - `function`: a function key or the master key;
//! - `admin`: the master key only.
//!
//! Otherwise the host answers 401 before the handler sees anything. The facts this
//! follows are in `tests/fixtures/platform/host-http-and-logs.json` (with their sources),
//! which a test compares with the proxy.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::net::TcpListener;

use crate::functions_host::repo_path;

/// The header and query parameter the host reads a key from.
pub const KEY_HEADER: &str = "x-functions-key";
pub const KEY_QUERY: &str = "code";

/// One HTTP function as `function.json` declares it.
#[derive(Debug, Clone)]
pub struct HttpFunction {
    pub name: String,
    pub route: String,
    pub auth_level: String,
    pub methods: Vec<String>,
}

/// Every HTTP-triggered function of `function-defs/`.
pub fn http_functions() -> Vec<HttpFunction> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo_path("function-defs")).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path().join("function.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let definition: Value = serde_json::from_str(&text).unwrap();
        for binding in definition["bindings"].as_array().unwrap() {
            if binding["type"] == "httpTrigger" {
                out.push(HttpFunction {
                    name: entry.file_name().into_string().unwrap(),
                    route: binding["route"].as_str().unwrap().to_owned(),
                    auth_level: binding["authLevel"].as_str().unwrap().to_lowercase(),
                    methods: binding["methods"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|m| m.as_str().unwrap().to_lowercase())
                        .collect(),
                });
            }
        }
    }
    out
}

/// Whether `path` (after `/api/`) matches a route template (`summaries/{ticket}`).
fn matches(route: &str, path: &str) -> bool {
    let want: Vec<&str> = route.split('/').collect();
    let got: Vec<&str> = path.split('/').collect();
    want.len() == got.len()
        && want
            .iter()
            .zip(&got)
            .all(|(w, g)| (w.starts_with('{') && w.ends_with('}') && !g.is_empty()) || w == g)
}

/// The keys the emulated host knows.
#[derive(Debug, Clone)]
pub struct Keys {
    pub master: String,
    pub function: String,
}

struct Proxy {
    target: String,
    keys: Keys,
    functions: Vec<HttpFunction>,
    http: reqwest::Client,
}

/// The key check running in front of a handler; stops when dropped.
pub struct HostKeys {
    address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl HostKeys {
    /// Starts the proxy in front of the handler at `target` (`http://127.0.0.1:PORT`).
    pub async fn start(target: &str, keys: Keys) -> HostKeys {
        let proxy = Arc::new(Proxy {
            target: target.trim_end_matches('/').to_owned(),
            keys,
            functions: http_functions(),
            http: reqwest::Client::new(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let app = Router::new().fallback(forward).with_state(proxy);
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        HostKeys { address, task }
    }

    /// `http://127.0.0.1:PORT`: where a caller reaches the app.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for HostKeys {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The level a key gives: `admin` for the master key, `function` for a function key.
fn level_of(keys: &Keys, key: Option<&str>) -> &'static str {
    match key {
        Some(k) if k == keys.master => "admin",
        Some(k) if k == keys.function => "function",
        _ => "anonymous",
    }
}

fn allowed(required: &str, given: &str) -> bool {
    match required {
        "anonymous" => true,
        "function" => matches!(given, "function" | "admin"),
        "admin" => given == "admin",
        _ => false,
    }
}

fn key_of(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    if let Some(value) = headers.get(KEY_HEADER).and_then(|v| v.to_str().ok()) {
        return Some(value.to_owned());
    }
    uri.query()?.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        (name == KEY_QUERY).then(|| value.to_owned())
    })
}

async fn forward(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Some(path) = parts.uri.path().strip_prefix("/api/") else {
        return (StatusCode::NOT_FOUND, "not an HTTP function").into_response();
    };
    let method = parts.method.as_str().to_lowercase();
    let Some(function) = proxy
        .functions
        .iter()
        .find(|f| matches(&f.route, path) && f.methods.contains(&method))
    else {
        return (StatusCode::NOT_FOUND, "no such function").into_response();
    };
    let key = key_of(&parts.headers, &parts.uri);
    if !allowed(&function.auth_level, level_of(&proxy.keys, key.as_deref())) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let url = format!(
        "{}{}",
        proxy.target,
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let body: Bytes = axum::body::to_bytes(body, 10 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let mut forwarded = proxy
        .http
        .request(
            reqwest::Method::from_bytes(parts.method.as_str().as_bytes())
                .unwrap_or(reqwest::Method::GET),
            url,
        )
        .body(body.to_vec());
    if let Some(content_type) = parts.headers.get("content-type") {
        forwarded = forwarded.header("content-type", content_type.as_bytes());
    }
    let Ok(answer) = forwarded.send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut headers = HeaderMap::new();
    for (name, value) in answer.headers() {
        if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::from_bytes(name.as_str().as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) && name != "content-length"
            && name != "transfer-encoding"
        {
            headers.insert(name, value);
        }
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    if parts.method == Method::HEAD {
        *response.body_mut() = Body::empty();
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_match_their_templates() {
        assert!(matches("summaries/{ticket}", "summaries/INC0012345"));
        assert!(!matches("summaries/{ticket}", "summaries/"));
        assert!(!matches("summaries/{ticket}", "summaries/a/b"));
        assert!(matches("regions/{region}/rollup", "regions/north/rollup"));
        assert!(matches("status", "status"));
        assert!(!matches("status", "statuses"));
    }

    #[test]
    fn the_key_check_follows_the_hosts_facts() {
        let path = repo_path("tests/fixtures/platform/host-http-and-logs.json");
        let facts: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let keys = &facts["http_keys"];
        assert_eq!(keys["header"], KEY_HEADER);
        assert_eq!(keys["query"], KEY_QUERY);
        assert_eq!(keys["admin_route_needs"], "admin");
        assert_eq!(keys["levels"]["master key"], "admin");
        assert_eq!(
            keys["function_route_accepts"],
            serde_json::json!(["function", "admin"])
        );
        // The header wins over the query parameter, as the host reads them.
        let mut headers = HeaderMap::new();
        headers.insert(KEY_HEADER, HeaderValue::from_static("from-header"));
        let uri: Uri = "/api/status?code=from-query".parse().unwrap();
        assert_eq!(keys["header_first"], true);
        assert_eq!(key_of(&headers, &uri).as_deref(), Some("from-header"));
        assert_eq!(
            key_of(&HeaderMap::new(), &uri).as_deref(),
            Some("from-query")
        );
        // Every HTTP function's level is one the check knows.
        for f in http_functions() {
            assert!(
                ["anonymous", "function", "admin"].contains(&f.auth_level.as_str()),
                "{}: {}",
                f.name,
                f.auth_level
            );
        }
    }

    #[test]
    fn only_the_master_key_passes_admin() {
        let keys = Keys {
            master: "m".into(),
            function: "f".into(),
        };
        assert!(allowed("admin", level_of(&keys, Some("m"))));
        assert!(!allowed("admin", level_of(&keys, Some("f"))));
        assert!(allowed("function", level_of(&keys, Some("f"))));
        assert!(allowed("function", level_of(&keys, Some("m"))));
        assert!(!allowed("function", level_of(&keys, None)));
        assert!(allowed("anonymous", level_of(&keys, None)));
    }
}
