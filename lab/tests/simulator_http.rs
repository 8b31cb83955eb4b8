//! The Azure OpenAI simulator over real HTTP: shapes, auth, metering and every 429 variant.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use stormgate_lab::simulator::{DeploymentConfig, Faults, HeaderVariant, Latency, SimulatorConfig};
use stormgate_lab::simulator_http::{SimulatorHandle, spawn_simulator};

const KEY: &str = "simulator-key";

async fn simulator(tpm: u64) -> SimulatorHandle {
    let mut premium = DeploymentConfig::new("premium", "gpt-4o", tpm);
    premium.latency = Latency {
        first_token_ms: 5,
        per_output_token_ms: 0,
    };
    spawn_simulator(SimulatorConfig::new(42, vec![premium]))
        .await
        .expect("simulator starts")
}

fn body(max_tokens: u32) -> Value {
    json!({
        "messages": [
            {"role": "system", "content": "Summarize the ticket for the on-call engineer."},
            {"role": "user", "content": "INC0020002 loss of light on ring east\n\
                2026-01-12 03:00:01 OPTICS-2-LOS: Loss of signal on 0/0/0/3\n\
                2026-01-12 03:00:02 OPTICS-2-LOS: Loss of signal on 0/0/0/3\n\
                2026-01-12 03:04:10 field team en route"}
        ],
        "max_tokens": max_tokens,
        "temperature": 0.2
    })
}

fn url(sim: &SimulatorHandle, deployment: &str) -> String {
    format!(
        "{}/openai/deployments/{deployment}/chat/completions?api-version=2024-10-21",
        sim.endpoint()
    )
}

async fn post(sim: &SimulatorHandle, max_tokens: u32) -> reqwest::Response {
    reqwest::Client::new()
        .post(url(sim, "premium"))
        .header("api-key", KEY)
        .json(&body(max_tokens))
        .send()
        .await
        .expect("simulator answers")
}

async fn set_faults(sim: &SimulatorHandle, faults: &Faults) {
    let r = reqwest::Client::new()
        .put(format!(
            "{}/admin/deployments/premium/faults",
            sim.endpoint()
        ))
        .json(faults)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

fn header(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

async fn error_of(r: reqwest::Response) -> (String, String) {
    let v: Value = r.json().await.unwrap();
    (
        v["error"]["code"].as_str().unwrap().to_owned(),
        v["error"]["message"].as_str().unwrap().to_owned(),
    )
}

fn throttle_everything(headers: HeaderVariant) -> Faults {
    Faults {
        throttle_rate: 1.0,
        throttle_retry_after_ms: 2_500,
        headers,
        ..Faults::default()
    }
}

#[tokio::test]
async fn completion_has_azure_shape_usage_and_remaining_headers() {
    let sim = simulator(100_000).await;
    let r = post(&sim, 120).await;
    assert_eq!(r.status(), StatusCode::OK);
    let remaining_tokens: u64 = header(&r, "x-ratelimit-remaining-tokens")
        .unwrap()
        .parse()
        .unwrap();
    assert!(remaining_tokens < 100_000 && remaining_tokens > 99_000);
    assert_eq!(
        header(&r, "x-ratelimit-remaining-requests").as_deref(),
        Some("599")
    );
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "gpt-4o");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    let text = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(text.starts_with("INC0020002 loss of light on ring east."));
    assert!(text.contains("seen 2 times"));
    let usage = &v["usage"];
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 20);
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );
}

#[tokio::test]
async fn same_request_gets_the_same_text() {
    let sim = simulator(100_000).await;
    let a: Value = post(&sim, 120).await.json().await.unwrap();
    let b: Value = post(&sim, 120).await.json().await.unwrap();
    assert_eq!(
        a["choices"][0]["message"]["content"],
        b["choices"][0]["message"]["content"]
    );
}

#[tokio::test]
async fn requests_without_credentials_are_refused_and_bearer_is_accepted() {
    let sim = simulator(100_000).await;
    let client = reqwest::Client::new();
    let r = client
        .post(url(&sim, "premium"))
        .json(&body(50))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(error_of(r).await.0, "401");
    let r = client
        .post(url(&sim, "premium"))
        .header("api-key", "wrong")
        .json(&body(50))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = client
        .post(url(&sim, "premium"))
        .bearer_auth("eyJ0eXAiOiJKV1QiLCJhbGciOi")
        .json(&body(50))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn unknown_deployment_missing_api_version_and_bad_body_are_client_errors() {
    let sim = simulator(100_000).await;
    let client = reqwest::Client::new();
    let r = client
        .post(url(&sim, "nope"))
        .header("api-key", KEY)
        .json(&body(50))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(error_of(r).await.0, "DeploymentNotFound");
    let r = client
        .post(format!(
            "{}/openai/deployments/premium/chat/completions",
            sim.endpoint()
        ))
        .header("api-key", KEY)
        .json(&body(50))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = client
        .post(url(&sim, "premium"))
        .header("api-key", KEY)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_of(r).await.0, "BadRequest");
}

