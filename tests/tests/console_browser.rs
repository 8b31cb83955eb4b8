//! The console in headless Chromium, against the real handler behind the host's key check:
//! the page opened with a function key renders, its numbers are those of `/api/status`,
//! its charts are drawn, and a control clicked in the page (with the master key typed in)
//! takes effect on dispatch and is audited; a wrong key is refused. A screenshot is kept
//! under `target/console-screenshots/` (the path is printed) as a CI artefact.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::time::Duration;

use fault_rig::{PREMIUM, Rig, RigOptions};
use serde_json::{Value, json};
use stormgate_e2e::functions_host::repo_path;
use stormgate_e2e::host_keys::{HostKeys, Keys};
use stormgate_e2e::tickets::event;
use stormgate_e2e::webdriver::Browser;

const FUNCTION_KEY: &str = "function-key-for-the-noc";
const MASTER_KEY: &str = "master-key-of-the-app";

async fn get(url: &str, key: Option<&str>) -> (u16, Value) {
    let mut request = reqwest::Client::new().get(url);
    if let Some(key) = key {
        request = request.header("x-functions-key", key);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_the_status_and_its_controls_steer_the_pipeline() {
    let mut rig = Rig::start(RigOptions::default()).await;
    // A storm under way: twelve P1 tickets of two cuts, partly summarized, the standard
    // tier paused so that its jobs wait.
    let answer = reqwest::Client::new()
        .post(format!("{}/api/controls", rig.handler_url()))
        .json(&json!({"by": "shift-lead", "action": "pause", "tier": "standard"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let range = rig.topic.produce((1..=12).map(|n| event(n, 1 + n % 2, 1)));
    rig.classify(range).await;
    rig.dispatch().await;
    let handler = rig.handler_url();
    rig.host.deliver(&handler).await;
    rig.dispatch().await;

    let host = HostKeys::start(
        &rig.handler_url(),
        Keys {
            master: MASTER_KEY.into(),
            function: FUNCTION_KEY.into(),
        },
    )
    .await;
    let app = host.base_url();
    // The host lets nothing through without a key, and only the master key to the controls.
    assert_eq!(get(&format!("{app}/api/status"), None).await.0, 401);
    assert_eq!(
        get(&format!("{app}/api/status"), Some(FUNCTION_KEY))
            .await
            .0,
        200
    );
    let refused = reqwest::Client::new()
        .post(format!("{app}/api/controls"))
        .header("x-functions-key", FUNCTION_KEY)
        .json(&json!({"by": "x", "action": "resume", "tier": "standard"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401, "a function key cannot steer");

    let browser = Browser::start().await;
    browser
        .goto(&format!("{app}/api/console?code={FUNCTION_KEY}"))
        .await;
    browser
        .wait_for(
            "return document.body.dataset.ready === 'true' && document.querySelectorAll('#charts svg').length >= 8",
            Duration::from_secs(20),
            "the console to load its status and draw its charts",
        )
        .await;

    // Its numbers are the status's (nothing runs meanwhile, so they hold still).
    let (status, doc) = get(&format!("{app}/api/status"), Some(FUNCTION_KEY)).await;
    assert_eq!(status, 200);
    assert_eq!(
        browser.text("#verdict").await,
        doc["verdict"]["text"].as_str().unwrap()
    );
    assert!(
        doc["verdict"]["text"]
            .as_str()
            .unwrap()
            .contains("standard paused by shift-lead"),
        "{}",
        doc["verdict"]
    );
    for severity in doc["severities"].as_array().unwrap() {
        let name = severity["severity"].as_str().unwrap();
        for (field, id) in [
            ("queued", "queued"),
            ("held", "held"),
            ("in_flight", "in-flight"),
        ] {
            let shown = browser
                .script(
                    &format!("return document.getElementById('sev-{name}-{id}').dataset.value"),
                    json!([]),
                )
                .await;
            assert_eq!(
                shown,
                severity[field].as_u64().unwrap().to_string(),
                "{name} {field}"
            );
        }
    }
    let queued_total: u64 = doc["severities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["queued"].as_u64().unwrap() + s["held"].as_u64().unwrap())
        .sum();
    assert!(queued_total > 0, "the standard tier's jobs wait: {doc}");
    for d in doc["deployments"].as_array().unwrap() {
        let tier = d["tier"].as_str().unwrap();
        let spend: f64 = browser
            .script(
                &format!("return Number(document.getElementById('dep-{tier}-spend').dataset.usd)"),
                json!([]),
            )
            .await
            .as_f64()
            .unwrap();
        assert!(
            (spend - d["today"]["spend_usd"].as_f64().unwrap()).abs() < 1e-9,
            "{tier}"
        );
        let shown = browser
            .script(
                &format!(
                    "const e = document.getElementById('dep-{tier}-minute-tokens'); \
                     return [Number(e.dataset.value), Number(e.dataset.limit)]"
                ),
                json!([]),
            )
            .await;
        assert_eq!(
            shown,
            json!([d["minute_tokens"], d["minute_token_limit"]]),
            "{tier}"
        );
        let state = browser.text(&format!("#dep-{tier}-state")).await;
        assert_eq!(d["state"], "ok");
        assert!(state.starts_with("taking calls"), "{tier}: {state}");
    }
    assert!(browser.text("#queue-standard").await.contains("PAUSED"));
    let paths: u64 = browser
        .script(
            "return document.querySelectorAll('#charts svg path').length",
            json!([]),
        )
        .await
        .as_u64()
        .unwrap();
    assert!(paths >= 4, "the charts draw their series: {paths} paths");

    // A wrong admin key: the host refuses, the page says so, nothing changes.
    browser.type_into("#by", "noc-manager").await;
    browser.type_into("#admin-key", "not-the-master-key").await;
    browser.click("#btn-pause-premium").await;
    browser
        .wait_for(
            "return document.getElementById('control-result').textContent.includes('refused (HTTP 401)')",
            Duration::from_secs(10),
            "the refusal to show",
        )
        .await;

    // The master key: premium is paused from the page.
    browser.type_into("#admin-key", MASTER_KEY).await;
    browser.click("#btn-pause-premium").await;
    browser
        .wait_for(
            "return document.getElementById('control-result').textContent.startsWith('pause done')",
            Duration::from_secs(10),
            "the pause to be done",
        )
        .await;
    browser
        .wait_for(
            "return document.getElementById('verdict').textContent.includes('premium paused by noc-manager')",
            Duration::from_secs(10),
            "the verdict to show the pause",
        )
        .await;
    let (_, doc) = get(&format!("{app}/api/status"), Some(FUNCTION_KEY)).await;
    assert_eq!(doc["queues"][0]["paused"], true);
    let audit = &doc["audit"][0];
    assert_eq!(
        (
            audit["action"].as_str(),
            audit["by"].as_str(),
            audit["source"].as_str()
        ),
        (Some("pause"), Some("noc-manager"), Some("http"))
    );
    assert!(browser.text("#audit").await.contains("noc-manager"));

    // It takes effect: new P1 tickets are not dispatched to premium.
    let range = rig.topic.produce((20..=21).map(|n| event(n, 3, 1)));
    rig.classify(range).await;
    let before = rig.llm.exchanges().len();
    let tick = rig.dispatch().await;
    assert_eq!(tick["premium_messages"], 0, "{tick}");
    assert_eq!(tick["counters"]["paused_tiers"], 2, "{tick}");
    rig.host.deliver(&handler).await;
    assert!(
        rig.llm.exchanges()[before..]
            .iter()
            .all(|e| e.deployment != PREMIUM),
        "premium was called while paused"
    );

    let shot = browser.screenshot().await;
    assert!(shot.starts_with(b"\x89PNG"), "a PNG");
    assert!(
        shot.len() > 50_000,
        "the page is drawn: {} bytes",
        shot.len()
    );
    let dir = repo_path("target/console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("console.png");
    std::fs::write(&path, &shot).unwrap();
    println!(
        "console screenshot: {}",
        path.canonicalize().unwrap().display()
    );
    browser.close().await;
}
