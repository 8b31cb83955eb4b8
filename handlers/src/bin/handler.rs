//! The custom-handler process the Azure Functions host starts.
//!
//! Loads the settings (exiting non-zero with the setting's name when one is missing or
//! malformed), listens on 127.0.0.1:`FUNCTIONS_CUSTOMHANDLER_PORT` at once (Redis is
//! connected on first use), and drains in-flight invocations on SIGTERM or Ctrl-C.
//!
//! No exact tokenizer is built here: the governor charges calls by character counts
//! (`metering::request_arrival_charge`), and an exact BPE would hold some 40 MB resident
//! for nothing.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use stormgate_handlers::app::app;
use stormgate_handlers::config::Settings;
use stormgate_handlers::fault_injection;
use stormgate_handlers::secrets::{KeyVaultSecrets, SecretSource};
use stormgate_handlers::state::AppState;
use stormgate_handlers::system_clock::SystemClock;
use stormgate_handlers::telemetry;

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

    let write_back = settings.servicenow.is_some();
    // Nothing here touches the network: the store, its ledger and the clients connect
    // on first use.
    let state = AppState::from_settings(settings, clock, std::process::id().into())?;
    if write_back {
        tracing::info!("ServiceNow work-note write-back enabled");
    }
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown_requested())
        .await?;
    tracing::info!("stormgate handler stopped");
    Ok(())
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
