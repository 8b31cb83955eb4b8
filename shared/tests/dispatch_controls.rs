//! Operators' controls acting on dispatch, with the controls read from a control store as
//! the `dispatch` tick reads them: a paused tier is not served, a tier forced to
//! extractive-only spends nothing, a deployment marked down spills, a TPM override
//! shrinks admission until it ends by itself, and a mark up ends a daily-quota down time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use stormgate_shared::clock::{Clock, EpochMillis, ManualClock};
use stormgate_shared::control_actions::{ControlAction, ControlContext, ControlRequest, apply};
use stormgate_shared::controls::memory::MemoryControls;
use stormgate_shared::controls::{ControlState, ControlStore};
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::dispatch_policy::{DispatchConfig, DispatchConfigFile};
use stormgate_shared::dispatcher::{
    DispatchContext, DispatchOutcome, SpillReason, dispatch_controlled,
};
use stormgate_shared::governor::{
    BurstFactor, DeploymentBudget, Governor, GovernorPolicy, MemoryLedger,
};
use stormgate_shared::ingest::IngestPolicy;
use stormgate_shared::job::{Job, JobId, LlmUse, SummaryKind, Tier};
use stormgate_shared::severity::Severity;
use stormgate_shared::store::Store;
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::tokens::Tokens;

const T0: EpochMillis = EpochMillis(1_800_000_000_000);
const LONG: Duration = Duration::from_secs(3_600);

struct Rig {
    store: MemoryStore,
    governor: Governor,
    controls: MemoryControls,
    clock: ManualClock,
    config: DispatchConfig,
    policy: IngestPolicy,
}

fn premium() -> DeploymentName {
    "gpt-4o".parse().unwrap()
}

fn rig() -> Rig {
    let governor = Governor::new(
        Arc::new(MemoryLedger::new()),
        GovernorPolicy {
            burst: BurstFactor::new(1).unwrap(),
            ..GovernorPolicy::default()
        },
        [
            DeploymentBudget {
                tier: Tier::Premium,
                deployment: premium(),
                tpm: 60_000,
                rpm: 60_000 * 6 / 1_000,
            },
            DeploymentBudget {
                tier: Tier::Standard,
                deployment: "gpt-4o-mini".parse().unwrap(),
                tpm: 120_000,
                rpm: 120_000 * 6 / 1_000,
            },
        ],
    );
    Rig {
        store: MemoryStore::new(),
        governor,
        controls: MemoryControls::new(),
        clock: ManualClock::starting_at(T0),
        config: DispatchConfig::try_from(DispatchConfigFile {
            max_group: 1,
            ..DispatchConfigFile::default()
        })
        .unwrap(),
        policy: IngestPolicy::default(),
    }
}

impl Rig {
    /// One tick as `dispatch` runs it: the controls read once, the governor under them.
    async fn tick(&self) -> DispatchOutcome {
        let now = self.clock.now();
        let controls: ControlState = self.controls.state(now).await.unwrap();
        let governor = self.governor.with_controls(&controls, now);
        dispatch_controlled(
            &DispatchContext {
                store: &self.store,
                governor: &governor,
                clock: &self.clock,
                config: &self.config,
                emit_gauges: false,
            },
            &controls,
        )
        .await
        .unwrap()
    }

    async fn act(&self, action: ControlAction) {
        let ctx = ControlContext {
            controls: &self.controls,
            store: &self.store,
            governor: &self.governor,
            ingest: None,
            policy: &self.policy,
            now: self.clock.now(),
            source: "test",
        };
        let request = ControlRequest {
            by: "alice".into(),
            action,
        };
        apply(&ctx, &request).await.unwrap();
    }

    async fn last_audit(&self) -> (String, String) {
        let audit = self.controls.audit(1).await.unwrap();
        (audit[0].entry.action.clone(), audit[0].entry.target.clone())
    }
}

