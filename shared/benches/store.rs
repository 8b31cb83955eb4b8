//! Store benchmarks: ingest of 100-record batches (what classify sends) and lease +
//! ack (what dispatch and summarize do per job), against a local `redis-server` the
//! benchmark starts itself, with the in-memory store alongside for reference.
//!
//! After the timed runs a counted pass prints, per job, the Redis round trips the
//! store made (its own counter: a pipeline is one) and the commands Redis executed
//! (`INFO commandstats` deltas).
//!
//! Run: `cargo bench -p stormgate-shared --features test-support --bench store`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark harness"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use divan::Bencher;
use divan::counter::ItemsCount;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::job::{Job, SummaryKind, Tier};
use stormgate_shared::severity::Severity;
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::store::redis::RedisStore;
use stormgate_shared::store::{AgingPolicy, IngestRecord, SnapshotJson, Store};
use stormgate_shared::testing::fixtures::{job, record};
use stormgate_shared::testing::redis_server::RedisServer;
use tokio::runtime::Runtime;

const BATCH: usize = 100;
const GROUP: usize = 8;
const LEASE_FOR: Duration = Duration::from_secs(60);
const AGING: AgingPolicy = AgingPolicy {
    promote_every: Duration::from_secs(60),
};
const NOW: EpochMillis = EpochMillis(1_800_000_000_000);

/// Killed explicitly at the end of `main`: statics are never dropped.
static SERVER: Mutex<Option<RedisServer>> = Mutex::new(None);
static BED: OnceLock<Bed> = OnceLock::new();
static NEXT_TICKET: AtomicU64 = AtomicU64::new(1);

struct Bed {
    runtime: Runtime,
    redis: RedisStore,
    memory: MemoryStore,
}

fn bed() -> &'static Bed {
    BED.get().expect("main sets up the bed before benchmarking")
}

fn next_ticket() -> u64 {
    NEXT_TICKET.fetch_add(1, Ordering::Relaxed)
}

/// A ticket version as classify ingests it: a snapshot with a bounded log, the
/// instant summary, and a technician and a customer job.
fn realistic_record() -> IngestRecord {
    let n = next_ticket();
    let severity = Severity::ALL[(n % 5) as usize];
    let enqueued_at = NOW.as_millis() + n;
    let mut technician = job(n, 1, SummaryKind::Technician, severity, enqueued_at);
    technician.coalesce_key = Some(format!("emea:core-router-{}:2026-11-29T21:40", n % 50));
    technician.region = Some("emea".to_owned());
    let customer = Job {
        tier: Tier::Standard,
        ..job(n, 1, SummaryKind::Customer, severity, enqueued_at)
    };
    let mut r = record(n, 1, vec![technician, customer]);
    let mut snapshot = r.snapshot.to_value().unwrap();
    snapshot["short_description"] =
        "BGP session flapping on core router, packet loss in region".into();
    snapshot["work_notes"] = "link down on ge-0/0/1; reseated optic; monitoring. "
        .repeat(24)
        .into();
    r.snapshot = SnapshotJson::from_value(&snapshot);
    r.instant_summary.text = "Core router BGP flaps; optic reseated; loss persists. ".repeat(6);
    r.region = Some("emea".to_owned());
    r
}

fn batch() -> Vec<IngestRecord> {
    (0..BATCH).map(|_| realistic_record()).collect()
}

fn pending_jobs(count: usize, key: Option<String>) -> Vec<Job> {
    (0..count)
        .map(|_| {
            let n = next_ticket();
            let mut j = job(
                n,
                1,
                SummaryKind::Technician,
                Severity::ALL[(n % 5) as usize],
                NOW.as_millis() + n,
            );
            j.coalesce_key = key.clone();
            j
        })
        .collect()
}

async fn lease_and_ack(store: &dyn Store, max_group: usize) -> usize {
    let group = store
        .lease(Tier::Premium, NOW, LEASE_FOR, max_group, AGING)
        .await
        .unwrap();
    for lease in &group {
        assert!(store.ack(lease).await.unwrap());
    }
    group.len()
}

#[divan::bench(args = ["redis", "memory"])]
fn ingest_batch_of_100(bencher: Bencher, backend: &str) {
    let bed = bed();
    let store: &dyn Store = if backend == "redis" {
        &bed.redis
    } else {
        &bed.memory
    };
    bencher
        .counter(ItemsCount::new(BATCH))
        .with_inputs(batch)
        .bench_local_values(|records| bed.runtime.block_on(store.ingest(&records)).unwrap());
}

#[divan::bench(args = ["redis", "memory"])]
fn lease_and_ack_one(bencher: Bencher, backend: &str) {
    let bed = bed();
    let store: &dyn Store = if backend == "redis" {
        &bed.redis
    } else {
        &bed.memory
    };
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| {
            bed.runtime
                .block_on(store.enqueue(&pending_jobs(1, None)))
                .unwrap()
        })
        .bench_local_values(|_| bed.runtime.block_on(lease_and_ack(store, 1)));
}

