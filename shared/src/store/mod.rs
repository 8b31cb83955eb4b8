//! The store interface every stateful part of stormgate goes through.
//!
//! Two backends implement it: [`memory`] (embedded; the storm lab's default and local
//! runs) and [`redis`] (production; every multi-key change is one atomic Lua script).
//! One conformance suite (`tests/store_conformance.rs` in this crate) runs unchanged
//! against both, so the lab measures the same semantics production has.

pub mod memory;
pub mod outbox;
pub mod redis;

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::event::CdcHeaders;
use crate::job::{Job, JobId, SummaryKind, Tier};
use crate::region_key::RegionKey;
use crate::region_rollup::RegionRollup;
use crate::severity::Severity;
use crate::snapshot::SnapshotLoad;
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
    /// Replies that cannot be decoded, values of the wrong type and failing scripts
    /// are `Corrupt` (retrying cannot help); everything else — network, timeouts,
    /// failover, loading, memory pressure, authentication — is `Unavailable`.
    fn from(e: ::redis::RedisError) -> Self {
        let decode_failure = matches!(e.kind(), ::redis::ErrorKind::UnexpectedReturnType);
        // A pipeline's error carries one server error per failed command.
        let server_failure = e
            .clone()
            .into_server_errors()
            .is_some_and(|errors| errors.iter().any(|(_, error)| is_data_error(error)));
        if decode_failure || server_failure {
            StoreError::Corrupt(e.to_string())
        } else {
            StoreError::Unavailable(e.to_string())
        }
    }
}

/// A server error caused by what is stored or by a script, not by the server's state.
fn is_data_error(error: &::redis::ServerError) -> bool {
    let in_script = error.details().is_some_and(|d| d.contains("script"));
    error.code() == "WRONGTYPE" || (error.code() == "ERR" && in_script)
}

/// How many of its most recently ingested tickets a region's index keeps.
pub const REGION_INDEX_CAP: usize = 10_000;

/// The bounds a store keeps itself within, so that nothing it holds grows without end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreLimits {
    /// How long a ticket is kept after its last accepted version (the one that resolved
    /// or closed it, for a finished ticket): then [`Store::purge_expired`] deletes its
    /// snapshot, summaries and index entries. Zero keeps tickets for ever.
    pub retention: Duration,
    /// The most dead letters kept; writing one more trims the oldest (counted in
    /// [`DeadLetterStats::trimmed_total`]). Zero keeps every one.
    pub dead_letter_cap: u64,
}

/// Tickets are kept 14 days after their last update.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(14 * 24 * 3600);
/// At most this many dead letters are kept.
pub const DEFAULT_DEAD_LETTER_CAP: u64 = 5_000;
/// How much longer than the retention Redis's own key expiry waits: the purge (which
/// also trims the region indexes) normally comes first; the key expiry is the bound
/// that holds even when no purge runs.
pub const KEY_EXPIRY_GRACE: Duration = Duration::from_secs(24 * 3600);

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            retention: DEFAULT_RETENTION,
            dead_letter_cap: DEFAULT_DEAD_LETTER_CAP,
        }
    }
}

impl StoreLimits {
    /// When a ticket version ingested at `at` stops being kept; `None` with no retention.
    pub fn expires_at(&self, at: EpochMillis) -> Option<EpochMillis> {
        (!self.retention.is_zero()).then(|| at.plus(self.retention))
    }
}

/// What one purge of expired tickets did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeReport {
    /// Tickets whose snapshot, summaries, pending jobs and index entries were deleted.
    pub tickets: u64,
    /// More tickets were due than the purge's limit: the next purge continues.
    pub more_due: bool,
}

/// The dead-letter stream's size and what its cap has trimmed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetterStats {
    pub entries: u64,
    /// [`StoreLimits::dead_letter_cap`] (0: no cap).
    pub cap: u64,
    /// Entries trimmed by the cap since the stream began (never reset by re-submission).
    pub trimmed_total: u64,
}

