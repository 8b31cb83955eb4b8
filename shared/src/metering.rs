//! Azure OpenAI metering: the model of the *service's* limiter that the simulator
//! enforces, and the charge the governor admits every call at.
//!
//! What Azure documents (Microsoft Learn, "Manage Azure OpenAI quota", *Understanding rate
//! limits*): a request is charged at arrival "an estimated max processed-token count" from
//! "Prompt text and count", `max_tokens` and `best_of`, added to "a running token count ...
//! reset each minute"; the estimate is "based in part on the character count"; requests are
//! evaluated "over a small period of time, typically 1 or 10 seconds". That leaves room for
//! readings, and the simulator has two ([`MeterReading`]):
//!
//! - **lenient**, this model's first reading: prompt characters / 4 ([`CHARS_PER_TOKEN`]) +
//!   `max_tokens` over a sliding 60 s, requests over one short window (1 s or 10 s);
//! - **strict**, the stricter of every reading we know: the larger of characters / 4 and the
//!   model's tokenizer count (message framing included), + `max_tokens`, over a sliding 60 s
//!   (which bounds every fixed minute too), requests over the 1 s *and* the 10 s window *and*
//!   the sliding minute.
//!
//! The governor charges every call [`request_arrival_charge`]: `max_tokens` plus a prompt
//! charge of [`ADMISSION_TOKENS_PER_CHAR`] per character, which is at least what either
//! reading counts for the prompts stormgate sends (measured on the storm's prompts with the
//! exact tokenizers: `tests/strict_metering.rs`, and by the simulator in strict mode, which
//! counts every request the governor undercharged). Where the real limiter counts more still,
//! the deployment's `x-ratelimit-remaining-tokens` answers show it and the governor holds the
//! difference back (`Governor::observe_remaining`), with headroom on top.
//!
//! - Each deployment has its own limiter: `tpm` tokens per minute and `rpm` requests per
//!   minute; the ratio depends on the model ([`crate::model_quota`]).
//! - The charge is never refunded when the real `usage` turns out smaller, which is why
//!   callers must always set `max_tokens` and keep it tight.
//! - A request is evaluated over short windows, with that window's share of the RPM, so a
//!   burst of a whole minute's requests is rejected even though the minute is not spent.
//! - A rejected request is not charged. The 429 says how long to stay away in every
//!   form Azure has been seen to use: `retry-after`, `retry-after-ms`,
//!   `x-ratelimit-reset-tokens` / `-requests`, and the seconds in the message text.
//!
//! Everything here is pure: time comes in as [`EpochMillis`].

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::job::Job;
use crate::llm::{ChatMessage, ChatRequest};
use crate::tokens::Tokens;

/// Characters per token in the lenient reading of Azure's arrival estimate: OpenAI's rule of
/// thumb for English text. Network logs (IPs, interface names, hex) tokenize worse than
/// prose, so a tokenizer counts log-heavy prompts *higher* than this.
pub const CHARS_PER_TOKEN: u64 = 4;

/// Prompt tokens the governor charges per prompt character, as `(numerator, denominator)`:
/// 3/8 = 0.375, 1.5 × characters / 4, with the framing charged apart ([`framing_charge`]). On
/// the seed storm's prompts the o200k tokenizer counted a prompt's text at most 1.43 ×
/// characters / 4 (the standard deployment's prompts; 1.40 × the premium deployment's):
/// `stormgate replay --strict` prints the figure, and `tests/strict_metering.rs` fails when any
/// prompt of a storm replay is charged more by the strict reading than by the governor.
pub const ADMISSION_TOKENS_PER_CHAR: (u64, u64) = (3, 8);

/// Prompt tokens the governor adds for the framing a tokenizer counts around `messages`
/// messages: each message's start, role and separator, and the reply priming (4 per message
/// + 3, as [`crate::token_estimate::chat_exact`] counts them).
pub fn framing_charge(messages: usize) -> Tokens {
    Tokens(
        messages as u64
            * (crate::token_estimate::TOKENS_PER_MESSAGE + crate::token_estimate::ROLE_TOKENS)
            + crate::token_estimate::REPLY_PRIMING_TOKENS,
    )
}

