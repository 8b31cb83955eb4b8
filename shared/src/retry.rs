//! The one retry layer around every LLM call.
//!
//! Retries multiply load exactly when a deployment is already saturated, so stormgate
//! has one layer that retries, and it is this one: the REST client never retries on
//! its own. The layer is bounded (at most [`RetryPolicy::max_attempts`] calls), waits
//! with exponential backoff and full jitter, honours the service's throttle hint
//! without synchronizing clients (hint plus a random spread), sends every retry back
//! through the token governor (a retry spends budget like any call), reports each 429
//! as a fleet-wide cooldown, and gives up at once to the extractive fallback when
//! waiting cannot help: a huge Retry-After (daily quota: the deployment is down),
//! a content-filter verdict, or a rejected request.
//!
//! The policy is a pure step function ([`RetryState::decide`]) so it can be tested
//! without I/O; [`complete_with_retry`] drives it with an injected [`Clock`], RNG and
//! [`RetryGate`] (the governor's "admit this again" port, implemented by [`Governor`]).

use std::time::Duration;

use async_trait::async_trait;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::clock::{Clock, EpochMillis};
use crate::deployment_name::DeploymentName;
use crate::fault_switches::{self, Mechanism};
use crate::governor::{Admission as GovernorAdmission, Governor, ReportedRemaining, Reservation};
use crate::llm::{ChatRequest, Completion, LlmClient, LlmError, RateLimitView};
use crate::metering;
use crate::tokens::Tokens;

/// How hard the layer tries.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Calls per request, the first one included. Never exceeded.
    pub max_attempts: u32,
    /// The backoff ceiling of the first retry; it doubles per retry.
    pub base_backoff: Duration,
    /// The backoff ceiling never grows beyond this.
    pub max_backoff: Duration,
    /// A throttle hint is honoured plus a random spread of up to this much...
    pub hint_spread_min: Duration,
    /// ...or this fraction of the hint, whichever is larger.
    pub hint_spread_fraction: f64,
    /// A hint this long or longer means the deployment is down (daily quota): give up now.
    pub down_threshold: Duration,
    /// How often a retry may be told by the governor to wait before it is abandoned.
    pub max_admission_waits: u32,
    /// How often the first call of an admitted job may be told to wait for its send slot (the
    /// 1 s window of sends) before it is abandoned; the job's deadline bounds the waits too.
    #[serde(default = "default_max_send_waits")]
    pub max_send_waits: u32,
    /// The random spread added to a wait for a send slot: slots free one at a time, so the
    /// waiters need only be told apart, not spread over seconds as after a 429.
    #[serde(default = "default_send_spread")]
    pub send_spread: Duration,
}

fn default_max_send_waits() -> u32 {
    RetryPolicy::default().max_send_waits
}

fn default_send_spread() -> Duration {
    RetryPolicy::default().send_spread
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            hint_spread_min: Duration::from_secs(1),
            hint_spread_fraction: 0.2,
            down_threshold: crate::governor::DOWN_AFTER,
            max_admission_waits: 3,
            max_send_waits: 120,
            send_spread: Duration::from_millis(50),
        }
    }
}

/// Why the layer stopped without a completion. The caller's answer is always the
/// extractive summary; the reason is recorded for metrics and the lab's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum GiveUp {
    /// `max_attempts` calls were made and none succeeded.
    AttemptsExhausted {
        last_error: String,
    },
    /// The next wait would end after the deadline.
    DeadlinePassed,
    /// A throttle hint of `down_threshold` or more: the deployment is treated as down.
    DeploymentDown {
        until: EpochMillis,
    },
    ContentFiltered,
    /// The prompt is too long even after shortening (or no shorter prompt exists).
    ContextLength,
    /// The request itself is wrong (4xx other than 429); retrying cannot help.
    Rejected {
        status: u16,
    },
    /// The governor would not admit the retry in time.
    NotReadmitted,
}

/// What to do after a failed call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Wait this long, get re-admitted, then call again.
    Retry {
        wait: Duration,
        /// Set when the failure was a 429: every instance should stay away this long.
        cooldown: Option<Duration>,
    },
    /// Call once more with a shorter prompt (context length exceeded).
    ShortenPrompt,
    GiveUp {
        reason: GiveUp,
        cooldown: Option<Duration>,
    },
}

/// The retry layer's memory for one request: how many calls were made so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetryState {
    calls: u32,
    shortened: bool,
}

impl RetryState {
    pub fn new() -> Self {
        RetryState::default()
    }

    /// Calls made so far.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// Records that a call is about to be made.
    pub fn record_call(&mut self) {
        self.calls += 1;
    }