fn job(n: u32, tier: Tier, tokens: u64) -> Job {
    Job {
        id: JobId {
            ticket: format!("{n:032x}").parse().unwrap(),
            version: 1,
            kind: SummaryKind::Technician,
        },
        number: format!("INC{n:07}"),
        severity: Severity::P3,
        queue_rank: None,
        tier,
        llm: LlmUse::Always,
        prompt_tokens: Tokens(tokens - 100),
        max_output_tokens: Tokens(100),
        enqueued_at: T0,
        deadline: T0.plus(LONG),
        coalesce_key: None,
        region: None,
        hold_until: None,
    }
}

fn admitted(out: &DispatchOutcome, tier: Tier) -> usize {
    out.admitted
        .iter()
        .filter(|g| g.tier == tier)
        .map(|g| g.leases.len())
        .sum()
}

#[tokio::test]
async fn a_paused_tier_is_not_served_until_resumed() {
    let rig = rig();
    rig.store
        .enqueue(&[job(1, Tier::Premium, 1_000), job(2, Tier::Standard, 1_000)])
        .await
        .unwrap();
    rig.act(ControlAction::Pause {
        tier: Tier::Premium,
        minutes: None,
    })
    .await;
    assert_eq!(
        rig.last_audit().await,
        ("pause".into(), "tier:premium:paused".into())
    );
    let out = rig.tick().await;
    assert_eq!(admitted(&out, Tier::Premium), 0);
    assert_eq!(admitted(&out, Tier::Standard), 1, "the other tier goes on");
    assert_eq!(out.counters.paused_tiers, 1);
    assert_eq!(
        rig.store.queue_stats(Tier::Premium).await.unwrap().pending,
        1
    );

    rig.act(ControlAction::Resume {
        tier: Tier::Premium,
    })
    .await;
    assert_eq!(rig.last_audit().await.0, "resume");
    let out = rig.tick().await;
    assert_eq!(admitted(&out, Tier::Premium), 1);
}

#[tokio::test]
async fn a_tier_forced_to_extractive_settles_its_jobs_without_a_call() {
    let rig = rig();
    rig.store
        .enqueue(&[
            job(1, Tier::Premium, 1_000),
            job(2, Tier::Premium, 1_000),
            job(3, Tier::Standard, 1_000),
        ])
        .await
        .unwrap();
    rig.act(ControlAction::ForceExtractive {
        tier: Tier::Premium,
        minutes: Some(30),
    })
    .await;
    let out = rig.tick().await;
    assert_eq!(admitted(&out, Tier::Premium), 0);
    let forced: Vec<_> = out.extractive_work().collect();
    assert_eq!(forced.iter().map(|g| g.leases.len()).sum::<usize>(), 2);
    assert!(
        forced
            .iter()
            .all(|g| g.from == Tier::Premium && g.reason == SpillReason::Controlled)
    );
    assert_eq!(out.counters.forced_extractive, 2);
    assert_eq!(
        admitted(&out, Tier::Standard),
        1,
        "standard is not affected"
    );
    // The caller settles them (the `dispatch` function stores their extractive summary).
    for lease in forced.iter().flat_map(|g| &g.leases) {
        assert!(rig.store.ack(lease).await.unwrap());
    }

    // Thirty minutes on, the control has ended by itself: premium calls again.
    rig.store
        .enqueue(&[job(4, Tier::Premium, 1_000)])
        .await
        .unwrap();
    rig.clock.advance(Duration::from_secs(30 * 60));
    let out = rig.tick().await;
    assert_eq!(admitted(&out, Tier::Premium), 1);
    assert_eq!(rig.last_audit().await.0, "expired");
}

#[tokio::test]
async fn a_deployment_marked_down_spills_its_work_until_marked_up() {
    let rig = rig();
    rig.store
        .enqueue(&[job(1, Tier::Premium, 1_000)])
        .await
        .unwrap();
    rig.act(ControlAction::MarkDown {
        deployment: premium(),
        minutes: None,
    })
    .await;
    let out = rig.tick().await;
    assert_eq!(admitted(&out, Tier::Premium), 0);
    assert_eq!(out.counters.spilled_to_standard, 1);
    assert!(matches!(out.spilled[0].reason, SpillReason::Down { .. }));

    rig.act(ControlAction::MarkUp {
        deployment: premium(),
    })
    .await;
    assert_eq!(
        rig.last_audit().await,
        ("mark_up".into(), "deployment:gpt-4o:down".into())
    );
    rig.store
        .enqueue(&[job(2, Tier::Premium, 1_000)])
        .await
        .unwrap();
    let out = rig.tick().await;
    assert_eq!(admitted(&out, Tier::Premium), 1);
}

