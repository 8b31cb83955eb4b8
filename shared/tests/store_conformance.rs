//! The store conformance suite: every test is written once against `&dyn Store` and
//! runs against both backends — the in-memory store, and the Redis store on a real
//! `redis-server` each test starts on a free port (and stops).

// The shared test bodies are plain functions the generated #[test]s call; a failed
// store call is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: failing loudly is the point"
)]

use std::time::Duration;

use serde_json::json;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::event::CdcHeaders;
use stormgate_shared::job::{Job, JobId, SummaryKind, Tier};
use stormgate_shared::region_key::RegionKey;
use stormgate_shared::region_rollup::RegionRollup;
use stormgate_shared::severity::Severity::{self, P1, P2, P3, P4, P5};
use stormgate_shared::store::{
    AgingPolicy, CallClaim, DeadLetter, IngestOutcome, IngestRecord, Lease, OwedStats, PurgeReport,
    QueueStats, REGION_INDEX_CAP, SnapshotJson, Store, StoreLimits,
};
use stormgate_shared::summary::PutOutcome;
use stormgate_shared::testing::fixtures::{job, record, summary, technician_job, ticket};
use stormgate_shared::ticket_id::TicketId;
use stormgate_shared::tokens::Tokens;

const PROMOTE_EVERY: Duration = Duration::from_secs(60);
const LEASE_FOR: Duration = Duration::from_secs(30);
const NOW: EpochMillis = EpochMillis(10_000_000);

fn aging() -> AgingPolicy {
    AgingPolicy {
        promote_every: PROMOTE_EVERY,
    }
}

fn in_tier(mut job: Job, tier: Tier) -> Job {
    job.tier = tier;
    job
}

fn keyed(mut job: Job, key: &str) -> Job {
    job.coalesce_key = Some(key.to_owned());
    job
}

async fn lease_one(store: &dyn Store, tier: Tier) -> Option<Lease> {
    let mut group = store.lease(tier, NOW, LEASE_FOR, 1, aging()).await.unwrap();
    assert!(group.len() <= 1);
    group.pop()
}

/// Leases one job at a time until the tier is empty; the ids in order served.
async fn drain(store: &dyn Store, tier: Tier, policy: AgingPolicy) -> Vec<String> {
    let mut served = Vec::new();
    loop {
        let group = store.lease(tier, NOW, LEASE_FOR, 1, policy).await.unwrap();
        let Some(lease) = group.first() else {
            return served;
        };
        served.push(lease.job.id.to_string());
        assert!(store.ack(lease).await.unwrap());
    }
}

fn id(job: &Job) -> String {
    job.id.to_string()
}

fn held_until(mut job: Job, at: EpochMillis) -> Job {
    job.hold_until = Some(at);
    job
}

fn ids(group: &[Lease]) -> Vec<String> {
    group.iter().map(|l| l.job.id.to_string()).collect()
}

async fn ingest_is_idempotent_per_ticket_version(store: &dyn Store) {
    let first = record(1, 2, vec![job(1, 2, SummaryKind::Technician, P3, 1_000)]);
    assert_eq!(
        store.ingest(std::slice::from_ref(&first)).await.unwrap(),
        vec![IngestOutcome::Accepted]
    );

    let customer_v2 = job(1, 2, SummaryKind::Customer, P3, 2_000);
    let mut same = record(1, 2, vec![customer_v2.clone()]);
    same.snapshot = SnapshotJson::from_value(&json!({ "changed": true }));
    same.region = Some("emea".into());
    let customer_v1 = job(1, 1, SummaryKind::Customer, P3, 3_000);
    let mut older = record(1, 1, vec![customer_v1.clone()]);
    older.snapshot = SnapshotJson::from_value(&json!({ "older": true }));
    let outcomes = store.ingest(&[same, older]).await.unwrap();

    assert_eq!(
        outcomes,
        vec![IngestOutcome::Duplicate, IngestOutcome::Stale]
    );
    assert_eq!(
        store.ticket_snapshot(&ticket(1)).await.unwrap(),
        Some((2, first.snapshot.to_value().unwrap()))
    );
    assert!(!store.job_exists(&customer_v2.id).await.unwrap());
    assert!(!store.job_exists(&customer_v1.id).await.unwrap());
    assert_eq!(store.queue_stats(Tier::Premium).await.unwrap().pending, 1);
    assert!(store.take_due_regions().await.unwrap().is_empty());
}

async fn ingest_outcomes_follow_input_order_within_a_batch(store: &dyn Store) {
    let batch = [
        record(1, 1, vec![]),
        record(1, 1, vec![]),
        record(2, 5, vec![]),
        record(2, 4, vec![]),
        record(1, 3, vec![]),
    ];
    let outcomes = store.ingest(&batch).await.unwrap();
    use IngestOutcome::{Accepted, Duplicate, Stale};
    assert_eq!(
        outcomes,
        vec![Accepted, Duplicate, Accepted, Stale, Accepted]
    );
    assert_eq!(
        store
            .ticket_snapshot(&ticket(1))
            .await
            .unwrap()
            .map(|(v, _)| v),
        Some(3)
    );
    assert_eq!(
        store
            .ticket_snapshot(&ticket(2))
            .await
            .unwrap()
            .map(|(v, _)| v),
        Some(5)
    );
    assert!(store.ingest(&[]).await.unwrap().is_empty());
}

async fn ingest_of_a_newer_version_cancels_pending_older_work(store: &dyn Store) {
    let tech_v1 = job(1, 1, SummaryKind::Technician, P2, 1_000);
    let customer_v1 = job(1, 1, SummaryKind::Customer, P2, 1_000);
    let other_ticket = job(2, 1, SummaryKind::Technician, P2, 1_000);
    store
        .ingest(&[
            record(1, 1, vec![tech_v1.clone(), customer_v1.clone()]),
            record(2, 1, vec![other_ticket.clone()]),
        ])
        .await
        .unwrap();

    let tech_v2 = job(1, 2, SummaryKind::Technician, P2, 2_000);
    store
        .ingest(&[record(1, 2, vec![tech_v2.clone()])])
        .await
        .unwrap();

    assert!(!store.job_exists(&tech_v1.id).await.unwrap());
    assert!(!store.job_exists(&customer_v1.id).await.unwrap());
    assert!(store.job_exists(&tech_v2.id).await.unwrap());
    assert!(store.job_exists(&other_ticket.id).await.unwrap());
    assert_eq!(
        drain(store, Tier::Premium, aging()).await,
        vec![id(&other_ticket), id(&tech_v2)]
    );
}

async fn closed_ticket_queues_no_technician_job(store: &dyn Store) {
    let tech_v1 = job(1, 1, SummaryKind::Technician, P1, 1_000);
    store
        .ingest(&[record(1, 1, vec![tech_v1.clone()])])
        .await
        .unwrap();

    let tech_v2 = job(1, 2, SummaryKind::Technician, P1, 2_000);
    let customer_v2 = job(1, 2, SummaryKind::Customer, P1, 2_000);
    let mut closing = record(1, 2, vec![tech_v2.clone(), customer_v2.clone()]);
    closing.closed = true;
    assert_eq!(
        store.ingest(&[closing]).await.unwrap(),
        vec![IngestOutcome::Accepted]
    );

    assert!(!store.job_exists(&tech_v1.id).await.unwrap());
    assert!(!store.job_exists(&tech_v2.id).await.unwrap());
    assert!(store.job_exists(&customer_v2.id).await.unwrap());
}

