//! The Azure OpenAI REST client against a local server speaking the real shapes.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use azure_core::credentials::{AccessToken, TokenCredential, TokenRequestOptions};
use stormgate_e2e::openai_server::{FakeAzureOpenAi, Reply, ThrottleVariant};
use stormgate_handlers::openai::{AzureOpenAiClient, OpenAiAuth, OpenAiConfig};
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::llm::{ChatMessage, ChatRequest, HintSource, LlmClient, LlmError, Role};

const T0: EpochMillis = EpochMillis(1_800_000_000_000);

fn request() -> ChatRequest {
    ChatRequest {
        deployment: "premium-gpt4o".into(),
        messages: vec![
            ChatMessage {
                role: Role::System,
                content: "Summarize.".into(),
            },
            ChatMessage {
                role: Role::User,
                content: "<ticket number=\"INC1\">\nfibre cut\n</ticket>".into(),
            },
        ],
        max_tokens: 300,
        temperature: 0.2,
    }
}

fn client(server: &FakeAzureOpenAi, auth: OpenAiAuth, clock: &ManualClock) -> AzureOpenAiClient {
    AzureOpenAiClient::new(
        OpenAiConfig {
            endpoint: format!("{}/", server.endpoint()),
            api_version: "2024-10-21".into(),
            timeout: Duration::from_millis(400),
        },
        auth,
        Arc::new(clock.clone()),
    )
    .unwrap()
}

#[tokio::test]
async fn a_success_yields_text_usage_and_the_remaining_budget() {
    let server = FakeAzureOpenAi::start().await;
    server.script([Reply::Ok(Some("Fibre cut at site 4.".into()))]);
    let clock = ManualClock::starting_at(T0);
    let completion = client(&server, OpenAiAuth::ApiKey("k-123".into()), &clock)
        .complete(&request())
        .await
        .unwrap();
    assert_eq!(completion.text, "Fibre cut at site 4.");
    assert_eq!(completion.model, "gpt-4o-2024-08-06");
    assert!(completion.usage.total_tokens > 0);
    assert_eq!(completion.rate_limit.remaining_tokens, Some(9000));
    assert_eq!(completion.rate_limit.remaining_requests, Some(53));

    let seen = &server.requests()[0];
    assert_eq!(seen.deployment, "premium-gpt4o");
    assert_eq!(seen.api_version.as_deref(), Some("2024-10-21"));
    assert_eq!(seen.headers["api-key"], "k-123");
    assert!(seen.headers.get("authorization").is_none());
    assert_eq!(seen.body["max_tokens"], 300);
    assert_eq!(seen.body["messages"][1]["role"], "user");
}

#[derive(Debug)]
struct CountingCredential {
    calls: AtomicUsize,
    lifetime_s: i64,
    now_s: i64,
}

#[async_trait]
impl TokenCredential for CountingCredential {
    async fn get_token(
        &self,
        scopes: &[&str],
        _: Option<TokenRequestOptions<'_>>,
    ) -> azure_core::Result<AccessToken> {
        assert_eq!(scopes, ["https://cognitiveservices.azure.com/.default"]);
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let expires =
            azure_core::time::OffsetDateTime::from_unix_timestamp(self.now_s + self.lifetime_s)
                .unwrap();
        Ok(AccessToken::new(format!("token-{n}"), expires))
    }
}

#[tokio::test]
async fn the_entra_token_is_cached_until_shortly_before_it_expires() {
    let server = FakeAzureOpenAi::start().await;
    let clock = ManualClock::starting_at(T0);
    let credential = Arc::new(CountingCredential {
        calls: AtomicUsize::new(0),
        lifetime_s: 3600,
        now_s: (T0.0 / 1000) as i64,
    });
    let client = client(&server, OpenAiAuth::Entra(credential.clone()), &clock);
    client.complete(&request()).await.unwrap();
    clock.advance(Duration::from_secs(3000));
    client.complete(&request()).await.unwrap();
    assert_eq!(credential.calls.load(Ordering::SeqCst), 1);
    // Within five minutes of expiry a new token is fetched.
    clock.advance(Duration::from_secs(400));
    client.complete(&request()).await.unwrap();
    assert_eq!(credential.calls.load(Ordering::SeqCst), 2);
    let bearers: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.headers["authorization"].to_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        bearers,
        ["Bearer token-1", "Bearer token-1", "Bearer token-2"]
    );
    assert!(server.requests()[0].headers.get("api-key").is_none());
}

