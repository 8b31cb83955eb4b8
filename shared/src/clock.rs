//! Time as the scheduler sees it: an injected [`Clock`].
//!
//! Nothing in this crate reads the system clock. Production passes a system clock
//! (it lives in `stormgate-handlers`, the only crate allowed to read the real time);
//! tests and the storm lab pass a [`ManualClock`], so hours of a storm run in seconds
//! of wall time through exactly the same code.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch (UTC). The unit every Redis score and lease uses.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct EpochMillis(pub u64);

impl EpochMillis {
    pub const ZERO: EpochMillis = EpochMillis(0);

    pub fn as_millis(self) -> u64 {
        self.0
    }

    /// `self + d`, saturating at the end of time rather than wrapping.
    pub fn plus(self, d: Duration) -> EpochMillis {
        EpochMillis(self.0.saturating_add(duration_millis(d)))
    }

    /// `self - d`, saturating at the epoch.
    pub fn minus(self, d: Duration) -> EpochMillis {
        EpochMillis(self.0.saturating_sub(duration_millis(d)))
    }

    /// How long after `earlier` this instant is; zero if it is not after it.
    pub fn since(self, earlier: EpochMillis) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// Seconds as a float, for reports.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }
}

impl fmt::Display for EpochMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match jiff::Timestamp::from_millisecond(self.0 as i64) {
            Ok(ts) => write!(f, "{ts}"),
            Err(_) => write!(f, "{}ms", self.0),
        }
    }
}

fn duration_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A source of the current time and of waiting.
///
/// `sleep` belongs to the clock because waiting is part of scheduling: on a manual
/// clock a sleep advances virtual time instead of blocking.
#[async_trait]
pub trait Clock: Send + Sync + fmt::Debug {
    fn now(&self) -> EpochMillis;
    async fn sleep(&self, d: Duration);
}

/// A clock that only moves when told to (tests) or when something sleeps on it (the lab).
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn starting_at(t: EpochMillis) -> Self {
        ManualClock {
            now: Arc::new(AtomicU64::new(t.0)),
        }
    }

    pub fn advance(&self, d: Duration) {
        self.now.fetch_add(duration_millis(d), Ordering::SeqCst);
    }

    /// Moves the clock forward to `t`; never backwards.
    pub fn advance_to(&self, t: EpochMillis) {
        self.now.fetch_max(t.0, Ordering::SeqCst);
    }
}

#[async_trait]
impl Clock for ManualClock {
    fn now(&self) -> EpochMillis {
        EpochMillis(self.now.load(Ordering::SeqCst))
    }

    async fn sleep(&self, d: Duration) {
        self.advance(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn manual_clock_moves_only_forward() {
        let clock = ManualClock::starting_at(EpochMillis(1_000));
        clock.sleep(Duration::from_millis(500)).await;
        assert_eq!(clock.now(), EpochMillis(1_500));
        clock.advance_to(EpochMillis(1_200));
        assert_eq!(clock.now(), EpochMillis(1_500));
        clock.advance_to(EpochMillis(9_000));
        assert_eq!(clock.now(), EpochMillis(9_000));
    }

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        assert_eq!(
            EpochMillis(5).minus(Duration::from_secs(1)),
            EpochMillis::ZERO
        );
        assert_eq!(
            EpochMillis(u64::MAX).plus(Duration::from_secs(1)),
            EpochMillis(u64::MAX)
        );
        assert_eq!(
            EpochMillis(3_000).since(EpochMillis(1_000)),
            Duration::from_secs(2)
        );
        assert_eq!(EpochMillis(1_000).since(EpochMillis(3_000)), Duration::ZERO);
    }
}
