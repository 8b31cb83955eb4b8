//! The Azure OpenAI simulator's core: deployments, metering, faults and deterministic
//! completions, with an in-process [`LlmClient`] on any [`Clock`].
//!
//! [`SimulatorCore::decide`] turns one chat request at one instant into an
//! [`Outcome`]; the storm lab wraps it in [`InProcessSimulator`] (virtual time) and
//! `stormgate simulate` wraps the same core in an HTTP server (real time). Both meter
//! with [`stormgate_shared::metering`], so what the lab measures is what the HTTP tests see.
//!
//! Determinism: every random choice (faults, spikes) comes from a per-deployment
//! SplitMix64 stream seeded from the configuration's seed and the deployment name, so
//! the same sequence of requests gets the same answers.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::rng::{SplitMix64, fnv1a};
use stormgate_shared::clock::{Clock, EpochMillis};
use stormgate_shared::llm::{
    ChatRequest, Completion, HintSource, LlmClient, LlmError, RateLimitView, Role, ThrottleHint,
    Usage,
};
use stormgate_shared::metering::{
    self, Decision, DeploymentMeter, LimitKind, MeterReading, Quota, Throttle,
};

/// Retry-After of an exhausted daily quota.
pub const DAILY_QUOTA_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// Which of Azure's throttle signals a 429 carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum HeaderVariant {
    /// `retry-after`, `retry-after-ms`, `x-ratelimit-reset-*` and the message text.
    #[default]
    Full,
    RetryAfterOnly,
    RetryAfterMsOnly,
    ResetTokensOnly,
    /// No header at all: only the seconds in the message text.
    MessageTextOnly,
}

/// Fault injection for one deployment. Rates are probabilities per request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Fraction of requests answered 500.
    pub server_error_rate: f64,
    /// Fraction of requests that never answer within the client's timeout.
    pub timeout_rate: f64,
    /// Fraction of requests whose latency gets `spike_ms` added.
    pub spike_rate: f64,
    pub spike_ms: u64,
    /// Fraction of requests answered 429 although the meter would admit them
    /// (another tenant of the same quota, say), asking to wait `throttle_retry_after_ms`.
    pub throttle_rate: f64,
    pub throttle_retry_after_ms: u64,
    /// Every request gets a 429 with `retry-after: 86400` (daily quota exhausted).
    pub daily_quota_exhausted: bool,
    /// Fraction of requests rejected by the content filter (400, `content_filter`).
    pub content_filter_rate: f64,
    pub headers: HeaderVariant,
    /// Tokens per minute another application spends on the same deployment: charged
    /// to the token window as time passes (the first request finds a minute's worth),
    /// so `x-ratelimit-remaining-tokens` and the 429s reflect the shared quota.
    pub foreign_tokens_per_minute: u64,
}

/// Response time of a deployment: time to first token plus a time per output token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    pub first_token_ms: u64,
    pub per_output_token_ms: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            first_token_ms: 400,
            per_output_token_ms: 15,
        }
    }
}

/// One simulated deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeploymentConfig {
    pub name: String,
    pub model: String,
    pub tpm: u64,
    /// Requests per minute; the model's ratio in Azure's quota tables when absent
    /// ([`stormgate_shared::model_quota`]), 6 per 1,000 TPM for a model the tables do not know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u64>,
    #[serde(default)]
    pub request_window: metering::RequestWindow,
    #[serde(default)]
    pub latency: Latency,
    /// Prompt + max_tokens beyond this is rejected with `context_length_exceeded`.
    #[serde(default = "default_context_tokens")]
    pub context_tokens: u64,
    #[serde(default)]
    pub faults: Faults,
}

fn default_context_tokens() -> u64 {
    128_000
}

impl DeploymentConfig {
    /// A deployment with default latency, context and no faults.
    pub fn new(name: &str, model: &str, tpm: u64) -> Self {
        DeploymentConfig {
            name: name.to_owned(),
            model: model.to_owned(),
            tpm,
            rpm: None,
            request_window: metering::RequestWindow::default(),
            latency: Latency::default(),
            context_tokens: default_context_tokens(),
            faults: Faults::default(),
        }
    }

    /// The deployment's requests per minute (see [`DeploymentConfig::rpm`]).
    pub fn requests_per_minute(&self) -> u64 {
        self.rpm
            .or_else(|| stormgate_shared::model_quota::default_rpm(&self.model, self.tpm))
            .unwrap_or(self.tpm.saturating_mul(6) / 1_000)
    }

    fn quota(&self, reading: MeterReading) -> Quota {
        Quota {
            tpm: self.tpm,
            rpm: self.requests_per_minute(),
            request_window: self.request_window,
            reading,
        }
    }
}

/// The whole simulator: its deployments, the seed of its randomness, and the
/// credentials the HTTP server accepts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimulatorConfig {
    #[serde(default)]
    pub seed: u64,
    /// The `api-key` header value accepted; `Authorization: Bearer <token>` is
    /// accepted with any non-empty token (the simulator cannot check Entra tokens).
    #[serde(default = "default_api_key")]
    pub api_key: String,
    /// How long a request injected as a timeout is held before the server gives up.
    #[serde(default = "default_hang_ms")]
    pub hang_ms: u64,
    /// How every deployment's limiter reads Azure's metering ([`MeterReading`]).
    #[serde(default)]
    pub reading: MeterReading,
    pub deployments: Vec<DeploymentConfig>,
}

fn default_api_key() -> String {
    "simulator-key".to_owned()
}

fn default_hang_ms() -> u64 {
    120_000
}

