//! The status document read from a store, a governor, a series and controls whose truth
//! the test set up: queue depths and ages per severity, how far behind, the deployments'
//! windows, state and spend, per-minute rates from the series, the lag, the verdict.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use stormgate_shared::clock::EpochMillis;
use stormgate_shared::controls::memory::MemoryControls;
use stormgate_shared::controls::{AuditEntry, ControlKey, ControlStore, Setting};
use stormgate_shared::deadline_policy::DeadlinePolicy;
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::governor::{Governor, GovernorPolicy, MemoryLedger};
use stormgate_shared::job::{Job, JobId, LlmUse, SummaryKind, Tier};
use stormgate_shared::severity::Severity;
use stormgate_shared::signals::collect::{StatusInputs, collect};
use stormgate_shared::signals::memory::MemorySignals;
use stormgate_shared::signals::series::field;
use stormgate_shared::signals::status::{DeploymentState, Level};
use stormgate_shared::signals::{
    DeploymentConfig, FleetConfig, Minute, PartitionLag, SignalBatch, SignalStore,
};
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::store::{AgingPolicy, Store};
use stormgate_shared::tokens::Tokens;

const NOW: EpochMillis = EpochMillis(1_800_000_030_000);

fn premium() -> DeploymentName {
    "gpt-4o".parse().unwrap()
}

fn config() -> FleetConfig {
    FleetConfig {
        deployments: vec![
            DeploymentConfig {
                tier: Tier::Premium,
                deployment: premium(),
                model: "gpt-4o".into(),
                tpm: 60_000,
                rpm: 60_000 * 6 / 1_000,
                price_input_per_1m: 2.5,
                price_output_per_1m: 10.0,
            },
            DeploymentConfig {
                tier: Tier::Standard,
                deployment: "gpt-4o-mini".parse().unwrap(),
                model: "gpt-4o-mini".into(),
                tpm: 120_000,
                rpm: 120_000 * 6 / 1_000,
                price_input_per_1m: 0.15,
                price_output_per_1m: 0.6,
            },
        ],
        policy: GovernorPolicy::default(),
        deadlines: DeadlinePolicy::default(),
    }
}

fn governor() -> Governor {
    Governor::new(
        Arc::new(MemoryLedger::new()),
        GovernorPolicy::default(),
        config().deployments.iter().map(DeploymentConfig::budget),
    )
}

fn job(n: u32, severity: Severity, tier: Tier, waited: Duration, allowed: Duration) -> Job {
    let enqueued_at = NOW.minus(waited);
    Job {
        id: JobId {
            ticket: format!("{n:032x}").parse().unwrap(),
            version: 1,
            kind: SummaryKind::Technician,
        },
        number: format!("INC{n:07}"),
        severity,
        queue_rank: None,
        tier,
        llm: LlmUse::Always,
        prompt_tokens: Tokens(900),
        max_output_tokens: Tokens(100),
        enqueued_at,
        deadline: enqueued_at.plus(allowed),
        coalesce_key: None,
        region: None,
        hold_until: None,
    }
}

