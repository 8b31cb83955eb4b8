//! `stormgate local`: the deployed functions working together on one machine, without
//! Azure. It starts a throwaway `redis-server` (or uses a given Redis), the product's
//! Azure OpenAI simulator (or a given endpoint) behind a metering proxy, the `handler`
//! process with its app settings, and the Functions host emulation
//! ([`crate::functions_host::runtime`]) built from `function-defs/` and `host.json`; it
//! then produces a storm lab trace (a scenario's or a history's) to the Kafka topic at
//! `--speed` times real time ([`time_model`]), waits until every job has settled, and
//! reports the run in the storm lab's terms ([`recorder`]) with an end-of-run verdict
//! ([`verdict`]). Whatever ends the run (the work drained, Ctrl-C, an error), every
//! process it started is stopped ([`processes`]).

pub mod llm_meter;
pub mod processes;
pub mod recorder;
pub mod time_model;
pub mod verdict;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::replay::{PolicyName, PolicyRun, Sample, simulator_config};
use crate::scenario::Scenario;
use crate::trace::TraceEvent;
use anyhow::{Context, bail};
use serde_json::Value;
use stormgate_shared::ingest::IngestPolicy;
use stormgate_shared::job::{JobId, SummaryKind, Tier};
use stormgate_shared::metering::MeterReading;
use stormgate_shared::store::Store;
use stormgate_shared::store::redis::RedisStore;

use crate::functions_host::AppDefinition;
use crate::functions_host::runtime::{HostRuntime, wall_clock};
use crate::simulator_http::{SimulatorHandle, spawn_simulator};
use llm_meter::{LlmMeter, MeteredDeployment};
use processes::{Supervised, is_running};
use recorder::{MinuteTally, Recorder};
use stormgate_handlers::redis_connector::NAMESPACE;
use time_model::TimeModel;
use verdict::Verdict;

/// Where Redis comes from.
#[derive(Debug, Clone)]
pub enum RedisSource {
    /// Start this `redis-server` on a free loopback port, persistence off.
    Start(PathBuf),
    /// Use this Redis (a scratch database: the handler writes its keys there).
    Url(String),
}

/// Where Azure OpenAI comes from.
#[derive(Debug, Clone)]
pub enum OpenAiSource {
    /// The product's simulator, with the scenario's deployments (quotas × speed).
    Simulator,
    /// A real endpoint; its deployments, quotas and credentials come from the settings.
    Endpoint(String),
}

/// A run's settings.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    pub scenario: Scenario,
    pub trace: Vec<TraceEvent>,
    pub seed: u64,
    pub time: TimeModel,
    pub handler: PathBuf,
    pub redis: RedisSource,
    pub openai: OpenAiSource,
    /// App settings given on the command line, over the run's own.
    pub settings: BTreeMap<String, String>,
    pub app: Arc<AppDefinition>,
    /// How the simulator reads Azure's metering (`--strict`).
    pub reading: MeterReading,
    /// Where logs go.
    pub dir: PathBuf,
    /// How long after the last arrival the work may still drain.
    pub drain_limit: Duration,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Every job settled.
    Drained,
    /// The drain limit passed first.
    DrainLimit,
    /// Stopped from outside (Ctrl-C).
    Interrupted,
}

/// What a run produced.
#[derive(Debug)]
pub struct LocalRun {
    pub run: PolicyRun,
    /// The scenario as run: its deployments are the handler's (quotas × speed).
    pub scenario: Scenario,
    pub verdict: Verdict,
    pub ending: Ending,
    pub counts: recorder::HostCounts,
    pub wall_seconds: f64,
}

/// The processes and servers of a run, stopped together.
struct Stack {
    processes: Vec<Supervised>,
    simulator: Option<SimulatorHandle>,
    meter: LlmMeter,
}

impl Stack {
    /// Stops every process; returns those still running afterwards.
    async fn stop(&mut self) -> Vec<String> {
        for p in self.processes.iter_mut().rev() {
            p.stop().await;
        }
        if let Some(simulator) = self.simulator.take() {
            simulator.shutdown().await;
        }
        self.processes
            .iter()
            .filter(|p| is_running(p.pid()))
            .map(|p| format!("{} (pid {})", p.name, p.pid()))
            .collect()
    }
}