/// The window the per-minute token counter looks back over.
pub const TOKEN_WINDOW: Duration = Duration::from_secs(60);

/// The lenient reading's arrival estimate for a prompt of `prompt_chars` characters and a
/// completion capped at `max_tokens`.
pub fn arrival_charge(prompt_chars: u64, max_tokens: u32) -> Tokens {
    Tokens(prompt_chars.div_ceil(CHARS_PER_TOKEN) + u64::from(max_tokens))
}

/// The governor's prompt charge for `messages` (every message's content).
pub fn prompt_charge(messages: &[ChatMessage]) -> Tokens {
    let prompt_chars: u64 = messages
        .iter()
        .map(|m| m.content.chars().count() as u64)
        .sum();
    text_charge_of_chars(prompt_chars) + framing_charge(messages.len())
}

/// The governor's prompt charge for a piece of text added to a prompt.
pub fn text_charge(text: &str) -> Tokens {
    text_charge_of_chars(text.chars().count() as u64)
}

/// The governor's prompt charge for `chars` characters of prompt (framing not included).
pub fn text_charge_of_chars(chars: u64) -> Tokens {
    let (numerator, denominator) = ADMISSION_TOKENS_PER_CHAR;
    Tokens(chars.saturating_mul(numerator).div_ceil(denominator))
}

/// What the governor charges `request` at admission and settles it at: its
/// [`prompt_charge`] plus its `max_tokens`. No reading of the limiter counts more for the
/// prompts stormgate sends (see the module docs).
pub fn request_arrival_charge(request: &ChatRequest) -> Tokens {
    prompt_charge(&request.messages) + Tokens(u64::from(request.max_tokens))
}

/// What one LLM call over a group of jobs is charged at admission, computed once (by the
/// dispatcher for the call it admits, carried to the tier worker in the hand-off): every
/// job's prompt estimate (ingest's, an upper bound: the worker's prompt may bound a group's
/// text further) plus the call's `max_tokens`, the largest its jobs carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallCost {
    /// The prompts' charge. Absent from hand-offs queued by versions before it was carried
    /// (read as zero): the worker charges an admitted call what it sends, not this.
    #[serde(default)]
    pub prompt_tokens: Tokens,
    /// The call's `max_tokens`: charged in full, so the call must not ask for more.
    pub max_output_tokens: Tokens,
}

impl CallCost {
    /// The cost of one call serving `jobs`.
    pub fn of_jobs<'a>(jobs: impl IntoIterator<Item = &'a Job>) -> CallCost {
        jobs.into_iter()
            .fold(CallCost::default(), |cost, job| CallCost {
                prompt_tokens: cost.prompt_tokens + job.prompt_tokens,
                max_output_tokens: cost.max_output_tokens.max(job.max_output_tokens),
            })
    }

    /// What admission charges for the call.
    pub fn total(self) -> Tokens {
        self.prompt_tokens + self.max_output_tokens
    }
}

/// How the simulated limiter reads Azure's documentation (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MeterReading {
    /// Characters / 4 + `max_tokens`; requests over one short window.
    #[default]
    Lenient,
    /// The larger of characters / 4 and the tokenizer's count, + `max_tokens`; requests over
    /// 1 s, 10 s and the sliding minute.
    Strict,
}

impl MeterReading {
    /// What this reading charges `request` at arrival on a deployment of `model`.
    pub fn arrival_charge(self, request: &ChatRequest, model: &str) -> Tokens {
        self.prompt_reading(request, model)
            .charge(request.max_tokens)
    }

    /// How this reading counts `request`'s prompt on a deployment of `model`.
    pub fn prompt_reading(self, request: &ChatRequest, model: &str) -> PromptReading {
        let chars: u64 = request
            .messages
            .iter()
            .map(|m| m.content.chars().count() as u64)
            .sum();
        let by_chars = Tokens(chars.div_ceil(CHARS_PER_TOKEN));
        let tokenized = match self {
            MeterReading::Lenient => None,
            // The tokenizer is built into the binary; failing to build it is a broken build,
            // in which case the character reading is all there is.
            MeterReading::Strict => crate::token_estimate::chat_exact(
                crate::token_estimate::Encoding::for_model(model),
                &request.messages,
            )
            .ok(),
        };
        PromptReading {
            by_chars,
            tokenized,
        }
    }
}

