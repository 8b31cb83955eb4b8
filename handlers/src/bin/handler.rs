//! The custom-handler process the Azure Functions host starts.
//!
//! Loads the settings (exiting non-zero with the setting's name when one is missing or
//! malformed), listens on 127.0.0.1:`FUNCTIONS_CUSTOMHANDLER_PORT` at once (Redis is
//! connected on first use, the tokenizers are built in the background), and drains
//! in-flight invocations on SIGTERM or Ctrl-C.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use azure_identity::{ManagedIdentityCredential, ManagedIdentityCredentialOptions, UserAssignedId};
use stormgate_handlers::app::{AppState, app};
use stormgate_handlers::config::{OpenAiAuth as OpenAiAuthSetting, Settings, TierSettings};
use stormgate_handlers::fault_injection;
use stormgate_handlers::functions::summarize::SummarizeRuntime;
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::openai::{AzureOpenAiClient, OpenAiAuth, OpenAiConfig};
use stormgate_handlers::redis_connector::RedisConnector;
use stormgate_handlers::secrets::{KeyVaultSecrets, SecretSource};
use stormgate_handlers::system_clock::SystemClock;
use stormgate_handlers::telemetry;
use stormgate_shared::clock::Clock;
use stormgate_shared::job::Tier;
use stormgate_shared::summarize::{Deployment, SummarizeSettings};
use stormgate_shared::token_estimate::{self, Encoding};

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Plain stderr: telemetry may not be up, and the host shows stderr on start-up failures.
            eprintln!("stormgate handler cannot run: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let vars = app_settings();
    let settings = Settings::load(vars.clone(), open_key_vault).await?;
    telemetry::init(settings.log_format, settings.rust_log.as_deref())?;
    // Test builds only: a clock the fault suite moves, and its mechanism switches.
    let clock =
        fault_injection::install(&vars, Arc::new(SystemClock)).map_err(anyhow::Error::msg)?;

    let address = ("127.0.0.1", settings.port);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| {
            format!(
                "cannot listen on 127.0.0.1:{} (FUNCTIONS_CUSTOMHANDLER_PORT)",
                settings.port
            )
        })?;
    tracing::info!(
        port = settings.port,
        version = env!("CARGO_PKG_VERSION"),
        "stormgate handler listening"
    );

    warm_tokenizers(&settings);
    let store = LazyStore::new(Arc::new(RedisConnector::new(
        settings.redis.clone(),
        settings.azure_client_id.clone(),
    )));
    let state = AppState::new(settings.clone(), store, clock.clone());
    let runtime = summarize_runtime(&settings, &state, clock)?;
    let state = state.with_summarization(runtime);
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown_requested())
        .await?;
    tracing::info!("stormgate handler stopped");
    Ok(())
}

/// The tier functions' Azure OpenAI client and deployments. The runtime shares the
/// state's governor: one budget per deployment for dispatch and every retry alike.
/// Nothing here touches the network; tokens are fetched on the first call.
fn summarize_runtime(
    settings: &Settings,
    state: &AppState,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<SummarizeRuntime> {
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
                .context("cannot set up the managed identity for AZURE_OPENAI_AUTH")?;
            OpenAiAuth::Entra(credential)
        }
    };
    let config = OpenAiConfig {
        endpoint: settings.openai.endpoint.clone(),
        api_version: settings.openai.api_version.clone(),
        timeout: OPENAI_TIMEOUT,
    };
    let client = AzureOpenAiClient::new(config, auth, clock)
        .context("cannot set up the Azure OpenAI client (AZURE_OPENAI_ENDPOINT)")?;
    let deployment = |tier, t: &TierSettings| Deployment {
        tier,
        name: t.deployment.to_string(),
        model: t.model.clone(),
    };
    Ok(SummarizeRuntime {
        client: Arc::new(client),
        governor: state.governor.clone(),
        premium: deployment(Tier::Premium, &settings.premium),
        standard: deployment(Tier::Standard, &settings.standard),
        settings: SummarizeSettings::default(),
        // ServiceNow write-back needs its Redis outbox connected, which start-up must not
        // wait for; the tier functions store and serve summaries without it.
        work_notes: None,
        seed: std::process::id().into(),
    })
}

/// One chat completion, connection to last byte. Long enough for a slow answer of a few
/// hundred tokens; short enough that a hung call is retried well inside the lease.
const OPENAI_TIMEOUT: Duration = Duration::from_secs(60);

/// Builds the deployments' tokenizers off the request path: building one takes about a
/// second of CPU, which the first `classify` would otherwise pay. A failure only means
/// the first use builds (or fails) again, so it is logged, not fatal.
fn warm_tokenizers(settings: &Settings) {
    let mut encodings = vec![
        Encoding::for_model(&settings.premium.model),
        Encoding::for_model(&settings.standard.model),
    ];
    encodings.dedup();
    tokio::task::spawn_blocking(move || {
        for encoding in encodings {
            match token_estimate::warm(encoding) {
                Ok(()) => tracing::info!(?encoding, "tokenizer ready"),
                Err(error) => tracing::warn!(%error, "tokenizer could not be built in advance"),
            }
        }
    });
}

/// The process environment as the host set it; a variable that is not UTF-8 cannot be
/// one of ours and is skipped rather than aborting.
fn app_settings() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

fn open_key_vault(
    vault_url: &str,
    client_id: Option<&str>,
) -> Result<Arc<dyn SecretSource>, String> {
    Ok(Arc::new(KeyVaultSecrets::managed_identity(
        vault_url, client_id,
    )?))
}

/// Resolves when the host (SIGTERM) or a developer (Ctrl-C) asks the process to stop.
async fn shutdown_requested() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("ctrl-c received, draining"),
        () = terminate => tracing::info!("SIGTERM received, draining"),
    }
}