/// The handler's app settings for this run.
fn handler_settings(
    options: &LocalOptions,
    redis_url: &str,
    meter_endpoint: &str,
    api_key: Option<&str>,
) -> BTreeMap<String, String> {
    let mut s = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        s.insert(k.to_owned(), v);
    };
    set("STORMGATE_REDIS_URL", redis_url.to_owned());
    set("AZURE_OPENAI_ENDPOINT", meter_endpoint.to_owned());
    if let Some(key) = api_key {
        set("AZURE_OPENAI_AUTH", "api_key".into());
        set("AZURE_OPENAI_API_KEY", key.to_owned());
    }
    for (prefix, d) in [
        ("STORMGATE_PREMIUM", &options.scenario.premium),
        ("STORMGATE_STANDARD", &options.scenario.standard),
    ] {
        set(&format!("{prefix}_DEPLOYMENT"), d.deployment.clone());
        set(&format!("{prefix}_MODEL"), d.model.clone());
        match options.openai {
            // The simulator's quotas are the scenario's scaled with the trace.
            OpenAiSource::Simulator => {
                set(
                    &format!("{prefix}_TPM"),
                    options.time.quota(d.tpm).to_string(),
                );
                if let Ok(rpm) = d.requests_per_minute() {
                    set(
                        &format!("{prefix}_RPM"),
                        options.time.quota(rpm).to_string(),
                    );
                }
            }
            // A real deployment's quota is what it is; an RPM the scenario does not
            // give is left to the handler, which derives it from the model and the TPM
            // (a TPM given with --set included).
            OpenAiSource::Endpoint(_) => {
                set(&format!("{prefix}_TPM"), d.tpm.to_string());
                if let Some(rpm) = d.rpm {
                    set(&format!("{prefix}_RPM"), rpm.to_string());
                }
            }
        }
        set(
            &format!("{prefix}_PRICE_INPUT_PER_1M"),
            format!("{:.4}", d.price_input_per_1m),
        );
        set(
            &format!("{prefix}_PRICE_OUTPUT_PER_1M"),
            format!("{:.4}", d.price_output_per_1m),
        );
    }
    let hold = options
        .time
        .coalesce_hold_seconds(IngestPolicy::default().coalesce_hold);
    set("STORMGATE_COALESCE_HOLD_SECONDS", hold.to_string());
    set("STORMGATE_LOG_FORMAT", "json".into());
    set("RUST_LOG", "info".into());
    // Read by the host: what the emulation resolves `%SETTING%` binding values with.
    set(
        "KAFKA_TOPIC",
        crate::functions_host::payloads::INCIDENT_TOPIC.into(),
    );
    set("KAFKA_NOTIFICATIONS_TOPIC", "notifications".into());
    s.extend(options.settings.clone());
    s
}

/// The scenario as run: its two deployments as the handler's settings name them.
fn scenario_as_run(
    options: &LocalOptions,
    settings: &BTreeMap<String, String>,
) -> anyhow::Result<Scenario> {
    let mut scenario = options.scenario.clone();
    for (prefix, d) in [
        ("STORMGATE_PREMIUM", &mut scenario.premium),
        ("STORMGATE_STANDARD", &mut scenario.standard),
    ] {
        let get = |k: &str| settings.get(&format!("{prefix}_{k}")).cloned();
        if let Some(name) = get("DEPLOYMENT") {
            d.deployment = name;
        }
        if let Some(model) = get("MODEL") {
            d.model = model;
        }
        if let Some(tpm) = get("TPM") {
            d.tpm = tpm
                .trim()
                .parse()
                .with_context(|| format!("{prefix}_TPM {tpm:?} is not a number"))?;
        }
        if let Some(rpm) = get("RPM") {
            d.rpm = Some(
                rpm.trim()
                    .parse()
                    .with_context(|| format!("{prefix}_RPM {rpm:?} is not a number"))?,
            );
        }
    }
    Ok(scenario)
}

