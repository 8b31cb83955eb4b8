//! Dead-letter re-submission (`stormgate_shared::dead_letters::resubmit`) against both
//! store backends: events are replayed with their CDC headers, entries leave the stream
//! only once their event is stored, and entries that are not the event as delivered are
//! never re-submitted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use serde_json::Value;
use stormgate_shared::classifier::Classifier;
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::dead_letters::{Resubmission, Selection, resubmit};
use stormgate_shared::event::{CdcHeaders, SkipReason};
use stormgate_shared::ingest::{IngestContext, IngestPolicy, RawEvent, classify_batch};
use stormgate_shared::job::{JobId, SummaryKind};
use stormgate_shared::sample_events::{rng, storm_event, sys_id};
use stormgate_shared::store::{DeadLetter, Store};
use stormgate_shared::ticket_id::TicketId;

const NOW: EpochMillis = EpochMillis(1_764_410_400_000);

fn incident(n: u64) -> Value {
    let mut event = storm_event(&mut rng(n), n, 1, 2_000);
    event["state"] = "2".into();
    event
}

fn letter(value: &Value, action: &str, table_name: &str) -> DeadLetter {
    DeadLetter {
        reason: "store refused the record: maintenance".to_owned(),
        raw: value.to_string(),
        headers: CdcHeaders {
            action: Some(action.to_owned()),
            table_name: Some(table_name.to_owned()),
        },
        replayable: true,
        topic: Some("servicenow.incident".to_owned()),
        partition: Some(0),
        offset: Some(42),
        at: NOW,
    }
}

fn ticket(n: u64) -> TicketId {
    sys_id(n).parse().unwrap()
}

struct Rig {
    clock: ManualClock,
    classifier: Classifier,
    policy: IngestPolicy,
}

impl Rig {
    fn new() -> Rig {
        Rig {
            clock: ManualClock::starting_at(NOW),
            classifier: Classifier::embedded().unwrap(),
            policy: IngestPolicy {
                dead_letter_raw_bytes: 1_024,
                ..IngestPolicy::default()
            },
        }
    }

    fn ctx<'a>(&'a self, store: &'a dyn Store) -> IngestContext<'a> {
        IngestContext {
            store,
            clock: &self.clock,
            classifier: &self.classifier,
            policy: &self.policy,
        }
    }
}

async fn a_resubmitted_event_keeps_its_cdc_headers(store: &dyn Store) {
    let rig = Rig::new();
    let deleted = store
        .dead_letter(&letter(&incident(1), "delete", "incident"))
        .await
        .unwrap();
    let change = store
        .dead_letter(&letter(&incident(2), "update", "change_request"))
        .await
        .unwrap();

    let report = resubmit(&rig.ctx(store), &Selection::All, 10)
        .await
        .unwrap();

    assert_eq!(report.entries[0].id, deleted);
    assert_eq!(report.entries[0].resubmission, Resubmission::Accepted);
    let technician = JobId {
        ticket: ticket(1),
        version: 1,
        kind: SummaryKind::Technician,
    };
    assert!(store.ticket_snapshot(&ticket(1)).await.unwrap().is_some());
    assert!(
        !store.job_exists(&technician).await.unwrap(),
        "a delete closes the ticket: no technician summary is queued"
    );
    // Another table's record (dead-lettered before the topic was read as shared) is
    // skipped now, and its entry goes.
    assert_eq!(report.entries[1].id, change);
    assert_eq!(
        report.entries[1].resubmission,
        Resubmission::Skipped {
            reason: SkipReason::OtherTable
        },
        "{report:?}"
    );
    assert_eq!(store.ticket_snapshot(&ticket(2)).await.unwrap(), None);
    assert!(store.dead_letters(10).await.unwrap().is_empty());
}

async fn only_the_selected_entries_are_resubmitted_and_unknown_ids_are_named(store: &dyn Store) {
    let rig = Rig::new();
    let first = store
        .dead_letter(&letter(&incident(1), "update", "incident"))
        .await
        .unwrap();
    let second = store
        .dead_letter(&letter(&incident(2), "update", "incident"))
        .await
        .unwrap();

    let selection = Selection::Ids(vec![second.clone(), "1-99".to_owned()]);
    let report = resubmit(&rig.ctx(store), &selection, 10).await.unwrap();

    assert_eq!(report.resubmitted, 1);
    assert_eq!(report.entries[0].id, second);
    assert_eq!(report.not_found, vec!["1-99".to_owned()]);
    let left: Vec<String> = store
        .dead_letters(10)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(left, vec![first]);

    let again = store
        .dead_letter(&letter(&incident(2), "update", "incident"))
        .await
        .unwrap();
    let report = resubmit(&rig.ctx(store), &Selection::Ids(vec![again]), 10)
        .await
        .unwrap();
    assert_eq!(
        report.duplicate_or_stale, 1,
        "already stored: removed all the same"
    );
    assert_eq!(store.dead_letters(10).await.unwrap().len(), 1);
}

async fn an_event_not_kept_exactly_is_listed_but_never_resubmitted(store: &dyn Store) {
    let rig = Rig::new();
    let mut oversized = incident(3);
    oversized["sys_id"] = Value::Null;
    let not_utf8 = b"{\"sys_id\": \"\xff\"}".to_vec();
    // Both claim to be incidents (CDC header), so both are dead-lettered, not skipped.
    let claimed = CdcHeaders {
        action: None,
        table_name: Some("incident".to_owned()),
    };
    let events = [
        RawEvent {
            value: oversized.to_string().into_bytes(),
            headers: claimed.clone(),
            ..RawEvent::default()
        },
        RawEvent {
            value: not_utf8,
            headers: claimed,
            ..RawEvent::default()
        },
    ];
    let outcome = classify_batch(&events, &rig.ctx(store)).await.unwrap();
    assert_eq!(outcome.dead_lettered, 2);
    let before = store.dead_letters(10).await.unwrap();
    assert!(before[0].1.raw.len() <= 1_024 + 3, "clipped");
    assert!(before.iter().all(|(_, l)| !l.replayable), "{before:?}");

    let report = resubmit(&rig.ctx(store), &Selection::All, 10)
        .await
        .unwrap();

    assert_eq!(report.kept, 2);
    assert_eq!(report.resubmitted, 0);
    assert_eq!(store.dead_letters(10).await.unwrap(), before, "untouched");
}

/// Instantiates every test for both backends.
macro_rules! both_backends {
    ($($test:ident),* $(,)?) => {
        mod memory {
            use stormgate_shared::store::memory::MemoryStore;
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(&MemoryStore::new()).await;
                }
            )*
        }

        mod redis {
            use stormgate_shared::testing::redis_server::RedisServer;
            $(
                #[tokio::test]
                async fn $test() {
                    let server = RedisServer::start().unwrap();
                    let store = server.store("resubmission").unwrap();
                    super::$test(&store).await;
                }
            )*
        }
    };
}

both_backends!(
    a_resubmitted_event_keeps_its_cdc_headers,
    only_the_selected_entries_are_resubmitted_and_unknown_ids_are_named,
    an_event_not_kept_exactly_is_listed_but_never_resubmitted,
);
