//! A function's `retry` policy (function.json): after a failed invocation the host runs
//! it again, up to `maxRetryCount` times (-1: without end), waiting `delayInterval`
//! (`fixedDelay`) or a delay that doubles from `minimumInterval` up to
//! `maximumInterval` (`exponentialBackoff`). The platform randomizes the exponential
//! delays around that curve; the emulation waits the curve itself, so a run is
//! repeatable.

use std::time::Duration;

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
            } => {
                let factor = 2u32.saturating_pow(retry - 1);
                minimum.saturating_mul(factor).min(maximum)
            }
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
        self.max_retries().map_or(-1, i64::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_delays_double_from_the_minimum_up_to_the_maximum() {
        let policy = RetryPolicy::ExponentialBackoff {
            max_retries: Some(5),
            minimum: Duration::from_secs(2),
            maximum: Duration::from_secs(60),
        };
        let delays: Vec<_> = (1..=6).map(|r| policy.delay_before(r)).collect();
        assert_eq!(
            delays,
            [2, 4, 8, 16, 32]
                .map(|s| Some(Duration::from_secs(s)))
                .into_iter()
                .chain([None])
                .collect::<Vec<_>>()
        );
        let capped = RetryPolicy::ExponentialBackoff {
            max_retries: None,
            minimum: Duration::from_secs(2),
            maximum: Duration::from_secs(60),
        };
        assert_eq!(capped.delay_before(40), Some(Duration::from_secs(60)));
        assert_eq!(capped.max_retry_count(), -1);
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
