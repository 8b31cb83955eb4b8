//! `stormgate local`: the real functions, end to end, on one machine (see
//! [`stormgate_lab::local`]). Prints a line per minute while the trace plays and, at the end,
//! the storm lab's table (and JSON, HTML) for the run, beside a virtual-time replay of
//! the same trace with `--compare`, and the run's verdict.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use stormgate_lab::replay::{Backend, PolicyName, PolicyRun, ReplayOptions, replay_trace};
use stormgate_lab::report::{Report, html, table};
use stormgate_lab::scenario::Scenario;
use stormgate_lab::trace::TraceEvent;
use stormgate_shared::metering::MeterReading;

use crate::lab_input::LabInput;

use stormgate_lab::functions_host::AppDefinition;
use stormgate_lab::local::processes::sibling_handler;
use stormgate_lab::local::time_model::TimeModel;
use stormgate_lab::local::{self, Ending, LocalOptions, OpenAiSource, RedisSource};

#[derive(Debug, Args)]
pub struct LocalArgs {
    /// The trace: the seed storm, a scenario file or a ServiceNow export, read as
    /// `stormgate replay` reads it.
    #[command(flatten)]
    pub input: LabInput,
    /// Seed of the trace: the same seed plays the same tickets as `stormgate replay`.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Play the trace N times faster than real time (the handler keeps real time:
    /// simulated quotas and the coalescing hold are scaled; docs/storm-lab.md).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// The handler binary (default: `handler` next to this executable).
    #[arg(long)]
    pub handler: Option<PathBuf>,
    /// Use this Redis (a scratch database) instead of starting a redis-server.
    #[arg(long)]
    pub redis: Option<String>,
    /// The redis-server to start (default: the one on PATH).
    #[arg(long)]
    pub redis_server: Option<PathBuf>,
    /// A real Azure OpenAI endpoint instead of the simulator; give its deployments and
    /// credentials as app settings (--set or --settings).
    #[arg(long)]
    pub openai_endpoint: Option<String>,
    /// An app setting of the handler, NAME=VALUE, over the run's own (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// A file of app settings, one NAME=VALUE a line (`#` starts a comment).
    #[arg(long)]
    pub settings: Option<PathBuf>,
    /// An app root (host.json beside function-defs/ or the function folders) to read
    /// instead of the definitions this build carries.
    #[arg(long)]
    pub app_root: Option<PathBuf>,
    /// Also replay the same trace on virtual time and print both side by side.
    #[arg(long)]
    pub compare: bool,
    /// Meter the simulated deployments by the strictest reading of Azure's documentation,
    /// as `stormgate replay --strict` (docs/storm-lab.md).
    #[arg(long)]
    pub strict: bool,
    /// Write the JSON report here (the shape of `stormgate replay --json`).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the HTML report here.
    #[arg(long, default_value = "local-report.html")]
    pub html: PathBuf,
    /// Write the verdict as JSON here.
    #[arg(long)]
    pub verdict: Option<PathBuf>,
    /// Write every ticket's track (arrival, first and LLM summary, waits), of the local
    /// run and of the replay beside it, as JSON here: for looking into a difference.
    #[arg(long)]
    pub tracks: Option<PathBuf>,
    /// Where the processes' logs go (default: a folder under the temporary folder).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seconds the work may take to drain after the last arrival.
    #[arg(long, default_value_t = 1800)]
    pub drain_limit: u64,
}

/// Settings from `--settings FILE` then `--set`, in that order.
fn settings(args: &LocalArgs) -> anyhow::Result<BTreeMap<String, String>> {
    let mut lines = Vec::new();
    if let Some(path) = &args.settings {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        lines.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned),
        );
    }
    lines.extend(args.set.iter().cloned());
    lines
        .iter()
        .map(|line| {
            let (k, v) = line
                .split_once('=')
                .with_context(|| format!("{line:?} is not NAME=VALUE"))?;
            Ok((k.trim().to_owned(), v.trim().to_owned()))
        })
        .collect()
}

/// The trace of the scenario, or of the export when one is given.
fn trace(args: &LocalArgs, scenario: &Scenario) -> anyhow::Result<Vec<TraceEvent>> {
    match args.input.history(scenario)? {
        None => Ok(scenario
            .plan(args.seed)?
            .into_iter()
            .map(TraceEvent::Planned)
            .collect()),
        Some(history) => {
            println!("{}", history.report.describe());
            Ok(history.events)
        }
    }
}