/// Everything `classify` writes for one accepted ticket version, applied atomically:
/// the version check, the ticket snapshot, the instant extractive summary, cancellation
/// of superseded work, the new jobs, and the roll-up marks of the region it joins and of
/// the region its previous version was filed under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IngestRecord {
    pub ticket: TicketId,
    pub version: u64,
    /// The ticket as the summarizers will need it (bounded log included), serialized.
    pub snapshot: SnapshotJson,
    pub instant_summary: Summary,
    pub jobs: Vec<Job>,
    /// True when the ticket is resolved, closed or cancelled: pending work is cancelled
    /// and no new technician job is queued.
    pub closed: bool,
    pub region: Option<String>,
}

/// A snapshot's JSON text, serialized once when its record is prepared and stored as it
/// is: ingest never builds a `serde_json::Value` tree of a snapshot only to write it out
/// (and free it) again.
///
/// Shared, not copied: a record's snapshot is stored as it is by every replay of a
/// prepared trace, so storing it only counts a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotJson(std::sync::Arc<str>);

impl SnapshotJson {
    pub fn encode(value: &impl Serialize) -> Result<SnapshotJson, serde_json::Error> {
        serde_json::to_string(value).map(|text| SnapshotJson(text.into()))
    }

    pub fn from_value(value: &serde_json::Value) -> SnapshotJson {
        SnapshotJson(value.to_string().into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

impl Serialize for SnapshotJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value()
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SnapshotJson {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(deserializer).map(|v| SnapshotJson::from_value(&v))
    }
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

impl AgingPolicy {
    /// The job's place in its queue: lowest is served first.
    ///
    /// `enqueued_at + (rank - 1) × promote_every`. Comparing two jobs, A (rank `a`,
    /// enqueued `ta`) goes before B (rank `b`, enqueued `tb`) exactly when
    /// `tb - ta > (a - b) × promote_every`: each `promote_every` A has waited longer
    /// than B is worth one severity step. The score depends on nothing that changes
    /// while a job waits, so the order of two pending jobs never flips and no
    /// rescoring is ever needed. It also bounds waiting: a job is overtaken only by
    /// jobs enqueued before `enqueued_at + (rank - 1) × promote_every`, so once the
    /// jobs already ahead of it are drained, a P5 waits at most 4 × `promote_every`
    /// longer than a P1 enqueued at the same instant. Equal scores go by arrival,
    /// then by job id (see [`queue_order`]).
    pub fn effective_score(&self, severity: Severity, enqueued_at: EpochMillis) -> u64 {
        let step = u64::try_from(self.promote_every.as_millis()).unwrap_or(u64::MAX);
        let steps = u64::from(severity.rank() - 1);
        enqueued_at
            .as_millis()
            .saturating_add(step.saturating_mul(steps))
    }
}

/// The total order both backends serve pending jobs in: effective score, then
/// arrival, then the job id's text (Redis's own tie-break between equal scores).
pub fn queue_order(aging: &AgingPolicy, job: &Job) -> (u64, EpochMillis, String) {
    (
        aging.effective_score(job.rank(), job.enqueued_at),
        job.enqueued_at,
        job.id.to_string(),
    )
}

/// Queue health, for gauges and for the storm lab's charts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Jobs that may be leased now (held ones not included).
    pub pending: u64,
    /// Queued jobs on hold: they join a group of their coalescing key, but lead none
    /// before their hold ends ([`crate::job::Job::hold_until`]).
    #[serde(default)]
    pub held: u64,
    pub leased: u64,
    pub oldest_enqueued_at: Option<EpochMillis>,
    /// Pending jobs per queue rank ([`crate::job::Job::rank`]: the routing severity, or
    /// ServiceNow's priority for a lifted technician summary), by [`Severity::index`] (P1 first).
    pub pending_by_severity: [u64; 5],
    /// Oldest pending arrival per severity, indexed like `pending_by_severity`.
    pub oldest_by_severity: [Option<EpochMillis>; 5],
}

/// A rejected event kept with everything needed to fix and re-submit it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    pub reason: String,
    /// The event's value (as text; at most the ingest policy's `dead_letter_raw_bytes`).
    pub raw: String,
    /// The CDC headers it came with: re-submission must see the same `action` and
    /// `table_name`, or a delete would come back as an update.
    #[serde(default)]
    pub headers: CdcHeaders,
    /// Whether `raw` and `headers` are the event exactly as delivered, so that
    /// re-submitting replays it. False when the value was clipped or was not UTF-8, or
    /// when the Kafka record itself could not be decoded; such an entry is only listed.
    #[serde(default = "replayable_by_default")]
    pub replayable: bool,
    pub topic: Option<String>,
    pub partition: Option<i64>,
    pub offset: Option<i64>,
    pub at: EpochMillis,
}

fn replayable_by_default() -> bool {
    true
}

/// Who makes the LLM call of a job, as [`Store::claim_calls`] answers for one job.
///
/// A hand-off message can reach two workers (a redelivery after a worker died or lost
/// its hold on the message): the first to claim a job makes its call, the other sees it
/// in flight, and a delivery that comes after the job's final summary is stored sees it
/// done. Either way only one of them pays for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum CallClaim {
    /// The caller holds the claim: it makes the call.
    Claimed,
    /// Another holder's claim runs until `until`: its call is in flight.
    InFlight { until: EpochMillis },
    /// A final summary of this version (the LLM's, or the fallback) or of a newer one is
    /// stored: no call is needed.
    Done,
}

