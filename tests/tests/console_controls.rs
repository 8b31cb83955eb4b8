//! Each operator control through the real handler process (`POST /api/controls`), with
//! its effect on what `dispatch` does and the LLM calls the simulator sees, and its audit
//! record: pause and resume a tier, force a tier to extractive-only, mark a deployment
//! down and up, override a TPM that ends by itself on the handler's clock, re-summarize a
//! ticket by its number, re-submit a dead letter.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::time::Duration;

use fault_rig::{PREMIUM, Rig, RigOptions, STANDARD};
use serde_json::{Value, json};
use stormgate_e2e::tickets::event;
use stormgate_shared::clock::Clock;
use stormgate_shared::job::SummaryKind;
use stormgate_shared::store::{DeadLetter, Store};

async fn control(rig: &Rig, request: Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{}/api/controls", rig.handler_url()))
        .json(&request)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{request} → {body}");
    body
}

/// The latest audit entry, as the status shows it.
async fn last_audit(rig: &Rig) -> Value {
    let status: Value = reqwest::get(format!("{}/api/status", rig.handler_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    status["audit"][0].clone()
}

fn calls_to(rig: &Rig, deployment: &str, since: usize) -> usize {
    rig.llm.exchanges()[since..]
        .iter()
        .filter(|e| e.deployment == deployment)
        .count()
}

/// Classifies P1 tickets `ns` (of one outage) now.
async fn classify(rig: &mut Rig, ns: std::ops::RangeInclusive<u16>, outage: u16) {
    let range = rig.topic.produce(ns.map(|n| event(n, outage, 1)));
    rig.classify(range).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_a_tier() {
    let mut rig = Rig::start(RigOptions::default()).await;
    let answer = control(
        &rig,
        json!({"by": "alice", "action": "pause", "tier": "premium"}),
    )
    .await;
    assert_eq!(
        answer["controls"]["tiers"]["premium"]["paused"]["by"],
        "alice"
    );
    classify(&mut rig, 1..=3, 1).await;
    let tick = rig.dispatch().await;
    assert_eq!(tick["premium_messages"], 0, "{tick}");
    assert_eq!(tick["counters"]["paused_tiers"], 1);
    assert_eq!(
        tick["counters"]["spilled_to_standard"], 0,
        "paused: jobs wait"
    );
    let audit = last_audit(&rig).await;
    assert_eq!(
        (audit["action"].as_str(), audit["by"].as_str()),
        (Some("pause"), Some("alice"))
    );
    assert_eq!(audit["target"], "tier:premium:paused");
    assert_eq!(audit["source"], "http");

    control(
        &rig,
        json!({"by": "alice", "action": "resume", "tier": "premium"}),
    )
    .await;
    let tick = rig.dispatch().await;
    assert!(tick["premium_messages"].as_u64().unwrap() > 0, "{tick}");
    assert_eq!(last_audit(&rig).await["action"], "resume");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tier_forced_to_extractive_spends_nothing_and_a_resummarize_brings_the_llm_back() {
    let mut rig = Rig::start(RigOptions::default()).await;
    control(
        &rig,
        json!({"by": "bob", "action": "force_extractive", "tier": "premium"}),
    )
    .await;
    assert_eq!(last_audit(&rig).await["action"], "force_extractive");
    classify(&mut rig, 1..=2, 1).await;
    let before = rig.llm.exchanges().len();
    let tick = rig.dispatch().await;
    assert_eq!(tick["premium_messages"], 0, "{tick}");
    assert_eq!(tick["counters"]["forced_extractive"], 2, "{tick}");
    assert_eq!(tick["extractive"]["summarized"], 2, "{tick}");
    rig.host.deliver(&rig.handler_url()).await;
    assert_eq!(calls_to(&rig, PREMIUM, before), 0, "premium was not called");
    let sys_id = format!("{:032x}", 1);
    let fallback = rig
        .store
        .summary(&sys_id.parse().unwrap(), SummaryKind::Technician)
        .await
        .unwrap()
        .unwrap();
    assert!(fallback.degraded, "settled with the extractive summary");

    // Ended, then ticket 1 re-summarized by its number: the LLM summary replaces the fallback.
    control(
        &rig,
        json!({"by": "bob", "action": "end_extractive", "tier": "premium"}),
    )
    .await;
    let answer = control(
        &rig,
        json!({"by": "bob", "action": "resummarize", "ticket": fallback.number.to_lowercase()}),
    )
    .await;
    let kinds = answer["outcome"]["report"]["kinds"].as_array().unwrap();
    assert!(
        kinds
            .iter()
            .any(|k| k["kind"] == "technician" && k["outcome"] == "queued"),
        "{answer}"
    );
    let audit = last_audit(&rig).await;
    assert_eq!(audit["action"], "resummarize");
    assert!(
        audit["target"]
            .as_str()
            .unwrap()
            .starts_with(&fallback.number),
        "{audit}"
    );
    let before = rig.llm.exchanges().len();
    rig.settle(10).await;
    assert!(
        calls_to(&rig, PREMIUM, before) >= 1,
        "the re-summarize called premium"
    );
    let summary = rig
        .store
        .summary(&sys_id.parse().unwrap(), SummaryKind::Technician)
        .await
        .unwrap()
        .unwrap();
    assert!(!summary.degraded, "{summary:?}");
    assert_eq!(summary.tier, stormgate_shared::job::Tier::Premium);
    assert_eq!(summary.version, fallback.version);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_marked_down_spills_until_marked_up() {
    let mut rig = Rig::start(RigOptions::default()).await;
    control(
        &rig,
        json!({"by": "carol", "action": "mark_down", "deployment": PREMIUM, "minutes": 30}),
    )
    .await;
    let audit = last_audit(&rig).await;
    assert_eq!(audit["action"], "mark_down");
    assert_eq!(audit["target"], format!("deployment:{PREMIUM}:down"));
    classify(&mut rig, 1..=2, 1).await;
    let before = rig.llm.exchanges().len();
    let tick = rig.dispatch().await;
    assert_eq!(tick["premium_messages"], 0, "{tick}");
    assert!(
        tick["counters"]["spilled_to_standard"].as_u64().unwrap() >= 2,
        "{tick}"
    );
    rig.host.deliver(&rig.handler_url()).await;
    assert_eq!(calls_to(&rig, PREMIUM, before), 0);
    assert!(
        calls_to(&rig, STANDARD, before) > 0,
        "its work went to standard"
    );

    control(
        &rig,
        json!({"by": "carol", "action": "mark_up", "deployment": PREMIUM}),
    )
    .await;
    assert_eq!(last_audit(&rig).await["action"], "mark_up");
    classify(&mut rig, 3..=4, 2).await;
    let tick = rig.dispatch().await;
    assert!(tick["premium_messages"].as_u64().unwrap() > 0, "{tick}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tpm_override_narrows_admission_and_ends_by_itself() {
    let mut rig = Rig::start(RigOptions::default()).await;
    // 1,000 TPM: no call of these tickets fits in its window; they spill to standard.
    control(
        &rig,
        json!({"by": "dave", "action": "override_tpm", "deployment": PREMIUM, "tpm": 1000, "minutes": 2}),
    )
    .await;
    let audit = last_audit(&rig).await;
    assert_eq!(audit["action"], "override_tpm");
    assert!(
        audit["detail"]
            .as_str()
            .unwrap()
            .starts_with("value 1000 until"),
        "{audit}"
    );
    classify(&mut rig, 1..=2, 1).await;
    let tick = rig.dispatch().await;
    assert_eq!(tick["premium_messages"], 0, "{tick}");
    assert!(
        tick["counters"]["spilled_to_standard"].as_u64().unwrap() > 0,
        "{tick}"
    );
    let status: Value = reqwest::get(format!("{}/api/status", rig.handler_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let premium = &status["deployments"][0];
    assert_eq!(premium["tpm"], 1000, "{premium}");
    assert_eq!(premium["tpm_override"]["by"], "dave");

    // Two minutes on the handler's clock, the configured budget governs again.
    rig.settle(10).await;
    rig.advance_clock(Duration::from_secs(120));
    classify(&mut rig, 3..=4, 2).await;
    let tick = rig.dispatch().await;
    assert!(tick["premium_messages"].as_u64().unwrap() > 0, "{tick}");
    let audit = last_audit(&rig).await;
    assert_eq!(audit["action"], "expired", "{audit}");
    assert_eq!(audit["by"], "stormgate");
    assert_eq!(audit["target"], format!("deployment:{PREMIUM}:tpm"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_resubmitted_is_ingested_and_dispatched() {
    let mut rig = Rig::start(RigOptions::default()).await;
    // An event a former release could not take, kept as it arrived.
    let stored = event(9, 1, 1);
    rig.store
        .dead_letter(&DeadLetter {
            reason: "rejected by a former release".into(),
            raw: stored.to_string(),
            headers: stormgate_shared::event::CdcHeaders {
                action: Some("insert".into()),
                table_name: Some("incident".into()),
            },
            replayable: true,
            topic: Some("servicenow.incident".into()),
            partition: Some(0),
            offset: Some(7),
            at: rig.clock().now(),
        })
        .await
        .unwrap();
    let answer = control(
        &rig,
        json!({"by": "erin", "action": "resubmit_dead_letters"}),
    )
    .await;
    assert_eq!(answer["outcome"]["report"]["accepted"], 1, "{answer}");
    let audit = last_audit(&rig).await;
    assert_eq!(audit["action"], "resubmit_dead_letters");
    assert!(
        audit["detail"]
            .as_str()
            .unwrap()
            .starts_with("1 re-submitted: 1 accepted"),
        "{audit}"
    );
    let tick = rig.dispatch().await;
    assert!(tick["premium_messages"].as_u64().unwrap() > 0, "{tick}");
    assert!(rig.store.dead_letters(10).await.unwrap().is_empty());
}
