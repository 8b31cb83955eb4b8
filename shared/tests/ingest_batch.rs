//! A host-shaped Kafka batch through `classify_batch` into a real store: mixed valid,
//! duplicate, stale, superseding, closed, malformed and oversized events.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::time::Duration;

use serde_json::Value;
use stormgate_shared::classifier::Classifier;
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::event::CdcHeaders;
use stormgate_shared::ingest::IngestError;
use stormgate_shared::ingest::{
    BatchOutcome, IngestContext, IngestPolicy, RawEvent, SkippedRecords, classify_batch,
};
use stormgate_shared::job::{JobId, SummaryKind, Tier};
use stormgate_shared::sample_events::{rng, storm_event, sys_id};
use stormgate_shared::snapshot::TicketSnapshot;
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::store::redis::RedisStore;
use stormgate_shared::store::{AgingPolicy, Store};
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::ticket_id::TicketId;

const TOPIC: &str = "servicenow.incident";

fn raw(value: &Value, offset: i64) -> RawEvent {
    raw_bytes(value.to_string().into_bytes(), offset)
}

fn raw_bytes(value: Vec<u8>, offset: i64) -> RawEvent {
    RawEvent {
        value,
        headers: CdcHeaders {
            action: Some("update".into()),
            table_name: Some("incident".into()),
        },
        topic: Some(TOPIC.into()),
        partition: Some(3),
        offset: Some(offset),
    }
}

fn id(n: u64) -> TicketId {
    sys_id(n).parse().unwrap()
}

struct Batch {
    events: Vec<RawEvent>,
}

/// The batch and what it must do: tickets 1..=5 at v3; 1 v3 again (duplicate); 2 v1 (stale);
/// 3 v4 (supersedes); 6 closed; 7 with a 200 KB log (bounded, accepted); three rejects;
/// another table's record, skipped.
fn mixed_batch() -> Batch {
    let mut r = rng(42);
    let mut events = Vec::new();
    let mut v3 = Vec::new();
    for n in 1..=5u64 {
        let e = storm_event(&mut r, n, 3, 8 * 1024 + (n as usize) * 2_000);
        events.push(raw(&e, 100 + n as i64));
        v3.push(e);
    }
    events.push(raw(&v3[0], 200));
    events.push(raw(&storm_event(&mut r, 2, 1, 9_000), 201));
    events.push(raw(&storm_event(&mut r, 3, 4, 12_000), 202));
    let mut closed = storm_event(&mut r, 6, 9, 8_000);
    closed["state"] = "7".into();
    events.push(raw(&closed, 203));
    events.push(raw(&storm_event(&mut r, 7, 1, 200 * 1024), 204));
    // Rejects: not JSON, a missing required field, over the size limit; and another
    // table's record (the topic is shared), skipped.
    events.push(raw_bytes(b"{\"sys_id\": \"abc\", oops".to_vec(), 300));
    let mut no_version = storm_event(&mut r, 8, 1, 8_000);
    no_version.as_object_mut().unwrap().remove("sys_mod_count");
    events.push(raw(&no_version, 301));
    let mut other_table = raw(&storm_event(&mut r, 9, 1, 8_000), 302);
    other_table.headers.table_name = Some("change_request".into());
    events.push(other_table);
    events.push(raw(&storm_event(&mut r, 10, 1, 600 * 1024), 303));
    Batch { events }
}

fn policy() -> IngestPolicy {
    let mut policy = IngestPolicy::default();
    policy.parse_limits.max_event_bytes = 512 * 1024;
    policy
}

async fn ingest(store: &dyn Store, batch: &Batch) -> Result<BatchOutcome, IngestError> {
    let clock = ManualClock::starting_at(EpochMillis(1_764_410_400_000));
    let classifier = Classifier::embedded().unwrap();
    let policy = policy();
    let ctx = IngestContext {
        store,
        clock: &clock,
        classifier: &classifier,
        policy: &policy,
    };
    classify_batch(&batch.events, &ctx).await
}

async fn run(store: &dyn Store, batch: &Batch) -> BatchOutcome {
    ingest(store, batch).await.unwrap()
}

