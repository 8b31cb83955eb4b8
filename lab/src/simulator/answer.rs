//! What the simulator answers: a completion, a 429 with its headers, an error with
//! Azure's own message text, and the counters each deployment keeps of its answers.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::config::HeaderVariant;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::llm::{HintSource, ThrottleHint, Usage};
use stormgate_shared::metering::{self, LimitKind, Throttle};
/// Retry-After of an exhausted daily quota.
pub const DAILY_QUOTA_RETRY_AFTER: Duration = Duration::from_secs(86_400);

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
    pub(super) fn from_meter(t: Throttle, headers: HeaderVariant) -> Self {
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
