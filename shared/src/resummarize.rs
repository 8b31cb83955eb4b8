//! Re-summarize one ticket now: an operator's one-shot action (the console, `stormgate
//! control resummarize`).
//!
//! The ticket's latest stored version gets, for each kind ingest queued for it (the
//! technician summary unless it is closed, the customer one when customers are
//! affected), a job at the head of the premium queue: severity P1, no coalescing hold,
//! the P1 deadline from now. [`crate::store::ConsoleStore::resummarize`] queues it in one
//! step per job: a version the LLM summarized already is left alone, a job being
//! summarized right now is left to its worker, and a degraded fallback stored for the
//! version stops being final, so the call is made and the LLM summary replaces it. The
//! customer notice and the work note of that version went out with the fallback and are
//! not sent again (the delivery ledger owes a version once).

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::ingest::{IngestPolicy, prompt_token_estimate};
use crate::job::{Job, JobId, LlmUse, SummaryKind, Tier};
use crate::prompts;
use crate::severity::Severity;
use crate::snapshot::{SnapshotLoad, TicketSnapshot};
use crate::store::{ResummarizeOutcome, Store, StoreError};
use crate::ticket_id::TicketId;

/// What re-summarizing one ticket did, per kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResummarizeReport {
    pub ticket: TicketId,
    pub number: String,
    pub version: u64,
    pub kinds: Vec<KindOutcome>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindOutcome {
    pub kind: SummaryKind,
    pub outcome: ResummarizeOutcome,
}

#[derive(Debug, thiserror::Error)]
pub enum ResummarizeError {
    #[error("no ticket {0} is stored")]
    UnknownTicket(TicketId),
    #[error("the stored snapshot of ticket {0} cannot be read: {1}")]
    Unreadable(TicketId, String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Queues the ticket's latest version for its LLM summaries now. See the module docs.
pub async fn resummarize(
    store: &dyn Store,
    policy: &IngestPolicy,
    ticket: &TicketId,
    now: EpochMillis,
) -> Result<ResummarizeReport, ResummarizeError> {
    let (version, snapshot) = match store.load_snapshot(ticket, None).await? {
        SnapshotLoad::Current { version, snapshot } => (version, *snapshot),
        SnapshotLoad::Unreadable { reason, .. } => {
            return Err(ResummarizeError::Unreadable(ticket.clone(), reason));
        }
        SnapshotLoad::Missing | SnapshotLoad::Superseded { .. } => {
            return Err(ResummarizeError::UnknownTicket(ticket.clone()));
        }
    };
    let jobs = jobs_for(&snapshot, version, policy, now);
    let outcomes = store.resummarize(&jobs).await?;
    Ok(ResummarizeReport {
        ticket: ticket.clone(),
        number: snapshot.ticket.number.clone(),
        version,
        kinds: jobs
            .iter()
            .zip(outcomes)
            .map(|(job, outcome)| KindOutcome {
                kind: job.id.kind,
                outcome,
            })
            .collect(),
    })
}

/// The jobs of a re-summarize: the kinds ingest queues for this snapshot, at P1 on premium.
pub fn jobs_for(
    snapshot: &TicketSnapshot,
    version: u64,
    policy: &IngestPolicy,
    now: EpochMillis,
) -> Vec<Job> {
    let t = &snapshot.ticket;
    let mut kinds = Vec::with_capacity(2);
    if !t.is_closed() {
        kinds.push(SummaryKind::Technician);
    }
    if snapshot.customer_impacting {
        kinds.push(SummaryKind::Customer);
    }
    kinds
        .into_iter()
        .map(|kind| Job {
            id: JobId {
                ticket: t.id.clone(),
                version,
                kind,
            },
            number: t.number.clone(),
            severity: Severity::P1,
            // An operator asked for it now: first in the premium queue, whatever the
            // tier table says of the ticket's own routing.
            queue_rank: None,
            tier: Tier::Premium,
            llm: LlmUse::Always,
            prompt_tokens: prompt_token_estimate(
                &prompts::ticket_text_for(kind, snapshot, policy.prompt_chars),
                kind,
            ),
            max_output_tokens: prompts::current(kind).max_output(),
            enqueued_at: now,
            deadline: policy.deadlines.deadline(now, Severity::P1, kind),
            coalesce_key: None,
            region: t.region.clone(),
            hold_until: None,
        })
        .collect()
}
