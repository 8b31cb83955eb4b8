//! What only the Redis backend has to prove: it connects lazily, keeps namespaces
//! apart under one hash tag, ingests a batch in one round trip, and survives a server
//! that forgot its scripts. Against a real `redis-server` each test starts itself.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: failing loudly is the point"
)]

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::severity::Severity::{P1, P2};
use stormgate_shared::store::redis::RedisStore;
use stormgate_shared::store::{AgingPolicy, IngestOutcome, Store, StoreError};
use stormgate_shared::testing::fixtures::{record, technician_job, ticket};
use stormgate_shared::testing::redis_server::RedisServer;

const AGING: AgingPolicy = AgingPolicy {
    promote_every: Duration::from_secs(60),
};

fn start() -> RedisServer {
    RedisServer::start().unwrap_or_else(|e| panic!("{e}"))
}

async fn raw_connection(server: &RedisServer) -> MultiplexedConnection {
    let client = redis::Client::open(server.url()).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// `calls` of one command from `INFO commandstats`.
async fn command_calls(connection: &mut MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

#[tokio::test]
async fn store_is_built_without_redis_and_connects_once_redis_is_up() {
    let port = RedisServer::free_port().unwrap();
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let store = RedisStore::new(client, "lazy".parse().unwrap());

    let before = store.ingest(&[record(1, 1, vec![])]).await;
    assert!(
        matches!(before, Err(StoreError::Unavailable(_))),
        "{before:?}"
    );

    let _server = RedisServer::start_on(port).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        store.ingest(&[record(1, 1, vec![])]).await.unwrap(),
        vec![IngestOutcome::Accepted]
    );
}

#[tokio::test]
async fn debug_output_never_shows_credentials() {
    let client = redis::Client::open("redis://stormgate:hunter2@127.0.0.1:1/").unwrap();
    let store = RedisStore::new(client, "tenant".parse().unwrap());
    let shown = format!("{store:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("{tenant}"), "{shown}");
}

#[tokio::test]
async fn namespaces_keep_tenants_apart_under_their_hash_tag() {
    let server = start();
    let a = server.store("tenant-a").unwrap();
    let b = server.store("tenant-b").unwrap();
    a.ingest(&[record(1, 1, vec![technician_job(1, P1, 1_000)])])
        .await
        .unwrap();

    assert_eq!(
        b.ingest(&[record(1, 1, vec![])]).await.unwrap(),
        vec![IngestOutcome::Accepted]
    );
    assert_eq!(b.queue_stats(Tier::Premium).await.unwrap().pending, 0);
    assert_eq!(a.queue_stats(Tier::Premium).await.unwrap().pending, 1);

    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut raw_connection(&server).await)
        .await
        .unwrap();
    assert!(!keys.is_empty());
    for key in keys {
        assert!(
            key.starts_with("{tenant-a}:") || key.starts_with("{tenant-b}:"),
            "{key}"
        );
    }
}

#[tokio::test]
async fn a_batch_ingest_costs_one_round_trip() {
    let server = start();
    let store = server.store("batch").unwrap();
    store.queue_stats(Tier::Premium).await.unwrap();
    let mut observer = raw_connection(&server).await;
    let evalsha_before = command_calls(&mut observer, "evalsha").await;
    let trips_before = store.round_trips();

    let batch: Vec<_> = (0..100)
        .map(|n| record(n, 1, vec![technician_job(n, P2, 1_000 + n)]))
        .collect();
    let outcomes = store.ingest(&batch).await.unwrap();

    assert_eq!(outcomes, vec![IngestOutcome::Accepted; 100]);
    assert_eq!(store.round_trips() - trips_before, 1);
    assert_eq!(
        command_calls(&mut observer, "evalsha").await - evalsha_before,
        100
    );
    assert_eq!(store.queue_stats(Tier::Premium).await.unwrap().pending, 100);
}

#[tokio::test]
async fn scripts_are_loaded_again_when_the_server_forgot_them() {
    let server = start();
    let store = server.store("reload").unwrap();
    store
        .ingest(&[record(1, 1, vec![technician_job(1, P1, 1_000)])])
        .await
        .unwrap();

    let mut admin = raw_connection(&server).await;
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async::<()>(&mut admin)
        .await
        .unwrap();
    let outcomes = store
        .ingest(&[record(2, 1, vec![technician_job(2, P1, 2_000)])])
        .await
        .unwrap();
    assert_eq!(outcomes, vec![IngestOutcome::Accepted]);

    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async::<()>(&mut admin)
        .await
        .unwrap();
    let group = store
        .lease(
            Tier::Premium,
            EpochMillis(10_000),
            Duration::from_secs(30),
            1,
            AGING,
        )
        .await
        .unwrap();
    assert_eq!(group[0].job.id.ticket, ticket(1));
}

#[tokio::test]
async fn a_foreign_value_at_a_store_key_is_reported_corrupt_not_unavailable() {
    let server = start();
    let store = server.store("foreign").unwrap();
    let mut admin = raw_connection(&server).await;
    let ticket_key = format!("{{foreign}}:ticket:{}", ticket(1));
    let summary_key = format!("{{foreign}}:summary:{}", ticket(2));
    redis::cmd("SET")
        .arg(&ticket_key)
        .arg("not a hash")
        .query_async::<()>(&mut admin)
        .await
        .unwrap();
    redis::cmd("SET")
        .arg(&summary_key)
        .arg("not a hash")
        .query_async::<()>(&mut admin)
        .await
        .unwrap();

    let ingested = store.ingest(&[record(1, 1, vec![])]).await;
    assert!(
        matches!(ingested, Err(StoreError::Corrupt(_))),
        "{ingested:?}"
    );
    let summary =
        stormgate_shared::testing::fixtures::summary(2, 1, SummaryKind::Technician, Tier::Premium);
    let put = store.put_summary(&summary).await;
    assert!(matches!(put, Err(StoreError::Corrupt(_))), "{put:?}");
    let read = store.summary(&ticket(2), SummaryKind::Technician).await;
    assert!(matches!(read, Err(StoreError::Corrupt(_))), "{read:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_workers_on_separate_connections_never_share_a_job() {
    let server = start();
    let producer = server.store("fleet").unwrap();
    let jobs: Vec<_> = (1..=600).map(|n| technician_job(n, P2, n)).collect();
    for chunk in jobs.chunks(100) {
        producer.enqueue(chunk).await.unwrap();
    }

    let mut workers = Vec::new();
    for _ in 0..6 {
        let store = server.store("fleet").unwrap();
        workers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            loop {
                let group = store
                    .lease(
                        Tier::Premium,
                        EpochMillis(10_000),
                        Duration::from_secs(30),
                        3,
                        AGING,
                    )
                    .await
                    .unwrap();
                if group.is_empty() {
                    return acked;
                }
                for lease in group {
                    assert!(store.ack(&lease).await.unwrap(), "a fresh lease must ack");
                    acked.push(lease.job.id.to_string());
                }
            }
        }));
    }
    let mut all = Vec::new();
    for worker in workers {
        all.extend(worker.await.unwrap());
    }

    let distinct: std::collections::BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), 600, "every job acked once");
    assert_eq!(distinct.len(), 600, "no job served twice");
}

