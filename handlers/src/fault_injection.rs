//! The fault suite's hooks into the handler process, read from its environment at
//! start-up: a clock the tests can move forward (so a lease, a cooldown or an outbox
//! delay runs out without waiting minutes for it) and the mechanism switches of
//! [`stormgate_shared::fault_switches`].
//!
//! Only builds with the `fault-injection` feature have them, and only the end-to-end
//! tests enable it; in every other build [`install`] hands the clock back untouched and
//! reads nothing.

use std::sync::Arc;

use stormgate_shared::clock::Clock;

/// Names a file holding how many milliseconds the handler's clock runs ahead of the
/// system clock (a decimal integer; missing or empty means zero). Read on every
/// reading of the clock, so a test moves the clock of a running process.
pub const CLOCK_OFFSET_FILE: &str = "STORMGATE_TEST_CLOCK_OFFSET_FILE";
/// Comma-separated mechanisms to switch off (see [`stormgate_shared::fault_switches`]).
pub const DISABLE: &str = "STORMGATE_TEST_DISABLE";

/// The clock the process should use, with the switches the environment asks for thrown.
#[cfg(not(feature = "fault-injection"))]
pub fn install(
    _vars: &[(String, String)],
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn Clock>, String> {
    Ok(clock)
}

/// The clock the process should use, with the switches the environment asks for thrown.
#[cfg(feature = "fault-injection")]
pub fn install(vars: &[(String, String)], clock: Arc<dyn Clock>) -> Result<Arc<dyn Clock>, String> {
    let var = |name: &str| {
        vars.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    if let Some(list) = var(DISABLE) {
        stormgate_shared::fault_switches::disable_listed(list)
            .map_err(|e| format!("{DISABLE}: {e}"))?;
    }
    Ok(match var(CLOCK_OFFSET_FILE) {
        Some(path) => Arc::new(AdvancedClock::new(clock, path.into())),
        None => clock,
    })
}

#[cfg(feature = "fault-injection")]
pub use advanced::AdvancedClock;

#[cfg(feature = "fault-injection")]
mod advanced {
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;
    use stormgate_shared::clock::{Clock, EpochMillis};

    /// A clock running ahead of another by the offset a file holds. Sleeping takes the
    /// real time: moving the clock is what makes a deadline pass at once.
    #[derive(Debug)]
    pub struct AdvancedClock {
        inner: Arc<dyn Clock>,
        offset_file: PathBuf,
    }

    impl AdvancedClock {
        pub fn new(inner: Arc<dyn Clock>, offset_file: PathBuf) -> Self {
            AdvancedClock { inner, offset_file }
        }

        /// The offset now in the file; a missing, empty or half-written file is zero
        /// (writers replace it by renaming, so a reader sees the old or the new value).
        fn offset(&self) -> Duration {
            let millis = std::fs::read_to_string(&self.offset_file)
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .unwrap_or(0);
            Duration::from_millis(millis)
        }
    }

    #[async_trait]
    impl Clock for AdvancedClock {
        fn now(&self) -> EpochMillis {
            self.inner.now().plus(self.offset())
        }

        async fn sleep(&self, d: Duration) {
            self.inner.sleep(d).await;
        }
    }
}

#[cfg(all(test, feature = "fault-injection"))]
mod tests {
    use std::time::Duration;

    use stormgate_shared::clock::{EpochMillis, ManualClock};

    use super::*;

    #[test]
    fn the_clock_runs_ahead_by_what_the_file_says_now() {
        let file = std::env::temp_dir().join(format!("stormgate-offset-{}", std::process::id()));
        let base = ManualClock::starting_at(EpochMillis(1_000));
        let clock = AdvancedClock::new(Arc::new(base.clone()), file.clone());
        assert_eq!(clock.now(), EpochMillis(1_000), "no file: no offset");
        std::fs::write(&file, "300000\n").unwrap();
        assert_eq!(clock.now(), EpochMillis(301_000));
        base.advance(Duration::from_secs(1));
        assert_eq!(clock.now(), EpochMillis(302_000));
        let _ = std::fs::remove_file(&file);
    }
}
