//! Governor admission throughput against a local `redis-server` (started by the bench
//! on a free port), and Redis round trips per admitted job counted from
//! `INFO commandstats` deltas.
//!
//! Run: `cargo bench -p stormgate-shared --bench governor`. Every admission is followed
//! by its reconciliation, as in production (dispatch admits, the worker reconciles);
//! virtual time advances 1 ms per job so the 10 s window holds ~10,000 live entries.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use divan::Bencher;
use divan::counter::ItemsCount;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::governor::{
    Admission, DeploymentBudget, Governor, GovernorPolicy, Ledger, MemoryLedger, RedisLedger,
};
use stormgate_shared::job::Tier;
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::tokens::Tokens;

static SERVER: Mutex<Option<RedisServer>> = Mutex::new(None);
static URL: OnceLock<String> = OnceLock::new();
static VIRTUAL_NOW: AtomicU64 = AtomicU64::new(1_800_000_000_000);

/// Large enough that every call is admitted: the bench measures the admission path,
/// not waiting.
const TPM: u64 = 10_000_000_000;

fn main() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    URL.set(server.url()).unwrap();
    *SERVER.lock().unwrap() = Some(server);
    report_round_trips();
    divan::main();
    // Stop the server (statics are never dropped).
    SERVER.lock().unwrap().take();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn deployment(name: &str) -> DeploymentName {
    name.parse().unwrap()
}

fn governor(ledger: Arc<dyn Ledger>, name: &str) -> Governor {
    Governor::new(
        ledger,
        GovernorPolicy::default(),
        [DeploymentBudget {
            tier: Tier::Premium,
            deployment: deployment(name),
            tpm: TPM,
            rpm: TPM * 6 / 1_000,
        }],
    )
}

async fn redis_governor(name: &str) -> Governor {
    let client = redis::Client::open(URL.get().unwrap().as_str()).unwrap();
    let ledger = RedisLedger::new(
        redis::aio::ConnectionManager::new(client).await.unwrap(),
        "bench:gov",
    );
    ledger.preload().await.unwrap();
    governor(Arc::new(ledger), name)
}

/// One admitted job's governor traffic: its admission and its reconciliation.
async fn admit_and_reconcile(governor: &Governor, name: &DeploymentName) {
    let now = EpochMillis(VIRTUAL_NOW.fetch_add(1, Ordering::Relaxed));
    match governor.admit(name, Tokens(1_500), now).await.unwrap() {
        Admission::Admitted(r) => {
            governor.reconcile(&r, Tokens(900)).await.unwrap();
        }
        other => panic!("bench budget must admit everything, got {other:?}"),
    }
}

/// Calls per command as `INFO commandstats` reports them (commands run inside
/// scripts included), minus the INFO used to read them.
async fn command_calls(
    conn: &mut redis::aio::ConnectionManager,
) -> std::collections::BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            (name != "info").then(|| (name.to_owned(), calls))
        })
        .collect()
}

/// Prints round trips per admitted job: the commands clients sent (EVALSHA, and EVAL or
/// SCRIPT LOAD if a script had to be loaded). Commands that scripts run inside Redis
/// also appear in commandstats; they are reported apart, as work per job.
fn report_round_trips() {
    const JOBS: u64 = 2_000;
    const CLIENT_COMMANDS: [&str; 4] = ["evalsha", "eval", "script|load", "script"];
    runtime().block_on(async {
        let governor = redis_governor("round-trips").await;
        let name = deployment("round-trips");
        let client = redis::Client::open(URL.get().unwrap().as_str()).unwrap();
        let mut conn = redis::aio::ConnectionManager::new(client).await.unwrap();
        let before = command_calls(&mut conn).await;
        for _ in 0..JOBS {
            admit_and_reconcile(&governor, &name).await;
        }
        let after = command_calls(&mut conn).await;
        let delta = |names: &dyn Fn(&str) -> bool| -> u64 {
            after
                .iter()
                .filter(|(n, _)| names(n))
                .map(|(n, calls)| calls - before.get(n).copied().unwrap_or(0))
                .sum()
        };
        let round_trips = delta(&|n| CLIENT_COMMANDS.contains(&n));
        let inside = delta(&|n| !CLIENT_COMMANDS.contains(&n));
        println!(
            "governor: {JOBS} jobs admitted and reconciled with {round_trips} round trips \
             ({:.2} per job); scripts ran {:.1} Redis commands per job",
            round_trips as f64 / JOBS as f64,
            inside as f64 / JOBS as f64
        );
    });
}

/// One job at a time: admission + reconciliation latency against Redis.
#[divan::bench(sample_count = 20, sample_size = 100)]
fn redis_admit_and_reconcile_sequential(bencher: Bencher) {
    let rt = runtime();
    let governor = rt.block_on(redis_governor("sequential"));
    let name = deployment("sequential");
    bencher
        .counter(ItemsCount::new(1usize))
        .bench_local(|| rt.block_on(admit_and_reconcile(&governor, &name)));
}

/// `in_flight` jobs at once over one multiplexed connection, as a dispatcher fleet would.
#[divan::bench(args = [16, 64], sample_count = 20, sample_size = 5)]
fn redis_admit_and_reconcile_concurrent(bencher: Bencher, in_flight: usize) {
    let rt = runtime();
    let governor = rt.block_on(redis_governor(&format!("concurrent-{in_flight}")));
    let name = deployment(&format!("concurrent-{in_flight}"));
    bencher.counter(ItemsCount::new(in_flight)).bench_local(|| {
        rt.block_on(async {
            let mut calls = tokio::task::JoinSet::new();
            for _ in 0..in_flight {
                let (governor, name) = (governor.clone(), name.clone());
                calls.spawn(async move { admit_and_reconcile(&governor, &name).await });
            }
            while let Some(done) = calls.join_next().await {
                done.unwrap();
            }
        })
    });
}

/// The in-process ledger, for scale.
#[divan::bench(sample_count = 20, sample_size = 1_000)]
fn memory_admit_and_reconcile(bencher: Bencher) {
    let rt = runtime();
    let governor = governor(Arc::new(MemoryLedger::new()), "memory");
    let name = deployment("memory");
    bencher
        .counter(ItemsCount::new(1usize))
        .bench_local(|| rt.block_on(admit_and_reconcile(&governor, &name)));
}