impl SimulatorConfig {
    pub fn new(seed: u64, deployments: Vec<DeploymentConfig>) -> Self {
        SimulatorConfig {
            seed,
            api_key: default_api_key(),
            hang_ms: default_hang_ms(),
            reading: MeterReading::default(),
            deployments,
        }
    }
}

/// Counters of one deployment, for tests and reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentStats {
    pub requests: u64,
    pub succeeded: u64,
    pub throttled: u64,
    pub server_errors: u64,
    pub timeouts: u64,
    pub rejected: u64,
    /// What the meter charged at arrival for admitted requests.
    pub charged_tokens: u64,
    /// The most tokens the meter's minute window held at any instant.
    #[serde(default)]
    pub peak_window_tokens: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Arrival instants of the most recent requests (at most [`ARRIVALS_KEPT`]).
    pub recent_arrivals: Vec<EpochMillis>,
    /// Admitted requests whose charge under the simulator's reading exceeded what the
    /// governor charges them ([`metering::request_arrival_charge`]).
    #[serde(default)]
    pub undercharged: u64,
    /// The largest charge under the simulator's reading, in thousandths of the governor's.
    #[serde(default)]
    pub largest_charge_permille: u64,
    /// Strict reading: the largest tokenizer count of a prompt's text (framing left out), in
    /// thousandths of its characters / 4.
    #[serde(default)]
    pub largest_tokenized_permille: u64,
    /// The admitted requests, oldest first: (arrival, charge under the simulator's reading),
    /// at most [`CHARGES_KEPT`]; older ones are dropped and counted in `charges_dropped`.
    #[serde(skip)]
    pub charges: Vec<(EpochMillis, u64)>,
    #[serde(default)]
    pub charges_dropped: u64,
}

/// How many arrival instants a deployment remembers for jitter checks.
pub const ARRIVALS_KEPT: usize = 10_000;

/// How many admitted requests' charges a deployment remembers, for checks of its windows:
/// a whole storm replay's calls on one deployment fit.
pub const CHARGES_KEPT: usize = 200_000;

/// A 429 as the simulator answers it: the meter's numbers and the header variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThrottleAnswer {
    pub limit: LimitKind,
    pub retry_after: Duration,
    pub reset_tokens: Duration,
    pub reset_requests: Duration,
    pub remaining_tokens: u64,
    pub remaining_requests: u64,
    pub headers: HeaderVariant,
}

impl ThrottleAnswer {
    fn from_meter(t: Throttle, headers: HeaderVariant) -> Self {
        ThrottleAnswer {
            limit: t.limit,
            retry_after: t.retry_after,
            reset_tokens: t.reset_tokens,
            reset_requests: t.reset_requests,
            remaining_tokens: t.remaining.tokens,
            remaining_requests: t.remaining.requests,
            headers,
        }
    }

    pub fn retry_after_secs(&self) -> u64 {
        metering::whole_seconds_up(self.retry_after)
    }

    pub fn message(&self) -> String {
        metering::throttle_message(self.limit, self.retry_after_secs())
    }

    /// The HTTP headers of this 429, as `(name, value)`.
    pub fn header_pairs(&self) -> Vec<(&'static str, String)> {
        let secs = self.retry_after_secs().to_string();
        let ms = u64::try_from(self.retry_after.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
            .to_string();
        let reset_tokens = metering::whole_seconds_up(self.reset_tokens.max(self.retry_after));
        let reset_requests = metering::whole_seconds_up(self.reset_requests);
        let remaining = [
            (
                "x-ratelimit-remaining-tokens",
                self.remaining_tokens.to_string(),
            ),
            (
                "x-ratelimit-remaining-requests",
                self.remaining_requests.to_string(),
            ),
        ];
        match self.headers {
            HeaderVariant::Full => {
                let mut h = vec![
                    ("retry-after", secs),
                    ("retry-after-ms", ms),
                    ("x-ratelimit-reset-tokens", reset_tokens.to_string()),
                    ("x-ratelimit-reset-requests", reset_requests.to_string()),
                ];
                h.extend(remaining);
                h
            }
            HeaderVariant::RetryAfterOnly => vec![("retry-after", secs)],
            HeaderVariant::RetryAfterMsOnly => vec![("retry-after-ms", ms)],
            HeaderVariant::ResetTokensOnly => {
                vec![("x-ratelimit-reset-tokens", reset_tokens.to_string())]
            }
            HeaderVariant::MessageTextOnly => Vec::new(),
        }
    }

    /// What a client that reads these headers (most precise first) learns.
    pub fn hint(&self) -> ThrottleHint {
        let secs = Duration::from_secs(self.retry_after_secs());
        let (wait, source) = match self.headers {
            HeaderVariant::Full | HeaderVariant::RetryAfterMsOnly => (
                self.retry_after.max(Duration::from_millis(1)),
                HintSource::RetryAfterMs,
            ),
            HeaderVariant::RetryAfterOnly => (secs, HintSource::RetryAfter),
            HeaderVariant::ResetTokensOnly => (
                Duration::from_secs(metering::whole_seconds_up(
                    self.reset_tokens.max(self.retry_after),
                )),
                HintSource::ResetTokens,
            ),
            HeaderVariant::MessageTextOnly => (secs, HintSource::MessageText),
        };
        ThrottleHint {
            wait: Some(wait),
            source,
        }
    }
}

/// A successful completion and what the deployment has left afterwards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimCompletion {
    pub id: String,
    pub text: String,
    pub model: String,
    pub usage: Usage,
    /// `length` when the text was cut at `max_tokens`, else `stop`.
    pub finish_reason: &'static str,
    pub remaining_tokens: u64,
    pub remaining_requests: u64,
}

