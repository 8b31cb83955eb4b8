//! Scheduler invariants of the store under random workloads on virtual time:
//! - none lost, none duplicated: under random enqueues (some on a coalescing hold),
//!   leases, acks, releases, worker crashes (leases abandoned), reclaims and time jumps,
//!   every job queued is either acknowledged exactly once or still pending, held or
//!   leased, no job is held under two live leases, and no job leads a group before
//!   its hold ends (unless an earlier lease of it ended it);
//! - bounded waiting: with a consumer that keeps draining, every lease takes the best
//!   pending job by effective priority, no job is overtaken by one that arrived after
//!   its aging horizon, and so a P5's wait is bounded by the work that arrived before
//!   that horizon, however many P1s keep coming.
//!
//! The full runs use the in-memory store; a smaller run of the first property checks
//! the Redis store against a real `redis-server`.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: failing loudly is the point"
)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::job::{Job, SummaryKind, Tier};
use stormgate_shared::severity::Severity;
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::store::{AgingPolicy, Lease, Store, queue_order};
use stormgate_shared::testing::fixtures::job;
use stormgate_shared::testing::redis_server::RedisServer;

const LEASE_FOR: Duration = Duration::from_secs(30);
const AGING: AgingPolicy = AgingPolicy {
    promote_every: Duration::from_secs(20),
};
const TIERS: [Tier; 2] = [Tier::Premium, Tier::Standard];
/// Holds end before `drain_everything`'s clock jump of two lease periods.
const MAX_HOLD_MS: u64 = 50_000;

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        rank: u8,
        tier: usize,
        key: Option<u8>,
        /// Held this many ms from now, if at all.
        hold: Option<u64>,
    },
    Lease {
        tier: usize,
        max_group: usize,
    },
    Ack(usize),
    /// The worker holding this lease dies: nobody acks or releases it.
    Crash(usize),
    Release {
        lease: usize,
        spill: bool,
    },
    /// A worker whose lease was reclaimed finishes late and tries to ack.
    LateAck(usize),
    Reclaim,
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u8..=5, 0usize..2, proptest::option::of(0u8..3), proptest::option::of(0u64..=MAX_HOLD_MS)).prop_map(|(rank, tier, key, hold)| Op::Enqueue { rank, tier, key, hold }),
        3 => (0usize..2, 1usize..4).prop_map(|(tier, max_group)| Op::Lease { tier, max_group }),
        2 => any::<usize>().prop_map(Op::Ack),
        1 => any::<usize>().prop_map(Op::Crash),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(lease, spill)| Op::Release { lease, spill }),
        1 => any::<usize>().prop_map(Op::LateAck),
        1 => Just(Op::Reclaim),
        1 => (0u64..45_000).prop_map(Op::Advance),
    ]
}

/// A lease as the test's workers hold it.
struct Held {
    lease: Lease,
    crashed: bool,
}

/// What the test knows must be true of the store.
#[derive(Default)]
struct Model {
    now: u64,
    next_ticket: u64,
    queued: BTreeSet<String>,
    acked: BTreeSet<String>,
    held: Vec<Held>,
    /// Jobs leased at least once: released or reclaimed, they are served without a hold.
    leased_before: BTreeSet<String>,
    /// Leases reclaimed from their (possibly still running) workers.
    void: Vec<Lease>,
}

impl Model {
    fn live_worker(&self, pick: usize) -> Option<usize> {
        let live: Vec<usize> = (0..self.held.len())
            .filter(|&i| !self.held[i].crashed)
            .collect();
        (!live.is_empty()).then(|| live[pick % live.len()])
    }
}

fn new_job(model: &mut Model, rank: u8, tier: usize, key: Option<u8>, hold: Option<u64>) -> Job {
    model.next_ticket += 1;
    let severity = Severity::from_rank(rank).unwrap();
    let mut job = job(
        model.next_ticket,
        1,
        SummaryKind::Technician,
        severity,
        model.now,
    );
    job.tier = TIERS[tier];
    job.coalesce_key = key.map(|k| format!("outage-{k}"));
    job.hold_until = hold.map(|ms| EpochMillis(model.now + ms));
    job
}