/// Deliveries owed to one sink ([`Store::put_summary_owed`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwedStats {
    /// Owed and free to be claimed now.
    pub due: u64,
    /// Claimed by a delivery in progress (due again if its claim runs out).
    pub claimed: u64,
}

/// The storage operations stormgate needs. See the module docs for the backends.
#[async_trait]
pub trait Store: ConsoleStore + Send + Sync + std::fmt::Debug {
    /// Applies each record atomically and independently; outcomes are in input order.
    ///
    /// Keyed on ticket + version: the same version again is `Duplicate`, an older one
    /// `Stale`, and neither writes anything. An accepted record stores the snapshot,
    /// stores the instant summary (unless a better one is stored, see
    /// [`crate::summary::replaces`]), cancels every pending job of older versions,
    /// queues its jobs (no technician job when the ticket is closed), files the ticket
    /// under its region (see [`Store::region_tickets`]) and marks the region's roll-up
    /// due. When the stored older version was filed under another region, that region's
    /// roll-up is marked due as well (the ticket left it). An empty region counts as none.
    /// An accepted version restarts the ticket's retention ([`StoreLimits::retention`],
    /// from the instant summary's `created_at`).
    async fn ingest(&self, records: &[IngestRecord]) -> Result<Vec<IngestOutcome>, StoreError> {
        self.ingest_each(records).await?.into_iter().collect()
    }

    /// [`Store::ingest`], telling for each record whether the store took it: records are
    /// independent, so one the store refuses (a script error, a value of the wrong type,
    /// memory pressure) does not undo the others, which are stored whatever becomes of it.
    /// The outer error is for a store that could not be asked at all.
    async fn ingest_each(
        &self,
        records: &[IngestRecord],
    ) -> Result<Vec<Result<IngestOutcome, StoreError>>, StoreError>;

    /// The latest snapshot stored for a ticket, with its version, as stored. Product code
    /// reads it through [`Store::load_snapshot`].
    async fn ticket_snapshot(
        &self,
        ticket: &TicketId,
    ) -> Result<Option<(u64, serde_json::Value)>, StoreError>;

