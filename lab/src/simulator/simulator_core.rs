//! The simulator's core: deployments behind one lock, each with its meter, faults and
//! counters; [`SimulatorCore::decide`] turns one request at one instant into an answer.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::answer::{
    ARRIVALS_KEPT, CHARGES_KEPT, DAILY_QUOTA_RETRY_AFTER, DeploymentStats, Outcome, SimCompletion,
    SimulatorError, ThrottleAnswer,
};
use super::completion::{MESSAGE_OVERHEAD_TOKENS, approximate_tokens, completion_text};
use super::config::{DeploymentConfig, Faults, SimulatorConfig};
use crate::rng::{SplitMix64, fnv1a};
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::llm::{ChatRequest, Usage};
use stormgate_shared::metering::{self, Decision, DeploymentMeter, LimitKind, MeterReading};
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
