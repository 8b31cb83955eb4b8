//! The router the Functions host talks to, and the one table of functions it serves.
//!
//! Non-HTTP triggers arrive as `POST /<FunctionName>` with the invocation payload. HTTP
//! triggers are forwarded raw (`enableForwardingHttpRequest`) at `/api/<route>`, so they
//! are ordinary axum routes. [`FUNCTIONS`] is the single source of truth: the router is
//! built from it and a test compares it with the folders of `function-defs/`.

use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::HeaderMap;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use tracing::Instrument;

use crate::error::ApiError;
use crate::functions;
use crate::state::AppState;

/// The header the host sets on every request it sends the handler.
pub const INVOCATION_ID_HEADER: &str = "x-azure-functions-invocationid";

/// The prefix the host puts before HTTP-trigger routes (`extensions.http.routePrefix`).
pub const HTTP_ROUTE_PREFIX: &str = "/api";

/// The largest request body accepted: the Functions host's own HTTP request limit. A
/// Kafka batch of large tickets easily passes axum's 2 MB default, and refusing it would
/// fail the whole batch.
pub const MAX_BODY_BYTES: usize = 100 * 1024 * 1024;

/// How the host reaches a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Any non-HTTP trigger: `POST /<name>` with `{Data, Metadata}`.
    Invocation,
    /// An HTTP trigger forwarded raw to `/api/<route>` (route in function.json syntax).
    Http {
        methods: &'static [&'static str],
        route: &'static str,
    },
}

/// One function: its folder name in `function-defs/`, its trigger and its handler(s).
pub struct FunctionRoute {
    pub name: &'static str,
    pub trigger: Trigger,
    pub handler: fn() -> MethodRouter<AppState>,
}

impl FunctionRoute {
    /// The path the host calls on the handler.
    pub fn path(&self) -> String {
        match self.trigger {
            Trigger::Invocation => format!("/{}", self.name),
            Trigger::Http { route, .. } => format!("{HTTP_ROUTE_PREFIX}/{route}"),
        }
    }
}

/// Every function stormgate deploys. Adding a function means a row here and a folder in
/// `function-defs/`; a test fails if the two disagree.
pub const FUNCTIONS: &[FunctionRoute] = &[
    FunctionRoute {
        name: "classify",
        trigger: Trigger::Invocation,
        handler: || post(functions::classify::run),
    },
    FunctionRoute {
        name: "dispatch",
        trigger: Trigger::Invocation,
        handler: || post(functions::dispatch::run),
    },
    FunctionRoute {
        name: "summarize-premium",
        trigger: Trigger::Invocation,
        handler: || post(functions::summarize::premium),
    },
    FunctionRoute {
        name: "summarize-standard",
        trigger: Trigger::Invocation,
        handler: || post(functions::summarize::standard),
    },
    FunctionRoute {
        name: "rollup",
        trigger: Trigger::Invocation,
        handler: || post(functions::rollup::run),
    },
    FunctionRoute {
        name: "summaries",
        trigger: Trigger::Http {
            methods: &["get"],
            route: "summaries/{ticket}",
        },
        handler: || get(functions::summaries::get),
    },
    FunctionRoute {
        name: "region-rollup",
        trigger: Trigger::Http {
            methods: &["get"],
            route: "regions/{region}/rollup",
        },
        handler: || get(functions::region_rollup::get),
    },
    FunctionRoute {
        name: "dead-letters",
        trigger: Trigger::Http {
            methods: &["get", "post"],
            route: "dead-letters",
        },
        handler: || {
            get(functions::dead_letters::list).post(functions::dead_letters::resubmit_entries)
        },
    },
    FunctionRoute {
        name: "status",
        trigger: Trigger::Http {
            methods: &["get"],
            route: "status",
        },
        handler: || get(functions::status::get),
    },
    FunctionRoute {
        name: "series",
        trigger: Trigger::Http {
            methods: &["get"],
            route: "series",
        },
        handler: || get(functions::series::get),
    },
    FunctionRoute {
        name: "console",
        trigger: Trigger::Http {
            methods: &["get"],
            route: "console",
        },
        handler: || get(functions::console::get),
    },
    FunctionRoute {
        name: "controls",
        trigger: Trigger::Http {
            methods: &["post"],
            route: "controls",
        },
        handler: || post(functions::controls::post),
    },
    FunctionRoute {
        name: "health",
        trigger: Trigger::Http {
            methods: &["get"],
            route: "health",
        },
        handler: || get(functions::health::get),
    },
];

/// The whole HTTP surface of the handler process.
pub fn app(state: AppState) -> Router {
    FUNCTIONS
        .iter()
        .fold(Router::new(), |router, function| {
            router.route(&function.path(), (function.handler)())
        })
        // The host polls `GET /` until it answers; it must answer without touching Redis.
        .route("/", get(|| async { "stormgate handler" }))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(invocation_span))
        .with_state(state)
}

/// Runs each request inside a span carrying the host's invocation id, so every log line
/// of an invocation can be found from the Functions side (and the other way round).
async fn invocation_span(request: Request, next: Next) -> Response {
    let invocation_id = invocation_id(request.headers()).unwrap_or_default();
    let span = tracing::info_span!(
        "invocation",
        invocation_id = %invocation_id,
        method = %request.method(),
        path = %request.uri().path(),
        status = tracing::field::Empty,
    );
    async move {
        let started = Instant::now();
        let response = next.run(request).await;
        let status = response.status();
        tracing::Span::current().record("status", status.as_u16());
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if status.is_server_error() {
            tracing::warn!(elapsed_ms, "invocation failed");
        } else {
            tracing::info!(elapsed_ms, "answered");
        }
        response.into_response()
    }
    .instrument(span)
    .await
}

fn invocation_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(INVOCATION_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}
