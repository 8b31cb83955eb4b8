//! `stormgate loadtest`: the real `handler` process under Kafka-batch load on loopback.
//!
//! Starts a throwaway `redis-server` and the release `handler` next to this executable,
//! then measures, per scale (1×, 6×, 15× ticket volume *and* log size by default):
//! classify+enqueue throughput at saturation (closed loop) per core of handler CPU,
//! `/classify` latency at fixed fractions of that rate (open loop), the handler's peak
//! RSS, and Redis memory per queued ticket. Before that it times handler start-up to the
//! first `GET /` answer, and runs `redis-benchmark` SET on the same server in the same
//! run as the physical bound for a pipeline that must write to Redis.
//!
//! Every phase is bounded by a request count; nothing leaves 127.0.0.1.

pub mod batches;
mod processes;
mod traffic;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;

use batches::BatchTemplate;
use processes::{HandlerProcess, RedisProcess, cpu_time, load_average, redis_info, status_kb};
use traffic::{RunStats, Target, closed_loop, open_loop};

#[derive(Debug, clap::Args)]
pub struct LoadtestArgs {
    /// The handler binary (default: `handler` next to this executable).
    #[arg(long)]
    pub handler: Option<PathBuf>,
    #[arg(long, default_value = "redis-server")]
    pub redis_server: PathBuf,
    /// `redis-benchmark` for the side-by-side SET bound; "none" skips it.
    #[arg(long, default_value = "redis-benchmark")]
    pub redis_benchmark: String,
    /// Multipliers of ticket volume and log size (8–20 KB logs at 1×).
    #[arg(long, value_delimiter = ',', default_value = "1,6,15")]
    pub scales: Vec<u32>,
    /// Events per Kafka batch (the host's batch size).
    #[arg(long, default_value_t = 100)]
    pub batch_events: usize,
    /// Batches posted at saturation at 1× (multiplied by the scale).
    #[arg(long, default_value_t = 40)]
    pub batches: u64,
    /// Concurrent requests of the closed loop.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Fractions of the saturation rate the open loop is run at.
    #[arg(long, value_delimiter = ',', default_value = "0.25,0.5,0.75")]
    pub rate_fractions: Vec<f64>,
    /// Seconds each open-loop rate runs (its request count is rate × seconds, at least 20).
    #[arg(long, default_value_t = 6.0)]
    pub rate_seconds: f64,
    /// Handler starts timed to the first `GET /` answer (the median is reported).
    #[arg(long, default_value_t = 11)]
    pub starts: usize,
    /// The handler's RUST_LOG (production logs every invocation at info).
    #[arg(long, default_value = "info")]
    pub rust_log: String,
    /// Also write the figures as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct Report {
    cpu_model: String,
    cores: usize,
    load_average_start: String,
    load_average_end: String,
    startup_ms: Vec<f64>,
    startup_median_ms: f64,
    redis_set_per_s: Vec<(String, f64)>,
    scales: Vec<ScaleReport>,
}

#[derive(Debug, Serialize)]
struct ScaleReport {
    scale: u32,
    load_average: String,
    tickets: u64,
    event_bytes_avg: usize,
    body_bytes: usize,
    saturation: RunStats,
    tickets_per_s: f64,
    handler_cpu_s: f64,
    redis_cpu_s: f64,
    loadgen_cpu_s: f64,
    /// Tickets per second of handler CPU: throughput per core.
    tickets_per_handler_core_s: f64,
    handler_cpu_us_per_ticket: f64,
    redis_cpu_us_per_ticket: f64,
    handler_cpu_ns_per_event_byte: f64,
    open_loop: Vec<(f64, f64, RunStats)>,
    handler_peak_rss_kb: u64,
    redis_used_memory_delta: f64,
    redis_tickets_stored: u64,
    redis_bytes_per_ticket: f64,
}