    /// Decides what follows the failed call just recorded. `can_shorten` says whether
    /// the caller has a shorter prompt to offer.
    pub fn decide<R: Rng + ?Sized>(
        &mut self,
        policy: &RetryPolicy,
        error: &LlmError,
        can_shorten: bool,
        rng: &mut R,
    ) -> Decision {
        let budget_left =
            self.calls < policy.max_attempts || fault_switches::is_off(Mechanism::RetryBound);
        match error {
            LlmError::ContentFiltered { .. } => give_up(GiveUp::ContentFiltered, None),
            LlmError::Rejected { status, .. } => {
                give_up(GiveUp::Rejected { status: *status }, None)
            }
            LlmError::ContextLength { .. } => {
                if can_shorten && !self.shortened && budget_left {
                    self.shortened = true;
                    Decision::ShortenPrompt
                } else {
                    give_up(GiveUp::ContextLength, None)
                }
            }
            LlmError::RateLimited { hint, .. } => {
                let cooldown = hint
                    .wait
                    .unwrap_or_else(|| backoff_ceiling(policy, self.calls));
                if cooldown >= policy.down_threshold {
                    // The until is filled in by the driver, which knows the time.
                    return give_up(
                        GiveUp::DeploymentDown {
                            until: EpochMillis::ZERO,
                        },
                        Some(cooldown),
                    );
                }
                if !budget_left {
                    return give_up(exhausted(error), Some(cooldown));
                }
                let jittered = full_jitter(policy, self.calls, rng);
                let wait = match hint.wait {
                    Some(hinted) => hinted.max(jittered) + hint_spread(policy, hinted, rng),
                    None => jittered,
                };
                Decision::Retry {
                    wait,
                    cooldown: Some(cooldown),
                }
            }
            LlmError::Server { .. } | LlmError::Timeout | LlmError::Transport { .. } => {
                if budget_left {
                    Decision::Retry {
                        wait: full_jitter(policy, self.calls, rng),
                        cooldown: None,
                    }
                } else {
                    give_up(exhausted(error), None)
                }
            }
        }
    }
}

fn give_up(reason: GiveUp, cooldown: Option<Duration>) -> Decision {
    Decision::GiveUp { reason, cooldown }
}

fn exhausted(error: &LlmError) -> GiveUp {
    GiveUp::AttemptsExhausted {
        last_error: error.to_string(),
    }
}

/// `base * 2^(retry-1)`, capped: the upper end of the jitter window after `calls` calls.
fn backoff_ceiling(policy: &RetryPolicy, calls: u32) -> Duration {
    let doublings = calls.saturating_sub(1).min(20);
    policy
        .base_backoff
        .saturating_mul(1u32 << doublings)
        .min(policy.max_backoff)
}

/// "Full jitter": uniform over `[0, ceiling]`, so clients that failed together retry apart.
fn full_jitter<R: Rng + ?Sized>(policy: &RetryPolicy, calls: u32, rng: &mut R) -> Duration {
    if fault_switches::is_off(Mechanism::RetryJitter) {
        return backoff_ceiling(policy, calls);
    }
    let ceiling = backoff_ceiling(policy, calls).as_millis() as u64;
    Duration::from_millis(rng.random_range(0..=ceiling))
}

/// A random spread added to a service hint so that every client told "7 s" does not
/// come back in the same millisecond.
fn hint_spread<R: Rng + ?Sized>(policy: &RetryPolicy, hinted: Duration, rng: &mut R) -> Duration {
    if fault_switches::is_off(Mechanism::RetryJitter) {
        return Duration::ZERO;
    }
    let spread = policy
        .hint_spread_min
        .max(hinted.mul_f64(policy.hint_spread_fraction.clamp(0.0, 10.0)));
    Duration::from_millis(rng.random_range(0..=spread.as_millis() as u64))
}

/// The governor as the retry layer needs it: admit a retry again, spread a 429 to
/// every instance, and settle what calls really cost. [`Governor`] implements it.
#[async_trait]
pub trait RetryGate: Send + Sync + std::fmt::Debug {
    /// Asks to spend `cost` (estimated prompt + max_tokens) on `deployment` for a call sent now
    /// (a retry, or a call nobody held budget for).
    async fn readmit(
        &self,
        deployment: &DeploymentName,
        cost: Tokens,
        now: EpochMillis,
    ) -> Readmission;
    /// Asks to send, now, the call `held` was admitted for, charging `cost` (the request as
    /// sent): the call takes the hold's place in the windows at the instant it goes out.
    async fn send(&self, held: &Reservation, cost: Tokens, now: EpochMillis) -> Readmission;
    /// Asks to hold `cost` on `deployment` for a call that goes out later (a part of a prompt
    /// added after dispatch, say), as the dispatcher holds for a group: it takes no send slot.
    async fn reserve(
        &self,
        deployment: &DeploymentName,
        cost: Tokens,
        now: EpochMillis,
    ) -> Readmission;
    /// A 429 asked every instance to stay away from `deployment` for `retry_after`.
    async fn report_throttle(
        &self,
        deployment: &DeploymentName,
        retry_after: Duration,
        now: EpochMillis,
    );
    /// Settles an admitted reservation with what the limiter charged the call (zero when the
    /// service refused it before doing any work). `view` is what the deployment said
    /// it has left at `now`, which feeds the governor's view of the deployment.
    async fn settle(
        &self,
        reservation: &Reservation,
        used: Tokens,
        view: RateLimitView,
        now: EpochMillis,
    );
}

