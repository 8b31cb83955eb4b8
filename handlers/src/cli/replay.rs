//! `stormgate replay`: the storm lab. Replays a scenario (the built-in seed storm, a
//! scenario file, or a ServiceNow incident history) through the naive design and
//! through stormgate on virtual time, and writes the comparison.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use clap::Args;
use stormgate_shared::lab::replay::{
    Backend, PolicyName, PolicyRun, ReplayOptions, replay, replay_trace,
};
use stormgate_shared::lab::report::{Report, html, table};
use stormgate_shared::lab::scenario::Scenario;
use stormgate_shared::lab::trace::{TraceEvent, read_history};
use stormgate_shared::metering::MeterReading;

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
    /// Meter the simulated deployments by the strictest reading of Azure's documentation: the
    /// tokenizer's count when it exceeds characters / 4, requests over 1 s, 10 s and the
    /// sliding minute (docs/storm-lab.md).
    #[arg(long)]
    pub strict: bool,
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
        reading: if args.strict {
            MeterReading::Strict
        } else {
            MeterReading::Lenient
        },
        ..ReplayOptions::default()
    };
    let trace = match &args.history {
        None => None,
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
            Some(trace)
        }
    };
    let started = Instant::now();
    let progress = ProgressLine::new(&options.policies);
    // One thread per policy, each paused in virtual time on its own single-threaded
    // runtime: every policy's run is deterministic by construction and shares nothing
    // with the others, so running them side by side changes no result, only the wall time.
    let runs = std::thread::scope(|scope| {
        let handles: Vec<_> = options
            .policies
            .iter()
            .map(|&policy| {
                let options = ReplayOptions {
                    policies: vec![policy],
                    ..options.clone()
                };
                let (scenario, trace, progress) = (&scenario, trace.clone(), &progress);
                scope.spawn(move || run_one(scenario, trace, &options, progress))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a policy's replay thread panicked"))?
            })
            .collect::<anyhow::Result<Vec<Vec<_>>>>()
    })?
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    progress.finish();
    let report = Report::build(&scenario, args.seed, &runs, started.elapsed().as_secs_f64());
    println!("{}", table(&report));
    if options.reading == MeterReading::Strict {
        for run in &runs {
            for (name, d) in &run.deployments {
                println!(
                    "strict metering, {} on {name}: {} of {} admitted requests charged more than \
                     the governor charged them (at most {:.3}x); the tokenizer counted prompts at \
                     most {:.3}x characters / 4",
                    run.policy.as_str(),
                    d.undercharged,
                    d.calls - d.throttled,
                    d.largest_charge_permille as f64 / 1_000.0,
                    d.largest_tokenized_permille as f64 / 1_000.0,
                );
            }
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("JSON report: {}", path.display());
    }
    std::fs::write(&args.html, html(&report))?;
    println!("HTML report: {}", args.html.display());
    Ok(())
}

/// Replays one policy on its own single-threaded runtime.
fn run_one(
    scenario: &Scenario,
    trace: Option<Vec<TraceEvent>>,
    options: &ReplayOptions,
    progress: &ProgressLine,
) -> anyhow::Result<Vec<PolicyRun>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut report = |policy: PolicyName, done: f64| progress.update(policy, done);
    let runs = match trace {
        None => runtime.block_on(replay(scenario, options, &mut report))?,
        Some(trace) => runtime.block_on(replay_trace(scenario, trace, options, &mut report))?,
    };
    Ok(runs)
}

/// One terminal line with a bar per policy, redrawn as any of them moves on.
struct ProgressLine {
    done: Mutex<Vec<(PolicyName, u32)>>,
}

impl ProgressLine {
    const WIDTH: u32 = 30;

    fn new(policies: &[PolicyName]) -> Self {
        ProgressLine {
            done: Mutex::new(policies.iter().map(|&p| (p, 0)).collect()),
        }
    }

    fn update(&self, policy: PolicyName, done: f64) {
        let percent = (done.clamp(0.0, 1.0) * 100.0).round() as u32;
        let mut all = self.done.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = all.iter_mut().find(|(p, _)| *p == policy) else {
            return;
        };
        if entry.1 == percent {
            return;
        }
        entry.1 = percent;
        let line: Vec<String> = all
            .iter()
            .map(|(p, percent)| {
                let filled = (percent * Self::WIDTH / 100).min(Self::WIDTH) as usize;
                format!(
                    "{:<10} [{}{}] {:>3}%",
                    p.as_str(),
                    "#".repeat(filled),
                    " ".repeat(Self::WIDTH as usize - filled),
                    percent
                )
            })
            .collect();
        eprint!("\r{}", line.join("  "));
        let _ = std::io::stderr().flush();
    }

    fn finish(&self) {
        eprintln!();
    }
}
