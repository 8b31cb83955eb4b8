//! The store's console operations ([`ConsoleStore`]: ticket numbers, the per-severity
//! breakdown, re-summarize), every test run against both backends: the in-memory store
//! and the Redis one on a real `redis-server`.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: failing loudly is the point"
)]

use std::time::Duration;

use stormgate_shared::clock::EpochMillis;
use stormgate_shared::job::{Job, JobId, SummaryKind, Tier};
use stormgate_shared::severity::Severity::{P1, P2, P3};
use stormgate_shared::store::{AgingPolicy, CallClaim, ResummarizeOutcome, Store, StoreLimits};
use stormgate_shared::summary::PutOutcome;
use stormgate_shared::testing::fixtures::{job, record, summary, ticket};
use stormgate_shared::ticket_number::TicketNumber;

const NOW: EpochMillis = EpochMillis(10_000_000);
const LEASE_FOR: Duration = Duration::from_secs(30);

fn aging() -> AgingPolicy {
    AgingPolicy {
        promote_every: Duration::from_secs(60),
    }
}

fn number(n: u64) -> TicketNumber {
    format!("inc{n:07}").parse().unwrap()
}

fn held(mut job: Job, until: u64) -> Job {
    job.hold_until = Some(EpochMillis(until));
    job.coalesce_key = Some("outage".into());
    job
}

async fn a_ticket_is_found_by_its_number_until_it_is_purged(store: &dyn Store) {
    store.ingest(&[record(7, 1, vec![])]).await.unwrap();
    assert_eq!(
        store.ticket_by_number(&number(7)).await.unwrap(),
        Some(ticket(7))
    );
    assert_eq!(store.ticket_by_number(&number(8)).await.unwrap(), None);
    // A later version keeps the number; the purge takes it with the ticket.
    store.ingest(&[record(7, 2, vec![])]).await.unwrap();
    assert_eq!(
        store.ticket_by_number(&number(7)).await.unwrap(),
        Some(ticket(7))
    );
    let later = EpochMillis(3_000).plus(StoreLimits::default().retention);
    store.purge_expired(later, 10).await.unwrap();
    assert_eq!(store.ticket_by_number(&number(7)).await.unwrap(), None);
}

async fn the_breakdown_counts_each_severity_and_shows_its_oldest_jobs(store: &dyn Store) {
    let jobs = vec![
        job(1, 1, SummaryKind::Technician, P1, 1_000),
        job(2, 1, SummaryKind::Technician, P1, 2_000),
        job(3, 1, SummaryKind::Customer, P3, 500),
        held(job(4, 1, SummaryKind::Customer, P3, 700), NOW.0 + 60_000),
        job(5, 1, SummaryKind::Technician, P2, 3_000),
    ];
    store.enqueue(&jobs).await.unwrap();
    // The P2 job is leased: in flight.
    let group = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 1, aging())
        .await
        .unwrap();
    assert_eq!(group.len(), 1);
    let leased_severity = group[0].job.severity;

    let b = store.severity_breakdown(Tier::Premium, 1).await.unwrap();
    let total_pending: u64 = b.pending.iter().sum();
    assert_eq!(total_pending, 3);
    assert_eq!(b.held, [0, 0, 1, 0, 0]);
    assert_eq!(b.leased.iter().sum::<u64>(), 1);
    assert_eq!(b.leased[leased_severity.index()], 1);
    // The oldest pending job of each severity, one asked for.
    let oldest_p3: Vec<_> = b.oldest[P3.index()].iter().map(|j| j.id.clone()).collect();
    assert_eq!(oldest_p3, vec![jobs[2].id.clone()]);
    assert!(b.oldest[P3.index()].iter().all(|j| j.tier == Tier::Premium));
    assert_eq!(
        b.oldest[P1.index()].len().min(1),
        b.pending[P1.index()].min(1) as usize
    );
    // Another tier is empty.
    let standard = store.severity_breakdown(Tier::Standard, 5).await.unwrap();
    assert_eq!(standard.pending, [0; 5]);
    assert!(standard.oldest.iter().all(Vec::is_empty));
}

fn resummarize_job(n: u64, version: u64, kind: SummaryKind) -> Job {
    Job {
        severity: P1,
        enqueued_at: NOW,
        deadline: NOW.plus(Duration::from_secs(30)),
        ..job(n, version, kind, P1, NOW.0)
    }
}

fn id(n: u64, version: u64, kind: SummaryKind) -> JobId {
    JobId {
        ticket: ticket(n),
        version,
        kind,
    }
}