async fn apply(store: &dyn Store, model: &mut Model, op: &Op) -> Result<(), TestCaseError> {
    let now = EpochMillis(model.now);
    match *op {
        Op::Enqueue {
            rank,
            tier,
            key,
            hold,
        } => {
            let job = new_job(model, rank, tier, key, hold);
            prop_assert_eq!(store.enqueue(std::slice::from_ref(&job)).await.unwrap(), 1);
            model.queued.insert(job.id.to_string());
        }
        Op::Lease { tier, max_group } => {
            let group = store
                .lease(TIERS[tier], now, LEASE_FOR, max_group, AGING)
                .await
                .unwrap();
            prop_assert!(group.len() <= max_group);
            if let Some(leader) = group.first() {
                let id = leader.job.id.to_string();
                prop_assert!(
                    leader.job.hold_until.is_none_or(|end| end <= now)
                        || model.leased_before.contains(&id),
                    "{} led a group while held",
                    id
                );
            }
            for lease in group {
                model.leased_before.insert(lease.job.id.to_string());
                let id = lease.job.id.to_string();
                prop_assert!(
                    model.queued.contains(&id) && !model.acked.contains(&id),
                    "leased unknown or acked {}",
                    id
                );
                prop_assert!(
                    !model.held.iter().any(|h| h.lease.job.id == lease.job.id),
                    "{} held twice",
                    id
                );
                model.held.push(Held {
                    lease,
                    crashed: false,
                });
            }
        }
        Op::Ack(pick) => {
            let Some(i) = model.live_worker(pick) else {
                return Ok(());
            };
            let held = model.held.remove(i);
            prop_assert!(
                store.ack(&held.lease).await.unwrap(),
                "a held lease must ack"
            );
            prop_assert!(
                model.acked.insert(held.lease.job.id.to_string()),
                "acked twice"
            );
        }
        Op::Crash(pick) => {
            if let Some(i) = model.live_worker(pick) {
                model.held[i].crashed = true;
            }
        }
        Op::Release { lease, spill } => {
            let Some(i) = model.live_worker(lease) else {
                return Ok(());
            };
            let held = model.held.remove(i);
            let tier = if spill {
                Tier::Standard
            } else {
                held.lease.job.tier
            };
            prop_assert!(
                store.release(&held.lease, tier).await.unwrap(),
                "a held lease must release"
            );
        }
        Op::LateAck(pick) => {
            if !model.void.is_empty() {
                let lease = &model.void[pick % model.void.len()];
                prop_assert!(
                    !store.ack(lease).await.unwrap(),
                    "a reclaimed lease must not ack"
                );
            }
        }
        Op::Reclaim => {
            let (expired, kept): (Vec<Held>, Vec<Held>) = model
                .held
                .drain(..)
                .partition(|h| h.lease.expires_at <= now);
            model.held = kept;
            prop_assert_eq!(
                store.reclaim_expired(now).await.unwrap(),
                expired.len() as u64
            );
            model.void.extend(expired.into_iter().map(|h| h.lease));
        }
        Op::Advance(ms) => model.now += ms,
    }
    Ok(())
}

/// Pending, held and leased in the store equal queued minus acknowledged in the model.
async fn check_accounting(store: &dyn Store, model: &Model) -> Result<(), TestCaseError> {
    let (mut pending, mut leased) = (0, 0);
    for tier in TIERS {
        let stats = store.queue_stats(tier).await.unwrap();
        pending += stats.pending + stats.held;
        leased += stats.leased;
    }
    prop_assert_eq!(leased, model.held.len() as u64);
    prop_assert_eq!(
        pending + leased,
        (model.queued.len() - model.acked.len()) as u64
    );
    Ok(())
}

/// Lets every lease expire, reclaims, and drains both tiers: everything queued must
/// end acknowledged exactly once.
async fn drain_everything(store: &dyn Store, model: &mut Model) -> Result<(), TestCaseError> {
    model.now += 2 * LEASE_FOR.as_millis() as u64;
    apply(store, model, &Op::Reclaim).await?;
    for tier in TIERS {
        loop {
            let group = store
                .lease(tier, EpochMillis(model.now), LEASE_FOR, 3, AGING)
                .await
                .unwrap();
            if group.is_empty() {
                break;
            }
            for lease in group {
                prop_assert!(store.ack(&lease).await.unwrap());
                prop_assert!(model.acked.insert(lease.job.id.to_string()), "acked twice");
            }
        }
    }
    prop_assert_eq!(&model.acked, &model.queued);
    for id in &model.queued {
        prop_assert!(model.acked.contains(id));
    }
    check_accounting(store, model).await
}

async fn run_workload(store: &dyn Store, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut model = Model::default();
    for op in ops {
        apply(store, &mut model, op).await?;
        check_accounting(store, &model).await?;
    }
    drain_everything(store, &mut model).await
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn workloads() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(), 1..120)
}

