//! The end-of-run checks of a local run, each an outcome read from the running system,
//! never from what the run meant to do:
//!
//! - every ticket's latest version has, for each summary kind ingest queues for it (the
//!   real parser, classifier and ingest decide, as in the fault suite), a final summary
//!   in the read API (`GET /api/summaries/{ticket}`): the LLM's, or the degraded
//!   fallback, of that version;
//! - every such customer job's ticket version is named by a notice published on the
//!   notifications topic (the functions' Kafka outputs);
//! - no HTTP 429 reached the handler, no queue message was poisoned, no Kafka batch was
//!   lost, no invocation failed for good;
//! - after the stop, none of the processes the run started is running.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;
use stormgate_shared::classifier::Classifier;
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::event::{CdcHeaders, ParseLimits, parse_event};
use stormgate_shared::ingest::{IngestContext, IngestPolicy, prepare};
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::severity::Severity;
use stormgate_shared::store::memory::MemoryStore;

/// One summary a ticket version must end with.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExpectedJob {
    pub sys_id: String,
    pub number: String,
    pub version: u64,
    pub kind: SummaryKind,
    /// The routing severity it is queued with (the classifier's).
    pub severity: Severity,
    /// The index of the event that queued it among the events given.
    pub event: usize,
}

/// A record ingest accepted (a version newer than any accepted before for its ticket),
/// with the jobs it queued.
#[derive(Debug, Clone)]
pub struct AcceptedRecord {
    pub sys_id: String,
    pub version: u64,
    pub jobs: Vec<ExpectedJob>,
}

/// Every record ingest accepts among `events`, in their order: the real parser,
/// classifier and ingest decide, and a version no newer than one already accepted is
/// a duplicate or stale record, as the store decides.
pub fn accepted_records(events: &[Value]) -> anyhow::Result<Vec<AcceptedRecord>> {
    let classifier = Classifier::embedded()?;
    let store = MemoryStore::new();
    let clock = ManualClock::default();
    let policy = IngestPolicy::default();
    let ctx = IngestContext {
        store: &store,
        clock: &clock,
        classifier: &classifier,
        policy: &policy,
    };
    let mut newest: BTreeMap<String, u64> = BTreeMap::new();
    let mut accepted = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let raw = serde_json::to_vec(event)?;
        // An event the parser rejects is dead-lettered by classify: it owes no summary.
        let Ok(ticket) = parse_event(&raw, &CdcHeaders::default(), ParseLimits::default()) else {
            continue;
        };
        let Ok(record) = prepare(ticket, &ctx, EpochMillis(0)) else {
            continue;
        };
        let sys_id = record.ticket.as_str().to_owned();
        if newest.get(&sys_id).is_some_and(|&v| record.version <= v) {
            continue;
        }
        newest.insert(sys_id.clone(), record.version);
        let jobs = record
            .jobs
            .iter()
            .map(|j| ExpectedJob {
                sys_id: j.id.ticket.as_str().to_owned(),
                number: j.number.clone(),
                version: j.id.version,
                kind: j.id.kind,
                severity: j.severity,
                event: index,
            })
            .collect();
        accepted.push(AcceptedRecord {
            sys_id,
            version: record.version,
            jobs,
        });
    }
    Ok(accepted)
}

/// The jobs ingest queues for the latest version of each ticket among `events` (none
/// when that version queues none, a resolution say).
pub fn expected_jobs(events: &[Value]) -> anyhow::Result<BTreeSet<ExpectedJob>> {
    let mut latest: BTreeMap<String, AcceptedRecord> = BTreeMap::new();
    // Accepted versions only grow: the last one accepted is the latest.
    for record in accepted_records(events)? {
        latest.insert(record.sys_id.clone(), record);
    }
    Ok(latest.into_values().flat_map(|r| r.jobs).collect())
}

