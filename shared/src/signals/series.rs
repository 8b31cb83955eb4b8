//! The per-minute series: minutes and days on the product's clock, the names of the
//! fields a bucket holds, and what a reader derives from consecutive buckets.
//!
//! Counters are added within a minute; gauges keep the minute's largest value. A gauge
//! that is a running total (`throttles_total:<deployment>`, `admitted_total:<deployment>`)
//! becomes a per-minute rate by difference with the previous minute that has it
//! ([`rate_of_total`]); a total that went down (its ledger was reset) counts from zero.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::deployment_name::DeploymentName;
use crate::job::{SummaryKind, Tier};
use crate::severity::Severity;

const MINUTE_MS: u64 = 60_000;
const DAY_MS: u64 = 24 * 3600 * 1000;

/// A minute of the product's clock, named by its first millisecond.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct Minute(pub u64);

impl Minute {
    pub fn of(at: EpochMillis) -> Minute {
        Minute(at.0 - at.0 % MINUTE_MS)
    }

    pub fn start(self) -> EpochMillis {
        EpochMillis(self.0)
    }

    /// The minute `n` minutes earlier (the epoch's at the earliest).
    pub fn back(self, n: u64) -> Minute {
        Minute(self.0.saturating_sub(n.saturating_mul(MINUTE_MS)))
    }

    pub fn next(self) -> Minute {
        Minute(self.0.saturating_add(MINUTE_MS))
    }
}

/// A UTC day of the product's clock, named by its first millisecond.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct Day(pub u64);

impl Day {
    pub fn of(at: EpochMillis) -> Day {
        Day(at.0 - at.0 % DAY_MS)
    }

    pub fn start(self) -> EpochMillis {
        EpochMillis(self.0)
    }

    /// The first millisecond of the next day.
    pub fn end(self) -> EpochMillis {
        EpochMillis(self.0.saturating_add(DAY_MS))
    }
}

/// One minute's bucket: every field recorded in it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinuteBucket {
    pub minute: Minute,
    pub fields: BTreeMap<String, u64>,
}

impl MinuteBucket {
    pub fn get(&self, field: &str) -> u64 {
        self.fields.get(field).copied().unwrap_or(0)
    }

    pub fn has(&self, field: &str) -> bool {
        self.fields.contains_key(field)
    }
}

/// The field names of a bucket. One function per signal, so that writers and readers
/// cannot spell one differently.
pub mod field {
    use super::*;

    /// Kafka records `classify` settled (accepted, recognised, dead-lettered or skipped).
    pub const EVENTS: &str = "events";
    /// Incident versions stored for the first time.
    pub const ACCEPTED: &str = "accepted";
    /// Records of the shared topic that are not incident events.
    pub const SKIPPED: &str = "skipped";
    /// Events kept in the dead-letter stream.
    pub const DEAD_LETTERED: &str = "dead_lettered";
    /// The largest consumer lag measured in the minute, in ms.
    pub const LAG_MAX_MS: &str = "lag_max_ms";
    /// Customer notices published, and work notes written to ServiceNow.
    pub const NOTICES_DELIVERED: &str = "notices_delivered";
    pub const WORK_NOTES_DELIVERED: &str = "work_notes_delivered";
    /// Deliveries owed and not yet made, fleet-wide (gauges).
    pub const NOTICES_WAITING: &str = "notices_waiting";
    pub const WORK_NOTES_WAITING: &str = "work_notes_waiting";
    /// Redis's `used_memory` and `maxmemory` (gauges).
    pub const REDIS_USED_MEMORY: &str = "redis_used_memory";
    pub const REDIS_MAXMEMORY: &str = "redis_maxmemory";

    /// Records whose consumer lag fell at or below `edge_ms` (the lag histogram; see
    /// [`crate::signals::lag::EDGES_MS`]).
    pub fn lag_at_most(edge_ms: u64) -> String {
        format!("lag_le:{edge_ms}")
    }

    /// Summaries stored that settled a job, by the tier that produced them.
    pub fn stored(tier: Tier, kind: SummaryKind) -> String {
        format!("stored:{tier}:{kind}")
    }

    /// Jobs that left `from` for `to`.
    pub fn spilled(from: Tier, to: Tier) -> String {
        format!("spilled:{from}:{to}")
    }

