//! The router the Functions host talks to, and the one table of functions it serves.
//!
//! Non-HTTP triggers arrive as `POST /<FunctionName>` with the invocation payload. HTTP
//! triggers are forwarded raw (`enableForwardingHttpRequest`) at `/api/<route>`, so they
//! are ordinary axum routes. [`FUNCTIONS`] is the single source of truth: the router is
//! built from it and a test compares it with the folders of `function-defs/`.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use stormgate_shared::clock::Clock;
use stormgate_shared::controls::ControlStore;
use stormgate_shared::dispatch_policy::DispatchConfig;
use stormgate_shared::governor::Governor;
use stormgate_shared::ingest::IngestPolicy;
use stormgate_shared::job::Tier;
use stormgate_shared::signals::{DeploymentConfig, FleetConfig, SignalStore};
use stormgate_shared::store::Store;
use tracing::Instrument;

use crate::config::Settings;
use crate::error::ApiError;
use crate::functions;
use crate::lazy_store::LazyStore;

/// The header the host sets on every request it sends the handler.
pub const INVOCATION_ID_HEADER: &str = "x-azure-functions-invocationid";

/// The prefix the host puts before HTTP-trigger routes (`extensions.http.routePrefix`).
pub const HTTP_ROUTE_PREFIX: &str = "/api";

/// The largest request body accepted: the Functions host's own HTTP request limit. A
/// Kafka batch of large tickets easily passes axum's 2 MB default, and refusing it would
/// fail the whole batch.
pub const MAX_BODY_BYTES: usize = 100 * 1024 * 1024;

/// What every function gets: the store (connected on first use), the token governor
/// over the ledger next to it (also connected on first use), the ingest policy (with the
/// one deadline table), the dispatch policy, the clock and the settings.
#[derive(Clone, Debug)]
pub struct AppState {
    pub store: Arc<LazyStore>,
    /// Built from the settings' deployments and headroom; cheap to clone. The tier
    /// functions must admit and reconcile through this same governor.
    pub governor: Governor,
    /// What `classify` and dead-letter re-submission apply; its deadlines are stamped on
    /// every job, and `dispatch` spills by them.
    pub ingest: IngestPolicy,
    pub dispatch: DispatchConfig,
    pub clock: Arc<dyn Clock>,
    pub settings: Arc<Settings>,
    /// The tier functions' LLM client, governor and sinks; `None` until configured.
    pub summarization: Option<Arc<functions::summarize::SummarizeRuntime>>,
    /// The signal series next to the store (connected on first use).
    pub signals: Arc<dyn SignalStore>,
    /// The operators' controls and their audit next to the store (connected on first use).
    pub controls: Arc<dyn ControlStore>,
}

impl AppState {
    /// Builds the governor without touching Redis: its ledger connects on first use.
    pub fn new(settings: Settings, store: LazyStore, clock: Arc<dyn Clock>) -> Self {
        let governor = Governor::new(
            store.ledger(),
            settings.governor_policy(),
            settings.deployment_budgets(),
        );
        AppState {
            signals: store.signals(),
            controls: store.controls(),
            store: Arc::new(store),
            governor,
            ingest: IngestPolicy {
                coalesce_hold: settings.coalesce_hold,
                tiers: settings.tier_table,
                ..IngestPolicy::default()
            },
            dispatch: DispatchConfig::default(),
            clock,
            settings: Arc::new(settings),
            summarization: None,
        }
    }

    /// The same state with another ingest policy (e.g. other deadlines).
    pub fn with_ingest(mut self, ingest: IngestPolicy) -> Self {
        self.ingest = ingest;
        self
    }

    /// The same state with another dispatch policy (aging, leases, group size, tick).
    pub fn with_dispatch(mut self, dispatch: DispatchConfig) -> Self {
        self.dispatch = dispatch;
        self
    }

    /// Equips the tier functions with their LLM client, governor and sinks.
    pub fn with_summarization(mut self, runtime: functions::summarize::SummarizeRuntime) -> Self {
        self.summarization = Some(Arc::new(runtime));
        self
    }

    /// The store, connecting on first use; an unreachable store is a 503.
    pub async fn store(&self) -> Result<Arc<dyn Store>, ApiError> {
        Ok(self.store.get().await?)
    }

    /// What readers without these settings need (published with every `dispatch` tick):
    /// the deployments with their prices, the governor's policy, the deadlines.
    pub fn fleet_config(&self) -> FleetConfig {
        let tiers = [
            (Tier::Premium, &self.settings.premium),
            (Tier::Standard, &self.settings.standard),
        ];
        FleetConfig {
            deployments: tiers
                .into_iter()
                .map(|(tier, t)| DeploymentConfig {
                    tier,
                    deployment: t.deployment.clone(),
                    model: t.model.clone(),
                    tpm: t.tokens_per_minute,
                    rpm: t.requests_per_minute,
                    price_input_per_1m: t.price_input_per_1m,
                    price_output_per_1m: t.price_output_per_1m,
                })
                .collect(),
            policy: *self.governor.policy(),
            deadlines: self.ingest.deadlines,
        }
    }
}

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
        if status.is_server_error() && status != StatusCode::NOT_IMPLEMENTED {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use stormgate_shared::clock::ManualClock;
    use stormgate_shared::store::memory::MemoryStore;

    use super::*;

    #[test]
    fn the_ingest_policy_takes_the_coalescing_hold_from_the_settings() {
        let mut settings = Settings::example();
        settings.coalesce_hold = Duration::from_secs(42);
        let state = AppState::new(
            settings,
            LazyStore::ready(Arc::new(MemoryStore::new())),
            Arc::new(ManualClock::default()),
        );
        assert_eq!(state.ingest.coalesce_hold, Duration::from_secs(42));
        assert_eq!(state.ingest.deadlines, IngestPolicy::default().deadlines);
    }
}
