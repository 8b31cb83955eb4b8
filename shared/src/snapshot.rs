//! The stored view of one accepted ticket version: what summarizers and the roll-up read.
//!
//! The JSON is the parsed [`Ticket`] flattened at the top level (`number`, `state`, `log`, ...),
//! plus the classifier's verdict. Its `log` holds the latest journal entries (capped); the
//! alarm log is kept beside it after bounding, as data (`alarm_log`: its lines with their
//! repeat counts, the omission between head and tail, the bounding report), and rendered to
//! text only where text is read (prompts, the scrubber). A snapshot therefore stays small
//! however large the event was.
//!
//! Snapshots stored before the log was kept as data hold it rendered, as an `alarm` entry
//! of `log` with its report beside it as `bounding`; they are read back into the same value.

use serde::{Deserialize, Serialize};

use crate::classifier::Prediction;
use crate::clock::EpochMillis;
use crate::log_bounding::{BoundedLog, BoundingReport};
use crate::scrubber::ScrubContext;
use crate::severity::Severity;
use crate::ticket::{LogEntry, LogSource, Ticket};

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
#[serde(try_from = "StoredSnapshot")]
pub struct TicketSnapshot {
    /// The ticket; `log` = its recent journal entries (the alarm entries are in `alarm_log`).
    #[serde(flatten)]
    pub ticket: Ticket,
    /// The ticket's alarm entries after bounding, with what bounding did.
    pub alarm_log: BoundedLog,
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

/// A snapshot as stored, in either of its forms: with `alarm_log` as data, or (stored
/// before it was) with the log rendered into an `alarm` entry of `log` and its report
/// as `bounding`.
#[derive(Deserialize)]
struct StoredSnapshot {
    #[serde(flatten)]
    ticket: Ticket,
    #[serde(default)]
    alarm_log: Option<BoundedLog>,
    #[serde(default)]
    bounding: Option<BoundingReport>,
    people: Vec<String>,
    prediction: Prediction,
    routing: Severity,
    #[serde(default)]
    routing_basis: Option<crate::routing::RoutingBasis>,
    customer_impacting: bool,
    ingested_at: EpochMillis,
}

impl TryFrom<StoredSnapshot> for TicketSnapshot {
    type Error = String;

    fn try_from(stored: StoredSnapshot) -> Result<Self, Self::Error> {
        let mut ticket = stored.ticket;
        let alarm_log = match (stored.alarm_log, stored.bounding) {
            (Some(log), _) => log,
            (None, Some(report)) => legacy_alarm_log(&ticket, report),
            (None, None) => return Err("missing field `alarm_log` (or `bounding`)".to_owned()),
        };
        ticket.log.retain(|e| e.source != LogSource::Alarm);
        Ok(TicketSnapshot {
            ticket,
            alarm_log,
            people: stored.people,
            prediction: stored.prediction,
            routing: stored.routing,
            routing_basis: stored.routing_basis,
            customer_impacting: stored.customer_impacting,
            ingested_at: stored.ingested_at,
        })
    }
}

/// The bounded log of a snapshot stored with it rendered: its last `alarm` entry, read back.
fn legacy_alarm_log(ticket: &Ticket, report: BoundingReport) -> BoundedLog {
    match ticket
        .log
        .iter()
        .rev()
        .find(|e| e.source == LogSource::Alarm)
    {
        Some(entry) => BoundedLog::parse_rendered(&entry.text, report),
        None => BoundedLog {
            report,
            ..BoundedLog::default()
        },
    }
}

impl TicketSnapshot {
    /// `alarm_log` is the bounded form of the ticket's alarm entries.
    pub fn new(
        mut ticket: Ticket,
        alarm_log: BoundedLog,
        prediction: Prediction,
        routing: Severity,
        ingested_at: EpochMillis,
    ) -> TicketSnapshot {
        let people = ticket.people().into_iter().map(str::to_owned).collect();
        ticket.log.retain(|e| e.source != LogSource::Alarm);
        keep_recent_journal(&mut ticket.log);
        TicketSnapshot {
            customer_impacting: prediction.customer_impact.impacting,
            ticket,
            alarm_log,
            people,
            prediction,
            routing,
            routing_basis: None,
            ingested_at,
        }
    }

    /// Journal entries (work notes and comments), oldest first.
    pub fn journal(&self) -> impl Iterator<Item = &LogEntry> {
        self.ticket
            .log
            .iter()
            .filter(|e| e.source != LogSource::Alarm)
    }