async fn assert_mixed_batch_outcome(store: &dyn Store) {
    let batch = mixed_batch();
    let outcome = run(store, &batch).await;
    assert_eq!(
        outcome,
        BatchOutcome {
            accepted: 8,
            duplicate_or_stale: 2,
            dead_lettered: 3,
            skipped: SkippedRecords {
                other_table: 1,
                ..SkippedRecords::default()
            },
        }
    );

    // One instant technician summary per accepted ticket, at its latest version.
    for (n, version) in [(1, 3), (2, 3), (3, 4), (4, 3), (5, 3), (6, 9), (7, 1)] {
        let s = store
            .summary(&id(n), SummaryKind::Technician)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("ticket {n}"));
        assert_eq!(s.version, version, "ticket {n}");
        assert_eq!(s.tier, Tier::Extractive);
        assert!(s.text.starts_with(&format!("INC{n:07} (P")), "{}", s.text);
        assert!(s.text.len() < 2_000);
    }

    // Superseded and closed work is not queued; current work is.
    assert!(
        store
            .job_exists(&JobId {
                ticket: id(1),
                version: 3,
                kind: SummaryKind::Technician
            })
            .await
            .unwrap()
    );
    assert!(
        !store
            .job_exists(&JobId {
                ticket: id(3),
                version: 3,
                kind: SummaryKind::Technician
            })
            .await
            .unwrap()
    );
    assert!(
        store
            .job_exists(&JobId {
                ticket: id(3),
                version: 4,
                kind: SummaryKind::Technician
            })
            .await
            .unwrap()
    );
    assert!(
        !store
            .job_exists(&JobId {
                ticket: id(6),
                version: 9,
                kind: SummaryKind::Technician
            })
            .await
            .unwrap()
    );

    // The oversized log was bounded, and the bounding is visible in the summary metadata.
    let big = store
        .summary(&id(7), SummaryKind::Technician)
        .await
        .unwrap()
        .unwrap();
    let bounding = &big.input["bounding"];
    assert!(
        bounding["bytes_in"].as_u64().unwrap() > 200 * 1024,
        "{bounding}"
    );
    assert!(
        bounding["repeats_collapsed"].as_u64().unwrap() > 1_000,
        "{bounding}"
    );
    assert!(
        bounding["bytes_out"].as_u64().unwrap() < 8 * 1024,
        "{bounding}"
    );
    let (_, snap) = store.ticket_snapshot(&id(7)).await.unwrap().unwrap();
    let snap: TicketSnapshot = serde_json::from_value(snap).unwrap();
    assert!(snap.alarm_log.report.bytes_out <= policy().bounding.max_bytes);
    assert_eq!(
        snap.alarm_log.render().len(),
        snap.alarm_log.report.bytes_out
    );

    // Dead letters carry the reason and the Kafka coordinates.
    let letters = store.dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 3);
    let reason_at = |offset: i64| {
        letters
            .iter()
            .find(|(_, d)| d.offset == Some(offset))
            .map(|(_, d)| d.reason.clone())
            .unwrap_or_default()
    };
    assert!(reason_at(300).contains("not JSON"), "{}", reason_at(300));
    assert!(
        reason_at(301).contains("sys_mod_count"),
        "{}",
        reason_at(301)
    );
    assert_eq!(reason_at(302), "", "another table's record is skipped");
    assert!(reason_at(303).contains("exceeds"), "{}", reason_at(303));
    assert!(
        letters
            .iter()
            .all(|(_, d)| d.topic.as_deref() == Some(TOPIC) && d.partition == Some(3))
    );
    let oversized = letters.iter().find(|(_, d)| d.offset == Some(303)).unwrap();
    assert!(oversized.1.raw.len() <= 64 * 1024);
    assert!(!oversized.1.replayable, "a clipped value is not the event");
    let missing = letters.iter().find(|(_, d)| d.offset == Some(301)).unwrap();
    assert_eq!(
        missing.1.headers.table_name.as_deref(),
        Some("incident"),
        "re-submission must see the headers the event came with"
    );
    assert!(missing.1.replayable);

    // Redelivery of the same batch changes nothing but the dead-letter stream.
    let again = run(store, &batch).await;
    assert_eq!(
        again,
        BatchOutcome {
            accepted: 0,
            duplicate_or_stale: 10,
            dead_lettered: 3,
            skipped: SkippedRecords {
                other_table: 1,
                ..SkippedRecords::default()
            },
        }
    );
}

#[tokio::test]
async fn mixed_batch_counts_summaries_jobs_and_dead_letters_in_memory() {
    assert_mixed_batch_outcome(&MemoryStore::new()).await;
}

#[tokio::test]
async fn mixed_batch_counts_summaries_jobs_and_dead_letters_in_redis() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let store = server.store("ingest-test").unwrap();
    assert_mixed_batch_outcome(&store).await;
}

