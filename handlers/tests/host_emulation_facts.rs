//! The host emulation against the platform's own values
//! (`tests/platform/functions_host.json`, read from the host's and extensions' sources):
//! what it assumes when host.json is silent, the limits it enforces, and the day-of-week
//! numbering of timer schedules.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use stormgate_handlers::functions_host::AppDefinition;
use stormgate_handlers::functions_host::app_definition::{HostSettings, MAX_QUEUE_BATCH_SIZE};
use stormgate_handlers::functions_host::ncrontab::NcrontabSchedule;
use stormgate_handlers::functions_host::runtime::MIN_QUEUE_POLLING_INTERVAL;
use stormgate_shared::clock::EpochMillis;

fn facts() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/platform/functions_host.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn an_empty_host_json_means_the_platform_s_defaults() {
    let facts = facts();
    let defaults = HostSettings::default();
    let q = &facts["queues"];
    assert_eq!(
        u64::from(defaults.queues.batch_size),
        q["batchSize"]["default"]
    );
    assert_eq!(
        u64::from(defaults.queues.new_batch_threshold),
        q["newBatchThreshold"]["default_for_16"]
    );
    assert_eq!(
        u64::from(defaults.queues.max_dequeue_count),
        q["maxDequeueCount"]["default"]
    );
    assert_eq!(
        defaults.queues.visibility_timeout.as_secs(),
        q["visibilityTimeout_seconds"]["default"]
    );
    assert_eq!(
        defaults.queues.max_polling_interval.as_secs(),
        q["maxPollingInterval_seconds"]["default"]
    );
    assert_eq!(u64::from(MAX_QUEUE_BATCH_SIZE), q["batchSize"]["maximum"]);
    assert_eq!(
        MIN_QUEUE_POLLING_INTERVAL,
        Duration::from_millis(q["minimum_polling_interval_ms"].as_u64().unwrap())
    );
    let k = &facts["kafka"];
    assert_eq!(
        defaults.kafka.max_batch_size as u64,
        k["maxBatchSize"]["default"]
    );
    assert_eq!(
        defaults.kafka.subscriber_interval.as_secs(),
        k["subscriberIntervalInSeconds"]["default"]
    );
}

#[test]
fn the_repository_s_host_json_is_within_the_platform_s_limits() {
    let facts = facts();
    let app = AppDefinition::built_in().unwrap();
    let q = app.host.queues;
    assert!(u64::from(q.batch_size) <= facts["queues"]["batchSize"]["maximum"].as_u64().unwrap());
    assert!(q.new_batch_threshold <= q.batch_size);
    assert!(
        app.host.kafka.max_batch_size as u64
            >= facts["kafka"]["maxBatchSize"]["minimum"].as_u64().unwrap()
    );
}

#[test]
fn timer_days_of_the_week_count_from_sunday_zero_as_ncrontab_does() {
    let facts = facts();
    let sunday = facts["ncrontab"]["sunday"].as_u64().unwrap();
    let schedule: NcrontabSchedule = format!("0 0 12 * * {sunday}").parse().unwrap();
    // Monday 2026-01-12 00:00 UTC: the next Sunday noon is 2026-01-18.
    let monday = EpochMillis(1_768_176_000_000);
    let next = schedule.next_after(monday).unwrap();
    let at = jiff::Timestamp::from_millisecond(next.0 as i64).unwrap();
    assert_eq!(at.to_string(), "2026-01-18T12:00:00Z");
    let max = facts["ncrontab"]["ranges"]["dayOfWeek"][1]
        .as_u64()
        .unwrap();
    assert!(
        format!("0 0 12 * * {}", max + 1)
            .parse::<NcrontabSchedule>()
            .is_err()
    );
}
