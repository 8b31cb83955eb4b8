//! Another instance of the function app, in the test's own process: the handler's router
//! (`stormgate_handlers::app`) served on a local port, with the state the handler binary
//! builds (Redis connector, governor, tier functions' runtime) but its Azure OpenAI
//! client pointed at a local `http://` endpoint and its clock the fault suite's. It
//! shares Redis (store namespace and governor ledger) with every other instance, as
//! instances of one app do.
//!
//! The fault suite sends it what the handler process cannot do yet in a test: calls to
//! the tier functions against the local simulator, and ServiceNow write-back.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use stormgate_handlers::app::{AppState, app};
use stormgate_handlers::config::{Settings, TierSettings};
use stormgate_handlers::functions::summarize::SummarizeRuntime;
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::openai::{AzureOpenAiClient, OpenAiAuth, OpenAiConfig};
use stormgate_handlers::redis_connector::RedisConnector;
use stormgate_handlers::servicenow::WorkNoteSink;
use stormgate_shared::clock::Clock;
use stormgate_shared::job::Tier;
use stormgate_shared::summarize::{Deployment, SummarizeSettings};

/// What the handler binary sets as its Azure OpenAI timeout.
pub const OPENAI_TIMEOUT: Duration = Duration::from_secs(60);

/// A running in-process instance; its server stops when dropped.
pub struct InProcessInstance {
    base_url: String,
    state: AppState,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for InProcessInstance {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl InProcessInstance {
    /// Serves the handler's router over `settings` (Redis and deployments), calling Azure
    /// OpenAI at `llm_endpoint` with an API key, on `clock`.
    pub async fn start(
        settings: Settings,
        llm_endpoint: &str,
        api_key: &str,
        clock: Arc<dyn Clock>,
        work_notes: Option<WorkNoteSink>,
    ) -> InProcessInstance {
        let store = LazyStore::new(Arc::new(RedisConnector::new(settings.redis.clone(), None)));
        let state = AppState::new(settings.clone(), store, clock.clone());
        let client = AzureOpenAiClient::new(
            OpenAiConfig {
                endpoint: llm_endpoint.to_owned(),
                api_version: settings.openai.api_version.clone(),
                timeout: OPENAI_TIMEOUT,
            },
            OpenAiAuth::ApiKey(api_key.to_owned()),
            clock,
        )
        .unwrap();
        let deployment = |tier, t: &TierSettings| Deployment {
            tier,
            name: t.deployment.to_string(),
            model: t.model.clone(),
        };
        let runtime = SummarizeRuntime {
            client: Arc::new(client),
            governor: state.governor.clone(),
            premium: deployment(Tier::Premium, &settings.premium),
            standard: deployment(Tier::Standard, &settings.standard),
            settings: SummarizeSettings::default(),
            work_notes,
            seed: rand::random(),
        };
        let state = state.with_summarization(runtime);
        let router = app(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        InProcessInstance {
            base_url,
            state,
            task,
        }
    }

    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    /// The instance's state: its governor is the fleet's (the ledger is in Redis).
    pub fn state(&self) -> &AppState {
        &self.state
    }
}
