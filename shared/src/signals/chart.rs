//! The series as charts read it: one point per minute of a range, with the counters of
//! the minute, its gauges (absent where nothing measured them, so a chart shows a gap
//! rather than a false zero), and the per-minute rates of the running totals.
//! `GET /api/series` answers this; the console draws it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::lag::median_from_histogram;
use super::series::{Minute, MinuteBucket, bucket_of, field, rate_of_total};
use crate::clock::EpochMillis;
use crate::deployment_name::DeploymentName;
use crate::job::{SummaryKind, Tier};
use crate::severity::Severity;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChartSeries {
    pub from: EpochMillis,
    pub to: EpochMillis,
    pub points: Vec<ChartPoint>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChartPoint {
    pub minute: EpochMillis,
    pub events: u64,
    pub accepted: u64,
    pub skipped: u64,
    pub dead_lettered: u64,
    pub lag_p50_ms: Option<u64>,
    pub lag_max_ms: Option<u64>,
    /// By severity name (`P1`…`P5`).
    pub severities: BTreeMap<String, SeverityPoint>,
    /// By deployment name.
    pub deployments: BTreeMap<String, DeploymentPoint>,
    /// Summaries stored that settled jobs, by tier.
    pub stored: BTreeMap<String, u64>,
    pub notices_delivered: u64,
    pub work_notes_delivered: u64,
    pub notices_waiting: Option<u64>,
    pub work_notes_waiting: Option<u64>,
    pub redis_used_memory: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeverityPoint {
    pub queued: Option<u64>,
    pub held: Option<u64>,
    pub in_flight: Option<u64>,
    pub oldest_age_ms: Option<u64>,
    pub behind_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentPoint {
    pub minute_tokens: Option<u64>,
    pub requests: Option<u64>,
    pub throttles: Option<u64>,
    pub spilled: u64,
    pub down: Option<bool>,
}

fn gauge(bucket: Option<&MinuteBucket>, field: &str) -> Option<u64> {
    bucket.and_then(|b| b.fields.get(field).copied())
}

/// One point per minute of `from..=to`, from `buckets` (which may start earlier: a
/// running total's first rate needs the minute before).
pub fn chart(
    buckets: &[MinuteBucket],
    deployments: &[(Tier, DeploymentName)],
    from: Minute,
    to: Minute,
) -> ChartSeries {
    let rates = |field: &str| -> BTreeMap<Minute, u64> {
        rate_of_total(buckets, field).into_iter().collect()
    };
    let requests: Vec<_> = deployments
        .iter()
        .map(|(_, d)| rates(&field::admitted_total(d)))
        .collect();
    let throttles: Vec<_> = deployments
        .iter()
        .map(|(_, d)| rates(&field::throttles_total(d)))
        .collect();
    let mut points = Vec::new();
    let mut minute = from;
    while minute <= to && points.len() <= 2_000 {
        let bucket = bucket_of(buckets, minute);
        let count = |field: &str| bucket.map_or(0, |b| b.get(field));
        let mut point = ChartPoint {
            minute: minute.start(),
            events: count(field::EVENTS),
            accepted: count(field::ACCEPTED),
            skipped: count(field::SKIPPED),
            dead_lettered: count(field::DEAD_LETTERED),
            lag_p50_ms: bucket.and_then(|b| median_from_histogram(&[b])),
            lag_max_ms: gauge(bucket, field::LAG_MAX_MS),
            notices_delivered: count(field::NOTICES_DELIVERED),
            work_notes_delivered: count(field::WORK_NOTES_DELIVERED),
            notices_waiting: gauge(bucket, field::NOTICES_WAITING),
            work_notes_waiting: gauge(bucket, field::WORK_NOTES_WAITING),
            redis_used_memory: gauge(bucket, field::REDIS_USED_MEMORY),
            ..ChartPoint::default()
        };
        for severity in Severity::ALL {
            point.severities.insert(
                severity.as_str().to_owned(),
                SeverityPoint {
                    queued: gauge(bucket, &field::queued(severity)),
                    held: gauge(bucket, &field::held(severity)),
                    in_flight: gauge(bucket, &field::in_flight(severity)),
                    oldest_age_ms: gauge(bucket, &field::oldest_age_ms(severity)),
                    behind_ms: gauge(bucket, &field::behind_ms(severity)),
                },
            );
        }
        for (i, (tier, d)) in deployments.iter().enumerate() {
            let spilled = [Tier::Standard, Tier::Extractive]
                .iter()
                .map(|&to| count(&field::spilled(*tier, to)))
                .sum();
            point.deployments.insert(
                d.to_string(),
                DeploymentPoint {
                    minute_tokens: gauge(bucket, &field::minute_tokens(d)),
                    requests: requests[i].get(&minute).copied(),
                    throttles: throttles[i].get(&minute).copied(),
                    spilled,
                    down: gauge(bucket, &field::down(d)).map(|v| v > 0),
                },
            );
        }
        for tier in [Tier::Premium, Tier::Standard, Tier::Extractive] {
            let n = SummaryKind::ALL
                .iter()
                .map(|&kind| count(&field::stored(tier, kind)))
                .sum();
            point.stored.insert(tier.as_str().to_owned(), n);
        }
        points.push(point);
        minute = minute.next();
    }
    ChartSeries {
        from: from.start(),
        to: to.start(),
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_minute_gets_a_point_and_gauges_leave_gaps() {
        let d: DeploymentName = "gpt-4o".parse().unwrap();
        let m0 = Minute(60_000 * 100);
        let bucket = |minute: Minute, fields: &[(String, u64)]| MinuteBucket {
            minute,
            fields: fields.iter().cloned().collect(),
        };
        let buckets = vec![
            bucket(m0, &[(field::admitted_total(&d), 5)]),
            bucket(
                m0.next(),
                &[
                    (field::EVENTS.to_owned(), 12),
                    (field::admitted_total(&d), 9),
                    (field::queued(Severity::P2), 3),
                    (field::stored(Tier::Premium, SummaryKind::Customer), 2),
                    (field::stored(Tier::Premium, SummaryKind::Technician), 1),
                ],
            ),
        ];
        let series = chart(
            &buckets,
            &[(Tier::Premium, d.clone())],
            m0.next(),
            m0.next().next(),
        );
        assert_eq!(series.points.len(), 2);
        let first = &series.points[0];
        assert_eq!(first.events, 12);
        assert_eq!(first.deployments["gpt-4o"].requests, Some(4));
        assert_eq!(first.severities["P2"].queued, Some(3));
        assert_eq!(first.severities["P1"].queued, None);
        assert_eq!(first.stored["premium"], 3);
        let empty = &series.points[1];
        assert_eq!(empty.events, 0);
        assert_eq!(empty.deployments["gpt-4o"].requests, None);
    }
}