async fn ingest_keeps_a_better_summary_than_the_instant_one(store: &dyn Store) {
    let llm_v2 = summary(1, 2, SummaryKind::Technician, Tier::Premium);
    assert_eq!(
        store.put_summary(&llm_v2).await.unwrap(),
        PutOutcome::Stored
    );

    store.ingest(&[record(1, 2, vec![])]).await.unwrap();
    assert_eq!(
        store
            .summary(&ticket(1), SummaryKind::Technician)
            .await
            .unwrap(),
        Some(llm_v2)
    );

    let v3 = record(1, 3, vec![]);
    store.ingest(std::slice::from_ref(&v3)).await.unwrap();
    assert_eq!(
        store
            .summary(&ticket(1), SummaryKind::Technician)
            .await
            .unwrap(),
        Some(v3.instant_summary)
    );
}

async fn summaries_keep_the_latest_version_and_prefer_llm_at_equal_version(store: &dyn Store) {
    let kind = SummaryKind::Customer;
    let mut llm_v1 = summary(1, 1, kind, Tier::Standard);
    llm_v1.prompt_version = Some("customer-v3".into());
    llm_v1.input = json!({ "kept_bytes": 4096, "dropped_bytes": 120 });

    assert_eq!(
        store
            .put_summary(&summary(1, 1, kind, Tier::Extractive))
            .await
            .unwrap(),
        PutOutcome::Stored
    );
    assert_eq!(
        store.put_summary(&llm_v1).await.unwrap(),
        PutOutcome::Stored
    );
    assert_eq!(
        store
            .put_summary(&summary(1, 1, kind, Tier::Extractive))
            .await
            .unwrap(),
        PutOutcome::Superseded
    );
    assert_eq!(
        store
            .put_summary(&summary(1, 1, kind, Tier::Premium))
            .await
            .unwrap(),
        PutOutcome::Superseded
    );
    assert_eq!(
        store
            .put_summary(&summary(1, 0, kind, Tier::Premium))
            .await
            .unwrap(),
        PutOutcome::Superseded
    );
    assert_eq!(store.summary(&ticket(1), kind).await.unwrap(), Some(llm_v1));

    let extractive_v2 = summary(1, 2, kind, Tier::Extractive);
    assert_eq!(
        store.put_summary(&extractive_v2).await.unwrap(),
        PutOutcome::Stored
    );
    assert_eq!(
        store.summary(&ticket(1), kind).await.unwrap(),
        Some(extractive_v2)
    );
    assert_eq!(
        store
            .summary(&ticket(1), SummaryKind::Technician)
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.summary(&ticket(2), kind).await.unwrap(), None);
}

async fn lease_serves_most_severe_first_then_earliest_then_by_job_id(store: &dyn Store) {
    let p3_early = technician_job(1, P3, 1_000);
    let p1_late = technician_job(2, P1, 5_000);
    let p1_early = technician_job(3, P1, 2_000);
    let p2_tie_b = technician_job(5, P2, 3_000);
    let p2_tie_a = technician_job(4, P2, 3_000);
    let jobs = [
        p3_early.clone(),
        p1_late.clone(),
        p1_early.clone(),
        p2_tie_b.clone(),
        p2_tie_a.clone(),
    ];
    assert_eq!(store.enqueue(&jobs).await.unwrap(), 5);

    let slow_aging = AgingPolicy {
        promote_every: Duration::from_secs(3_600),
    };
    let served = drain(store, Tier::Premium, slow_aging).await;
    assert_eq!(
        served,
        [p1_early, p1_late, p2_tie_a, p2_tie_b, p3_early]
            .iter()
            .map(id)
            .collect::<Vec<_>>()
    );
}

/// A job queues at its queue rank, not its routing severity: a ticket lifted to P2 queues
/// behind every job ServiceNow rates P2, also after a release, and across a spill.
async fn a_job_queues_and_ages_at_its_queue_rank(store: &dyn Store) {
    let mut lifted = technician_job(1, P2, 1_000);
    lifted.queue_rank = Some(P4);
    let servicenow_p2 = technician_job(2, P2, 5_000);
    let p3 = technician_job(3, P3, 4_000);
    store
        .enqueue(&[lifted.clone(), servicenow_p2.clone(), p3.clone()])
        .await
        .unwrap();
    let slow_aging = AgingPolicy {
        promote_every: Duration::from_secs(3_600),
    };
    let first = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 1, slow_aging)
        .await
        .unwrap();
    assert_eq!(first[0].job.id, servicenow_p2.id);
    let second = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 1, slow_aging)
        .await
        .unwrap();
    assert_eq!(second[0].job.id, p3.id);
    let third = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 1, slow_aging)
        .await
        .unwrap();
    assert_eq!(third[0].job, lifted, "the rank travels with the job");
    assert!(store.release(&third[0], Tier::Standard).await.unwrap());
    let stats = store.queue_stats(Tier::Standard).await.unwrap();
    assert_eq!(stats.pending_by_severity[P4.index()], 1, "{stats:?}");
    // Aging applies from the rank: 3 steps of a 1 s promotion put it ahead of a later P1.
    let mut p1 = technician_job(4, P1, 4_500);
    p1.tier = Tier::Standard;
    store.enqueue(&[p1]).await.unwrap();
    let fast = AgingPolicy {
        promote_every: Duration::from_secs(1),
    };
    let next = store
        .lease(Tier::Standard, NOW, LEASE_FOR, 1, fast)
        .await
        .unwrap();
    assert_eq!(next[0].job.id, lifted.id);
}

async fn pending_jobs_lists_the_serve_order_without_leasing(store: &dyn Store) {
    let p3_early = technician_job(1, P3, 1_000);
    let p1_late = technician_job(2, P1, 5_000);
    let p1_early = technician_job(3, P1, 2_000);
    let p2_tie_b = technician_job(5, P2, 3_000);
    let p2_tie_a = technician_job(4, P2, 3_000);
    let standard = in_tier(technician_job(6, P1, 0), Tier::Standard);
    let jobs = [
        p3_early.clone(),
        p1_late.clone(),
        p1_early.clone(),
        p2_tie_b.clone(),
        p2_tie_a.clone(),
        standard,
    ];
    assert_eq!(store.enqueue(&jobs).await.unwrap(), 6);
    let slow_aging = AgingPolicy {
        promote_every: Duration::from_secs(3_600),
    };
    let listed = store
        .pending_jobs(Tier::Premium, 10, slow_aging)
        .await
        .unwrap();
    let order = [p1_early, p1_late, p2_tie_a, p2_tie_b, p3_early];
    assert_eq!(
        listed.iter().map(id).collect::<Vec<_>>(),
        order.iter().map(id).collect::<Vec<_>>()
    );
    assert!(listed.iter().all(|j| j.tier == Tier::Premium));
    let first_two = store
        .pending_jobs(Tier::Premium, 2, slow_aging)
        .await
        .unwrap();
    assert_eq!(
        first_two.iter().map(id).collect::<Vec<_>>(),
        order[..2].iter().map(id).collect::<Vec<_>>()
    );
    // Listing leased nothing: the drain serves the same order.
    assert_eq!(
        drain(store, Tier::Premium, slow_aging).await,
        order.iter().map(id).collect::<Vec<_>>()
    );
}

