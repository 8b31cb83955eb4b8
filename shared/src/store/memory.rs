//! The embedded in-memory store: same semantics as Redis, no server needed.
//!
//! One mutex guards plain ordered maps and every operation takes it exactly once
//! (never across an await), so each operation is atomic like its Redis script. The
//! maps are ordered, and pending jobs are kept per (tier, severity) ordered by
//! (arrival, job id) — the order a Redis sorted set gives members of equal score —
//! so leases, reclaims and listings come out in the same deterministic order as in
//! the Redis backend.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use super::{
    AgingPolicy, BREAKDOWN_SCAN, CallClaim, ConsoleStore, DeadLetter, DeadLetterStats,
    IngestOutcome, IngestRecord, Lease, LeasedGroup, OwedStats, PurgeReport, QueueStats,
    REGION_INDEX_CAP, ResummarizeOutcome, SeverityBreakdown, SnapshotJson, Store, StoreError,
    StoreLimits,
};
use crate::clock::EpochMillis;
use crate::job::{Job, JobId, SummaryKind, Tier};
use crate::region_key::RegionKey;
use crate::region_rollup::RegionRollup;
use crate::severity::Severity;
use crate::snapshot::{SnapshotLoad, TicketSnapshot};
use crate::summary::{PutOutcome, Summary, replaces, standing};
use crate::ticket_id::TicketId;
use crate::ticket_number::TicketNumber;

/// The in-memory [`Store`]. Cheap to create; state lives as long as the value.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

