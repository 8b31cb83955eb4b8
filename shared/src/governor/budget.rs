//! A deployment's budget: its name, its TPM, and the window limits the ledger enforces.
//!
//! Everything here is arithmetic on configuration, parsed once: a [`DeploymentName`]
//! that is safe inside a Redis key, a [`Headroom`] fraction that cannot be nonsense, a
//! [`ShortWindow`] that divides 10 s (which is what makes the 10 s and 60 s bounds follow
//! from the short-window bound, see the module docs of [`crate::governor`]). The name and
//! the headroom are values of their own ([`crate::deployment_name`], [`crate::headroom`]):
//! the operators' controls name them too.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::deployment_name::DeploymentName;
use crate::headroom::Headroom;
use crate::job::Tier;
use crate::tokens::Tokens;

/// The span of Azure's token counter, which the ledger keeps its log for.
pub const MINUTE_MS: u64 = 60_000;
const AZURE_REQUEST_WINDOW_MS: u64 = 10_000;

/// The shortest window Azure evaluates requests over ("typically 1 or 10 seconds", Microsoft Learn,
/// "Manage Azure OpenAI quota", *Understanding rate limits*). Calls are sent within
/// [`WindowLimits::send_requests`] per any such window (see [`crate::governor`]).
pub const SEND_WINDOW_MS: u64 = 1_000;

