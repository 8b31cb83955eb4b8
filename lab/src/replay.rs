//! The replay engine: one scenario, several policies, the same trace, virtual time.
//!
//! Each policy gets its own fresh simulator (same deployments, same seed) and its own
//! store, and runs on a [`VirtualTime`] scheduler:
//! - `stormgate` drives the product as the one assembly ([`stormgate_shared::assembly`]) builds it,
//!   over the simulator and the memory store (or Redis with a URL), with related context
//!   switched off: ingest for every event as it arrives (what
//!   [`stormgate_shared::ingest::classify_batch`] does), [`stormgate_shared::dispatcher::dispatch_once`] on the
//!   dispatch timer's period, [`stormgate_shared::summarize::TierWorker::summarize_admitted`] for
//!   every admitted group (one invocation per queue message, as the tier functions run),
//!   and the extractive settlement for jobs the dispatcher spills to the extractive tier.
//! - `naive` is the seed's original design, written here as a policy: every summary is
//!   one call to the premium deployment with the whole log, retried by three stacked
//!   layers (SDK 2 retries honouring Retry-After, a wrapper's 3 attempts and a graph
//!   node's re-run, fixed backoff, no jitter), with no fallback and no cooldown.
//!
//! What happened is collected in a [`PolicyRun`] that [`crate::report`] turns
//! into figures.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::scenario::{Scenario, ScenarioError};
use crate::simulator::{
    DeploymentConfig, InProcessSimulator, Latency, SimulatorConfig, SimulatorCore,
};
use crate::trace::TraceEvent;
use crate::virtual_time::{Shared, VirtualClock, VirtualTime};
use stormgate_shared::assembly::{
    ClassifierSettings, DeploymentSettings, Product, ProductIo, ProductSettings,
    RelatedContextMode, Summarizer, assemble,
};
use stormgate_shared::classifier::Classifier;
use stormgate_shared::clock::{Clock, EpochMillis};
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::dispatch_policy::DispatchConfig;
use stormgate_shared::dispatcher::{DispatchContext, dispatch_once};
use stormgate_shared::event::parse_event;
use stormgate_shared::governor::{GovernorPolicy, Ledger, MemoryLedger};
use stormgate_shared::ingest::{IngestContext, IngestPolicy, RawEvent, classify_batch, prepare};
use stormgate_shared::job::{JobId, SummaryKind, Tier};
use stormgate_shared::llm::{ChatMessage, ChatRequest, LlmClient, LlmError, Role};
use stormgate_shared::metering::MeterReading;
use stormgate_shared::routing::Routing;
use stormgate_shared::severity::Severity;
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::store::{IngestOutcome, IngestRecord, Lease, Store};
use stormgate_shared::summarize::{SummarizeSettings, SummarySource};

/// The policies a replay can compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyName {
    Naive,
    Stormgate,
}

impl PolicyName {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyName::Naive => "naive",
            PolicyName::Stormgate => "stormgate",
        }
    }
}

impl std::str::FromStr for PolicyName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "naive" => Ok(PolicyName::Naive),
            "stormgate" => Ok(PolicyName::Stormgate),
            other => Err(format!("unknown policy {other:?} (naive, stormgate)")),
        }
    }
}

/// Where the stormgate policy keeps its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    Memory,
    /// A Redis URL; the run uses its own key namespace.
    Redis(String),
}

/// Settings of one replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub seed: u64,
    pub policies: Vec<PolicyName>,
    pub backend: Backend,
    /// The dispatch timer's period (function.json: every 5 s).
    pub dispatch_period: Duration,
    /// How often gauges are sampled for the charts.
    pub sample_period: Duration,
    /// How long after the last arrival work may still drain.
    pub drain_limit: Duration,
    /// The stormgate policy's governor (headroom, window, burst); `stormgate plan` varies
    /// the headroom.
    pub governor: GovernorPolicy,
    /// How the simulated deployments read Azure's metering.
    pub reading: MeterReading,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            seed: 2026,
            policies: vec![PolicyName::Naive, PolicyName::Stormgate],
            backend: Backend::Memory,
            dispatch_period: Duration::from_secs(5),
            sample_period: Duration::from_secs(10),
            drain_limit: Duration::from_secs(3 * 3_600),
            governor: GovernorPolicy::default(),
            reading: MeterReading::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("replay setup failed: {0}")]
    Setup(String),
}

/// What one ticket went through under one policy.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TicketTrack {
    pub number: String,
    pub severity: Option<Severity>,
    pub arrived: EpochMillis,
    /// First summary of any kind stored for the ticket (technician).
    pub first_summary: Option<EpochMillis>,
    /// First LLM technician summary stored.
    pub llm_summary: Option<EpochMillis>,
    pub llm_tier: Option<Tier>,
    /// When the last technician job of the ticket left the queue (LLM, extractive or given up).
    pub settled: Option<EpochMillis>,
    /// The longest any of its technician jobs waited to leave the queue, in ms.
    pub max_wait_ms: u64,
    /// The severity that longest-waiting job was queued with (the classifier's routing
    /// severity, which the deadlines apply to); none under a policy without queues.
    #[serde(default)]
    pub queued_severity: Option<Severity>,
    pub extractive_only: bool,
    /// Technician jobs ingest queued for the ticket (one per accepted version that
    /// was not closed); under naive, its technician call chains.
    #[serde(default)]
    pub technician_jobs: u32,
    /// Of those, jobs cancelled before they left the queue: a newer version replaced
    /// them, or the ticket was resolved. They waited for nothing, and count in no wait.
    #[serde(default)]
    pub cancelled_jobs: u32,
    /// A technician job still queued when the run ended: since when, queued at which
    /// severity. It waited until the end of the run.
    #[serde(default)]
    pub still_queued: Option<(EpochMillis, Severity)>,
    /// How ingest routed the ticket's first accepted version (none under naive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    /// Technician jobs queued and not yet seen leave: version, queued at, severity.
    #[serde(skip)]
    open_jobs: Vec<OpenJob>,
}