/// The governor's answer to a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readmission {
    Admitted(Reservation),
    /// Not yet: the window or a cooldown frees up at this instant.
    WaitUntil(EpochMillis),
    /// The deployment is out (daily quota) until then.
    Down {
        until: EpochMillis,
    },
    /// Not at all (the ledger is unreachable, or the call can never fit).
    Refused,
}

#[async_trait]
impl RetryGate for Governor {
    async fn readmit(
        &self,
        deployment: &DeploymentName,
        cost: Tokens,
        now: EpochMillis,
    ) -> Readmission {
        readmission(
            deployment,
            Governor::send(self, deployment, cost, None, now).await,
        )
    }

    async fn reserve(
        &self,
        deployment: &DeploymentName,
        cost: Tokens,
        now: EpochMillis,
    ) -> Readmission {
        readmission(deployment, self.admit(deployment, cost, now).await)
    }

    async fn send(&self, held: &Reservation, cost: Tokens, now: EpochMillis) -> Readmission {
        readmission(
            &held.deployment,
            Governor::send(self, &held.deployment, cost, Some(held), now).await,
        )
    }

    async fn report_throttle(
        &self,
        deployment: &DeploymentName,
        retry_after: Duration,
        now: EpochMillis,
    ) {
        if let Err(error) = Governor::report_throttle(self, deployment, retry_after, now).await {
            tracing::warn!(%deployment, %error, "could not record a 429 cooldown");
        }
    }

    async fn settle(
        &self,
        reservation: &Reservation,
        used: Tokens,
        view: RateLimitView,
        now: EpochMillis,
    ) {
        if let Err(error) = self.reconcile(reservation, used).await {
            tracing::warn!(deployment = %reservation.deployment, %error, "could not reconcile usage");
        }
        // After the reconciliation, so the window holds the call's real charge when it
        // is compared with what the deployment says is left.
        let reported = ReportedRemaining {
            tokens: view.remaining_tokens,
            requests: view.remaining_requests,
        };
        if let Err(error) = self
            .observe_remaining(&reservation.deployment, reported, now)
            .await
        {
            tracing::warn!(deployment = %reservation.deployment, %error, "could not record the deployment's remaining budget");
        }
    }
}

/// One call the layer made, for logs, tests and the lab's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    pub started_at: EpochMillis,
    /// `None` for success, otherwise the error's text.
    pub error: Option<String>,
    /// The wait chosen before the next call (zero for the last one).
    pub wait_after: Duration,
}

/// Everything a retried request produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryOutcome {
    pub result: Result<Completion, GiveUp>,
    pub calls: Vec<CallRecord>,
}

/// What the layer needs besides the request.
#[derive(Debug, Clone, Copy)]
pub struct RetryEnv<'a> {
    pub client: &'a dyn LlmClient,
    pub gate: &'a dyn RetryGate,
    pub clock: &'a dyn Clock,
    pub policy: &'a RetryPolicy,
    /// The deployment every call goes to: what each attempt is admitted on and each 429
    /// cools down. Typed, so a throttle can never be dropped for a name that does not parse.
    pub deployment: &'a DeploymentName,
    /// No call starts and no wait ends after this instant.
    pub deadline: EpochMillis,
}

/// Offers a shorter version of a request whose prompt exceeded the context window.
pub type Shortener<'a> = dyn Fn(&ChatRequest) -> Option<ChatRequest> + Sync + 'a;