#[tokio::test]
async fn marking_up_ends_a_daily_quota_the_ledger_recorded() {
    let rig = rig();
    rig.governor
        .report_throttle(&premium(), Duration::from_secs(86_400), rig.clock.now())
        .await
        .unwrap();
    rig.store
        .enqueue(&[job(1, Tier::Premium, 1_000)])
        .await
        .unwrap();
    let out = rig.tick().await;
    assert_eq!(
        out.counters.spilled_to_standard, 1,
        "down for the day: spilled"
    );
    rig.act(ControlAction::MarkUp {
        deployment: premium(),
    })
    .await;
    rig.store
        .enqueue(&[job(2, Tier::Premium, 1_000)])
        .await
        .unwrap();
    let out = rig.tick().await;
    assert_eq!(admitted(&out, Tier::Premium), 1);
}

#[tokio::test]
async fn a_tpm_override_governs_admission_until_it_ends_by_itself() {
    let rig = rig();
    // 6,000 TPM at 10 % headroom, burst 1: 900 tokens per 10 s window.
    rig.act(ControlAction::OverrideTpm {
        deployment: premium(),
        tpm: 6_000,
        minutes: 10,
    })
    .await;
    assert_eq!(
        rig.last_audit().await,
        ("override_tpm".into(), "deployment:gpt-4o:tpm".into())
    );
    let jobs: Vec<Job> = (1..=20).map(|n| job(n, Tier::Premium, 450)).collect();
    rig.store.enqueue(&jobs).await.unwrap();
    let out = rig.tick().await;
    let under_override = admitted(&out, Tier::Premium);
    assert!(
        (1..=2).contains(&under_override),
        "900 tokens a window admit at most two 450-token calls, got {under_override}"
    );

    // Ten minutes on the override has ended: the configured 60,000 TPM (9,000 a window).
    rig.clock.advance(Duration::from_secs(10 * 60));
    let out = rig.tick().await;
    let after = admitted(&out, Tier::Premium);
    assert!(
        after > 10,
        "the configured budget admits far more, got {after}"
    );
    let audit = rig.controls.audit(5).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|r| r.entry.action == "expired" && r.entry.target == "deployment:gpt-4o:tpm")
    );
}

#[tokio::test]
async fn an_unknown_deployment_or_tier_is_refused_and_changes_nothing() {
    let rig = rig();
    let ctx = ControlContext {
        controls: &rig.controls,
        store: &rig.store,
        governor: &rig.governor,
        ingest: None,
        policy: &rig.policy,
        now: rig.clock.now(),
        source: "test",
    };
    for action in [
        ControlAction::MarkDown {
            deployment: "nope".parse().unwrap(),
            minutes: None,
        },
        ControlAction::Pause {
            tier: Tier::Extractive,
            minutes: None,
        },
        ControlAction::OverrideHeadroom {
            deployment: premium(),
            headroom: 0.95,
            minutes: 5,
        },
        ControlAction::OverrideTpm {
            deployment: premium(),
            tpm: 5_000,
            minutes: 0,
        },
    ] {
        let request = ControlRequest {
            by: "alice".into(),
            action,
        };
        assert!(apply(&ctx, &request).await.is_err(), "{request:?}");
    }
    let nobody = ControlRequest {
        by: "  ".into(),
        action: ControlAction::Resume {
            tier: Tier::Premium,
        },
    };
    assert!(apply(&ctx, &nobody).await.is_err());
    assert!(rig.controls.audit(10).await.unwrap().is_empty());
    assert!(
        rig.controls
            .state(rig.clock.now())
            .await
            .unwrap()
            .is_empty()
    );
}
