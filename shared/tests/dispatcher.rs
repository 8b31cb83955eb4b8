//! The dispatch step against the in-memory store and ledger on a manual clock:
//! priority order, aging, waiting within a tick, deadlines and spill, cooldowns,
//! down deployments, reclaim, the gauges, and the deadline ingest stamps being the one
//! dispatch spills by.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use stormgate_shared::classifier::Classifier;
use stormgate_shared::clock::{Clock, EpochMillis, ManualClock};
use stormgate_shared::deadline_policy::{DeadlinePolicy, PerSeverity};
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::dispatch_policy::{DispatchConfig, DispatchConfigFile};
use stormgate_shared::dispatcher::{DispatchContext, DispatchOutcome, SpillReason, dispatch_once};
use stormgate_shared::governor::{
    Admission, BurstFactor, DeploymentBudget, ExternalUsage, Governor, GovernorPolicy, Ledger,
    LedgerError, LedgerSnapshot, MemoryLedger, Reconciliation, ReportedRemaining, Reservation,
    ThrottleKind, WindowLimits,
};
use stormgate_shared::ingest::{IngestContext, IngestPolicy, RawEvent, classify_batch};
use stormgate_shared::job::{Job, JobId, LlmUse, SummaryKind, Tier};
use stormgate_shared::sample_events::{rng as sample_rng, storm_event};
use stormgate_shared::severity::Severity;
use stormgate_shared::store::Store;
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::tokens::Tokens;

const T0: EpochMillis = EpochMillis(1_800_000_000_000);

struct Rig {
    store: MemoryStore,
    governor: Governor,
    clock: ManualClock,
    config: DispatchConfig,
}

/// Premium 60k TPM and standard 120k TPM, 10% headroom, each short window holding its
/// even share (burst 1): windows of 9,000 and 18,000 tokens and 54 / 108 requests per 10 s.
fn rig(config: DispatchConfigFile) -> Rig {
    let governor = Governor::new(
        Arc::new(MemoryLedger::new()),
        GovernorPolicy {
            burst: BurstFactor::new(1).unwrap(),
            ..GovernorPolicy::default()
        },
        [
            DeploymentBudget {
                tier: Tier::Premium,
                deployment: "gpt-4o".parse().unwrap(),
                tpm: 60_000,
                rpm: 360,
            },
            DeploymentBudget {
                tier: Tier::Standard,
                deployment: "gpt-4o-mini".parse().unwrap(),
                tpm: 120_000,
                rpm: 720,
            },
        ],
    );
    Rig {
        store: MemoryStore::new(),
        governor,
        clock: ManualClock::starting_at(T0),
        config: DispatchConfig::try_from(config).unwrap(),
    }
}

fn one_job_per_call() -> DispatchConfigFile {
    DispatchConfigFile {
        max_group: 1,
        ..DispatchConfigFile::default()
    }
}

impl Rig {
    async fn tick(&self) -> DispatchOutcome {
        dispatch_once(&DispatchContext {
            store: &self.store,
            governor: &self.governor,
            clock: &self.clock,
            config: &self.config,
            emit_gauges: true,
        })
        .await
        .unwrap()
    }

    async fn enqueue(&self, jobs: &[Job]) {
        assert_eq!(self.store.enqueue(jobs).await.unwrap(), jobs.len() as u64);
    }
}

/// A premium technician job of ticket `n`, 1,000 tokens in all.
fn job(n: u32, severity: Severity, enqueued_at: EpochMillis, deadline_after: Duration) -> Job {
    Job {
        id: JobId {
            ticket: format!("{n:032x}").parse().unwrap(),
            version: 1,
            kind: SummaryKind::Technician,
        },
        number: format!("INC{n:07}"),
        severity,
        queue_rank: None,
        llm: LlmUse::Always,
        tier: Tier::Premium,
        prompt_tokens: Tokens(700),
        max_output_tokens: Tokens(300),
        enqueued_at,
        deadline: enqueued_at.plus(deadline_after),
        coalesce_key: None,
        region: None,
        hold_until: None,
    }
}

fn admitted_numbers(outcome: &DispatchOutcome, tier: Tier) -> Vec<String> {
    outcome
        .admitted
        .iter()
        .filter(|g| g.tier == tier)
        .flat_map(|g| g.leases.iter().map(|l| l.job.number.clone()))
        .collect()
}

