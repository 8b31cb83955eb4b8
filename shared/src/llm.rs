//! The LLM client interface the tier workers call, and its typed outcomes.
//!
//! Two implementations exist: the Azure OpenAI REST client in `stormgate-handlers`
//! (real HTTP) and the in-process simulator the storm lab runs on virtual time. Both
//! report throttling and failures as [`LlmError`] so that the one retry layer
//! ([`crate::retry`]) can decide what to do without knowing where the call went.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::tokens::Tokens;

/// Who says a chat message. Ticket text only ever travels as `User` content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

/// One chat-completions call against one deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The Azure OpenAI deployment name (not the model name).
    pub deployment: String,
    pub messages: Vec<ChatMessage>,
    /// Always set: without it Azure reserves the model's whole context window.
    pub max_tokens: u32,
    pub temperature: f32,
}

/// Token usage as the service reports it in every non-streaming response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> Tokens {
        Tokens(
            self.total_tokens
                .max(self.prompt_tokens + self.completion_tokens),
        )
    }
}

/// What the deployment says it has left (`x-ratelimit-remaining-*` headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RateLimitView {
    pub remaining_tokens: Option<u64>,
    pub remaining_requests: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub text: String,
    pub model: String,
    pub usage: Usage,
    pub rate_limit: RateLimitView,
}

/// Where a throttle's wait came from, most trustworthy first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HintSource {
    RetryAfterMs,
    RetryAfter,
    ResetTokens,
    ResetRequests,
    MessageText,
    /// No hint at all: the retry policy's own backoff applies.
    None,
}

/// How long a 429 asks us to stay away, and how we know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThrottleHint {
    pub wait: Option<Duration>,
    pub source: HintSource,
}

/// Why a call produced no completion. The variants are what the retry layer branches on.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum LlmError {
    /// 429: tokens or requests per minute exceeded (or a daily quota).
    #[error("rate limited ({hint:?}): {message}")]
    RateLimited { hint: ThrottleHint, message: String },
    /// 5xx from the service.
    #[error("server error {status}: {message}")]
    Server { status: u16, message: String },
    /// No answer within the client's timeout.
    #[error("timed out")]
    Timeout,
    /// The prompt or the completion tripped the content filter: retrying the same
    /// input would fail the same way.
    #[error("content filtered: {message}")]
    ContentFiltered { message: String },
    /// The prompt exceeds the model's context: only a shorter prompt can help.
    #[error("context length exceeded: {message}")]
    ContextLength { message: String },
    /// Other 4xx: our request is wrong; retrying cannot help.
    #[error("request rejected {status}: {message}")]
    Rejected { status: u16, message: String },
    /// The connection failed before an HTTP answer.
    #[error("transport error: {message}")]
    Transport { message: String },
}

impl LlmError {
    /// Whether the same request may succeed if sent again later.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. }
                | LlmError::Server { .. }
                | LlmError::Timeout
                | LlmError::Transport { .. }
        )
    }
}

/// A chat-completions endpoint. Implementations must not retry on their own:
/// retrying is the job of [`crate::retry`] alone, so that exactly one layer does it.
#[async_trait]
pub trait LlmClient: Send + Sync + std::fmt::Debug {
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError>;
}
