//! Consumer lag: how long after Kafka stamped a record `classify` settled it.
//!
//! The seed write-up calls consumer lag the early-warning storm metric: it grows before
//! anything downstream does. Each record of a batch gives one sample, `now − timestamp`
//! (the Kafka record's own timestamp, which the trigger passes as `Timestamp`); a batch's
//! samples become, per partition, the median and the largest ([`PartitionLag`]), and each
//! sample is also counted in a fixed histogram ([`EDGES_MS`]) of its minute, so that a
//! minute's median over every batch and partition can be read back
//! ([`median_from_histogram`]) without keeping the samples.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;

use super::SignalBatch;
use super::series::{MinuteBucket, field};

/// Upper edges of the lag histogram, in ms; a sample above the last counts in none.
pub const EDGES_MS: [u64; 14] = [
    250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000,
    3_600_000, 21_600_000,
];

/// The lag of one partition's records in the latest batch that had any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i64,
    /// Records of the batch with a timestamp.
    pub records: u64,
    pub p50_ms: u64,
    pub max_ms: u64,
    pub measured_at: EpochMillis,
}

/// The samples of one batch, by partition.
#[derive(Debug, Clone, Default)]
pub struct LagSamples {
    by_partition: BTreeMap<(String, i64), Vec<u64>>,
    /// Records without a timestamp (or with one the product could not read).
    pub unstamped: u64,
}

impl LagSamples {
    /// One record settled at `now`, stamped `timestamp` by Kafka (`None`: no stamp).
    pub fn add(
        &mut self,
        topic: Option<&str>,
        partition: Option<i64>,
        timestamp: Option<EpochMillis>,
        now: EpochMillis,
    ) {
        match timestamp {
            Some(at) => self
                .by_partition
                .entry((
                    topic.unwrap_or_default().to_owned(),
                    partition.unwrap_or(-1),
                ))
                .or_default()
                .push(now.0.saturating_sub(at.0)),
            None => self.unstamped += 1,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_partition.is_empty()
    }

    /// Per partition, the median and the largest sample.
    pub fn per_partition(&self, now: EpochMillis) -> Vec<PartitionLag> {
        self.by_partition
            .iter()
            .map(|((topic, partition), samples)| {
                let mut sorted = samples.clone();
                sorted.sort_unstable();
                PartitionLag {
                    topic: topic.clone(),
                    partition: *partition,
                    records: sorted.len() as u64,
                    p50_ms: median(&sorted),
                    max_ms: sorted.last().copied().unwrap_or(0),
                    measured_at: now,
                }
            })
            .collect()
    }

    /// Adds the batch's lag to a signal batch: the partitions' latest lag, the minute's
    /// largest, and the histogram counts.
    pub fn record_into(&self, batch: &mut SignalBatch) {
        let partitions = self.per_partition(batch.at);
        if let Some(max) = partitions.iter().map(|p| p.max_ms).max() {
            batch.max(field::LAG_MAX_MS, max);
        }
        for samples in self.by_partition.values() {
            for &sample in samples {
                if let Some(&edge) = EDGES_MS.iter().find(|&&edge| sample <= edge) {
                    batch.count(field::lag_at_most(edge), 1);
                }
            }
        }
        batch.lag.extend(partitions);
    }
}

/// The lower median of sorted samples (0 for none).
pub fn median(sorted: &[u64]) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[(sorted.len() - 1) / 2]
}

/// The median lag of the samples counted in `buckets`' histograms: the upper edge of
/// the histogram bin holding the middle sample (so at most that); `None` without samples.
/// Samples above the last edge are not counted, and a median among them reads as the
/// last edge.
pub fn median_from_histogram(buckets: &[&MinuteBucket]) -> Option<u64> {
    let counts: Vec<u64> = EDGES_MS
        .iter()
        .map(|&edge| {
            buckets
                .iter()
                .map(|b| b.get(&field::lag_at_most(edge)))
                .sum()
        })
        .collect();
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let middle = total.div_ceil(2);
    let mut seen = 0;
    for (edge, count) in EDGES_MS.iter().zip(counts) {
        seen += count;
        if seen >= middle {
            return Some(*edge);
        }
    }
    EDGES_MS.last().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_partition_gets_its_median_and_largest_lag() {
        let now = EpochMillis(100_000);
        let mut samples = LagSamples::default();
        for ago in [1_000, 3_000, 2_000] {
            samples.add(Some("t"), Some(0), Some(EpochMillis(100_000 - ago)), now);
        }
        samples.add(Some("t"), Some(1), Some(EpochMillis(40_000)), now);
        samples.add(Some("t"), Some(1), None, now);
        // A timestamp after `now` (clock skew) is no lag, not a negative one.
        samples.add(Some("t"), Some(2), Some(EpochMillis(100_500)), now);
        let lags = samples.per_partition(now);
        assert_eq!(lags.len(), 3);
        assert_eq!(
            (lags[0].partition, lags[0].p50_ms, lags[0].max_ms),
            (0, 2_000, 3_000)
        );
        assert_eq!(lags[0].records, 3);
        assert_eq!((lags[1].p50_ms, lags[1].max_ms), (60_000, 60_000));
        assert_eq!((lags[2].p50_ms, lags[2].max_ms), (0, 0));
        assert_eq!(samples.unstamped, 1);
    }

    #[test]
    fn the_minute_median_is_read_back_from_the_histogram() {
        let now = EpochMillis(1_000_000);
        let mut samples = LagSamples::default();
        for ago in [100, 400, 700, 1_500, 40_000] {
            samples.add(Some("t"), Some(0), Some(EpochMillis(now.0 - ago)), now);
        }
        let mut batch = SignalBatch::at(now);
        samples.record_into(&mut batch);
        assert_eq!(batch.maxima[field::LAG_MAX_MS], 40_000);
        let bucket = MinuteBucket {
            fields: batch.counts.clone(),
            ..MinuteBucket::default()
        };
        // The middle sample (700 ms) lies in the bin ending at 1 s.
        assert_eq!(median_from_histogram(&[&bucket]), Some(1_000));
        assert_eq!(median_from_histogram(&[]), None);
        assert_eq!(batch.lag.len(), 1);
        assert_eq!(batch.lag[0].p50_ms, 700);
    }
}