const LONG: Duration = Duration::from_secs(3_600);

#[tokio::test]
async fn dispatcher_admits_in_severity_order() {
    let rig = rig(one_job_per_call());
    rig.enqueue(&[
        job(1, Severity::P3, T0, LONG),
        job(2, Severity::P1, T0, LONG),
        job(3, Severity::P5, T0, LONG),
        job(4, Severity::P2, T0, LONG),
    ])
    .await;
    let out = rig.tick().await;
    assert_eq!(
        admitted_numbers(&out, Tier::Premium),
        ["INC0000002", "INC0000004", "INC0000001", "INC0000003"]
    );
    assert_eq!(out.counters.admitted_calls, 4);
    assert!(out.spilled.is_empty());
    let g = &out.admitted[0];
    assert_eq!(g.reservation.tokens, Tokens(1_000));
    assert_eq!(g.cost.max_output_tokens, Tokens(300));
    assert_eq!(
        g.cost.total(),
        g.reservation.tokens,
        "admitted for its cost"
    );
    assert_eq!(g.deployment().as_str(), "gpt-4o");
}

/// The hand-off's queue message: a message an older version queued (no `prompt_tokens`,
/// the output bound at top level) is still read, and a new one keeps that field where the
/// older version reads it.
#[tokio::test]
async fn the_handoff_message_reads_what_older_versions_queued() {
    let rig = rig(one_job_per_call());
    rig.enqueue(&[job(1, Severity::P1, T0, LONG)]).await;
    let out = rig.tick().await;
    let group = &out.admitted[0];
    let mut message = serde_json::to_value(group).unwrap();
    assert_eq!(message["max_output_tokens"], 300);
    assert_eq!(message["prompt_tokens"], 700);
    message.as_object_mut().unwrap().remove("prompt_tokens");
    let older: stormgate_shared::dispatcher::AdmittedGroup =
        serde_json::from_value(message).unwrap();
    assert_eq!(older.cost.max_output_tokens, group.cost.max_output_tokens);
    assert_eq!(older.cost.prompt_tokens, Tokens::ZERO);
    assert_eq!(
        (&older.leases, &older.reservation),
        (&group.leases, &group.reservation)
    );
    // The message names its one kind and the deployment its call was admitted on, as every
    // version wrote them: the worker reads both, never regroups.
    assert_eq!(message_kind(group), "technician");
    assert_eq!(
        serde_json::to_value(group).unwrap()["reservation"]["deployment"],
        group.deployment().as_str()
    );
    assert_eq!(
        (older.kind, older.tier, older.deployment()),
        (group.kind, group.tier, group.deployment())
    );
    assert!(
        older.leases.iter().all(|l| l.job.id.kind == older.kind),
        "a hand-off holds jobs of its kind only"
    );
}

