//! The fault suite's world: a real `redis-server` (AOF on when asked), reached by the
//! handler through a [`FaultProxy`]; the product's Azure OpenAI simulator over HTTP
//! behind a [`RecordingProxy`]; a local ServiceNow Table API when asked; the real
//! `handler` process serving every function; the Functions host ([`FunctionsHost`]) in
//! front of it; a Kafka topic; and a clock the handler reads and the test moves forward.
//!
//! Every fault test ends with the same two verdicts: [`Rig::assert_every_job_settled`]
//! (each accepted ticket's latest version has, for each summary kind ingest queued for
//! it, a stored summary that is final — the LLM one or the degraded fallback — and no job
//! is left in any queue) and [`Rig::assert_nothing_duplicated`] (no customer notice
//! twice, no successful LLM call twice for one ticket version and kind).
//!
//! A module of the test crates (not of the harness library) because it needs the test
//! builds' features: `test-support` (the throwaway redis-server) and `fault-injection`
//! (the movable clock). Each test binary uses part of it.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use stormgate_handlers::config::Settings;
use stormgate_handlers::fault_injection::{AdvancedClock, CLOCK_OFFSET_FILE, DISABLE};
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::redis_connector::RedisConnector;
use stormgate_handlers::system_clock::SystemClock;
use stormgate_lab::simulator::{DeploymentConfig, Faults, Latency, SimulatorConfig};
use stormgate_shared::classifier::Classifier;
use stormgate_shared::clock::{Clock, ManualClock};
use stormgate_shared::governor::Governor;
use stormgate_shared::ingest::{IngestContext, IngestPolicy, MIN_HOLD, prepare};
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::prompts;
use stormgate_shared::store::Store;
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::store::redis::RedisStore;
use stormgate_shared::summary::standing;
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::ticket_id::TicketId;

use stormgate_e2e::fault_proxy::FaultProxy;
use stormgate_e2e::functions_host::FunctionsHost;
use stormgate_e2e::handler_process::HandlerProcess;
use stormgate_e2e::kafka::Topic;
use stormgate_e2e::recording_proxy::{Exchange, RecordingProxy};
use stormgate_e2e::servicenow_server::FakeServiceNow;
use stormgate_e2e::tickets::ticket;
use stormgate_lab::simulator_http::{SimulatorHandle, spawn_simulator};

pub const PREMIUM: &str = "premium-deployment";
pub const STANDARD: &str = "standard-deployment";
/// The key the simulator accepts and the instances send.
pub const API_KEY: &str = "simulator-key";
/// This crate's build of the handler binary, with the test hooks.
pub const HANDLER: &str = env!("CARGO_BIN_EXE_handler-under-test");
/// The handler's store namespace (production's).
const NAMESPACE: &str = "stormgate";
/// host.json `extensions.queues.visibilityTimeout`: a message whose invocation failed
/// is delivered again no sooner than this (`handlers/tests/function_defs.rs` holds the
/// two equal). The host stand-in redelivers at once; a test moves the clock on by this
/// much where the wait matters.
pub const QUEUE_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(15);

/// How a rig is set up.
#[derive(Debug, Clone)]
pub struct RigOptions {
    /// Redis with AOF (`appendfsync everysec`), as the operations guide recommends.
    pub aof: bool,
    /// Faults of both simulated deployments.
    pub faults: Faults,
    /// Each deployment's TPM, for the simulator and the governor alike.
    pub tpm: u64,
    /// Simulated latency of every answer.
    pub latency: Duration,
    /// How long a simulated timeout hangs before its 408.
    pub hang: Duration,
    /// Technician summaries are written back to a local ServiceNow (its Table API).
    pub servicenow: bool,
}

impl Default for RigOptions {
    fn default() -> Self {
        RigOptions {
            aof: false,
            faults: Faults::default(),
            tpm: 1_000_000,
            latency: Duration::from_millis(5),
            hang: Duration::from_secs(1),
            servicenow: false,
        }
    }
}

