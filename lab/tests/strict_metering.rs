//! The storm lab against the simulator's strict reading of Azure's metering: the tokenizer's count
//! of every prompt when it exceeds characters / 4, requests over 1 s, 10 s and the sliding minute.
//! stormgate gets no 429, and the simulator's own record of what it admitted shows no sliding
//! window above the deployment's quota.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use stormgate_lab::replay::{DeploymentTotals, PolicyName, ReplayOptions, replay};
use stormgate_lab::scenario::Scenario;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::metering::MeterReading;
use stormgate_shared::severity::Severity;

/// The most any window of `length_ms` (sliding, starting at any admission) holds of
/// `weight` over `record` (sorted by time).
fn heaviest_window(
    record: &[(EpochMillis, u64)],
    length_ms: u64,
    weight: impl Fn(u64) -> u64,
) -> u64 {
    let mut heaviest = 0;
    let mut total = 0;
    let mut start = 0;
    for (end, &(at, charge)) in record.iter().enumerate() {
        total += weight(charge);
        while record[start].0.0 + length_ms <= at.0 {
            total -= weight(record[start].1);
            start += 1;
        }
        debug_assert!(start <= end);
        heaviest = heaviest.max(total);
    }
    heaviest
}

fn assert_within_quota(name: &str, d: &DeploymentTotals) {
    assert_eq!(d.charges_dropped, 0, "{name}: the record is complete");
    assert_eq!(d.charges.len() as u64, d.calls - d.throttled, "{name}");
    assert!(
        d.charges.windows(2).all(|w| w[0].0 <= w[1].0),
        "{name}: record in time order"
    );
    let tokens = heaviest_window(&d.charges, 60_000, |charge| charge);
    assert!(
        tokens <= d.tpm,
        "{name}: {tokens} tokens in one sliding minute, quota {}",
        d.tpm
    );
    let minute_requests = heaviest_window(&d.charges, 60_000, |_| 1);
    let ten_second_requests = heaviest_window(&d.charges, 10_000, |_| 1);
    let second_requests = heaviest_window(&d.charges, 1_000, |_| 1);
    assert!(
        minute_requests <= d.rpm,
        "{name}: {minute_requests} requests a minute"
    );
    assert!(
        ten_second_requests <= (d.rpm / 6).max(1),
        "{name}: {ten_second_requests} requests in 10 s"
    );
    assert!(
        second_requests <= (d.rpm / 60).max(1),
        "{name}: {second_requests} requests in 1 s"
    );
    assert_eq!(
        d.undercharged, 0,
        "{name}: the governor undercharged a request"
    );
}

#[tokio::test]
async fn the_storm_gets_no_429_under_the_strict_reading_and_no_window_exceeds_its_quota() {
    // The seed storm in small: every phase at 3 % of its length, the same intensity.
    let scenario = Scenario::seed_storm().unwrap().compressed(0.03);
    let options = ReplayOptions {
        policies: vec![PolicyName::Stormgate],
        reading: MeterReading::Strict,
        ..ReplayOptions::default()
    };
    let runs = replay(&scenario, &options, &mut |_, _| {}).await.unwrap();
    let run = &runs[0];
    assert_eq!(run.reading, MeterReading::Strict);
    let calls: u64 = run.deployments.values().map(|d| d.calls).sum();
    assert!(calls > 500, "only {calls} calls");
    for (name, d) in &run.deployments {
        assert_eq!(d.throttled, 0, "{name}: 429s under the strict reading");
        assert!(!d.charges.is_empty(), "{name} was never called");
        assert_within_quota(name, d);
        // The tokenizer did count more than characters / 4 on these prompts: the strict
        // reading was not the lenient one in disguise.
        assert!(d.largest_tokenized_permille > 1_000, "{name}: {d:?}");
    }
    // What the strict reading may cost is the long tail (the tier table keeps P4/P5
    // extractive while tokens are contested), never a ticket whose true severity is P1-P3.
    let (mut severe, mut severe_llm) = (0, 0);
    for t in run.tickets.values() {
        if t.severity.is_some_and(|s| s <= Severity::P3) && t.technician_jobs > 0 {
            severe += 1;
            severe_llm += usize::from(t.llm_summary.is_some());
        }
    }
    assert!(severe > 100, "only {severe} true P1-P3 tickets");
    assert_eq!(
        severe_llm, severe,
        "true P1-P3 tickets with an LLM technician summary under the strict reading"
    );
}

#[test]
fn the_window_check_counts_a_burst_that_straddles_two_fixed_minutes() {
    // 3 × 400 between 59 s and 61 s: no fixed minute holds more than 800, the sliding one 1,200.
    let record = [
        (EpochMillis(59_000), 400),
        (EpochMillis(59_500), 400),
        (EpochMillis(61_000), 400),
        (EpochMillis(125_000), 100),
    ];
    assert_eq!(heaviest_window(&record, 60_000, |c| c), 1_200);
    assert_eq!(heaviest_window(&record, 1_000, |_| 1), 2);
}