    /// The latest snapshot of a ticket, decoded and judged against `job_version` (the version
    /// a job is for; `None` for the latest, whatever it is): current, superseded, unreadable
    /// or missing.
    async fn load_snapshot(
        &self,
        ticket: &TicketId,
        job_version: Option<u64>,
    ) -> Result<SnapshotLoad, StoreError> {
        Ok(SnapshotLoad::judge(
            self.ticket_snapshot(ticket).await?,
            job_version,
        ))
    }

    /// Queues jobs outside of ingest (roll-ups, re-submissions). Idempotent per job id:
    /// a job already pending or leased is left alone. The count newly queued.
    async fn enqueue(&self, jobs: &[Job]) -> Result<u64, StoreError>;

    async fn put_summary(&self, summary: &Summary) -> Result<PutOutcome, StoreError>;
    async fn summary(
        &self,
        ticket: &TicketId,
        kind: SummaryKind,
    ) -> Result<Option<Summary>, StoreError>;

    /// Stores a region's roll-up unless a newer one, or a better one of the same version
    /// (the model's over an extractive one), is stored. The purge of tickets leaves
    /// roll-ups alone; in Redis a region's roll-up expires the retention plus
    /// [`KEY_EXPIRY_GRACE`] after its latest one was stored.
    async fn put_rollup(&self, rollup: &RegionRollup) -> Result<PutOutcome, StoreError>;
    /// The latest roll-up stored for `region`.
    async fn rollup(&self, region: &RegionKey) -> Result<Option<RegionRollup>, StoreError>;