fn message_kind(group: &stormgate_shared::dispatcher::AdmittedGroup) -> String {
    serde_json::to_value(group).unwrap()["kind"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn aging_lets_a_long_waiting_p5_go_before_a_fresh_p1() {
    let rig = rig(one_job_per_call());
    // Aging step 5 min: a P5 that waited more than 20 minutes outranks a new P1.
    rig.enqueue(&[job(1, Severity::P5, T0, LONG)]).await;
    rig.clock.advance(Duration::from_secs(1_201));
    rig.enqueue(&[job(2, Severity::P1, rig.clock.now(), LONG)])
        .await;
    let out = rig.tick().await;
    assert_eq!(
        admitted_numbers(&out, Tier::Premium),
        ["INC0000001", "INC0000002"]
    );
}

#[tokio::test]
async fn spent_budget_leaves_jobs_queued_for_the_next_tick() {
    let rig = rig(DispatchConfigFile {
        max_group: 1,
        tick_budget: Duration::ZERO,
        ..DispatchConfigFile::default()
    });
    let jobs: Vec<Job> = (0..12).map(|n| job(n, Severity::P3, T0, LONG)).collect();
    rig.enqueue(&jobs).await;

    let first = rig.tick().await;
    // 9,000 tokens per 10 s window: nine calls of 1,000.
    assert_eq!(first.counters.admitted_calls, 9);
    assert_eq!(first.counters.released_jobs, 1);
    assert!(
        first.spilled.is_empty(),
        "jobs far from their deadline must not spill"
    );
    let queue = &first.gauges.as_ref().unwrap().queues[0];
    assert_eq!((queue.tier, queue.pending), (Tier::Premium, 3));

    rig.clock.advance(Duration::from_secs(5));
    assert_eq!(
        rig.tick().await.counters.admitted_calls,
        0,
        "the window is still full"
    );
    rig.clock.advance(Duration::from_secs(5));
    assert_eq!(rig.tick().await.counters.admitted_calls, 3);
}

#[tokio::test]
async fn dispatcher_waits_within_the_tick_as_the_budget_refills() {
    let rig = rig(DispatchConfigFile {
        max_group: 1,
        tick_budget: Duration::from_secs(12),
        ..DispatchConfigFile::default()
    });
    let jobs: Vec<Job> = (0..12).map(|n| job(n, Severity::P2, T0, LONG)).collect();
    rig.enqueue(&jobs).await;
    let out = rig.tick().await;
    assert_eq!(out.counters.admitted_calls, 12);
    assert!(out.counters.waits >= 1);
    // The budget refilled when the first admissions left the window, 10 s in.
    assert_eq!(out.finished_at, T0.plus(Duration::from_secs(10)));
    let late: Vec<_> = out
        .admitted
        .iter()
        .filter(|g| g.reservation.admitted_at > T0)
        .collect();
    assert_eq!(late.len(), 3);
}

#[tokio::test]
async fn job_spills_to_standard_when_premium_cannot_admit_before_its_deadline() {
    let rig = rig(one_job_per_call());
    // A 9,000-token call fills premium's window for 10 s.
    let mut big = job(1, Severity::P1, T0, LONG);
    big.prompt_tokens = Tokens(8_700);
    let urgent = job(
        2,
        Severity::P1,
        T0.plus(Duration::from_millis(1)),
        Duration::from_secs(5),
    );
    rig.enqueue(&[big, urgent]).await;
    let out = rig.tick().await;
    assert_eq!(admitted_numbers(&out, Tier::Premium), ["INC0000001"]);
    assert_eq!(admitted_numbers(&out, Tier::Standard), ["INC0000002"]);
    assert_eq!(out.counters.spilled_to_standard, 1);
    assert!(matches!(
        out.spilled[0].reason,
        SpillReason::DeadlineUnreachable { .. }
    ));
    assert_eq!(out.spilled[0].to, Tier::Standard);
}

#[tokio::test]
async fn short_cooldown_is_waited_out_and_respected() {
    let rig = rig(one_job_per_call());
    let premium = rig.governor.deployment_for(Tier::Premium).unwrap().clone();
    rig.governor
        .report_throttle(&premium, Duration::from_secs(3), T0)
        .await
        .unwrap();
    rig.enqueue(&[job(1, Severity::P1, T0, Duration::from_secs(60))])
        .await;
    let out = rig.tick().await;
    assert_eq!(out.counters.cooling_down, 1);
    assert_eq!(admitted_numbers(&out, Tier::Premium), ["INC0000001"]);
    assert_eq!(
        out.admitted[0].reservation.admitted_at,
        T0.plus(Duration::from_secs(3))
    );
}

#[tokio::test]
async fn cooldown_past_the_deadline_spills() {
    let rig = rig(one_job_per_call());
    let premium = rig.governor.deployment_for(Tier::Premium).unwrap().clone();
    rig.governor
        .report_throttle(&premium, Duration::from_secs(90), T0)
        .await
        .unwrap();
    rig.enqueue(&[job(1, Severity::P1, T0, Duration::from_secs(60))])
        .await;
    let out = rig.tick().await;
    assert_eq!(admitted_numbers(&out, Tier::Premium), Vec::<String>::new());
    assert_eq!(admitted_numbers(&out, Tier::Standard), ["INC0000001"]);
    assert!(matches!(
        out.spilled[0].reason,
        SpillReason::CoolingDown { .. }
    ));
}

#[tokio::test]
async fn down_deployments_spill_to_extractive_with_leases_held() {
    let rig = rig(one_job_per_call());
    for tier in Tier::LLM {
        let d = rig.governor.deployment_for(tier).unwrap().clone();
        rig.governor
            .report_throttle(&d, Duration::from_secs(86_400), T0)
            .await
            .unwrap();
    }
    rig.enqueue(&[
        job(1, Severity::P1, T0, LONG),
        job(2, Severity::P4, T0, LONG),
    ])
    .await;
    let out = rig.tick().await;
    assert!(out.admitted.is_empty());
    assert_eq!(out.counters.spilled_to_standard, 2);
    assert_eq!(out.counters.spilled_to_extractive, 2);
    let extractive: Vec<_> = out.extractive_work().collect();
    assert_eq!(extractive.len(), 2);
    for group in extractive {
        assert_eq!(group.from, Tier::Standard);
        assert!(matches!(group.reason, SpillReason::Down { .. }));
        for lease in &group.leases {
            // The caller writes the extractive summary, then acknowledges: the lease is live.
            assert!(rig.store.ack(lease).await.unwrap());
            assert!(!rig.store.job_exists(&lease.job.id).await.unwrap());
        }
    }
}

#[tokio::test]
async fn call_larger_than_any_window_spills() {
    let rig = rig(one_job_per_call());
    let mut huge = job(1, Severity::P2, T0, LONG);
    huge.prompt_tokens = Tokens(50_000);
    rig.enqueue(&[huge]).await;
    let out = rig.tick().await;
    assert_eq!(out.counters.spilled_to_standard, 1);
    assert_eq!(out.counters.spilled_to_extractive, 1);
    assert!(matches!(
        out.spilled[1].reason,
        SpillReason::TooLarge { .. }
    ));
}

#[tokio::test]
async fn expired_leases_are_reclaimed_and_dispatched_again() {
    let rig = rig(one_job_per_call());
    rig.enqueue(&[job(1, Severity::P2, T0, LONG)]).await;
    let first = rig.tick().await;
    assert_eq!(first.counters.admitted_jobs, 1);
    // The worker never acknowledges: once the lease expires the job comes back.
    rig.clock.advance(rig.config.lease_for());
    let again = rig.tick().await;
    assert_eq!(again.counters.reclaimed, 1);
    assert_eq!(admitted_numbers(&again, Tier::Premium), ["INC0000001"]);
}

#[tokio::test]
async fn coalesced_group_is_one_call_per_kind() {
    let rig = rig(DispatchConfigFile::default());
    let mut jobs: Vec<Job> = (0..3).map(|n| job(n, Severity::P2, T0, LONG)).collect();
    let mut customer = job(7, Severity::P2, T0, LONG);
    customer.id.kind = SummaryKind::Customer;
    jobs.push(customer);
    for j in &mut jobs {
        j.coalesce_key = Some("outage-42".into());
    }
    rig.enqueue(&jobs).await;
    let out = rig.tick().await;
    assert_eq!(out.counters.admitted_calls, 2);
    let technician = out
        .admitted
        .iter()
        .find(|g| g.kind == SummaryKind::Technician)
        .unwrap();
    assert_eq!(technician.leases.len(), 3);
    assert_eq!(technician.reservation.tokens, Tokens(3 * 700 + 300));
}

#[tokio::test]
async fn gauges_report_queues_and_deployments() {
    let rig = rig(DispatchConfigFile {
        max_group: 1,
        tick_budget: Duration::ZERO,
        ..DispatchConfigFile::default()
    });
    let jobs: Vec<Job> = (0..10).map(|n| job(n, Severity::P4, T0, LONG)).collect();
    rig.enqueue(&jobs).await;
    let out = rig.tick().await;
    let g = out.gauges.unwrap();
    let premium_queue = g.queues.iter().find(|q| q.tier == Tier::Premium).unwrap();
    assert_eq!(premium_queue.pending, 1);
    assert_eq!(premium_queue.leased, 9);
    assert_eq!(premium_queue.by_severity[3].pending, 1);
    let premium = g
        .deployments
        .iter()
        .find(|d| d.tier == Tier::Premium)
        .unwrap();
    assert_eq!(premium.ledger.window_tokens, 9_000);
    assert_eq!(premium.remaining_tokens, 0);
    assert_eq!(premium.ledger.admitted, 9);
    assert_eq!(premium.ledger.deferred, 1);
}

#[tokio::test]
async fn blocked_tier_sheds_the_jobs_its_backlog_would_keep_past_their_deadline() {
    let rig = rig(DispatchConfigFile {
        max_group: 1,
        tick_budget: Duration::ZERO,
        ..DispatchConfigFile::default()
    });
    // 40 premium jobs of 1,000 tokens, each with 20 s to get its LLM summary.
    let jobs: Vec<Job> = (0..40)
        .map(|n| {
            let at = T0.plus(Duration::from_millis(u64::from(n)));
            job(n, Severity::P1, at, Duration::from_secs(20))
        })
        .collect();
    rig.enqueue(&jobs).await;
    let out = rig.tick().await;

    // Premium's first window takes nine; it is blocked until T0 + 10 s and then admits
    // 54,000 tokens a minute, one call every 1.11 s: ten more start by T0 + 20 s.
    assert_eq!(
        out.counters.admitted_calls - admitted_numbers(&out, Tier::Standard).len() as u64,
        9
    );
    assert_eq!(out.counters.shed_jobs, 21);
    let shed: Vec<&str> = out
        .spilled
        .iter()
        .filter(|s| matches!(s.reason, SpillReason::Backlog { .. }))
        .flat_map(|s| s.leases.iter().map(|l| l.job.number.as_str()))
        .collect();
    let expected: Vec<String> = (19..40).map(|n| format!("INC{n:07}")).collect();
    assert_eq!(
        shed, expected,
        "the youngest jobs leave, the rest keep their place"
    );
    assert!(out.spilled.iter().all(|s| s.to == Tier::Standard));
    // Standard serves the shed jobs in the same tick, within its own budget.
    assert_eq!(admitted_numbers(&out, Tier::Standard).len(), 18);
    let premium = rig.store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!(premium.pending, 10);
}

#[tokio::test]
async fn jobs_the_backlog_can_serve_in_time_are_not_shed() {
    let rig = rig(DispatchConfigFile {
        max_group: 1,
        tick_budget: Duration::ZERO,
        ..DispatchConfigFile::default()
    });
    let jobs: Vec<Job> = (0..40)
        .map(|n| job(n, Severity::P1, T0, Duration::from_secs(60)))
        .collect();
    rig.enqueue(&jobs).await;
    let out = rig.tick().await;
    assert_eq!(out.counters.admitted_calls, 9);
    assert_eq!(out.counters.shed_jobs, 0);
    assert!(out.spilled.is_empty());
}

/// Ingests one P1 ticket through `classify_batch` with `deadlines`, with premium cooling
/// down for 40 s, and runs one tick: where did its technician job go, with which deadline?
async fn p1_technician_under_a_40_s_cooldown(deadlines: DeadlinePolicy) -> (Tier, EpochMillis) {
    let rig = rig(one_job_per_call());
    let mut event = storm_event(&mut sample_rng(3), 1, 1, 4_000);
    event["priority"] = "1".into();
    event["state"] = "2".into();
    let policy = IngestPolicy {
        deadlines,
        ..IngestPolicy::default()
    };
    let classifier = Classifier::embedded().unwrap();
    let ingested = classify_batch(
        &[RawEvent {
            value: event.to_string().into_bytes(),
            ..RawEvent::default()
        }],
        &IngestContext {
            store: &rig.store,
            clock: &rig.clock,
            classifier: &classifier,
            policy: &policy,
        },
    )
    .await
    .unwrap();
    assert_eq!(ingested.accepted, 1);
    let premium = rig.governor.deployment_for(Tier::Premium).unwrap().clone();
    rig.governor
        .report_throttle(&premium, Duration::from_secs(40), T0)
        .await
        .unwrap();

    let out = rig.tick().await;
    let technician = |l: &&stormgate_shared::store::Lease| l.job.id.kind == SummaryKind::Technician;
    if let Some(lease) = out.admitted.iter().flat_map(|g| &g.leases).find(technician) {
        return (lease.job.tier, lease.job.deadline);
    }
    let stats = rig.store.queue_stats(Tier::Premium).await.unwrap();
    assert!(
        stats.pending >= 1,
        "released back to premium for a later tick"
    );
    (Tier::Premium, EpochMillis::ZERO)
}

#[tokio::test]
async fn the_deadline_ingest_stamps_from_the_policy_is_the_one_dispatch_spills_by() {
    // The classifier decides whether a customer job comes too; give it the same P1 deadline.
    let table = |p1| {
        DeadlinePolicy::new(
            PerSeverity::secs(p1, 300, 900, 3_600, 14_400),
            PerSeverity::secs(p1, 600, 1_800, 7_200, 28_800),
        )
        .unwrap()
    };

    // 30 s: the cooldown outlasts the deadline, so premium gives the job to standard.
    let (tier, deadline) = p1_technician_under_a_40_s_cooldown(table(30)).await;
    assert_eq!(tier, Tier::Standard);
    assert_eq!(deadline, T0.plus(Duration::from_secs(30)));

    // 50 s: the cooldown ends in time, so the job waits for premium.
    let (tier, _) = p1_technician_under_a_40_s_cooldown(table(50)).await;
    assert_eq!(tier, Tier::Premium);
}

/// A ledger that admits `admits` calls and is unreachable from then on: Redis going
/// away in the middle of a tick.
#[derive(Debug)]
struct LedgerLostMidTick {
    inner: MemoryLedger,
    admits: AtomicU32,
}

#[async_trait]
impl Ledger for LedgerLostMidTick {
    async fn admit(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        cost: Tokens,
        now: EpochMillis,
    ) -> Result<Admission, LedgerError> {
        let left = self.admits.load(Ordering::SeqCst);
        if left == 0 {
            return Err(LedgerError::Unavailable("connection reset".into()));
        }
        self.admits.store(left - 1, Ordering::SeqCst);
        self.inner.admit(deployment, limits, cost, now).await
    }
    async fn admit_send(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        cost: Tokens,
        replacing: Option<stormgate_shared::governor::ReservationId>,
        now: EpochMillis,
    ) -> Result<Admission, LedgerError> {
        self.inner
            .admit_send(deployment, limits, cost, replacing, now)
            .await
    }
    async fn reconcile(
        &self,
        reservation: &Reservation,
        used: Tokens,
    ) -> Result<Reconciliation, LedgerError> {
        self.inner.reconcile(reservation, used).await
    }
    async fn throttle(
        &self,
        deployment: &DeploymentName,
        kind: ThrottleKind,
        until: EpochMillis,
    ) -> Result<EpochMillis, LedgerError> {
        self.inner.throttle(deployment, kind, until).await
    }
    async fn observe_remaining(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        reported: ReportedRemaining,
        now: EpochMillis,
    ) -> Result<ExternalUsage, LedgerError> {
        self.inner
            .observe_remaining(deployment, limits, reported, now)
            .await
    }
    async fn snapshot(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        now: EpochMillis,
    ) -> Result<LedgerSnapshot, LedgerError> {
        self.inner.snapshot(deployment, limits, now).await
    }
    async fn clear_throttle(&self, deployment: &DeploymentName) -> Result<(), LedgerError> {
        self.inner.clear_throttle(deployment).await
    }
}

#[tokio::test]
async fn a_tick_that_fails_midway_hands_every_job_it_leased_back_at_once() {
    let mut rig = rig(one_job_per_call());
    rig.governor = Governor::new(
        Arc::new(LedgerLostMidTick {
            inner: MemoryLedger::new(),
            admits: 2.into(),
        }),
        GovernorPolicy::default(),
        [DeploymentBudget {
            tier: Tier::Premium,
            deployment: "gpt-4o".parse().unwrap(),
            tpm: 60_000,
            rpm: 360,
        }],
    );
    rig.enqueue(&[
        job(1, Severity::P1, T0, LONG),
        job(2, Severity::P1, T0, LONG),
        job(3, Severity::P1, T0, LONG),
    ])
    .await;
    let failed = dispatch_once(&DispatchContext {
        store: &rig.store,
        governor: &rig.governor,
        clock: &rig.clock,
        config: &rig.config,
        emit_gauges: false,
    })
    .await;
    assert!(failed.is_err(), "the third admission met the lost ledger");
    // The caller's answer is discarded with the error: no job may wait for its lease.
    let stats = rig.store.queue_stats(Tier::Premium).await.unwrap();
    assert_eq!((stats.pending, stats.leased), (3, 0));
}
