//! The host emulation against the platform's own values
//! (`tests/fixtures/platform/functions_host.json` and `retry-and-offsets.json`, read from
//! the host's and extensions' sources): what it assumes when host.json is silent, the
//! limits it enforces, the day-of-week numbering of timer schedules and what it makes of
//! a function's retry policy.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use stormgate_lab::functions_host::AppDefinition;
use stormgate_lab::functions_host::app_definition::{HostSettings, MAX_QUEUE_BATCH_SIZE};
use stormgate_lab::functions_host::ncrontab::NcrontabSchedule;
use stormgate_lab::functions_host::retry_policy::{
    EXPONENTIAL_RANDOMIZATION, RetryPolicy, SMALLEST_MAX_RETRY_COUNT, STRATEGIES,
    UNLIMITED_MAX_RETRY_COUNT,
};
use stormgate_lab::functions_host::runtime::MIN_QUEUE_POLLING_INTERVAL;
use stormgate_shared::clock::EpochMillis;

fn platform_file(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/platform")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn facts() -> Value {
    platform_file("functions_host.json")
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

#[test]
fn retry_policies_are_read_and_waited_as_the_host_does() {
    let facts = platform_file("retry-and-offsets.json");
    let policy = &facts["retry_policy"];
    assert_eq!(
        policy["strategies"],
        serde_json::to_value(STRATEGIES).unwrap()
    );
    assert_eq!(
        policy["unlimited_max_retry_count"],
        UNLIMITED_MAX_RETRY_COUNT
    );
    assert_eq!(policy["smallest_max_retry_count"], SMALLEST_MAX_RETRY_COUNT);
    assert_eq!(
        policy["exponential_randomization"].as_f64(),
        Some(EXPONENTIAL_RANDOMIZATION)
    );
    // RandomizedExponentialBackoffStrategy at r = 1: the minimum, then the minimum plus
    // 2^(n-1) minimums, kept at the maximum once reached.
    let classify = AppDefinition::built_in()
        .unwrap()
        .function("classify")
        .unwrap()
        .retry
        .expect("classify has a retry policy");
    let RetryPolicy::ExponentialBackoff {
        max_retries,
        minimum,
        maximum,
    } = classify
    else {
        panic!("classify backs off exponentially: {classify:?}");
    };
    assert_eq!(max_retries, None, "classify retries without limit");
    assert_eq!(classify.delay_before(1), Some(minimum));
    assert_eq!(classify.delay_before(2), Some((minimum * 2).min(maximum)));
    assert_eq!(classify.delay_before(3), Some((minimum * 3).min(maximum)));
    assert_eq!(classify.delay_before(1000), Some(maximum));
}
