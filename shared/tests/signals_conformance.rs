//! The signal store's conformance suite: every test runs against the in-memory series and
//! against the Redis one on a real `redis-server` started for it.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: failing loudly is the point"
)]

use std::time::Duration;

use stormgate_shared::clock::EpochMillis;
use stormgate_shared::deadline_policy::DeadlinePolicy;
use stormgate_shared::governor::GovernorPolicy;
use stormgate_shared::job::Tier;
use stormgate_shared::signals::series::field;
use stormgate_shared::signals::{Day, Minute, MinuteBucket};
use stormgate_shared::signals::{
    DeploymentConfig, FleetConfig, HORIZON, PartitionLag, SignalBatch, SignalStore,
};

const MINUTE: u64 = 60_000;
const DAY: u64 = 24 * 3_600_000;
/// A Tuesday, 10:00 UTC.
const T0: EpochMillis = EpochMillis(1_800_000_000_000 - 1_800_000_000_000 % DAY + 10 * 3_600_000);

fn at(ms: u64) -> EpochMillis {
    EpochMillis(T0.0 + ms)
}

async fn counters_add_and_gauges_keep_the_largest_within_a_minute(signals: &dyn SignalStore) {
    let mut a = SignalBatch::at(at(1_000));
    a.count(field::EVENTS, 3).max("queued:p1", 7);
    let mut b = SignalBatch::at(at(59_000));
    b.count(field::EVENTS, 4)
        .max("queued:p1", 5)
        .count("never", 0);
    signals.record(&a).await.unwrap();
    signals.record(&b).await.unwrap();
    let mut c = SignalBatch::at(at(61_000));
    c.count(field::EVENTS, 1);
    signals.record(&c).await.unwrap();

    let minute = Minute::of(T0);
    let buckets = signals.minutes(minute, minute.next()).await.unwrap();
    assert_eq!(buckets.len(), 2);
    assert_eq!(buckets[0].minute, minute);
    assert_eq!(buckets[0].get(field::EVENTS), 7);
    assert_eq!(buckets[0].get("queued:p1"), 7);
    assert!(!buckets[0].has("never"), "a zero count is not written");
    assert_eq!(buckets[1].get(field::EVENTS), 1);
    // Minutes nothing was recorded in are absent, and the range bounds the answer.
    assert!(
        signals
            .minutes(minute.back(10), minute.back(1))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn minutes_beyond_the_horizon_are_dropped_by_later_writes(signals: &dyn SignalStore) {
    let mut old = SignalBatch::at(at(0));
    old.count(field::EVENTS, 1);
    signals.record(&old).await.unwrap();
    let first = Minute::of(T0);
    // Still there at the very end of the horizon...
    let mut later = SignalBatch::at(at(0).plus(HORIZON).plus(Duration::from_millis(MINUTE - 1)));
    later.count(field::EVENTS, 2);
    signals.record(&later).await.unwrap();
    assert_eq!(all_minutes(signals, first).await.len(), 2);
    // ...and gone once a write comes a minute later.
    let mut last = SignalBatch::at(at(0).plus(HORIZON).plus(Duration::from_millis(MINUTE)));
    last.count(field::EVENTS, 1);
    signals.record(&last).await.unwrap();
    let kept = all_minutes(signals, first).await;
    assert!(kept.iter().all(|b| b.minute != first), "{kept:?}");
    assert_eq!(kept.len(), 2);
}

async fn all_minutes(signals: &dyn SignalStore, from: Minute) -> Vec<MinuteBucket> {
    signals
        .minutes(from, Minute::of(at(0).plus(HORIZON * 2)))
        .await
        .unwrap()
}

async fn usage_is_kept_per_utc_day_today_and_yesterday(signals: &dyn SignalStore) {
    let mut today = SignalBatch::at(at(0));
    today
        .usage("prompt:premium", 100)
        .usage("prompt:premium", 50);
    signals.record(&today).await.unwrap();
    let mut tomorrow = SignalBatch::at(EpochMillis(T0.0 + DAY));
    tomorrow.usage("prompt:premium", 7);
    signals.record(&tomorrow).await.unwrap();
    let day0 = Day::of(T0);
    let day1 = Day::of(EpochMillis(T0.0 + DAY));
    assert_eq!(
        signals.day_usage(day0).await.unwrap()["prompt:premium"],
        150
    );
    assert_eq!(signals.day_usage(day1).await.unwrap()["prompt:premium"], 7);
    // Two days on, the first day is dropped.
    let mut later = SignalBatch::at(EpochMillis(day0.0 + 2 * DAY));
    later.usage("calls:premium", 1);
    signals.record(&later).await.unwrap();
    assert!(signals.day_usage(day0).await.unwrap().is_empty());
    assert_eq!(signals.day_usage(day1).await.unwrap()["prompt:premium"], 7);
}

fn lag(partition: i64, max_ms: u64, measured_at: EpochMillis) -> PartitionLag {
    PartitionLag {
        topic: "servicenow.incident".into(),
        partition,
        records: 3,
        p50_ms: max_ms / 2,
        max_ms,
        measured_at,
    }
}

async fn lag_is_kept_per_partition_latest_wins_until_the_horizon(signals: &dyn SignalStore) {
    let mut first = SignalBatch::at(at(0));
    first.lag = vec![lag(0, 1_000, at(0)), lag(1, 9_000, at(0))];
    signals.record(&first).await.unwrap();
    let mut second = SignalBatch::at(at(5_000));
    second.lag = vec![lag(0, 2_000, at(5_000))];
    signals.record(&second).await.unwrap();
    let kept = signals.lag().await.unwrap();
    assert_eq!(kept, vec![lag(0, 2_000, at(5_000)), lag(1, 9_000, at(0))]);

    // Partition 1 was last measured at 0: a write past the horizon drops it.
    let mut late = SignalBatch::at(at(0).plus(HORIZON).plus(Duration::from_millis(1)));
    late.lag = vec![lag(0, 3_000, late.at)];
    signals.record(&late).await.unwrap();
    let kept = signals.lag().await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].partition, 0);
}