async fn lease_jobs_takes_exactly_the_named_pending_jobs(store: &dyn Store) {
    let a = technician_job(1, P1, 1_000);
    let b = technician_job(2, P4, 2_000);
    let c = technician_job(3, P2, 3_000);
    let elsewhere = in_tier(technician_job(4, P1, 0), Tier::Standard);
    store
        .enqueue(&[a.clone(), b.clone(), c.clone(), elsewhere.clone()])
        .await
        .unwrap();
    let held = lease_one(store, Tier::Premium).await.unwrap();
    assert_eq!(held.job.id, a.id);

    // `a` is leased already, `elsewhere` is in another tier, `missing` was never queued.
    let missing = technician_job(9, P1, 0);
    let leases = store
        .lease_jobs(
            Tier::Premium,
            &[
                c.id.clone(),
                a.id.clone(),
                elsewhere.id.clone(),
                b.id.clone(),
                missing.id,
            ],
            NOW,
            LEASE_FOR,
        )
        .await
        .unwrap();
    let ids: Vec<String> = leases.iter().map(|l| id(&l.job)).collect();
    assert_eq!(ids, [id(&c), id(&b)]);
    assert!(leases.iter().all(|l| l.expires_at == NOW.plus(LEASE_FOR)));
    assert_ne!(leases[0].token, leases[1].token);
    assert_ne!(leases[0].token, held.token);
    assert!(
        lease_one(store, Tier::Premium).await.is_none(),
        "nothing pending is left"
    );
    // They are real leases: released to another tier, acknowledged, or reclaimed.
    assert!(store.release(&leases[0], Tier::Standard).await.unwrap());
    assert!(store.ack(&leases[1]).await.unwrap());
    assert!(!store.ack(&leases[1]).await.unwrap());
    let standard = drain(store, Tier::Standard, aging()).await;
    assert_eq!(standard, [id(&elsewhere), id(&c)]);
}

async fn waiting_promotes_one_severity_step_per_promote_every(store: &dyn Store) {
    let step = 60_000;
    let base = 1_000_000;
    // Four steps of waiting make a P5 equal to a fresh P1; equal scores go by arrival.
    let p5 = in_tier(technician_job(1, P5, base), Tier::Premium);
    let p1_at_bound = in_tier(technician_job(2, P1, base + 4 * step), Tier::Premium);
    // One millisecond short of four steps, the P1 still goes first.
    let p5_b = in_tier(technician_job(3, P5, base), Tier::Standard);
    let p1_inside = in_tier(technician_job(4, P1, base + 4 * step - 1), Tier::Standard);
    // A P3 that waited one step and a millisecond longer than a P2 goes first.
    let p3 = in_tier(technician_job(5, P3, base), Tier::Extractive);
    let p2 = in_tier(technician_job(6, P2, base + step + 1), Tier::Extractive);
    store
        .enqueue(&[
            p1_at_bound.clone(),
            p5.clone(),
            p1_inside.clone(),
            p5_b.clone(),
            p2.clone(),
            p3.clone(),
        ])
        .await
        .unwrap();

    assert_eq!(
        drain(store, Tier::Premium, aging()).await,
        vec![id(&p5), id(&p1_at_bound)]
    );
    assert_eq!(
        drain(store, Tier::Standard, aging()).await,
        vec![id(&p1_inside), id(&p5_b)]
    );
    assert_eq!(
        drain(store, Tier::Extractive, aging()).await,
        vec![id(&p3), id(&p2)]
    );
}

async fn the_aging_policy_is_applied_when_leasing(store: &dyn Store) {
    let p5 = technician_job(1, P5, 0);
    let p1 = technician_job(2, P1, 100_000);
    store.enqueue(&[p5.clone(), p1.clone()]).await.unwrap();

    let fast = AgingPolicy {
        promote_every: Duration::from_secs(10),
    };
    let first = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 1, fast)
        .await
        .unwrap();
    assert_eq!(first[0].job.id, p5.id);
    store.release(&first[0], Tier::Premium).await.unwrap();

    let second = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 1, aging())
        .await
        .unwrap();
    assert_eq!(second[0].job.id, p1.id);
}

async fn lease_takes_jobs_sharing_the_coalescing_key_up_to_the_cap(store: &dyn Store) {
    let leader = keyed(technician_job(1, P1, 5_000), "outage-7");
    let oldest = keyed(technician_job(2, P4, 1_000), "outage-7");
    let second = keyed(technician_job(3, P3, 2_000), "outage-7");
    let left_over = keyed(technician_job(4, P3, 3_000), "outage-7");
    let other_key = keyed(technician_job(5, P2, 500), "outage-9");
    let other_tier = in_tier(
        keyed(technician_job(6, P1, 100), "outage-7"),
        Tier::Standard,
    );
    let all = [
        leader.clone(),
        oldest.clone(),
        second.clone(),
        left_over.clone(),
        other_key.clone(),
        other_tier.clone(),
    ];
    store.enqueue(&all).await.unwrap();

    let group = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 3, aging())
        .await
        .unwrap();

    let ids: Vec<_> = group.iter().map(|l| l.job.id.clone()).collect();
    assert_eq!(
        ids,
        vec![leader.id.clone(), oldest.id.clone(), second.id.clone()]
    );
    assert!(
        group
            .iter()
            .all(|l| l.expires_at == NOW.plus(LEASE_FOR) && l.job.tier == Tier::Premium)
    );
    let tokens: std::collections::BTreeSet<_> = group.iter().map(|l| l.token.clone()).collect();
    assert_eq!(tokens.len(), 3, "every lease has its own token");
    assert_eq!(
        group[1].job, oldest,
        "a leased job comes back as it was queued"
    );

    let stats = store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!((stats.pending, stats.leased), (2, 3));
    let next = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 3, aging())
        .await
        .unwrap();
    assert_eq!(
        next.iter().map(|l| l.job.id.clone()).collect::<Vec<_>>(),
        vec![other_key.id]
    );
    let last = store
        .lease(Tier::Premium, NOW, LEASE_FOR, usize::MAX, aging())
        .await
        .unwrap();
    assert_eq!(
        last.iter().map(|l| l.job.id.clone()).collect::<Vec<_>>(),
        vec![left_over.id]
    );
    assert_eq!(store.queue_stats(Tier::Standard).await.unwrap().pending, 1);
}

async fn an_empty_queue_leases_nothing_and_a_zero_cap_leases_one(store: &dyn Store) {
    assert!(
        store
            .lease(Tier::Premium, NOW, LEASE_FOR, 4, aging())
            .await
            .unwrap()
            .is_empty()
    );
    let a = keyed(technician_job(1, P2, 1_000), "k");
    let b = keyed(technician_job(2, P2, 2_000), "k");
    store.enqueue(&[a.clone(), b]).await.unwrap();
    let group = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 0, aging())
        .await
        .unwrap();
    assert_eq!(
        group.iter().map(|l| l.job.id.clone()).collect::<Vec<_>>(),
        vec![a.id]
    );
}

async fn a_leased_job_is_not_leased_again(store: &dyn Store) {
    store
        .enqueue(&[technician_job(1, P1, 1_000)])
        .await
        .unwrap();
    assert!(lease_one(store, Tier::Premium).await.is_some());
    assert!(lease_one(store, Tier::Premium).await.is_none());
}

async fn ack_needs_the_lease_currently_held(store: &dyn Store) {
    let job = technician_job(1, P2, 1_000);
    store.enqueue(std::slice::from_ref(&job)).await.unwrap();
    let lease = lease_one(store, Tier::Premium).await.unwrap();

    let forged = Lease {
        token: format!("{}x", lease.token),
        ..lease.clone()
    };
    assert!(!store.ack(&forged).await.unwrap());
    assert!(store.job_exists(&job.id).await.unwrap());

    assert!(store.ack(&lease).await.unwrap());
    assert!(!store.ack(&lease).await.unwrap());
    assert!(!store.job_exists(&job.id).await.unwrap());
    let stats = store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!((stats.pending, stats.leased), (0, 0));
}