impl TicketTrack {
    /// The track of a ticket that first arrived at `arrived`, nothing else known yet.
    pub fn arriving(number: String, severity: Severity, arrived: EpochMillis) -> TicketTrack {
        TicketTrack {
            number,
            severity: Some(severity),
            arrived,
            ..TicketTrack::default()
        }
    }

    /// A technician job of this ticket left the queue at `now`.
    pub fn record_wait(&mut self, lease: &Lease, now: EpochMillis) {
        self.open_jobs.retain(|j| j.0 != lease.job.id.version);
        let waited =
            u64::try_from(now.since(lease.job.enqueued_at).as_millis()).unwrap_or(u64::MAX);
        if waited >= self.max_wait_ms || self.queued_severity.is_none() {
            self.max_wait_ms = self.max_wait_ms.max(waited);
            self.queued_severity = Some(lease.job.severity);
        }
    }
}

/// A technician job queued and not yet seen leave: version, queued at, severity.
type OpenJob = (u64, EpochMillis, Severity);

/// One sample of the gauges.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sample {
    pub at: EpochMillis,
    /// Tokens the simulator's meter holds in the last minute, per deployment.
    pub window_tokens: BTreeMap<String, u64>,
    /// Jobs waiting (queued, or naive call chains in flight).
    pub queue_depth: u64,
}

/// Everything a policy's run left behind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicyRun {
    pub policy: PolicyName,
    pub tickets: BTreeMap<String, TicketTrack>,
    pub samples: Vec<Sample>,
    /// Per deployment: calls, 429s, billed prompt and completion tokens.
    pub deployments: BTreeMap<String, DeploymentTotals>,
    /// 429s per minute since the start.
    pub throttles_per_minute: BTreeMap<u64, u64>,
    pub started: EpochMillis,
    pub finished: EpochMillis,
    pub wakes: u64,
    /// How the simulated deployments read Azure's metering in this run.
    #[serde(default)]
    pub reading: MeterReading,
    /// What ingest made of the trace's events (stormgate only: naive has no ingest).
    #[serde(default)]
    pub ingest: Option<IngestTally>,
}

/// What ingest made of the events a replay fed it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestTally {
    pub accepted: u64,
    /// The same or an older version than one stored (a counted no-op).
    pub duplicate_or_stale: u64,
    /// Dead-lettered: the event parser or the store refused it.
    pub rejected: u64,
    pub rejected_by_reason: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentTotals {
    pub model: String,
    pub tpm: u64,
    pub calls: u64,
    pub throttled: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The most tokens the deployment's meter held in its minute window at any instant.
    #[serde(default)]
    pub peak_window_tokens: u64,
    /// Requests per minute of the deployment.
    #[serde(default)]
    pub rpm: u64,
    /// Admitted requests the simulator's reading charged more than the governor did.
    #[serde(default)]
    pub undercharged: u64,
    /// The largest charge under the simulator's reading, in thousandths of the governor's.
    #[serde(default)]
    pub largest_charge_permille: u64,
    /// Strict reading: the largest tokenizer count of a prompt, in thousandths of its
    /// characters / 4.
    #[serde(default)]
    pub largest_tokenized_permille: u64,
    /// The admitted requests: (arrival, charge under the simulator's reading), as the
    /// simulator kept them (see `charges_dropped`).
    #[serde(skip)]
    pub charges: Vec<(EpochMillis, u64)>,
    #[serde(default)]
    pub charges_dropped: u64,
}

/// Called with the fraction of the current policy done, for progress bars.
pub type Progress<'a> = &'a mut dyn FnMut(PolicyName, f64);

/// Runs every policy of `options` on `scenario`'s trace.
pub async fn replay(
    scenario: &Scenario,
    options: &ReplayOptions,
    progress: Progress<'_>,
) -> Result<Vec<PolicyRun>, ReplayError> {
    let trace = scenario
        .plan(options.seed)?
        .into_iter()
        .map(TraceEvent::Planned)
        .collect();
    replay_trace(scenario, trace, options, progress).await
}

/// Runs every policy of `options` on a given trace (a recorded history, say), with
/// `scenario`'s deployments and start.
pub async fn replay_trace(
    scenario: &Scenario,
    trace: Vec<TraceEvent>,
    options: &ReplayOptions,
    progress: Progress<'_>,
) -> Result<Vec<PolicyRun>, ReplayError> {
    replay_prepared(
        scenario,
        Arc::new(PreparedTrace::lazy(trace)),
        options,
        progress,
    )
    .await
}