async fn the_published_configuration_is_read_back(signals: &dyn SignalStore) {
    assert_eq!(signals.config().await.unwrap(), None);
    let config = FleetConfig {
        deployments: vec![DeploymentConfig {
            tier: Tier::Premium,
            deployment: "gpt-4o".parse().unwrap(),
            model: "gpt-4o".into(),
            tpm: 50_000,
            rpm: 50_000 * 6 / 1_000,
            price_input_per_1m: 2.5,
            price_output_per_1m: 10.0,
        }],
        policy: GovernorPolicy::default(),
        deadlines: DeadlinePolicy::default(),
    };
    let mut batch = SignalBatch::at(at(0));
    batch.config = Some(config.clone());
    signals.record(&batch).await.unwrap();
    assert_eq!(signals.config().await.unwrap(), Some(config));
}

macro_rules! conformance {
    ($($test:ident),* $(,)?) => {
        mod memory {
            use stormgate_shared::signals::memory::MemorySignals;
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(&MemorySignals::new()).await;
                }
            )*
        }

        mod redis {
            use stormgate_shared::signals::redis::RedisSignals;
            use stormgate_shared::testing::redis_server::RedisServer;
            $(
                #[tokio::test]
                async fn $test() {
                    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
                    let link = server.link().unwrap_or_else(|e| panic!("{e}"));
                    let signals = RedisSignals::new(link, &"conformance".parse().unwrap());
                    super::$test(&signals).await;
                }
            )*
        }
    };
}

conformance!(
    counters_add_and_gauges_keep_the_largest_within_a_minute,
    minutes_beyond_the_horizon_are_dropped_by_later_writes,
    usage_is_kept_per_utc_day_today_and_yesterday,
    lag_is_kept_per_partition_latest_wins_until_the_horizon,
    the_published_configuration_is_read_back,
);

#[tokio::test]
async fn redis_reports_its_memory_and_every_bucket_expires_by_itself() {
    use stormgate_shared::signals::redis::RedisSignals;
    use stormgate_shared::testing::redis_server::RedisServer;
    let server = RedisServer::start_with(&[("maxmemory", "64mb")]).unwrap();
    let link = server.link().unwrap();
    let signals = RedisSignals::new(link.clone(), &"conformance".parse().unwrap());
    let memory = signals.memory().await.unwrap().unwrap();
    assert_eq!(memory.maxmemory, 64 * 1024 * 1024);
    assert!(memory.used_memory > 0);

    let mut batch = SignalBatch::at(at(0));
    batch.count(field::EVENTS, 1).usage("calls:premium", 1);
    batch.lag = vec![lag(0, 1, at(0))];
    signals.record(&batch).await.unwrap();
    // Every key the series keeps carries its own expiry: the bound holds on Redis's
    // clock too, should no write ever trim again.
    let mut connection = link.get().await.unwrap();
    let keys: Vec<String> = ::redis::cmd("KEYS")
        .arg("{conformance}:sig:*")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(keys.len() >= 4, "{keys:?}");
    for key in keys.iter().filter(|k| !k.ends_with(":config")) {
        let ttl: i64 = ::redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut connection)
            .await
            .unwrap();
        assert!(ttl > 0, "{key} has no expiry ({ttl})");
    }
}
