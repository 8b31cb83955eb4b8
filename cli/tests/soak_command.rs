//! `stormgate soak` against a real `redis-server`: a short run reports one sample a day
//! with the memory Redis holds, and a Redis that is not empty is refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::process::Command;

use serde_json::Value;
use stormgate_shared::testing::redis_server::RedisServer;

fn soak(redis: &RedisServer, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_stormgate"))
        .args(["soak", "--redis", &redis.url()])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_short_soak_reports_a_sample_a_day_and_a_used_redis_is_refused() {
    let redis = RedisServer::start().unwrap();
    let short = [
        "--days",
        "3",
        "--tickets-per-day",
        "48",
        "--retention-days",
        "1",
        "--storm-factor",
        "1",
        "--json",
    ];
    let output = soak(&redis, &short);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let samples = report["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 3);
    assert!(
        samples
            .iter()
            .all(|s| s["used_memory"].as_u64().unwrap() > 0)
    );
    assert!(
        samples[2]["purged_total"].as_u64().unwrap() > 0,
        "a day of retention purged the first day's tickets: {report}"
    );

    let again = soak(&redis, &short);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("empty"));
}