#[tokio::test]
async fn the_status_says_what_the_store_the_governor_and_the_series_hold() {
    let store = MemoryStore::new();
    let governor = governor();
    let signals = MemorySignals::new();
    let controls = MemoryControls::new();
    let min = Duration::from_secs(60);
    store
        .enqueue(&[
            // P3: the oldest waited 20 min of its 15 allowed: 5 min behind.
            job(1, Severity::P3, Tier::Premium, 20 * min, 15 * min),
            job(2, Severity::P3, Tier::Standard, 2 * min, 15 * min),
            // P1: waited 10 s of 30 s.
            job(
                3,
                Severity::P1,
                Tier::Premium,
                Duration::from_secs(10),
                Duration::from_secs(30),
            ),
        ])
        .await
        .unwrap();

    // Two calls admitted on premium, one 429, in the previous minutes of the series.
    let earlier = Minute::of(NOW).back(2).start();
    let last = Minute::of(NOW).back(1).start();
    let mut a = SignalBatch::at(earlier);
    a.max(field::admitted_total(&premium()), 10)
        .max(field::throttles_total(&premium()), 1);
    let mut b = SignalBatch::at(last);
    b.max(field::admitted_total(&premium()), 14)
        .max(field::throttles_total(&premium()), 3)
        .count(field::EVENTS, 42)
        .count(field::stored(Tier::Premium, SummaryKind::Technician), 5)
        .count(field::spilled(Tier::Premium, Tier::Standard), 2)
        .count(field::NOTICES_DELIVERED, 4)
        .usage(field::prompt_tokens(&premium()), 1_000_000)
        .usage(field::completion_tokens(&premium()), 100_000);
    b.lag = vec![PartitionLag {
        topic: "incidents".into(),
        partition: 3,
        records: 4,
        p50_ms: 1_500,
        max_ms: 4_000,
        measured_at: last,
    }];
    signals.record(&a).await.unwrap();
    signals.record(&b).await.unwrap();

    // Premium took a 30-minute quota 429; standard is marked down by an operator.
    governor
        .report_throttle(&premium(), Duration::from_secs(1_800), NOW)
        .await
        .unwrap();
    let standard: DeploymentName = "gpt-4o-mini".parse().unwrap();
    let mark = Setting {
        by: "alice".into(),
        at: NOW,
        until: None,
        value: None,
    };
    let entry = AuditEntry {
        at: NOW,
        by: "alice".into(),
        action: "mark_down".into(),
        target: standard.to_string(),
        detail: String::new(),
        source: "test".into(),
    };
    controls
        .change(
            Some(&ControlKey::Down(standard.clone())),
            Some(&mark),
            &entry,
        )
        .await
        .unwrap();

    let state = controls.state(NOW).await.unwrap();
    let effective = governor.with_controls(&state, NOW);
    let audit = controls.audit(10).await.unwrap();
    let config = config();
    let status = collect(&StatusInputs {
        store: &store,
        governor: &effective,
        signals: &signals,
        controls: &state,
        audit: &audit,
        audit_trimmed: 3,
        work_notes_in_outbox: 7,
        config: &config,
        aging: AgingPolicy {
            promote_every: Duration::from_secs(120),
        },
        now: NOW,
    })
    .await
    .unwrap();

    let p3 = &status.severities[Severity::P3.index()];
    assert_eq!((p3.queued, p3.held, p3.in_flight), (2, 0, 0));
    assert_eq!(p3.oldest_age_ms, Some(20 * 60_000));
    assert_eq!(p3.oldest_allowed_ms, Some(15 * 60_000));
    assert_eq!(p3.behind_ms, 5 * 60_000);
    let p1 = &status.severities[Severity::P1.index()];
    assert_eq!(
        (p1.queued, p1.oldest_age_ms, p1.behind_ms),
        (1, Some(10_000), 0)
    );
    assert_eq!(p1.deadline_ms, 30_000);
    assert_eq!(status.queues[0].pending, 2);
    assert_eq!(status.queues[0].top.len(), 2);

    let p = &status.deployments[0];
    assert_eq!(p.deployment, premium());
    assert!(
        matches!(p.state, DeploymentState::Down { .. }),
        "{:?}",
        p.state
    );
    assert_eq!(p.requests_per_minute, 4);
    assert_eq!(p.throttles_per_minute, 2);
    assert_eq!(p.throttles_total, 1, "the ledger's own count");
    assert_eq!(p.spilled_per_minute, 2);
    assert_eq!((p.tpm, p.rpm), (60_000, 360));
    // 1M prompt tokens at $2.50 and 100k completion tokens at $10 per million.
    assert!(
        (p.today.spend_usd - 3.5).abs() < 1e-9,
        "{}",
        p.today.spend_usd
    );
    let s = &status.deployments[1];
    assert!(matches!(&s.state, DeploymentState::MarkedDown { mark } if mark.by == "alice"));

    assert_eq!(status.ingest.events_per_minute, 42);
    assert_eq!(status.ingest.lag.partitions[0].lag.max_ms, 4_000);
    assert_eq!(status.ingest.lag.partitions[0].age_ms, NOW.0 - last.0);
    assert_eq!(status.summaries.stored_per_minute.len(), 1);
    assert_eq!(status.summaries.stored_per_minute[0].count, 5);
    assert_eq!(status.sinks.notices.delivered_per_minute, 4);
    assert_eq!(status.audit.len(), 1);
    assert_eq!(status.audit_trimmed_total, 3);
    // Notes queued in the ServiceNow outbox after a failed write still wait.
    assert_eq!(status.sinks.work_notes.in_outbox, 7);
    assert_eq!(status.sinks.work_notes.waiting, 7);
    assert_eq!(status.redis, None);

    assert_eq!(status.verdict.level, Level::Critical);
    assert_eq!(
        status.verdict.text,
        "premium and standard down: every summary extractive; P3 summaries 5 min behind"
    );

    // And the gauges go to the series for the charts.
    let gauges = status.gauge_batch();
    assert_eq!(gauges.maxima[&field::queued(Severity::P3)], 2);
    assert_eq!(gauges.maxima[&field::behind_ms(Severity::P3)], 5 * 60_000);
    assert_eq!(gauges.maxima[&field::down(&premium())], 1);
    assert_eq!(gauges.maxima[&field::admitted_total(&premium())], 0);
}
