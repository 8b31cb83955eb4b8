//! Several dispatchers, each with its own connections, leasing from the same Redis
//! queues and admitting through the same Redis ledger concurrently: the budget and a
//! cooldown hold for the fleet as a whole.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use stormgate_shared::clock::{Clock, EpochMillis, ManualClock};
use stormgate_shared::dispatch_policy::{DispatchConfig, DispatchConfigFile};
use stormgate_shared::dispatcher::{DispatchContext, dispatch_once};
use stormgate_shared::governor::{
    DeploymentBudget, Governor, GovernorPolicy, RedisLedger, Reservation, WindowLimits,
};
use stormgate_shared::job::{Job, JobId, LlmUse, SummaryKind, Tier};
use stormgate_shared::severity::Severity;
use stormgate_shared::store::Store;
use stormgate_shared::store::redis::RedisStore;
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::tokens::Tokens;

const DISPATCHERS: u32 = 4;
const JOBS_EACH: u32 = 150;
const T0: EpochMillis = EpochMillis(1_800_000_000_000);

fn budgets() -> [DeploymentBudget; 1] {
    [DeploymentBudget {
        tier: Tier::Premium,
        deployment: "gpt-4o".parse().unwrap(),
        tpm: 60_000,
        rpm: 360,
    }]
}

fn job(instance: u32, n: u32) -> Job {
    Job {
        id: JobId {
            ticket: format!("{instance:08x}{n:024x}").parse().unwrap(),
            version: 1,
            kind: SummaryKind::Technician,
        },
        number: format!("INC{instance}{n:06}"),
        severity: Severity::P3,
        queue_rank: None,
        llm: LlmUse::Always,
        tier: Tier::Premium,
        prompt_tokens: Tokens(400 + u64::from(n % 7) * 100),
        max_output_tokens: Tokens(200),
        enqueued_at: T0,
        deadline: T0.plus(Duration::from_secs(86_400)),
        coalesce_key: None,
        region: None,
        hold_until: None,
    }
}

/// One dispatcher instance: its own connections to the shared queues and ledger.
struct Instance {
    store: RedisStore,
    governor: Governor,
}

async fn instance(server: &RedisServer) -> Instance {
    let ledger = RedisLedger::new(server.connection_manager().await.unwrap(), "fleet:gov");
    let store = server.store("fleet").unwrap();
    Instance {
        store,
        governor: Governor::new(Arc::new(ledger), GovernorPolicy::default(), budgets()),
    }
}

/// Runs every instance's dispatch loop concurrently for `ticks` ticks of 1 s.
async fn run_fleet(
    instances: &[Arc<Instance>],
    clock: &ManualClock,
    config: DispatchConfig,
    ticks: u32,
) -> Vec<Reservation> {
    let mut tasks = Vec::new();
    for inst in instances {
        let inst = inst.clone();
        let clock = clock.clone();
        tasks.push(tokio::spawn(async move {
            let mut admitted = Vec::new();
            for _ in 0..ticks {
                let ctx = DispatchContext {
                    store: &inst.store,
                    governor: &inst.governor,
                    clock: &clock,
                    config: &config,
                    emit_gauges: false,
                };
                let out = dispatch_once(&ctx).await.unwrap();
                for group in out.admitted {
                    for lease in &group.leases {
                        assert!(inst.store.ack(lease).await.unwrap());
                    }
                    admitted.push(group.reservation);
                }
                clock.sleep(Duration::from_secs(1)).await;
            }
            admitted
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

fn assert_windows_hold(admitted: &[Reservation], limits: WindowLimits) {
    for start in admitted {
        let inside: Vec<_> = admitted
            .iter()
            .filter(|r| {
                r.admitted_at >= start.admitted_at
                    && r.admitted_at.0 < start.admitted_at.0 + limits.window_ms
            })
            .collect();
        let tokens: u64 = inside.iter().map(|r| r.tokens.0).sum();
        assert!(
            tokens <= limits.tokens,
            "{tokens} tokens in the window from {}",
            start.admitted_at
        );
        assert!(inside.len() as u64 <= limits.requests);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fleet_of_dispatchers_shares_one_budget_and_one_cooldown() {
    let server = RedisServer::start().unwrap();
    let clock = ManualClock::starting_at(T0);
    let config = DispatchConfig::try_from(DispatchConfigFile {
        max_group: 1,
        tick_budget: Duration::from_secs(2),
        ..DispatchConfigFile::default()
    })
    .unwrap();
    let mut instances = Vec::new();
    for _ in 0..DISPATCHERS {
        instances.push(Arc::new(instance(&server).await));
    }
    let jobs: Vec<Job> = (0..DISPATCHERS)
        .flat_map(|n| (0..JOBS_EACH).map(move |j| job(n, j)))
        .collect();
    instances[0].store.enqueue(&jobs).await.unwrap();
    let limits = instances[0]
        .governor
        .limits(&"gpt-4o".parse().unwrap())
        .unwrap();

    let phase_one = run_fleet(&instances, &clock, config, 15).await;
    assert_windows_hold(&phase_one, limits);
    let ids: std::collections::BTreeSet<_> = phase_one.iter().map(|r| r.id).collect();
    assert_eq!(
        ids.len(),
        phase_one.len(),
        "reservation ids are unique across the fleet"
    );
    let tokens: u64 = phase_one.iter().map(|r| r.tokens.0).sum();
    assert!(
        tokens > 2 * limits.tokens,
        "the fleet must have run through several windows, got {tokens}"
    );
    let queue = instances[0].store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!(queue.leased, 0, "every admitted job was acknowledged");
    assert_eq!(
        queue.pending,
        u64::from(DISPATCHERS * JOBS_EACH) - phase_one.len() as u64
    );

    // One worker sees a 429 asking for 30 s: nobody in the fleet calls before then.
    let throttled_at = clock.now();
    let premium = "gpt-4o".parse().unwrap();
    instances[1]
        .governor
        .report_throttle(&premium, Duration::from_secs(30), throttled_at)
        .await
        .unwrap();
    let until = throttled_at.plus(Duration::from_secs(30));
    let phase_two = run_fleet(&instances, &clock, config, 40).await;
    assert!(
        !phase_two.is_empty(),
        "admissions resume after the cooldown"
    );
    for r in &phase_two {
        assert!(
            r.admitted_at >= until,
            "admitted at {} during the cooldown until {until}",
            r.admitted_at
        );
    }

    let all: Vec<_> = phase_one.into_iter().chain(phase_two).collect();
    assert_windows_hold(&all, limits);
}