/// Runs every policy of `options` on a trace whose ingest may have been computed
/// beforehand ([`PreparedTrace::prepare`]): the same results as [`replay_trace`], less
/// the ingest's CPU, for replays of one trace under several quotas.
pub async fn replay_prepared(
    scenario: &Scenario,
    trace: Arc<PreparedTrace>,
    options: &ReplayOptions,
    progress: Progress<'_>,
) -> Result<Vec<PolicyRun>, ReplayError> {
    let plan = trace;
    let mut runs = Vec::new();
    for &policy in &options.policies {
        let local = tokio::task::LocalSet::new();
        let run = local
            .run_until(run_policy(
                policy,
                scenario,
                plan.clone(),
                options,
                progress,
            ))
            .await?;
        runs.push(run);
    }
    Ok(runs)
}

/// The simulator both policies call: the scenario's two deployments, read as `reading` says.
pub fn simulator_config(scenario: &Scenario, seed: u64, reading: MeterReading) -> SimulatorConfig {
    let deployment = |d: &crate::scenario::DeploymentSpec| {
        let mut c = DeploymentConfig::new(&d.deployment, &d.model, d.tpm);
        c.rpm = d.requests_per_minute().ok();
        c.latency = Latency {
            first_token_ms: d.first_token_ms,
            per_output_token_ms: d.per_output_token_ms,
        };
        c
    };
    let mut config = SimulatorConfig::new(
        seed,
        vec![
            deployment(&scenario.premium),
            deployment(&scenario.standard),
        ],
    );
    config.reading = reading;
    config
}

struct Recorder {
    tickets: BTreeMap<String, TicketTrack>,
    samples: Vec<Sample>,
    /// sys_id → number, to map job ids back to tickets.
    numbers: BTreeMap<String, String>,
    in_flight: u64,
    /// Jobs pending in stormgate's queues at the last dispatch tick.
    pending: u64,
    arrivals_done: bool,
    ingest: IngestTally,
}

impl Recorder {
    fn track(&mut self, sys_id: &str) -> Option<&mut TicketTrack> {
        let number = self.numbers.get(sys_id)?;
        self.tickets.get_mut(number)
    }
}

async fn run_policy(
    policy: PolicyName,
    scenario: &Scenario,
    plan: Arc<PreparedTrace>,
    options: &ReplayOptions,
    progress: Progress<'_>,
) -> Result<PolicyRun, ReplayError> {
    let start = scenario.start_millis()?;
    let vt = VirtualTime::starting_at(start);
    let clock = vt.clock();
    let core = Arc::new(SimulatorCore::new(&simulator_config(
        scenario,
        options.seed,
        options.reading,
    )));
    let client = Arc::new(ThrottleCounting {
        inner: InProcessSimulator::new(
            core.clone(),
            Arc::new(clock.clone()),
            Duration::from_secs(60),
        ),
        clock: clock.clone(),
        start,
        per_minute: std::sync::Mutex::default(),
    });
    let recorder: Shared<Recorder> = Rc::new(std::cell::RefCell::new(Recorder {
        tickets: BTreeMap::new(),
        samples: Vec::new(),
        numbers: BTreeMap::new(),
        in_flight: 0,
        pending: 0,
        arrivals_done: false,
        ingest: IngestTally::default(),
    }));
    let last_arrival = plan.events.last().map(|e| e.at()).unwrap_or(start);
    let horizon = last_arrival.plus(options.drain_limit);

    let store = match policy {
        PolicyName::Naive => {
            start_naive(
                &vt,
                scenario,
                plan.clone(),
                options,
                client.clone(),
                recorder.clone(),
            );
            None
        }
        PolicyName::Stormgate => Some(
            start_stormgate(
                &vt,
                scenario,
                plan.clone(),
                options,
                client.clone(),
                recorder.clone(),
            )
            .await?,
        ),
    };
    start_sampler(
        &vt,
        scenario,
        options,
        core.clone(),
        recorder.clone(),
        policy,
    );

    // Run in slices so the progress bar moves.
    let total = last_arrival.since(start).as_millis().max(1) as f64;
    let mut wakes = 0;
    let mut until = start;
    loop {
        until = until.plus(Duration::from_secs(600));
        wakes += vt.run(until.min(horizon)).await;
        let done = vt.now().since(start).as_millis() as f64 / total;
        progress(policy, done.min(1.0));
        if until >= horizon || vt.live_tasks() == 0 {
            break;
        }
        let r = recorder.borrow();
        if r.arrivals_done
            && r.in_flight == 0
            && r.pending == 0
            && vt.live_tasks() <= 2
            && vt.now() >= last_arrival
        {
            // Only the timers are left and nothing is queued or held: the work has drained.
            // (Until held jobs counted here, a run whose last tickets arrived just before a
            // slice ended stopped with their jobs still held.)
            break;
        }
    }
    let finished = vt.now();
    let mut deployments = BTreeMap::new();
    for spec in [&scenario.premium, &scenario.standard] {
        let stats = core.stats(&spec.deployment).unwrap_or_default();
        deployments.insert(
            spec.deployment.clone(),
            DeploymentTotals {
                model: spec.model.clone(),
                tpm: spec.tpm,
                calls: stats.requests,
                throttled: stats.throttled,
                prompt_tokens: stats.prompt_tokens,
                completion_tokens: stats.completion_tokens,
                peak_window_tokens: stats.peak_window_tokens,
                rpm: spec.requests_per_minute().unwrap_or_default(),
                undercharged: stats.undercharged,
                largest_charge_permille: stats.largest_charge_permille,
                largest_tokenized_permille: stats.largest_tokenized_permille,
                charges: stats.charges,
                charges_dropped: stats.charges_dropped,
            },
        );
    }
    if let Some(store) = &store {
        close_open_jobs(store.as_ref(), &recorder).await;
    }
    let recorder = recorder.borrow();
    Ok(PolicyRun {
        policy,
        tickets: recorder.tickets.clone(),
        samples: recorder.samples.clone(),
        deployments,
        throttles_per_minute: client
            .per_minute
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default(),
        started: start,
        finished,
        wakes,
        ingest: store.is_some().then(|| recorder.ingest.clone()),
        reading: options.reading,
    })
}

