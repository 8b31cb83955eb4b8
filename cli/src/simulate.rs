//! `stormgate simulate`: serves the Azure OpenAI simulator on 127.0.0.1 until Ctrl-C.

use std::path::PathBuf;

use clap::Args;
use stormgate_lab::simulator::{DeploymentConfig, SimulatorConfig};

use stormgate_lab::simulator_http::{load_config, spawn_simulator_on};

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 8089)]
    pub port: u16,
    /// Simulator configuration (TOML or JSON): seed, api_key, deployments with tpm,
    /// latency and faults. Without it: `premium` (gpt-4o, 150k TPM) and `standard`
    /// (gpt-4o-mini, 450k TPM), no faults.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// The simulator a bare `stormgate simulate` serves.
pub fn default_config() -> SimulatorConfig {
    SimulatorConfig::new(
        0,
        vec![
            DeploymentConfig::new("premium", "gpt-4o", 150_000),
            DeploymentConfig::new("standard", "gpt-4o-mini", 450_000),
        ],
    )
}

pub async fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let config = match &args.config {
        Some(path) => load_config(path)?,
        None => default_config(),
    };
    let handle = spawn_simulator_on(config.clone(), args.port).await?;
    println!("Azure OpenAI simulator listening on {}", handle.endpoint());
    for d in &config.deployments {
        println!(
            "  deployment {:<12} model {:<14} {:>9} TPM  faults: {}",
            d.name,
            d.model,
            d.tpm,
            serde_json::to_string(&d.faults)?
        );
    }
    println!(
        "  auth: header `api-key: {}` or any `Authorization: Bearer` token",
        config.api_key
    );
    tokio::signal::ctrl_c().await?;
    handle.shutdown().await;
    Ok(())
}
