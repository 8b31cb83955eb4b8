//! The real clock: wall time for `now` and tokio timers for `sleep`. The only place in
//! stormgate that reads the system time: the handler's functions get it through
//! `AppState::clock`, and the real-time tools beside them (the simulator's HTTP server,
//! the Functions host emulation) call it directly. Measuring elapsed time with a
//! monotonic `Instant` is not reading the clock and happens where it is measured.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use stormgate_shared::clock::{Clock, EpochMillis};

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> EpochMillis {
        // A system clock set before 1970 is reported as the epoch rather than failing.
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        EpochMillis(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
    }

    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleeping_moves_the_system_clock_forward() {
        let clock = SystemClock;
        let before = clock.now();
        clock.sleep(Duration::from_millis(20)).await;
        assert!(clock.now().since(before) >= Duration::from_millis(20));
        assert!(
            before > EpochMillis(1_700_000_000_000),
            "the clock reads real wall time"
        );
    }
}