/// Sends `request`, retrying as the policy says.
///
/// The first call spends `admitted`, the reservation dispatch made (`None` when the
/// caller admitted nothing, e.g. a roll-up that will ask now); every further call is
/// re-admitted through `env.gate` for `cost`. `shorten` may offer a shorter prompt once,
/// for a context-length error.
pub async fn complete_with_retry<R: Rng + Send + ?Sized>(
    env: RetryEnv<'_>,
    request: ChatRequest,
    admitted: Option<Reservation>,
    cost: Tokens,
    shorten: Option<&Shortener<'_>>,
    rng: &mut R,
) -> RetryOutcome {
    let mut state = RetryState::new();
    let mut calls = Vec::new();
    let mut request = request;
    // Every call is admitted at the instant it is sent, for the governor's charge of the request
    // exactly as sent: a hold the dispatcher took is replaced by the call, so the windows hold
    // each call at its send time, and a success settles at the same charge (no round trip).
    // A call nobody held for (a roll-up) is charged at least the caller's estimate.
    let charge = |request: &ChatRequest| metering::request_arrival_charge(request);
    let first_charge = if admitted.is_some() {
        charge(&request)
    } else {
        cost.max(charge(&request))
    };
    let first = match admitted {
        Some(held) => send_held(env, held, first_charge, rng).await,
        None => readmit(env, first_charge, rng).await,
    };
    let mut reservation = match first {
        Ok(r) => r,
        Err(reason) => {
            return RetryOutcome {
                result: Err(reason),
                calls,
            };
        }
    };
    loop {
        let started_at = env.clock.now();
        state.record_call();
        let error = match env.client.complete(&request).await {
            Ok(completion) => {
                env.gate
                    .settle(
                        &reservation,
                        metering::request_arrival_charge(&request),
                        completion.rate_limit,
                        env.clock.now(),
                    )
                    .await;
                calls.push(CallRecord {
                    started_at,
                    error: None,
                    wait_after: Duration::ZERO,
                });
                return RetryOutcome {
                    result: Ok(completion),
                    calls,
                };
            }
            Err(error) => error,
        };
        env.gate
            .settle(
                &reservation,
                charged_for_failure(&error, reservation.tokens),
                RateLimitView::default(),
                env.clock.now(),
            )
            .await;
        let shorter = match (&error, shorten) {
            (LlmError::ContextLength { .. }, Some(f)) => f(&request),
            _ => None,
        };
        let decision = state.decide(env.policy, &error, shorter.is_some(), rng);
        let mut record = CallRecord {
            started_at,
            error: Some(error.to_string()),
            wait_after: Duration::ZERO,
        };
        let now = env.clock.now();
        let (wait, next_request) = match decision {
            Decision::GiveUp { reason, cooldown } => {
                if let Some(c) = cooldown {
                    report_throttle(env, c, now).await;
                }
                let reason = match (reason, cooldown) {
                    (GiveUp::DeploymentDown { .. }, Some(c)) => {
                        GiveUp::DeploymentDown { until: now.plus(c) }
                    }
                    (reason, _) => reason,
                };
                calls.push(record);
                return RetryOutcome {
                    result: Err(reason),
                    calls,
                };
            }
            Decision::ShortenPrompt => (Duration::ZERO, shorter),
            Decision::Retry { wait, cooldown } => {
                if let Some(c) = cooldown {
                    report_throttle(env, c, now).await;
                }
                (wait, None)
            }
        };
        record.wait_after = wait;
        calls.push(record);
        if now.plus(wait) > env.deadline {
            return RetryOutcome {
                result: Err(GiveUp::DeadlinePassed),
                calls,
            };
        }
        env.clock.sleep(wait).await;
        if let Some(next) = next_request {
            request = next;
        }
        reservation = match readmit(env, charge(&request), rng).await {
            Ok(r) => r,
            Err(reason) => {
                return RetryOutcome {
                    result: Err(reason),
                    calls,
                };
            }
        };
    }
}

/// The governor's answer to a send as the retry layer reads it.
fn readmission(
    deployment: &DeploymentName,
    answer: Result<GovernorAdmission, crate::governor::GovernorError>,
) -> Readmission {
    match answer {
        Ok(GovernorAdmission::Admitted(reservation)) => Readmission::Admitted(reservation),
        Ok(GovernorAdmission::Deferred { retry_at }) => Readmission::WaitUntil(retry_at),
        Ok(GovernorAdmission::CoolingDown { until }) => Readmission::WaitUntil(until),
        Ok(GovernorAdmission::Down { until }) => Readmission::Down { until },
        Ok(GovernorAdmission::TooLarge { .. }) => Readmission::Refused,
        Err(error) => {
            tracing::warn!(%deployment, %error, "call not admitted: governor unavailable");
            Readmission::Refused
        }
    }
}

/// Tells every instance to stay away from `deployment` (a cooldown, or down).
async fn report_throttle(env: RetryEnv<'_>, wait: Duration, now: EpochMillis) {
    if fault_switches::is_off(Mechanism::FleetCooldown) {
        return;
    }
    env.gate.report_throttle(env.deployment, wait, now).await;
}

/// Waits until the governor admits the call, within the deadline and a bounded
/// number of waits.
///
/// Every worker the governor holds back is told the same instant (the end of the
/// fleet-wide cooldown or of the window), so each waits a random spread beyond it, as
/// for a throttle hint: otherwise they would all call again in the same millisecond,
/// a synchronized wave that meets the next 429 together.
async fn readmit<R: Rng + Send + ?Sized>(
    env: RetryEnv<'_>,
    cost: Tokens,
    rng: &mut R,
) -> Result<Reservation, GiveUp> {
    for _ in 0..=env.policy.max_admission_waits {
        match env
            .gate
            .readmit(env.deployment, cost, env.clock.now())
            .await
        {
            Readmission::Admitted(reservation) => return Ok(reservation),
            Readmission::Refused => return Err(GiveUp::NotReadmitted),
            Readmission::Down { until } => return Err(GiveUp::DeploymentDown { until }),
            Readmission::WaitUntil(at) if at > env.deadline => return Err(GiveUp::DeadlinePassed),
            Readmission::WaitUntil(at) => {
                let now = env.clock.now();
                let held = at.since(now);
                let wait = held + hint_spread(env.policy, held, rng);
                env.clock.sleep(wait.min(env.deadline.since(now))).await;
            }
        }
    }
    Err(GiveUp::NotReadmitted)
}

