//! Ingest: a Kafka batch of ticket events to stored snapshots, instant summaries and queued jobs.
//!
//! Each record is handled on its own. The topic is shared, so a record is first examined
//! ([`crate::event::examine_event`]): one that is not an incident event (another table, a
//! heartbeat, another format) is skipped and counted by reason. An incident event is
//! parsed, its log bounded, classified, summarized extractively (zero tokens), and turned
//! into an [`IngestRecord`] whose jobs carry severity, tier, token estimate, deadline (from
//! the one [`DeadlinePolicy`], which the dispatcher then spills by) and coalescing key. An
//! invalid incident event is dead-lettered with the reason, the raw value and its Kafka
//! coordinates.
//!
//! A batch succeeds only when every event of it is stored, recognised as stored already,
//! dead-lettered or skipped. Otherwise it fails ([`IngestError`]) and the invocation with
//! it, so that the host delivers the batch again (docs/ticket-events.md): what was stored
//! is recognised then (ingest is idempotent on `sys_id` + `sys_mod_count`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::classifier::Classifier;
use crate::classifier::features::{AlarmCounts, FeatureInput};
use crate::clock::{Clock, EpochMillis};
use crate::deadline_policy::DeadlinePolicy;
use crate::event::{CdcHeaders, Examined, ParseLimits, SkipReason, examine_event};
use crate::extractive;
use crate::job::{Job, JobId, SummaryKind};
use crate::log_bounding::{BoundingLimits, bound_lines};
use crate::metering;
use crate::prompts;
use crate::routing;
use crate::severity::Severity;
use crate::snapshot::TicketSnapshot;
use crate::store::{DeadLetter, IngestOutcome, IngestRecord, SnapshotJson, Store, StoreError};
use crate::summary::{Summary, SummaryOf};
use crate::ticket::Ticket;
use crate::tier_table::TierTable;
use crate::tokens::Tokens;

/// One Kafka record as the trigger delivered it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawEvent {
    pub value: Vec<u8>,
    pub headers: CdcHeaders,
    pub topic: Option<String>,
    pub partition: Option<i64>,
    pub offset: Option<i64>,
}

/// How ingest turns a ticket into work. Defaults are the product's; the handler may override.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IngestPolicy {
    pub parse_limits: ParseLimits,
    pub bounding: BoundingLimits,
    /// Which tier serves each kind at each routing severity (`STORMGATE_TIER_TABLE`).
    pub tiers: TierTable,
    /// Stamped on every job queued; the dispatcher spills by it.
    pub deadlines: DeadlinePolicy,
    /// Tickets of one outage opened within this window share a coalescing key.
    pub coalesce_window: Duration,
    /// The longest a job with a coalescing key is held before it may lead a call, so
    /// that its outage's related tickets arriving meanwhile share that call. A job is
    /// held for a quarter of its wait up to this ([`HOLD_SHARE_OF_WAIT`]), and not at
    /// all when that is under [`MIN_HOLD`]: never a P1 or P2 technician summary.
    /// Zero holds nothing.
    pub coalesce_hold: Duration,
    /// Bytes of a rejected event's value kept in its dead letter.
    pub dead_letter_raw_bytes: usize,
    /// Characters of ticket text a prompt carries (as the tier worker's `prompt_chars`).
    pub prompt_chars: usize,
}

impl Default for IngestPolicy {
    fn default() -> Self {
        IngestPolicy {
            parse_limits: ParseLimits::default(),
            bounding: BoundingLimits::default(),
            tiers: TierTable::default(),
            deadlines: DeadlinePolicy::default(),
            coalesce_window: Duration::from_secs(15 * 60),
            coalesce_hold: Duration::from_secs(5 * 60),
            dead_letter_raw_bytes: 64 * 1024,
            prompt_chars: prompts::DEFAULT_PROMPT_CHARS,
        }
    }
}

/// What ingest needs: where to store, what time it is, the model, the policy.
#[derive(Debug, Clone, Copy)]
pub struct IngestContext<'a> {
    pub store: &'a dyn Store,
    pub clock: &'a dyn Clock,
    pub classifier: &'a Classifier,
    pub policy: &'a IngestPolicy,
}

/// Counts for the invocation's ReturnValue. Every record of a successful batch is in
/// exactly one of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchOutcome {
    pub accepted: u32,
    pub duplicate_or_stale: u32,
    pub dead_lettered: u32,
    /// Records of the shared topic that are not incident events, by reason: skipped,
    /// not dead-lettered.
    #[serde(default)]
    pub skipped: SkippedRecords,
}