async fn release_requeues_in_the_given_tier_keeping_arrival(store: &dyn Store) {
    let first = technician_job(1, P3, 1_000);
    let second = technician_job(2, P3, 2_000);
    store
        .enqueue(&[first.clone(), second.clone()])
        .await
        .unwrap();

    let lease = lease_one(store, Tier::Premium).await.unwrap();
    assert!(store.release(&lease, Tier::Premium).await.unwrap());
    assert!(
        !store.release(&lease, Tier::Premium).await.unwrap(),
        "a released lease is gone"
    );
    let again = lease_one(store, Tier::Premium).await.unwrap();
    assert_eq!(again.job.id, first.id, "a retried job keeps its place");

    assert!(store.release(&again, Tier::Standard).await.unwrap());
    assert_eq!(
        lease_one(store, Tier::Premium).await.unwrap().job.id,
        second.id
    );
    let spilled = lease_one(store, Tier::Standard).await.unwrap();
    assert_eq!(spilled.job.id, first.id);
    assert_eq!(spilled.job.tier, Tier::Standard);
    assert_eq!(spilled.job.enqueued_at, first.enqueued_at);
    assert!(store.ack(&spilled).await.unwrap());
}

async fn expired_leases_are_reclaimed_and_get_a_new_token(store: &dyn Store) {
    let job = technician_job(1, P2, 1_000);
    store.enqueue(std::slice::from_ref(&job)).await.unwrap();
    let lease = lease_one(store, Tier::Premium).await.unwrap();
    let expiry = NOW.plus(LEASE_FOR);
    assert_eq!(lease.expires_at, expiry);

    assert_eq!(
        store
            .reclaim_expired(expiry.minus(Duration::from_millis(1)))
            .await
            .unwrap(),
        0
    );
    assert_eq!(store.reclaim_expired(expiry).await.unwrap(), 1);
    assert_eq!(store.reclaim_expired(expiry).await.unwrap(), 0);
    assert!(
        !store.ack(&lease).await.unwrap(),
        "the crashed worker's lease is void"
    );

    let retry = lease_one(store, Tier::Premium).await.unwrap();
    assert_eq!(retry.job.id, job.id);
    assert_ne!(retry.token, lease.token);
    assert!(store.ack(&retry).await.unwrap());
}

async fn an_acknowledged_job_is_never_reclaimed(store: &dyn Store) {
    store
        .enqueue(&[technician_job(1, P2, 1_000)])
        .await
        .unwrap();
    let lease = lease_one(store, Tier::Premium).await.unwrap();
    assert!(store.ack(&lease).await.unwrap());
    assert_eq!(
        store
            .reclaim_expired(NOW.plus(LEASE_FOR * 10))
            .await
            .unwrap(),
        0
    );
}

async fn cancel_removes_pending_jobs_below_the_version_of_the_given_kinds(store: &dyn Store) {
    let tech_v1 = job(1, 1, SummaryKind::Technician, P2, 1_000);
    let customer_v1 = job(1, 1, SummaryKind::Customer, P2, 1_000);
    let tech_v3 = job(1, 3, SummaryKind::Technician, P2, 3_000);
    let other = job(2, 1, SummaryKind::Technician, P2, 1_000);
    store
        .enqueue(&[
            tech_v1.clone(),
            customer_v1.clone(),
            tech_v3.clone(),
            other.clone(),
        ])
        .await
        .unwrap();

    assert_eq!(
        store
            .cancel(&ticket(1), 3, &[SummaryKind::Technician])
            .await
            .unwrap(),
        1
    );
    assert!(!store.job_exists(&tech_v1.id).await.unwrap());
    assert!(store.job_exists(&customer_v1.id).await.unwrap());
    assert!(store.job_exists(&tech_v3.id).await.unwrap());
    assert_eq!(store.cancel(&ticket(1), 9, &[]).await.unwrap(), 0);
    assert_eq!(
        store
            .cancel(&ticket(1), 9, &SummaryKind::ALL)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store
            .cancel(&ticket(3), 9, &SummaryKind::ALL)
            .await
            .unwrap(),
        0
    );
    assert_eq!(drain(store, Tier::Premium, aging()).await, vec![id(&other)]);
}

async fn a_job_cancelled_while_leased_is_dropped_instead_of_requeued(store: &dyn Store) {
    let released = job(1, 1, SummaryKind::Technician, P1, 1_000);
    let reclaimed = job(2, 1, SummaryKind::Technician, P1, 2_000);
    let acked = job(3, 1, SummaryKind::Technician, P1, 3_000);
    store
        .ingest(&[
            record(1, 1, vec![released.clone()]),
            record(2, 1, vec![reclaimed.clone()]),
            record(3, 1, vec![acked.clone()]),
        ])
        .await
        .unwrap();
    let leases = [
        lease_one(store, Tier::Premium).await.unwrap(),
        lease_one(store, Tier::Premium).await.unwrap(),
        lease_one(store, Tier::Premium).await.unwrap(),
    ];

    store.ingest(&[record(1, 2, vec![])]).await.unwrap();
    assert_eq!(
        store
            .cancel(&ticket(2), 2, &SummaryKind::ALL)
            .await
            .unwrap(),
        0,
        "leased work is not counted"
    );
    assert_eq!(
        store
            .cancel(&ticket(3), 2, &SummaryKind::ALL)
            .await
            .unwrap(),
        0
    );

    assert!(store.release(&leases[0], Tier::Premium).await.unwrap());
    assert!(!store.job_exists(&released.id).await.unwrap());
    assert!(
        store.ack(&leases[2]).await.unwrap(),
        "its summary was stored: the ack still counts"
    );
    assert_eq!(store.reclaim_expired(NOW.plus(LEASE_FOR)).await.unwrap(), 0);
    assert!(!store.job_exists(&reclaimed.id).await.unwrap());
    let stats = store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!((stats.pending, stats.leased), (0, 0));
}

async fn enqueue_is_idempotent_per_job_id(store: &dyn Store) {
    let job = technician_job(1, P2, 1_000);
    assert_eq!(store.enqueue(&[job.clone(), job.clone()]).await.unwrap(), 1);
    assert_eq!(store.enqueue(std::slice::from_ref(&job)).await.unwrap(), 0);
    let lease = lease_one(store, Tier::Premium).await.unwrap();
    assert_eq!(
        store.enqueue(std::slice::from_ref(&job)).await.unwrap(),
        0,
        "a leased job is not queued twice"
    );
    let stats = store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!((stats.pending, stats.leased), (0, 1));
    assert!(store.ack(&lease).await.unwrap());
    assert_eq!(
        store.enqueue(&[job]).await.unwrap(),
        1,
        "an acknowledged job may be queued anew"
    );
    assert_eq!(store.enqueue(&[]).await.unwrap(), 0);
}

async fn queue_stats_report_pending_leased_and_oldest_per_severity(store: &dyn Store) {
    let jobs = [
        technician_job(1, P1, 3_000),
        technician_job(2, P1, 2_000),
        technician_job(3, P4, 1_000),
        technician_job(4, P4, 5_000),
        in_tier(technician_job(5, P5, 500), Tier::Standard),
    ];
    store.enqueue(&jobs).await.unwrap();
    let lease = lease_one(store, Tier::Premium).await.unwrap();
    assert_eq!(lease.job.id, jobs[1].id);

    let premium = store.queue_stats(Tier::Premium).await.unwrap();
    let expected = QueueStats {
        pending: 3,
        held: 0,
        leased: 1,
        oldest_enqueued_at: Some(EpochMillis(1_000)),
        pending_by_severity: [1, 0, 0, 2, 0],
        oldest_by_severity: [
            Some(EpochMillis(3_000)),
            None,
            None,
            Some(EpochMillis(1_000)),
            None,
        ],
    };
    assert_eq!(premium, expected);
    assert_eq!(
        store
            .queue_stats(Tier::Standard)
            .await
            .unwrap()
            .oldest_by_severity[Severity::P5.index()],
        Some(EpochMillis(500))
    );
    assert_eq!(
        store.queue_stats(Tier::Extractive).await.unwrap(),
        QueueStats::default()
    );
}