/// Waits until the governor lets the call `held` was admitted for go out, within the deadline
/// and [`RetryPolicy::max_send_waits`]. The governor answers when the windows have room for
/// it; the budget was held for it, so what it waits for is its turn in the 1 s window of sends,
/// hence a spread of milliseconds, not a throttle hint's. When it never may, the hold is given
/// back.
async fn send_held<R: Rng + Send + ?Sized>(
    env: RetryEnv<'_>,
    held: Reservation,
    cost: Tokens,
    rng: &mut R,
) -> Result<Reservation, GiveUp> {
    let mut outcome = Err(GiveUp::NotReadmitted);
    for _ in 0..=env.policy.max_send_waits {
        match env.gate.send(&held, cost, env.clock.now()).await {
            Readmission::Admitted(reservation) => return Ok(reservation),
            Readmission::Refused => break,
            Readmission::Down { until } => {
                outcome = Err(GiveUp::DeploymentDown { until });
                break;
            }
            Readmission::WaitUntil(at) if at > env.deadline => {
                outcome = Err(GiveUp::DeadlinePassed);
                break;
            }
            Readmission::WaitUntil(at) => {
                let now = env.clock.now();
                let spread = if fault_switches::is_off(Mechanism::RetryJitter) {
                    Duration::ZERO
                } else {
                    let most = u64::try_from(env.policy.send_spread.as_millis()).unwrap_or(0);
                    Duration::from_millis(rng.random_range(0..=most))
                };
                let wait = (at.since(now) + spread).max(Duration::from_millis(1));
                env.clock.sleep(wait.min(env.deadline.since(now))).await;
            }
        }
    }
    env.gate
        .settle(
            &held,
            Tokens::ZERO,
            RateLimitView::default(),
            env.clock.now(),
        )
        .await;
    outcome
}