#[tokio::test]
async fn each_throttle_variant_becomes_a_rate_limit_with_its_hint() {
    let cases = [
        (
            ThrottleVariant::RetryAfter(7),
            HintSource::RetryAfter,
            Duration::from_secs(7),
        ),
        (
            ThrottleVariant::RetryAfterMs(1_500),
            HintSource::RetryAfterMs,
            Duration::from_millis(1_500),
        ),
        (
            ThrottleVariant::ResetTokens(12),
            HintSource::ResetTokens,
            Duration::from_secs(12),
        ),
        (
            ThrottleVariant::MessageOnly(9),
            HintSource::MessageText,
            Duration::from_secs(9),
        ),
        (
            ThrottleVariant::RetryAfter(86_400),
            HintSource::RetryAfter,
            Duration::from_secs(86_400),
        ),
    ];
    let server = FakeAzureOpenAi::start().await;
    let clock = ManualClock::starting_at(T0);
    let client = client(&server, OpenAiAuth::ApiKey("k".into()), &clock);
    for (variant, source, wait) in cases {
        server.script([Reply::Throttle(variant)]);
        match client.complete(&request()).await {
            Err(LlmError::RateLimited { hint, message }) => {
                assert_eq!(
                    (hint.source, hint.wait),
                    (source, Some(wait)),
                    "{variant:?}"
                );
                assert!(message.contains("exceeded token rate limit"));
            }
            other => panic!("{variant:?}: {other:?}"),
        }
    }
    assert_eq!(server.requests().len(), 5, "no hidden retries");
}

#[tokio::test]
async fn errors_map_to_what_the_retry_layer_branches_on_and_are_never_retried_here() {
    let server = FakeAzureOpenAi::start().await;
    let clock = ManualClock::starting_at(T0);
    let client = client(&server, OpenAiAuth::ApiKey("k".into()), &clock);
    server.script([
        Reply::ContentFilter,
        Reply::ContextLength,
        Reply::Status(
            500,
            serde_json::json!({"error": {"code": "InternalServerError", "message": "boom"}}),
        ),
        Reply::Status(
            503,
            serde_json::json!({"error": {"code": "ServiceUnavailable", "message": "busy"}}),
        ),
        Reply::Status(
            401,
            serde_json::json!({"error": {"code": "401", "message": "Access denied"}}),
        ),
        Reply::Slow(Duration::from_millis(1_500), Box::new(Reply::Ok(None))),
        Reply::Slow(
            Duration::from_millis(100),
            Box::new(Reply::Ok(Some("late but fine".into()))),
        ),
    ]);
    let mut results = Vec::new();
    for _ in 0..7 {
        results.push(client.complete(&request()).await);
    }
    assert!(matches!(results[0], Err(LlmError::ContentFiltered { .. })));
    assert!(matches!(results[1], Err(LlmError::ContextLength { .. })));
    assert!(matches!(
        results[2],
        Err(LlmError::Server { status: 500, .. })
    ));
    assert!(matches!(
        results[3],
        Err(LlmError::Server { status: 503, .. })
    ));
    assert!(matches!(
        results[4],
        Err(LlmError::Rejected { status: 401, .. })
    ));
    assert_eq!(results[5], Err(LlmError::Timeout));
    assert_eq!(
        results[6].as_ref().map(|c| c.text.as_str()),
        Ok("late but fine")
    );
    assert_eq!(server.requests().len(), 7, "exactly one request per call");
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_transport_error() {
    let server = FakeAzureOpenAi::start().await;
    let endpoint = server.endpoint();
    drop(server);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let clock = ManualClock::starting_at(T0);
    let client = AzureOpenAiClient::new(
        OpenAiConfig {
            endpoint,
            api_version: "2024-10-21".into(),
            timeout: Duration::from_millis(400),
        },
        OpenAiAuth::ApiKey("k".into()),
        Arc::new(clock),
    )
    .unwrap();
    let result = client.complete(&request()).await;
    assert!(
        matches!(result, Err(LlmError::Transport { .. } | LlmError::Timeout)),
        "{result:?}"
    );
}
