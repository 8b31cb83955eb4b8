//! Property test of the dispatch loop on virtual time: whatever the arrivals, sizes,
//! worker delays and worker crashes, every job ends acknowledged with a summary (LLM or
//! extractive) — none lost, none served twice — and no governor window is exceeded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::Config;
use stormgate_shared::clock::{Clock, EpochMillis, ManualClock};
use stormgate_shared::deadline_policy::DeadlinePolicy;
use stormgate_shared::dispatch_policy::{DispatchConfig, DispatchConfigFile};
use stormgate_shared::dispatcher::{DispatchContext, dispatch_once};
use stormgate_shared::governor::{
    DeploymentBudget, Governor, GovernorPolicy, MemoryLedger, Reservation, WindowLimits,
};
use stormgate_shared::job::{Job, JobId, LlmUse, SummaryKind, Tier};
use stormgate_shared::severity::Severity;
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::store::{Lease, Store};
use stormgate_shared::tokens::Tokens;

const T0: EpochMillis = EpochMillis(1_800_000_000_000);
const TICK: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
struct Arrival {
    at_ms: u64,
    severity: u8,
    prompt: u64,
    customer: bool,
    outage: Option<u8>,
}

/// What the worker does with an admitted group: acknowledge after `delay_ms`, or die
/// (then the lease expires and dispatch reclaims the jobs).
#[derive(Debug, Clone, Copy)]
struct Worker {
    delay_ms: u64,
    crashes: bool,
    used_permille: u64,
}

fn arrivals() -> impl Strategy<Value = Vec<Arrival>> {
    prop::collection::vec(
        (
            0u64..180_000,
            1u8..=5,
            100u64..4_000,
            any::<bool>(),
            prop::option::of(0u8..4),
        )
            .prop_map(|(at_ms, severity, prompt, customer, outage)| Arrival {
                at_ms,
                severity,
                prompt,
                customer,
                outage,
            }),
        1..120,
    )
}

fn workers() -> impl Strategy<Value = Vec<Worker>> {
    prop::collection::vec(
        (0u64..60_000, prop::bool::weighted(0.15), 0u64..=1_000).prop_map(
            |(delay_ms, crashes, used_permille)| Worker {
                delay_ms,
                crashes,
                used_permille,
            },
        ),
        1..60,
    )
}

fn job(n: usize, a: &Arrival, deadlines: &DeadlinePolicy) -> Job {
    let severity = Severity::from_rank(a.severity).unwrap();
    let kind = if a.customer {
        SummaryKind::Customer
    } else {
        SummaryKind::Technician
    };
    let enqueued_at = T0.plus(Duration::from_millis(a.at_ms));
    Job {
        id: JobId {
            ticket: format!("{n:032x}").parse().unwrap(),
            version: 1,
            kind,
        },
        number: format!("INC{n:07}"),
        severity,
        queue_rank: None,
        llm: LlmUse::Always,
        tier: if severity <= Severity::P2 {
            Tier::Premium
        } else {
            Tier::Standard
        },
        prompt_tokens: Tokens(a.prompt),
        max_output_tokens: Tokens(300),
        enqueued_at,
        deadline: deadlines.deadline(enqueued_at, severity, kind),
        coalesce_key: a.outage.map(|o| format!("outage-{o}")),
        region: None,
        hold_until: None,
    }
}

fn assert_windows_hold(
    admitted: &[(Reservation, u64)],
    limits: WindowLimits,
) -> Result<(), TestCaseError> {
    for (start, _) in admitted {
        let (tokens, requests) = admitted
            .iter()
            .filter(|(r, _)| {
                r.admitted_at >= start.admitted_at
                    && r.admitted_at.0 < start.admitted_at.0 + limits.window_ms
            })
            .fold((0, 0), |(t, n), (_, charge)| (t + charge, n + 1));
        prop_assert!(
            tokens <= limits.tokens,
            "{tokens} tokens in a window of {}",
            limits.tokens
        );
        prop_assert!(requests <= limits.requests);
    }
    Ok(())
}

