//! The fleet's [`SignalStore`] in Redis: one Lua script per write ([`SignalStore::record`]:
//! the minute's counters and gauges, the day's usage, the partitions' lag, the published
//! configuration and the trim), plain reads for the rest.
//!
//! # Key layout
//!
//! All keys sit under the store's namespace hash tag `{ns}`, so the script stays in one
//! slot on a clustered Redis.
//!
//! | key                  | type   | content                                                  |
//! |----------------------|--------|----------------------------------------------------------|
//! | `{ns}:sig:m:<minute>`| hash   | the minute's fields ([`super::series::field`]), `<minute>` its first ms |
//! | `{ns}:sig:d:<day>`   | hash   | the UTC day's usage counters, `<day>` its first ms      |
//! | `{ns}:sig:lag`       | hash   | `<topic>\t<partition>` → the partition's latest [`PartitionLag`] (JSON) |
//! | `{ns}:sig:index`     | zset   | `m:<minute>`, `d:<day>`, `l:<field>`, scored by when each is dropped |
//! | `{ns}:sig:config`    | string | the published [`FleetConfig`] (JSON)                     |
//!
//! Bounds: a minute is dropped [`HORIZON`] after it ended, a day [`DAYS_KEPT`] days after
//! it began, a partition's lag [`HORIZON`] after it was measured, all on the product's
//! clock, by the next write (at most 500 per write); Redis also expires each of those keys
//! by itself [`EXPIRY_GRACE`] after the horizon, on its own clock, should nothing write.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;

use super::{
    DAYS_KEPT, Day, EXPIRY_GRACE, FleetConfig, HORIZON, Minute, MinuteBucket, PartitionLag,
    RedisMemory, SignalBatch, SignalError, SignalStore,
};
use crate::redis_link::RedisLink;
use crate::store::redis::Namespace;

static RECORD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/record.lua")));

const DAY: Duration = Duration::from_secs(24 * 3600);
const MINUTE: Duration = Duration::from_secs(60);

/// The Redis signal store. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RedisSignals {
    link: Arc<RedisLink>,
    prefix: String,
}

impl RedisSignals {
    /// Signals under `namespace` (the store's: the same hash tag), over `link`.
    pub fn new(link: Arc<RedisLink>, namespace: &Namespace) -> RedisSignals {
        RedisSignals {
            link,
            prefix: format!("{{{}}}", namespace.as_str()),
        }
    }

    fn key(&self, parts: &[&str]) -> String {
        let mut key = self.prefix.clone();
        for part in parts {
            key.push(':');
            key.push_str(part);
        }
        key
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn lag_field(lag: &PartitionLag) -> String {
    format!("{}\t{}", lag.topic, lag.partition)
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, SignalError> {
    serde_json::to_string(value).map_err(|e| SignalError::Corrupt(e.to_string()))
}

#[async_trait]
impl SignalStore for RedisSignals {
    async fn record(&self, batch: &SignalBatch) -> Result<(), SignalError> {
        if batch.is_empty() {
            return Ok(());
        }
        let minute = Minute::of(batch.at);
        let day = Day::of(batch.at);
        let mut invocation = RECORD.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(minute.0)
            .arg(day.0)
            .arg(batch.at.0)
            .arg(minute.start().plus(HORIZON + MINUTE).0)
            .arg(
                day.start()
                    .plus(DAY * u32::try_from(DAYS_KEPT).unwrap_or(2))
                    .0,
            )
            .arg(millis(HORIZON + EXPIRY_GRACE))
            .arg(millis(
                DAY * u32::try_from(DAYS_KEPT).unwrap_or(2) + EXPIRY_GRACE,
            ))
            .arg(batch.counts.len())
            .arg(batch.maxima.len())
            .arg(batch.usage.len())
            .arg(batch.lag.len())
            .arg(match &batch.config {
                Some(config) => json(config)?,
                None => String::new(),
            });
        for (field, n) in batch.counts.iter().chain(&batch.maxima).chain(&batch.usage) {
            invocation.arg(field).arg(*n);
        }
        for lag in &batch.lag {
            invocation
                .arg(lag_field(lag))
                .arg(lag.measured_at.plus(HORIZON).0 + 1)
                .arg(json(lag)?);
        }
        let mut connection = self.link.get().await?;
        invocation.invoke_async::<u64>(&mut connection).await?;
        Ok(())
    }

    async fn minutes(&self, from: Minute, to: Minute) -> Result<Vec<MinuteBucket>, SignalError> {
        let mut minutes = Vec::new();
        let mut minute = from;
        while minute <= to && minutes.len() < 10_000 {
            minutes.push(minute);
            minute = minute.next();
        }
        if minutes.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for minute in &minutes {
            pipe.hgetall(self.key(&["sig", "m", &minute.0.to_string()]));
        }
        let mut connection = self.link.get().await?;
        let replies: Vec<BTreeMap<String, u64>> = pipe.query_async(&mut connection).await?;
        Ok(minutes
            .into_iter()
            .zip(replies)
            .filter(|(_, fields)| !fields.is_empty())
            .map(|(minute, fields)| MinuteBucket { minute, fields })
            .collect())
    }

    async fn lag(&self) -> Result<Vec<PartitionLag>, SignalError> {
        let mut connection = self.link.get().await?;
        let entries: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(self.key(&["sig", "lag"]))
            .query_async(&mut connection)
            .await?;
        let mut lags = entries
            .values()
            .map(|text| {
                serde_json::from_str::<PartitionLag>(text)
                    .map_err(|e| SignalError::Corrupt(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        lags.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(lags)
    }

    async fn day_usage(&self, day: Day) -> Result<BTreeMap<String, u64>, SignalError> {
        let mut connection = self.link.get().await?;
        Ok(redis::cmd("HGETALL")
            .arg(self.key(&["sig", "d", &day.0.to_string()]))
            .query_async(&mut connection)
            .await?)
    }

    async fn config(&self) -> Result<Option<FleetConfig>, SignalError> {
        let mut connection = self.link.get().await?;
        let text: Option<String> = redis::cmd("GET")
            .arg(self.key(&["sig", "config"]))
            .query_async(&mut connection)
            .await?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| SignalError::Corrupt(e.to_string())))
            .transpose()
    }

    async fn memory(&self) -> Result<Option<RedisMemory>, SignalError> {
        let mut connection = self.link.get().await?;
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut connection)
            .await?;
        Ok(parse_memory(&info))
    }
}

/// `used_memory` and `maxmemory` from an `INFO memory` reply; `None` without `used_memory`.
pub fn parse_memory(info: &str) -> Option<RedisMemory> {
    let value = |name: &str| {
        info.lines().find_map(|line| {
            let (key, value) = line.trim().split_once(':')?;
            (key == name).then(|| value.trim().parse::<u64>().ok())?
        })
    };
    Some(RedisMemory {
        used_memory: value("used_memory")?,
        maxmemory: value("maxmemory").unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_read_from_info() {
        let info =
            "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:4194304\r\n";
        assert_eq!(
            parse_memory(info),
            Some(RedisMemory {
                used_memory: 1_048_576,
                maxmemory: 4_194_304
            })
        );
        assert_eq!(parse_memory(info).unwrap().used_percent(), Some(25));
        assert_eq!(parse_memory("# Memory\r\n"), None);
        let unlimited = parse_memory("used_memory:5\r\nmaxmemory:0\r\n").unwrap();
        assert_eq!(unlimited.used_percent(), None);
    }
}
