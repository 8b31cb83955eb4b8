//! `stormgate plan`: capacity planning in tokens. Replays a scenario or a ServiceNow
//! export through stormgate under a grid of premium and standard TPM quotas (and
//! governor headrooms), and names the cheapest pair that meets the SLOs, with the
//! frontier of cost against P1/P2 latency and long-tail coverage
//! (`stormgate_lab::plan`).
//!
//! The trace's ingest is computed once, on every thread; then the points run side by
//! side, each on its own single-threaded runtime in virtual time.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clap::Args;
use stormgate_lab::plan::{PlanGrid, PlanPoint, PlanReport, plan_html, plan_table, run_point};
use stormgate_lab::replay::{PreparedTrace, ReplayOptions};
use stormgate_lab::report::Report;
use stormgate_lab::trace::TraceEvent;

use crate::lab_input::LabInput;
use crate::lab_progress::Bars;

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub input: LabInput,
    /// Seed of the run: same seed, same results.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Quotas per deployment in the default grid, spaced evenly on a log scale.
    #[arg(long, default_value_t = 5)]
    pub steps: usize,
    /// The default grid's smallest quota, as a multiple of the scenario's.
    #[arg(long, default_value_t = 0.5)]
    pub from: f64,
    /// The default grid's largest quota, as a multiple of the scenario's.
    #[arg(long, default_value_t = 2.0)]
    pub to: f64,
    /// Premium TPM quotas to try, comma separated (instead of the default grid's).
    #[arg(long, value_delimiter = ',')]
    pub premium_tpm: Vec<u64>,
    /// Standard TPM quotas to try, comma separated (instead of the default grid's).
    #[arg(long, value_delimiter = ',')]
    pub standard_tpm: Vec<u64>,
    /// Governor headrooms to try (fractions of each quota left unused), comma separated;
    /// default: the product's.
    #[arg(long, value_delimiter = ',')]
    pub headroom: Vec<f64>,
    /// Points replayed at once (each on its own thread).
    #[arg(long, default_value_t = default_threads())]
    pub threads: usize,
    /// Write the JSON plan here ("-": on stdout, instead of the table).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the HTML plan here.
    #[arg(long, default_value = "plan.html")]
    pub html: PathBuf,
}

fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let scenario = args.input.scenario()?;
    let mut grid = PlanGrid::around(&scenario, args.steps, args.from, args.to);
    if !args.premium_tpm.is_empty() {
        grid.premium_tpm = args.premium_tpm.clone();
    }
    if !args.standard_tpm.is_empty() {
        grid.standard_tpm = args.standard_tpm.clone();
    }
    if !args.headroom.is_empty() {
        grid.headroom = args.headroom.clone();
    }
    for h in &grid.headroom {
        stormgate_shared::headroom::Headroom::new(*h)?;
    }
    if grid.premium_tpm.contains(&0) || grid.standard_tpm.contains(&0) {
        anyhow::bail!("a TPM quota of 0 admits nothing: give quotas of at least 1");
    }
    let threads = args.threads.max(1);
    let options = ReplayOptions {
        seed: args.seed,
        ..ReplayOptions::default()
    };
    let (events, history): (Vec<TraceEvent>, _) = match args.input.history(&scenario)? {
        Some(h) => {
            eprintln!("{}", h.report.describe());
            (h.events, Some(h.report))
        }
        None => (
            scenario
                .plan(args.seed)?
                .into_iter()
                .map(TraceEvent::Planned)
                .collect(),
            None,
        ),
    };
    let events_count = events.len();
    let trace = Arc::new(PreparedTrace::prepare(events, args.seed, threads)?);
    let prepare_seconds = started.elapsed().as_secs_f64();
    let points = grid.points();
    eprintln!(
        "{} events ingested once in {prepare_seconds:.1} s; replaying {} points on {threads} threads",
        events_count,
        points.len()
    );
    let bars = Bars::new(
        &["plan".to_owned()],
        points.len() as u64,
        args.json.is_some(),
    );
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let mut results: Vec<(usize, PlanPoint)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads.min(points.len().max(1)))
            .map(|_| {
                let (scenario, trace, options, points, next, done, bars) =
                    (&scenario, &trace, &options, &points, &next, &done, &bars);
                scope.spawn(move || -> anyhow::Result<Vec<(usize, PlanPoint)>> {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(&quotas) = points.get(i) else {
                            break;
                        };
                        let point_started = Instant::now();
                        let (mut point, _) = runtime.block_on(run_point(
                            scenario,
                            trace.clone(),
                            quotas,
                            options,
                        ))?;
                        point.wall_seconds = point_started.elapsed().as_secs_f64();
                        let n = done.fetch_add(1, Ordering::SeqCst) + 1;
                        bars.set(0, n as u64);
                        bars.message(
                            0,
                            format!(
                                "{}k/{}k TPM: {}",
                                quotas.premium_tpm / 1000,
                                quotas.standard_tpm / 1000,
                                if point.meets_slos { "meets" } else { "misses" }
                            ),
                        );
                        mine.push((i, point));
                    }
                    Ok(mine)
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in handles {
            all.extend(
                h.join()
                    .map_err(|_| anyhow::anyhow!("a plan thread panicked"))??,
            );
        }
        Ok::<_, anyhow::Error>(all)
    })?;
    bars.finish();
    results.sort_by_key(|r| r.0);
    let mut info = Report::build(&scenario, args.seed, &[], 0.0).scenario;
    if let Some(h) = history {
        info.minutes = h.replay_minutes.ceil() as u64;
        info.history = Some(h);
    }
    let mut plan = PlanReport::new(
        info,
        grid,
        results.into_iter().map(|(_, p)| p).collect(),
        threads,
    );
    plan.prepare_seconds = prepare_seconds;
    plan.wall_seconds = started.elapsed().as_secs_f64();
    let to_stdout = args.json.as_deref() == Some(std::path::Path::new("-"));
    if !to_stdout {
        println!("{}", plan_table(&plan));
    }
    match &args.json {
        Some(_) if to_stdout => println!("{}", serde_json::to_string_pretty(&plan)?),
        Some(path) => {
            std::fs::write(path, serde_json::to_string_pretty(&plan)?)?;
            println!("JSON plan: {}", path.display());
        }
        None => {}
    }
    std::fs::write(&args.html, plan_html(&plan))?;
    if to_stdout {
        eprintln!("HTML plan: {}", args.html.display());
    } else {
        println!("HTML plan: {}", args.html.display());
    }
    Ok(())
}