    /// Per severity, over both LLM tiers (gauges).
    pub fn queued(severity: Severity) -> String {
        format!("queued:{}", severity.as_str().to_ascii_lowercase())
    }
    pub fn held(severity: Severity) -> String {
        format!("held:{}", severity.as_str().to_ascii_lowercase())
    }
    pub fn in_flight(severity: Severity) -> String {
        format!("in_flight:{}", severity.as_str().to_ascii_lowercase())
    }
    pub fn oldest_age_ms(severity: Severity) -> String {
        format!("oldest_age_ms:{}", severity.as_str().to_ascii_lowercase())
    }
    pub fn behind_ms(severity: Severity) -> String {
        format!("behind_ms:{}", severity.as_str().to_ascii_lowercase())
    }

    /// Per deployment: tokens charged to the last 60 s, the running totals of
    /// admissions and 429s (gauges), and whether it was down (1) in the minute.
    pub fn minute_tokens(deployment: &DeploymentName) -> String {
        format!("minute_tokens:{deployment}")
    }
    pub fn admitted_total(deployment: &DeploymentName) -> String {
        format!("admitted_total:{deployment}")
    }
    pub fn throttles_total(deployment: &DeploymentName) -> String {
        format!("throttles_total:{deployment}")
    }
    pub fn down(deployment: &DeploymentName) -> String {
        format!("down:{deployment}")
    }

    /// The day's usage counters, per deployment: tokens billed and calls answered.
    pub fn prompt_tokens(deployment: &DeploymentName) -> String {
        format!("prompt:{deployment}")
    }
    pub fn completion_tokens(deployment: &DeploymentName) -> String {
        format!("completion:{deployment}")
    }
    pub fn calls(deployment: &DeploymentName) -> String {
        format!("calls:{deployment}")
    }
}

/// The per-minute rate of a running total: for each bucket that has `field`, its value
/// less that of the previous bucket that has it (the first one has no rate; a total that
/// went down counts from zero, the ledger behind it having been reset).
pub fn rate_of_total(buckets: &[MinuteBucket], field: &str) -> Vec<(Minute, u64)> {
    let mut previous: Option<u64> = None;
    let mut out = Vec::new();
    for bucket in buckets {
        let Some(&total) = bucket.fields.get(field) else {
            continue;
        };
        if let Some(before) = previous {
            let rate = if total >= before {
                total - before
            } else {
                total
            };
            out.push((bucket.minute, rate));
        }
        previous = Some(total);
    }
    out
}

/// The bucket of `minute`, if one was kept.
pub fn bucket_of(buckets: &[MinuteBucket], minute: Minute) -> Option<&MinuteBucket> {
    buckets.iter().find(|b| b.minute == minute)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(minute: u64, fields: &[(&str, u64)]) -> MinuteBucket {
        MinuteBucket {
            minute: Minute(minute * MINUTE_MS),
            fields: fields.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        }
    }

    #[test]
    fn minutes_and_days_start_at_their_first_millisecond() {
        assert_eq!(Minute::of(EpochMillis(125_001)), Minute(120_000));
        assert_eq!(Minute(120_000).back(2), Minute(0));
        assert_eq!(Minute(120_000).back(5), Minute(0), "saturates at the epoch");
        assert_eq!(Day::of(EpochMillis(DAY_MS + 5)), Day(DAY_MS));
        assert_eq!(Day(DAY_MS).end(), EpochMillis(2 * DAY_MS));
    }

    #[test]
    fn a_running_total_becomes_a_rate_and_survives_a_reset() {
        let buckets = [
            bucket(1, &[("t", 5)]),
            bucket(2, &[("other", 1)]),
            bucket(3, &[("t", 9)]),
            bucket(4, &[("t", 9)]),
            bucket(5, &[("t", 2)]),
        ];
        assert_eq!(
            rate_of_total(&buckets, "t"),
            vec![
                (Minute(3 * MINUTE_MS), 4),
                (Minute(4 * MINUTE_MS), 0),
                (Minute(5 * MINUTE_MS), 2)
            ]
        );
        assert!(rate_of_total(&buckets[..1], "t").is_empty());
    }

    #[test]
    fn field_names_carry_their_dimensions() {
        assert_eq!(
            field::stored(Tier::Premium, SummaryKind::Customer),
            "stored:premium:customer"
        );
        assert_eq!(field::queued(Severity::P3), "queued:p3");
        let d: DeploymentName = "gpt-4o".parse().unwrap();
        assert_eq!(field::throttles_total(&d), "throttles_total:gpt-4o");
        assert_eq!(field::lag_at_most(500), "lag_le:500");
    }
}
