//! The stored view of one accepted ticket version: what summarizers and the roll-up read.
//!
//! The raw alarm log is replaced by its bounded form, and journal entries are capped, so a
//! snapshot stays small however large the event was.

use serde::{Deserialize, Serialize};

use crate::classifier::Prediction;
use crate::clock::EpochMillis;
use crate::event::{LogSource, Ticket};
use crate::log_bounding::BoundedLog;
use crate::scrubber::ScrubContext;
use crate::severity::Severity;

/// Journal entries kept in a snapshot (the most recent ones).
pub const KEPT_JOURNAL_ENTRIES: usize = 20;
/// Bytes kept of each journal entry.
pub const KEPT_JOURNAL_BYTES: usize = 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TicketSnapshot {
    /// The ticket, with `log` holding only the latest human journal entries (capped).
    pub ticket: Ticket,
    /// The whole log (alarms and journal), bounded.
    pub log: BoundedLog,
    /// Everyone the full ticket named, kept for the scrubber after the log was trimmed.
    pub people: Vec<String>,
    pub prediction: Prediction,
    /// The severity work is routed at: the more severe of ServiceNow's priority and the classifier's route-up.
    pub routing: Severity,
    pub customer_impacting: bool,
    pub ingested_at: EpochMillis,
}

impl TicketSnapshot {
    pub fn new(
        mut ticket: Ticket,
        log: BoundedLog,
        prediction: Prediction,
        routing: Severity,
        ingested_at: EpochMillis,
    ) -> TicketSnapshot {
        let people = ticket.people().into_iter().map(str::to_owned).collect();
        ticket.log.retain(|e| e.source != LogSource::Alarm);
        let skip = ticket.log.len().saturating_sub(KEPT_JOURNAL_ENTRIES);
        ticket.log.drain(..skip);
        for entry in &mut ticket.log {
            if entry.text.len() > KEPT_JOURNAL_BYTES {
                let mut cut = KEPT_JOURNAL_BYTES;
                while !entry.text.is_char_boundary(cut) {
                    cut -= 1;
                }
                entry.text.truncate(cut);
            }
        }
        TicketSnapshot {
            customer_impacting: prediction.customer_impact.impacting,
            ticket,
            log,
            people,
            prediction,
            routing,
            ingested_at,
        }
    }

    /// What the customer text of this ticket must not reveal.
    pub fn scrub_context(&self) -> ScrubContext {
        let mut ctx = ScrubContext::from_ticket(&self.ticket);
        for person in &self.people {
            if !ctx.people.contains(person) {
                ctx.people.push(person.clone());
            }
        }
        for line in self.log.lines() {
            ctx.add_internal_text(&line.text);
        }
        ctx
    }
}