#[test]
fn memory_store_loses_and_duplicates_no_job_under_crashes_and_reclaims() {
    let rt = runtime();
    let mut runner = TestRunner::new(Config {
        cases: 256,
        ..Config::default()
    });
    runner
        .run(&workloads(), |ops| {
            rt.block_on(run_workload(&MemoryStore::new(), &ops))
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn redis_store_loses_and_duplicates_no_job_under_crashes_and_reclaims() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let rt = runtime();
    let case = AtomicU64::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 24,
        ..Config::default()
    });
    runner
        .run(&workloads(), |ops| {
            // A fresh namespace per case (and per shrinking step) on the one server.
            let store = server
                .store(&format!("case-{}", case.fetch_add(1, Ordering::Relaxed)))
                .unwrap();
            rt.block_on(run_workload(&store, &ops))
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// One job's life in the draining scenario.
struct Served {
    job: Job,
    leased_at: u64,
}

const TICK: u64 = 1_000;

/// Arrivals per tick: the severities of the jobs arriving at that tick.
fn arrival_patterns() -> impl Strategy<Value = (u64, Vec<Vec<u8>>)> {
    let tick = proptest::collection::vec(prop_oneof![3 => Just(1u8), 1 => 2u8..=5], 0..3);
    (
        prop_oneof![Just(2u64), Just(5), Just(15)],
        proptest::collection::vec(tick, 1..80),
    )
}

/// Each tick: arrivals are queued, then the consumer leases one job and acks it.
async fn serve_draining(
    store: &dyn Store,
    aging: AgingPolicy,
    arrivals: &[Vec<u8>],
) -> Result<Vec<Served>, TestCaseError> {
    let mut pending: Vec<Job> = Vec::new();
    let mut served = Vec::new();
    let mut ticket = 0;
    let mut tick = 0u64;
    while (tick as usize) < arrivals.len() || !pending.is_empty() {
        let now = tick * TICK;
        for &rank in arrivals.get(tick as usize).map_or(&[][..], Vec::as_slice) {
            ticket += 1;
            let job = job(
                ticket,
                1,
                SummaryKind::Technician,
                Severity::from_rank(rank).unwrap(),
                now,
            );
            store.enqueue(std::slice::from_ref(&job)).await.unwrap();
            pending.push(job);
        }
        let group = store
            .lease(Tier::Premium, EpochMillis(now), LEASE_FOR, 1, aging)
            .await
            .unwrap();
        if let Some(lease) = group.first() {
            let best = pending.iter().map(|j| queue_order(&aging, j)).min();
            prop_assert_eq!(
                Some(queue_order(&aging, &lease.job)),
                best,
                "lease must take the best pending job"
            );
            pending.retain(|j| j.id != lease.job.id);
            prop_assert!(store.ack(lease).await.unwrap());
            served.push(Served {
                job: lease.job.clone(),
                leased_at: now,
            });
        } else {
            prop_assert!(pending.is_empty(), "a non-empty queue leased nothing");
        }
        tick += 1;
    }
    Ok(served)
}

fn check_aging_bounds(aging: &AgingPolicy, served: &[Served]) -> Result<(), TestCaseError> {
    for (position, j) in served.iter().enumerate() {
        let horizon = aging.effective_score(j.job.severity, j.job.enqueued_at);
        let arrival = j.job.enqueued_at.as_millis();
        // Nobody who arrived after J's horizon was served before J.
        for k in &served[..position] {
            prop_assert!(
                k.job.enqueued_at.as_millis() <= horizon,
                "{} (arrived {}) overtook {} {} whose horizon was {}",
                k.job.id,
                k.job.enqueued_at.as_millis(),
                j.job.severity,
                j.job.id,
                horizon
            );
        }
        // So J waits at most one tick per job that arrived by its horizon and was
        // still unserved when J arrived (J included).
        let ahead = served
            .iter()
            .filter(|k| k.job.enqueued_at.as_millis() <= horizon && k.leased_at >= arrival)
            .count() as u64;
        prop_assert!(
            j.leased_at - arrival < ahead * TICK,
            "{} {} waited {} ms with only {} jobs ahead of its horizon",
            j.job.severity,
            j.job.id,
            j.leased_at - arrival,
            ahead
        );
    }
    Ok(())
}

#[test]
fn no_job_waits_beyond_its_aging_bound_while_the_consumer_keeps_draining() {
    let rt = runtime();
    let mut runner = TestRunner::new(Config {
        cases: 200,
        ..Config::default()
    });
    runner
        .run(&arrival_patterns(), |(promote_secs, arrivals)| {
            let aging = AgingPolicy {
                promote_every: Duration::from_secs(promote_secs),
            };
            let served = rt.block_on(serve_draining(&MemoryStore::new(), aging, &arrivals))?;
            check_aging_bounds(&aging, &served)
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_p5_is_served_within_its_bound_under_a_steady_p1_stream() {
    // One P1 arrives every tick and one job is served per tick: without aging the P5
    // would wait for ever. With it, the P5 goes once four steps have passed.
    let rt = runtime();
    let aging = AgingPolicy {
        promote_every: Duration::from_secs(10),
    };
    let mut arrivals = vec![vec![5u8, 1]];
    arrivals.extend(std::iter::repeat_n(vec![1u8], 200));
    let served = rt
        .block_on(serve_draining(&MemoryStore::new(), aging, &arrivals))
        .unwrap();
    let p5 = served
        .iter()
        .find(|s| s.job.severity == Severity::P5)
        .unwrap();
    assert!(
        p5.leased_at <= 4 * 10_000 + TICK,
        "P5 waited {} ms",
        p5.leased_at
    );
    assert!(
        p5.leased_at >= 4 * 10_000 - TICK,
        "P5 jumped the queue at {} ms",
        p5.leased_at
    );
}