/// Technician jobs not seen leave the queue: still queued (they waited until the end of
/// the run), or cancelled by a newer version or a resolution (they waited for nothing).
async fn close_open_jobs(store: &dyn Store, recorder: &Shared<Recorder>) {
    let open: Vec<(String, String, Vec<OpenJob>)> = {
        let r = recorder.borrow();
        r.numbers
            .iter()
            .filter_map(|(sys_id, number)| {
                let t = r.tickets.get(number)?;
                (!t.open_jobs.is_empty())
                    .then(|| (sys_id.clone(), number.clone(), t.open_jobs.clone()))
            })
            .collect()
    };
    for (sys_id, number, jobs) in open {
        let Ok(ticket) = sys_id.parse() else { continue };
        for (version, queued_at, severity) in jobs {
            let id = JobId {
                ticket: stormgate_shared::ticket_id::TicketId::clone(&ticket),
                version,
                kind: SummaryKind::Technician,
            };
            let queued = store.job_exists(&id).await.unwrap_or(true);
            let mut r = recorder.borrow_mut();
            let Some(t) = r.tickets.get_mut(&number) else {
                continue;
            };
            if queued {
                if t.still_queued.is_none_or(|(since, _)| queued_at < since) {
                    t.still_queued = Some((queued_at, severity));
                }
            } else {
                t.cancelled_jobs += 1;
            }
        }
        if let Some(t) = recorder.borrow_mut().tickets.get_mut(&number) {
            t.open_jobs.clear();
        }
    }
}

/// The simulator as the policies' `LlmClient`, counting 429s per minute on the way
/// through (the simulator itself counts totals).
#[derive(Debug)]
struct ThrottleCounting {
    inner: InProcessSimulator,
    clock: VirtualClock,
    start: EpochMillis,
    per_minute: std::sync::Mutex<BTreeMap<u64, u64>>,
}

#[async_trait::async_trait]
impl LlmClient for ThrottleCounting {
    async fn complete(
        &self,
        request: &ChatRequest,
    ) -> Result<stormgate_shared::llm::Completion, LlmError> {
        let minute = self.clock.now().since(self.start).as_secs() / 60;
        let result = self.inner.complete(request).await;
        if matches!(result, Err(LlmError::RateLimited { .. })) {
            let mut m = self
                .per_minute
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            *m.entry(minute).or_default() += 1;
        }
        result
    }
}

fn start_sampler(
    vt: &Arc<VirtualTime>,
    scenario: &Scenario,
    options: &ReplayOptions,
    core: Arc<SimulatorCore>,
    recorder: Shared<Recorder>,
    policy: PolicyName,
) {
    let clock = vt.clock();
    let period = options.sample_period;
    let names = [
        scenario.premium.deployment.clone(),
        scenario.standard.deployment.clone(),
    ];
    let _ = policy;
    vt.spawn(async move {
        loop {
            let now = clock.now();
            let mut window_tokens = BTreeMap::new();
            for n in &names {
                window_tokens.insert(n.clone(), core.tokens_in_window(n, now).unwrap_or(0));
            }
            let done = {
                let mut r = recorder.borrow_mut();
                // Pending jobs plus work in calls: naive has no queue, only call chains.
                let depth = r.in_flight + r.pending;
                r.samples.push(Sample {
                    at: now,
                    window_tokens,
                    queue_depth: depth,
                });
                r.arrivals_done && r.in_flight == 0
            };
            if done {
                return;
            }
            clock.sleep(period).await;
        }
    });
}

fn register_arrival(recorder: &Shared<Recorder>, seed: u64, e: &TraceEvent) {
    let mut r = recorder.borrow_mut();
    let number = e.number();
    r.numbers.insert(e.sys_id(seed), number.clone());
    r.tickets
        .entry(number.clone())
        .or_insert_with(|| TicketTrack::arriving(number, e.severity(), e.at()));
}

// ---------------------------------------------------------------- naive policy

/// The naive design's retry stack: SDK × wrapper × graph node.
#[derive(Debug, Clone, Copy)]
pub struct NaiveRetries {
    pub sdk_attempts: u32,
    /// The SDK waits the Retry-After when it is at most this long, else its own backoff.
    pub sdk_retry_after_cap: Duration,
    pub sdk_backoff: Duration,
    pub wrapper_attempts: u32,
    pub wrapper_backoff: Duration,
    pub node_runs: u32,
    pub node_backoff: Duration,
}

impl Default for NaiveRetries {
    fn default() -> Self {
        NaiveRetries {
            sdk_attempts: 3,
            sdk_retry_after_cap: Duration::from_secs(60),
            sdk_backoff: Duration::from_secs(1),
            wrapper_attempts: 3,
            wrapper_backoff: Duration::from_secs(2),
            node_runs: 2,
            node_backoff: Duration::from_secs(5),
        }
    }
}

