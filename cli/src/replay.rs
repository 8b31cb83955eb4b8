//! `stormgate replay`: the storm lab. Replays a scenario (the built-in seed storm, a
//! scenario file, or a ServiceNow incident export) through the naive design and
//! through stormgate on virtual time, and writes the comparison.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use stormgate_lab::replay::{
    Backend, PolicyName, PolicyRun, PreparedTrace, ReplayOptions, replay, replay_prepared,
};
use stormgate_lab::report::{Report, html, table};
use stormgate_lab::scenario::Scenario;

use crate::lab_input::LabInput;
use crate::lab_progress::Bars;
use stormgate_shared::metering::MeterReading;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub input: LabInput,
    /// Seed of the run: same seed, same results.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Policies to compare, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "naive,stormgate")]
    pub policies: Vec<PolicyName>,
    /// Keep stormgate's state in this Redis (a scratch database) instead of memory.
    #[arg(long)]
    pub redis: Option<String>,
    /// Write the JSON report here ("-": on stdout, instead of the table).
    #[arg(long)]
    pub json: Option<PathBuf>,
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
    let scenario = args.input.scenario()?;
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
    let to_stdout = args.json.as_deref() == Some(std::path::Path::new("-"));
    let (trace, history) = match args.input.history(&scenario)? {
        Some(h) => {
            eprintln!("{}", h.report.describe());
            (
                Some(std::sync::Arc::new(PreparedTrace::lazy(h.events))),
                Some(h.report),
            )
        }
        None => (None, None),
    };
    let started = Instant::now();
    let names: Vec<String> = options
        .policies
        .iter()
        .map(|p| p.as_str().to_owned())
        .collect();
    let bars = Bars::new(&names, 1000, args.json.is_some());
    // One thread per policy, each paused in virtual time on its own single-threaded
    // runtime: every policy's run is deterministic by construction and shares nothing
    // with the others, so running them side by side changes no result, only the wall time.
    let runs = std::thread::scope(|scope| {
        let handles: Vec<_> = options
            .policies
            .iter()
            .enumerate()
            .map(|(index, &policy)| {
                let options = ReplayOptions {
                    policies: vec![policy],
                    ..options.clone()
                };
                let (scenario, trace, bars) = (&scenario, trace.clone(), &bars);
                scope.spawn(move || run_one(scenario, trace, &options, bars, index))
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
    bars.finish();
    let mut report = Report::build(&scenario, args.seed, &runs, started.elapsed().as_secs_f64());
    if let Some(h) = history {
        report = report.with_history(h);
    }
    if !to_stdout {
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
    }
    match &args.json {
        Some(_) if to_stdout => println!("{}", serde_json::to_string_pretty(&report)?),
        Some(path) => {
            std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
            println!("JSON report: {}", path.display());
        }
        None => {}
    }
    std::fs::write(&args.html, html(&report))?;
    if to_stdout {
        eprintln!("HTML report: {}", args.html.display());
    } else {
        println!("HTML report: {}", args.html.display());
    }
    Ok(())
}

/// Replays one policy on its own single-threaded runtime.
fn run_one(
    scenario: &Scenario,
    trace: Option<std::sync::Arc<PreparedTrace>>,
    options: &ReplayOptions,
    bars: &Bars,
    index: usize,
) -> anyhow::Result<Vec<PolicyRun>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut report =
        |_: PolicyName, done: f64| bars.set(index, (done.clamp(0.0, 1.0) * 1000.0) as u64);
    let runs = match trace {
        None => runtime.block_on(replay(scenario, options, &mut report))?,
        Some(trace) => runtime.block_on(replay_prepared(scenario, trace, options, &mut report))?,
    };
    Ok(runs)
}