    /// Leases the job with the best effective priority in `tier` (see
    /// [`AgingPolicy::effective_score`]), plus up to `max_group - 1` pending jobs of that
    /// tier sharing its coalescing key, longest waiting first (the key carries the
    /// coalescing window). The best job comes first; `max_group` 0 counts as 1; an
    /// empty queue gives an empty group. Each lease's job carries its current tier.
    async fn lease(
        &self,
        tier: Tier,
        now: EpochMillis,
        lease_for: Duration,
        max_group: usize,
        aging: AgingPolicy,
    ) -> Result<LeasedGroup, StoreError>;
    /// The first `limit` pending jobs of `tier` in the order [`Store::lease`] would serve
    /// their leaders (see [`queue_order`]), without leasing them: what the dispatcher
    /// reads to foresee which jobs the tier cannot serve before their deadline.
    async fn pending_jobs(
        &self,
        tier: Tier,
        limit: usize,
        aging: AgingPolicy,
    ) -> Result<Vec<Job>, StoreError>;
    /// Shows `visit` the jobs [`Store::pending_jobs`] would list, in the same order,
    /// without handing them over: what the dispatcher's backlog scan reads every tick.
    /// A backend that can lend its jobs in place saves copying thousands of them.
    async fn visit_pending_jobs(
        &self,
        tier: Tier,
        limit: usize,
        aging: AgingPolicy,
        visit: &mut (dyn for<'j> FnMut(&'j Job) + Send),
    ) -> Result<(), StoreError> {
        for job in self.pending_jobs(tier, limit, aging).await? {
            visit(&job);
        }
        Ok(())
    }
    /// Leases exactly the named jobs that are still pending in `tier` (others are
    /// skipped), in the order given, each with its own lease token.
    async fn lease_jobs(
        &self,
        tier: Tier,
        ids: &[JobId],
        now: EpochMillis,
        lease_for: Duration,
    ) -> Result<LeasedGroup, StoreError>;
    /// Removes a leased job for good (its summary is stored). False if the lease was lost
    /// (reclaimed, acknowledged or released already); an expired lease not yet
    /// reclaimed is still honoured.
    async fn ack(&self, lease: &Lease) -> Result<bool, StoreError>;
    /// Puts a leased job back as pending in `tier` (the same tier to retry, the next to
    /// spill), keeping its arrival time so it keeps its place. False if the lease was
    /// lost. A job cancelled while leased is dropped instead of re-queued.
    async fn release(&self, lease: &Lease, tier: Tier) -> Result<bool, StoreError>;
    /// Returns leases expired at `now` (`expires_at <= now`) to their queues, with their
    /// arrival time; the count re-queued. Jobs cancelled while leased are dropped.
    async fn reclaim_expired(&self, now: EpochMillis) -> Result<u64, StoreError>;
    /// Removes pending jobs of a ticket older than `below_version` whose kind is in
    /// `kinds` (superseded or closed); the count removed. Such jobs that are leased are
    /// marked so that release or reclaim drops them; their ack still succeeds.
    async fn cancel(
        &self,
        ticket: &TicketId,
        below_version: u64,
        kinds: &[SummaryKind],
    ) -> Result<u64, StoreError>;
    async fn queue_stats(&self, tier: Tier) -> Result<QueueStats, StoreError>;
    /// Whether the job is pending or leased.
    async fn job_exists(&self, id: &JobId) -> Result<bool, StoreError>;

    /// Keeps a rejected event; its id. Beyond [`StoreLimits::dead_letter_cap`] entries
    /// the oldest are trimmed and counted ([`Store::dead_letter_stats`]).
    async fn dead_letter(&self, entry: &DeadLetter) -> Result<String, StoreError>;
    /// The oldest `limit` dead letters, oldest first.
    async fn dead_letters(&self, limit: usize) -> Result<Vec<(String, DeadLetter)>, StoreError>;
    async fn remove_dead_letter(&self, id: &str) -> Result<bool, StoreError>;

    /// Regions whose executive roll-up is due, cleared as they are taken.
    async fn take_due_regions(&self) -> Result<Vec<String>, StoreError>;

    /// Up to `limit` tickets of `region` with a stored snapshot, most recently
    /// ingested first: what a regional roll-up reads. A ticket belongs to the region
    /// of its latest accepted version; each region keeps its latest
    /// [`REGION_INDEX_CAP`] tickets.
    async fn region_tickets(&self, region: &str, limit: usize)
    -> Result<Vec<TicketId>, StoreError>;

    /// [`Store::put_summary`], and, when `owes` and the summary is stored, one delivery
    /// of it owed to its sink (the customer notice of a customer summary, the work note of
    /// a technician one), due at `now`: the job id joins its kind's owed set unless that
    /// version was delivered already or is owed already. One atomic step, so that a
    /// stored summary is never left without its delivery owed, whatever happens next.
    async fn put_summary_owed(
        &self,
        summary: &Summary,
        owes: bool,
        now: EpochMillis,
    ) -> Result<PutOutcome, StoreError>;

    /// Claims the deliveries owed for `ids` that are due at `now` (owed, and not claimed
    /// by a delivery in progress), holding each until `hold_until`: a delivery not
    /// completed by then is due again. The ids claimed, in the order given.
    async fn claim_owed(
        &self,
        ids: &[JobId],
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Result<Vec<JobId>, StoreError>;

    /// Claims up to `limit` deliveries of `kind` due at `now`, earliest due first (then
    /// by job id), holding each until `hold_until`.
    async fn claim_due_owed(
        &self,
        kind: SummaryKind,
        limit: usize,
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Result<Vec<JobId>, StoreError>;

    /// Ends the deliveries of `ids`, claimed or not: they are no longer owed, and each
    /// version is recorded as delivered (while its ticket's summaries are kept), so that
    /// storing it again owes nothing. The count that were owed.
    async fn complete_owed(&self, ids: &[JobId]) -> Result<u64, StoreError>;

    /// How many deliveries of `kind` are owed, due at `now` or claimed.
    async fn owed_stats(
        &self,
        kind: SummaryKind,
        now: EpochMillis,
    ) -> Result<OwedStats, StoreError>;

    /// For each job of `ids`, in order: claims its LLM call for `holder` until `until`,
    /// unless another holder's claim is still running at `now` ([`CallClaim::InFlight`])
    /// or a final summary of its version or a newer one is stored ([`CallClaim::Done`]).
    /// A claim of the same holder is extended. Claims are kept only while they run.
    async fn claim_calls(
        &self,
        ids: &[JobId],
        holder: &str,
        now: EpochMillis,
        until: EpochMillis,
    ) -> Result<Vec<CallClaim>, StoreError>;

    /// Extends to `until` the claims `holder` still holds on `ids` (a claim another
    /// holder took over after it ran out is left alone); the count extended.
    async fn renew_calls(
        &self,
        ids: &[JobId],
        holder: &str,
        now: EpochMillis,
        until: EpochMillis,
    ) -> Result<u64, StoreError>;

    /// Drops the claims `holder` holds on `ids` (a claim another holder took over is left
    /// alone).
    async fn release_calls(&self, ids: &[JobId], holder: &str) -> Result<(), StoreError>;

    /// Deletes up to `limit` tickets whose retention ([`StoreLimits::retention`]) ended
    /// at `now`, measured from the ingest of their latest version: snapshot, summaries,
    /// pending jobs (leased ones are marked cancelled) and their entry in the region
    /// index. A ticket updated again meanwhile is kept for the full retention from that
    /// update. Idempotent; an absent ticket is skipped.
    async fn purge_expired(
        &self,
        now: EpochMillis,
        limit: usize,
    ) -> Result<PurgeReport, StoreError>;

    /// The dead-letter stream's length, cap and trimmed count.
    async fn dead_letter_stats(&self) -> Result<DeadLetterStats, StoreError>;
}

/// Per severity, one tier's queued (pending), held and leased jobs, with the oldest
/// queued ones: what the status reads to say how far behind each severity is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeverityBreakdown {
    /// Indexed by [`Severity::index`] (P1 first).
    pub pending: [u64; 5],
    pub held: [u64; 5],
    pub leased: [u64; 5],
    /// Per severity, the longest-waiting pending jobs (at most the `head` asked for),
    /// oldest first, each with its current tier.
    pub oldest: [Vec<Job>; 5],
}

