//! The store interface every stateful part of stormgate goes through.
//!
//! Two backends implement it: [`memory`] (embedded; the storm lab's default and local
//! runs) and [`redis`] (production; every multi-key change is one atomic Lua script).
//! One conformance suite (`tests/store_conformance.rs` in this crate) runs unchanged
//! against both, so the lab measures the same semantics production has.

pub mod memory;
pub mod redis;

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::job::{Job, JobId, SummaryKind, Tier};
use crate::summary::{PutOutcome, Summary};
use crate::ticket_id::TicketId;

/// Failures of the storage layer. Callers branch on `Unavailable` (retry later, fail
/// the invocation) versus `Corrupt` (a bug or a foreign writer: log and dead-letter).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("stored data could not be decoded: {0}")]
    Corrupt(String),
}

impl From<::redis::RedisError> for StoreError {
    fn from(e: ::redis::RedisError) -> Self {
        StoreError::Unavailable(e.to_string())
    }
}

/// Everything `classify` writes for one accepted ticket version, applied atomically:
/// the version check, the ticket snapshot, the instant extractive summary, cancellation
/// of superseded work, the new jobs, and the region's rollup mark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IngestRecord {
    pub ticket: TicketId,
    pub version: u64,
    /// The ticket as the summarizers will need it (bounded log included), serialized.
    pub snapshot: serde_json::Value,
    pub instant_summary: Summary,
    pub jobs: Vec<Job>,
    /// True when the ticket is resolved, closed or cancelled: pending work is cancelled
    /// and no new technician job is queued.
    pub closed: bool,
    pub region: Option<String>,
}

/// What ingesting one record did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IngestOutcome {
    Accepted,
    /// Same version already ingested.
    Duplicate,
    /// An older version than the one stored.
    Stale,
}

/// A job taken from a queue, with the lease that must be acknowledged or released.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    pub job: Job,
    /// Opaque token proving this worker holds the lease (a reclaimed job gets a new one).
    pub token: String,
    pub expires_at: EpochMillis,
}

/// Jobs leased together because they share a coalescing key.
pub type LeasedGroup = Vec<Lease>;

/// How waiting improves a job's priority.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AgingPolicy {
    /// Waiting this long promotes a job by one severity step.
    pub promote_every: Duration,
}

/// Queue health, for gauges and for the storm lab's charts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    pub pending: u64,
    pub leased: u64,
    pub oldest_enqueued_at: Option<EpochMillis>,
}

/// A rejected event kept with everything needed to fix and re-submit it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    pub reason: String,
    pub raw: String,
    pub topic: Option<String>,
    pub partition: Option<i64>,
    pub offset: Option<i64>,
    pub at: EpochMillis,
}

/// The storage operations stormgate needs. See the module docs for the backends.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Applies each record atomically and independently; outcomes are in input order.
    async fn ingest(&self, records: &[IngestRecord]) -> Result<Vec<IngestOutcome>, StoreError>;

    /// The latest snapshot stored for a ticket, with its version.
    async fn ticket_snapshot(
        &self,
        ticket: &TicketId,
    ) -> Result<Option<(u64, serde_json::Value)>, StoreError>;

    async fn put_summary(&self, summary: &Summary) -> Result<PutOutcome, StoreError>;
    async fn summary(
        &self,
        ticket: &TicketId,
        kind: SummaryKind,
    ) -> Result<Option<Summary>, StoreError>;

    /// Leases the job with the best effective priority in `tier`, plus up to
    /// `max_group - 1` pending jobs sharing its coalescing key.
    async fn lease(
        &self,
        tier: Tier,
        now: EpochMillis,
        lease_for: Duration,
        max_group: usize,
        aging: AgingPolicy,
    ) -> Result<LeasedGroup, StoreError>;
    /// Removes a leased job for good (its summary is stored). False if the lease was lost.
    async fn ack(&self, lease: &Lease) -> Result<bool, StoreError>;
    /// Puts a leased job back as pending in `tier` (the same tier to retry, the next to spill).
    async fn release(&self, lease: &Lease, tier: Tier) -> Result<bool, StoreError>;
    /// Returns expired leases to their queues; the count reclaimed.
    async fn reclaim_expired(&self, now: EpochMillis) -> Result<u64, StoreError>;
    /// Removes pending jobs of a ticket older than `below_version` (superseded or closed).
    async fn cancel(
        &self,
        ticket: &TicketId,
        below_version: u64,
        kinds: &[SummaryKind],
    ) -> Result<u64, StoreError>;
    async fn queue_stats(&self, tier: Tier) -> Result<QueueStats, StoreError>;
    async fn job_exists(&self, id: &JobId) -> Result<bool, StoreError>;

    async fn dead_letter(&self, entry: &DeadLetter) -> Result<String, StoreError>;
    async fn dead_letters(&self, limit: usize) -> Result<Vec<(String, DeadLetter)>, StoreError>;
    async fn remove_dead_letter(&self, id: &str) -> Result<bool, StoreError>;

    /// Regions whose executive roll-up is due, cleared as they are taken.
    async fn take_due_regions(&self) -> Result<Vec<String>, StoreError>;
}
