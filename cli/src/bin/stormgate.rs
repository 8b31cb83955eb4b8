//! The `stormgate` command line: train, simulate, load test, replay, plan, local, dead letters,
//! soak, the terminal console (`status`) and the operators' controls (`control`).
//!
//! Each subcommand lives in its own module of `stormgate_cli`.

use clap::{Parser, Subcommand};
use stormgate_cli as cli;

/// The storm lab (`replay`, `plan`) builds and drops millions of ticket snapshots and
/// summaries; mimalloc spends about a fifth less CPU on that than the system allocator
/// (measured on `stormgate plan`, see docs/storm-lab.md). The handler keeps the system's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "stormgate",
    version,
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
    /// Serve the Azure OpenAI simulator on 127.0.0.1.
    Simulate(cli::simulate::SimulateArgs),
    /// Load-test the release `handler` on loopback: throughput, latency, RSS, start-up.
    Loadtest(cli::loadtest::LoadtestArgs),
    /// Replay a storm through the naive design and stormgate, on virtual time.
    Replay(cli::replay::ReplayArgs),
    /// Search the premium and standard TPM quotas for the cheapest pair that meets the SLOs.
    Plan(cli::plan::PlanArgs),
    /// Run the real functions end to end on this machine: handler, Redis, the Azure
    /// OpenAI simulator and the Functions host emulation, playing a storm in real time.
    Local(cli::local::LocalArgs),
    /// List the events `classify` dead-lettered, or re-submit them through ingest.
    DeadLetters(cli::dead_letters::DeadLettersArgs),
    /// Weeks of tickets on virtual time into an empty Redis: the memory retention holds it to.
    Soak(cli::soak::SoakArgs),
    /// The storm console in the terminal: verdict, queues, deployments, lag, controls; live.
    Status(cli::status::StatusArgs),
    /// Steer the pipeline: pause a tier, force extractive, mark a deployment down or up,
    /// override its budget for a while, re-summarize a ticket (audited).
    Control(cli::control::ControlArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Train(args) => cli::train::run(&args),
        Command::Simulate(args) => cli::simulate::run(args).await,
        Command::Loadtest(args) => cli::loadtest::run(args).await,
        Command::Local(args) => cli::local::run(args).await,
        Command::DeadLetters(args) => cli::dead_letters::run(args).await,
        Command::Soak(args) => cli::soak::run_soak(args).await,
        Command::Status(args) => cli::status::run(args).await,
        Command::Control(args) => cli::control::run(args).await,
        // The replay runs its own single-threaded runtime on virtual time.
        Command::Replay(args) => std::thread::spawn(move || cli::replay::run(args))
            .join()
            .map_err(|_| anyhow::anyhow!("the replay thread panicked"))?,
        // Its points run on threads of their own, each with its own runtime.
        Command::Plan(args) => std::thread::spawn(move || cli::plan::run(args))
            .join()
            .map_err(|_| anyhow::anyhow!("the plan thread panicked"))?,
    }
}