async fn a_held_job_leads_no_group_before_its_hold_ends(store: &dyn Store) {
    let hold_end = NOW.plus(Duration::from_secs(60));
    // The most severe and the oldest: it would be served first were it not held.
    let held = held_until(keyed(technician_job(1, P1, 1_000), "outage-7"), hold_end);
    let later = technician_job(2, P4, 5_000);
    store.enqueue(&[held.clone(), later.clone()]).await.unwrap();

    let stats = store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!((stats.pending, stats.held), (1, 1));
    assert_eq!(
        store
            .pending_jobs(Tier::Premium, 10, aging())
            .await
            .unwrap(),
        vec![later.clone()],
        "a held job is not yet in serve order"
    );
    let first = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 4, aging())
        .await
        .unwrap();
    assert_eq!(ids(&first), vec![id(&later)]);
    let just_before = hold_end.0 - 1;
    assert!(
        store
            .lease(
                Tier::Premium,
                EpochMillis(just_before),
                LEASE_FOR,
                4,
                aging()
            )
            .await
            .unwrap()
            .is_empty()
    );

    let at_end = store
        .lease(Tier::Premium, hold_end, LEASE_FOR, 4, aging())
        .await
        .unwrap();
    assert_eq!(ids(&at_end), vec![id(&held)]);
    assert_eq!(at_end[0].job, held, "it comes back as it was queued");
    let stats = store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!((stats.pending, stats.held, stats.leased), (0, 0, 2));
}

async fn a_held_job_joins_the_group_its_key_leads(store: &dyn Store) {
    let hold_end = NOW.plus(Duration::from_secs(600));
    let leader = keyed(technician_job(1, P2, 3_000), "outage-7");
    let sibling = held_until(keyed(technician_job(2, P3, 2_000), "outage-7"), hold_end);
    let unrelated = held_until(keyed(technician_job(3, P3, 1_000), "outage-9"), hold_end);
    store
        .enqueue(&[leader.clone(), sibling.clone(), unrelated.clone()])
        .await
        .unwrap();

    let group = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 4, aging())
        .await
        .unwrap();
    assert_eq!(ids(&group), vec![id(&leader), id(&sibling)]);
    let stats = store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!((stats.pending, stats.held, stats.leased), (0, 1, 2));

    // Released, the sibling's hold is over: it is served at once, ahead of its hold end.
    assert!(store.release(&group[1], Tier::Premium).await.unwrap());
    let again = store
        .lease(Tier::Premium, NOW, LEASE_FOR, 4, aging())
        .await
        .unwrap();
    assert_eq!(ids(&again), vec![id(&sibling)]);
}

async fn a_newer_version_cancels_a_held_job(store: &dyn Store) {
    let hold_end = NOW.plus(Duration::from_secs(60));
    let v1 = held_until(keyed(technician_job(1, P3, 1_000), "outage-7"), hold_end);
    store.ingest(&[record(1, 1, vec![v1])]).await.unwrap();
    assert_eq!(store.queue_stats(Tier::Premium).await.unwrap().held, 1);

    store.ingest(&[record(1, 2, Vec::new())]).await.unwrap();

    let stats = store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!((stats.pending, stats.held), (0, 0));
    assert!(
        store
            .lease(Tier::Premium, hold_end, LEASE_FOR, 4, aging())
            .await
            .unwrap()
            .is_empty()
    );
}

async fn dead_letters_are_listed_oldest_first_and_removable(store: &dyn Store) {
    let letter = |n: i64, known_origin: bool| DeadLetter {
        reason: format!("invalid severity in event {n}"),
        raw: format!("{{\"sys_id\": \"{n}\", \"priority\": \"urgent\"}}"),
        headers: CdcHeaders {
            action: known_origin.then(|| "delete".to_owned()),
            table_name: known_origin.then(|| "incident".to_owned()),
        },
        replayable: known_origin,
        topic: known_origin.then(|| "servicenow.incidents".to_owned()),
        partition: known_origin.then_some(n % 3),
        offset: known_origin.then_some(1_000 + n),
        at: EpochMillis(NOW.as_millis() + n as u64),
    };
    let letters = [letter(1, true), letter(2, false), letter(3, true)];
    let mut ids = Vec::new();
    for l in &letters {
        ids.push(store.dead_letter(l).await.unwrap());
    }

    let listed = store.dead_letters(10).await.unwrap();
    assert_eq!(
        listed,
        ids.iter()
            .cloned()
            .zip(letters.iter().cloned())
            .collect::<Vec<_>>()
    );
    assert_eq!(store.dead_letters(2).await.unwrap().len(), 2);
    assert_eq!(store.dead_letters(usize::MAX).await.unwrap().len(), 3);
    assert!(store.dead_letters(0).await.unwrap().is_empty());

    assert!(store.remove_dead_letter(&ids[1]).await.unwrap());
    assert!(!store.remove_dead_letter(&ids[1]).await.unwrap());
    assert!(!store.remove_dead_letter("not-a-dead-letter").await.unwrap());
    let remaining: Vec<_> = store
        .dead_letters(10)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(remaining, vec![ids[0].clone(), ids[2].clone()]);
}

async fn regions_marked_by_ingest_are_taken_once(store: &dyn Store) {
    let in_region = |n: u64, version: u64, region: Option<&str>| {
        let mut r = record(n, version, vec![]);
        r.region = region.map(str::to_owned);
        r
    };
    let batch = [
        in_region(1, 1, Some("emea")),
        in_region(2, 1, Some("emea")),
        in_region(3, 1, Some("apac")),
        in_region(4, 1, None),
    ];
    store.ingest(&batch).await.unwrap();

    assert_eq!(
        store.take_due_regions().await.unwrap(),
        vec!["apac".to_owned(), "emea".to_owned()]
    );
    assert!(store.take_due_regions().await.unwrap().is_empty());
    store
        .ingest(&[in_region(1, 1, Some("emea"))])
        .await
        .unwrap();
    assert!(
        store.take_due_regions().await.unwrap().is_empty(),
        "a duplicate marks nothing"
    );
    store
        .ingest(&[in_region(1, 2, Some("emea"))])
        .await
        .unwrap();
    assert_eq!(
        store.take_due_regions().await.unwrap(),
        vec!["emea".to_owned()]
    );
}

async fn a_region_change_marks_the_roll_ups_of_both_regions_due(store: &dyn Store) {
    store
        .ingest(&[in_region(1, 1, Some("emea")), in_region(2, 1, Some("apac"))])
        .await
        .unwrap();
    store.take_due_regions().await.unwrap();

    store
        .ingest(&[in_region(1, 2, Some("amer"))])
        .await
        .unwrap();
    assert_eq!(
        store.take_due_regions().await.unwrap(),
        vec!["amer".to_owned(), "emea".to_owned()],
        "the region left and the region joined"
    );

    store.ingest(&[in_region(1, 3, None)]).await.unwrap();
    assert_eq!(
        store.take_due_regions().await.unwrap(),
        vec!["amer".to_owned()],
        "a ticket losing its region leaves that region"
    );

    store
        .ingest(&[in_region(1, 2, Some("apac")), in_region(2, 1, Some("emea"))])
        .await
        .unwrap();
    assert!(
        store.take_due_regions().await.unwrap().is_empty(),
        "stale and duplicate versions move no ticket"
    );

    store
        .ingest(&[in_region(2, 2, Some("apac"))])
        .await
        .unwrap();
    assert_eq!(
        store.take_due_regions().await.unwrap(),
        vec!["apac".to_owned()],
        "staying in a region marks only that region"
    );
}