fn start_naive(
    vt: &Arc<VirtualTime>,
    scenario: &Scenario,
    plan: Arc<PreparedTrace>,
    options: &ReplayOptions,
    client: Arc<ThrottleCounting>,
    recorder: Shared<Recorder>,
) {
    let clock = vt.clock();
    let vt2 = vt.clone();
    let seed = options.seed;
    let deployment = scenario.premium.deployment.clone();
    let max_tokens = scenario.max_tokens;
    vt.spawn(async move {
        for e in plan.events.iter() {
            let wait = e.at().since(clock.now());
            if !wait.is_zero() {
                clock.sleep(wait).await;
            }
            register_arrival(&recorder, seed, e);
            let record = e.record(seed);
            let mut requests = vec![(
                SummaryKind::Technician,
                naive_request(&deployment, &record, max_tokens, false),
            )];
            let customers = record["u_customers_affected"]
                .as_str()
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0);
            if customers >= NAIVE_CUSTOMER_NOTICE_FROM {
                requests.push((
                    SummaryKind::Customer,
                    naive_request(&deployment, &record, 200, true),
                ));
            }
            for (kind, request) in requests {
                {
                    let mut r = recorder.borrow_mut();
                    r.in_flight += 1;
                    if kind == SummaryKind::Technician
                        && let Some(t) = r.tickets.get_mut(&e.number())
                    {
                        t.technician_jobs += 1;
                    }
                }
                let number = e.number();
                let queued_at = e.at();
                let client = client.clone();
                let recorder = recorder.clone();
                let clock = clock.clone();
                vt2.spawn(async move {
                    let done = naive_call_chain(
                        client.as_ref(),
                        &clock,
                        &request,
                        NaiveRetries::default(),
                    )
                    .await;
                    let now = clock.now();
                    let mut r = recorder.borrow_mut();
                    r.in_flight -= 1;
                    if kind == SummaryKind::Technician
                        && let Some(t) = r.tickets.get_mut(&number)
                    {
                        t.settled = Some(now);
                        t.max_wait_ms = t.max_wait_ms.max(now.since(queued_at).as_millis() as u64);
                        if done {
                            t.first_summary.get_or_insert(now);
                            t.llm_summary.get_or_insert(now);
                            t.llm_tier = Some(Tier::Premium);
                        }
                    }
                });
            }
        }
        recorder.borrow_mut().arrivals_done = true;
    });
}

/// Customers affected from which the original pipeline sent a customer notice.
const NAIVE_CUSTOMER_NOTICE_FROM: u64 = 10;

/// The whole ticket record as the prompt, as the original pipeline sent it.
fn naive_request(
    deployment: &str,
    record: &serde_json::Value,
    max_tokens: u32,
    customer: bool,
) -> ChatRequest {
    let text = |k: &str| record[k].as_str().unwrap_or_default().to_owned();
    let user = format!(
        "{} {}\n{}\n{}\n{}",
        text("number"),
        text("short_description"),
        text("description"),
        text("u_alarm_log"),
        text("work_notes"),
    );
    let system = if customer {
        "Write a short, plain-language status update for customers affected by this network incident."
    } else {
        "You are a network operations assistant. Summarize this trouble ticket for the technician in five sentences: what failed, impact, what has been tried, current state, next step."
    };
    ChatRequest {
        deployment: deployment.to_owned(),
        messages: vec![
            ChatMessage {
                role: Role::System,
                content: system.to_owned(),
            },
            ChatMessage {
                role: Role::User,
                content: user,
            },
        ],
        max_tokens,
        temperature: 0.2,
    }
}

/// SDK retries inside a wrapper's attempts inside a graph node's runs. True when a
/// completion came back.
async fn naive_call_chain(
    client: &dyn LlmClient,
    clock: &VirtualClock,
    request: &ChatRequest,
    retries: NaiveRetries,
) -> bool {
    for node_run in 0..retries.node_runs {
        for wrapper_try in 0..retries.wrapper_attempts {
            for sdk_try in 0..retries.sdk_attempts {
                let wait = match client.complete(request).await {
                    Ok(_) => return true,
                    Err(LlmError::RateLimited { hint, .. }) => match hint.wait {
                        Some(w) if w <= retries.sdk_retry_after_cap => w,
                        _ => retries.sdk_backoff * 2u32.pow(sdk_try),
                    },
                    Err(e) if e.is_retryable() => retries.sdk_backoff * 2u32.pow(sdk_try),
                    Err(_) => return false,
                };
                if sdk_try + 1 < retries.sdk_attempts {
                    clock.sleep(wait).await;
                }
            }
            if wrapper_try + 1 < retries.wrapper_attempts {
                clock.sleep(retries.wrapper_backoff).await;
            }
        }
        if node_run + 1 < retries.node_runs {
            clock.sleep(retries.node_backoff).await;
        }
    }
    false
}

// ------------------------------------------------------------ stormgate policy

/// The product the stormgate policy runs, as the one assembly built it, shared by its tasks.
struct Running {
    product: Product<Arc<dyn Store>>,
    classifier: Arc<Classifier>,
    summarizer: Arc<Summarizer>,
    seed: u64,
}