#[tokio::test]
async fn batch_fails_only_when_redis_is_unreachable() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let url = server.url();
    drop(server); // nothing listens on the port any more
    let store = RedisStore::new(redis::Client::open(url).unwrap(), "down".parse().unwrap());
    let result = ingest(&store, &mixed_batch()).await;
    assert!(
        matches!(result, Err(IngestError::StoreUnavailable(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn severe_customer_impacting_tickets_get_a_premium_technician_and_a_standard_customer_job() {
    let store = MemoryStore::new();
    let mut r = rng(7);
    let mut e = storm_event(&mut r, 11, 1, 10_000);
    e["priority"] = "1".into();
    e["u_customers_affected"] = "2500".into();
    let batch = Batch {
        events: vec![raw(&e, 1)],
    };
    let outcome = run(&store, &batch).await;
    assert_eq!(outcome.accepted, 1);
    let customer = JobId {
        ticket: id(11),
        version: 1,
        kind: SummaryKind::Customer,
    };
    assert!(store.job_exists(&customer).await.unwrap());
    let premium = store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!(
        (
            premium.pending,
            premium.pending_by_severity[0],
            premium.held
        ),
        (1, 1, 0),
        "a P1 technician summary is never held"
    );
    // The ticket has a CI, so its customer notice may share a call with its outage's:
    // it is held a quarter of its five-minute wait before it may lead one.
    let standard = store.queue_stats(Tier::Standard).await.unwrap();
    assert_eq!((standard.pending, standard.held), (0, 1));
    let customer_lease = store
        .lease(
            Tier::Standard,
            EpochMillis(u64::MAX / 2),
            Duration::from_secs(60),
            1,
            AgingPolicy {
                promote_every: Duration::from_secs(300),
            },
        )
        .await
        .unwrap();
    assert_eq!(customer_lease[0].job.id, customer);
    let queued_at = customer_lease[0].job.enqueued_at;
    assert_eq!(
        customer_lease[0].job.hold_until,
        Some(queued_at.plus(Duration::from_secs(75)))
    );
}

fn five_tickets() -> Batch {
    let mut r = rng(11);
    let events = (1..=5u64)
        .map(|n| raw(&storm_event(&mut r, n, 3, 8 * 1024), 100 + n as i64))
        .collect();
    Batch { events }
}

async fn admin(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(server.url()).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

#[tokio::test]
async fn records_the_store_refuses_are_dead_lettered_and_the_stored_ones_count_as_accepted() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let store = server.store("refuse").unwrap();
    // A foreign value at ticket 3's key: its ingest script fails, the others run.
    redis::cmd("SET")
        .arg(format!("{{refuse}}:ticket:{}", id(3)))
        .arg("not a hash")
        .query_async::<()>(&mut admin(&server).await)
        .await
        .unwrap();
    let batch = five_tickets();

    let outcome = run(&store, &batch).await;

    assert_eq!(
        outcome,
        BatchOutcome {
            accepted: 4,
            duplicate_or_stale: 0,
            dead_lettered: 1,
            ..BatchOutcome::default()
        }
    );
    for n in [1, 2, 4, 5] {
        let (version, _) = store.ticket_snapshot(&id(n)).await.unwrap().unwrap();
        assert_eq!(version, 3, "ticket {n} was stored");
    }
    let letters = store.dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let (_, letter) = &letters[0];
    assert!(
        letter.reason.starts_with("store refused the record"),
        "{}",
        letter.reason
    );
    assert_eq!(letter.offset, Some(103));
    assert_eq!(letter.partition, Some(3));
    assert_eq!(letter.topic.as_deref(), Some(TOPIC));
    assert_eq!(letter.raw.as_bytes(), batch.events[2].value.as_slice());
    assert!(letter.replayable);

    // Delivered again once the foreign value is gone, the four stored ones are
    // duplicates and the refused one is accepted.
    redis::cmd("DEL")
        .arg(format!("{{refuse}}:ticket:{}", id(3)))
        .query_async::<()>(&mut admin(&server).await)
        .await
        .unwrap();
    assert_eq!(
        run(&store, &batch).await,
        BatchOutcome {
            accepted: 1,
            duplicate_or_stale: 4,
            dead_lettered: 0,
            ..BatchOutcome::default()
        }
    );
}

#[tokio::test]
async fn a_batch_the_store_refuses_whole_for_lack_of_memory_fails_the_invocation() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let store = server.store("full").unwrap();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1")
        .query_async::<()>(&mut admin(&server).await)
        .await
        .unwrap();

    let result = ingest(&store, &five_tickets()).await;

    assert!(
        matches!(result, Err(IngestError::StoreUnavailable(_))),
        "{result:?}"
    );
    assert!(store.ticket_snapshot(&id(1)).await.unwrap().is_none());
}
