//! The deployed handler's clients, built from its settings and handed to the one assembly
//! ([`crate::state::AppState::assemble`]): the Azure OpenAI client, the optional
//! ServiceNow work-note sink with its outbox in Redis, and the optional related-context
//! search (Azure AI Search).
//!
//! Nothing here touches the network: the Entra token is fetched by the first call, and
//! the outbox's Redis connection is made by the first note, so `GET /` answers at once.

use std::sync::Arc;
use std::time::Duration;

use azure_identity::{ManagedIdentityCredential, ManagedIdentityCredentialOptions, UserAssignedId};
use stormgate_shared::clock::Clock;
use stormgate_shared::llm::LlmClient;
use stormgate_shared::related_context::RelatedContext;

use crate::config::{
    OpenAiAuth as OpenAiAuthSetting, SearchSettings, ServiceNowSettings, Settings,
};
use crate::openai::{AzureOpenAiClient, OpenAiAuth, OpenAiConfig, OpenAiSetupError};
use crate::redis_connector::RedisConnector;
use crate::related_search::{AzureSearch, SearchConfig};
use crate::servicenow::{ServiceNowClient, ServiceNowConfig, WorkNoteOutbox, WorkNoteSink};

/// The handler's clients beyond the store: Azure OpenAI, Azure AI Search, ServiceNow;
/// what it passes the one assembly ([`crate::state::AppState::assemble`]).
#[derive(Debug, Default)]
pub struct EdgeClients {
    pub llm: Option<Arc<dyn LlmClient>>,
    pub related: Option<Arc<dyn RelatedContext>>,
    pub work_notes: Option<WorkNoteSink>,
}

/// One chat completion, connection to last byte. Long enough for a slow answer of a few
/// hundred tokens; short enough that a hung call is retried well inside the lease.
pub const OPENAI_TIMEOUT: Duration = Duration::from_secs(60);

/// One work-note PATCH. Short: a note is retried from the outbox anyway, and the call
/// sits after the summary is stored, inside a tier function or the dispatch tick.
pub const SERVICENOW_TIMEOUT: Duration = Duration::from_secs(5);

/// One related-context search. Short: the summary waits for it, and goes on without it.
pub const SEARCH_TIMEOUT: Duration = Duration::from_secs(3);

/// Why the runtime could not be built. Each names the setting to look at.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeSetupError {
    #[error("cannot set up the managed identity for AZURE_OPENAI_AUTH: {0}")]
    ManagedIdentity(String),
    #[error("cannot set up the Azure OpenAI client (AZURE_OPENAI_ENDPOINT): {0}")]
    OpenAi(#[from] OpenAiSetupError),
    #[error("cannot set up the ServiceNow client (SERVICENOW_INSTANCE_URL): {0}")]
    ServiceNow(reqwest::Error),
    #[error("cannot set up the Azure AI Search client (STORMGATE_SEARCH_ENDPOINT): {0}")]
    Search(reqwest::Error),
}

/// Builds the clients; `redis` is the store's connector, whose namespace and credentials
/// the work-note outbox uses.
pub fn build(
    settings: &Settings,
    clock: Arc<dyn Clock>,
    redis: &RedisConnector,
) -> Result<EdgeClients, RuntimeSetupError> {
    let client = openai_client(settings, clock)?;
    let work_notes = settings
        .servicenow
        .as_ref()
        .map(|servicenow| work_note_sink(servicenow, redis))
        .transpose()?;
    let related = settings.search.as_ref().map(related_search).transpose()?;
    Ok(EdgeClients {
        llm: Some(Arc::new(client)),
        related,
        work_notes,
    })
}

fn openai_client(
    settings: &Settings,
    clock: Arc<dyn Clock>,
) -> Result<AzureOpenAiClient, RuntimeSetupError> {
    let auth = match &settings.openai.auth {
        OpenAiAuthSetting::ApiKey(key) => OpenAiAuth::ApiKey(key.expose().to_owned()),
        OpenAiAuthSetting::ManagedIdentity => {
            let options = ManagedIdentityCredentialOptions {
                user_assigned_id: settings
                    .azure_client_id
                    .clone()
                    .map(UserAssignedId::ClientId),
                ..Default::default()
            };
            let credential = ManagedIdentityCredential::new(Some(options))
                .map_err(|e| RuntimeSetupError::ManagedIdentity(e.to_string()))?;
            OpenAiAuth::Entra(credential)
        }
    };
    let config = OpenAiConfig {
        endpoint: settings.openai.endpoint.clone(),
        api_version: settings.openai.api_version.clone(),
        timeout: OPENAI_TIMEOUT,
    };
    Ok(AzureOpenAiClient::new(config, auth, clock)?)
}

/// The ServiceNow client and its outbox, on a Redis connection of its own made on
/// first use.
fn work_note_sink(
    settings: &ServiceNowSettings,
    redis: &RedisConnector,
) -> Result<WorkNoteSink, RuntimeSetupError> {
    let client = ServiceNowClient::new(ServiceNowConfig {
        instance_url: settings.instance_url.clone(),
        username: settings.username.clone(),
        password: settings.password.clone(),
        timeout: SERVICENOW_TIMEOUT,
    })
    .map_err(RuntimeSetupError::ServiceNow)?;
    let outbox = WorkNoteOutbox::new(redis.link(), &redis.key("servicenow"));
    Ok(WorkNoteSink { client, outbox })
}

/// The Azure AI Search client, when all three search settings are given.
fn related_search(settings: &SearchSettings) -> Result<Arc<dyn RelatedContext>, RuntimeSetupError> {
    let search = AzureSearch::new(SearchConfig {
        endpoint: settings.endpoint.clone(),
        index: settings.index.clone(),
        api_key: settings.api_key.clone(),
        timeout: SEARCH_TIMEOUT,
    })
    .map_err(RuntimeSetupError::Search)?;
    Ok(Arc::new(search))
}