async fn a_ticket_evicted_from_its_region_index_still_marks_that_region_when_it_moves(
    store: &dyn Store,
) {
    let total = REGION_INDEX_CAP as u64 + 1;
    for chunk in (1..=total).collect::<Vec<_>>().chunks(500) {
        let batch: Vec<_> = chunk
            .iter()
            .map(|&n| in_region(n, 1, Some("emea")))
            .collect();
        store.ingest(&batch).await.unwrap();
    }
    assert!(
        !store
            .region_tickets("emea", usize::MAX)
            .await
            .unwrap()
            .contains(&ticket(1)),
        "the oldest ticket was evicted from the index"
    );
    store.take_due_regions().await.unwrap();

    store
        .ingest(&[in_region(1, 2, Some("apac"))])
        .await
        .unwrap();
    assert_eq!(
        store.take_due_regions().await.unwrap(),
        vec!["apac".to_owned(), "emea".to_owned()]
    );
}

fn in_region(n: u64, version: u64, region: Option<&str>) -> IngestRecord {
    let mut r = record(n, version, vec![]);
    r.region = region.map(str::to_owned);
    r
}

async fn regions_list_their_tickets_latest_first(store: &dyn Store) {
    let emea = Some("emea");
    let apac = Some("apac");
    store
        .ingest(&[
            in_region(1, 1, emea),
            in_region(2, 1, apac),
            in_region(3, 1, emea),
        ])
        .await
        .unwrap();
    assert_eq!(
        store.region_tickets("emea", 10).await.unwrap(),
        vec![ticket(3), ticket(1)]
    );

    store
        .ingest(&[
            in_region(1, 2, emea),
            in_region(1, 2, apac),
            in_region(3, 1, apac),
        ])
        .await
        .unwrap();
    assert_eq!(
        store.region_tickets("emea", 10).await.unwrap(),
        vec![ticket(1), ticket(3)],
        "duplicates move nothing"
    );

    store
        .ingest(&[
            in_region(3, 2, apac),
            in_region(2, 2, None),
            in_region(4, 1, Some("")),
        ])
        .await
        .unwrap();
    assert_eq!(
        store.region_tickets("emea", 10).await.unwrap(),
        vec![ticket(1)]
    );
    assert_eq!(
        store.region_tickets("apac", 10).await.unwrap(),
        vec![ticket(3)]
    );
    assert_eq!(
        store.region_tickets("emea", 0).await.unwrap(),
        Vec::<TicketId>::new()
    );
    assert_eq!(
        store.region_tickets("", 10).await.unwrap(),
        Vec::<TicketId>::new()
    );
    assert_eq!(
        store.region_tickets("nowhere", 10).await.unwrap(),
        Vec::<TicketId>::new()
    );
}

async fn a_region_keeps_only_its_latest_tickets(store: &dyn Store) {
    let total = REGION_INDEX_CAP as u64 + 3;
    for chunk in (1..=total).collect::<Vec<_>>().chunks(500) {
        let batch: Vec<_> = chunk
            .iter()
            .map(|&n| in_region(n, 1, Some("emea")))
            .collect();
        store.ingest(&batch).await.unwrap();
    }
    let listed = store.region_tickets("emea", usize::MAX).await.unwrap();
    assert_eq!(listed.len(), REGION_INDEX_CAP);
    assert_eq!(listed.first(), Some(&ticket(total)));
    assert_eq!(listed.last(), Some(&ticket(4)));
}

async fn unknown_tickets_have_no_snapshot_and_no_summary(store: &dyn Store) {
    assert_eq!(store.ticket_snapshot(&ticket(42)).await.unwrap(), None);
    assert_eq!(
        store
            .summary(&ticket(42), SummaryKind::Technician)
            .await
            .unwrap(),
        None
    );
    assert!(
        !store
            .job_exists(&technician_job(42, P1, 0).id)
            .await
            .unwrap()
    );
}

fn job_id(n: u64, version: u64, kind: SummaryKind) -> JobId {
    JobId {
        ticket: ticket(n),
        version,
        kind,
    }
}

/// The fallback an LLM job settles with: extractive, marked degraded.
fn degraded(n: u64, version: u64, kind: SummaryKind) -> stormgate_shared::summary::Summary {
    let mut s = summary(n, version, kind, Tier::Extractive);
    s.degraded = true;
    s
}

fn later(ms: u64) -> EpochMillis {
    EpochMillis(NOW.as_millis() + ms)
}

async fn a_stored_summary_owes_one_delivery_per_version(store: &dyn Store) {
    let kind = SummaryKind::Customer;
    let v1 = job_id(1, 1, kind);
    // The instant summary is stored at ingest, owing nothing; a settlement owes.
    store.ingest(&[record(1, 1, vec![])]).await.unwrap();
    assert_eq!(
        store.owed_stats(kind, NOW).await.unwrap(),
        OwedStats::default()
    );
    let put = store
        .put_summary_owed(&degraded(1, 1, kind), true, NOW)
        .await
        .unwrap();
    assert_eq!(put, PutOutcome::Stored);
    let owed = OwedStats { due: 1, claimed: 0 };
    assert_eq!(store.owed_stats(kind, NOW).await.unwrap(), owed);
    // Storing it again, or a better one of the same version, owes no second delivery.
    let again = store
        .put_summary_owed(&degraded(1, 1, kind), true, later(1))
        .await
        .unwrap();
    assert_eq!(again, PutOutcome::Superseded);
    let llm = summary(1, 1, kind, Tier::Standard);
    let better = store.put_summary_owed(&llm, true, later(2)).await.unwrap();
    assert_eq!(better, PutOutcome::Stored);
    assert_eq!(store.owed_stats(kind, later(2)).await.unwrap(), owed);
    assert_eq!(
        store
            .claim_due_owed(kind, 10, later(2), later(60_000))
            .await
            .unwrap(),
        vec![v1.clone()],
        "due since the first store"
    );
    assert_eq!(
        store
            .complete_owed(std::slice::from_ref(&v1))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store.owed_stats(kind, later(3)).await.unwrap(),
        OwedStats::default()
    );
    assert_eq!(
        store
            .complete_owed(std::slice::from_ref(&v1))
            .await
            .unwrap(),
        0
    );

    // A delivered version owes nothing when stored once more; the next version owes.
    let mut llm_again = llm.clone();
    llm_again.tier = Tier::Premium;
    llm_again.text = "another answer".into();
    store
        .put_summary(&summary(1, 1, kind, Tier::Extractive))
        .await
        .unwrap();
    store
        .put_summary_owed(&llm_again, true, later(4))
        .await
        .unwrap();
    assert_eq!(
        store.owed_stats(kind, later(4)).await.unwrap(),
        OwedStats::default()
    );
    store
        .put_summary_owed(&degraded(1, 2, kind), true, later(5))
        .await
        .unwrap();
    assert_eq!(
        store
            .claim_owed(&[v1.clone(), job_id(1, 2, kind)], later(5), later(9))
            .await
            .unwrap(),
        vec![job_id(1, 2, kind)]
    );
    // Nothing is owed when the caller owes nothing, or the summary is not stored.
    let technician = SummaryKind::Technician;
    store
        .put_summary_owed(&degraded(2, 1, technician), false, NOW)
        .await
        .unwrap();
    store
        .put_summary_owed(&degraded(2, 0, technician), true, NOW)
        .await
        .unwrap();
    assert_eq!(
        store.owed_stats(technician, later(9)).await.unwrap(),
        OwedStats::default()
    );
}