/// A prompt as a reading counts it: characters / 4, and the tokenizer's count (framing
/// included) when the reading uses one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptReading {
    pub by_chars: Tokens,
    pub tokenized: Option<Tokens>,
}

impl PromptReading {
    /// The larger count, plus `max_tokens`.
    pub fn charge(self, max_tokens: u32) -> Tokens {
        self.by_chars.max(self.tokenized.unwrap_or(Tokens::ZERO)) + Tokens(u64::from(max_tokens))
    }
}

/// How long the short request window is. Azure evaluates rates "over 1 s or 10 s".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RequestWindow {
    OneSecond,
    #[default]
    TenSeconds,
}

impl RequestWindow {
    pub fn duration(self) -> Duration {
        match self {
            RequestWindow::OneSecond => Duration::from_secs(1),
            RequestWindow::TenSeconds => Duration::from_secs(10),
        }
    }

    /// That window's share of `rpm`, never below one request.
    pub fn limit(self, rpm: u64) -> u64 {
        let per_window = match self {
            RequestWindow::OneSecond => rpm / 60,
            RequestWindow::TenSeconds => rpm / 6,
        };
        per_window.max(1)
    }
}

/// One deployment's quota as the service enforces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quota {
    /// Tokens per minute (Bicep capacity × 1,000).
    pub tpm: u64,
    /// Requests per minute (the model's ratio to the TPM, [`crate::model_quota`]).
    pub rpm: u64,
    #[serde(default)]
    pub request_window: RequestWindow,
    #[serde(default)]
    pub reading: MeterReading,
}

impl Quota {
    /// A lenient quota with the default short request window.
    pub fn new(tpm: u64, rpm: u64) -> Self {
        Quota {
            tpm,
            rpm,
            request_window: RequestWindow::default(),
            reading: MeterReading::default(),
        }
    }

    pub fn rpm(&self) -> u64 {
        self.rpm
    }

    /// The request windows this quota is evaluated over, each with its limit: the configured
    /// short window; under the strict reading the 1 s and 10 s windows and the minute.
    fn request_windows(&self) -> Vec<(Duration, u64)> {
        match self.reading {
            MeterReading::Lenient => vec![(
                self.request_window.duration(),
                self.request_window.limit(self.rpm),
            )],
            MeterReading::Strict => vec![
                (
                    RequestWindow::OneSecond.duration(),
                    RequestWindow::OneSecond.limit(self.rpm),
                ),
                (
                    RequestWindow::TenSeconds.duration(),
                    RequestWindow::TenSeconds.limit(self.rpm),
                ),
                (TOKEN_WINDOW, self.rpm.max(1)),
            ],
        }
    }
}

/// Which limit a request ran into. Azure names them in the 429 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    Tokens,
    Requests,
}

/// What a deployment still has, as the success headers report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remaining {
    /// `x-ratelimit-remaining-tokens`: TPM minus the last minute's charges.
    pub tokens: u64,
    /// `x-ratelimit-remaining-requests`: RPM minus the last minute's requests.
    pub requests: u64,
}

/// A 429 decision with every value Azure may put in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throttle {
    pub limit: LimitKind,
    /// When the request would first be admitted, had nothing else arrived.
    pub retry_after: Duration,
    /// When the token window has room for this charge again (zero if tokens were not the problem).
    pub reset_tokens: Duration,
    /// When the request window has room again (zero if requests were not the problem).
    pub reset_requests: Duration,
    pub remaining: Remaining,
}

impl Throttle {
    /// `retry-after`: whole seconds, rounded up, at least one.
    pub fn retry_after_secs(&self) -> u64 {
        whole_seconds_up(self.retry_after)
    }