/// Records skipped as not incident events, by [`SkipReason`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedRecords {
    pub other_table: u32,
    pub heartbeat: u32,
    pub not_an_incident: u32,
    pub other_format: u32,
}

impl SkippedRecords {
    pub fn count(&mut self, reason: SkipReason) {
        let slot = match reason {
            SkipReason::OtherTable => &mut self.other_table,
            SkipReason::Heartbeat => &mut self.heartbeat,
            SkipReason::NotAnIncident => &mut self.not_an_incident,
            SkipReason::OtherFormat => &mut self.other_format,
        };
        *slot += 1;
    }

    pub fn total(&self) -> u32 {
        self.other_table + self.heartbeat + self.not_an_incident + self.other_format
    }
}

/// A batch that must be delivered again: the invocation fails.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// Nothing of the batch could be stored.
    #[error("store unavailable, nothing of the batch was stored: {0}")]
    StoreUnavailable(String),
    /// Some events were stored, others are neither stored nor dead-lettered (the store
    /// refused them for want of memory or availability, or their dead letter could not
    /// be written). Delivered again, the stored ones are recognised.
    #[error(
        "{unsettled} events of the batch are neither stored nor dead-lettered ({stored} were): {error}"
    )]
    Incomplete {
        unsettled: u32,
        stored: u32,
        error: String,
    },
}

/// The prompt tokens a job will be charged: the limiter's arrival estimate
/// ([`metering::prompt_charge`]) of the very request the tier worker will build for this
/// ticket alone (template, delimiters and ticket text), counted without building it
/// ([`prompts::single_ticket_prompt_chars`], held equal to the built request by a test).
pub fn prompt_token_estimate(text: &prompts::TicketText, kind: SummaryKind) -> Tokens {
    let chars = prompts::single_ticket_prompt_chars(prompts::current(kind), text);
    // A system and a user message: the framing the governor charges for them.
    metering::text_charge_of_chars(chars) + metering::framing_charge(2)
}

/// What became of one event of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fate", rename_all = "snake_case")]
pub enum EventFate {
    Accepted,
    DuplicateOrStale,
    /// Rejected and kept in the dead-letter stream under `id`.
    DeadLettered {
        id: String,
        reason: String,
    },
    /// Not an incident event (the topic is shared): skipped.
    Skipped {
        reason: SkipReason,
    },
}

/// A batch's counts and, in input order, what became of each event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    pub outcome: BatchOutcome,
    pub fates: Vec<EventFate>,
}

/// Handles a batch; fails unless every event is stored, dead-lettered or skipped.
pub async fn classify_batch(
    events: &[RawEvent],
    ctx: &IngestContext<'_>,
) -> Result<BatchOutcome, IngestError> {
    Ok(classify_batch_reporting(events, ctx).await?.outcome)
}

/// [`classify_batch`], also telling what became of each event (dead-letter
/// re-submission reports it per entry).
pub async fn classify_batch_reporting(
    events: &[RawEvent],
    ctx: &IngestContext<'_>,
) -> Result<BatchReport, IngestError> {
    let mut batch = BatchIngest::new(ctx);
    for event in events {
        batch.add(event);
    }
    batch.finish(|index| events.get(index).cloned()).await
}

/// A batch being ingested, one event at a time.
///
/// [`BatchIngest::add`] parses and prepares an event at once, so the caller can decode
/// the next one into the same memory: of an event only its record (bounded in size) stays
/// until [`BatchIngest::finish`] stores every record in one round trip. Events are
/// numbered in the order they were added.
#[derive(Debug)]
pub struct BatchIngest<'a> {
    ctx: IngestContext<'a>,
    now: EpochMillis,
    added: usize,
    records: Vec<IngestRecord>,
    /// The event number of each record.
    record_events: Vec<usize>,
    /// Events rejected before the store saw them, with their dead letters.
    rejected: Vec<(usize, DeadLetter)>,
    /// Records that are not incident events.
    skipped: Vec<(usize, SkipReason)>,
}

impl<'a> BatchIngest<'a> {
    pub fn new(ctx: &IngestContext<'a>) -> Self {
        BatchIngest {
            ctx: *ctx,
            now: ctx.clock.now(),
            added: 0,
            records: Vec::new(),
            record_events: Vec::new(),
            rejected: Vec::new(),
            skipped: Vec::new(),
        }
    }