/// A scenario's deployment name, checked as the product's settings check it.
fn deployment_name(name: &str) -> Result<DeploymentName, ReplayError> {
    name.parse().map_err(
        |e: stormgate_shared::deployment_name::DeploymentNameError| {
            ReplayError::Setup(e.to_string())
        },
    )
}

/// The classifier and the ingest policy the lab's product ingests with (the product's
/// defaults): [`product_settings`] assembles the product with them and
/// [`PreparedTrace::prepare`] ingests a trace ahead with the same, so a prepared trace is
/// what the assembled product would have ingested.
fn lab_ingest_settings() -> (ClassifierSettings, IngestPolicy) {
    (ClassifierSettings::default(), IngestPolicy::default())
}

/// The product's settings for a replay: the scenario's deployments, the options' governor
/// and seed, the product's defaults otherwise, and no related context, so that a replay
/// depends on its trace alone.
fn product_settings(
    scenario: &Scenario,
    options: &ReplayOptions,
) -> Result<ProductSettings, ReplayError> {
    let deployment = |d: &crate::scenario::DeploymentSpec| {
        Ok::<_, ReplayError>(DeploymentSettings {
            name: deployment_name(&d.deployment)?,
            model: d.model.clone(),
            tokens_per_minute: d.tpm,
            requests_per_minute: d.requests_per_minute()?,
        })
    };
    let ingest_settings = lab_ingest_settings();
    Ok(ProductSettings {
        premium: deployment(&scenario.premium)?,
        standard: deployment(&scenario.standard)?,
        governor: options.governor,
        ingest: ingest_settings.1,
        dispatch: DispatchConfig::default(),
        summarize: SummarizeSettings::default(),
        classifier: ingest_settings.0,
        related_context: RelatedContextMode::Off,
        seed: options.seed,
    })
}

async fn start_stormgate(
    vt: &Arc<VirtualTime>,
    scenario: &Scenario,
    plan: Arc<PreparedTrace>,
    options: &ReplayOptions,
    client: Arc<ThrottleCounting>,
    recorder: Shared<Recorder>,
) -> Result<Arc<dyn Store>, ReplayError> {
    let (store, ledger) = backend(&options.backend, options.seed).await?;
    let io = ProductIo {
        store,
        ledger,
        llm: Some(client as Arc<dyn LlmClient>),
        related: None,
    };
    let product = assemble(
        product_settings(scenario, options)?,
        io,
        Arc::new(vt.clock()),
    );
    let classifier = product
        .classifier
        .clone()
        .map_err(|e| ReplayError::Setup(e.to_string()))?;
    let summarizer = product
        .summarizer
        .clone()
        .ok_or_else(|| ReplayError::Setup("assembled without its LLM client".into()))?;
    let store_handle = product.store.clone();
    let running = Rc::new(Running {
        product,
        classifier,
        summarizer,
        seed: options.seed,
    });
    start_feed(vt, plan, running.clone(), recorder.clone());
    start_dispatch(vt, options.dispatch_period, running, recorder);
    Ok(store_handle)
}

async fn backend(
    backend: &Backend,
    seed: u64,
) -> Result<(Arc<dyn Store>, Arc<dyn Ledger>), ReplayError> {
    match backend {
        Backend::Memory => Ok((Arc::new(MemoryStore::new()), Arc::new(MemoryLedger::new()))),
        Backend::Redis(url) => {
            let client =
                redis::Client::open(url.as_str()).map_err(|e| ReplayError::Setup(e.to_string()))?;
            let namespace = format!("stormgate-lab-{seed}").parse().map_err(
                |e: stormgate_shared::store::redis::NamespaceParseError| {
                    ReplayError::Setup(e.to_string())
                },
            )?;
            let conn = redis::aio::ConnectionManager::new(client.clone())
                .await
                .map_err(|e| ReplayError::Setup(format!("cannot connect to {url}: {e}")))?;
            let store = stormgate_shared::store::redis::RedisStore::new(client, namespace);
            let ledger = stormgate_shared::governor::RedisLedger::new(
                conn,
                format!("stormgate-lab-{seed}:gov"),
            );
            Ok((Arc::new(store), Arc::new(ledger)))
        }
    }
}

fn start_feed(
    vt: &Arc<VirtualTime>,
    plan: Arc<PreparedTrace>,
    running: Rc<Running>,
    recorder: Shared<Recorder>,
) {
    let clock = vt.clock();
    vt.spawn(async move {
        let product = &running.product;
        for (i, e) in plan.events.iter().enumerate() {
            let wait = e.at().since(clock.now());
            if !wait.is_zero() {
                clock.sleep(wait).await;
            }
            register_arrival(&recorder, running.seed, e);
            let now = clock.now();
            let ctx = IngestContext {
                store: product.store.as_ref(),
                clock: product.clock.as_ref(),
                classifier: &running.classifier,
                policy: &product.ingest,
            };
            // Prepared beforehand at this very instant, or now: the same record.
            let computed;
            let prepared = match plan.prepared_at(i, now) {
                Some(p) => p,
                None => {
                    computed = prepare_event(e, running.seed, &ctx, now);
                    &computed
                }
            };
            let fate = match prepared {
                Prepared::Record(record) => {
                    ingest_record(product.store.as_ref(), record, &recorder, e, now).await
                }
                Prepared::Rejected { reason } => {
                    // The product's own path dead-letters it, exactly as `classify` would.
                    let raw = raw_event(e, running.seed);
                    let _ = classify_batch(std::slice::from_ref(&raw), &ctx).await;
                    Fate::Rejected(reason.clone())
                }
            };
            let mut r = recorder.borrow_mut();
            match fate {
                Fate::Accepted => r.ingest.accepted += 1,
                Fate::DuplicateOrStale => r.ingest.duplicate_or_stale += 1,
                Fate::Rejected(reason) => {
                    r.ingest.rejected += 1;
                    *r.ingest.rejected_by_reason.entry(reason).or_default() += 1;
                }
            }
        }
        recorder.borrow_mut().arrivals_done = true;
    });
}