pub async fn run(args: LoadtestArgs) -> anyhow::Result<()> {
    let handler = match &args.handler {
        Some(path) => path.clone(),
        None => processes::sibling_handler()?,
    };
    let (cpu_model, cores, load_average_start) = processes::machine();
    println!("machine: {cpu_model}, {cores} cores, load average {load_average_start}");
    let redis = RedisProcess::start(&args.redis_server).await?;

    let startup_ms = time_startups(&args, &handler, &redis).await?;
    let startup_median_ms = median(&startup_ms);
    println!(
        "start-up to first GET / answer: median {startup_median_ms:.1} ms over {} starts (min {:.1}, max {:.1})",
        startup_ms.len(),
        startup_ms.iter().copied().fold(f64::INFINITY, f64::min),
        startup_ms.iter().copied().fold(0.0, f64::max),
    );

    let redis_set_per_s = redis_set_bound(&args, &redis).await;
    for (label, per_s) in &redis_set_per_s {
        println!("redis-benchmark {label}: {per_s:.0} SET/s");
    }

    let mut scales = Vec::new();
    for &scale in &args.scales {
        let report = run_scale(&args, &handler, &redis, scale).await?;
        print_scale(&report, &redis_set_per_s);
        scales.push(report);
    }
    let report = Report {
        cpu_model,
        cores,
        load_average_start,
        load_average_end: load_average(),
        startup_ms,
        startup_median_ms,
        redis_set_per_s,
        scales,
    };
    println!("load average at the end: {}", report.load_average_end);
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

async fn time_startups(
    args: &LoadtestArgs,
    handler: &std::path::Path,
    redis: &RedisProcess,
) -> anyhow::Result<Vec<f64>> {
    let mut times = Vec::with_capacity(args.starts);
    for _ in 0..args.starts {
        let since = Instant::now();
        let mut process = HandlerProcess::spawn(handler, &redis.url(), &args.rust_log)?;
        let ready = process.wait_ready(since).await?;
        times.push(ready.as_secs_f64() * 1e3);
        process.stop().await;
    }
    Ok(times)
}

/// `redis-benchmark -t set -P 16` against the same server: 3-byte and 4 KB values.
async fn redis_set_bound(args: &LoadtestArgs, redis: &RedisProcess) -> Vec<(String, f64)> {
    if args.redis_benchmark == "none" {
        return Vec::new();
    }
    let mut results = Vec::new();
    for value_bytes in ["3", "4096"] {
        let output = tokio::process::Command::new(&args.redis_benchmark)
            .args(["-h", "127.0.0.1", "-p", &redis.port.to_string()])
            .args([
                "-t",
                "set",
                "-P",
                "16",
                "-n",
                "1000000",
                "-q",
                "-d",
                value_bytes,
            ])
            .output()
            .await;
        let per_s = output.ok().and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            // "SET: 123456.79 requests per second, p50=..." (the last \r-separated report)
            let line = text.rsplit('\r').next()?.trim().to_owned();
            line.strip_prefix("SET:")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        });
        if let Some(per_s) = per_s {
            results.push((format!("-t set -P 16 -n 1000000 -d {value_bytes}"), per_s));
        }
    }
    results
}