async fn resummarize_reopens_a_fallback_so_the_llm_summary_replaces_it(store: &dyn Store) {
    let old = job(9, 1, SummaryKind::Technician, P3, 1_000);
    store
        .ingest(&[record(9, 1, vec![old.clone()])])
        .await
        .unwrap();
    // The job was settled with the degraded fallback: the version's call is done.
    let mut fallback = summary(9, 1, SummaryKind::Technician, Tier::Extractive);
    fallback.degraded = true;
    assert_eq!(
        store.put_summary(&fallback).await.unwrap(),
        PutOutcome::Stored
    );
    let lease = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 1, aging())
        .await
        .unwrap();
    assert!(store.ack(&lease[0]).await.unwrap());
    let claims = store
        .claim_calls(
            &[id(9, 1, SummaryKind::Technician)],
            "w1",
            NOW,
            NOW.plus(LEASE_FOR),
        )
        .await
        .unwrap();
    assert_eq!(claims, vec![CallClaim::Done]);

    let again = resummarize_job(9, 1, SummaryKind::Technician);
    let outcome = store
        .resummarize(std::slice::from_ref(&again))
        .await
        .unwrap();
    assert_eq!(outcome, vec![ResummarizeOutcome::Queued]);
    // It is at the head of premium, and its call can now be claimed.
    let leased = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 1, aging())
        .await
        .unwrap();
    assert_eq!(leased[0].job, again);
    let claims = store
        .claim_calls(
            std::slice::from_ref(&again.id),
            "w2",
            NOW,
            NOW.plus(LEASE_FOR),
        )
        .await
        .unwrap();
    assert_eq!(claims, vec![CallClaim::Claimed]);
    // The readers still see the fallback until the LLM summary replaces it.
    let stored = store
        .summary(&ticket(9), SummaryKind::Technician)
        .await
        .unwrap();
    assert!(stored.unwrap().degraded);
    let llm = summary(9, 1, SummaryKind::Technician, Tier::Premium);
    assert_eq!(store.put_summary(&llm).await.unwrap(), PutOutcome::Stored);
    assert_eq!(
        store
            .summary(&ticket(9), SummaryKind::Technician)
            .await
            .unwrap(),
        Some(llm)
    );
    // A fallback arriving late does not undo it.
    assert_eq!(
        store.put_summary(&fallback).await.unwrap(),
        PutOutcome::Superseded
    );
}

async fn resummarize_leaves_llm_summaries_calls_in_flight_and_old_versions_alone(
    store: &dyn Store,
) {
    store
        .ingest(&[
            record(1, 1, vec![]),
            record(2, 1, vec![job(2, 1, SummaryKind::Technician, P2, 1_000)]),
            record(3, 2, vec![]),
        ])
        .await
        .unwrap();
    store
        .put_summary(&summary(1, 1, SummaryKind::Technician, Tier::Standard))
        .await
        .unwrap();
    let leased = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 1, aging())
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    let outcomes = store
        .resummarize(&[
            resummarize_job(1, 1, SummaryKind::Technician),
            resummarize_job(2, 1, SummaryKind::Technician),
            resummarize_job(3, 1, SummaryKind::Technician),
            resummarize_job(404, 1, SummaryKind::Technician),
        ])
        .await
        .unwrap();
    assert_eq!(
        outcomes,
        vec![
            ResummarizeOutcome::AlreadyLlm,
            ResummarizeOutcome::InFlight,
            ResummarizeOutcome::Stale,
            ResummarizeOutcome::Stale,
        ]
    );
    assert!(
        !store
            .job_exists(&id(1, 1, SummaryKind::Technician))
            .await
            .unwrap()
    );
    assert!(
        !store
            .job_exists(&id(3, 1, SummaryKind::Technician))
            .await
            .unwrap()
    );
}

async fn resummarize_moves_a_waiting_job_to_the_head(store: &dyn Store) {
    let waiting = job(5, 1, SummaryKind::Customer, P3, 1_000);
    // Queued just before: as P2 it has not waited long enough to go before a P1.
    let other = job(6, 1, SummaryKind::Technician, P2, NOW.0 - 1_000);
    store
        .ingest(&[
            record(5, 1, vec![waiting.clone()]),
            record(6, 1, vec![other.clone()]),
        ])
        .await
        .unwrap();
    let again = resummarize_job(5, 1, SummaryKind::Customer);
    assert_eq!(
        store
            .resummarize(std::slice::from_ref(&again))
            .await
            .unwrap(),
        vec![ResummarizeOutcome::Queued]
    );
    let first = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 1, aging())
        .await
        .unwrap();
    assert_eq!(first[0].job, again, "the re-queued job is served as a P1");
    let b = store.severity_breakdown(Tier::Premium, 10).await.unwrap();
    assert_eq!(
        b.pending.iter().sum::<u64>(),
        1,
        "the old job was taken out"
    );
}

macro_rules! conformance {
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
                    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
                    let store = server.store("conformance").unwrap_or_else(|e| panic!("{e}"));
                    super::$test(&store).await;
                }
            )*
        }
    };
}

conformance!(
    a_ticket_is_found_by_its_number_until_it_is_purged,
    the_breakdown_counts_each_severity_and_shows_its_oldest_jobs,
    resummarize_reopens_a_fallback_so_the_llm_summary_replaces_it,
    resummarize_leaves_llm_summaries_calls_in_flight_and_old_versions_alone,
    resummarize_moves_a_waiting_job_to_the_head,
);
