//! Azure OpenAI metering: the model of the *service's* limiter that the simulator
//! enforces and the governor charges by.
//!
//! The governor reserves and settles every call at [`request_arrival_charge`], because
//! that is what the limiter counts against the deployment's TPM, not the tokens the call
//! is billed for. Where the real limiter's estimate differs from this model, the
//! deployment's `x-ratelimit-remaining-tokens` answers show it and the governor holds
//! the difference back (`Governor::observe_remaining`), with headroom on top.
//!
//! - Each deployment has its own limiter: `tpm` tokens per minute and
//!   [`requests_per_minute`] = 6 per 1,000 TPM.
//! - A request is charged *at arrival* an estimate: prompt characters divided by
//!   [`PROMPT_CHARS_PER_TOKEN`], plus `max_tokens`. The charge is never refunded when
//!   the real `usage` turns out smaller, which is why callers must always set
//!   `max_tokens` and keep it tight.
//! - Tokens are counted over a sliding 60 s window. Requests are evaluated over a short
//!   window (1 s or 10 s), with that window's share of the RPM, so a burst of a whole
//!   minute's requests is rejected even though the minute is not spent.
//! - A rejected request is not charged. The 429 says how long to stay away in every
//!   form Azure has been seen to use: `retry-after`, `retry-after-ms`,
//!   `x-ratelimit-reset-tokens` / `-requests`, and the seconds in the message text.
//!
//! Everything here is pure: time comes in as [`EpochMillis`].

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::llm::{ChatMessage, ChatRequest};
use crate::tokens::Tokens;

/// Characters per token in Azure's arrival estimate of a prompt.
///
/// Azure estimates the prompt "partly from character count". Four characters per
/// token is OpenAI's published rule of thumb for English text; the meter uses it as
/// the arrival charge. Network logs (IPs, interface names, hex) tokenize worse than
/// prose, so the real `usage` of a log-heavy prompt can be *higher* than this
/// estimate: the estimate is what the limiter charges, the usage is what is billed.
pub const PROMPT_CHARS_PER_TOKEN: u64 = 4;

/// Requests per minute per 1,000 tokens per minute, as Azure assigns them.
pub const RPM_PER_1000_TPM: u64 = 6;

/// The window the per-minute token counter looks back over.
pub const TOKEN_WINDOW: Duration = Duration::from_secs(60);

/// Azure's requests-per-minute for a deployment with `tpm` tokens per minute.
pub fn requests_per_minute(tpm: u64) -> u64 {
    tpm.saturating_mul(RPM_PER_1000_TPM) / 1000
}

/// The arrival estimate for a prompt of `prompt_chars` characters and a completion
/// capped at `max_tokens`.
pub fn arrival_charge(prompt_chars: u64, max_tokens: u32) -> Tokens {
    Tokens(prompt_chars.div_ceil(PROMPT_CHARS_PER_TOKEN) + u64::from(max_tokens))
}

/// The prompt part of the arrival estimate for `messages` (every message's content).
pub fn prompt_charge(messages: &[ChatMessage]) -> Tokens {
    let prompt_chars: u64 = messages
        .iter()
        .map(|m| m.content.chars().count() as u64)
        .sum();
    text_charge_of_chars(prompt_chars)
}

/// The prompt part of the arrival estimate for a piece of text added to a prompt.
pub fn text_charge(text: &str) -> Tokens {
    text_charge_of_chars(text.chars().count() as u64)
}

/// The prompt part of the arrival estimate for `chars` characters of prompt.
pub fn text_charge_of_chars(chars: u64) -> Tokens {
    Tokens(chars.div_ceil(PROMPT_CHARS_PER_TOKEN))
}

/// What the limiter charges `request` at arrival: its [`prompt_charge`] plus its
/// `max_tokens`. The governor charges calls exactly this, before and after them.
pub fn request_arrival_charge(request: &ChatRequest) -> Tokens {
    prompt_charge(&request.messages) + Tokens(u64::from(request.max_tokens))
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
    #[serde(default)]
    pub request_window: RequestWindow,
}

impl Quota {
    pub fn new(tpm: u64) -> Self {
        Quota {
            tpm,
            request_window: RequestWindow::default(),
        }
    }

    pub fn rpm(&self) -> u64 {
        requests_per_minute(self.tpm)
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

    /// How long until the short request window has room for one more request.
    fn request_wait(&self, now: EpochMillis) -> Duration {
        let window = self.quota.request_window.duration();
        let limit = self.quota.request_window.limit(self.quota.rpm());
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
    fn rpm_is_six_per_thousand_tpm() {
        assert_eq!(requests_per_minute(1_000), 6);
        assert_eq!(requests_per_minute(150_000), 900);
        assert_eq!(RequestWindow::TenSeconds.limit(900), 150);
        assert_eq!(RequestWindow::OneSecond.limit(900), 15);
        assert_eq!(RequestWindow::OneSecond.limit(6), 1);
    }

    #[test]
    fn the_meter_remembers_the_most_its_window_ever_held() {
        let mut meter = DeploymentMeter::new(Quota::new(10_000));
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
        // Nine characters (not bytes) in all: ⌈9/4⌉ = 3.
        assert_eq!(prompt_charge(&request.messages), Tokens(3));
        assert_eq!(request_arrival_charge(&request), Tokens(53));
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
        let mut meter = DeploymentMeter::new(Quota::new(10_000));
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
        let mut meter = DeploymentMeter::new(Quota::new(10_000));
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
        let mut meter = DeploymentMeter::new(Quota::new(1_000));
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
        let mut meter = DeploymentMeter::new(Quota::new(1_000));
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
            let quota = Quota { tpm, request_window: window };
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
            let mut meter = DeploymentMeter::new(Quota::new(tpm));
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
}