async fn a_claimed_delivery_is_due_again_only_when_its_claim_runs_out(store: &dyn Store) {
    let kind = SummaryKind::Technician;
    for n in 1..=3 {
        store
            .put_summary_owed(&degraded(n, 1, kind), true, later(n * 10))
            .await
            .unwrap();
    }
    let (first, second, third) = (job_id(1, 1, kind), job_id(2, 1, kind), job_id(3, 1, kind));
    let hold = later(60_000);
    // Only what is due and not claimed is claimed, in the order asked.
    assert_eq!(
        store
            .claim_owed(
                &[third.clone(), first.clone(), job_id(9, 1, kind)],
                later(30),
                hold
            )
            .await
            .unwrap(),
        vec![third.clone(), first.clone()]
    );
    assert_eq!(
        store
            .claim_owed(std::slice::from_ref(&first), later(40), hold)
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        store.owed_stats(kind, later(40)).await.unwrap(),
        OwedStats { due: 1, claimed: 2 }
    );
    assert_eq!(
        store
            .claim_due_owed(kind, 10, later(40), hold)
            .await
            .unwrap(),
        vec![second.clone()]
    );
    assert_eq!(
        store
            .claim_due_owed(kind, 10, later(59_999), hold)
            .await
            .unwrap(),
        vec![]
    );
    // The claims run out at the hold's end: due again, earliest first, up to the limit.
    assert_eq!(
        store
            .claim_due_owed(kind, 2, hold, later(120_000))
            .await
            .unwrap(),
        vec![first.clone(), second.clone()]
    );
    assert_eq!(
        store.complete_owed(&[first, second, third]).await.unwrap(),
        3
    );
    assert_eq!(
        store.owed_stats(kind, later(200_000)).await.unwrap(),
        OwedStats::default()
    );
    assert_eq!(
        store.owed_stats(SummaryKind::Customer, NOW).await.unwrap(),
        OwedStats::default()
    );
}

async fn a_call_is_claimed_by_one_holder_until_its_claim_runs_out(store: &dyn Store) {
    let kind = SummaryKind::Technician;
    let jobs = [job_id(1, 1, kind), job_id(2, 1, kind)];
    let until = later(10_000);
    assert_eq!(
        store.claim_calls(&jobs, "a", NOW, until).await.unwrap(),
        vec![CallClaim::Claimed, CallClaim::Claimed]
    );
    assert_eq!(
        store
            .claim_calls(&jobs[..1], "b", later(1), later(20_000))
            .await
            .unwrap(),
        vec![CallClaim::InFlight { until }]
    );
    // The holder extends its own claim; another holder takes over one that ran out.
    assert_eq!(
        store
            .claim_calls(&jobs[..1], "a", later(2), later(15_000))
            .await
            .unwrap(),
        vec![CallClaim::Claimed]
    );
    assert_eq!(
        store
            .claim_calls(&jobs, "b", later(10_000), later(30_000))
            .await
            .unwrap(),
        vec![
            CallClaim::InFlight {
                until: later(15_000)
            },
            CallClaim::Claimed
        ]
    );
    assert_eq!(
        store
            .renew_calls(&jobs, "a", later(10_001), later(40_000))
            .await
            .unwrap(),
        1
    );
    // A holder that is done lets go: the call is free at once, before its claim's end.
    store.release_calls(&jobs, "a").await.unwrap();
    assert_eq!(
        store
            .claim_calls(&jobs, "c", later(20_000), later(60_000))
            .await
            .unwrap(),
        vec![
            CallClaim::Claimed,
            CallClaim::InFlight {
                until: later(30_000)
            }
        ],
        "released by a, not by b"
    );
    store.release_calls(&jobs, "b").await.unwrap();
    assert_eq!(
        store
            .claim_calls(&jobs[1..], "c", later(20_001), later(60_000))
            .await
            .unwrap(),
        vec![CallClaim::Claimed]
    );
    assert_eq!(
        store
            .renew_calls(&jobs, "c", later(60_000), later(70_000))
            .await
            .unwrap(),
        0,
        "a claim that ran out is not renewed"
    );
}

async fn a_call_whose_final_summary_is_stored_is_done(store: &dyn Store) {
    let kind = SummaryKind::Customer;
    let v1 = job_id(1, 1, kind);
    let until = later(10_000);
    // Only the instant summary: the call is still to be made.
    store.ingest(&[record(1, 1, vec![])]).await.unwrap();
    let instant = summary(1, 1, kind, Tier::Extractive);
    store.put_summary(&instant).await.unwrap();
    assert_eq!(
        store
            .claim_calls(std::slice::from_ref(&v1), "a", NOW, until)
            .await
            .unwrap(),
        vec![CallClaim::Claimed]
    );
    // The fallback or the LLM summary settles it, for any holder.
    store.put_summary(&degraded(1, 1, kind)).await.unwrap();
    for holder in ["a", "b"] {
        assert_eq!(
            store
                .claim_calls(std::slice::from_ref(&v1), holder, later(1), until)
                .await
                .unwrap(),
            vec![CallClaim::Done]
        );
    }
    // A newer version's summary, of any standing, leaves no call for the older one.
    store
        .put_summary(&summary(2, 3, kind, Tier::Extractive))
        .await
        .unwrap();
    assert_eq!(
        store
            .claim_calls(&[job_id(2, 2, kind), job_id(2, 3, kind)], "a", NOW, until)
            .await
            .unwrap(),
        vec![CallClaim::Done, CallClaim::Claimed]
    );
}

/// `record` as ingested at `at` (its instant summary's creation time).
fn ingested_at(mut record: IngestRecord, at: EpochMillis) -> IngestRecord {
    record.instant_summary.created_at = at;
    record
}

async fn a_ticket_is_purged_its_retention_after_its_last_update(store: &dyn Store) {
    let retention = StoreLimits::default().retention;
    let emea = Some("emea");
    let job = technician_job(1, P3, NOW.as_millis());
    let first = ingested_at(in_region(1, 1, emea), NOW);
    let first = IngestRecord {
        jobs: vec![job.clone()],
        ..first
    };
    store
        .ingest(&[first, ingested_at(in_region(2, 1, emea), NOW)])
        .await
        .unwrap();
    let later = NOW.plus(Duration::from_secs(3 * 24 * 3600));
    store
        .ingest(&[ingested_at(in_region(2, 2, emea), later)])
        .await
        .unwrap();

    let just_before = EpochMillis(NOW.plus(retention).as_millis() - 1);
    assert_eq!(
        store.purge_expired(just_before, 100).await.unwrap(),
        PurgeReport::default()
    );
    assert_eq!(
        store.purge_expired(NOW.plus(retention), 100).await.unwrap(),
        PurgeReport {
            tickets: 1,
            more_due: false
        }
    );
    assert_eq!(store.ticket_snapshot(&ticket(1)).await.unwrap(), None);
    assert_eq!(
        store
            .summary(&ticket(1), SummaryKind::Technician)
            .await
            .unwrap(),
        None
    );
    assert!(
        !store.job_exists(&job.id).await.unwrap(),
        "its pending job went"
    );
    assert_eq!(store.queue_stats(Tier::Standard).await.unwrap().pending, 0);
    assert_eq!(
        store.region_tickets("emea", 10).await.unwrap(),
        vec![ticket(2)],
        "the region index is trimmed to match"
    );
    // Ticket 2 was updated three days later: kept three days longer.
    assert!(store.ticket_snapshot(&ticket(2)).await.unwrap().is_some());
    let report = store
        .purge_expired(later.plus(retention), 100)
        .await
        .unwrap();
    assert_eq!(report.tickets, 1);
    assert_eq!(store.ticket_snapshot(&ticket(2)).await.unwrap(), None);
    assert!(store.region_tickets("emea", 10).await.unwrap().is_empty());
    // Purging again finds nothing.
    assert_eq!(
        store
            .purge_expired(later.plus(retention), 100)
            .await
            .unwrap(),
        PurgeReport::default()
    );
}

