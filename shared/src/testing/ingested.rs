//! Unit-test records: a ServiceNow event taken through ingest as `classify` stores it, at
//! one fixed instant, for the tests of the stages after ingest (the tier worker, the
//! extractive settlement, the sinks, the roll-ups).

use std::time::Duration;

use crate::classifier::Classifier;
use crate::clock::{EpochMillis, ManualClock};
use crate::event::{CdcHeaders, ParseLimits, parse_event};
use crate::ingest::{IngestContext, IngestPolicy, prepare};
use crate::job::{SummaryKind, Tier};
use crate::store::IngestRecord;
use crate::store::memory::MemoryStore;

pub(crate) const T0: EpochMillis = EpochMillis(1_800_000_000_000);

pub(crate) use crate::snapshot::test_event as event;

/// The record `classify` would store for `event`, keeping only jobs of `kinds`, none
/// of them held (holds are the store's and the lab's concern): they lease at once.
pub(crate) fn record(event: &serde_json::Value, kinds: &[SummaryKind]) -> IngestRecord {
    let ticket = parse_event(
        event.to_string().as_bytes(),
        &CdcHeaders::default(),
        ParseLimits::default(),
    )
    .unwrap();
    let store = MemoryStore::new();
    let clock = ManualClock::starting_at(T0);
    let classifier = Classifier::embedded().unwrap();
    let policy = IngestPolicy {
        coalesce_hold: Duration::ZERO,
        ..IngestPolicy::default()
    };
    let ctx = IngestContext {
        store: &store,
        clock: &clock,
        classifier: &classifier,
        policy: &policy,
    };
    let mut record = prepare(ticket, &ctx, T0).unwrap();
    record.jobs.retain(|j| kinds.contains(&j.id.kind));
    for job in &mut record.jobs {
        job.tier = Tier::Premium;
    }
    record
}
