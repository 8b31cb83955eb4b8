//! A function's `retry` policy (function.json): after a failed invocation the host runs
//! it again, up to `maxRetryCount` times (-1: without end), waiting `delayInterval`
//! (`fixedDelay`) or, for `exponentialBackoff`, `minimumInterval` first and then
//! `minimumInterval + r * 2^(n-1) * minimumInterval` until that reaches
//! `maximumInterval`, which it keeps (the host's `RandomizedExponentialBackoffStrategy`,
//! r uniform in [0.8, 1.2]). The emulation takes r = 1, the middle of the spread, so a
//! run is repeatable. `tests/fixtures/platform/retry-and-offsets.json` records these
//! facts with their origin; `lab/tests/host_emulation_facts.rs` holds the constants
//! below to it.

use std::time::Duration;

/// The `maxRetryCount` that means "retry for ever".
pub const UNLIMITED_MAX_RETRY_COUNT: i64 = -1;
/// The smallest `maxRetryCount` the host accepts.
pub const SMALLEST_MAX_RETRY_COUNT: i64 = -1;
/// The strategies the host knows, by their function.json names.
pub const STRATEGIES: [&str; 2] = ["fixedDelay", "exponentialBackoff"];
/// The host's spread around the exponential curve (r in [1 - x, 1 + x]); the emulation
/// waits the curve itself (r = 1).
pub const EXPONENTIAL_RANDOMIZATION: f64 = 0.2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPolicy {
    FixedDelay {
        /// `None`: retried until it succeeds.
        max_retries: Option<u32>,
        delay: Duration,
    },
    ExponentialBackoff {
        max_retries: Option<u32>,
        minimum: Duration,
        maximum: Duration,
    },
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1 for the first), or `None` when the policy
    /// allows no more.
    pub fn delay_before(&self, retry: u32) -> Option<Duration> {
        if retry == 0 || self.max_retries().is_some_and(|max| retry > max) {
            return None;
        }
        Some(match *self {
            RetryPolicy::FixedDelay { delay, .. } => delay,
            RetryPolicy::ExponentialBackoff {
                minimum, maximum, ..
            } => exponential_delay(retry, minimum, maximum),
        })
    }

    /// `maxRetryCount` (`None` for -1).
    pub fn max_retries(&self) -> Option<u32> {
        match *self {
            RetryPolicy::FixedDelay { max_retries, .. }
            | RetryPolicy::ExponentialBackoff { max_retries, .. } => max_retries,
        }
    }

    /// `maxRetryCount` as `Metadata.RetryContext` carries it (-1 without end).
    pub fn max_retry_count(&self) -> i64 {
        self.max_retries()
            .map_or(UNLIMITED_MAX_RETRY_COUNT, i64::from)
    }
}

/// The host's curve at r = 1: `minimum` before the first retry, then
/// `minimum * (1 + 2^(retry-2))`, never above `maximum`. The curve only grows, so once
/// it reaches the maximum every later retry waits the maximum, as the host's does.
fn exponential_delay(retry: u32, minimum: Duration, maximum: Duration) -> Duration {
    if retry <= 1 {
        return minimum.min(maximum);
    }
    let factor = 2u32.saturating_pow(retry - 2).saturating_add(1);
    minimum.saturating_mul(factor).min(maximum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exponential(max_retries: Option<u32>) -> RetryPolicy {
        RetryPolicy::ExponentialBackoff {
            max_retries,
            minimum: Duration::from_secs(2),
            maximum: Duration::from_secs(60),
        }
    }

    #[test]
    fn exponential_waits_the_minimum_then_add_doubling_multiples_of_it_up_to_the_maximum() {
        let waits: Vec<_> = (1..=6)
            .map_while(|r| exponential(Some(5)).delay_before(r))
            .map(|d| d.as_secs())
            .collect();
        assert_eq!(waits, [2, 4, 6, 10, 18]);
        assert_eq!(exponential(Some(5)).delay_before(6), None);
    }

    #[test]
    fn without_a_limit_retries_go_on_at_the_maximum() {
        let policy = exponential(None);
        assert_eq!(policy.delay_before(7), Some(Duration::from_secs(60)));
        assert_eq!(policy.delay_before(100), Some(Duration::from_secs(60)));
        assert_eq!(policy.delay_before(u32::MAX), Some(Duration::from_secs(60)));
        assert_eq!(policy.max_retry_count(), -1);
    }

    #[test]
    fn fixed_delays_stop_after_the_count() {
        let policy = RetryPolicy::FixedDelay {
            max_retries: Some(2),
            delay: Duration::from_secs(10),
        };
        assert_eq!(policy.delay_before(2), Some(Duration::from_secs(10)));
        assert_eq!(policy.delay_before(3), None);
        assert_eq!(policy.delay_before(0), None);
    }
}