/// Runs the stack until the trace's work has drained, the drain limit passed, or
/// `stop` resolves; stops everything either way.
pub async fn run(
    options: LocalOptions,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<LocalRun> {
    std::fs::create_dir_all(&options.dir)
        .with_context(|| format!("cannot create {}", options.dir.display()))?;
    let mut processes = Vec::new();
    let redis_url = match &options.redis {
        RedisSource::Url(url) => url.clone(),
        RedisSource::Start(binary) => {
            let (process, url) = processes::start_redis(binary, &options.dir).await?;
            println!("redis-server pid {} at {url}", process.pid());
            processes.push(process);
            url
        }
    };
    let (simulator, upstream, api_key) = match &options.openai {
        OpenAiSource::Simulator => {
            let mut config = simulator_config(&options.scenario, options.seed, options.reading);
            for d in &mut config.deployments {
                d.rpm = Some(options.time.quota(d.requests_per_minute()));
                d.tpm = options.time.quota(d.tpm);
            }
            let key = config.api_key.clone();
            let handle = spawn_simulator(config).await?;
            let endpoint = handle.endpoint();
            println!("Azure OpenAI simulator at {endpoint}");
            (Some(handle), endpoint, Some(key))
        }
        OpenAiSource::Endpoint(url) => (None, url.clone(), None),
    };
    // The meter's endpoint is needed in the settings before the settings name the
    // deployments it meters: start it with the scenario's, then read the final ones.
    let provisional = handler_settings(
        &options,
        &redis_url,
        "http://127.0.0.1:1/",
        api_key.as_deref(),
    );
    let scenario = scenario_as_run(&options, &provisional)?;
    let metered: Vec<MeteredDeployment> = [&scenario.premium, &scenario.standard]
        .into_iter()
        .map(|d| MeteredDeployment {
            name: d.deployment.clone(),
            model: d.model.clone(),
            tpm: d.tpm,
            rpm: d.requests_per_minute().unwrap_or_default(),
        })
        .collect::<Vec<_>>();
    let meter = LlmMeter::start(&upstream, &metered).await?;
    let settings = handler_settings(&options, &redis_url, &meter.endpoint(), api_key.as_deref());
    let mut stack = Stack {
        processes,
        simulator,
        meter,
    };
    let result = drive(&options, &scenario, &settings, &redis_url, &mut stack, stop).await;
    let left = stack.stop().await;
    let mut local = result?;
    local.verdict.processes_left_running = left;
    Ok(local)
}

async fn drive(
    options: &LocalOptions,
    scenario: &Scenario,
    settings: &BTreeMap<String, String>,
    redis_url: &str,
    stack: &mut Stack,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<LocalRun> {
    let (handler, base) =
        processes::start_handler(&options.handler, settings, &options.dir).await?;
    println!(
        "handler pid {} at {base} (log {})",
        handler.pid(),
        handler.log.display()
    );
    stack.processes.push(handler);
    let store = RedisStore::new(
        redis::Client::open(redis_url)?,
        NAMESPACE.parse().context("the handler's namespace")?,
    );
    // Dropped on every way out of here: its listeners stop before the processes do.
    let (mut host, mut events) =
        HostRuntime::start(options.app.clone(), base.clone(), settings.clone());
    println!(
        "Functions host emulation: {} functions from the app definition; playing {} events at {}x",
        options.app.functions.len(),
        options.trace.len(),
        options.time.speed
    );

    let started_at = Instant::now();
    let started = wall_clock();
    let trace_start = options.trace.first().map_or(started, TraceEvent::at);
    let last_arrival = options.trace.last().map_or(trace_start, TraceEvent::at);
    let feed_length = options.time.wall_offset(last_arrival.since(trace_start));
    let mut recorder = Recorder::default();
    let mut samples = Vec::new();
    let mut next_event = 0;
    let mut minute = 0u64;
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    let mut next_sample = started_at;
    let mut next_minute = started_at + Duration::from_secs(60);
    let mut next_drain_check = started_at;
    tokio::pin!(stop);
    let ending = loop {
        tokio::select! {
            () = &mut stop => break Ending::Interrupted,
            Some(event) = events.recv() => recorder.observe(&event),
            _ = ticker.tick() => {}
        }
        let now = Instant::now();
        // Produce every event that is due.
        let mut due = Vec::new();
        while let Some(e) = options.trace.get(next_event) {
            let at = started_at + options.time.wall_offset(e.at().since(trace_start));
            if at > now {
                break;
            }
            recorder.arrived(e, options.seed, wall_clock());
            due.push(e.record(options.seed));
            next_event += 1;
        }
        if !due.is_empty() {
            host.produce(due);
        }
        if now >= next_sample {
            next_sample += Duration::from_secs(10);
            samples.push(sample(stack, &host, &store, scenario).await);
        }
        if now >= next_minute {
            next_minute += Duration::from_secs(60);
            minute += 1;
            let tally = recorder.next_minute();
            print_minute(minute, &tally, stack, &host, &store).await;
        }
        if next_event >= options.trace.len() && now >= next_drain_check {
            next_drain_check = now + Duration::from_secs(1);
            if drained(&host, &store).await {
                break Ending::Drained;
            }
            if now.duration_since(started_at) > feed_length + options.drain_limit {
                break Ending::DrainLimit;
            }
        }
    };
    host.stop();
    // Whatever is still in the channel happened before the end.
    while let Ok(event) = events.try_recv() {
        recorder.observe(&event);
    }
    let finished = wall_clock();
    let notices: Vec<Value> = host.published().into_iter().map(|(_, m)| m).collect();
    let summaries = read_summaries(&base, &recorder).await;
    for (sys_id, answer) in &summaries {
        recorder.settle_from_read_api(sys_id, answer);
    }
    let records: Vec<Value> = options
        .trace
        .iter()
        .take(next_event)
        .map(|e| e.record(options.seed))
        .collect();
    let expected = verdict::expected_jobs(&records)?;
    close_open_jobs(&mut recorder, &records, &store).await?;
    let mut verdict = Verdict {
        tickets: recorder.tickets.len(),
        tickets_without_summary: recorder
            .sys_ids()
            .filter(|(id, _)| !summaries.contains_key(*id))
            .map(|(_, n)| n.clone())
            .collect(),
        http_429: stack.meter.totals().values().map(|d| d.throttled).sum(),
        poisoned_messages: recorder.counts.poisoned,
        kafka_batches_lost: recorder.counts.kafka_batches_lost,
        failed_invocations: recorder
            .counts
            .invocations
            .iter()
            .filter(|(_, c)| c.failed > 0)
            .map(|(f, c)| (f.clone(), c.failed))
            .collect(),
        ..Verdict::default()
    };
    verdict::check_summaries(&mut verdict, &expected, &summaries, &notices);
    let mut deployments = stack.meter.totals();
    if let Some(simulator) = &stack.simulator {
        for (name, totals) in &mut deployments {
            if let Ok(stats) = simulator.core().stats(name) {
                totals.peak_window_tokens = stats.peak_window_tokens;
            }
        }
    }
    let run = PolicyRun {
        policy: PolicyName::Stormgate,
        tickets: recorder.tickets.clone(),
        samples,
        deployments,
        throttles_per_minute: stack.meter.throttles_per_minute(),
        started,
        finished,
        wakes: 0,
        reading: options.reading,
        ingest: Some(recorder.ingest_tally()),
    };
    Ok(LocalRun {
        run,
        scenario: scenario.clone(),
        verdict,
        ending,
        counts: recorder.host_counts(),
        wall_seconds: started_at.elapsed().as_secs_f64(),
    })
}

/// Counts every technician job ingest queued for `records`, and settles those not seen
/// leave the queue as still queued or cancelled, by whether the store still holds them.
async fn close_open_jobs(
    recorder: &mut Recorder,
    records: &[Value],
    store: &RedisStore,
) -> anyhow::Result<()> {
    let accepted = verdict::accepted_records(records)?;
    for job in accepted
        .iter()
        .flat_map(|r| &r.jobs)
        .filter(|j| j.kind == SummaryKind::Technician)
    {
        if recorder.technician_job_queued(job) {
            continue;
        }
        let id = JobId {
            ticket: job.sys_id.parse().context("a queued job's ticket id")?,
            version: job.version,
            kind: job.kind,
        };
        // A store that cannot be asked leaves the job counted as waiting, not cancelled.
        let still_in_store = store.job_exists(&id).await.unwrap_or(true);
        recorder.close_open_job(job, still_in_store);
    }
    Ok(())
}

/// Jobs queued, held or leased in every tier.
async fn jobs_waiting(store: &RedisStore) -> Option<(u64, u64)> {
    let mut waiting = (0, 0);
    for tier in [Tier::Premium, Tier::Standard, Tier::Extractive] {
        let s = store.queue_stats(tier).await.ok()?;
        waiting.0 += s.pending + s.held;
        waiting.1 += s.leased;
    }
    Some(waiting)
}

/// Nothing left anywhere: the topic, the host's queues, running invocations, Redis.
async fn drained(host: &HostRuntime, store: &RedisStore) -> bool {
    host.kafka_backlog() == 0
        && host.running() == 0
        && host.queue_depths().values().all(|n| *n == 0)
        && jobs_waiting(store).await == Some((0, 0))
}

async fn sample(
    stack: &Stack,
    host: &HostRuntime,
    store: &RedisStore,
    scenario: &Scenario,
) -> Sample {
    let now = wall_clock();
    let window_tokens = match &stack.simulator {
        Some(simulator) => [&scenario.premium, &scenario.standard]
            .into_iter()
            .map(|d| {
                let tokens = simulator
                    .core()
                    .tokens_in_window(&d.deployment, now)
                    .unwrap_or(0);
                (d.deployment.clone(), tokens)
            })
            .collect(),
        None => stack.meter.window_tokens(now),
    };
    let waiting = jobs_waiting(store).await.unwrap_or_default();
    let queued: usize = host.queue_depths().values().sum();
    Sample {
        at: now,
        window_tokens,
        queue_depth: waiting.0 + waiting.1 + queued as u64,
    }
}

async fn print_minute(
    minute: u64,
    tally: &MinuteTally,
    stack: &Stack,
    host: &HostRuntime,
    store: &RedisStore,
) {
    let throttled = stack
        .meter
        .throttles_per_minute()
        .get(&(minute - 1))
        .copied()
        .unwrap_or(0);
    let (pending, leased) = jobs_waiting(store).await.unwrap_or_default();
    let queues: Vec<String> = host
        .queue_depths()
        .iter()
        .map(|(q, n)| format!("{q} {n}"))
        .collect();
    println!(
        "minute {minute:>3}: {} arrived, {} classified, {} LLM technician summaries, {} fallbacks, \
         {} failed invocations, {throttled} HTTP 429s; jobs {pending} queued, {leased} leased; \
         host queues: {}",
        tally.arrived,
        tally.classified,
        tally.llm_summaries,
        tally.fallbacks,
        tally.failed_invocations,
        if queues.is_empty() {
            "empty".to_owned()
        } else {
            queues.join(", ")
        }
    );
}

/// The read API's answer for every ticket seen (`GET /api/summaries/{sys_id}`), by
/// sys_id; a ticket it has nothing for is left out.
async fn read_summaries(base: &str, recorder: &Recorder) -> BTreeMap<String, Value> {
    let client =
        crate::functions_host::invocation_client::InvocationClient::new(Duration::from_secs(30));
    let mut answers = BTreeMap::new();
    for (sys_id, _) in recorder.sys_ids() {
        let answer = client.get(base, &format!("/api/summaries/{sys_id}")).await;
        if answer.is_success() {
            answers.insert(sys_id.clone(), answer.body);
        }
    }
    answers
}

/// A run folder under the system's temporary folder.
pub fn default_dir() -> PathBuf {
    std::env::temp_dir().join(format!("stormgate-local-{}", std::process::id()))
}

/// Refuses a `redis-server` that is not there, naming what to do.
pub fn redis_server_binary(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match given {
        Some(path) => Ok(path),
        None => match processes::on_path("redis-server") {
            Some(path) => Ok(path),
            None => bail!(
                "redis-server is not installed (Debian/Ubuntu: apt-get install redis-server); \
                 or point the run at a Redis with --redis URL"
            ),
        },
    }
}