/// Resolves when the run is asked to stop: Ctrl-C (SIGINT) or SIGTERM. The handlers are
/// installed when this is called, before anything is started, so a signal that comes
/// during start-up stops the run once it is up instead of killing this process with its
/// children still running.
#[cfg(unix)]
fn stop_requested() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => println!("\nstopping (Ctrl-C): every process this run started is stopped"),
            _ = terminate.recv() => println!("\nstopping (SIGTERM): every process this run started is stopped"),
        }
    })
}

#[cfg(not(unix))]
fn stop_requested() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

/// Replays the stormgate policy on virtual time over the same trace, on a thread of its
/// own (the replay's scheduler runs one task at a time on its own runtime).
fn replay_alongside(
    scenario: &Scenario,
    trace: Vec<TraceEvent>,
    seed: u64,
    reading: MeterReading,
) -> anyhow::Result<PolicyRun> {
    let scenario = scenario.clone();
    std::thread::spawn(move || -> anyhow::Result<PolicyRun> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let options = ReplayOptions {
            seed,
            policies: vec![PolicyName::Stormgate],
            backend: Backend::Memory,
            reading,
            ..ReplayOptions::default()
        };
        let mut progress = |_: PolicyName, _: f64| {};
        let runs = runtime.block_on(replay_trace(&scenario, trace, &options, &mut progress))?;
        runs.into_iter()
            .next()
            .context("the replay produced no run")
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the replay thread panicked"))?
}

fn reading(args: &LocalArgs) -> MeterReading {
    if args.strict {
        MeterReading::Strict
    } else {
        MeterReading::Lenient
    }
}

pub async fn run(args: LocalArgs) -> anyhow::Result<()> {
    let stop = stop_requested()?;
    let time = TimeModel::new(args.speed)?;
    let scenario = args.input.scenario()?;
    let trace = trace(&args, &scenario)?;
    let app = match &args.app_root {
        Some(root) => AppDefinition::load(root)?,
        None => AppDefinition::built_in()?,
    };
    let redis = match &args.redis {
        Some(url) => RedisSource::Url(url.clone()),
        None => RedisSource::Start(local::redis_server_binary(args.redis_server.clone())?),
    };
    let openai = match &args.openai_endpoint {
        Some(url) => OpenAiSource::Endpoint(url.clone()),
        None => OpenAiSource::Simulator,
    };
    let handler = match &args.handler {
        Some(path) => path.clone(),
        None => sibling_handler()?,
    };
    let options = LocalOptions {
        scenario: scenario.clone(),
        trace: trace.clone(),
        seed: args.seed,
        time,
        handler,
        redis,
        openai,
        settings: settings(&args)?,
        app: Arc::new(app),
        reading: reading(&args),
        dir: args.dir.clone().unwrap_or_else(local::default_dir),
        drain_limit: Duration::from_secs(args.drain_limit),
    };
    println!("logs in {}", options.dir.display());
    let started = Instant::now();
    let outcome = local::run(options, stop).await?;
    match outcome.ending {
        Ending::Drained => println!("every job settled after {:.0} s", outcome.wall_seconds),
        Ending::DrainLimit => println!(
            "the drain limit ({} s after the last arrival) passed with work left",
            args.drain_limit
        ),
        Ending::Interrupted => println!("interrupted after {:.0} s", outcome.wall_seconds),
    }
    let mut runs = Vec::new();
    let mut names = Vec::new();
    if args.compare {
        runs.push(replay_alongside(
            &scenario,
            trace,
            args.seed,
            reading(&args),
        )?);
        names.push("replay");
    }
    runs.push(outcome.run);
    names.push("local");
    if let Some(path) = &args.tracks {
        let tracks: BTreeMap<&str, &PolicyRun> = names.iter().copied().zip(runs.iter()).collect();
        std::fs::write(path, serde_json::to_string(&tracks)?)?;
    }
    let mut report = Report::build(
        &outcome.scenario,
        args.seed,
        &runs,
        started.elapsed().as_secs_f64(),
    );
    for (policy, name) in report.policies.iter_mut().zip(names.iter().copied()) {
        policy.name = name.to_owned();
    }
    println!("{}", table(&report));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("JSON report: {}", path.display());
    }
    std::fs::write(&args.html, html(&report))?;
    println!("HTML report: {}", args.html.display());
    println!(
        "host: {}",
        serde_json::to_string(&outcome.counts).unwrap_or_default()
    );
    for line in outcome.verdict.lines() {
        println!("{line}");
    }
    if let Some(path) = &args.verdict {
        std::fs::write(path, serde_json::to_string_pretty(&outcome.verdict)?)?;
    }
    if outcome.ending == Ending::Interrupted {
        std::process::exit(130);
    }
    if !outcome.verdict.passed() {
        anyhow::bail!("the run's verdict failed (above)");
    }
    Ok(())
}
