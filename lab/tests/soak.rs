//! The retention soak on a real `redis-server`: tickets arrive for weeks of virtual time,
//! a storm multiplies the intake for some days, and Redis's `used_memory` reaches a
//! plateau once the retention window has passed over the storm.
//!
//! The short soak runs in CI (12 days, 240 tickets a day, a 6x storm of two days, 3 days
//! of retention). The full one (60 days at 3,000 a day with a 6x storm week, 14 days of
//! retention) is the figure in docs/operations.md: `cargo test --release -p
//! stormgate-lab --test integration soak:: -- --ignored --nocapture`, or `stormgate soak` against a
//! Redis of one's own.

#![allow(clippy::unwrap_used, clippy::panic, reason = "test code")]

use std::time::Duration;

use stormgate_lab::soak::{RedisMemory, SoakConfig, SoakReport, StormWeek, run};
use stormgate_shared::store::StoreLimits;
use stormgate_shared::testing::redis_server::RedisServer;

const DAY: Duration = Duration::from_secs(24 * 3600);

async fn soak(config: SoakConfig) -> SoakReport {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let store = server.store("soak").unwrap().with_limits(StoreLimits {
        retention: config.retention,
        ..StoreLimits::default()
    });
    let probe = RedisMemory(redis::Client::open(server.url()).unwrap());
    run(&store, &probe, &config).await.unwrap()
}

#[tokio::test]
async fn redis_memory_reaches_a_plateau_once_retention_has_passed_over_a_storm() {
    let storm = StormWeek {
        first_day: 3,
        days: 2,
        factor: 6,
    };
    let config = SoakConfig {
        days: 12,
        tickets_per_day: 240,
        storm: Some(storm),
        retention: 3 * DAY,
        seed: 9,
    };
    let report = soak(config).await;
    eprintln!("{}", report.render());

    let last = *report.last().unwrap();
    let peak = *report.peak().unwrap();
    assert!(
        (storm.first_day + 1..=storm.first_day + storm.days + 3).contains(&peak.day),
        "memory peaks with the storm's tickets kept: day {}",
        peak.day
    );
    assert!(
        peak.used_memory - report.baseline_memory > 3 * (last.used_memory - report.baseline_memory),
        "the storm's tickets were purged: peak {} against last {}",
        peak.used_memory,
        last.used_memory
    );
    // From the day retention has passed over the storm on, memory stays level.
    let settled = storm.first_day + storm.days + 3 + 1;
    for sample in report.samples.iter().filter(|s| s.day >= settled) {
        let ratio = sample.used_memory as f64 / last.used_memory as f64;
        assert!(
            (0.85..1.15).contains(&ratio),
            "day {}: {} bytes against {} at the end",
            sample.day,
            sample.used_memory,
            last.used_memory
        );
        assert!(
            (3 * 240..=4 * 240).contains(&sample.live_tickets),
            "day {}: {} tickets kept for 3 days of 240",
            sample.day,
            sample.live_tickets
        );
    }
}

#[tokio::test]
#[ignore = "the full soak, minutes in a release build: docs/operations.md, Redis memory"]
async fn sixty_days_at_3000_tickets_a_day_with_a_storm_week() {
    let report = soak(SoakConfig {
        days: 60,
        tickets_per_day: 3_000,
        storm: Some(StormWeek {
            first_day: 21,
            days: 7,
            factor: 6,
        }),
        retention: 14 * DAY,
        seed: 9,
    })
    .await;
    println!("{}", report.render());
    println!("{}", serde_json::to_string(&report).unwrap());
}
