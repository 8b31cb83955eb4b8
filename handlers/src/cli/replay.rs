//! `stormgate replay`: the storm lab. Replays a scenario (the built-in seed storm, a
//! scenario file, or a ServiceNow incident history) through the naive design and
//! through stormgate on virtual time, and writes the comparison.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use stormgate_shared::lab::replay::{Backend, PolicyName, ReplayOptions, replay, replay_trace};
use stormgate_shared::lab::report::{Report, html, table};
use stormgate_shared::lab::scenario::Scenario;
use stormgate_shared::lab::trace::read_history;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Scenario file (TOML or JSON); default: the built-in seed storm.
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Seed of the run: same seed, same results.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Policies to compare, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "naive,stormgate")]
    pub policies: Vec<PolicyName>,
    /// Keep stormgate's state in this Redis (a scratch database) instead of memory.
    #[arg(long)]
    pub redis: Option<String>,
    /// Only the first N minutes of the scenario.
    #[arg(long)]
    pub minutes: Option<u64>,
    /// Write the JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Replay a ServiceNow incident-export CSV (UCI incident event log columns) instead
    /// of the scenario's generated tickets; the scenario still gives quotas and prices.
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// How many times faster than recorded the history is replayed.
    #[arg(long, default_value_t = 60.0)]
    pub time_scale: f64,
    /// Write the HTML report here.
    #[arg(long, default_value = "report.html")]
    pub html: PathBuf,
}

pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let mut scenario = match &args.scenario {
        Some(path) => Scenario::from_file(path)?,
        None => Scenario::seed_storm()?,
    };
    if let Some(m) = args.minutes {
        scenario = scenario.truncated(m);
    }
    let options = ReplayOptions {
        seed: args.seed,
        policies: args.policies.clone(),
        backend: args
            .redis
            .clone()
            .map(Backend::Redis)
            .unwrap_or(Backend::Memory),
        ..ReplayOptions::default()
    };
    // One thread, paused in virtual time: the replay is deterministic by construction.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let started = Instant::now();
    let mut progress = |policy: PolicyName, done: f64| {
        let width = 40;
        let filled = (done * width as f64).round() as usize;
        eprint!(
            "\r{:<10} [{}{}] {:>3.0}%",
            policy.as_str(),
            "#".repeat(filled.min(width)),
            " ".repeat(width - filled.min(width)),
            done * 100.0
        );
        let _ = std::io::stderr().flush();
        if done >= 1.0 {
            eprintln!();
        }
    };
    let runs = match &args.history {
        None => runtime.block_on(replay(&scenario, &options, &mut progress))?,
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
            let (trace, skipped) = read_history(file, scenario.start_millis()?, args.time_scale)?;
            eprintln!(
                "history {}: {} events ({} rows skipped), time scale {}x",
                path.display(),
                trace.len(),
                skipped,
                args.time_scale
            );
            runtime.block_on(replay_trace(&scenario, trace, &options, &mut progress))?
        }
    };
    let report = Report::build(&scenario, args.seed, &runs, started.elapsed().as_secs_f64());
    println!("{}", table(&report));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("JSON report: {}", path.display());
    }
    std::fs::write(&args.html, html(&report))?;
    println!("HTML report: {}", args.html.display());
    Ok(())
}