/// The simulator's answer to one request, and how long it takes to give it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Success {
        completion: SimCompletion,
        latency: Duration,
    },
    Throttled(ThrottleAnswer),
    ServerError {
        latency: Duration,
    },
    /// The request hangs; the client's timeout decides when it gives up.
    Timeout,
    ContentFiltered,
    ContextLengthExceeded {
        requested: u64,
        limit: u64,
    },
    UnknownDeployment,
}

/// Why a fault update was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimulatorError {
    #[error("no deployment named {0:?}")]
    UnknownDeployment(String),
}

struct DeploymentState {
    config: DeploymentConfig,
    meter: DeploymentMeter,
    rng: SplitMix64,
    stats: DeploymentStats,
    /// The foreign usage is charged up to this instant.
    foreign_charged_to: Option<EpochMillis>,
    /// How the reading counted recent prompts, by a hash of the messages: a client that retries
    /// sends the same prompt again, and the strict reading's tokenizer is the simulator's
    /// costliest step. At most [`READINGS_KEPT`]; emptied when full (it is only a cache).
    readings: std::collections::HashMap<u64, metering::PromptReading>,
}

/// How many prompt readings a deployment keeps (see `DeploymentState::readings`).
const READINGS_KEPT: usize = 4_096;

impl DeploymentState {
    /// The reading of `request`'s prompt, from the cache when the same prompt was read before.
    fn prompt_reading(&mut self, request: &ChatRequest) -> metering::PromptReading {
        let reading = self.meter.quota().reading;
        if reading == MeterReading::Lenient {
            return reading.prompt_reading(request, &self.config.model);
        }
        let key = request.messages.iter().fold(0u64, |hash, m| {
            hash.rotate_left(5)
                ^ fnv1a(format!("{:?}", m.role).as_bytes())
                ^ fnv1a(m.content.as_bytes()).wrapping_mul(31)
        });
        if let Some(found) = self.readings.get(&key) {
            return *found;
        }
        if self.readings.len() >= READINGS_KEPT {
            self.readings.clear();
        }
        let found = reading.prompt_reading(request, &self.config.model);
        self.readings.insert(key, found);
        found
    }

    /// Charges the other application's usage since the last request.
    fn charge_foreign_usage(&mut self, now: EpochMillis) {
        let rate = self.config.faults.foreign_tokens_per_minute;
        if rate == 0 {
            self.foreign_charged_to = None;
            return;
        }
        let from = self
            .foreign_charged_to
            .unwrap_or_else(|| now.minus(metering::TOKEN_WINDOW));
        let elapsed_ms = u64::try_from(now.since(from).as_millis()).unwrap_or(u64::MAX);
        let tokens = rate.saturating_mul(elapsed_ms) / 60_000;
        // Until a whole token has accrued, keep counting from the same instant.
        if tokens > 0 {
            self.meter.charge_foreign(now, tokens);
            self.foreign_charged_to = Some(now);
        }
    }
}

/// Deployments, their meters, their faults and their counters behind one lock.
pub struct SimulatorCore {
    deployments: Mutex<BTreeMap<String, DeploymentState>>,
    reading: MeterReading,
    api_key: String,
    hang: Duration,
}

