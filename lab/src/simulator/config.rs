//! The simulator's configuration: deployments with their quotas, latency and faults, and
//! which of Azure's throttle signals a 429 carries.

use serde::{Deserialize, Serialize};

use stormgate_shared::metering::{self, MeterReading, Quota};
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

    pub(super) fn quota(&self, reading: MeterReading) -> Quota {
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
