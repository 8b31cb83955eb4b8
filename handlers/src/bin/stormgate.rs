//! The `stormgate` command line: train, simulate, replay, dead letters.

use clap::{Parser, Subcommand};
use stormgate_handlers::cli;

#[derive(Debug, Parser)]
#[command(
    name = "stormgate",
    about = "stormgate operator and development commands"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Fit the severity classifier from labelled history; writes a model and an evaluation report.
    Train(cli::train::TrainArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Train(args) => cli::train::run(&args),
    }
}