impl fmt::Debug for SimulatorCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimulatorCore")
            .field("deployments", &self.lock().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SimulatorCore {
    pub fn new(config: &SimulatorConfig) -> Self {
        let deployments = config
            .deployments
            .iter()
            .map(|d| {
                let state = DeploymentState {
                    config: d.clone(),
                    meter: DeploymentMeter::new(d.quota(config.reading)),
                    rng: SplitMix64::new(config.seed ^ fnv1a(d.name.as_bytes())),
                    stats: DeploymentStats::default(),
                    foreign_charged_to: None,
                    readings: std::collections::HashMap::new(),
                };
                (d.name.clone(), state)
            })
            .collect();
        SimulatorCore {
            deployments: Mutex::new(deployments),
            reading: config.reading,
            api_key: config.api_key.clone(),
            hang: Duration::from_millis(config.hang_ms),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, DeploymentState>> {
        // A poisoned lock only means another request panicked mid-update; the
        // counters are still usable, so carry on rather than take the server down.
        self.deployments
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How the deployments' limiters read Azure's metering.
    pub fn reading(&self) -> MeterReading {
        self.reading
    }

    pub fn api_key(&self) -> &str {
        &self.api_key
    }

    /// How long a request injected as a timeout is held.
    pub fn hang(&self) -> Duration {
        self.hang
    }

    pub fn deployment_names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    pub fn faults(&self, deployment: &str) -> Result<Faults, SimulatorError> {
        self.lock()
            .get(deployment)
            .map(|d| d.config.faults.clone())
            .ok_or_else(|| SimulatorError::UnknownDeployment(deployment.to_owned()))
    }

    /// Switches a deployment's fault mode (tests do this between phases).
    pub fn set_faults(&self, deployment: &str, faults: Faults) -> Result<(), SimulatorError> {
        let mut all = self.lock();
        let d = all
            .get_mut(deployment)
            .ok_or_else(|| SimulatorError::UnknownDeployment(deployment.to_owned()))?;
        d.config.faults = faults;
        Ok(())
    }

    pub fn stats(&self, deployment: &str) -> Result<DeploymentStats, SimulatorError> {
        self.lock()
            .get(deployment)
            .map(|d| d.stats.clone())
            .ok_or_else(|| SimulatorError::UnknownDeployment(deployment.to_owned()))
    }

    /// Tokens the deployment's meter holds for the minute before `now`.
    pub fn tokens_in_window(&self, deployment: &str, now: EpochMillis) -> Option<u64> {
        self.lock()
            .get_mut(deployment)
            .map(|d| d.meter.tokens_in_window(now))
    }

    pub fn model(&self, deployment: &str) -> Option<String> {
        self.lock().get(deployment).map(|d| d.config.model.clone())
    }

    /// Decides one request arriving at `now`.
    pub fn decide(&self, request: &ChatRequest, now: EpochMillis) -> Outcome {
        let mut all = self.lock();
        let Some(d) = all.get_mut(&request.deployment) else {
            return Outcome::UnknownDeployment;
        };
        d.stats.requests += 1;
        if d.stats.recent_arrivals.len() >= ARRIVALS_KEPT {
            d.stats.recent_arrivals.remove(0);
        }
        d.stats.recent_arrivals.push(now);
        let outcome = decide_for(d, request, now);
        match &outcome {
            Outcome::Success { completion, .. } => {
                d.stats.succeeded += 1;
                d.stats.prompt_tokens += completion.usage.prompt_tokens;
                d.stats.completion_tokens += completion.usage.completion_tokens;
            }
            Outcome::Throttled(_) => d.stats.throttled += 1,
            Outcome::ServerError { .. } => d.stats.server_errors += 1,
            Outcome::Timeout => d.stats.timeouts += 1,
            Outcome::ContentFiltered | Outcome::ContextLengthExceeded { .. } => {
                d.stats.rejected += 1
            }
            Outcome::UnknownDeployment => {}
        }
        outcome
    }
}

fn decide_for(d: &mut DeploymentState, request: &ChatRequest, now: EpochMillis) -> Outcome {
    d.charge_foreign_usage(now);
    let faults = d.config.faults.clone();
    if faults.daily_quota_exhausted {
        return Outcome::Throttled(ThrottleAnswer {
            limit: LimitKind::Tokens,
            retry_after: DAILY_QUOTA_RETRY_AFTER,
            reset_tokens: DAILY_QUOTA_RETRY_AFTER,
            reset_requests: Duration::ZERO,
            remaining_tokens: 0,
            remaining_requests: 0,
            headers: faults.headers,
        });
    }
    let reading = d.prompt_reading(request);
    let charge = reading.charge(request.max_tokens);
    let requested = charge.get();
    if requested > d.config.context_tokens {
        return Outcome::ContextLengthExceeded {
            requested,
            limit: d.config.context_tokens,
        };
    }
    if d.rng.chance(faults.throttle_rate) {
        let remaining = d.meter.remaining(now);
        let wait = Duration::from_millis(faults.throttle_retry_after_ms.max(1));
        return Outcome::Throttled(ThrottleAnswer {
            limit: LimitKind::Tokens,
            retry_after: wait,
            reset_tokens: wait,
            reset_requests: Duration::ZERO,
            remaining_tokens: remaining.tokens,
            remaining_requests: remaining.requests,
            headers: faults.headers,
        });
    }
    let remaining = match d.meter.try_charge(now, charge) {
        Decision::Throttled(t) => {
            return Outcome::Throttled(ThrottleAnswer::from_meter(t, faults.headers));
        }
        Decision::Admitted(r) => r,
    };
    d.stats.charged_tokens += requested;
    d.stats.peak_window_tokens = d.meter.peak_tokens();
    if let Some(tokenized) = reading.tokenized {
        // The prompt's text alone: the framing is counted (and charged) per message.
        let text = tokenized
            .get()
            .saturating_sub(metering::framing_charge(request.messages.len()).get());
        d.stats.largest_tokenized_permille = d
            .stats
            .largest_tokenized_permille
            .max(text.saturating_mul(1_000) / reading.by_chars.get().max(1));
    }
    let governed = metering::request_arrival_charge(request).get().max(1);
    if requested > governed {
        d.stats.undercharged += 1;
    }
    d.stats.largest_charge_permille = d
        .stats
        .largest_charge_permille
        .max(requested.saturating_mul(1_000) / governed);
    if d.stats.charges.len() >= CHARGES_KEPT {
        d.stats.charges.remove(0);
        d.stats.charges_dropped += 1;
    }
    d.stats.charges.push((now, requested));
    if d.rng.chance(faults.content_filter_rate) {
        return Outcome::ContentFiltered;
    }
    if d.rng.chance(faults.timeout_rate) {
        return Outcome::Timeout;
    }
    let spike = if d.rng.chance(faults.spike_rate) {
        Duration::from_millis(faults.spike_ms)
    } else {
        Duration::ZERO
    };
    if d.rng.chance(faults.server_error_rate) {
        return Outcome::ServerError {
            latency: Duration::from_millis(d.config.latency.first_token_ms) + spike,
        };
    }
    let (text, truncated) = completion_text(request);
    let completion_tokens = approximate_tokens(&text).min(u64::from(request.max_tokens));
    let prompt_tokens = request
        .messages
        .iter()
        .map(|m| approximate_tokens(&m.content) + MESSAGE_OVERHEAD_TOKENS)
        .sum::<u64>();
    let latency = Duration::from_millis(
        d.config.latency.first_token_ms + d.config.latency.per_output_token_ms * completion_tokens,
    ) + spike;
    let id = format!("chatcmpl-{:016x}", d.rng.next_u64());
    Outcome::Success {
        completion: SimCompletion {
            id,
            text,
            model: d.config.model.clone(),
            usage: Usage {
                prompt_tokens,
                completion_tokens,
                total_tokens: prompt_tokens + completion_tokens,
            },
            finish_reason: if truncated { "length" } else { "stop" },
            remaining_tokens: remaining.tokens,
            remaining_requests: remaining.requests,
        },
        latency,
    }
}

/// Tokens a chat message costs beyond its content (role and separators).
const MESSAGE_OVERHEAD_TOKENS: u64 = 4;

/// A fast stand-in for a BPE tokenizer, used for `usage`: every run of letters is one
/// token per four letters started, every run of digits one per three, every other
/// visible character one. On alarm logs it lands within a few per cent of o200k
/// counts, and it costs nothing, which matters when a replay makes ~10⁵ calls.
pub fn approximate_tokens(text: &str) -> u64 {
    let mut tokens = 0u64;
    let mut run_len = 0u64;
    let mut run_kind = CharKind::Space;
    for c in text.chars() {
        let kind = CharKind::of(c);
        if kind != run_kind || kind == CharKind::Other {
            tokens += run_kind.tokens(run_len);
            run_kind = kind;
            run_len = 0;
        }
        run_len += 1;
    }
    tokens + run_kind.tokens(run_len)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CharKind {
    Letter,
    Digit,
    Space,
    Other,
}

impl CharKind {
    fn of(c: char) -> CharKind {
        if c.is_alphabetic() {
            CharKind::Letter
        } else if c.is_ascii_digit() {
            CharKind::Digit
        } else if c.is_whitespace() {
            CharKind::Space
        } else {
            CharKind::Other
        }
    }

    fn tokens(self, run: u64) -> u64 {
        match self {
            CharKind::Letter => run.div_ceil(4),
            CharKind::Digit => run.div_ceil(3),
            CharKind::Space => 0,
            CharKind::Other => run,
        }
    }
}

/// Words that make a log line worth a summary sentence, most telling first.
const SALIENT: &[&str] = &[
    "dying gasp",
    "power",
    "battery",
    "loss of light",
    "los",
    "fibre",
    "fiber",
    "down",
    "bgp",
    "ospf",
    "psu",
    "fail",
    "restored",
    "up",
    "customers",
    "outage",
];

/// A deterministic summary of the request's user content, shaped like a model's answer
/// to the product's prompts: a headline (the ticket's short description, else its first
/// line), the most salient distinct lines with their repeat counts, then the latest line,
/// as many sentences as the system message allows ("at most five sentences") and cut to
/// fit `max_tokens`. Alarm lines are told by their message, without the syslog prefix
/// (timestamp, host, process) that a model would not copy, and the prompt's own markup
/// (the `<ticket>` delimiters) is never quoted. Returns the text and whether it was cut.
pub fn completion_text(request: &ChatRequest) -> (String, bool) {
    let user: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| m.content.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty() && !is_markup(l))
        .collect();
    let limit = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .find_map(|m| sentence_limit(&m.content))
        .unwrap_or(DEFAULT_SENTENCES);
    let sentences = salient_sentences(&user, limit);
    let budget_chars = usize::try_from(request.max_tokens)
        .unwrap_or(usize::MAX)
        .saturating_mul(3);
    let mut text = String::new();
    let mut truncated = false;
    for sentence in sentences {
        let candidate_len = text.len() + sentence.len() + 1;
        if candidate_len > budget_chars {
            truncated = true;
            break;
        }
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&sentence);
    }
    if text.is_empty() {
        text = "No log content was provided; the ticket has no recorded activity.".to_owned();
        let cut: String = text.chars().take(budget_chars.max(1)).collect();
        truncated = cut.len() < text.len();
        text = cut;
    }
    (text, truncated)
}

/// Sentences an answer has when the system message sets no limit.
const DEFAULT_SENTENCES: usize = 5;

/// The limit an "at most N sentences" instruction sets, N in digits or in words.
fn sentence_limit(system: &str) -> Option<usize> {
    const NUMBERS: [&str; 10] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    let lower = system.to_lowercase();
    let (_, rest) = lower.split_once("at most ")?;
    let mut words = rest.split_whitespace();
    let count = words.next()?;
    if !words.next()?.starts_with("sentence") {
        return None;
    }
    count
        .parse()
        .ok()
        .or_else(|| NUMBERS.iter().position(|n| *n == count).map(|i| i + 1))
}

/// A line of the prompt's own markup (a `<ticket …>` or `</ticket>` delimiter), not data.
fn is_markup(line: &str) -> bool {
    line.starts_with('<') && line.ends_with('>')
}

fn salient_sentences(lines: &[&str], limit: usize) -> Vec<String> {
    let Some(first) = lines.first() else {
        return Vec::new();
    };
    let headline = lines
        .iter()
        .find_map(|l| l.strip_prefix("Short description:"))
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .unwrap_or(first);
    // Each line's message is read once; the ranking, the filling and the close share it.
    let messages: Vec<(String, usize)> = lines.iter().map(|l| alarm_message(l)).collect();
    // The latest log line closes the answer; a prompt of facts only has none.
    let latest: Option<&str> = lines
        .iter()
        .zip(&messages)
        .skip(1)
        .rev()
        .find(|(l, _)| !is_fact(l))
        .map(|(_, (message, _))| message.as_str());
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (position, (key, repeats)) in messages.iter().enumerate().skip(1) {
        let entry = counts.entry(key).or_insert((0, position));
        entry.0 += repeats;
    }
    let mut ranked: Vec<(usize, usize, usize, &str)> = counts
        .into_iter()
        // What the headline or the closing sentence says is not said twice.
        .filter(|(shape, _)| !shape.contains(headline) && latest != Some(*shape))
        .filter_map(|(shape, (count, position))| {
            let lower = shape.to_lowercase();
            SALIENT
                .iter()
                .position(|w| lower.contains(w))
                .map(|rank| (rank, position, count, shape))
        })
        .collect();
    ranked.sort();
    let mut out = vec![sentence(headline)];
    let room = limit.saturating_sub(1 + usize::from(latest.is_some()));
    let mut told: Vec<&str> = Vec::with_capacity(room);
    for (_, _, count, shape) in ranked.into_iter().take(room) {
        let line = if count > 1 {
            format!("{shape} (seen {count} times)")
        } else {
            shape.to_owned()
        };
        out.push(sentence(&line));
        told.push(shape);
    }
    // Like a model asked for "at most N sentences", it uses them: when few lines are
    // telling (a customer notice's prompt is facts only), the other facts follow in order.
    // Headings (`Alarm log (repeats collapsed):`) introduce lines, they say nothing.
    for (_, (message, _)) in lines
        .iter()
        .zip(&messages)
        .filter(|(l, _)| !l.ends_with(':'))
    {
        if told.len() >= room {
            break;
        }
        let message = message.as_str();
        if message.contains(headline) || latest == Some(message) || told.contains(&message) {
            continue;
        }
        out.push(sentence(message));
        told.push(message);
    }
    if let Some(latest) = latest.filter(|_| limit > 1) {
        out.push(sentence(&format!("Latest: {latest}")));
    }
    out
}

/// A `Label: value` line of the ticket's facts (`State: New`, `Service/CI: …`), as the
/// product's prompts write them, rather than a line of its log.
fn is_fact(line: &str) -> bool {
    line.split_once(": ").is_some_and(|(label, _)| {
        label.starts_with(|c: char| c.is_ascii_uppercase())
            && label
                .chars()
                .all(|c| c.is_ascii_alphabetic() || matches!(c, ' ' | '/'))
    })
}

/// What an alarm line says and how often the log had it: the message without its
/// syslog prefix (up to the process, `ifmgr[290]: `, and a `%FACILITY-…` mnemonic) or,
/// lacking one, without its leading timestamp; the count from a collapsed line's `[xN]`.
fn alarm_message(line: &str) -> (String, usize) {
    let (line, repeats) = match line.rsplit_once(" [x") {
        Some((text, n)) => match n.strip_suffix(']').and_then(|n| n.parse::<usize>().ok()) {
            Some(n) => (text, n.max(1)),
            None => (line, 1),
        },
        None => (line, 1),
    };
    let message = match line.split_once("]: ") {
        Some((_, rest)) => match rest.strip_prefix('%').and_then(|r| r.split_once(" : ")) {
            Some((_, text)) => text,
            None => rest,
        },
        None => alarm_shape(line),
    };
    (message.chars().take(200).collect(), repeats)
}

/// A log line without its leading timestamp, so repeats of one alarm collapse.
fn alarm_shape(line: &str) -> &str {
    let rest = line.trim_start_matches(|c: char| {
        c.is_ascii_digit() || matches!(c, '-' | ':' | '.' | 'T' | 'Z' | ' ' | '+' | '/')
    });
    if rest.is_empty() { line } else { rest }
}

fn sentence(text: &str) -> String {
    let t = text.trim().trim_end_matches(['.', ';', ',']);
    format!("{t}.")
}

/// The simulator as an in-process [`LlmClient`] on `clock`: requests are metered at
/// the clock's now and answered after the simulated latency, slept on the same clock.
#[derive(Debug, Clone)]
pub struct InProcessSimulator {
    core: Arc<SimulatorCore>,
    clock: Arc<dyn Clock>,
    /// How long the caller waits before calling a hung request a timeout.
    client_timeout: Duration,
}

impl InProcessSimulator {
    pub fn new(core: Arc<SimulatorCore>, clock: Arc<dyn Clock>, client_timeout: Duration) -> Self {
        InProcessSimulator {
            core,
            clock,
            client_timeout,
        }
    }

    pub fn core(&self) -> &Arc<SimulatorCore> {
        &self.core
    }
}

#[async_trait]
impl LlmClient for InProcessSimulator {
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        let outcome = self.core.decide(request, self.clock.now());
        match outcome {
            Outcome::Success {
                completion,
                latency,
            } => {
                self.clock.sleep(latency.min(self.client_timeout)).await;
                if latency > self.client_timeout {
                    return Err(LlmError::Timeout);
                }
                Ok(Completion {
                    text: completion.text,
                    model: completion.model,
                    usage: completion.usage,
                    rate_limit: RateLimitView {
                        remaining_tokens: Some(completion.remaining_tokens),
                        remaining_requests: Some(completion.remaining_requests),
                    },
                })
            }
            Outcome::Throttled(answer) => Err(LlmError::RateLimited {
                hint: answer.hint(),
                message: answer.message(),
            }),
            Outcome::ServerError { latency } => {
                self.clock.sleep(latency.min(self.client_timeout)).await;
                Err(LlmError::Server {
                    status: 500,
                    message: SERVER_ERROR_MESSAGE.to_owned(),
                })
            }
            Outcome::Timeout => {
                self.clock.sleep(self.client_timeout).await;
                Err(LlmError::Timeout)
            }
            Outcome::ContentFiltered => Err(LlmError::ContentFiltered {
                message: CONTENT_FILTER_MESSAGE.to_owned(),
            }),
            Outcome::ContextLengthExceeded { requested, limit } => Err(LlmError::ContextLength {
                message: context_length_message(requested, limit),
            }),
            Outcome::UnknownDeployment => Err(LlmError::Rejected {
                status: 404,
                message: DEPLOYMENT_NOT_FOUND_MESSAGE.to_owned(),
            }),
        }
    }
}

pub const SERVER_ERROR_MESSAGE: &str = "The server had an error while processing your request. \
     Sorry about that! You can retry your request.";
pub const CONTENT_FILTER_MESSAGE: &str = "The response was filtered due to the prompt triggering \
     Azure OpenAI's content management policy. Please modify your prompt and retry.";
pub const DEPLOYMENT_NOT_FOUND_MESSAGE: &str = "The API deployment for this resource does not \
     exist. If you created the deployment within the last 5 minutes, please wait a moment and \
     try again.";

pub fn context_length_message(requested: u64, limit: u64) -> String {
    format!(
        "This model's maximum context length is {limit} tokens. However, you requested \
         {requested} tokens. Please reduce the length of the messages or completion."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormgate_shared::clock::ManualClock;
    use stormgate_shared::llm::ChatMessage;

    fn request(deployment: &str, user: &str, max_tokens: u32) -> ChatRequest {
        ChatRequest {
            deployment: deployment.to_owned(),
            messages: vec![
                ChatMessage {
                    role: Role::System,
                    content: "Summarize the ticket in five sentences.".to_owned(),
                },
                ChatMessage {
                    role: Role::User,
                    content: user.to_owned(),
                },
            ],
            max_tokens,
            temperature: 0.0,
        }
    }

    const LOG: &str = "INC0010001 fibre cut north ring\n\
        2026-01-12T03:00:01Z RP/0/RP0/CPU0:ar1 LINK-3-UPDOWN: Interface HundredGigE0/0/0/1, changed state to Down\n\
        2026-01-12T03:00:02Z RP/0/RP0/CPU0:ar1 LINK-3-UPDOWN: Interface HundredGigE0/0/0/1, changed state to Down\n\
        2026-01-12T03:00:03Z RP/0/RP0/CPU0:ar1 BGP-5-ADJCHANGE: neighbor 10.0.0.2 Down - interface down\n\
        2026-01-12T03:10:00Z technician dispatched";

    #[test]
    fn completion_is_an_extractive_summary_of_the_user_content() {
        let (text, truncated) = completion_text(&request("premium", LOG, 300));
        assert!(!truncated);
        assert!(text.starts_with("INC0010001 fibre cut north ring."));
        assert!(text.contains("changed state to Down (seen 2 times)"));
        assert!(text.contains("BGP-5-ADJCHANGE"));
        assert!(text.ends_with("Latest: technician dispatched."));
        assert!(!text.contains("Summarize the ticket"));
    }

    /// A request built by the product's own prompt code, as the tier workers send it.
    fn product_request(kind: stormgate_shared::job::SummaryKind, body: &str) -> ChatRequest {
        let ticket = stormgate_shared::prompts::TicketText {
            number: "INC3010432".to_owned(),
            body: body.to_owned(),
        };
        stormgate_shared::prompts::ticket_request(
            stormgate_shared::prompts::current(kind),
            "standard",
            &[ticket],
        )
    }

    const TICKET_BODY: &str = "Number: INC3010432\n\
        State: New\n\
        Short description: val-cr43 intermittent packet loss reported\n\
        Alarm log (repeats collapsed):\n\
        RP/0/RP0/CPU0:val-cr43 2026-01-12 11:26:35.837 : ifmgr[290]: %PKT_INFRA-LINK-3-UPDOWN : Interface HundredGigE0/0/0/8, changed state to Down [x11]\n\
        RP/0/RP0/CPU0:val-cr43 2026-01-12 11:27:48.681 : envmon[159]: %PLATFORM-ENVMON-2-PSU_FAIL : Power module 0/PM0 failed: input voltage out of range\n\
        2026-01-12 11:28:55 val-cr43 mib2d[2589]: SNMP_TRAP_LINK_DOWN: ifIndex 515, ifName xe-8 [x13]\n\
        RP/0/RP0/CPU0:val-cr43 2026-01-12 11:36:41.924 : bgp[1050]: %ROUTING-BGP-5-ADJCHANGE : neighbor 10.19.20.80 Up (VRF: default)\n";

    #[test]
    fn completion_tells_alarms_by_their_message_and_never_quotes_the_prompts_markup() {
        let request = product_request(stormgate_shared::job::SummaryKind::Technician, TICKET_BODY);
        let (text, truncated) = completion_text(&request);
        assert!(!truncated);
        assert!(
            text.starts_with("val-cr43 intermittent packet loss reported."),
            "{text}"
        );
        assert!(
            text.contains("Power module 0/PM0 failed: input voltage out of range."),
            "{text}"
        );
        assert!(
            text.contains("Interface HundredGigE0/0/0/8, changed state to Down (seen 11 times)."),
            "{text}"
        );
        assert!(
            text.ends_with("Latest: neighbor 10.19.20.80 Up (VRF: default)."),
            "{text}"
        );
        for quoted in ["<ticket", "</ticket>", "ifmgr[", "2026-01-12", "%PKT_INFRA"] {
            assert!(!text.contains(quoted), "{quoted:?} quoted in {text}");
        }
    }

    #[test]
    fn completion_has_as_many_sentences_as_the_system_message_allows() {
        let sentences = |kind| {
            let (text, _) = completion_text(&product_request(kind, TICKET_BODY));
            text.matches(". ").count() + 1
        };
        // "at most five sentences" and "at most four sentences" in the product's prompts.
        assert_eq!(sentences(stormgate_shared::job::SummaryKind::Technician), 5);
        assert_eq!(sentences(stormgate_shared::job::SummaryKind::Customer), 4);
        // A prompt of facts only (a customer notice's) uses its sentences on the facts.
        let facts = "Number: INC3010432\nState: New\nRegion: valley\nCustomers affected: 2\n\
            Short description: val-cr43 intermittent packet loss reported\n";
        let (notice, _) = completion_text(&product_request(
            stormgate_shared::job::SummaryKind::Customer,
            facts,
        ));
        assert_eq!(
            notice,
            "val-cr43 intermittent packet loss reported. Customers affected: 2. Number: INC3010432. State: New."
        );
        assert_eq!(
            sentence_limit("Plain language, at most 3 sentences."),
            Some(3)
        );
        assert_eq!(
            sentence_limit("Summarize the ticket in five sentences."),
            None
        );
        assert_eq!(sentence_limit("at most five words"), None);
    }

    #[test]
    fn completion_fits_max_tokens_and_says_it_was_cut() {
        let (text, truncated) = completion_text(&request("premium", LOG, 20));
        assert!(truncated);
        assert!(approximate_tokens(&text) <= 20);
    }

    #[tokio::test]
    async fn in_process_client_meters_on_the_clock_and_sleeps_the_latency() {
        let mut d = DeploymentConfig::new("premium", "gpt-4o", 1_000);
        d.latency = Latency {
            first_token_ms: 500,
            per_output_token_ms: 10,
        };
        let core = Arc::new(SimulatorCore::new(&SimulatorConfig::new(7, vec![d])));
        let clock = ManualClock::starting_at(EpochMillis(1_000_000));
        let sim = InProcessSimulator::new(
            core.clone(),
            Arc::new(clock.clone()),
            Duration::from_secs(30),
        );
        let done = sim.complete(&request("premium", LOG, 200)).await.unwrap();
        let expected = 500 + 10 * done.usage.completion_tokens;
        assert_eq!(clock.now(), EpochMillis(1_000_000 + expected));
        assert_eq!(done.model, "gpt-4o");
        // The second call does not fit in the rest of the minute.
        let err = sim
            .complete(&request("premium", LOG, 900))
            .await
            .unwrap_err();
        let LlmError::RateLimited { hint, message } = err else {
            panic!("expected a 429, got {err:?}");
        };
        assert_eq!(hint.source, HintSource::RetryAfterMs);
        assert!(hint.wait.unwrap() > Duration::from_secs(50));
        assert!(message.contains("exceeded token rate limit"));
        assert_eq!(core.stats("premium").unwrap().throttled, 1);
    }

    #[test]
    fn same_seed_same_faults_other_seed_other_faults() {
        let faults = Faults {
            server_error_rate: 0.5,
            ..Faults::default()
        };
        let run = |seed: u64| {
            let mut d = DeploymentConfig::new("standard", "gpt-4o-mini", 10_000_000);
            d.faults = faults.clone();
            let core = SimulatorCore::new(&SimulatorConfig::new(seed, vec![d]));
            (0..64)
                .map(|i| {
                    matches!(
                        core.decide(&request("standard", LOG, 50), EpochMillis(i * 1_000)),
                        Outcome::ServerError { .. }
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        assert!(run(1).iter().any(|e| *e) && run(1).iter().any(|e| !*e));
    }

    #[test]
    fn daily_quota_mode_answers_86400_seconds() {
        let mut d = DeploymentConfig::new("premium", "gpt-4o", 1_000_000);
        d.faults.daily_quota_exhausted = true;
        d.faults.headers = HeaderVariant::RetryAfterOnly;
        let core = SimulatorCore::new(&SimulatorConfig::new(0, vec![d]));
        let Outcome::Throttled(answer) = core.decide(&request("premium", LOG, 50), EpochMillis(0))
        else {
            panic!("expected a 429");
        };
        assert_eq!(
            answer.header_pairs(),
            vec![("retry-after", "86400".to_owned())]
        );
        assert_eq!(answer.hint().wait, Some(Duration::from_secs(86_400)));
    }

    #[test]
    fn another_application_on_the_deployment_shows_in_remaining_tokens_and_429s() {
        let mut d = DeploymentConfig::new("premium", "gpt-4o", 60_000);
        d.faults.foreign_tokens_per_minute = 57_000;
        let core = SimulatorCore::new(&SimulatorConfig::new(0, vec![d]));
        let t0 = EpochMillis(1_000_000);
        let Outcome::Success { completion, .. } = core.decide(&request("premium", LOG, 50), t0)
        else {
            panic!("3,000 tokens are left for us");
        };
        let charge = metering::arrival_charge(
            request("premium", LOG, 50)
                .messages
                .iter()
                .map(|m| m.content.chars().count() as u64)
                .sum(),
            50,
        );
        assert_eq!(completion.remaining_tokens, 3_000 - charge.get());
        // A call larger than what is left is refused, as Azure would.
        assert!(matches!(
            core.decide(&request("premium", LOG, 2_900), t0),
            Outcome::Throttled(_)
        ));
        // Ten seconds on, the other application has used 9,500 more: the window is full.
        let t1 = t0.plus(Duration::from_secs(10));
        assert!(matches!(
            core.decide(&request("premium", LOG, 50), t1),
            Outcome::Throttled(_)
        ));
        assert_eq!(
            core.tokens_in_window("premium", t1),
            Some(57_000 + 9_500 + charge.get())
        );
    }

    #[test]
    fn oversized_requests_exceed_the_context() {
        let mut d = DeploymentConfig::new("premium", "gpt-4o", 1_000_000);
        d.context_tokens = 100;
        let core = SimulatorCore::new(&SimulatorConfig::new(0, vec![d]));
        assert!(matches!(
            core.decide(&request("premium", LOG, 50), EpochMillis(0)),
            Outcome::ContextLengthExceeded { limit: 100, .. }
        ));
    }

    #[test]
    fn approximate_tokens_counts_words_numbers_and_punctuation() {
        assert_eq!(approximate_tokens(""), 0);
        assert_eq!(approximate_tokens("link down"), 2);
        assert_eq!(approximate_tokens("10.0.0.2"), 7);
        assert_eq!(approximate_tokens("HundredGigE0/0/0/1"), 3 + 7);
    }
}