/// The verdict, written as JSON next to the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    pub tickets: usize,
    /// Tickets the read API has no summary for.
    pub tickets_without_summary: Vec<String>,
    pub expected_jobs: usize,
    /// "INC… technician: why", for jobs without their final summary.
    pub unsettled_jobs: Vec<String>,
    pub customer_jobs: usize,
    /// Ticket numbers whose customer job no published notice names.
    pub customer_notices_missing: Vec<String>,
    pub notices_published: usize,
    pub http_429: u64,
    pub poisoned_messages: u64,
    pub kafka_batches_lost: u64,
    pub failed_invocations: BTreeMap<String, u64>,
    /// Processes the run started that were still running after it stopped them.
    pub processes_left_running: Vec<String>,
}

impl Verdict {
    /// Every check held.
    pub fn passed(&self) -> bool {
        self.tickets_without_summary.is_empty()
            && self.unsettled_jobs.is_empty()
            && self.customer_notices_missing.is_empty()
            && self.http_429 == 0
            && self.poisoned_messages == 0
            && self.kafka_batches_lost == 0
            && self.processes_left_running.is_empty()
    }

    /// One line per check.
    pub fn lines(&self) -> Vec<String> {
        let mark = |ok: bool| if ok { "ok  " } else { "FAIL" };
        let sample = |v: &[String]| v.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
        vec![
            format!(
                "{} {} tickets, {} without a summary {}",
                mark(self.tickets_without_summary.is_empty()),
                self.tickets,
                self.tickets_without_summary.len(),
                sample(&self.tickets_without_summary)
            ),
            format!(
                "{} {} jobs, {} without their final summary {}",
                mark(self.unsettled_jobs.is_empty()),
                self.expected_jobs,
                self.unsettled_jobs.len(),
                sample(&self.unsettled_jobs)
            ),
            format!(
                "{} {} customer jobs, {} not named by any of the {} notices published {}",
                mark(self.customer_notices_missing.is_empty()),
                self.customer_jobs,
                self.customer_notices_missing.len(),
                self.notices_published,
                sample(&self.customer_notices_missing)
            ),
            format!("{} {} HTTP 429s", mark(self.http_429 == 0), self.http_429),
            format!(
                "{} {} poisoned queue messages, {} Kafka batches lost, failed invocations {:?}",
                mark(self.poisoned_messages == 0 && self.kafka_batches_lost == 0),
                self.poisoned_messages,
                self.kafka_batches_lost,
                self.failed_invocations
            ),
            format!(
                "{} processes left running: {:?}",
                mark(self.processes_left_running.is_empty()),
                self.processes_left_running
            ),
        ]
    }
}

/// Checks `expected` against the read API's answers (`summaries`, by sys_id) and the
/// notices published.
pub fn check_summaries(
    verdict: &mut Verdict,
    expected: &BTreeSet<ExpectedJob>,
    summaries: &BTreeMap<String, Value>,
    notices: &[Value],
) {
    verdict.expected_jobs = expected.len();
    let named: BTreeSet<(String, u64)> = notices
        .iter()
        .flat_map(|n| n["tickets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| Some((t["ticket"].as_str()?.to_owned(), t["version"].as_u64()?)))
        .collect();
    verdict.notices_published = notices.len();
    for job in expected {
        let summary = summaries
            .get(&job.sys_id)
            .map(|s| &s["summaries"][job.kind.as_str()])
            .filter(|s| !s.is_null());
        let why = match summary {
            None => Some("no summary".to_owned()),
            Some(s) if s["version"].as_u64() != Some(job.version) => Some(format!(
                "summary of version {}, expected {}",
                s["version"], job.version
            )),
            Some(s)
                if s["tier"] == serde_json::json!(Tier::Extractive)
                    && s["degraded"] != Value::Bool(true) =>
            {
                Some("only the instant extractive summary".to_owned())
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            verdict
                .unsettled_jobs
                .push(format!("{} {}: {why}", job.number, job.kind));
        }
        if job.kind == SummaryKind::Customer {
            verdict.customer_jobs += 1;
            if !named.contains(&(job.sys_id.clone(), job.version)) {
                verdict.customer_notices_missing.push(job.number.clone());
            }
        }
    }
}