/// Held and leased jobs a [`Store::severity_breakdown`] looks at per tier, at most: the
/// work in flight is far smaller; beyond it the counts stop.
pub const BREAKDOWN_SCAN: usize = 100_000;

/// What [`Store::resummarize`] did with one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResummarizeOutcome {
    /// Queued (a pending job of the same id was taken out first); a degraded fallback of
    /// this version is no longer final, so the job's call will be made.
    Queued,
    /// The LLM summary of this version is stored already: nothing to do.
    AlreadyLlm,
    /// The job is leased: its call is being made now.
    InFlight,
    /// The ticket's latest version is not the job's (or the ticket is gone).
    Stale,
}

/// The console's reads and the operators' one-shot actions on the store: added to
/// [`Store`] by the same two backends.
#[async_trait]
pub trait ConsoleStore: Send + Sync {
    /// The ticket a number (`INC0012345`) names, while the ticket is kept: every accepted
    /// version files its number, and the purge removes it with the ticket.
    async fn ticket_by_number(
        &self,
        number: &crate::ticket_number::TicketNumber,
    ) -> Result<Option<TicketId>, StoreError>;

    /// One tier's jobs per severity; `head` oldest pending jobs of each severity with them.
    async fn severity_breakdown(
        &self,
        tier: Tier,
        head: usize,
    ) -> Result<SeverityBreakdown, StoreError>;

    /// Queues each job again now, for an operator who wants a ticket summarized again
    /// (each job one atomic step; see [`ResummarizeOutcome`]). A job whose version's
    /// fallback is stored makes that fallback no longer final, so the call is made and
    /// the LLM summary replaces it; a version the LLM summarized already is left alone.
    async fn resummarize(&self, jobs: &[Job]) -> Result<Vec<ResummarizeOutcome>, StoreError>;
}
