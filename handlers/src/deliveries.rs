//! Handing what settled jobs owe to their sinks, the one way for every function that
//! settles jobs (`dispatch` for spilled and shed jobs, the tier functions for the LLM's
//! answers and their fallbacks): customer notices into the invocation's Kafka output,
//! technician summaries to ServiceNow as work notes.
//!
//! The deliveries are claimed from the store's ledger ([`stormgate_shared::sinks`]).
//! Work notes get their one attempt now; whatever ServiceNow does not take waits in the
//! work-note outbox, which then owns it, so the ledger's delivery is completed either
//! way. Customer notices are completed just before the invocation answers with them: a
//! notice is in an answer only once its delivery is recorded, and one whose recording
//! fails is left out of the answer and goes with a later tick instead of twice. An
//! invocation that fails or dies before that leaves its claims to run out
//! ([`stormgate_shared::sinks::DELIVERY_HOLD`]); the `dispatch` tick then delivers them.
//!
//! Every invocation reports what it delivered and what still waits ([`SinkReport`]) in
//! its `ReturnValue` and in one log line (`event="sinks"`).

use serde::Serialize;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::configured_sinks::Sinks;
use stormgate_shared::job::{JobId, SummaryKind};
use stormgate_shared::sinks::{
    Claimed, CustomerNotice, Owed, WorkNote, claim_notices, claim_work_notes,
};
use stormgate_shared::store::{Store, StoreError};

use crate::servicenow::{DeliveryReport, OutboxError, WorkNoteSink};
use crate::state::AppState;

/// What an invocation handed to the sinks, and what waits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SinkReport {
    pub notices: NoticeReport,
    pub work_notes: WorkNoteReport,
}

/// Customer notices of one invocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NoticeReport {
    /// Notices in this invocation's notifications output.
    pub published: u64,
    /// Ticket versions those notices cover.
    pub tickets: u64,
    /// Deliveries skipped: a newer version's summary had replaced theirs.
    pub superseded: u64,
    /// Deliveries whose summary was gone from the store.
    pub missing: u64,
    /// Deliveries still owed after this invocation (due, or claimed by one in progress).
    pub waiting: u64,
}

/// Work notes of one invocation (the outbox's drain included, where the invocation
/// drains it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WorkNoteReport {
    /// Written to ServiceNow by this invocation.
    pub delivered: u64,
    /// Put in the work-note outbox for a later attempt.
    pub queued: u64,
    /// Given up (ServiceNow refused them, too many attempts, or write-back is off).
    pub dropped: u64,
    pub superseded: u64,
    pub missing: u64,
    /// Still owed or in the outbox after this invocation.
    pub waiting: u64,
}

impl WorkNoteReport {
    /// Counts a round of attempts (or of queueing).
    pub fn add(&mut self, round: DeliveryReport) {
        self.delivered += round.delivered as u64;
        self.queued += round.queued as u64;
        self.dropped += round.dropped as u64;
    }
}

/// What a stored summary owes in this deployment: a customer notice always (the
/// notifications topic is a required setting), a work note when write-back is configured.
pub fn sinks(state: &AppState) -> Sinks {
    Sinks {
        notices: true,
        work_notes: work_note_sink(state).is_some(),
    }
}

fn work_note_sink(state: &AppState) -> Option<&WorkNoteSink> {
    state.work_notes.as_deref()
}

/// Work notes waiting in the ServiceNow outbox (0 when write-back is off).
pub async fn outbox_pending(state: &AppState) -> Result<u64, OutboxError> {
    match work_note_sink(state) {
        Some(sink) => sink.outbox.pending().await,
        None => Ok(0),
    }
}

/// The customer notices of an invocation, claimed: record them with
/// [`Notices::record`] right before answering with them.
#[derive(Debug)]
pub struct Notices {
    claimed: Claimed<CustomerNotice>,
}

impl Notices {
    /// Records the notices as delivered; the ones to put in the answer. On a store
    /// failure none: their claims run out and a later tick sends them.
    pub async fn record(self, store: &dyn Store, report: &mut SinkReport) -> Vec<CustomerNotice> {
        if self.claimed.claimed.is_empty() {
            return Vec::new();
        }
        match self.claimed.complete(store).await {
            Ok(()) => {
                report.notices.published = self.claimed.items.len() as u64;
                report.notices.tickets = self.claimed.tickets;
                self.claimed.items
            }
            Err(error) => {
                tracing::warn!(%error, notices = self.claimed.items.len(), "customer notices not recorded as sent; left for a later tick");
                Vec::new()
            }
        }
    }
}