    /// `retry-after-ms`, at least one.
    pub fn retry_after_millis(&self) -> u64 {
        u64::try_from(self.retry_after.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// The 429 body's message, worded as Azure words it.
    pub fn message(&self) -> String {
        throttle_message(self.limit, self.retry_after_secs())
    }
}

/// Azure's 429 message for `limit` asking to wait `seconds`.
pub fn throttle_message(limit: LimitKind, seconds: u64) -> String {
    let what = match limit {
        LimitKind::Tokens => "token rate limit",
        LimitKind::Requests => "call rate limit",
    };
    format!(
        "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version \
         2024-10-21 have exceeded {what} of your current OpenAI S0 pricing tier. Please retry \
         after {seconds} seconds. Please go here: https://aka.ms/oai/quotaincrease if you would \
         like to further increase the default rate limit."
    )
}

/// Seconds rounded up, at least one: Azure never says "retry after 0 seconds".
pub fn whole_seconds_up(d: Duration) -> u64 {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    ms.div_ceil(1000).max(1)
}

/// The meter's answer to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    Admitted(Remaining),
    Throttled(Throttle),
}

/// The limiter of one deployment.
#[derive(Debug, Clone)]
pub struct DeploymentMeter {
    quota: Quota,
    /// Charges inside the token window, oldest first.
    charges: VecDeque<(EpochMillis, u64)>,
    charged: u64,
    /// Arrival times of admitted requests inside the last minute, oldest first.
    requests: VecDeque<EpochMillis>,
    /// The most tokens the window has held at any instant.
    peak: u64,
}

impl DeploymentMeter {
    pub fn new(quota: Quota) -> Self {
        DeploymentMeter {
            quota,
            charges: VecDeque::new(),
            charged: 0,
            requests: VecDeque::new(),
            peak: 0,
        }
    }

    /// The most tokens the 60 s window has held at any instant so far. The window only
    /// grows when a charge lands, so the peak is exact, not sampled.
    pub fn peak_tokens(&self) -> u64 {
        self.peak
    }

    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// Tokens charged in the 60 s before `now`.
    pub fn tokens_in_window(&mut self, now: EpochMillis) -> u64 {
        self.expire(now);
        self.charged
    }

    /// What is left at `now`, without charging anything.
    pub fn remaining(&mut self, now: EpochMillis) -> Remaining {
        self.expire(now);
        Remaining {
            tokens: self.quota.tpm.saturating_sub(self.charged),
            requests: self.quota.rpm().saturating_sub(self.requests.len() as u64),
        }
    }

    /// Charges `tokens` that another client of the same deployment used at `now`: they
    /// fill the token window like our own requests' charges (not our request count).
    pub fn charge_foreign(&mut self, now: EpochMillis, tokens: u64) {
        self.expire(now);
        if tokens > 0 {
            self.charges.push_back((now, tokens));
            self.charged = self.charged.saturating_add(tokens);
            self.peak = self.peak.max(self.charged);
        }
    }

    /// Decides a request arriving at `now` that is charged `charge`; admitted requests
    /// are charged, throttled ones are not.
    pub fn try_charge(&mut self, now: EpochMillis, charge: Tokens) -> Decision {
        self.expire(now);
        let reset_requests = self.request_wait(now);
        let reset_tokens = self.token_wait(now, charge.get());
        if reset_requests.is_zero() && reset_tokens.is_zero() {
            self.charges.push_back((now, charge.get()));
            self.charged = self.charged.saturating_add(charge.get());
            self.peak = self.peak.max(self.charged);
            self.requests.push_back(now);
            return Decision::Admitted(self.remaining(now));
        }
        let limit = if reset_tokens >= reset_requests {
            LimitKind::Tokens
        } else {
            LimitKind::Requests
        };
        Decision::Throttled(Throttle {
            limit,
            retry_after: reset_tokens.max(reset_requests),
            reset_tokens,
            reset_requests,
            remaining: self.remaining(now),
        })
    }

    fn expire(&mut self, now: EpochMillis) {
        // An entry leaves the window when `t + window <= now` (written with `plus`
        // so that instants near the epoch do not saturate into the past).
        while let Some(&(t, n)) = self.charges.front() {
            if t.plus(TOKEN_WINDOW) > now {
                break;
            }
            self.charges.pop_front();
            self.charged = self.charged.saturating_sub(n);
        }
        while let Some(&t) = self.requests.front() {
            if t.plus(TOKEN_WINDOW) > now {
                break;
            }
            self.requests.pop_front();
        }
    }