/// One (ticket, kind) whose summary the test waits for, at the ticket's latest version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExpectedJob {
    pub ticket: TicketId,
    pub number: String,
    pub version: u64,
    pub kind: SummaryKind,
}

/// The running world of one fault test.
pub struct Rig {
    dir: PathBuf,
    pub redis: RedisServer,
    /// Between the instances and Redis.
    pub link: FaultProxy,
    pub simulator: SimulatorHandle,
    /// Between the instances and the simulator: what was sent.
    pub llm: RecordingProxy,
    pub handler: HandlerProcess,
    /// The fleet's governor (its ledger is in Redis), for the test's own admissions.
    pub governor: Governor,
    /// The ServiceNow instance work notes go to, when the options ask for one.
    pub servicenow: Option<FakeServiceNow>,
    pub host: FunctionsHost,
    pub topic: Topic,
    /// The handler's keys, read directly from Redis (not through the link).
    pub store: Arc<RedisStore>,
    /// The handler's environment, for further instances of the app.
    vars: BTreeMap<String, String>,
    clock_file: PathBuf,
    offset: Duration,
}

static RIGS: AtomicU64 = AtomicU64::new(0);

impl Rig {
    /// Starts everything.
    pub async fn start(options: RigOptions) -> Rig {
        let dir = std::env::temp_dir().join(format!(
            "stormgate-faults-{}-{}",
            std::process::id(),
            RIGS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let redis = if options.aof && !is_disabled(REDIS_AOF) {
            let aof = dir.join("aof");
            std::fs::create_dir_all(&aof).unwrap();
            RedisServer::start_with_aof(&aof).unwrap()
        } else {
            RedisServer::start().unwrap()
        };
        let link = FaultProxy::start(redis.port()).await;
        let simulator = spawn_simulator(simulator_config(&options)).await.unwrap();
        let llm = RecordingProxy::start(&simulator.endpoint()).await;
        let clock_file = dir.join("clock-offset-ms");
        std::fs::write(&clock_file, "0").unwrap();

        let servicenow = if options.servicenow {
            Some(FakeServiceNow::start(SERVICENOW_USER, SERVICENOW_PASSWORD).await)
        } else {
            None
        };
        let tpm = options.tpm.to_string();
        // A gpt-4o deployment's ratio, as the simulator meters it: 6 requests per 1,000 tokens.
        let rpm = (options.tpm * 6 / 1_000).to_string();
        let mut overrides = vec![
            ("STORMGATE_REDIS_URL", link.url()),
            ("STORMGATE_PREMIUM_TPM", tpm.clone()),
            ("STORMGATE_STANDARD_TPM", tpm),
            ("STORMGATE_PREMIUM_RPM", rpm.clone()),
            ("STORMGATE_STANDARD_RPM", rpm),
            ("AZURE_OPENAI_ENDPOINT", llm.endpoint()),
            ("AZURE_OPENAI_AUTH", "api_key".into()),
            ("AZURE_OPENAI_API_KEY", API_KEY.into()),
            (CLOCK_OFFSET_FILE, clock_file.to_str().unwrap().into()),
        ];
        if let Some(instance) = &servicenow {
            overrides.extend([
                ("SERVICENOW_INSTANCE_URL", instance.instance_url()),
                ("SERVICENOW_USERNAME", SERVICENOW_USER.into()),
                ("SERVICENOW_PASSWORD", SERVICENOW_PASSWORD.into()),
            ]);
        }
        let overrides: Vec<(&str, &str)> =
            overrides.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut vars = HandlerProcess::settings(&overrides);
        if let Some(list) = product_mechanisms_disabled() {
            vars.insert(DISABLE.into(), list);
        }
        let handler = HandlerProcess::start(HANDLER, vars.clone(), dir.join("handler.log")).await;

        let mut settings = Settings::example();
        settings.redis.url = stormgate_handlers::secrets::Secret::new(link.url());
        settings.premium.tokens_per_minute = options.tpm;
        settings.standard.tokens_per_minute = options.tpm;
        let connector = RedisConnector::new(settings.redis.clone(), None);
        let governor = Governor::new(
            LazyStore::new(Arc::new(connector)).ledger(),
            settings.governor_policy(),
            settings.deployment_budgets(),
        );

        let store = Arc::new(redis.store(NAMESPACE).unwrap());
        Rig {
            dir,
            redis,
            link,
            simulator,
            llm,
            handler,
            governor,
            servicenow,
            host: FunctionsHost::new(),
            topic: Topic::new(),
            store,
            vars,
            clock_file,
            offset: Duration::ZERO,
        }
    }

    /// Another instance of the app, as the host starts when it scales out: the same
    /// settings, Redis, simulator and clock; its own process and port. Killed when dropped.
    pub async fn start_instance(&self, name: &str) -> HandlerProcess {
        let log = self.dir.join(format!("{name}.log"));
        HandlerProcess::start(HANDLER, self.vars.clone(), log).await
    }

    /// Where the test keeps its files (logs, AOF, clock).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The handler process's base URL.
    pub fn handler_url(&self) -> String {
        self.handler.base_url()
    }

    /// The clock every instance reads, for the test's own admissions and deadlines.
    pub fn clock(&self) -> AdvancedClock {
        AdvancedClock::new(Arc::new(SystemClock), self.clock_file.clone())
    }

    /// Spends the current window of `tier`'s deployment, as a burst from another
    /// instance would: dispatch defers that tier's calls until the window frees.
    pub async fn spend_window(&self, tier: Tier) {
        let governor = &self.governor;
        let deployment = governor.deployment_for(tier).unwrap().clone();
        let limits = governor.limits(&deployment).unwrap();
        let admission = governor
            .admit(
                &deployment,
                stormgate_shared::tokens::Tokens(limits.tokens),
                self.clock().now(),
            )
            .await
            .unwrap();
        assert!(
            matches!(
                admission,
                stormgate_shared::governor::Admission::Admitted(_)
            ),
            "{admission:?}"
        );
    }

    /// Every simulated answer takes `extra` longer from now on (zero: back to normal),
    /// so that a test can act while calls are in flight.
    pub fn slow_answers(&self, extra: Duration) {
        for deployment in [PREMIUM, STANDARD] {
            let mut faults = self.simulator.core().faults(deployment).unwrap();
            faults.spike_rate = if extra.is_zero() { 0.0 } else { 1.0 };
            faults.spike_ms = extra.as_millis() as u64;
            self.simulator
                .core()
                .set_faults(deployment, faults)
                .unwrap();
        }
    }

    /// Moves every instance's clock forward by `d` at once.
    pub fn advance_clock(&mut self, d: Duration) {
        self.offset += d;
        let staging = self.clock_file.with_extension("new");
        std::fs::write(&staging, self.offset.as_millis().to_string()).unwrap();
        std::fs::rename(&staging, &self.clock_file).unwrap();
    }

    /// Delivers the topic's records in `range` to `classify` on the handler; asserts 2xx.
    pub async fn classify(&mut self, range: std::ops::Range<usize>) -> Value {
        let answer = self
            .host
            .classify(&self.handler.base_url(), self.topic.records(range))
            .await;
        assert!(
            answer.is_success(),
            "classify failed: {:?} {}\n{}",
            answer.status,
            answer.body,
            self.handler.log_tail(10)
        );
        answer.body["ReturnValue"].clone()
    }

    /// Delivers the range to `classify` as the host does under the function's retry
    /// policy (function.json: without limit; here without the waits, and at most six
    /// times, which these tests' short faults never exceed): again until an invocation
    /// succeeds. Returns its `ReturnValue`. `faults_outage.rs` follows the policy itself.
    pub async fn classify_retrying(&mut self, range: std::ops::Range<usize>) -> Value {
        for _ in 0..=5 {
            let answer = self
                .host
                .classify(&self.handler.base_url(), self.topic.records(range.clone()))
                .await;
            if answer.is_success() {
                return answer.body["ReturnValue"].clone();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!(
            "classify failed six times in a row\n{}",
            self.handler.log_tail(10)
        );
    }

    /// Dispatch ticks and deliveries of their messages, on the handler, until no job is left
    /// in Redis or in the host's queues, at most `rounds` times. Returns the ticks'
    /// reports (`ReturnValue`s).
    ///
    /// When the only jobs left are held (waiting out their coalescing hold), the clock
    /// moves on by the shortest hold ingest makes, as it would while the timer keeps
    /// ticking; such a step does not count as a round.
    pub async fn settle(&mut self, rounds: usize) -> Vec<Value> {
        let mut ticks = Vec::new();
        let most_steps = IngestPolicy::default().coalesce_hold.as_secs() / MIN_HOLD.as_secs() + 1;
        let mut steps = 0;
        let mut round = 0;
        while round < rounds {
            if self.is_idle().await {
                break;
            }
            if steps < most_steps && self.only_held_jobs_left().await {
                self.advance_clock(MIN_HOLD);
                steps += 1;
            } else {
                round += 1;
            }
            // A failed tick is the timer's business: the next one runs 5 s later.
            let tick = self.host.dispatch(&self.handler.base_url()).await;
            if tick.is_success() {
                ticks.push(tick.body["ReturnValue"].clone());
            } else {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let handler = self.handler.base_url();
            self.host.deliver(&handler).await;
        }
        ticks
    }

    /// One `dispatch` timer tick whose answer the test reads (the tick also drains the
    /// ServiceNow outbox); asserts 2xx and returns its `ReturnValue`.
    pub async fn dispatch(&mut self) -> Value {
        let answer = self.host.dispatch(&self.handler.base_url()).await;
        assert!(
            answer.is_success(),
            "dispatch failed: {:?} {}",
            answer.status,
            answer.body
        );
        answer.body["ReturnValue"].clone()
    }

    /// No job pending, held or leased in any tier, and no message waiting in the host.
    pub async fn is_idle(&self) -> bool {
        let mut idle = Tier::LLM.iter().all(|t| self.host.queued(*t) == 0);
        for tier in [Tier::Premium, Tier::Standard, Tier::Extractive] {
            let stats = self.store.queue_stats(tier).await.unwrap();
            idle &= stats.pending == 0 && stats.held == 0 && stats.leased == 0;
        }
        idle
    }

    /// Some jobs are held, and nothing else is pending, leased or waiting in the host.
    async fn only_held_jobs_left(&self) -> bool {
        let mut held = 0;
        let mut other = Tier::LLM
            .iter()
            .map(|t| self.host.queued(*t))
            .sum::<usize>() as u64;
        for tier in [Tier::Premium, Tier::Standard, Tier::Extractive] {
            let stats = self.store.queue_stats(tier).await.unwrap();
            held += stats.held;
            other += stats.pending + stats.leased;
        }
        held > 0 && other == 0
    }

    /// Pending and leased jobs per tier, for failure messages.
    pub async fn queue_report(&self) -> String {
        let mut report = String::new();
        for tier in [Tier::Premium, Tier::Standard, Tier::Extractive] {
            let stats = self.store.queue_stats(tier).await.unwrap();
            report.push_str(&format!(
                "{tier}: {} pending, {} held, {} leased; ",
                stats.pending, stats.held, stats.leased
            ));
        }
        report.push_str(&format!(
            "host queues: {} premium, {} standard, {} poisoned",
            self.host.queued(Tier::Premium),
            self.host.queued(Tier::Standard),
            self.host.poison.len()
        ));
        report
    }

    /// Every job ingest queued for the latest version of each ticket in `events` (the
    /// real parser, classifier and ingest decide which kinds a ticket gets).
    pub fn expected_jobs(events: &[Value]) -> BTreeSet<ExpectedJob> {
        let classifier = Classifier::embedded().unwrap();
        let store = MemoryStore::new();
        let clock = ManualClock::default();
        let policy = IngestPolicy::default();
        let ctx = IngestContext {
            store: &store,
            clock: &clock,
            classifier: &classifier,
            policy: &policy,
        };
        let mut latest: BTreeMap<TicketId, (u64, Vec<ExpectedJob>)> = BTreeMap::new();
        for event in events {
            let record = prepare(ticket(event), &ctx, clock.now()).unwrap();
            let jobs = record
                .jobs
                .iter()
                .map(|j| ExpectedJob {
                    ticket: j.id.ticket.clone(),
                    number: j.number.clone(),
                    version: j.id.version,
                    kind: j.id.kind,
                })
                .collect();
            let entry = latest
                .entry(record.ticket.clone())
                .or_insert((0, Vec::new()));
            if record.version >= entry.0 {
                *entry = (record.version, jobs);
            }
        }
        latest.into_values().flat_map(|(_, jobs)| jobs).collect()
    }

    /// Each expected job ended with its final summary stored (LLM, or the degraded
    /// fallback) for its version, and no job is left anywhere.
    pub async fn assert_every_job_settled(&self, expected: &BTreeSet<ExpectedJob>) {
        assert!(!expected.is_empty(), "a test must expect some jobs");
        let mut unsettled = Vec::new();
        for job in expected {
            match self.store.summary(&job.ticket, job.kind).await.unwrap() {
                None => unsettled.push(format!("{} {}: no summary", job.number, job.kind)),
                Some(s) if s.version != job.version => unsettled.push(format!(
                    "{} {}: summary of version {}, expected {}",
                    job.number, job.kind, s.version, job.version
                )),
                Some(s) if standing(&s) == 0 => unsettled.push(format!(
                    "{} {}: only the instant extractive summary (no LLM summary, no fallback)",
                    job.number, job.kind
                )),
                Some(_) => {}
            }
        }
        assert!(
            unsettled.is_empty() && self.is_idle().await,
            "{} of {} jobs unsettled: {}\nqueues: {}",
            unsettled.len(),
            expected.len(),
            unsettled.join("; "),
            self.queue_report().await
        );
    }

    /// No ticket version was named by two customer notices, and no ticket version and
    /// kind got a successful LLM answer more than `max_llm_answers` times.
    pub fn assert_nothing_duplicated(&self, max_llm_answers: usize) {
        let twice: Vec<_> = notified(&self.host.notices)
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .collect();
        assert!(
            twice.is_empty(),
            "customer notices sent more than once: {twice:?}"
        );

        let answers = llm_answers_per_job(&self.llm.exchanges());
        let over: Vec<_> = answers
            .iter()
            .filter(|(_, n)| **n > max_llm_answers)
            .collect();
        assert!(
            over.is_empty(),
            "LLM answers per (ticket, version marker, kind) above {max_llm_answers}: {over:?}"
        );
    }

    /// Each expected customer job's ticket version is named by a notice on the topic.
    pub fn assert_every_customer_notified(&self, expected: &BTreeSet<ExpectedJob>) {
        let notified = notified(&self.host.notices);
        let missing: Vec<_> = expected
            .iter()
            .filter(|j| j.kind == SummaryKind::Customer)
            .filter(|j| !notified.contains_key(&(j.ticket.as_str().to_owned(), j.version)))
            .map(|j| j.number.clone())
            .collect();
        assert!(missing.is_empty(), "no customer notice for {missing:?}");
    }

    /// Kills Redis (SIGKILL) and starts it again on the same port and files, then waits
    /// until the test's own connection works again.
    pub async fn crash_redis(&mut self) {
        tokio::task::block_in_place(|| self.redis.crash_and_restart().unwrap());
        self.wait_for_store().await;
    }

    /// Waits until the test's connection to Redis answers (it reconnects after a restart).
    pub async fn wait_for_store(&self) {
        let started = Instant::now();
        while self.store.queue_stats(Tier::Premium).await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "Redis never came back"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The read API's answer for `ticket` on the handler, asked again while the handler
    /// answers 503 (its connection to Redis being re-established).
    pub async fn read_api(&self, ticket: &str) -> stormgate_e2e::functions_host::Answer {
        for _ in 0..50 {
            let answer = self.host.summaries(&self.handler.base_url(), ticket).await;
            if answer.status != Some(503) {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the read API answered 503 for 5 s")
    }

    /// Waits up to `timeout` for `condition`, polling.
    pub async fn eventually<F, Fut>(&self, timeout: Duration, what: &str, mut condition: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let started = Instant::now();
        while !condition().await {
            assert!(started.elapsed() < timeout, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.handler.kill();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("fault rig files kept in {}", self.dir.display());
        }
    }
}

/// The mechanisms to switch off, from the test's environment: how the suite is run
/// against a product with one mechanism disabled (docs/operations.md).
/// The harness's own switch: Redis without AOF where a test asks for it.
pub const REDIS_AOF: &str = "redis_aof";

/// Whether the run switched `name` off (a product mechanism or [`REDIS_AOF`]).
pub fn is_disabled(name: &str) -> bool {
    std::env::var(DISABLE)
        .map(|list| list.split(',').any(|n| n.trim() == name))
        .unwrap_or(false)
}

/// The product mechanisms the run switched off (`STORMGATE_TEST_DISABLE` without the
/// harness's own names), for the handler process.
fn product_mechanisms_disabled() -> Option<String> {
    let list = std::env::var(DISABLE).ok()?;
    let product: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty() && *name != REDIS_AOF)
        .collect();
    (!product.is_empty()).then(|| product.join(","))
}

const SERVICENOW_USER: &str = "stormgate.integration";
const SERVICENOW_PASSWORD: &str = "s3cret";

fn simulator_config(options: &RigOptions) -> SimulatorConfig {
    let deployments = [PREMIUM, STANDARD]
        .into_iter()
        .map(|name| {
            let mut d = DeploymentConfig::new(name, "gpt-4o-2024-08-06", options.tpm);
            d.latency = Latency {
                first_token_ms: options.latency.as_millis() as u64,
                per_output_token_ms: 0,
            };
            d.faults = options.faults.clone();
            d
        })
        .collect();
    let mut config = SimulatorConfig::new(11, deployments);
    config.api_key = API_KEY.into();
    config.hang_ms = options.hang.as_millis() as u64;
    config
}

/// The summary kind a request is for, from its system message.
pub fn request_kind(exchange: &Exchange) -> Option<SummaryKind> {
    SummaryKind::ALL.into_iter().find(|kind| {
        exchange
            .system()
            .starts_with(prompts::current(*kind).system)
    })
}

/// Version `version` of the fault tests' ticket `n` (of `outage`): from version 2 on,
/// the short description says `update #N`, so a request shows which version it carries.
pub fn ticket_version(n: u16, outage: u16, version: u64) -> Value {
    let mut event = stormgate_e2e::tickets::event(n, outage, version);
    if version > 1 {
        event["short_description"] =
            Value::from(format!("Site {n} down after fibre cut, update #{version}"));
    }
    event
}

/// A ticket's version as [`ticket_version`] writes it, read back from its block of a
/// request; 1 when absent.
pub fn version_marker(block: &str) -> u64 {
    block
        .split("update #")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(1)
}

/// How many notices named each (ticket sys_id, version): a notice covers the tickets of
/// one affected service and place, listed in its `tickets`.
pub fn notified(notices: &[Value]) -> BTreeMap<(String, u64), usize> {
    let mut named = BTreeMap::new();
    for notice in notices {
        let tickets = notice["tickets"]
            .as_array()
            .unwrap_or_else(|| panic!("a notice without its tickets: {notice}"));
        for ticket in tickets {
            let key = (
                ticket["ticket"].as_str().unwrap().to_owned(),
                ticket["version"].as_u64().unwrap(),
            );
            *named.entry(key).or_default() += 1;
        }
    }
    named
}

/// Successful LLM answers per (ticket number, version marker, kind).
pub fn llm_answers_per_job(exchanges: &[Exchange]) -> BTreeMap<(String, u64, SummaryKind), usize> {
    let mut answers = BTreeMap::new();
    for exchange in exchanges.iter().filter(|e| e.status == Some(200)) {
        let Some(kind) = request_kind(exchange) else {
            continue;
        };
        for (number, block) in exchange.ticket_blocks() {
            *answers
                .entry((number, version_marker(&block), kind))
                .or_default() += 1;
        }
    }
    answers
}