    /// Parses, bounds, classifies and summarizes one event, sets its dead letter aside,
    /// or skips it (not an incident event).
    pub fn add(&mut self, event: &RawEvent) {
        let index = self.added;
        self.added += 1;
        let ctx = &self.ctx;
        let parsed = match examine_event(&event.value, &event.headers, ctx.policy.parse_limits) {
            Examined::Incident(parsed) => *parsed,
            Examined::Skipped(reason) => {
                self.skipped.push((index, reason));
                return;
            }
        };
        let prepared = parsed
            .map_err(|rejection| rejection.to_string())
            .and_then(|ticket| prepare(ticket, ctx, self.now));
        match prepared {
            Ok(record) => {
                self.records.push(record);
                self.record_events.push(index);
            }
            Err(reason) => {
                let entry = dead_letter_of(event, reason, ctx.policy, self.now);
                self.rejected.push((index, entry));
            }
        }
    }

    /// Stores the records and the dead letters; fails unless every event is stored,
    /// recognised as stored, dead-lettered or skipped.
    ///
    /// A record the store refuses for its data (a script error, a foreign value at its
    /// key) is dead-lettered like a malformed event. One it refuses for want of memory or
    /// availability fails the batch: it is to be delivered again, not dead-lettered. A
    /// dead letter needs the raw event again, which was not kept: `raw_again` gives back
    /// event `index` (as numbered by [`BatchIngest::add`]).
    pub async fn finish(
        self,
        raw_again: impl Fn(usize) -> Option<RawEvent> + Send,
    ) -> Result<BatchReport, IngestError> {
        let BatchIngest {
            ctx,
            now,
            added,
            records,
            record_events,
            mut rejected,
            skipped,
        } = self;
        let mut fates: Vec<Option<EventFate>> = vec![None; added];
        let mut outcome = BatchOutcome::default();
        for (index, reason) in skipped {
            outcome.skipped.count(reason);
            settle(&mut fates, index, EventFate::Skipped { reason });
        }
        if !records.is_empty() {
            let results = match ctx.store.ingest_each(&records).await {
                Ok(results) => results,
                Err(StoreError::Unavailable(e)) => return Err(IngestError::StoreUnavailable(e)),
                Err(StoreError::Corrupt(e)) => records
                    .iter()
                    .map(|_| Err(StoreError::Corrupt(e.clone())))
                    .collect(),
            };
            drop(records);
            let mut refused = Vec::new();
            let mut unavailable = Vec::new();
            for (&index, result) in record_events.iter().zip(results) {
                let fate = match result {
                    Ok(IngestOutcome::Accepted) => {
                        outcome.accepted += 1;
                        EventFate::Accepted
                    }
                    Ok(IngestOutcome::Duplicate | IngestOutcome::Stale) => {
                        outcome.duplicate_or_stale += 1;
                        EventFate::DuplicateOrStale
                    }
                    Err(e @ StoreError::Unavailable(_)) => {
                        unavailable.push(e);
                        continue;
                    }
                    Err(e) => {
                        refused.push((index, e));
                        continue;
                    }
                };
                settle(&mut fates, index, fate);
            }
            if let Some(first) = unavailable.first() {
                let stored = outcome.accepted + outcome.duplicate_or_stale;
                let unsettled = count(unavailable.len() + refused.len() + rejected.len());
                return Err(if stored == 0 {
                    IngestError::StoreUnavailable(first.to_string())
                } else {
                    IngestError::Incomplete {
                        unsettled,
                        stored,
                        error: first.to_string(),
                    }
                });
            }
            for (index, e) in refused {
                let reason = format!("store refused the record: {e}");
                let Some(event) = raw_again(index) else {
                    return Err(IngestError::Incomplete {
                        unsettled: 1,
                        stored: outcome.accepted + outcome.duplicate_or_stale,
                        error: format!("{reason}; its event could not be read again"),
                    });
                };
                rejected.push((index, dead_letter_of(&event, reason, ctx.policy, now)));
            }
            // Dead letters in the order the events came.
            rejected.sort_by_key(|(index, _)| *index);
        }

        let mut left = rejected.len();
        for (index, entry) in rejected {
            match ctx.store.dead_letter(&entry).await {
                Ok(id) => {
                    left -= 1;
                    outcome.dead_lettered += 1;
                    tracing::warn!(topic = ?entry.topic, partition = ?entry.partition, offset = ?entry.offset, reason = %entry.reason, "event dead-lettered");
                    settle(
                        &mut fates,
                        index,
                        EventFate::DeadLettered {
                            id,
                            reason: entry.reason,
                        },
                    );
                }
                Err(e) => {
                    tracing::error!(topic = ?entry.topic, partition = ?entry.partition, offset = ?entry.offset, reason = %entry.reason, error = %e, "event could not be dead-lettered: the batch fails");
                    let stored =
                        outcome.accepted + outcome.duplicate_or_stale + outcome.dead_lettered;
                    return Err(if stored == 0 && matches!(e, StoreError::Unavailable(_)) {
                        IngestError::StoreUnavailable(e.to_string())
                    } else {
                        IngestError::Incomplete {
                            unsettled: count(left),
                            stored,
                            error: e.to_string(),
                        }
                    });
                }
            }
        }
        // Every event was settled above, each exactly once.
        let fates = fates.into_iter().flatten().collect();
        Ok(BatchReport { outcome, fates })
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn settle(fates: &mut [Option<EventFate>], index: usize, fate: EventFate) {
    if let Some(slot) = fates.get_mut(index) {
        *slot = Some(fate);
    }
}

/// The dead letter of a rejected event: its value (clipped), headers and coordinates.
fn dead_letter_of(
    event: &RawEvent,
    reason: String,
    policy: &IngestPolicy,
    now: EpochMillis,
) -> DeadLetter {
    let max = policy.dead_letter_raw_bytes;
    DeadLetter {
        reason,
        raw: clipped_raw(&event.value, max),
        headers: event.headers.clone(),
        replayable: event.value.len() <= max && std::str::from_utf8(&event.value).is_ok(),
        topic: event.topic.clone(),
        partition: event.partition,
        offset: event.offset,
        at: now,
    }
}

fn clipped_raw(value: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(&value[..value.len().min(max)]);
    text.into_owned()
}

/// Everything computed for one ticket version before the store sees it (pure CPU).
pub fn prepare(
    ticket: Ticket,
    ctx: &IngestContext<'_>,
    now: EpochMillis,
) -> Result<IngestRecord, String> {
    let policy = ctx.policy;
    let log = bound_lines(ticket.alarm_lines(), policy.bounding);
    // Counted once: the classifier and the instant summary both read them.
    let log_alarms = AlarmCounts::from_bounded(&log);
    // The classifier may raise a ticket's severity, never lower what ServiceNow says, and
    // without evidence by one level at most (crate::routing).
    let (prediction, routed) = {
        let input = FeatureInput::with_log_alarms(&ticket, log_alarms);
        let prediction = ctx.classifier.predict(&input);
        let routed = routing::route_ticket(ticket.severity, &prediction, &input);
        (prediction, routed)
    };
    let routing = routed.severity;
    let mut snapshot = TicketSnapshot::new(ticket, log, prediction, routing, now);
    snapshot.routing_basis = Some(routed.basis);
    let t = &snapshot.ticket;

    let of = SummaryOf {
        ticket: t.id.clone(),
        number: t.number.clone(),
        version: t.version,
        kind: SummaryKind::Technician,
        created_at: now,
    };
    let summary = Summary::instant(
        of,
        extractive::technician_from(&snapshot, &snapshot.alarm_log, log_alarms),
        serde_json::json!({
            "bounding": snapshot.alarm_log.report,
            "classification": {
                "probabilities": snapshot.prediction.probabilities,
                "most_likely": snapshot.prediction.most_likely,
                "routing": routing,
                "routing_basis": routed.basis,
                "servicenow_priority": t.severity,
                "confidence": snapshot.prediction.confidence,
                "customer_impact": snapshot.prediction.customer_impact,
            },
        }),
    );

    let closed = t.is_closed();
    let mut kinds = Vec::with_capacity(2);
    if !closed {
        kinds.push(SummaryKind::Technician);
    }
    if snapshot.customer_impacting {
        kinds.push(SummaryKind::Customer);
    }
    let coalesce_key = coalesce_key(t, policy.coalesce_window, now);
    let jobs = kinds
        .into_iter()
        .map(|kind| {
            let choice = policy.tiers.choice(kind, &routed);
            let rank = routed.queue_rank(kind);
            Job {
                id: JobId {
                    ticket: t.id.clone(),
                    version: t.version,
                    kind,
                },
                number: t.number.clone(),
                severity: routing,
                queue_rank: (rank != routing).then_some(rank),
                tier: choice.tier,
                llm: choice.llm,
                prompt_tokens: prompt_token_estimate(
                    &prompts::ticket_text_for(kind, &snapshot, policy.prompt_chars),
                    kind,
                ),
                max_output_tokens: prompts::current(kind).max_output(),
                enqueued_at: now,
                deadline: policy.deadlines.deadline(now, routing, kind),
                hold_until: coalesce_key
                    .as_ref()
                    .and_then(|_| hold_until(policy, routing, kind, now)),
                coalesce_key: coalesce_key.clone(),
                region: t.region.clone(),
            }
        })
        .collect();

    Ok(IngestRecord {
        ticket: t.id.clone(),
        version: t.version,
        region: t.region.clone(),
        closed,
        instant_summary: summary,
        jobs,
        snapshot: SnapshotJson::encode(&snapshot)
            .map_err(|e| format!("snapshot could not be encoded: {e}"))?,
    })
}

/// A job is held for at most this share of its wait (the time its deadline allows).
pub const HOLD_SHARE_OF_WAIT: u32 = 4;

/// Holds shorter than this are not made: too short to gather an outage's tickets,
/// they would only delay the most urgent summaries (P1 and P2 technician ones).
pub const MIN_HOLD: Duration = Duration::from_secs(60);

/// Until when a coalescable job of this severity and kind is held: a quarter of its
/// wait, at most the policy's `coalesce_hold`; not at all when that is under [`MIN_HOLD`].
fn hold_until(
    policy: &IngestPolicy,
    routing: Severity,
    kind: SummaryKind,
    now: EpochMillis,
) -> Option<EpochMillis> {
    let wait = policy.deadlines.wait(routing, kind);
    let hold = (wait / HOLD_SHARE_OF_WAIT).min(policy.coalesce_hold);
    (hold >= MIN_HOLD).then(|| now.plus(hold))
}

/// Same outage = same region + parent incident (or, lacking one, the CI) + opening time window.
/// Tickets with neither parent nor CI do not coalesce.
pub fn coalesce_key(t: &Ticket, window: Duration, now: EpochMillis) -> Option<String> {
    let anchor = match (&t.parent, &t.cmdb_ci) {
        (Some(p), _) => format!("parent:{p}"),
        (None, Some(ci)) => format!("ci:{ci}"),
        (None, None) => return None,
    };
    let at = t.opened_at.or(t.updated_at).unwrap_or(now);
    let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1);
    let region = t.region.as_deref().unwrap_or("-");
    Some(format!("{region}|{anchor}|{}", at.as_millis() / window_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: EpochMillis = EpochMillis(1_764_410_400_000);

    fn held_for(policy: &IngestPolicy, severity: Severity, kind: SummaryKind) -> Option<u64> {
        hold_until(policy, severity, kind, T0).map(|end| end.since(T0).as_secs())
    }

    #[test]
    fn jobs_are_held_a_quarter_of_their_wait_up_to_the_cap_and_urgent_ones_not_at_all() {
        let policy = IngestPolicy::default();
        let technician = |s| held_for(&policy, s, SummaryKind::Technician);
        let customer = |s| held_for(&policy, s, SummaryKind::Customer);
        // Technician waits 30 s, 45 s, 15, 60 and 240 min; customer 5, 10, 30, 120, 480 min.
        assert_eq!(technician(Severity::P1), None);
        assert_eq!(technician(Severity::P2), None);
        assert_eq!(technician(Severity::P3), Some(225));
        assert_eq!(technician(Severity::P4), Some(300));
        assert_eq!(customer(Severity::P1), Some(75));
        assert_eq!(customer(Severity::P2), Some(150));
        assert_eq!(customer(Severity::P5), Some(300));
    }

    #[test]
    fn a_zero_coalesce_hold_holds_nothing() {
        let policy = IngestPolicy {
            coalesce_hold: Duration::ZERO,
            ..IngestPolicy::default()
        };
        for severity in Severity::ALL {
            for kind in [SummaryKind::Technician, SummaryKind::Customer] {
                assert_eq!(held_for(&policy, severity, kind), None);
            }
        }
    }
}
