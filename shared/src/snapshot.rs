//! The stored view of one accepted ticket version: what summarizers and the roll-up read.
//!
//! The JSON is the parsed [`Ticket`] flattened at the top level (so lenient readers such as
//! [`crate::ticket_view::TicketView`] see `number`, `state`, `log`, ...), plus the classifier's
//! verdict. Its `log` holds the latest journal entries (capped) followed by one `alarm` entry:
//! the alarm log after bounding, as rendered by [`BoundedLog::render`]. A snapshot therefore
//! stays small however large the event was.

use serde::{Deserialize, Serialize};

use crate::classifier::Prediction;
use crate::clock::EpochMillis;
use crate::event::{LogEntry, LogSource, Ticket};
use crate::log_bounding::{BoundedLog, BoundingReport};
use crate::scrubber::ScrubContext;
use crate::severity::Severity;

/// A ticket's stored snapshot as a job, or a reader, finds it: the one judgement every
/// caller of [`crate::store::Store::load_snapshot`] acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum SnapshotLoad {
    /// The latest snapshot, of `version` (for a job: its own version or an older one).
    Current {
        version: u64,
        snapshot: Box<TicketSnapshot>,
    },
    /// A newer version than the job's is stored (`stored`): the job's work is moot.
    Superseded { stored: u64 },
    /// Stored, but not in a form this code reads; `reason` says why.
    Unreadable { version: u64, reason: String },
    /// No snapshot is stored: never accepted, or purged.
    Missing,
}

impl SnapshotLoad {
    /// Judges what the store holds (`stored`: the latest version and its JSON) against the
    /// version a job is for; `None` when the latest is wanted whatever it is.
    pub fn judge(stored: Option<(u64, serde_json::Value)>, job_version: Option<u64>) -> Self {
        let Some((version, value)) = stored else {
            return SnapshotLoad::Missing;
        };
        if job_version.is_some_and(|job| version > job) {
            return SnapshotLoad::Superseded { stored: version };
        }
        match serde_json::from_value::<TicketSnapshot>(value) {
            Ok(snapshot) => SnapshotLoad::Current {
                version,
                snapshot: Box::new(snapshot),
            },
            Err(error) => SnapshotLoad::Unreadable {
                version,
                reason: error.to_string(),
            },
        }
    }

    /// The snapshot, when it is current.
    pub fn current(self) -> Option<TicketSnapshot> {
        match self {
            SnapshotLoad::Current { snapshot, .. } => Some(*snapshot),
            SnapshotLoad::Superseded { .. }
            | SnapshotLoad::Unreadable { .. }
            | SnapshotLoad::Missing => None,
        }
    }
}

/// Journal entries kept in a snapshot (the most recent ones).
pub const KEPT_JOURNAL_ENTRIES: usize = 20;
/// Bytes of journal text kept in a snapshot, newest entries first.
pub const KEPT_JOURNAL_BYTES: usize = 4 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TicketSnapshot {
    /// The ticket; `log` = recent journal entries, then the bounded alarm log as one entry.
    #[serde(flatten)]
    pub ticket: Ticket,
    /// What bounding did to the alarm log.
    pub bounding: BoundingReport,
    /// Everyone the full ticket named, kept for the scrubber after the journal was trimmed.
    pub people: Vec<String>,
    pub prediction: Prediction,
    /// The severity work is routed at: ServiceNow's priority, raised by the classifier's
    /// route-up one level at most without evidence ([`crate::routing`]).
    pub routing: Severity,
    /// Why it is routed there ([`crate::routing::RoutingBasis`]); absent in snapshots
    /// stored before the basis was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_basis: Option<crate::routing::RoutingBasis>,
    pub customer_impacting: bool,
    pub ingested_at: EpochMillis,
}

impl TicketSnapshot {
    /// `alarm_log` is the bounded form of the ticket's alarm entries.
    pub fn new(
        mut ticket: Ticket,
        alarm_log: &BoundedLog,
        prediction: Prediction,
        routing: Severity,
        ingested_at: EpochMillis,
    ) -> TicketSnapshot {
        let people = ticket.people().into_iter().map(str::to_owned).collect();
        ticket.log.retain(|e| e.source != LogSource::Alarm);
        keep_recent_journal(&mut ticket.log);
        let rendered = alarm_log.render();
        if !rendered.is_empty() {
            ticket.log.push(LogEntry {
                at: None,
                author: None,
                source: LogSource::Alarm,
                text: rendered,
            });
        }
        TicketSnapshot {
            customer_impacting: prediction.customer_impact.impacting,
            ticket,
            bounding: alarm_log.report,
            people,
            prediction,
            routing,
            routing_basis: None,
            ingested_at,
        }
    }

    /// The bounded alarm log, read back from its rendered entry.
    pub fn alarm_log(&self) -> BoundedLog {
        self.ticket
            .log
            .iter()
            .rev()
            .find(|e| e.source == LogSource::Alarm)
            .map(|e| BoundedLog::parse_rendered(&e.text, self.bounding))
            .unwrap_or_default()
    }