impl MemoryStore {
    /// A store with the default [`StoreLimits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A store keeping within `limits`.
    pub fn with_limits(limits: StoreLimits) -> Self {
        let store = Self::default();
        store.state().limits = limits;
        store
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // No operation panics while holding the lock, so a poisoned lock still guards
        // consistent maps.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// (arrival or expiry in ms, job id text): the sorted-set entry of the Redis backend.
type Entry = (u64, String);

#[derive(Debug, Default)]
struct State {
    tickets: BTreeMap<TicketId, StoredTicket>,
    summaries: BTreeMap<(TicketId, SummaryKind), Summary>,
    /// The latest roll-up per region key.
    rollups: BTreeMap<String, RegionRollup>,
    /// By job id; looked up, never walked in order (a hash map with a fast hasher: the
    /// dispatcher's backlog scan looks up thousands of jobs a tick).
    jobs: HashMap<String, StoredJob, foldhash::fast::RandomState>,
    ticket_jobs: BTreeMap<TicketId, BTreeSet<String>>,
    pending: BTreeMap<(Tier, Severity), BTreeSet<Entry>>,
    coalesce: BTreeMap<(Tier, String), BTreeSet<Entry>>,
    /// Queued jobs on hold, by (hold end, job id): pending, but not yet in `pending`,
    /// so that they cannot lead a group (they can join one through `coalesce`).
    held: BTreeMap<Tier, BTreeSet<Entry>>,
    leased: BTreeMap<Tier, BTreeSet<Entry>>,
    lease_seq: u64,
    dead_letters: BTreeMap<u64, (String, DeadLetter)>,
    dead_letter_seq: u64,
    due_regions: BTreeSet<String>,
    ingest_seq: u64,
    /// Each filed ticket's region and its place in that region's index.
    ticket_region: BTreeMap<TicketId, (String, u64)>,
    /// Per region: ingest sequence → ticket, latest last.
    region_index: BTreeMap<String, BTreeMap<u64, TicketId>>,
    /// Deliveries owed per summary kind (see [`Store::put_summary_owed`]).
    owed: BTreeMap<SummaryKind, OwedSet>,
    /// The latest version delivered per (ticket, kind).
    delivered: BTreeMap<(TicketId, SummaryKind), u64>,
    /// LLM call claims by job id: (holder, until).
    calls: BTreeMap<String, (String, EpochMillis)>,
    /// The same claims by (until, job id), to forget them once they have run out, as
    /// Redis expires their keys.
    call_ends: BTreeSet<Entry>,
    limits: StoreLimits,
    /// Each kept ticket's end of retention, and the same by (end, ticket) for the purge.
    expiry: BTreeMap<TicketId, u64>,
    expiry_order: BTreeSet<(u64, TicketId)>,
    dead_letters_trimmed: u64,
    /// Ticket numbers (`INC…`) of kept tickets, both ways.
    numbers: BTreeMap<TicketNumber, TicketId>,
    ticket_numbers: BTreeMap<TicketId, TicketNumber>,
    /// (ticket, kind, version) whose stored fallback an operator re-opened
    /// ([`ConsoleStore::resummarize`]): it ranks as the instant summary until replaced.
    reopened: BTreeSet<(TicketId, SummaryKind, u64)>,
}

/// Owed deliveries of one kind, by job id and by (due, job id): the sorted set of the
/// Redis backend.
#[derive(Debug, Default)]
struct OwedSet {
    due: BTreeMap<String, (u64, JobId)>,
    order: BTreeSet<Entry>,
}

impl OwedSet {
    /// Sets the due time of `id` (adding it when `add` and absent); false if absent and
    /// not added.
    fn set(&mut self, id: &JobId, due: u64, add: bool) -> bool {
        let key = id.to_string();
        match self.due.get_mut(&key) {
            Some((current, _)) => {
                self.order.remove(&(*current, key.clone()));
                *current = due;
                self.order.insert((due, key));
                true
            }
            None if add => {
                self.order.insert((due, key.clone()));
                self.due.insert(key, (due, id.clone()));
                true
            }
            None => false,
        }
    }

    fn remove(&mut self, id: &JobId) -> bool {
        let key = id.to_string();
        match self.due.remove(&key) {
            Some((due, _)) => {
                self.order.remove(&(due, key));
                true
            }
            None => false,
        }
    }

    fn due_at(&self, id: &JobId) -> Option<u64> {
        self.due.get(&id.to_string()).map(|(due, _)| *due)
    }
}

/// The latest accepted version of a ticket, as its ingest record left it.
#[derive(Debug)]
struct StoredTicket {
    version: u64,
    snapshot: SnapshotJson,
    /// The snapshot decoded, once, on its first load: every job of the version reads the
    /// same text, and decoding it is what a load costs. Dropped with the version.
    decoded: Option<Decoded>,
    /// Kept apart from the region index (which evicts), so that a later version moving
    /// the ticket elsewhere always knows which region it leaves.
    region: Option<String>,
}

/// A stored snapshot's text read as [`Store::load_snapshot`] reads it: not JSON (the
/// store's error), not a snapshot (unreadable, with the reason), or the snapshot.
#[derive(Debug)]
enum Decoded {
    NotJson(String),
    Unreadable(String),
    Snapshot(Box<TicketSnapshot>),
}

impl Decoded {
    /// The same two steps as [`Store::ticket_snapshot`] then [`SnapshotLoad::judge`].
    fn of(snapshot: &SnapshotJson) -> Decoded {
        match snapshot.to_value() {
            Err(e) => Decoded::NotJson(e.to_string()),
            Ok(value) => match serde_json::from_value::<TicketSnapshot>(value) {
                Ok(snapshot) => Decoded::Snapshot(Box::new(snapshot)),
                Err(e) => Decoded::Unreadable(e.to_string()),
            },
        }
    }
}

#[derive(Debug)]
struct StoredJob {
    job: Job,
    lease: Option<HeldLease>,
    /// Cancelled while leased: release and reclaim drop it instead of re-queueing.
    cancelled: bool,
}

#[derive(Debug)]
struct HeldLease {
    token: String,
    expires_at: EpochMillis,
}

/// The coalescing key, with an empty key meaning none (as in the Redis backend).
fn coalesce_key(job: &Job) -> Option<&str> {
    job.coalesce_key.as_deref().filter(|k| !k.is_empty())
}

fn arrival_entry(job: &Job, id: &str) -> Entry {
    (job.enqueued_at.as_millis(), id.to_owned())
}

/// The job's (tier, severity) queue and its entry there.
fn queue_entry(job: &Job, id: &str) -> ((Tier, Severity), Entry) {
    ((job.tier, job.rank()), arrival_entry(job, id))
}

fn hold_entry(job: &Job, id: &str) -> Option<Entry> {
    job.hold_until.map(|at| (at.as_millis(), id.to_owned()))
}

impl State {
    fn ingest_one(&mut self, record: &IngestRecord) -> IngestOutcome {
        let region = record.region.as_deref().filter(|r| !r.is_empty());
        let previous_region = match self.tickets.get(&record.ticket) {
            Some(stored) if stored.version == record.version => return IngestOutcome::Duplicate,
            Some(stored) if stored.version > record.version => return IngestOutcome::Stale,
            Some(stored) => stored.region.clone(),
            None => None,
        };
        self.tickets.insert(
            record.ticket.clone(),
            StoredTicket {
                version: record.version,
                snapshot: record.snapshot.clone(),
                decoded: None,
                region: region.map(str::to_owned),
            },
        );
        self.put_summary(&record.instant_summary);
        if let Ok(number) = record.instant_summary.number.parse::<TicketNumber>() {
            self.numbers.insert(number.clone(), record.ticket.clone());
            self.ticket_numbers.insert(record.ticket.clone(), number);
        }
        self.cancel(&record.ticket, record.version, &SummaryKind::ALL);
        for job in &record.jobs {
            if !(record.closed && job.id.kind == SummaryKind::Technician) {
                self.enqueue(job);
            }
        }
        self.file_under_region(&record.ticket, region);
        if let Some(at) = self.limits.expires_at(record.instant_summary.created_at) {
            if let Some(previous) = self.expiry.insert(record.ticket.clone(), at.as_millis()) {
                self.expiry_order.remove(&(previous, record.ticket.clone()));
            }
            self.expiry_order
                .insert((at.as_millis(), record.ticket.clone()));
        }
        // The region the ticket left needs its roll-up redone as much as the one it joined.
        for due in [previous_region.as_deref(), region].into_iter().flatten() {
            self.due_regions.insert(due.to_owned());
        }
        IngestOutcome::Accepted
    }

    /// Moves the ticket to the front of its region's index (out of any previous
    /// region's), evicting the region's oldest beyond [`REGION_INDEX_CAP`].
    fn file_under_region(&mut self, ticket: &TicketId, region: Option<&str>) {
        self.ingest_seq += 1;
        if let Some((previous, seq)) = self.ticket_region.remove(ticket)
            && let Some(index) = self.region_index.get_mut(&previous)
        {
            index.remove(&seq);
            if index.is_empty() {
                self.region_index.remove(&previous);
            }
        }
        let Some(region) = region else { return };
        let index = self.region_index.entry(region.to_owned()).or_default();
        index.insert(self.ingest_seq, ticket.clone());
        while index.len() > REGION_INDEX_CAP {
            if let Some((_, evicted)) = index.pop_first() {
                self.ticket_region.remove(&evicted);
            }
        }
        self.ticket_region
            .insert(ticket.clone(), (region.to_owned(), self.ingest_seq));
    }

    fn region_tickets(&self, region: &str, limit: usize) -> Vec<TicketId> {
        self.region_index
            .get(region)
            .map(|index| index.values().rev().take(limit).cloned().collect())
            .unwrap_or_default()
    }

    fn put_rollup(&mut self, rollup: &RegionRollup) -> PutOutcome {
        let key = rollup.region.as_str();
        if let Some(current) = self.rollups.get(key)
            && !rollup.replaces(current)
        {
            return PutOutcome::Superseded;
        }
        self.rollups.insert(key.to_owned(), rollup.clone());
        PutOutcome::Stored
    }

    fn put_summary(&mut self, summary: &Summary) -> PutOutcome {
        let key = (summary.ticket.clone(), summary.kind);
        match self.summaries.get(&key) {
            Some(current)
                if !replaces(summary, current) && !self.reopened_for(summary, current) =>
            {
                PutOutcome::Superseded
            }
            current => {
                if let Some(current) = current {
                    self.reopened
                        .remove(&(current.ticket.clone(), current.kind, current.version));
                }
                self.summaries.insert(key, summary.clone());
                PutOutcome::Stored
            }
        }
    }

    /// Whether `candidate` replaces `current` only because an operator re-opened it: a
    /// re-opened fallback ranks as the instant summary (0).
    fn reopened_for(&self, candidate: &Summary, current: &Summary) -> bool {
        candidate.version == current.version
            && standing(candidate) > 0
            && self
                .reopened
                .contains(&(current.ticket.clone(), current.kind, current.version))
    }

    fn enqueue(&mut self, job: &Job) -> bool {
        let id = job.id.to_string();
        if self.jobs.contains_key(&id) {
            return false;
        }
        self.ticket_jobs
            .entry(job.id.ticket.clone())
            .or_default()
            .insert(id.clone());
        self.jobs.insert(
            id.clone(),
            StoredJob {
                job: job.clone(),
                lease: None,
                cancelled: false,
            },
        );
        match hold_entry(job, &id) {
            Some(entry) => {
                self.held.entry(job.tier).or_default().insert(entry);
                self.add_coalescing(job, &id);
            }
            None => self.add_pending(job, &id),
        }
        true
    }

    /// Moves the jobs of `tier` whose hold has ended at `now` into their queues (they
    /// are in their coalescing sets already), in hold order.
    fn end_holds(&mut self, tier: Tier, now: EpochMillis) {
        let Some(held) = self.held.get_mut(&tier) else {
            return;
        };
        let mut ended = Vec::new();
        while let Some(first) = held.first()
            && first.0 <= now.as_millis()
        {
            ended.extend(held.pop_first());
        }
        if held.is_empty() {
            self.held.remove(&tier);
        }
        for (_, id) in ended {
            if let Some(stored) = self.jobs.get(&id) {
                let (queue, entry) = queue_entry(&stored.job, &id);
                self.pending.entry(queue).or_default().insert(entry);
            }
        }
    }

    fn add_pending(&mut self, job: &Job, id: &str) {
        self.add_to_queue(job, id);
        self.add_coalescing(job, id);
    }

    /// Into its (tier, severity) queue, where it may lead a group.
    fn add_to_queue(&mut self, job: &Job, id: &str) {
        let (queue, entry) = queue_entry(job, id);
        self.pending.entry(queue).or_default().insert(entry);
    }

    fn add_coalescing(&mut self, job: &Job, id: &str) {
        if let Some(key) = coalesce_key(job) {
            self.coalesce
                .entry((job.tier, key.to_owned()))
                .or_default()
                .insert(arrival_entry(job, id));
        }
    }

    fn remove_pending(&mut self, job: &Job, id: &str) {
        let entry = arrival_entry(job, id);
        remove_entry(&mut self.pending, &(job.tier, job.rank()), &entry);
        if let Some(held) = hold_entry(job, id) {
            remove_entry(&mut self.held, &job.tier, &held);
        }
        if let Some(key) = coalesce_key(job) {
            remove_entry(&mut self.coalesce, &(job.tier, key.to_owned()), &entry);
        }
    }

    /// Forgets a job entirely; it must not be pending.
    fn forget(&mut self, id: &str) {
        let Some(stored) = self.jobs.remove(id) else {
            return;
        };
        if let Some(lease) = &stored.lease {
            remove_entry(
                &mut self.leased,
                &stored.job.tier,
                &(lease.expires_at.as_millis(), id.to_owned()),
            );
        }
        let ticket = &stored.job.id.ticket;
        if let Some(ids) = self.ticket_jobs.get_mut(ticket) {
            ids.remove(id);
            if ids.is_empty() {
                self.ticket_jobs.remove(ticket);
            }
        }
    }

    /// The pending job of `tier` to serve first: lowest (score, arrival, id).
    fn best_pending(&self, tier: Tier, aging: &AgingPolicy) -> Option<String> {
        Severity::ALL
            .iter()
            .filter_map(|&severity| {
                let (enqueued_at, id) = self.pending.get(&(tier, severity))?.first()?;
                let score = aging.effective_score(severity, EpochMillis(*enqueued_at));
                Some((score, *enqueued_at, id))
            })
            .min()
            .map(|(_, _, id)| id.clone())
    }

    fn group_for(&self, tier: Tier, leader: &str, max_group: usize) -> Vec<String> {
        let mut group = vec![leader.to_owned()];
        let key = self.jobs.get(leader).and_then(|s| coalesce_key(&s.job));
        let Some(members) = key.and_then(|k| self.coalesce.get(&(tier, k.to_owned()))) else {
            return group;
        };
        let followers = members
            .iter()
            .map(|(_, id)| id)
            .filter(|id| id.as_str() != leader);
        group.extend(followers.take(max_group.saturating_sub(1)).cloned());
        group
    }

    fn lease(
        &mut self,
        tier: Tier,
        now: EpochMillis,
        lease_for: Duration,
        max_group: usize,
        aging: &AgingPolicy,
    ) -> LeasedGroup {
        self.end_holds(tier, now);
        let Some(leader) = self.best_pending(tier, aging) else {
            return Vec::new();
        };
        let group = self.group_for(tier, &leader, max_group.max(1));
        self.lease_seq += 1;
        let expires_at = now.plus(lease_for);
        let mut leases = Vec::with_capacity(group.len());
        for (index, id) in group.iter().enumerate() {
            let token = format!("{}.{}", self.lease_seq, index + 1);
            if let Some(lease) = self.take_lease(id, token, expires_at) {
                leases.push(lease);
            }
        }
        leases
    }

    /// The first `limit` pending jobs of `tier` in serve order.
    fn pending_jobs(&self, tier: Tier, limit: usize, aging: &AgingPolicy) -> Vec<Job> {
        self.pending_order(tier, limit, aging)
            .into_iter()
            .cloned()
            .collect()
    }

    /// The first `limit` pending jobs of `tier` in serve order, lent: each severity's
    /// queue is in arrival order, so its first `limit` entries hold its share of the
    /// overall first.
    fn pending_order(&self, tier: Tier, limit: usize, aging: &AgingPolicy) -> Vec<&Job> {
        let mut candidates: Vec<(u64, u64, &str)> = Severity::ALL
            .iter()
            .filter_map(|&severity| self.pending.get(&(tier, severity)).map(|q| (severity, q)))
            .flat_map(|(severity, queue)| {
                queue.iter().take(limit).map(move |(enqueued_at, id)| {
                    let score = aging.effective_score(severity, EpochMillis(*enqueued_at));
                    (score, *enqueued_at, id.as_str())
                })
            })
            .collect();
        // Only the first `limit` are wanted: set them apart before sorting them.
        if candidates.len() > limit && limit > 0 {
            candidates.select_nth_unstable(limit - 1);
            candidates.truncate(limit);
        }
        candidates.sort_unstable();
        candidates
            .into_iter()
            .take(limit)
            .filter_map(|(_, _, id)| self.jobs.get(id).map(|s| &s.job))
            .collect()
    }

    /// The latest snapshot of `ticket` judged against `job_version`, as
    /// [`Store::load_snapshot`] does, decoding the stored text at most once per version.
    fn load_snapshot(
        &mut self,
        ticket: &TicketId,
        job_version: Option<u64>,
    ) -> Result<SnapshotLoad, StoreError> {
        let Some(stored) = self.tickets.get_mut(ticket) else {
            return Ok(SnapshotLoad::Missing);
        };
        let version = stored.version;
        match stored
            .decoded
            .get_or_insert_with(|| Decoded::of(&stored.snapshot))
        {
            Decoded::NotJson(e) => Err(StoreError::Corrupt(e.clone())),
            _ if job_version.is_some_and(|job| version > job) => {
                Ok(SnapshotLoad::Superseded { stored: version })
            }
            Decoded::Unreadable(reason) => Ok(SnapshotLoad::Unreadable {
                version,
                reason: reason.clone(),
            }),
            Decoded::Snapshot(snapshot) => Ok(SnapshotLoad::Current {
                version,
                snapshot: snapshot.clone(),
            }),
        }
    }

    fn lease_jobs(&mut self, tier: Tier, ids: &[JobId], expires_at: EpochMillis) -> LeasedGroup {
        self.lease_seq += 1;
        let mut leases = Vec::with_capacity(ids.len());
        for (index, id) in ids.iter().enumerate() {
            let id = id.to_string();
            let pending_here = self
                .jobs
                .get(&id)
                .is_some_and(|s| s.lease.is_none() && s.job.tier == tier);
            if !pending_here {
                continue;
            }
            let token = format!("{}.{}", self.lease_seq, index + 1);
            if let Some(lease) = self.take_lease(&id, token, expires_at) {
                leases.push(lease);
            }
        }
        leases
    }

    fn take_lease(&mut self, id: &str, token: String, expires_at: EpochMillis) -> Option<Lease> {
        let job = self.jobs.get(id)?.job.clone();
        self.remove_pending(&job, id);
        self.leased
            .entry(job.tier)
            .or_default()
            .insert((expires_at.as_millis(), id.to_owned()));
        let stored = self.jobs.get_mut(id)?;
        stored.lease = Some(HeldLease {
            token: token.clone(),
            expires_at,
        });
        Some(Lease {
            job,
            token,
            expires_at,
        })
    }

    /// The job id if `lease` is the lease currently held on it.
    fn held(&self, lease: &Lease) -> Option<String> {
        let id = lease.job.id.to_string();
        let stored = self.jobs.get(&id)?;
        let held = stored.lease.as_ref()?;
        (held.token == lease.token).then_some(id)
    }

    fn ack(&mut self, lease: &Lease) -> bool {
        let Some(id) = self.held(lease) else {
            return false;
        };
        self.forget(&id);
        true
    }

    fn release(&mut self, lease: &Lease, tier: Tier) -> bool {
        let Some(id) = self.held(lease) else {
            return false;
        };
        self.requeue(&id, Some(tier));
        true
    }

    /// Ends the lease on `id` and queues the job again (in `tier` if given), or drops
    /// it when it was cancelled meanwhile. True if it was queued again.
    fn requeue(&mut self, id: &str, tier: Option<Tier>) -> bool {
        let Some(stored) = self.jobs.get_mut(id) else {
            return false;
        };
        if stored.cancelled {
            self.forget(id);
            return false;
        }
        let Some(lease) = stored.lease.take() else {
            return false;
        };
        let old_tier = stored.job.tier;
        if let Some(tier) = tier {
            stored.job.tier = tier;
        }
        let job = stored.job.clone();
        remove_entry(
            &mut self.leased,
            &old_tier,
            &(lease.expires_at.as_millis(), id.to_owned()),
        );
        self.add_pending(&job, id);
        true
    }

    fn reclaim_expired(&mut self, now: EpochMillis) -> u64 {
        let expired: Vec<String> = self
            .leased
            .values()
            .flat_map(|entries| entries.iter().take_while(|(at, _)| *at <= now.as_millis()))
            .map(|(_, id)| id.clone())
            .collect();
        let requeued = expired.iter().filter(|id| self.requeue(id, None)).count();
        u64::try_from(requeued).unwrap_or(u64::MAX)
    }

    fn cancel(&mut self, ticket: &TicketId, below_version: u64, kinds: &[SummaryKind]) -> u64 {
        let Some(ids) = self.ticket_jobs.get(ticket) else {
            return 0;
        };
        let targets: Vec<String> = ids
            .iter()
            .filter(|id| {
                self.jobs.get(id.as_str()).is_some_and(|s| {
                    s.job.id.version < below_version && kinds.contains(&s.job.id.kind)
                })
            })
            .cloned()
            .collect();
        let mut removed = 0;
        for id in targets {
            let Some(stored) = self.jobs.get_mut(&id) else {
                continue;
            };
            if stored.lease.is_some() {
                stored.cancelled = true;
                continue;
            }
            let job = stored.job.clone();
            self.remove_pending(&job, &id);
            self.forget(&id);
            removed += 1;
        }
        removed
    }

    fn queue_stats(&self, tier: Tier) -> QueueStats {
        let mut stats = QueueStats {
            leased: self.leased.get(&tier).map_or(0, |e| e.len() as u64),
            held: self.held.get(&tier).map_or(0, |e| e.len() as u64),
            ..QueueStats::default()
        };
        for severity in Severity::ALL {
            let Some(entries) = self.pending.get(&(tier, severity)) else {
                continue;
            };
            let oldest = entries.first().map(|(at, _)| EpochMillis(*at));
            stats.pending += entries.len() as u64;
            stats.pending_by_severity[severity.index()] = entries.len() as u64;
            stats.oldest_by_severity[severity.index()] = oldest;
            stats.oldest_enqueued_at = match (stats.oldest_enqueued_at, oldest) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        stats
    }

    fn put_summary_owed(&mut self, summary: &Summary, owes: bool, now: EpochMillis) -> PutOutcome {
        let put = self.put_summary(summary);
        if put == PutOutcome::Stored && owes {
            let delivered = self
                .delivered
                .get(&(summary.ticket.clone(), summary.kind))
                .copied();
            if delivered.is_none_or(|v| v < summary.version) {
                let id = JobId {
                    ticket: summary.ticket.clone(),
                    version: summary.version,
                    kind: summary.kind,
                };
                let owed = self.owed.entry(summary.kind).or_default();
                if owed.due_at(&id).is_none() {
                    owed.set(&id, now.as_millis(), true);
                }
            }
        }
        put
    }

    fn claim_owed(
        &mut self,
        ids: &[JobId],
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Vec<JobId> {
        let mut claimed = Vec::new();
        for id in ids {
            let Some(owed) = self.owed.get_mut(&id.kind) else {
                continue;
            };
            if owed.due_at(id).is_some_and(|due| due <= now.as_millis()) {
                owed.set(id, hold_until.as_millis(), false);
                claimed.push(id.clone());
            }
        }
        claimed
    }

    fn claim_due_owed(
        &mut self,
        kind: SummaryKind,
        limit: usize,
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Vec<JobId> {
        let Some(owed) = self.owed.get_mut(&kind) else {
            return Vec::new();
        };
        let due: Vec<JobId> = owed
            .order
            .iter()
            .take_while(|(due, _)| *due <= now.as_millis())
            .take(limit)
            .filter_map(|(_, key)| owed.due.get(key).map(|(_, id)| id.clone()))
            .collect();
        for id in &due {
            owed.set(id, hold_until.as_millis(), false);
        }
        due
    }

    fn complete_owed(&mut self, ids: &[JobId]) -> u64 {
        let mut completed = 0;
        for id in ids {
            if self.owed.get_mut(&id.kind).is_some_and(|o| o.remove(id)) {
                completed += 1;
            }
            let key = (id.ticket.clone(), id.kind);
            if self.summaries.contains_key(&key) {
                let delivered = self.delivered.entry(key).or_default();
                *delivered = (*delivered).max(id.version);
            }
        }
        completed
    }

    fn owed_stats(&self, kind: SummaryKind, now: EpochMillis) -> OwedStats {
        let Some(owed) = self.owed.get(&kind) else {
            return OwedStats::default();
        };
        let due = owed
            .order
            .iter()
            .take_while(|(due, _)| *due <= now.as_millis())
            .count() as u64;
        OwedStats {
            due,
            claimed: owed.order.len() as u64 - due,
        }
    }

    /// Whether a final summary of `id`'s version, or any summary of a newer one, is stored.
    fn call_done(&self, id: &JobId) -> bool {
        self.summaries
            .get(&(id.ticket.clone(), id.kind))
            .is_some_and(|s| {
                s.version > id.version
                    || (s.version == id.version
                        && standing(s) >= 1
                        && !self
                            .reopened
                            .contains(&(id.ticket.clone(), id.kind, id.version)))
            })
    }

    /// Forgets the call claims that have run out at `now`.
    fn forget_ended_calls(&mut self, now: EpochMillis) {
        while let Some((until, key)) = self.call_ends.first().cloned()
            && until <= now.as_millis()
        {
            self.call_ends.remove(&(until, key.clone()));
            if self
                .calls
                .get(&key)
                .is_some_and(|(_, u)| u.as_millis() == until)
            {
                self.calls.remove(&key);
            }
        }
    }

    fn hold_call(&mut self, key: String, holder: &str, until: EpochMillis) {
        if let Some((_, previous)) = self.calls.get(&key) {
            self.call_ends.remove(&(previous.as_millis(), key.clone()));
        }
        self.call_ends.insert((until.as_millis(), key.clone()));
        self.calls.insert(key, (holder.to_owned(), until));
    }

    fn claim_calls(
        &mut self,
        ids: &[JobId],
        holder: &str,
        now: EpochMillis,
        until: EpochMillis,
    ) -> Vec<CallClaim> {
        self.forget_ended_calls(now);
        ids.iter()
            .map(|id| {
                if self.call_done(id) {
                    return CallClaim::Done;
                }
                let key = id.to_string();
                match self.calls.get(&key) {
                    Some((other, their_until)) if other != holder && *their_until > now => {
                        CallClaim::InFlight {
                            until: *their_until,
                        }
                    }
                    _ => {
                        self.hold_call(key, holder, until);
                        CallClaim::Claimed
                    }
                }
            })
            .collect()
    }

    fn renew_calls(
        &mut self,
        ids: &[JobId],
        holder: &str,
        now: EpochMillis,
        until: EpochMillis,
    ) -> u64 {
        self.forget_ended_calls(now);
        let mut renewed = 0;
        for id in ids {
            let key = id.to_string();
            if self.calls.get(&key).is_some_and(|(h, _)| h == holder) {
                self.hold_call(key, holder, until);
                renewed += 1;
            }
        }
        renewed
    }

    fn release_calls(&mut self, ids: &[JobId], holder: &str) {
        for id in ids {
            let key = id.to_string();
            if let Some((h, until)) = self.calls.get(&key)
                && h == holder
            {
                self.call_ends.remove(&(until.as_millis(), key.clone()));
                self.calls.remove(&key);
            }
        }
    }

    fn dead_letter(&mut self, entry: &DeadLetter) -> String {
        self.dead_letter_seq += 1;
        let id = format!("{}-{}", entry.at.as_millis(), self.dead_letter_seq);
        self.dead_letters
            .insert(self.dead_letter_seq, (id.clone(), entry.clone()));
        let cap = usize::try_from(self.limits.dead_letter_cap).unwrap_or(usize::MAX);
        while cap > 0 && self.dead_letters.len() > cap {
            self.dead_letters.pop_first();
            self.dead_letters_trimmed += 1;
        }
        id
    }

    /// Deletes a ticket's snapshot, summaries, pending jobs and region entry.
    fn purge_ticket(&mut self, ticket: &TicketId) {
        self.tickets.remove(ticket);
        if let Some(number) = self.ticket_numbers.remove(ticket)
            && self.numbers.get(&number) == Some(ticket)
        {
            self.numbers.remove(&number);
        }
        self.reopened.retain(|(t, _, _)| t != ticket);
        for kind in SummaryKind::ALL {
            self.summaries.remove(&(ticket.clone(), kind));
        }
        self.cancel(ticket, u64::MAX, &SummaryKind::ALL);
        if self.ticket_jobs.get(ticket).is_some_and(BTreeSet::is_empty) {
            self.ticket_jobs.remove(ticket);
        }
        if let Some((region, seq)) = self.ticket_region.remove(ticket)
            && let Some(index) = self.region_index.get_mut(&region)
        {
            index.remove(&seq);
            if index.is_empty() {
                self.region_index.remove(&region);
            }
        }
    }

    fn purge_expired(&mut self, now: EpochMillis, limit: usize) -> PurgeReport {
        let mut report = PurgeReport::default();
        while let Some((at, ticket)) = self.expiry_order.first().cloned() {
            if at > now.as_millis() {
                break;
            }
            if report.tickets >= limit as u64 {
                report.more_due = true;
                break;
            }
            self.expiry_order.pop_first();
            self.expiry.remove(&ticket);
            self.purge_ticket(&ticket);
            report.tickets += 1;
        }
        report
    }

    fn remove_dead_letter(&mut self, id: &str) -> bool {
        let seq = self
            .dead_letters
            .iter()
            .find(|(_, (stored, _))| stored == id)
            .map(|(seq, _)| *seq);
        seq.and_then(|seq| self.dead_letters.remove(&seq)).is_some()
    }
}

/// Removes `entry` from the set under `key`, dropping the set when it empties (as
/// Redis drops an empty sorted set), so iteration never meets empty sets.
fn remove_entry<K: Ord + Clone>(sets: &mut BTreeMap<K, BTreeSet<Entry>>, key: &K, entry: &Entry) {
    if let Some(set) = sets.get_mut(key) {
        set.remove(entry);
        if set.is_empty() {
            sets.remove(key);
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn ingest_each(
        &self,
        records: &[IngestRecord],
    ) -> Result<Vec<Result<IngestOutcome, StoreError>>, StoreError> {
        let mut state = self.state();
        Ok(records.iter().map(|r| Ok(state.ingest_one(r))).collect())
    }

    async fn ticket_snapshot(
        &self,
        ticket: &TicketId,
    ) -> Result<Option<(u64, serde_json::Value)>, StoreError> {
        Ok(self
            .state()
            .tickets
            .get(ticket)
            .map(|stored| stored.snapshot.to_value().map(|s| (stored.version, s)))
            .transpose()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?)
    }

    async fn load_snapshot(
        &self,
        ticket: &TicketId,
        job_version: Option<u64>,
    ) -> Result<SnapshotLoad, StoreError> {
        self.state().load_snapshot(ticket, job_version)
    }

    async fn enqueue(&self, jobs: &[Job]) -> Result<u64, StoreError> {
        let mut state = self.state();
        Ok(jobs.iter().filter(|job| state.enqueue(job)).count() as u64)
    }

    async fn put_summary(&self, summary: &Summary) -> Result<PutOutcome, StoreError> {
        Ok(self.state().put_summary(summary))
    }

    async fn summary(
        &self,
        ticket: &TicketId,
        kind: SummaryKind,
    ) -> Result<Option<Summary>, StoreError> {
        Ok(self.state().summaries.get(&(ticket.clone(), kind)).cloned())
    }

    async fn put_rollup(&self, rollup: &RegionRollup) -> Result<PutOutcome, StoreError> {
        Ok(self.state().put_rollup(rollup))
    }

    async fn rollup(&self, region: &RegionKey) -> Result<Option<RegionRollup>, StoreError> {
        Ok(self.state().rollups.get(region.as_str()).cloned())
    }

    async fn lease(
        &self,
        tier: Tier,
        now: EpochMillis,
        lease_for: Duration,
        max_group: usize,
        aging: AgingPolicy,
    ) -> Result<LeasedGroup, StoreError> {
        Ok(self.state().lease(tier, now, lease_for, max_group, &aging))
    }

    async fn pending_jobs(
        &self,
        tier: Tier,
        limit: usize,
        aging: AgingPolicy,
    ) -> Result<Vec<Job>, StoreError> {
        Ok(self.state().pending_jobs(tier, limit, &aging))
    }

    async fn visit_pending_jobs(
        &self,
        tier: Tier,
        limit: usize,
        aging: AgingPolicy,
        visit: &mut (dyn for<'j> FnMut(&'j Job) + Send),
    ) -> Result<(), StoreError> {
        for job in self.state().pending_order(tier, limit, &aging) {
            visit(job);
        }
        Ok(())
    }

    async fn lease_jobs(
        &self,
        tier: Tier,
        ids: &[JobId],
        now: EpochMillis,
        lease_for: Duration,
    ) -> Result<LeasedGroup, StoreError> {
        Ok(self.state().lease_jobs(tier, ids, now.plus(lease_for)))
    }

    async fn ack(&self, lease: &Lease) -> Result<bool, StoreError> {
        Ok(self.state().ack(lease))
    }

    async fn release(&self, lease: &Lease, tier: Tier) -> Result<bool, StoreError> {
        Ok(self.state().release(lease, tier))
    }

    async fn reclaim_expired(&self, now: EpochMillis) -> Result<u64, StoreError> {
        Ok(self.state().reclaim_expired(now))
    }

    async fn cancel(
        &self,
        ticket: &TicketId,
        below_version: u64,
        kinds: &[SummaryKind],
    ) -> Result<u64, StoreError> {
        Ok(self.state().cancel(ticket, below_version, kinds))
    }

    async fn queue_stats(&self, tier: Tier) -> Result<QueueStats, StoreError> {
        Ok(self.state().queue_stats(tier))
    }

    async fn job_exists(&self, id: &JobId) -> Result<bool, StoreError> {
        Ok(self.state().jobs.contains_key(&id.to_string()))
    }

    async fn dead_letter(&self, entry: &DeadLetter) -> Result<String, StoreError> {
        Ok(self.state().dead_letter(entry))
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<(String, DeadLetter)>, StoreError> {
        Ok(self
            .state()
            .dead_letters
            .values()
            .take(limit)
            .cloned()
            .collect())
    }

    async fn remove_dead_letter(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.state().remove_dead_letter(id))
    }

    async fn take_due_regions(&self) -> Result<Vec<String>, StoreError> {
        Ok(std::mem::take(&mut self.state().due_regions)
            .into_iter()
            .collect())
    }

    async fn purge_expired(
        &self,
        now: EpochMillis,
        limit: usize,
    ) -> Result<PurgeReport, StoreError> {
        Ok(self.state().purge_expired(now, limit))
    }

    async fn dead_letter_stats(&self) -> Result<DeadLetterStats, StoreError> {
        let state = self.state();
        Ok(DeadLetterStats {
            entries: state.dead_letters.len() as u64,
            cap: state.limits.dead_letter_cap,
            trimmed_total: state.dead_letters_trimmed,
        })
    }

    async fn region_tickets(
        &self,
        region: &str,
        limit: usize,
    ) -> Result<Vec<TicketId>, StoreError> {
        Ok(self.state().region_tickets(region, limit))
    }

    async fn put_summary_owed(
        &self,
        summary: &Summary,
        owes: bool,
        now: EpochMillis,
    ) -> Result<PutOutcome, StoreError> {
        Ok(self.state().put_summary_owed(summary, owes, now))
    }

    async fn claim_owed(
        &self,
        ids: &[JobId],
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Result<Vec<JobId>, StoreError> {
        Ok(self.state().claim_owed(ids, now, hold_until))
    }

    async fn claim_due_owed(
        &self,
        kind: SummaryKind,
        limit: usize,
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Result<Vec<JobId>, StoreError> {
        Ok(self.state().claim_due_owed(kind, limit, now, hold_until))
    }

    async fn complete_owed(&self, ids: &[JobId]) -> Result<u64, StoreError> {
        Ok(self.state().complete_owed(ids))
    }

    async fn owed_stats(
        &self,
        kind: SummaryKind,
        now: EpochMillis,
    ) -> Result<OwedStats, StoreError> {
        Ok(self.state().owed_stats(kind, now))
    }

    async fn claim_calls(
        &self,
        ids: &[JobId],
        holder: &str,
        now: EpochMillis,
        until: EpochMillis,
    ) -> Result<Vec<CallClaim>, StoreError> {
        Ok(self.state().claim_calls(ids, holder, now, until))
    }

    async fn renew_calls(
        &self,
        ids: &[JobId],
        holder: &str,
        now: EpochMillis,
        until: EpochMillis,
    ) -> Result<u64, StoreError> {
        Ok(self.state().renew_calls(ids, holder, now, until))
    }

    async fn release_calls(&self, ids: &[JobId], holder: &str) -> Result<(), StoreError> {
        self.state().release_calls(ids, holder);
        Ok(())
    }
}

impl State {
    /// Per severity, `tier`'s pending, held and leased jobs, and the oldest pending ones.
    fn severity_breakdown(&self, tier: Tier, head: usize) -> SeverityBreakdown {
        let mut breakdown = SeverityBreakdown::default();
        for severity in Severity::ALL {
            let i = severity.index();
            if let Some(entries) = self.pending.get(&(tier, severity)) {
                breakdown.pending[i] = entries.len() as u64;
                breakdown.oldest[i] = entries
                    .iter()
                    .take(head)
                    .filter_map(|(_, id)| self.jobs.get(id))
                    .map(|stored| Job {
                        tier,
                        ..stored.job.clone()
                    })
                    .collect();
            }
        }
        let count = |sets: &BTreeMap<Tier, BTreeSet<Entry>>| {
            let mut counts = [0u64; 5];
            for (_, id) in sets.get(&tier).into_iter().flatten().take(BREAKDOWN_SCAN) {
                if let Some(stored) = self.jobs.get(id) {
                    counts[stored.job.severity.index()] += 1;
                }
            }
            counts
        };
        breakdown.held = count(&self.held);
        breakdown.leased = count(&self.leased);
        breakdown
    }

    fn resummarize(&mut self, job: &Job) -> ResummarizeOutcome {
        let ticket = &job.id.ticket;
        if self.tickets.get(ticket).map(|t| t.version) != Some(job.id.version) {
            return ResummarizeOutcome::Stale;
        }
        let stored = self
            .summaries
            .get(&(ticket.clone(), job.id.kind))
            .filter(|s| s.version == job.id.version)
            .map(standing);
        if stored == Some(2) {
            return ResummarizeOutcome::AlreadyLlm;
        }
        let id = job.id.to_string();
        if let Some(existing) = self.jobs.get(&id) {
            if existing.lease.is_some() {
                return ResummarizeOutcome::InFlight;
            }
            let existing = existing.job.clone();
            self.remove_pending(&existing, &id);
            self.forget(&id);
        }
        if stored == Some(1) {
            self.reopened
                .insert((ticket.clone(), job.id.kind, job.id.version));
        }
        self.enqueue(job);
        ResummarizeOutcome::Queued
    }
}

#[async_trait]
impl ConsoleStore for MemoryStore {
    async fn ticket_by_number(
        &self,
        number: &TicketNumber,
    ) -> Result<Option<TicketId>, StoreError> {
        Ok(self.state().numbers.get(number).cloned())
    }

    async fn severity_breakdown(
        &self,
        tier: Tier,
        head: usize,
    ) -> Result<SeverityBreakdown, StoreError> {
        Ok(self.state().severity_breakdown(tier, head))
    }

    async fn resummarize(&self, jobs: &[Job]) -> Result<Vec<ResummarizeOutcome>, StoreError> {
        let mut state = self.state();
        Ok(jobs.iter().map(|job| state.resummarize(job)).collect())
    }
}
