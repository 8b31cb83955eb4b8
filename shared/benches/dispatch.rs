//! Dispatch throughput against a local `redis-server` (started by the bench on a free
//! port): one `dispatch_once` tick over a queue of pending jobs, with the Redis store
//! and the Redis governor ledger, as the `dispatch` timer runs it.
//!
//! Each sample enqueues 256 premium jobs (outages of 8 tickets sharing a coalescing
//! key, so groups of 8 go out per call) and one tick leases, admits and hands them
//! all out. The budget admits everything: the bench measures the dispatch path, not
//! waiting. After the timed runs a counted pass prints store and ledger round trips
//! per admitted job.
//!
//! Run: `cargo bench -p stormgate-shared --features test-support --bench dispatch`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use divan::Bencher;
use divan::counter::ItemsCount;
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::dispatch_policy::DispatchConfig;
use stormgate_shared::dispatcher::{DispatchContext, DispatchOutcome, dispatch_once};
use stormgate_shared::governor::{DeploymentBudget, Governor, GovernorPolicy, RedisLedger};
use stormgate_shared::job::{Job, SummaryKind, Tier};
use stormgate_shared::severity::Severity;
use stormgate_shared::store::Store;
use stormgate_shared::store::redis::RedisStore;
use stormgate_shared::testing::fixtures::job;
use stormgate_shared::testing::redis_server::RedisServer;
use tokio::runtime::Runtime;

const JOBS_PER_TICK: usize = 256;
const OUTAGE_SIZE: usize = 8;
const NOW: EpochMillis = EpochMillis(1_800_000_000_000);
/// Large enough that every call is admitted.
const TPM: u64 = 10_000_000_000;

static NEXT_TICKET: AtomicU64 = AtomicU64::new(1);

fn main() {
    divan::main();
}

struct Rig {
    _server: RedisServer,
    runtime: Runtime,
    store: RedisStore,
    governor: Governor,
    clock: ManualClock,
    config: DispatchConfig,
}

fn rig() -> Rig {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = server.store("bench").unwrap();
    let governor = runtime.block_on(async {
        let client = redis::Client::open(server.url()).unwrap();
        let ledger = RedisLedger::new(
            redis::aio::ConnectionManager::new(client).await.unwrap(),
            "bench:gov",
        );
        ledger.preload().await.unwrap();
        Governor::new(
            Arc::new(ledger),
            GovernorPolicy::default(),
            [
                DeploymentBudget {
                    tier: Tier::Premium,
                    deployment: "gpt-4o".parse().unwrap(),
                    tpm: TPM,
                    rpm: TPM * 6 / 1_000,
                },
                DeploymentBudget {
                    tier: Tier::Standard,
                    deployment: "gpt-4o-mini".parse().unwrap(),
                    tpm: TPM,
                    rpm: TPM * 6 / 1_000,
                },
            ],
        )
    });
    // Connect and load the scripts before timing.
    runtime.block_on(store.queue_stats(Tier::Premium)).unwrap();
    Rig {
        _server: server,
        runtime,
        store,
        governor,
        clock: ManualClock::starting_at(NOW),
        config: DispatchConfig::default(),
    }
}

/// `JOBS_PER_TICK` pending premium jobs in outages of `OUTAGE_SIZE` tickets.
fn pending_jobs() -> Vec<Job> {
    (0..JOBS_PER_TICK)
        .map(|i| {
            let n = NEXT_TICKET.fetch_add(1, Ordering::Relaxed);
            let severity = Severity::ALL[(n % 2) as usize];
            let mut j = job(n, 1, SummaryKind::Technician, severity, NOW.as_millis());
            j.coalesce_key = Some(format!("outage-{}", n / OUTAGE_SIZE as u64));
            j.region = Some(["north", "south"][i % 2].to_owned());
            j.deadline = NOW.plus(std::time::Duration::from_secs(300));
            j
        })
        .collect()
}

impl Rig {
    async fn tick(&self) -> DispatchOutcome {
        dispatch_once(&DispatchContext {
            store: &self.store,
            governor: &self.governor,
            clock: &self.clock,
            config: &self.config,
            emit_gauges: false,
        })
        .await
        .unwrap()
    }

    fn enqueue(&self, jobs: &[Job]) {
        let queued = self.runtime.block_on(self.store.enqueue(jobs)).unwrap();
        assert_eq!(queued as usize, jobs.len());
    }
}

/// One tick draining `JOBS_PER_TICK` jobs: lease groups, admit each call, hand out.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn tick_draining_256_jobs(bencher: Bencher) {
    let rig = rig();
    bencher
        .counter(ItemsCount::new(JOBS_PER_TICK))
        .with_inputs(|| rig.enqueue(&pending_jobs()))
        .bench_local_values(|()| {
            let outcome = rig.runtime.block_on(rig.tick());
            assert_eq!(outcome.counters.admitted_jobs as usize, JOBS_PER_TICK);
            outcome
        });
    report_round_trips(&rig);
}

/// Store round trips (its own counter) and client commands the ledger sent, per
/// admitted job, over one counted tick.
fn report_round_trips(rig: &Rig) {
    rig.enqueue(&pending_jobs());
    let store_before = rig.store.round_trips();
    let started = std::time::Instant::now();
    let outcome = rig.runtime.block_on(rig.tick());
    let elapsed = started.elapsed();
    let jobs = outcome.counters.admitted_jobs as f64;
    let store_trips = (rig.store.round_trips() - store_before) as f64;
    println!(
        "dispatch: {jobs} jobs in {} calls in {elapsed:.2?}; store round trips {:.3} per job, \
         governor admissions {:.3} per job (one EVALSHA each)",
        outcome.counters.admitted_calls,
        store_trips / jobs,
        outcome.counters.admitted_calls as f64 / jobs,
    );
}
