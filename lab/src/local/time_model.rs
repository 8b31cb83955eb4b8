//! What `--speed N` means for a local run.
//!
//! The handler is the shipped binary and reads the real clock: no build that can be
//! deployed has a switch that moves or speeds up its time (the fault suite's clock hook
//! exists only in the e2e tests' build). So a local run is always real time for the
//! product: the `dispatch` timer ticks every 5 s of wall time, leases, claims,
//! deadlines (P1 30 s, P2 45 s), cooldowns and the governor's windows are wall-clock
//! durations, and every figure of the report is in wall seconds.
//!
//! What speeds up is the trace: its gaps are divided by N, so N times as many tickets
//! arrive per minute. Three things are scaled with it so that the load relative to
//! capacity stays the trace's:
//!
//! - each simulated deployment's TPM and RPM (the scenario's `rpm`, else its model's
//!   ratio to the TPM) and the handler's `STORMGATE_*_TPM` and `_RPM` settings, so the
//!   governor and the simulator agree;
//! - the coalescing hold (`STORMGATE_COALESCE_HOLD_SECONDS`, default 300 s), so a hold
//!   gathers the same share of an outage's tickets (under ingest's 60 s minimum a job is
//!   not held at all: from N = 5 on, nothing is held);
//! - nothing else. Deadlines stay the product's promises in wall seconds, so at N > 1
//!   the governor has N times the budget per deadline and spills less than the trace
//!   would at N = 1; LLM latency stays the deployment's.
//!
//! Against a real Azure OpenAI endpoint the quota is what it is: nothing is scaled but
//! the trace, and N > 1 is a storm N times as dense on the real quota.
//!
//! Only N = 1 is the like-for-like comparison with `stormgate replay`.

use std::time::Duration;

/// The speed of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeModel {
    pub speed: f64,
}

#[derive(Debug, thiserror::Error)]
#[error("--speed must be a finite number of at least 1, not {0}")]
pub struct SpeedError(pub f64);

impl TimeModel {
    pub fn new(speed: f64) -> Result<TimeModel, SpeedError> {
        if !speed.is_finite() || speed < 1.0 {
            return Err(SpeedError(speed));
        }
        Ok(TimeModel { speed })
    }

    /// When, after the run's start, an event `offset` into the trace is produced.
    pub fn wall_offset(&self, offset: Duration) -> Duration {
        offset.div_f64(self.speed)
    }

    /// A simulated deployment's TPM for a trace quota of `tpm`.
    pub fn quota(&self, tpm: u64) -> u64 {
        (tpm as f64 * self.speed).round() as u64
    }

    /// The coalescing hold for a product default of `hold`, in whole seconds.
    pub fn coalesce_hold_seconds(&self, hold: Duration) -> u64 {
        (hold.as_secs_f64() / self.speed).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_is_compressed_and_quota_and_hold_follow_it() {
        let t = TimeModel::new(10.0).unwrap();
        assert_eq!(
            t.wall_offset(Duration::from_secs(600)),
            Duration::from_secs(60)
        );
        assert_eq!(t.quota(20_000), 200_000);
        assert_eq!(t.coalesce_hold_seconds(Duration::from_secs(300)), 30);
        let real = TimeModel::new(1.0).unwrap();
        assert_eq!(real.quota(20_000), 20_000);
        assert_eq!(real.coalesce_hold_seconds(Duration::from_secs(300)), 300);
        for bad in [0.5, 0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(TimeModel::new(bad).is_err());
        }
    }
}