    /// Journal entries (work notes and comments), oldest first.
    pub fn journal(&self) -> impl Iterator<Item = &LogEntry> {
        self.ticket
            .log
            .iter()
            .filter(|e| e.source != LogSource::Alarm)
    }

    /// What the customer text of this ticket must not reveal.
    pub fn scrub_context(&self) -> ScrubContext {
        let mut ctx = ScrubContext::from_ticket(&self.ticket);
        for person in &self.people {
            if !ctx.people.contains(person) {
                ctx.people.push(person.clone());
            }
        }
        ctx
    }
}

/// Keeps the newest entries within [`KEPT_JOURNAL_ENTRIES`] and [`KEPT_JOURNAL_BYTES`].
fn keep_recent_journal(log: &mut Vec<LogEntry>) {
    let skip = log.len().saturating_sub(KEPT_JOURNAL_ENTRIES);
    log.drain(..skip);
    let mut budget = KEPT_JOURNAL_BYTES;
    let mut keep_from = log.len();
    while keep_from > 0 && budget > 0 {
        let entry = &mut log[keep_from - 1];
        if entry.text.len() > budget {
            let mut cut = budget;
            while !entry.text.is_char_boundary(cut) {
                cut -= 1;
            }
            entry.text.truncate(cut);
        }
        budget -= entry.text.len().min(budget);
        keep_from -= 1;
    }
    log.drain(..keep_from);
}

/// A ServiceNow incident event as Stream Connect publishes it, for unit tests.
#[cfg(test)]
pub(crate) fn test_event(n: u8, version: u64, priority: &str, state: &str) -> serde_json::Value {
    serde_json::json!({
        "sys_id": format!("{n:032x}"),
        "number": format!("INC00100{n:02}"),
        "sys_mod_count": version.to_string(),
        "state": state,
        "priority": priority,
        "category": "network",
        "subcategory": "fibre",
        "cmdb_ci": format!("ams-agg-0{n}"),
        "location": "Amsterdam DC2",
        "u_region": "north",
        "assignment_group": "NOC Tier 2",
        "assigned_to": "Jane Roe",
        "caller_id": "Pat Smith",
        "parent_incident": "INC0009999",
        "opened_at": "2027-01-15 08:00:00",
        "sys_updated_on": "2027-01-15 08:30:00",
        "short_description": format!("Site {n} down after fibre cut"),
        "description": "Aggregation router lost both uplinks.",
        "work_notes": format!("2027-01-15 08:20:00 - Wei Chen (Work notes)\nSplice crew dispatched to site {n}; BGP to 10.0.0.{n} down.\n\n"),
        "u_alarm_log": format!("LINK DOWN ams-agg-0{n} xe-0/0/1\nLINK DOWN ams-agg-0{n} xe-0/0/1\nBGP peer 10.0.0.{n} down"),
        "u_customers_affected": "1200"
    })
}

/// A ticket event as ingest would store it, for unit tests of what reads snapshots.
#[cfg(test)]
pub(crate) fn snapshot_of_event(json: &serde_json::Value) -> TicketSnapshot {
    use crate::classifier::Classifier;
    use crate::classifier::features::FeatureInput;
    use crate::event::{CdcHeaders, ParseLimits, parse_event};
    use crate::log_bounding::{BoundingLimits, bound_lines};

    let ticket = parse_event(
        json.to_string().as_bytes(),
        &CdcHeaders::default(),
        ParseLimits::default(),
    )
    .expect("a valid test event");
    let log = bound_lines(ticket.alarm_lines(), BoundingLimits::default());
    let input = FeatureInput::from_ticket(&ticket, &log);
    let prediction = Classifier::embedded()
        .expect("the embedded model")
        .predict(&input);
    let routing = crate::routing::route_ticket(ticket.severity, &prediction, &input).severity;
    TicketSnapshot::new(ticket, &log, prediction, routing, EpochMillis(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_snapshot_is_judged_once_against_the_jobs_version() {
        let snapshot = snapshot_of_event(&test_event(1, 3, "1", "2"));
        let value = serde_json::to_value(&snapshot).unwrap();
        assert_eq!(SnapshotLoad::judge(None, Some(3)), SnapshotLoad::Missing);
        assert_eq!(
            SnapshotLoad::judge(Some((4, value.clone())), Some(3)),
            SnapshotLoad::Superseded { stored: 4 }
        );
        let current = SnapshotLoad::judge(Some((3, value.clone())), Some(3));
        assert_eq!(current.current(), Some(snapshot.clone()));
        assert_eq!(
            SnapshotLoad::judge(Some((4, value)), None).current(),
            Some(snapshot),
            "without a job's version the latest is current"
        );
        let unreadable = SnapshotLoad::judge(Some((3, serde_json::json!({"number": 7}))), Some(3));
        assert!(
            matches!(&unreadable, SnapshotLoad::Unreadable { version: 3, reason } if !reason.is_empty()),
            "{unreadable:?}"
        );
    }
}