/// How work notes leave an invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteAttempt {
    /// One attempt each now, failures to the outbox (a tier function's few notes).
    Now,
    /// Straight into the outbox, whose bounded drain sends them (the `dispatch` tick,
    /// which may settle hundreds of jobs and must not wait on ServiceNow for each).
    Queue,
}

/// Delivers what `settled` owe, plus up to `due` deliveries whose claim ran out: work
/// notes are attempted or queued now; customer notices are claimed and built for the
/// caller's answer. A store failure is logged and leaves the deliveries to a later tick:
/// summaries are stored already, and the sinks must not fail them.
pub async fn deliver(
    state: &AppState,
    store: &dyn Store,
    settled: &[JobId],
    due: usize,
    notes: NoteAttempt,
    report: &mut SinkReport,
) -> Notices {
    let now = state.clock.now();
    let owed = Owed { jobs: settled, due };
    if let Err(error) = deliver_work_notes(state, store, owed, now, notes, report).await {
        tracing::warn!(%error, "work notes owed were not delivered this time; their claims run out and a later tick delivers them");
    }
    let claimed = match claim_notices(store, owed, now).await {
        Ok(claimed) => claimed,
        Err(error) => {
            tracing::warn!(%error, "customer notices owed were not claimed this time; a later tick sends them");
            Claimed::default()
        }
    };
    report.notices.superseded = claimed.superseded;
    report.notices.missing = claimed.missing;
    Notices { claimed }
}

async fn deliver_work_notes(
    state: &AppState,
    store: &dyn Store,
    owed: Owed<'_>,
    now: EpochMillis,
    attempt: NoteAttempt,
    report: &mut SinkReport,
) -> Result<(), StoreError> {
    let claimed: Claimed<WorkNote> = claim_work_notes(store, owed, now).await?;
    report.work_notes.superseded = claimed.superseded;
    report.work_notes.missing = claimed.missing;
    if claimed.items.is_empty() {
        return claimed.complete(store).await;
    }
    let Some(sink) = work_note_sink(state) else {
        // Owed while write-back was on, and it is off now: nowhere to write them.
        tracing::warn!(
            notes = claimed.items.len(),
            "work notes dropped: ServiceNow write-back is not configured"
        );
        report.work_notes.dropped = claimed.items.len() as u64;
        return claimed.complete(store).await;
    };
    let clock = state.clock.as_ref();
    let delivery = match attempt {
        NoteAttempt::Now => sink.deliver_new(&claimed.items, clock).await,
        NoteAttempt::Queue => sink.enqueue(&claimed.items, clock).await,
    };
    match delivery {
        Ok(delivery) => {
            report.work_notes.add(delivery);
            // Delivered, dropped for good, or the outbox's now.
            claimed.complete(store).await
        }
        Err(error) => {
            // Neither written nor queued: the ledger keeps them, due after the hold.
            tracing::warn!(%error, notes = claimed.items.len(), "work notes could not be delivered or queued");
            Ok(())
        }
    }
}

/// Fills in what still waits, and logs the invocation's line.
pub async fn finish(state: &AppState, store: &dyn Store, report: &mut SinkReport) {
    let now = state.clock.now();
    match store.owed_stats(SummaryKind::Customer, now).await {
        Ok(stats) => report.notices.waiting = stats.due + stats.claimed,
        Err(error) => tracing::warn!(%error, "customer notices waiting not counted"),
    }
    match store.owed_stats(SummaryKind::Technician, now).await {
        Ok(stats) => report.work_notes.waiting = stats.due + stats.claimed,
        Err(error) => tracing::warn!(%error, "work notes waiting not counted"),
    }
    if let Some(sink) = work_note_sink(state) {
        match sink.outbox.pending().await {
            Ok(pending) => report.work_notes.waiting += pending,
            Err(error) => tracing::warn!(%error, "work-note outbox not counted"),
        }
    }
    let (n, w) = (report.notices, report.work_notes);
    tracing::info!(
        event = "sinks",
        notices_published = n.published,
        notice_tickets = n.tickets,
        notices_superseded = n.superseded,
        notices_missing = n.missing,
        notices_waiting = n.waiting,
        work_notes_delivered = w.delivered,
        work_notes_queued = w.queued,
        work_notes_dropped = w.dropped,
        work_notes_superseded = w.superseded,
        work_notes_missing = w.missing,
        work_notes_waiting = w.waiting,
    );
}
