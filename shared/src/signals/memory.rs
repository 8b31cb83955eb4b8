//! The in-memory [`SignalStore`]: the series of one process (tests, the storm lab, a
//! handler given a ready store), with the Redis backend's semantics and bounds.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use super::{
    DAYS_KEPT, Day, FleetConfig, HORIZON, Minute, MinuteBucket, PartitionLag, RedisMemory,
    SignalBatch, SignalError, SignalStore,
};
use crate::clock::EpochMillis;

#[derive(Debug, Default)]
pub struct MemorySignals {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    minutes: BTreeMap<Minute, BTreeMap<String, u64>>,
    days: BTreeMap<Day, BTreeMap<String, u64>>,
    lag: BTreeMap<(String, i64), PartitionLag>,
    config: Option<FleetConfig>,
}

impl MemorySignals {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock: a poisoned one still guards whole maps.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// Drops what lies beyond the horizon of `now`, as the Redis script does.
    fn trim(&mut self, now: EpochMillis) {
        let oldest = Minute::of(now.minus(HORIZON));
        self.minutes.retain(|minute, _| *minute >= oldest);
        let first_day = Day::of(now)
            .start()
            .0
            .saturating_sub((DAYS_KEPT - 1) * 86_400_000);
        self.days.retain(|day, _| day.0 >= first_day);
        let measured_after = now.minus(HORIZON);
        self.lag.retain(|_, lag| lag.measured_at >= measured_after);
    }
}

#[async_trait]
impl SignalStore for MemorySignals {
    async fn record(&self, batch: &SignalBatch) -> Result<(), SignalError> {
        let mut state = self.state();
        let minute = state.minutes.entry(Minute::of(batch.at)).or_default();
        for (field, n) in &batch.counts {
            let value = minute.entry(field.clone()).or_default();
            *value = value.saturating_add(*n);
        }
        for (field, n) in &batch.maxima {
            let value = minute.entry(field.clone()).or_default();
            *value = (*value).max(*n);
        }
        if !batch.usage.is_empty() {
            let day = state.days.entry(Day::of(batch.at)).or_default();
            for (field, n) in &batch.usage {
                let value = day.entry(field.clone()).or_default();
                *value = value.saturating_add(*n);
            }
        }
        for lag in &batch.lag {
            state
                .lag
                .insert((lag.topic.clone(), lag.partition), lag.clone());
        }
        if let Some(config) = &batch.config {
            state.config = Some(config.clone());
        }
        state.trim(batch.at);
        Ok(())
    }

    async fn minutes(&self, from: Minute, to: Minute) -> Result<Vec<MinuteBucket>, SignalError> {
        Ok(self
            .state()
            .minutes
            .range(from..=to)
            .map(|(minute, fields)| MinuteBucket {
                minute: *minute,
                fields: fields.clone(),
            })
            .collect())
    }

    async fn lag(&self) -> Result<Vec<PartitionLag>, SignalError> {
        Ok(self.state().lag.values().cloned().collect())
    }

    async fn day_usage(&self, day: Day) -> Result<BTreeMap<String, u64>, SignalError> {
        Ok(self.state().days.get(&day).cloned().unwrap_or_default())
    }

    async fn config(&self) -> Result<Option<FleetConfig>, SignalError> {
        Ok(self.state().config.clone())
    }

    async fn memory(&self) -> Result<Option<RedisMemory>, SignalError> {
        Ok(None)
    }
}