    /// What the customer text of this ticket must not reveal: the ticket's own context,
    /// the rendered alarm log as internal text, and everyone the full ticket named.
    pub fn scrub_context(&self) -> ScrubContext {
        let mut ctx = ScrubContext::from_ticket(&self.ticket);
        ctx.add_internal_text(&self.alarm_log.render());
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
    snapshot_of_event_bounded(json, crate::log_bounding::BoundingLimits::default())
}

/// [`snapshot_of_event`] with the alarm log bounded to `limits`.
#[cfg(test)]
pub(crate) fn snapshot_of_event_bounded(
    json: &serde_json::Value,
    limits: crate::log_bounding::BoundingLimits,
) -> TicketSnapshot {
    use crate::classifier::Classifier;
    use crate::classifier::features::FeatureInput;
    use crate::event::{CdcHeaders, ParseLimits, parse_event};
    use crate::log_bounding::bound_lines;

    let ticket = parse_event(
        json.to_string().as_bytes(),
        &CdcHeaders::default(),
        ParseLimits::default(),
    )
    .expect("a valid test event");
    let log = bound_lines(ticket.alarm_lines(), limits);
    let input = FeatureInput::from_ticket(&ticket, &log);
    let prediction = Classifier::embedded()
        .expect("the embedded model")
        .predict(&input);
    let routing = crate::routing::route_ticket(ticket.severity, &prediction, &input).severity;
    TicketSnapshot::new(ticket, log, prediction, routing, EpochMillis(0))
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

/// A storm ticket whose alarm log has repeats (counted `[xN]`) and more distinct lines
/// than the cap holds (an omission marker between head and tail).
#[cfg(test)]
pub(crate) fn bounded_storm_snapshot() -> TicketSnapshot {
    let mut event = test_event(4, 9, "2", "2");
    let mut alarms = String::new();
    for i in 0..12 {
        alarms.push_str(&format!(
            "2026-11-29 10:00:{i:02} LOS alarm on xe-0/0/{i} at ams-agg-04\n"
        ));
    }
    for word in [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
    ] {
        alarms.push_str(&format!(
            "2026-11-29 10:01:00 PSU {word} degraded on ams-agg-04\n"
        ));
    }
    alarms.push_str("2026-11-29 10:02:00 BGP neighbor 10.0.0.4 state Idle\n");
    alarms.push_str("2026-11-29 10:02:30 BGP neighbor 10.0.0.5 state Idle\n");
    event["u_alarm_log"] = alarms.into();
    snapshot_of_event_bounded(
        &event,
        crate::log_bounding::BoundingLimits {
            max_bytes: 400,
            head_percent: 35,
        },
    )
}

/// What the scrubber and a reader of an older snapshot make of a bounded alarm log (the
/// prompt text and the extractive summaries are pinned beside their code).
#[cfg(test)]
mod rendering_tests {
    use super::*;

    /// The scrubber reads the rendered log as one text: a customer text copying words
    /// across a repeat count or the omission marker is caught.
    #[test]
    fn the_scrub_context_holds_runs_of_the_rendered_bounded_log() {
        let ctx = bounded_storm_snapshot().scrub_context();
        for copied in [
            "seen on ams agg 04 x12 2026 11",
            "then 3 lines omitted 2026 11 29",
            "at 10.0.0.4 state Idle [x2] now",
        ] {
            let leaks = crate::scrubber::find_leaks(copied, &ctx);
            assert!(
                leaks
                    .iter()
                    .any(|l| l.kind == crate::scrubber::LeakKind::InternalText),
                "{copied}: {leaks:?}"
            );
        }
    }

    /// A snapshot as stored before the bounded log was kept as data: the log rendered
    /// into an `alarm` entry of `log`, its report beside it as `bounding`.
    const STORED_WITH_RENDERED_LOG: &str = r#"{"id":"00000000000000000000000000000004","number":"INC0010004","version":9,"action":"update","updated_at":1800001800000,"opened_at":1800000000000,"severity":"P2","impact":null,"urgency":null,"state":"in_progress","category":"network","subcategory":"fibre","symptom":null,"contact_type":null,"cmdb_ci":"ams-agg-04","location":"Amsterdam DC2","region":"north","assignment_group":"NOC Tier 2","assigned_to":"Jane Roe","caller":"Pat Smith","short_description":"Site 4 down after fibre cut","description":"Aggregation router lost both uplinks.","log":[{"at":1800001200000,"author":"Wei Chen","source":"work_note","text":"Splice crew dispatched to site 4; BGP to 10.0.0.4 down."},{"at":null,"author":null,"source":"alarm","text":"2026-11-29 10:00:00 LOS alarm on xe-0/0/0 at ams-agg-04 [x12]\n2026-11-29 10:01:00 PSU alpha degraded on ams-agg-04\n[... 3 lines omitted ...]\n2026-11-29 10:01:00 PSU echo degraded on ams-agg-04\n2026-11-29 10:01:00 PSU foxtrot degraded on ams-agg-04\n2026-11-29 10:01:00 PSU golf degraded on ams-agg-04\n2026-11-29 10:02:00 BGP neighbor 10.0.0.4 state Idle [x2]\n"}],"customers_affected":1200,"parent":"INC0009999","bounding":{"bytes_in":1153,"bytes_out":358,"lines_in":21,"lines_out":6,"lines_dropped":3,"repeats_collapsed":12,"capped":true},"people":["Jane Roe","Pat Smith","Wei Chen"],"prediction":{"probabilities":[0.9079388,0.08996034,0.002081065,0.0000148559375,0.0000049499135],"most_likely":"P1","routing":"P1","confidence":0.9079388,"customer_impact":{"impacting":true,"customers":1200,"reason":"customers_reported"}},"routing":"P1","customer_impacting":true,"ingested_at":0}"#;

    #[test]
    fn a_snapshot_stored_with_its_log_rendered_still_reads_the_same() {
        let value: serde_json::Value = serde_json::from_str(STORED_WITH_RENDERED_LOG).unwrap();
        let loaded = SnapshotLoad::judge(Some((9, value)), Some(9))
            .current()
            .expect("an older snapshot is current");
        let fresh = bounded_storm_snapshot();
        assert_eq!(loaded, fresh);
        assert_eq!(loaded.alarm_log.render(), fresh.alarm_log.render());
        assert_eq!(loaded.scrub_context(), fresh.scrub_context());
    }
}