#[tokio::test]
async fn spending_the_minute_answers_429_with_every_hint() {
    // 1,000 TPM: one request charged ~1,000 tokens spends the minute.
    let sim = simulator(1_000).await;
    assert_eq!(post(&sim, 900).await.status(), StatusCode::OK);
    let r = post(&sim, 900).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = header(&r, "retry-after").unwrap().parse().unwrap();
    let retry_after_ms: u64 = header(&r, "retry-after-ms").unwrap().parse().unwrap();
    assert!((55..=60).contains(&retry_after), "{retry_after}");
    assert!(retry_after_ms <= retry_after * 1000 && retry_after_ms > (retry_after - 1) * 1000);
    assert_eq!(
        header(&r, "x-ratelimit-reset-tokens").unwrap(),
        retry_after.to_string()
    );
    assert!(header(&r, "x-ratelimit-remaining-tokens").is_some());
    let (code, message) = error_of(r).await;
    assert_eq!(code, "429");
    assert!(message.contains("exceeded token rate limit"));
    assert!(message.contains(&format!("Please retry after {retry_after} seconds")));
}

#[tokio::test]
async fn each_header_variant_carries_only_its_signal() {
    let sim = simulator(1_000_000).await;
    let only = |r: &reqwest::Response, name: &str| {
        for other in [
            "retry-after",
            "retry-after-ms",
            "x-ratelimit-reset-tokens",
            "x-ratelimit-reset-requests",
        ] {
            assert_eq!(
                header(r, other).is_some(),
                other == name,
                "{other} with {name}"
            );
        }
    };
    set_faults(&sim, &throttle_everything(HeaderVariant::RetryAfterOnly)).await;
    let r = post(&sim, 50).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    only(&r, "retry-after");
    assert_eq!(header(&r, "retry-after").as_deref(), Some("3"));

    set_faults(&sim, &throttle_everything(HeaderVariant::RetryAfterMsOnly)).await;
    let r = post(&sim, 50).await;
    only(&r, "retry-after-ms");
    assert_eq!(header(&r, "retry-after-ms").as_deref(), Some("2500"));

    set_faults(&sim, &throttle_everything(HeaderVariant::ResetTokensOnly)).await;
    let r = post(&sim, 50).await;
    only(&r, "x-ratelimit-reset-tokens");
    assert_eq!(header(&r, "x-ratelimit-reset-tokens").as_deref(), Some("3"));

    set_faults(&sim, &throttle_everything(HeaderVariant::MessageTextOnly)).await;
    let r = post(&sim, 50).await;
    only(&r, "none");
    let (_, message) = error_of(r).await;
    assert!(message.contains("Please retry after 3 seconds"));

    set_faults(
        &sim,
        &Faults {
            daily_quota_exhausted: true,
            headers: HeaderVariant::RetryAfterOnly,
            ..Faults::default()
        },
    )
    .await;
    let r = post(&sim, 50).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&r, "retry-after").as_deref(), Some("86400"));

    // Back to normal: the deployment answers again.
    set_faults(&sim, &Faults::default()).await;
    assert_eq!(post(&sim, 50).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn server_errors_content_filter_and_hangs_are_injected() {
    let sim = simulator(1_000_000).await;
    set_faults(
        &sim,
        &Faults {
            server_error_rate: 1.0,
            ..Faults::default()
        },
    )
    .await;
    let r = post(&sim, 50).await;
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(error_of(r).await.0, "InternalServerError");

    set_faults(
        &sim,
        &Faults {
            content_filter_rate: 1.0,
            ..Faults::default()
        },
    )
    .await;
    let r = post(&sim, 50).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_of(r).await.0, "content_filter");

    set_faults(
        &sim,
        &Faults {
            timeout_rate: 1.0,
            ..Faults::default()
        },
    )
    .await;
    let err = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap()
        .post(url(&sim, "premium"))
        .header("api-key", KEY)
        .json(&body(50))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout());

    let stats: Value = reqwest::get(format!(
        "{}/admin/deployments/premium/stats",
        sim.endpoint()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(stats["requests"], 3);
    assert_eq!(stats["server_errors"], 1);
    assert_eq!(stats["rejected"], 1);
    assert_eq!(stats["timeouts"], 1);
    assert_eq!(stats["recent_arrivals"].as_array().unwrap().len(), 3);
    sim.shutdown().await;
}

#[tokio::test]
async fn latency_is_first_token_plus_per_output_token() {
    let mut premium = DeploymentConfig::new("premium", "gpt-4o", 1_000_000);
    premium.latency = Latency {
        first_token_ms: 200,
        per_output_token_ms: 2,
    };
    let sim = spawn_simulator(SimulatorConfig::new(1, vec![premium]))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let r = post(&sim, 100).await;
    let elapsed = started.elapsed();
    let v: Value = r.json().await.unwrap();
    let completion = v["usage"]["completion_tokens"].as_u64().unwrap();
    assert!(elapsed >= Duration::from_millis(200 + 2 * completion));
}

#[test]
fn the_shipped_simulator_config_parses() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/simulator.toml");
    let config = stormgate_lab::simulator_http::load_config(&path).unwrap();
    assert_eq!(config.deployments.len(), 2);
    assert_eq!(config.deployments[0].tpm, 150_000);
    assert_eq!(config.deployments[0].faults.headers, HeaderVariant::Full);
}