/// Every key in Redis, with its remaining time to live in ms (-1: none).
async fn ttls(connection: &mut MultiplexedConnection) -> Vec<(String, i64)> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(connection)
        .await
        .unwrap();
    let mut out = Vec::new();
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(connection)
            .await
            .unwrap();
        out.push((key, ttl));
    }
    out.sort();
    out
}

/// A ticket's keys (snapshot, summaries, its job set) and its region's index expire by
/// themselves: nothing a ticket leaves in Redis lives for ever, even where no purge runs.
#[tokio::test]
async fn every_key_an_ingested_ticket_leaves_expires_by_itself() {
    let server = start();
    let store = server.store("ttl").unwrap();
    let mut connection = raw_connection(&server).await;
    let mut r = record(1, 1, vec![technician_job(1, P1, 1_000)]);
    r.region = Some("emea".to_owned());
    store.ingest(&[r]).await.unwrap();
    let mut llm =
        stormgate_shared::testing::fixtures::summary(1, 1, SummaryKind::Technician, Tier::Premium);
    llm.model = "gpt".to_owned();
    store.put_summary(&llm).await.unwrap();
    // A summary hash written when the ticket's keys are gone gets an expiry too.
    store
        .put_summary(&stormgate_shared::testing::fixtures::summary(
            2,
            1,
            SummaryKind::Customer,
            Tier::Standard,
        ))
        .await
        .unwrap();

    let bound = (14 + 1) * 24 * 3600 * 1000;
    let per_ticket = |key: &str| {
        ["ticket:", "summary:", "ticket_jobs:", "region_tickets:"]
            .iter()
            .any(|part| key.contains(part))
    };
    let keys = ttls(&mut connection).await;
    let ticket_keys: Vec<_> = keys.iter().filter(|(k, _)| per_ticket(k)).collect();
    assert_eq!(ticket_keys.len(), 5, "{keys:?}");
    for (key, ttl) in ticket_keys {
        assert!(
            *ttl > 0 && *ttl <= bound,
            "{key} expires in {ttl} ms (at most {bound} expected)"
        );
    }
}

/// The dead-letter stream keeps at most its cap (5,000 by default): one more entry
/// trims the oldest, and the trimmed ones are counted.
#[tokio::test]
async fn the_dead_letter_stream_is_capped_and_counts_what_it_trimmed() {
    let server = start();
    let store = server.store("capped").unwrap();
    let mut connection = raw_connection(&server).await;
    let letter = |n: u64| stormgate_shared::store::DeadLetter {
        reason: format!("bad {n}"),
        raw: "{}".to_owned(),
        headers: Default::default(),
        replayable: true,
        topic: Some("t".to_owned()),
        partition: Some(0),
        offset: Some(n as i64),
        at: EpochMillis(n),
    };
    for n in 0..5_010 {
        store.dead_letter(&letter(n)).await.unwrap();
    }
    let length: u64 = redis::cmd("XLEN")
        .arg("{capped}:dead_letters")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(length, 5_000);
    let oldest = store.dead_letters(1).await.unwrap();
    assert_eq!(oldest[0].1.offset, Some(10), "the oldest ten went");
    let trimmed: u64 = redis::cmd("GET")
        .arg("{capped}:dead_letters_trimmed")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(trimmed, 10);
}
