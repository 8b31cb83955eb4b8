//! The `stormgate` command line: train, simulate, replay, dead letters.
//!
//! Each subcommand lives in its own module under `stormgate_handlers::cli`.

use clap::{Parser, Subcommand};
use stormgate_handlers::cli;

#[derive(Debug, Parser)]
#[command(name = "stormgate", version, about = "stormgate's command line")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the Azure OpenAI simulator on 127.0.0.1.
    Simulate(cli::simulate::SimulateArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Simulate(args) => cli::simulate::run(args).await,
    }
}