enum Fate {
    Accepted,
    DuplicateOrStale,
    Rejected(String),
}

/// Stores one prepared record as `classify` does, and tracks the technician job it queued.
async fn ingest_record(
    store: &dyn Store,
    record: &IngestRecord,
    recorder: &Shared<Recorder>,
    e: &TraceEvent,
    now: EpochMillis,
) -> Fate {
    let outcome = match store.ingest_each(std::slice::from_ref(record)).await {
        Ok(mut results) => results.pop(),
        Err(err) => Some(Err(err)),
    };
    match outcome {
        Some(Ok(IngestOutcome::Accepted)) => {
            let mut r = recorder.borrow_mut();
            let number = e.number();
            if let Some(t) = r.tickets.get_mut(&number) {
                t.first_summary.get_or_insert(now);
                if t.routing.is_none() {
                    t.routing = routing_of(record);
                }
                for job in &record.jobs {
                    if job.id.kind == SummaryKind::Technician {
                        t.technician_jobs += 1;
                        t.open_jobs
                            .push((job.id.version, job.enqueued_at, job.severity));
                    }
                }
            }
            Fate::Accepted
        }
        Some(Ok(IngestOutcome::Duplicate | IngestOutcome::Stale)) => Fate::DuplicateOrStale,
        Some(Err(err)) => Fate::Rejected(format!("store refused the record: {err}")),
        None => Fate::Rejected("store answered nothing".to_owned()),
    }
}

/// The routing ingest recorded in a record's instant summary (`classification`).
fn routing_of(record: &IngestRecord) -> Option<Routing> {
    let c = record.instant_summary.input.get("classification")?;
    let field = |name: &str| c.get(name).cloned().unwrap_or(serde_json::Value::Null);
    Some(Routing {
        severity: serde_json::from_value(field("routing")).ok()?,
        servicenow: serde_json::from_value(field("servicenow_priority")).ok()?,
        basis: serde_json::from_value(field("routing_basis")).ok()?,
    })
}

/// The Kafka record a producer would publish for `e`.
fn raw_event(e: &TraceEvent, seed: u64) -> RawEvent {
    RawEvent {
        value: serde_json::to_vec(&e.record(seed)).unwrap_or_default(),
        ..RawEvent::default()
    }
}

/// What ingest makes of one event at `now` (pure CPU; the store is not touched).
fn prepare_event(e: &TraceEvent, seed: u64, ctx: &IngestContext<'_>, now: EpochMillis) -> Prepared {
    let raw = raw_event(e, seed);
    match parse_event(&raw.value, &raw.headers, ctx.policy.parse_limits)
        .map_err(|rejection| rejection.to_string())
        .and_then(|ticket| prepare(ticket, ctx, now))
    {
        Ok(record) => Prepared::Record(Box::new(record)),
        Err(reason) => Prepared::Rejected { reason },
    }
}

/// What ingest made of one event.
#[derive(Debug, Clone)]
pub enum Prepared {
    Record(Box<IngestRecord>),
    Rejected { reason: String },
}

/// A trace, with what ingest makes of each event computed once when it is replayed
/// under several quotas (`stormgate plan`): ingest depends on the event and its arrival
/// instant only, never on a quota, and is most of a replay's CPU.
#[derive(Debug)]
pub struct PreparedTrace {
    pub events: Vec<TraceEvent>,
    /// Per event, prepared at its arrival instant; empty when prepared on arrival.
    prepared: Vec<Prepared>,
}

impl PreparedTrace {
    /// Ingest computed as each event arrives.
    pub fn lazy(events: Vec<TraceEvent>) -> PreparedTrace {
        PreparedTrace {
            events,
            prepared: Vec::new(),
        }
    }

    /// Ingest computed now for every event at its arrival instant, on `threads` threads,
    /// with the product's ingest policy and embedded classifier.
    pub fn prepare(
        events: Vec<TraceEvent>,
        seed: u64,
        threads: usize,
    ) -> Result<PreparedTrace, ReplayError> {
        let threads = threads.max(1);
        let chunk = events.len().div_ceil(threads).max(1);
        let prepared = std::thread::scope(|scope| {
            let handles: Vec<_> = events
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || -> Result<Vec<Prepared>, ReplayError> {
                        let (classifier, policy) = lab_ingest_settings();
                        let classifier = classifier
                            .load()
                            .map_err(|e| ReplayError::Setup(e.to_string()))?;
                        let store = MemoryStore::new();
                        let clock =
                            stormgate_shared::clock::ManualClock::starting_at(EpochMillis::ZERO);
                        let ctx = IngestContext {
                            store: &store,
                            clock: &clock,
                            classifier: &classifier,
                            policy: &policy,
                        };
                        Ok(part
                            .iter()
                            .map(|e| prepare_event(e, seed, &ctx, e.at()))
                            .collect())
                    })
                })
                .collect();
            let mut all = Vec::with_capacity(events.len());
            for h in handles {
                let part = h
                    .join()
                    .map_err(|_| ReplayError::Setup("an ingest thread panicked".into()))??;
                all.extend(part);
            }
            Ok::<_, ReplayError>(all)
        })?;
        Ok(PreparedTrace { events, prepared })
    }

    /// Event `i` as prepared beforehand, if it was, for the instant it was prepared at.
    fn prepared_at(&self, i: usize, now: EpochMillis) -> Option<&Prepared> {
        let e = self.events.get(i)?;
        (e.at() == now).then(|| self.prepared.get(i)).flatten()
    }
}