async fn run_scale(
    args: &LoadtestArgs,
    handler: &std::path::Path,
    redis: &RedisProcess,
    scale: u32,
) -> anyhow::Result<ScaleReport> {
    let k = scale as usize;
    let template = BatchTemplate::new(
        args.batch_events,
        8 * 1024 * k..=20 * 1024 * k,
        u64::from(scale),
    )?;
    let (event_bytes, body_bytes) = (template.event_bytes(), template.body_bytes());
    let mut admin = redis.connection().await?;
    redis::cmd("FLUSHALL").query_async::<()>(&mut admin).await?;

    let since = Instant::now();
    let mut process = HandlerProcess::spawn(handler, &redis.url(), &args.rust_log)?;
    process.wait_ready(since).await?;
    let pid = process.pid().context("handler has no pid")?;
    let target = Target::new(process.port, template)?;

    // Connects the store, loads the scripts and the classifier.
    let warm = closed_loop(&target, 2, 1).await;
    if let Some(e) = &warm.first_error {
        anyhow::bail!("warm-up failed: {e}");
    }
    let memory_before = redis_info(&mut admin, "memory", "used_memory").await?;
    let redis_pid = redis.pid().context("redis-server has no pid")?;
    let cpu = || {
        (
            cpu_time(pid).unwrap_or_default(),
            cpu_time(redis_pid).unwrap_or_default(),
            cpu_time(std::process::id()).unwrap_or_default(),
        )
    };
    let load = load_average();
    let before = cpu();
    let saturation = closed_loop(&target, args.batches * u64::from(scale), args.concurrency).await;
    let after = cpu();
    if let Some(e) = &saturation.first_error {
        anyhow::bail!("saturation run failed: {e}");
    }
    let handler_cpu = (after.0 - before.0).as_secs_f64();
    let redis_cpu = (after.1 - before.1).as_secs_f64();
    let loadgen_cpu = (after.2 - before.2).as_secs_f64();
    let tickets = saturation.tickets_accepted;
    let batch_rate = saturation.requests_per_s();

    let mut open = Vec::new();
    for &fraction in &args.rate_fractions {
        let per_s = batch_rate * fraction;
        let count = ((per_s * args.rate_seconds).ceil() as u64).max(20);
        let stats = open_loop(&target, per_s, count, 64).await;
        open.push((fraction, per_s, stats));
    }
    let peak_rss = status_kb(pid, "VmHWM").unwrap_or(0);
    let memory_after = redis_info(&mut admin, "memory", "used_memory").await?;
    let stored =
        saturation.tickets_accepted + open.iter().map(|(.., s)| s.tickets_accepted).sum::<u64>();
    process.stop().await;

    let per_ticket = |cpu_s: f64| cpu_s * 1e6 / tickets.max(1) as f64;
    Ok(ScaleReport {
        scale,
        load_average: load,
        tickets,
        event_bytes_avg: event_bytes / args.batch_events.max(1),
        body_bytes,
        tickets_per_s: saturation.tickets_per_s(),
        handler_cpu_s: handler_cpu,
        redis_cpu_s: redis_cpu,
        loadgen_cpu_s: loadgen_cpu,
        tickets_per_handler_core_s: tickets as f64 / handler_cpu.max(f64::EPSILON),
        handler_cpu_us_per_ticket: per_ticket(handler_cpu),
        redis_cpu_us_per_ticket: per_ticket(redis_cpu),
        handler_cpu_ns_per_event_byte: handler_cpu * 1e9
            / (tickets.max(1) as f64 * (event_bytes / args.batch_events.max(1)) as f64),
        saturation,
        open_loop: open,
        handler_peak_rss_kb: peak_rss,
        redis_used_memory_delta: memory_after - memory_before,
        redis_tickets_stored: stored,
        redis_bytes_per_ticket: (memory_after - memory_before) / stored.max(1) as f64,
    })
}

fn print_scale(r: &ScaleReport, redis_set: &[(String, f64)]) {
    let s = &r.saturation;
    println!(
        "\nscale {}×: {} tickets, events {:.1} KB avg, batch body {:.2} MB, load average {}",
        r.scale,
        r.tickets,
        r.event_bytes_avg as f64 / 1024.0,
        r.body_bytes as f64 / 1e6,
        r.load_average
    );
    println!(
        "  saturation: {:.0} tickets/s wall ({} requests, {} failed, {:.2} s, p50 {:.1} ms, p99 {:.1} ms)",
        r.tickets_per_s, s.requests, s.failed, s.wall_s, s.p50_ms, s.p99_ms
    );
    println!(
        "  CPU: handler {:.2} s, redis {:.2} s, load generator {:.2} s → {:.0} tickets/s per handler core; \
         {:.0} µs handler + {:.0} µs redis per ticket; {:.2} ns handler per event byte",
        r.handler_cpu_s,
        r.redis_cpu_s,
        r.loadgen_cpu_s,
        r.tickets_per_handler_core_s,
        r.handler_cpu_us_per_ticket,
        r.redis_cpu_us_per_ticket,
        r.handler_cpu_ns_per_event_byte
    );
    for (label, per_s) in redis_set {
        println!(
            "  ratio to redis-benchmark {label}: {:.4} (tickets/s ÷ SET/s)",
            r.tickets_per_s / per_s
        );
    }
    for (fraction, per_s, o) in &r.open_loop {
        println!(
            "  open loop at {:.0}% ({per_s:.2} batches/s): {} requests, {} failed, {} shed; \
             p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            fraction * 100.0,
            o.requests,
            o.failed,
            o.shed,
            o.p50_ms,
            o.p99_ms,
            o.max_ms
        );
    }
    println!(
        "  handler peak RSS (VmHWM): {:.1} MB; redis: {:.0} bytes per stored ticket ({} tickets, {:.1} MB)",
        r.handler_peak_rss_kb as f64 / 1024.0,
        r.redis_bytes_per_ticket,
        r.redis_tickets_stored,
        r.redis_used_memory_delta / 1e6
    );
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}