async fn run(arrivals: Vec<Arrival>, workers: Vec<Worker>) -> Result<(), TestCaseError> {
    let clock = ManualClock::starting_at(T0);
    let store = MemoryStore::new();
    // Small quotas, so budget, deferral and spill all happen.
    let governor = Governor::new(
        Arc::new(MemoryLedger::new()),
        GovernorPolicy::default(),
        [
            DeploymentBudget {
                tier: Tier::Premium,
                deployment: "premium".parse().unwrap(),
                tpm: 30_000,
                rpm: 180,
            },
            DeploymentBudget {
                tier: Tier::Standard,
                deployment: "standard".parse().unwrap(),
                tpm: 60_000,
                rpm: 360,
            },
        ],
    );
    let config = DispatchConfig::try_from(DispatchConfigFile {
        max_group: 4,
        ..DispatchConfigFile::default()
    })
    .unwrap();
    let jobs: Vec<Job> = arrivals
        .iter()
        .enumerate()
        .map(|(n, a)| job(n, a, &DeadlinePolicy::default()))
        .collect();

    let mut pending_arrivals: Vec<&Job> = jobs.iter().collect();
    pending_arrivals.sort_by_key(|j| j.enqueued_at);
    let mut pending_arrivals = pending_arrivals.into_iter().peekable();
    // Acks the workers will do: (when, lease, reservation, used).
    let mut in_flight: Vec<(EpochMillis, Lease, Option<Reservation>, u64)> = Vec::new();
    let mut summarized: BTreeMap<String, u32> = BTreeMap::new();
    let mut admitted: BTreeMap<Tier, Vec<(Reservation, u64)>> = BTreeMap::new();
    let mut next_worker = 0usize;
    let deadline = T0.plus(Duration::from_secs(4 * 3_600));

    while summarized.len() < jobs.len() && clock.now() < deadline {
        let now = clock.now();
        let arrived: Vec<Job> =
            std::iter::from_fn(|| pending_arrivals.next_if(|j| j.enqueued_at <= now).cloned())
                .collect();
        store.enqueue(&arrived).await.unwrap();

        in_flight.sort_by_key(|f| f.0);
        while in_flight.first().is_some_and(|f| f.0 <= now) {
            let (_, lease, reservation, used) = in_flight.remove(0);
            if let Some(r) = &reservation {
                governor.reconcile(r, Tokens(used)).await.unwrap();
            }
            if store.ack(&lease).await.unwrap() {
                *summarized.entry(lease.job.id.to_string()).or_default() += 1;
            }
        }

        let out = dispatch_once(&DispatchContext {
            store: &store,
            governor: &governor,
            clock: &clock,
            config: &config,
            emit_gauges: false,
        })
        .await
        .unwrap();
        for spill in out.extractive_work() {
            for lease in &spill.leases {
                // The extractive summary is written at once, then acknowledged.
                prop_assert!(store.ack(lease).await.unwrap(), "extractive lease lost");
                *summarized.entry(lease.job.id.to_string()).or_default() += 1;
            }
        }
        for group in out.admitted {
            // The scripted behaviours first (crashes included), then healthy workers:
            // a finite number of crashes, as after a bad deployment or a node loss.
            let w = workers.get(next_worker).copied().unwrap_or(Worker {
                delay_ms: 1_000,
                crashes: false,
                used_permille: 500,
            });
            next_worker += 1;
            let used = group.reservation.tokens.0 * w.used_permille / 1_000;
            let charge = if w.crashes {
                group.reservation.tokens.0
            } else {
                used
            };
            admitted
                .entry(group.tier)
                .or_default()
                .push((group.reservation.clone(), charge));
            if w.crashes {
                continue; // the lease expires and dispatch reclaims the jobs
            }
            let done = clock.now().plus(Duration::from_millis(w.delay_ms));
            for (i, lease) in group.leases.into_iter().enumerate() {
                let reservation = (i == 0).then(|| group.reservation.clone());
                in_flight.push((done, lease, reservation, used));
            }
        }
        let next = now.plus(TICK);
        clock.advance_to(next);
    }

    prop_assert_eq!(summarized.len(), jobs.len(), "jobs left without a summary");
    prop_assert!(
        summarized.values().all(|&n| n == 1),
        "a job was summarized twice"
    );
    for tier in Tier::LLM {
        let deployment = governor.deployment_for(tier).unwrap().clone();
        assert_windows_hold(
            admitted.get(&tier).map_or(&[][..], Vec::as_slice),
            governor.limits(&deployment).unwrap(),
        )?;
    }
    for tier in Tier::LLM {
        let stats = store.queue_stats(tier).await.unwrap();
        prop_assert_eq!((stats.pending, stats.leased), (0, 0));
    }
    Ok(())
}

proptest! {
    #![proptest_config(Config::with_cases(48))]

    #[test]
    fn every_job_ends_with_exactly_one_summary_within_budget(arrivals in arrivals(), workers in workers()) {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(run(arrivals, workers))?;
    }
}
