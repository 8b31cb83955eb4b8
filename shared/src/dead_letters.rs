//! Dead-letter re-submission: rejected events run through ingest again.
//!
//! The `dead-letters` HTTP function and the `stormgate dead-letters` command both call
//! [`resubmit`]. Each selected entry's value and CDC headers go through
//! [`classify_batch_reporting`], the path `classify` takes, with the entry's Kafka
//! coordinates. An entry leaves the stream only once its event is stored (or found already
//! stored); an event rejected again is dead-lettered anew with the new reason (same value,
//! headers and coordinates) before the old entry is removed, so it is never out of the
//! stream in between. An entry whose value is not the event exactly as delivered (clipped,
//! not UTF-8, or an undecodable Kafka record) is left alone: re-submitting it would replace
//! the real reason with a parse error about the damage.

use serde::{Deserialize, Serialize};

use crate::event::SkipReason;
use crate::ingest::{EventFate, IngestContext, IngestError, RawEvent, classify_batch_reporting};
use crate::store::{DeadLetter, StoreError};

/// Which entries to re-submit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every entry among the oldest `scan`.
    All,
    /// These entries (looked up among the oldest `scan`).
    Ids(Vec<String>),
}

/// What re-submitting one entry did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Resubmission {
    /// Stored now; the entry was removed.
    Accepted,
    /// That version of the ticket was already stored; the entry was removed.
    DuplicateOrStale,
    /// Rejected again: the entry was replaced by `new_id`, which carries the new reason.
    RejectedAgain { new_id: String, reason: String },
    /// Not an incident event (another table, a heartbeat, another format): such records
    /// are skipped now, so the entry was removed.
    Skipped { reason: SkipReason },
    /// Left in the stream unchanged, for the reason given.
    Kept { reason: String },
}

/// One entry re-submitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResubmittedEntry {
    pub id: String,
    #[serde(flatten)]
    pub resubmission: Resubmission,
}

/// What a re-submission did, entry by entry, with its totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResubmitReport {
    pub resubmitted: u32,
    pub accepted: u32,
    pub duplicate_or_stale: u32,
    pub rejected_again: u32,
    #[serde(default)]
    pub skipped: u32,
    pub kept: u32,
    pub entries: Vec<ResubmittedEntry>,
    /// Requested ids that are not among the entries looked at.
    pub not_found: Vec<String>,
}

impl ResubmitReport {
    fn record(&mut self, id: String, resubmission: Resubmission) {
        match &resubmission {
            Resubmission::Accepted => self.accepted += 1,
            Resubmission::DuplicateOrStale => self.duplicate_or_stale += 1,
            Resubmission::RejectedAgain { .. } => self.rejected_again += 1,
            Resubmission::Skipped { .. } => self.skipped += 1,
            Resubmission::Kept { .. } => self.kept += 1,
        }
        if !matches!(resubmission, Resubmission::Kept { .. }) {
            self.resubmitted += 1;
        }
        self.entries.push(ResubmittedEntry { id, resubmission });
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ResubmitError {
    /// The store could not be reached; entries handled before it failed stay handled.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("the dead-letter stream could not be read: {0}")]
    Corrupt(String),
}

impl From<StoreError> for ResubmitError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(e) => ResubmitError::Unavailable(e),
            StoreError::Corrupt(e) => ResubmitError::Corrupt(e),
        }
    }
}

impl From<IngestError> for ResubmitError {
    fn from(e: IngestError) -> Self {
        match e {
            IngestError::StoreUnavailable(e) => ResubmitError::Unavailable(e),
            error @ IngestError::Incomplete { .. } => ResubmitError::Unavailable(error.to_string()),
        }
    }
}

/// Re-submits the selected entries among the oldest `scan`, oldest first.
pub async fn resubmit(
    ctx: &IngestContext<'_>,
    selection: &Selection,
    scan: usize,
) -> Result<ResubmitReport, ResubmitError> {
    let entries = ctx.store.dead_letters(scan).await?;
    let mut report = ResubmitReport::default();
    if let Selection::Ids(ids) = selection {
        report.not_found = ids
            .iter()
            .filter(|id| !entries.iter().any(|(listed, _)| listed == *id))
            .cloned()
            .collect();
    }
    for (id, letter) in entries {
        let selected = match selection {
            Selection::All => true,
            Selection::Ids(ids) => ids.contains(&id),
        };
        if selected {
            let resubmission = resubmit_one(ctx, &id, letter).await?;
            report.record(id, resubmission);
        }
    }
    Ok(report)
}

async fn resubmit_one(
    ctx: &IngestContext<'_>,
    id: &str,
    letter: DeadLetter,
) -> Result<Resubmission, ResubmitError> {
    if !letter.replayable {
        return Ok(Resubmission::Kept {
            reason: "the stored value is not the event as delivered (clipped, not UTF-8, or \
                     an undecodable Kafka record); re-publish it from Kafka instead"
                .to_owned(),
        });
    }
    let event = RawEvent {
        value: letter.raw.into_bytes(),
        headers: letter.headers,
        topic: letter.topic,
        partition: letter.partition,
        offset: letter.offset,
    };
    let report = classify_batch_reporting(std::slice::from_ref(&event), ctx).await?;
    let resubmission = match report.fates.into_iter().next() {
        Some(EventFate::Accepted) => Resubmission::Accepted,
        Some(EventFate::DuplicateOrStale) => Resubmission::DuplicateOrStale,
        Some(EventFate::DeadLettered { id: new_id, reason }) => {
            Resubmission::RejectedAgain { new_id, reason }
        }
        Some(EventFate::Skipped { reason }) => Resubmission::Skipped { reason },
        None => {
            return Ok(Resubmission::Kept {
                reason: "ingest reported nothing for it".to_owned(),
            });
        }
    };
    // The event is stored or kept under its new id: only now may the old entry go.
    ctx.store.remove_dead_letter(id).await?;
    Ok(resubmission)
}