/// What a failed call cost the deployment's budget. A throttled or rejected request
/// was refused before any work; a timed-out one may have run to completion, so its
/// reservation stays spent.
fn charged_for_failure(error: &LlmError, reserved: Tokens) -> Tokens {
    match error {
        LlmError::Timeout => reserved,
        LlmError::RateLimited { .. }
        | LlmError::Server { .. }
        | LlmError::ContentFiltered { .. }
        | LlmError::ContextLength { .. }
        | LlmError::Rejected { .. }
        | LlmError::Transport { .. } => Tokens::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    use super::*;
    use crate::clock::ManualClock;
    use crate::llm::{HintSource, ThrottleHint, Usage};
    use crate::testing::scripted_llm::ScriptedLlm;

    #[test]
    fn the_retry_layer_and_the_governor_call_a_deployment_down_at_the_same_hint() {
        let governor = crate::governor::GovernorPolicy::default();
        assert_eq!(RetryPolicy::default().down_threshold, governor.down_after);
    }

    /// An LLM endpoint that answers from a script, in order, then fails as a server does.
    fn scripted(script: Vec<Result<Completion, LlmError>>) -> ScriptedLlm {
        ScriptedLlm::new(script).then_failing_with(server_error())
    }

    /// Records what the retry layer asks of the governor; admits unless scripted.
    #[derive(Debug, Default)]
    struct RecordingGate {
        readmits: Mutex<u32>,
        cooldowns: Mutex<Vec<EpochMillis>>,
        reconciled: Mutex<Vec<(Tokens, Tokens)>>,
        answer: Mutex<VecDeque<Readmission>>,
        /// The holds the first calls were sent in place of.
        sends: Mutex<Vec<Tokens>>,
    }

    fn reservation(tokens: Tokens, at: EpochMillis) -> Reservation {
        Reservation {
            id: crate::governor::ReservationId(at.0),
            deployment: "premium".parse().unwrap(),
            tokens,
            admitted_at: at,
            sent: false,
        }
    }

    #[async_trait]
    impl RetryGate for RecordingGate {
        async fn readmit(&self, _: &DeploymentName, cost: Tokens, now: EpochMillis) -> Readmission {
            *self.readmits.lock().unwrap() += 1;
            self.answer
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| Readmission::Admitted(reservation(cost, now)))
        }
        async fn send(&self, held: &Reservation, cost: Tokens, now: EpochMillis) -> Readmission {
            self.sends.lock().unwrap().push(held.tokens);
            Readmission::Admitted(reservation(cost, now))
        }
        async fn reserve(&self, _: &DeploymentName, cost: Tokens, now: EpochMillis) -> Readmission {
            Readmission::Admitted(reservation(cost, now))
        }
        async fn report_throttle(
            &self,
            _: &DeploymentName,
            retry_after: Duration,
            now: EpochMillis,
        ) {
            self.cooldowns.lock().unwrap().push(now.plus(retry_after));
        }

        async fn settle(
            &self,
            reservation: &Reservation,
            used: Tokens,
            _: RateLimitView,
            _: EpochMillis,
        ) {
            self.reconciled
                .lock()
                .unwrap()
                .push((reservation.tokens, used));
        }
    }

    fn completion() -> Completion {
        Completion {
            text: "ok".into(),
            model: "gpt-4o".into(),
            usage: Usage {
                prompt_tokens: 100,
                completion_tokens: 20,
                total_tokens: 120,
            },
            rate_limit: RateLimitView::default(),
        }
    }

    fn server_error() -> LlmError {
        LlmError::Server {
            status: 500,
            message: "boom".into(),
        }
    }

    fn throttled(wait: Option<Duration>) -> LlmError {
        LlmError::RateLimited {
            hint: ThrottleHint {
                wait,
                source: if wait.is_some() {
                    HintSource::RetryAfter
                } else {
                    HintSource::None
                },
            },
            message: "exceeded token rate limit".into(),
        }
    }

    fn request(prompt: &str) -> ChatRequest {
        ChatRequest {
            deployment: "premium".into(),
            messages: vec![crate::llm::ChatMessage {
                role: crate::llm::Role::User,
                content: prompt.into(),
            }],
            max_tokens: 200,
            temperature: 0.2,
        }
    }

    struct Rig {
        client: ScriptedLlm,
        admission: RecordingGate,
        clock: ManualClock,
        policy: RetryPolicy,
        deployment: DeploymentName,
    }

    impl Rig {
        fn new(script: Vec<Result<Completion, LlmError>>) -> Self {
            Rig {
                client: scripted(script),
                admission: RecordingGate::default(),
                clock: ManualClock::starting_at(EpochMillis(1_000_000)),
                policy: RetryPolicy::default(),
                deployment: "premium".parse().unwrap(),
            }
        }

        fn env(&self, deadline_in: Duration) -> RetryEnv<'_> {
            RetryEnv {
                client: &self.client,
                gate: &self.admission,
                clock: &self.clock,
                policy: &self.policy,
                deployment: &self.deployment,
                deadline: self.clock.now().plus(deadline_in),
            }
        }

        async fn run(&self, seed: u64) -> RetryOutcome {
            let mut rng = SmallRng::seed_from_u64(seed);
            complete_with_retry(
                self.env(Duration::from_secs(600)),
                request("p"),
                Some(reservation(Tokens(300), self.clock.now())),
                Tokens(300),
                None,
                &mut rng,
            )
            .await
        }
    }

    #[tokio::test]
    async fn persistent_server_errors_stop_at_the_attempt_bound() {
        let rig = Rig::new(vec![]);
        let outcome = rig.run(1).await;
        assert_eq!(rig.client.calls(), 4);
        assert_eq!(outcome.calls.len(), 4);
        assert!(matches!(
            outcome.result,
            Err(GiveUp::AttemptsExhausted { .. })
        ));
        assert_eq!(*rig.admission.readmits.lock().unwrap(), 3);
    }

    #[tokio::test]
    async fn every_retry_is_admitted_again_and_success_settles_at_the_arrival_charge() {
        let rig = Rig::new(vec![
            Err(LlmError::Timeout),
            Err(server_error()),
            Ok(completion()),
        ]);
        let outcome = rig.run(2).await;
        assert_eq!(outcome.result.map(|c| c.text), Ok("ok".to_owned()));
        assert_eq!(*rig.admission.readmits.lock().unwrap(), 2);
        // The first call went out in place of the dispatcher's hold.
        assert_eq!(*rig.admission.sends.lock().unwrap(), vec![Tokens(300)]);
        // Every call goes out charged what the governor charges the request sent (the
        // one-character prompt's ⌈3/8⌉, 7 tokens of framing for one message, max_tokens 200:
        // 208), not the dispatch's 300, nor the 120 tokens of usage it is billed for. The
        // timeout keeps its charge spent, the 500 releases it, success settles at it.
        assert_eq!(
            *rig.admission.reconciled.lock().unwrap(),
            vec![
                (Tokens(208), Tokens(208)),
                (Tokens(208), Tokens(0)),
                (Tokens(208), Tokens(208))
            ]
        );
    }

    #[tokio::test]
    async fn a_429_sets_the_cooldown_and_the_retry_waits_at_least_the_hint() {
        let rig = Rig::new(vec![
            Err(throttled(Some(Duration::from_secs(7)))),
            Ok(completion()),
        ]);
        let start = rig.clock.now();
        let outcome = rig.run(3).await;
        assert!(outcome.result.is_ok());
        assert_eq!(
            *rig.admission.cooldowns.lock().unwrap(),
            vec![start.plus(Duration::from_secs(7))]
        );
        let waited = outcome.calls[0].wait_after;
        assert!(waited >= Duration::from_secs(7), "{waited:?}");
        assert!(waited <= Duration::from_millis(8_400), "{waited:?}");
        assert_eq!(outcome.calls[1].started_at, start.plus(waited));
    }

    #[tokio::test]
    async fn a_daily_quota_retry_after_gives_up_at_once_and_marks_the_deployment_down() {
        let rig = Rig::new(vec![Err(throttled(Some(Duration::from_secs(86_400))))]);
        let start = rig.clock.now();
        let outcome = rig.run(4).await;
        let until = start.plus(Duration::from_secs(86_400));
        assert_eq!(outcome.result, Err(GiveUp::DeploymentDown { until }));
        assert_eq!(rig.client.calls(), 1);
        assert_eq!(*rig.admission.cooldowns.lock().unwrap(), vec![until]);
        assert_eq!(rig.clock.now(), start, "no time was spent waiting");
    }

    #[tokio::test]
    async fn content_filter_and_bad_requests_are_never_retried() {
        for error in [
            LlmError::ContentFiltered {
                message: "hate".into(),
            },
            LlmError::Rejected {
                status: 401,
                message: "no".into(),
            },
        ] {
            let rig = Rig::new(vec![Err(error)]);
            let outcome = rig.run(5).await;
            assert_eq!(rig.client.calls(), 1);
            assert!(outcome.result.is_err());
            assert_eq!(*rig.admission.readmits.lock().unwrap(), 0);
        }
    }

    #[tokio::test]
    async fn context_length_tries_one_shorter_prompt_then_falls_back() {
        let too_long = || LlmError::ContextLength {
            message: "too long".into(),
        };
        let rig = Rig::new(vec![Err(too_long()), Err(too_long())]);
        let shorten = |r: &ChatRequest| {
            let mut shorter = r.clone();
            shorter.messages[0].content = "short".into();
            Some(shorter)
        };
        let mut rng = SmallRng::seed_from_u64(6);
        let outcome = complete_with_retry(
            rig.env(Duration::from_secs(60)),
            request("a very long prompt"),
            Some(reservation(Tokens(300), rig.clock.now())),
            Tokens(300),
            Some(&shorten),
            &mut rng,
        )
        .await;
        assert_eq!(outcome.result, Err(GiveUp::ContextLength));
        let seen = rig.client.requests();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1].messages[0].content, "short");
    }

    #[tokio::test]
    async fn a_wait_past_the_deadline_ends_in_the_fallback_without_sleeping() {
        let rig = Rig::new(vec![Err(throttled(Some(Duration::from_secs(30))))]);
        let start = rig.clock.now();
        let mut rng = SmallRng::seed_from_u64(7);
        let outcome = complete_with_retry(
            rig.env(Duration::from_secs(10)),
            request("p"),
            Some(reservation(Tokens(300), rig.clock.now())),
            Tokens(300),
            None,
            &mut rng,
        )
        .await;
        assert_eq!(outcome.result, Err(GiveUp::DeadlinePassed));
        assert_eq!(rig.clock.now(), start);
    }

    #[tokio::test]
    async fn the_governor_can_hold_a_retry_back_or_refuse_it() {
        let rig = Rig::new(vec![Err(server_error()), Ok(completion())]);
        let held_until = rig.clock.now().plus(Duration::from_secs(40));
        rig.admission
            .answer
            .lock()
            .unwrap()
            .extend([Readmission::WaitUntil(held_until)]);
        let outcome = rig.run(8).await;
        assert!(outcome.result.is_ok());
        assert!(outcome.calls[1].started_at >= held_until);

        let refused = Rig::new(vec![Err(server_error())]);
        refused
            .admission
            .answer
            .lock()
            .unwrap()
            .push_back(Readmission::Refused);
        assert_eq!(refused.run(9).await.result, Err(GiveUp::NotReadmitted));
        assert_eq!(refused.client.calls(), 1);
    }

    #[tokio::test]
    async fn workers_held_until_one_instant_come_back_spread_over_a_second() {
        // Twenty workers whose retry the governor holds until the same instant (the
        // end of a fleet-wide cooldown) must not all call again at that instant.
        let mut returns = Vec::new();
        for seed in 0..20 {
            let rig = Rig::new(vec![Err(server_error()), Ok(completion())]);
            let held_until = rig.clock.now().plus(Duration::from_secs(5));
            rig.admission
                .answer
                .lock()
                .unwrap()
                .push_back(Readmission::WaitUntil(held_until));
            let outcome = rig.run(seed).await;
            let back = outcome.calls[1].started_at;
            assert!(back >= held_until && back <= held_until.plus(Duration::from_secs(1)));
            returns.push(back.since(held_until).as_millis());
        }
        returns.sort();
        returns.dedup();
        assert!(returns.len() >= 18, "{returns:?}");
    }

    #[test]
    fn full_jitter_spreads_retries_uniformly_over_the_window() {
        // 10,000 workers failing together: their first retry must cover the window
        // evenly (chi-square over 10 buckets), not bunch up.
        let policy = RetryPolicy::default();
        let mut rng = SmallRng::seed_from_u64(42);
        let ceiling = policy.base_backoff.as_millis() as u64;
        let mut buckets = [0u32; 10];
        for _ in 0..10_000 {
            let mut state = RetryState::new();
            state.record_call();
            let Decision::Retry { wait, .. } =
                state.decide(&policy, &server_error(), false, &mut rng)
            else {
                panic!("a first 500 is retried");
            };
            let ms = wait.as_millis() as u64;
            assert!(ms <= ceiling);
            buckets[((ms * 10) / (ceiling + 1)) as usize] += 1;
        }
        let expected = 1_000.0;
        let chi2: f64 = buckets
            .iter()
            .map(|&n| (f64::from(n) - expected).powi(2) / expected)
            .sum();
        // 9 degrees of freedom: p = 0.001 at 27.9.
        assert!(chi2 < 27.9, "buckets {buckets:?}, chi2 {chi2}");
    }

    #[test]
    fn workers_told_the_same_retry_after_do_not_come_back_together() {
        let policy = RetryPolicy::default();
        let mut rng = SmallRng::seed_from_u64(43);
        let hint = Duration::from_secs(7);
        let waits: Vec<u64> = (0..1_000)
            .map(|_| {
                let mut state = RetryState::new();
                state.record_call();
                match state.decide(&policy, &throttled(Some(hint)), false, &mut rng) {
                    Decision::Retry { wait, .. } => wait.as_millis() as u64,
                    other => panic!("unexpected {other:?}"),
                }
            })
            .collect();
        assert!(waits.iter().all(|w| (7_000..=8_400).contains(w)));
        let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
        assert!(
            distinct.len() > 500,
            "only {} distinct waits",
            distinct.len()
        );
        let same_second = waits.iter().filter(|&&w| w < 7_100).count();
        assert!(
            same_second < 150,
            "{same_second} retries within 100 ms of the hint"
        );
    }

    #[test]
    fn the_backoff_window_doubles_up_to_its_cap() {
        let policy = RetryPolicy::default();
        let windows: Vec<_> = (1..=8).map(|c| backoff_ceiling(&policy, c)).collect();
        assert_eq!(windows[0], Duration::from_millis(500));
        assert_eq!(windows[1], Duration::from_millis(1_000));
        assert_eq!(windows[3], Duration::from_millis(4_000));
        assert_eq!(windows[7], Duration::from_secs(20));
    }

    #[tokio::test]
    async fn the_same_seed_replays_the_same_waits() {
        let a = Rig::new(vec![]).run(77).await;
        let b = Rig::new(vec![]).run(77).await;
        let waits = |o: &RetryOutcome| o.calls.iter().map(|c| c.wait_after).collect::<Vec<_>>();
        assert_eq!(waits(&a), waits(&b));
    }

    fn governor() -> Governor {
        Governor::new(
            std::sync::Arc::new(crate::governor::MemoryLedger::new()),
            crate::governor::GovernorPolicy::default(),
            [crate::governor::DeploymentBudget {
                tier: crate::job::Tier::Premium,
                deployment: "premium".parse().unwrap(),
                tpm: 60_000,
                rpm: 360,
            }],
        )
    }

    #[tokio::test]
    async fn a_cooldown_set_by_one_worker_holds_back_the_retry_of_another() {
        let governor = governor();
        let clock = ManualClock::starting_at(EpochMillis(1_000_000));
        let policy = RetryPolicy::default();
        let start = clock.now();
        let premium: DeploymentName = "premium".parse().unwrap();
        let first = governor.readmit(&premium, Tokens(300), start).await;
        let Readmission::Admitted(first) = first else {
            panic!("an idle deployment admits: {first:?}");
        };
        // Worker A is told to stay away 20 s, on its last allowed attempt.
        let a = scripted(vec![Err(throttled(Some(Duration::from_secs(20))))]);
        let last_try = RetryPolicy {
            max_attempts: 1,
            ..policy
        };
        let env_a = RetryEnv {
            client: &a,
            gate: &governor,
            clock: &clock,
            policy: &last_try,
            deployment: &premium,
            deadline: start.plus(Duration::from_secs(120)),
        };
        let mut rng = SmallRng::seed_from_u64(1);
        let outcome_a = complete_with_retry(
            env_a,
            request("a"),
            Some(first),
            Tokens(300),
            None,
            &mut rng,
        )
        .await;
        assert!(matches!(
            outcome_a.result,
            Err(GiveUp::AttemptsExhausted { .. })
        ));
        assert_eq!(clock.now(), start);

        // Worker B asks to call the same deployment right then: it waits out A's cooldown.
        let b = scripted(vec![Ok(completion())]);
        let env_b = RetryEnv {
            client: &b,
            gate: &governor,
            clock: &clock,
            policy: &policy,
            deployment: &premium,
            deadline: start.plus(Duration::from_secs(120)),
        };
        let outcome_b =
            complete_with_retry(env_b, request("b"), None, Tokens(300), None, &mut rng).await;
        assert!(outcome_b.result.is_ok(), "{:?}", outcome_b.result);
        assert!(
            outcome_b.calls[0].started_at >= start.plus(Duration::from_secs(20)),
            "B called at {} during A's cooldown",
            outcome_b.calls[0].started_at
        );
    }
}