#[divan::bench(args = ["redis", "memory"])]
fn lease_and_ack_coalesced_group_of_8(bencher: Bencher, backend: &str) {
    let bed = bed();
    let store: &dyn Store = if backend == "redis" {
        &bed.redis
    } else {
        &bed.memory
    };
    bencher
        .counter(ItemsCount::new(GROUP))
        .with_inputs(|| {
            let key = format!("outage-{}", next_ticket());
            bed.runtime
                .block_on(store.enqueue(&pending_jobs(GROUP, Some(key))))
                .unwrap()
        })
        .bench_local_values(|_| bed.runtime.block_on(lease_and_ack(store, GROUP)));
}

/// Per command since the last `CONFIG RESETSTAT`: (name, calls, microseconds).
/// Commands a script runs are listed too; the script's own time includes them.
async fn command_stats(
    connection: &mut redis::aio::MultiplexedConnection,
) -> Vec<(String, u64, u64)> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |key: &str| {
                rest.split(',')
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse::<u64>().ok())
            };
            let keep = !name.starts_with("info") && !name.starts_with("config");
            keep.then_some(())?;
            Some((name.to_owned(), field("calls")?, field("usec")?))
        })
        .collect()
}

/// CPU time this thread has run, from the kernel's scheduler statistics (Linux); the
/// benchmark's client work all runs on this thread.
fn thread_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

async fn counted<F: std::future::Future<Output = usize>>(
    label: &str,
    store: &RedisStore,
    admin: &mut redis::aio::MultiplexedConnection,
    work: F,
) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async::<()>(admin)
        .await
        .unwrap();
    let trips_before = store.round_trips();
    let cpu_before = thread_cpu();
    let started = Instant::now();
    let jobs = work.await;
    let elapsed = started.elapsed();
    let cpu = thread_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let trips = store.round_trips() - trips_before;
    let stats = command_stats(admin).await;
    let per = |n: f64| n / jobs as f64;
    let commands: u64 = stats.iter().map(|(_, calls, _)| calls).sum();
    let script_usec: u64 = stats
        .iter()
        .filter(|(name, ..)| name == "evalsha")
        .map(|(.., usec)| usec)
        .sum();
    let breakdown: Vec<String> = stats
        .iter()
        .map(|(name, calls, _)| format!("{name} {calls}"))
        .collect();
    println!(
        "{label}: {jobs} items in {elapsed:.2?} ({:.0}/s on one connection)",
        jobs as f64 / elapsed.as_secs_f64()
    );
    println!(
        "    round trips: {trips} ({:.3} per item)",
        per(trips as f64)
    );
    println!(
        "    Redis commands: {commands} ({:.2} per item: {})",
        per(commands as f64),
        breakdown.join(", ")
    );
    println!(
        "    Redis script time: {:.1} µs per item",
        per(script_usec as f64)
    );
    if let Some(cpu) = cpu {
        println!(
            "    client CPU: {:.1} µs per item",
            per(cpu.as_secs_f64() * 1e6)
        );
    }
}

async fn report_round_trips(server: &RedisServer) {
    let store = server.store("round-trips").unwrap();
    store.queue_stats(Tier::Premium).await.unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let batches: Vec<Vec<IngestRecord>> = (0..50).map(|_| batch()).collect();

    println!("\nRedis round trips (counted pass, one sequential client):");
    counted(
        "ingest, tickets in batches of 100",
        &store,
        &mut admin,
        async {
            for records in &batches {
                store.ingest(records).await.unwrap();
            }
            batches.len() * BATCH
        },
    )
    .await;
    counted(
        "lease + ack, one job per lease",
        &store,
        &mut admin,
        async {
            let mut jobs = 0;
            for _ in 0..2_000 {
                jobs += lease_and_ack(&store, 1).await;
            }
            jobs
        },
    )
    .await;
    for g in 0..200 {
        store
            .enqueue(&pending_jobs(GROUP, Some(format!("report-outage-{g}"))))
            .await
            .unwrap();
    }
    counted(
        "lease + ack, coalesced groups of 8",
        &store,
        &mut admin,
        async {
            let mut jobs = 0;
            for _ in 0..200 {
                jobs += lease_and_ack(&store, GROUP).await;
            }
            jobs
        },
    )
    .await;
}

fn main() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let redis = server.store("bench").unwrap();
    runtime.block_on(redis.queue_stats(Tier::Premium)).unwrap();
    let state = Bed {
        runtime,
        redis,
        memory: MemoryStore::new(),
    };
    if BED.set(state).is_err() {
        panic!("bench bed set twice");
    }
    *SERVER.lock().unwrap() = Some(server);

    divan::main();

    let server = SERVER
        .lock()
        .unwrap()
        .take()
        .expect("server kept until the end");
    bed().runtime.block_on(report_round_trips(&server));
}