    /// How long until the token window has room for `charge`. A charge larger than
    /// the whole TPM can never fit; it waits for an empty window and is then admitted,
    /// as Azure admits a single request bigger than the per-minute budget.
    fn token_wait(&self, now: EpochMillis, charge: u64) -> Duration {
        let tpm = self.quota.tpm;
        if self.charged == 0 || self.charged.saturating_add(charge) <= tpm {
            return Duration::ZERO;
        }
        let must_free = self.charged.saturating_add(charge).saturating_sub(tpm);
        let mut freed = 0u64;
        let mut last = now;
        for &(t, n) in &self.charges {
            freed = freed.saturating_add(n);
            last = t;
            if freed >= must_free {
                break;
            }
        }
        last.plus(TOKEN_WINDOW).since(now)
    }

    /// How long until every request window has room for one more request.
    fn request_wait(&self, now: EpochMillis) -> Duration {
        self.quota
            .request_windows()
            .into_iter()
            .map(|(window, limit)| self.window_wait(now, window, limit))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// How long until `window` holds fewer than `limit` requests.
    fn window_wait(&self, now: EpochMillis, window: Duration, limit: u64) -> Duration {
        let in_window: Vec<EpochMillis> = self
            .requests
            .iter()
            .copied()
            .filter(|&t| t.plus(window) > now)
            .collect();
        let count = in_window.len() as u64;
        if count < limit {
            return Duration::ZERO;
        }
        // The request that must leave the window for one more to fit.
        let index = usize::try_from(count - limit).unwrap_or(0);
        in_window
            .get(index)
            .map(|t| t.plus(window).since(now))
            .unwrap_or(Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(ms: u64) -> EpochMillis {
        EpochMillis(ms)
    }

    #[test]
    fn short_windows_get_their_share_of_the_rpm() {
        assert_eq!(RequestWindow::TenSeconds.limit(900), 150);
        assert_eq!(RequestWindow::OneSecond.limit(900), 15);
        assert_eq!(RequestWindow::OneSecond.limit(6), 1);
    }

    #[test]
    fn the_meter_remembers_the_most_its_window_ever_held() {
        let mut meter = DeploymentMeter::new(Quota::new(10_000, 60));
        meter.try_charge(at(0), Tokens(3_000));
        meter.try_charge(at(30_000), Tokens(4_000));
        // The first charge leaves the window at 60 s: 4,000 held, 7,000 at the peak.
        meter.try_charge(at(61_000), Tokens(1_000));
        assert_eq!(meter.tokens_in_window(at(61_000)), 5_000);
        assert_eq!(meter.peak_tokens(), 7_000);
    }

    #[test]
    fn a_requests_arrival_charge_counts_every_message_and_its_max_tokens() {
        let request = ChatRequest {
            deployment: "premium".into(),
            messages: vec![
                crate::llm::ChatMessage {
                    role: crate::llm::Role::System,
                    content: "abcdef".into(),
                },
                crate::llm::ChatMessage {
                    role: crate::llm::Role::User,
                    content: "éé€".into(),
                },
            ],
            max_tokens: 50,
            temperature: 0.0,
        };
        // Nine characters (not bytes) in all: ⌈9 × 3/8⌉ = 4, and 11 of framing for two
        // messages; the lenient reading charges ⌈9/4⌉ = 3 and no framing.
        assert_eq!(prompt_charge(&request.messages), Tokens(15));
        assert_eq!(request_arrival_charge(&request), Tokens(65));
        assert_eq!(
            MeterReading::Lenient.arrival_charge(&request, "gpt-4o"),
            Tokens(53)
        );
        assert!(MeterReading::Strict.arrival_charge(&request, "gpt-4o") >= Tokens(53));
        assert_eq!(text_charge("abcde"), Tokens(2));
    }

    #[test]
    fn arrival_charge_is_prompt_chars_over_four_plus_max_tokens() {
        assert_eq!(arrival_charge(4_000, 300), Tokens(1_300));
        assert_eq!(arrival_charge(1, 0), Tokens(1));
        assert_eq!(arrival_charge(0, 50), Tokens(50));
    }

    #[test]
    fn token_limit_throttles_with_wait_until_the_oldest_charge_leaves() {
        let mut meter = DeploymentMeter::new(Quota::new(10_000, 60));
        assert!(matches!(
            meter.try_charge(at(0), Tokens(6_000)),
            Decision::Admitted(_)
        ));
        assert!(matches!(
            meter.try_charge(at(5_000), Tokens(3_000)),
            Decision::Admitted(_)
        ));
        let Decision::Throttled(t) = meter.try_charge(at(20_000), Tokens(2_000)) else {
            panic!("the minute is spent");
        };
        assert_eq!(t.limit, LimitKind::Tokens);
        assert_eq!(t.retry_after, Duration::from_secs(40));
        assert_eq!(t.reset_tokens, Duration::from_secs(40));
        assert_eq!(t.remaining.tokens, 1_000);
        assert!(t.message().contains("exceeded token rate limit"));
        assert!(t.message().contains("Please retry after 40 seconds"));
        // Once the first charge has left the window the request fits.
        assert!(matches!(
            meter.try_charge(at(60_000), Tokens(2_000)),
            Decision::Admitted(_)
        ));
    }

    #[test]
    fn a_burst_of_a_minutes_requests_is_rejected_by_the_short_window() {
        // 10,000 TPM = 60 RPM = 10 requests per 10 s.
        let mut meter = DeploymentMeter::new(Quota::new(10_000, 60));
        for i in 0..10 {
            assert!(matches!(
                meter.try_charge(at(i * 100), Tokens(10)),
                Decision::Admitted(_)
            ));
        }
        let Decision::Throttled(t) = meter.try_charge(at(1_000), Tokens(10)) else {
            panic!("eleventh request in 10 s");
        };
        assert_eq!(t.limit, LimitKind::Requests);
        assert_eq!(t.reset_requests, Duration::from_secs(9));
        assert_eq!(t.reset_tokens, Duration::ZERO);
        assert!(t.message().contains("exceeded call rate limit"));
        assert!(matches!(
            meter.try_charge(at(10_000), Tokens(10)),
            Decision::Admitted(_)
        ));
    }

    #[test]
    fn rejected_requests_are_not_charged() {
        let mut meter = DeploymentMeter::new(Quota::new(1_000, 6));
        assert!(matches!(
            meter.try_charge(at(0), Tokens(900)),
            Decision::Admitted(_)
        ));
        for i in 1..5 {
            assert!(matches!(
                meter.try_charge(at(i), Tokens(500)),
                Decision::Throttled(_)
            ));
        }
        assert_eq!(meter.tokens_in_window(at(10)), 900);
    }

    #[test]
    fn a_request_larger_than_the_tpm_is_admitted_into_an_empty_window() {
        let mut meter = DeploymentMeter::new(Quota::new(1_000, 6));
        assert!(matches!(
            meter.try_charge(at(0), Tokens(5_000)),
            Decision::Admitted(_)
        ));
        assert!(matches!(
            meter.try_charge(at(1), Tokens(1)),
            Decision::Throttled(_)
        ));
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(whole_seconds_up(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds_up(Duration::from_millis(1_001)), 2);
        assert_eq!(whole_seconds_up(Duration::ZERO), 1);
    }

    proptest! {
        /// Whatever arrives, the meter never lets more than the TPM into any 60 s
        /// window (except a single oversized request into an empty one) nor more than
        /// the short window's share of the RPM into any short window.
        #[test]
        fn admitted_load_never_exceeds_the_quota(
            tpm in 1_000u64..200_000,
            arrivals in prop::collection::vec((0u64..3_000, 1u64..20_000), 1..300),
            one_second in any::<bool>(),
        ) {
            let window = if one_second { RequestWindow::OneSecond } else { RequestWindow::TenSeconds };
            let quota = Quota { request_window: window, ..Quota::new(tpm, tpm * 6 / 1_000) };
            let mut meter = DeploymentMeter::new(quota);
            let mut now = 0u64;
            let mut admitted: Vec<(u64, u64)> = Vec::new();
            for (gap, charge) in arrivals {
                now += gap;
                if let Decision::Admitted(_) = meter.try_charge(at(now), Tokens(charge)) {
                    admitted.push((now, charge));
                }
            }
            let short = u64::try_from(window.duration().as_millis()).unwrap();
            for &(start, _) in &admitted {
                let in_minute: Vec<u64> = admitted.iter()
                    .filter(|(t, _)| *t >= start && *t < start + 60_000)
                    .map(|(_, c)| *c).collect();
                let sum: u64 = in_minute.iter().sum();
                prop_assert!(sum <= tpm || in_minute.len() == 1, "{sum} > {tpm}");
                let in_short = admitted.iter().filter(|(t, _)| *t >= start && *t < start + short).count() as u64;
                prop_assert!(in_short <= window.limit(quota.rpm()));
            }
        }

        /// A throttled request retried exactly after its retry-after (with nothing else
        /// arriving) is admitted: the hint is never too short.
        #[test]
        fn retrying_after_the_hint_is_admitted(
            tpm in 1_000u64..100_000,
            arrivals in prop::collection::vec((0u64..2_000, 1u64..5_000), 1..200),
            probe in 1u64..5_000,
        ) {
            let mut meter = DeploymentMeter::new(Quota::new(tpm, tpm * 6 / 1_000));
            let mut now = 0u64;
            for (gap, charge) in arrivals {
                now += gap;
                let _ = meter.try_charge(at(now), Tokens(charge.min(tpm)));
            }
            let probe = probe.min(tpm);
            if let Decision::Throttled(t) = meter.try_charge(at(now), Tokens(probe)) {
                let later = at(now).plus(t.retry_after);
                prop_assert!(matches!(meter.try_charge(later, Tokens(probe)), Decision::Admitted(_)));
            }
        }
    }

    #[test]
    fn strict_reading_evaluates_requests_over_one_second_ten_seconds_and_the_minute() {
        // 60 RPM: at most 1 a second, 10 per 10 s, 60 a minute.
        let quota = Quota {
            reading: MeterReading::Strict,
            ..Quota::new(1_000_000, 60)
        };
        let mut meter = DeploymentMeter::new(quota);
        assert!(matches!(
            meter.try_charge(at(0), Tokens(10)),
            Decision::Admitted(_)
        ));
        let Decision::Throttled(t) = meter.try_charge(at(500), Tokens(10)) else {
            panic!("a second request in the same second");
        };
        assert_eq!(t.reset_requests, Duration::from_millis(500));
        for second in 1..10 {
            assert!(matches!(
                meter.try_charge(at(second * 1_000), Tokens(10)),
                Decision::Admitted(_)
            ));
        }
        // Ten in the last 10 s: the eleventh waits for the first to leave.
        assert!(matches!(
            meter.try_charge(at(9_999), Tokens(10)),
            Decision::Throttled(_)
        ));
        assert!(matches!(
            meter.try_charge(at(10_000), Tokens(10)),
            Decision::Admitted(_)
        ));
    }

    #[test]
    fn strict_reading_charges_the_tokenizer_count_when_it_exceeds_characters_over_four() {
        // Hex and digits tokenize worse than four characters a token.
        let log = "0x7f3a9c2e 10.24.113.7 ge-0/0/12.3 f4:3a:9c:2e:11:07 ".repeat(40);
        let request = ChatRequest {
            deployment: "premium".into(),
            messages: vec![crate::llm::ChatMessage {
                role: crate::llm::Role::User,
                content: log,
            }],
            max_tokens: 100,
            temperature: 0.0,
        };
        let lenient = MeterReading::Lenient.arrival_charge(&request, "gpt-4o");
        let strict = MeterReading::Strict.arrival_charge(&request, "gpt-4o");
        assert!(strict > lenient, "{strict:?} <= {lenient:?}");
    }
}