fn start_dispatch(
    vt: &Arc<VirtualTime>,
    period: Duration,
    running: Rc<Running>,
    recorder: Shared<Recorder>,
) {
    let clock = vt.clock();
    let vt2 = vt.clone();
    vt.spawn(async move {
        let product = &running.product;
        let mut invocation: u64 = 0;
        loop {
            let tick_started = clock.now();
            let ctx = DispatchContext {
                store: product.store.as_ref(),
                governor: &product.governor,
                clock: product.clock.as_ref(),
                config: &product.dispatch,
                emit_gauges: false,
            };
            if let Ok(outcome) = dispatch_once(&ctx).await {
                for spilled in outcome.extractive_work() {
                    for lease in &spilled.leases {
                        settle_extractive(product, lease, &recorder).await;
                    }
                }
                for group in outcome.admitted {
                    invocation += 1;
                    let running = running.clone();
                    let recorder = recorder.clone();
                    recorder.borrow_mut().in_flight += group.leases.len() as u64;
                    let seed = running.seed ^ invocation.wrapping_mul(0x9E37_79B9);
                    vt2.spawn(async move {
                        run_tier_worker(&running, group, seed, &recorder).await;
                    });
                }
            }
            let (pending, leased) = queued(product.store.as_ref()).await;
            let drained = {
                let mut r = recorder.borrow_mut();
                r.pending = pending;
                r.arrivals_done && r.in_flight == 0 && pending + leased == 0
            };
            if drained {
                return;
            }
            let next = tick_started.plus(period);
            let wait = next.since(clock.now()).max(Duration::from_millis(1));
            clock.sleep(wait).await;
        }
    });
}

/// Jobs queued (pending or held) and leased over the LLM tiers.
async fn queued(store: &dyn Store) -> (u64, u64) {
    let mut totals = (0, 0);
    for tier in Tier::LLM {
        if let Ok(s) = store.queue_stats(tier).await {
            totals.0 += s.pending + s.held;
            totals.1 += s.leased;
        }
    }
    totals
}

async fn run_tier_worker(
    running: &Running,
    group: stormgate_shared::dispatcher::AdmittedGroup,
    seed: u64,
    recorder: &Shared<Recorder>,
) {
    let product = &running.product;
    let summarizer = &running.summarizer;
    // Dispatch admits LLM tiers only; anything else would go where the standard tier goes.
    let deployment = summarizer
        .deployment(group.tier)
        .unwrap_or(&summarizer.standard)
        .clone();
    let worker = summarizer.worker(
        product.store.as_ref(),
        &product.governor,
        product.clock.as_ref(),
        deployment,
        seed,
        // The lab measures the LLM path: its sinks are the read side of the store.
        stormgate_shared::configured_sinks::Sinks::NONE,
        format!("lab-{seed:x}"),
    );
    let outcome = worker.summarize_admitted(&group).await;
    let now = product.clock.now();
    let mut r = recorder.borrow_mut();
    r.in_flight = r.in_flight.saturating_sub(group.leases.len() as u64);
    let Ok(outcome) = outcome else {
        return;
    };
    for lease in &group.leases {
        if lease.job.id.kind != SummaryKind::Technician {
            continue;
        }
        let source = outcome.summaries.get(&lease.job.id.to_string());
        let Some(t) = r.track(lease.job.id.ticket.as_str()) else {
            continue;
        };
        t.settled = Some(now);
        t.record_wait(lease, now);
        match source {
            Some(SummarySource::Llm) => {
                t.llm_summary.get_or_insert(now);
                t.llm_tier.get_or_insert(group.tier);
            }
            _ => t.extractive_only = t.llm_summary.is_none(),
        }
    }
}

/// A job the dispatcher spilled to the extractive tier: settled exactly as the dispatch
/// function settles it (degraded extractive summary, then ack), then recorded.
async fn settle_extractive(
    product: &Product<Arc<dyn Store>>,
    lease: &Lease,
    recorder: &Shared<Recorder>,
) {
    let now = product.clock.now();
    // A store failure leaves the lease to expire and be dispatched again, as in production.
    let _ = stormgate_shared::extractive_settlement::settle_extractive(
        &*product.store,
        product.clock.as_ref(),
        lease,
        stormgate_shared::configured_sinks::Sinks::NONE,
    )
    .await;
    if lease.job.id.kind == SummaryKind::Technician {
        let mut r = recorder.borrow_mut();
        if let Some(t) = r.track(lease.job.id.ticket.as_str()) {
            t.settled = Some(now);
            t.record_wait(lease, now);
            t.extractive_only = t.llm_summary.is_none();
        }
    }
}