async fn a_purge_takes_at_most_its_limit_and_says_more_are_due(store: &dyn Store) {
    let records: Vec<IngestRecord> = (1..=3)
        .map(|n| ingested_at(record(n, 1, vec![]), NOW))
        .collect();
    store.ingest(&records).await.unwrap();
    let due = NOW.plus(StoreLimits::default().retention);
    assert_eq!(
        store.purge_expired(due, 2).await.unwrap(),
        PurgeReport {
            tickets: 2,
            more_due: true
        }
    );
    assert_eq!(
        store.purge_expired(due, 2).await.unwrap(),
        PurgeReport {
            tickets: 1,
            more_due: false
        }
    );
}

async fn the_dead_letter_stream_keeps_its_cap_and_counts_what_it_trimmed(store: &dyn Store) {
    let cap = StoreLimits::default().dead_letter_cap;
    for n in 0..cap + 3 {
        store
            .dead_letter(&DeadLetter {
                reason: format!("bad {n}"),
                raw: "{}".to_owned(),
                headers: CdcHeaders::default(),
                replayable: true,
                topic: None,
                partition: None,
                offset: Some(n as i64),
                at: EpochMillis(n),
            })
            .await
            .unwrap();
    }
    let stats = store.dead_letter_stats().await.unwrap();
    assert_eq!(stats.entries, cap);
    assert_eq!(stats.cap, cap);
    assert_eq!(stats.trimmed_total, 3);
    assert_eq!(store.dead_letters(1).await.unwrap()[0].1.offset, Some(3));
}

fn rollup(region: &str, at: u64, tier: Tier, text: &str) -> RegionRollup {
    let region = RegionKey::of(region);
    let at = EpochMillis(at);
    match tier {
        Tier::Extractive => RegionRollup::fallback(region, at, text.into()),
        llm => RegionRollup::llm(
            region,
            at,
            text.into(),
            llm,
            "gpt-4o-mini",
            Tokens(340),
            "rollup/v1",
        ),
    }
    .with_facts(json!({"open": 3}))
}

async fn a_rollup_keeps_the_latest_version_and_prefers_the_models_at_equal_version(
    store: &dyn Store,
) {
    let north = RegionKey::of("North");
    assert_eq!(store.rollup(&north).await.unwrap(), None);
    let first = rollup("north", 1_000, Tier::Extractive, "extractive 1");
    assert_eq!(store.put_rollup(&first).await.unwrap(), PutOutcome::Stored);
    let llm = rollup("north", 1_000, Tier::Standard, "model 1");
    assert_eq!(store.put_rollup(&llm).await.unwrap(), PutOutcome::Stored);
    assert_eq!(
        store.put_rollup(&first).await.unwrap(),
        PutOutcome::Superseded
    );
    let older = rollup("North", 999, Tier::Standard, "model 0");
    assert_eq!(
        store.put_rollup(&older).await.unwrap(),
        PutOutcome::Superseded
    );
    assert_eq!(
        store.rollup(&RegionKey::of(" NORTH ")).await.unwrap(),
        Some(llm)
    );
    let newer = rollup("north", 2_000, Tier::Extractive, "extractive 2");
    assert_eq!(store.put_rollup(&newer).await.unwrap(), PutOutcome::Stored);
    assert_eq!(store.rollup(&north).await.unwrap(), Some(newer));
    assert_eq!(store.rollup(&RegionKey::of("south")).await.unwrap(), None);
}

async fn a_rollup_is_left_alone_by_the_purge_of_tickets(store: &dyn Store) {
    store
        .ingest(&[ingested_at(record(1, 1, vec![]), NOW)])
        .await
        .unwrap();
    let stored = rollup("north", NOW.as_millis(), Tier::Standard, "North: steady.");
    store.put_rollup(&stored).await.unwrap();
    let long_after = NOW.plus(StoreLimits::default().retention * 2);
    let report = store.purge_expired(long_after, 100).await.unwrap();
    assert_eq!(report.tickets, 1);
    assert_eq!(
        store.rollup(&RegionKey::of("north")).await.unwrap(),
        Some(stored)
    );
}

/// Instantiates every test for both backends.
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
    a_ticket_is_purged_its_retention_after_its_last_update,
    a_purge_takes_at_most_its_limit_and_says_more_are_due,
    the_dead_letter_stream_keeps_its_cap_and_counts_what_it_trimmed,
    ingest_is_idempotent_per_ticket_version,
    ingest_outcomes_follow_input_order_within_a_batch,
    ingest_of_a_newer_version_cancels_pending_older_work,
    closed_ticket_queues_no_technician_job,
    ingest_keeps_a_better_summary_than_the_instant_one,
    summaries_keep_the_latest_version_and_prefer_llm_at_equal_version,
    lease_serves_most_severe_first_then_earliest_then_by_job_id,
    a_job_queues_and_ages_at_its_queue_rank,
    pending_jobs_lists_the_serve_order_without_leasing,
    lease_jobs_takes_exactly_the_named_pending_jobs,
    waiting_promotes_one_severity_step_per_promote_every,
    the_aging_policy_is_applied_when_leasing,
    lease_takes_jobs_sharing_the_coalescing_key_up_to_the_cap,
    an_empty_queue_leases_nothing_and_a_zero_cap_leases_one,
    a_leased_job_is_not_leased_again,
    ack_needs_the_lease_currently_held,
    release_requeues_in_the_given_tier_keeping_arrival,
    expired_leases_are_reclaimed_and_get_a_new_token,
    an_acknowledged_job_is_never_reclaimed,
    cancel_removes_pending_jobs_below_the_version_of_the_given_kinds,
    a_job_cancelled_while_leased_is_dropped_instead_of_requeued,
    enqueue_is_idempotent_per_job_id,
    queue_stats_report_pending_leased_and_oldest_per_severity,
    a_held_job_leads_no_group_before_its_hold_ends,
    a_held_job_joins_the_group_its_key_leads,
    a_newer_version_cancels_a_held_job,
    dead_letters_are_listed_oldest_first_and_removable,
    regions_marked_by_ingest_are_taken_once,
    a_region_change_marks_the_roll_ups_of_both_regions_due,
    a_ticket_evicted_from_its_region_index_still_marks_that_region_when_it_moves,
    unknown_tickets_have_no_snapshot_and_no_summary,
    regions_list_their_tickets_latest_first,
    a_region_keeps_only_its_latest_tickets,
    a_stored_summary_owes_one_delivery_per_version,
    a_claimed_delivery_is_due_again_only_when_its_claim_runs_out,
    a_call_is_claimed_by_one_holder_until_its_claim_runs_out,
    a_call_whose_final_summary_is_stored_is_done,
    a_rollup_keeps_the_latest_version_and_prefers_the_models_at_equal_version,
    a_rollup_is_left_alone_by_the_purge_of_tickets,
);