/// The sliding window admissions are counted over: a whole number of milliseconds
/// that divides 10 s exactly (250 ms, 500 ms, 1 s, 2 s, 5 s, 10 s, ...), so that both
/// Azure's 10 s request window and the minute are whole numbers of windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(into = "u64")]
pub struct ShortWindow(u64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the governor window must divide 10000 ms exactly, got {0} ms")]
pub struct ShortWindowError(pub u64);

impl ShortWindow {
    /// Azure evaluates rates over 1 s or 10 s windows; 10 s holds calls of up to
    /// [`BurstFactor`] sixths of the TPM while still forbidding a minute's budget in one burst.
    pub const DEFAULT: ShortWindow = ShortWindow(10_000);

    pub fn from_millis(ms: u64) -> Result<ShortWindow, ShortWindowError> {
        if ms > 0 && AZURE_REQUEST_WINDOW_MS.is_multiple_of(ms) {
            Ok(ShortWindow(ms))
        } else {
            Err(ShortWindowError(ms))
        }
    }

    pub fn as_millis(self) -> u64 {
        self.0
    }

    pub fn as_duration(self) -> Duration {
        Duration::from_millis(self.0)
    }

    /// How many windows make a minute.
    pub fn per_minute(self) -> u64 {
        MINUTE_MS / self.0
    }
}

impl Default for ShortWindow {
    fn default() -> Self {
        ShortWindow::DEFAULT
    }
}

impl From<ShortWindow> for u64 {
    fn from(w: ShortWindow) -> u64 {
        w.0
    }
}

impl<'de> Deserialize<'de> for ShortWindow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ShortWindow::from_millis(u64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// One deployment's quota as configured (`STORMGATE_<TIER>_TPM` and `_RPM`), and the tier it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentBudget {
    pub tier: Tier,
    pub deployment: DeploymentName,
    /// Tokens per minute (Bicep capacity × 1000).
    pub tpm: u64,
    /// Requests per minute Azure grants the deployment: its model's ratio to the TPM, which varies
    /// (1 per 1,000 TPM for the gpt-4.1 family, 6 for gpt-4o; [`crate::model_quota`]).
    pub rpm: u64,
}

impl DeploymentBudget {
    /// Requests per minute Azure grants this deployment.
    pub fn rpm(&self) -> u64 {
        self.rpm
    }

    /// This budget at another TPM: Azure grants requests in proportion to tokens (the model's
    /// ratio), so an operator's TPM override scales the RPM with it, rounding down.
    pub fn with_tpm(&self, tpm: u64) -> DeploymentBudget {
        let rpm = if self.tpm == 0 {
            0
        } else {
            u64::try_from(u128::from(self.rpm) * u128::from(tpm) / u128::from(self.tpm))
                .unwrap_or(u64::MAX)
        };
        DeploymentBudget {
            tpm,
            rpm,
            ..self.clone()
        }
    }
}

/// How many even shares of the minute's tokens one short window may hold, at least 1.
///
/// Azure counts tokens per minute and requests over short windows. With a factor of 1
/// every short window holds exactly its even share (`TPM/6` per 10 s): calls of a sizeable
/// fraction of that share then fit once per window and the rest of it is lost to
/// fragmentation (a 2,000-token call in a 3,000-token window uses two thirds of it).
/// The default 2 lets a window hold up to twice its share while the minute bound keeps
/// the total at the quota, so a minute's budget still cannot go out in one burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct BurstFactor(u64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the governor burst factor must be between 1 and 6, got {0}")]
pub struct BurstFactorError(pub u64);

impl BurstFactor {
    pub const DEFAULT: BurstFactor = BurstFactor(2);

    pub fn new(factor: u64) -> Result<BurstFactor, BurstFactorError> {
        if (1..=6).contains(&factor) {
            Ok(BurstFactor(factor))
        } else {
            Err(BurstFactorError(factor))
        }
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl Default for BurstFactor {
    fn default() -> Self {
        BurstFactor::DEFAULT
    }
}

impl<'de> Deserialize<'de> for BurstFactor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BurstFactor::new(u64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// What the ledger may admit, after headroom: per minute and per short window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowLimits {
    pub window_ms: u64,
    /// Tokens admitted (as charged) in any short window never exceed this.
    pub tokens: u64,
    /// Requests admitted in any short window never exceed this.
    pub requests: u64,
    /// Tokens admitted (as charged) in any 60 s never exceed this: `TPM × (1 − headroom)`.
    pub minute_tokens: u64,
    /// Calls sent in any [`SEND_WINDOW_MS`] never exceed this: the 1 s share of the RPM after
    /// headroom, at least 1 (Azure's own 1 s evaluation cannot refuse a second's first request).
    #[serde(default = "one")]
    pub send_requests: u64,
}

fn one() -> u64 {
    1
}

impl WindowLimits {
    /// `TPM × (1 − headroom)` a minute; per short window, `burst` times the window's even
    /// share of that (never more than the minute's) and the window's share of the RPM.
    ///
    /// The request limit is at least 1 whenever Azure itself allows one request per
    /// window, so a tiny deployment is slow rather than unusable; it never exceeds the
    /// un-headroomed `RPM × window / 60 s`.
    pub fn for_budget(
        budget: &DeploymentBudget,
        headroom: Headroom,
        window: ShortWindow,
        burst: BurstFactor,
    ) -> Self {
        let per_minute = window.per_minute();
        let minute_tokens = headroom.apply(budget.tpm);
        let tokens = (minute_tokens / per_minute)
            .saturating_mul(burst.get())
            .min(minute_tokens);
        let azure_requests = budget.rpm() / per_minute;
        let requests = (headroom.apply(budget.rpm()) / per_minute).max(azure_requests.min(1));
        let send_requests = (headroom.apply(budget.rpm()) * SEND_WINDOW_MS / MINUTE_MS).max(1);
        WindowLimits {
            window_ms: window.as_millis(),
            tokens,
            requests,
            minute_tokens,
            send_requests,
        }
    }

    /// The largest single call that can ever be admitted.
    pub fn largest_call(&self) -> Tokens {
        Tokens(self.tokens.min(self.minute_tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gpt-4o deployment: 6 requests per minute per 1,000 tokens per minute.
    fn budget(tpm: u64) -> DeploymentBudget {
        DeploymentBudget {
            tier: Tier::Premium,
            deployment: "gpt-4o".parse().unwrap(),
            tpm,
            rpm: tpm * 6 / 1_000,
        }
    }

    #[test]
    fn limits_are_a_window_share_of_the_headroomed_quota() {
        let l = WindowLimits::for_budget(
            &budget(150_000),
            Headroom::DEFAULT,
            ShortWindow::DEFAULT,
            BurstFactor::new(1).unwrap(),
        );
        assert_eq!(l.tokens, 22_500); // 150k × 0.9 / 6
        assert_eq!(l.minute_tokens, 135_000);
        assert_eq!(l.requests, 135); // 900 RPM × 0.9 / 6
        assert_eq!(l.send_requests, 13); // 900 RPM × 0.9 / 60
        assert_eq!(l.window_ms, 10_000);
    }

    #[test]
    fn a_tpm_override_scales_the_rpm_by_the_models_ratio() {
        let gpt_4_1 = DeploymentBudget {
            tier: Tier::Premium,
            deployment: "premium".parse().unwrap(),
            tpm: 150_000,
            rpm: 150,
        };
        let halved = gpt_4_1.with_tpm(75_000);
        assert_eq!((halved.tpm, halved.rpm), (75_000, 75));
        assert_eq!(gpt_4_1.with_tpm(1_500).rpm, 1);
    }

    #[test]
    fn request_limits_follow_the_configured_rpm_not_a_fixed_ratio() {
        // gpt-4.1 at 150,000 TPM: 150 RPM, a sixth of what gpt-4o gets.
        let gpt_4_1 = DeploymentBudget {
            rpm: 150,
            ..budget(150_000)
        };
        let l = WindowLimits::for_budget(
            &gpt_4_1,
            Headroom::DEFAULT,
            ShortWindow::DEFAULT,
            BurstFactor::DEFAULT,
        );
        assert_eq!(l.requests, 22); // 150 × 0.9 / 6
        assert_eq!(l.send_requests, 2); // 150 × 0.9 / 60
        assert_eq!(l.minute_tokens, 135_000);
    }

    #[test]
    fn tiny_deployment_still_gets_one_request_per_window() {
        let l = WindowLimits::for_budget(
            &budget(1_000),
            Headroom::DEFAULT,
            ShortWindow::DEFAULT,
            BurstFactor::DEFAULT,
        );
        assert_eq!(l.requests, 1);
        assert_eq!(l.tokens, 300);
    }

    #[test]
    fn burst_lets_a_window_hold_more_than_its_share_but_never_the_minute() {
        let b = budget(20_000);
        let l = WindowLimits::for_budget(
            &b,
            Headroom::DEFAULT,
            ShortWindow::DEFAULT,
            BurstFactor::DEFAULT,
        );
        assert_eq!(l.tokens, 6_000); // 2 × 18,000 / 6
        assert_eq!(l.minute_tokens, 18_000);
        assert_eq!(l.requests, 18); // 120 RPM × 0.9 / 6
        let most = BurstFactor::new(6).unwrap();
        let l = WindowLimits::for_budget(&b, Headroom::DEFAULT, ShortWindow::DEFAULT, most);
        assert_eq!(l.tokens, 18_000);
        assert_eq!(l.largest_call(), Tokens(18_000));
        assert!(BurstFactor::new(0).is_err());
        assert!(BurstFactor::new(7).is_err());
    }

    #[test]
    fn window_must_divide_a_minute() {
        assert!(ShortWindow::from_millis(10_000).is_ok());
        assert!(ShortWindow::from_millis(1_000).is_ok());
        assert!(ShortWindow::from_millis(7_000).is_err());
        assert!(ShortWindow::from_millis(20_000).is_err());
        assert!(ShortWindow::from_millis(0).is_err());
        assert!(ShortWindow::from_millis(120_000).is_err());
    }
}
