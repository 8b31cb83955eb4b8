//! The Azure OpenAI chat-completions client: REST on reqwest (rustls), no retries.
//!
//! `POST {endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...`,
//! authenticated by an Entra ID bearer token from managed identity (scope
//! `https://cognitiveservices.azure.com/.default`, cached until shortly before it
//! expires) or by an `api-key` header. Retrying is the job of the shared retry layer
//! alone: reqwest's own retry policy is switched off, and every status maps to exactly
//! one [`LlmError`] so that layer can decide. Throttle hints and `x-ratelimit-*`
//! headers are read with the shared parsers.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use azure_core::credentials::TokenCredential;
use serde::Deserialize;
use serde_json::json;
use stormgate_shared::clock::{Clock, EpochMillis};
use stormgate_shared::llm::{
    ChatRequest, Completion, LlmClient, LlmError, Usage, parse_rate_limit_view, parse_throttle_hint,
};

/// The Entra ID scope of Azure OpenAI.
pub const COGNITIVE_SERVICES_SCOPE: &str = "https://cognitiveservices.azure.com/.default";

/// A cached token is replaced this long before it expires.
const TOKEN_REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// How the client proves who it is.
#[derive(Clone)]
pub enum OpenAiAuth {
    /// `api-key` header (the key comes from Key Vault).
    ApiKey(String),
    /// Bearer token from a credential (managed identity in Azure).
    Entra(Arc<dyn TokenCredential>),
}

impl std::fmt::Debug for OpenAiAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenAiAuth::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
            OpenAiAuth::Entra(_) => f.write_str("Entra"),
        }
    }
}

/// Where and how to call.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// `https://<account>.openai.azure.com` (a trailing slash is tolerated).
    pub endpoint: String,
    pub api_version: String,
    /// The whole call, connection to last byte.
    pub timeout: Duration,
}

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum OpenAiSetupError {
    #[error("could not build the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
}

/// The Azure OpenAI REST client. Cheap to share; one per handler process.
#[derive(Debug)]
pub struct AzureOpenAiClient {
    http: reqwest::Client,
    config: OpenAiConfig,
    auth: OpenAiAuth,
    token: tokio::sync::Mutex<Option<CachedToken>>,
    clock: Arc<dyn Clock>,
}

#[derive(Debug, Clone)]
struct CachedToken {
    bearer: String,
    refresh_at: EpochMillis,
}

impl AzureOpenAiClient {
    pub fn new(
        config: OpenAiConfig,
        auth: OpenAiAuth,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, OpenAiSetupError> {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            // Exactly one retry layer: reqwest's own is switched off.
            .retry(reqwest::retry::never())
            .build()?;
        Ok(AzureOpenAiClient {
            http,
            config,
            auth,
            token: tokio::sync::Mutex::new(None),
            clock,
        })
    }

    fn url(&self, deployment: &str) -> String {
        format!(
            "{}/openai/deployments/{}/chat/completions?api-version={}",
            self.config.endpoint.trim_end_matches('/'),
            percent_encode_segment(deployment),
            percent_encode_segment(&self.config.api_version),
        )
    }

    async fn authorize(
        &self,
        builder: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, LlmError> {
        match &self.auth {
            OpenAiAuth::ApiKey(key) => Ok(builder.header("api-key", key)),
            OpenAiAuth::Entra(credential) => {
                let bearer = self.bearer(credential.as_ref()).await?;
                Ok(builder.bearer_auth(bearer))
            }
        }
    }

    /// The cached token, or a new one when it is close to expiry.
    async fn bearer(&self, credential: &dyn TokenCredential) -> Result<String, LlmError> {
        let mut cached = self.token.lock().await;
        let now = self.clock.now();
        if let Some(token) = cached.as_ref().filter(|t| now < t.refresh_at) {
            return Ok(token.bearer.clone());
        }
        let token = credential
            .get_token(&[COGNITIVE_SERVICES_SCOPE], None)
            .await
            .map_err(|e| LlmError::Transport {
                message: format!("could not get an Entra ID token: {e}"),
            })?;
        let expires_millis = u64::try_from(token.expires_on.unix_timestamp())
            .unwrap_or(0)
            .saturating_mul(1000);
        let fresh = CachedToken {
            bearer: token.token.secret().to_owned(),
            refresh_at: EpochMillis(expires_millis).minus(TOKEN_REFRESH_MARGIN),
        };
        *cached = Some(fresh.clone());
        Ok(fresh.bearer)
    }
}

#[async_trait]
impl LlmClient for AzureOpenAiClient {
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        let body = json!({
            "messages": request.messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        });
        let builder = self.http.post(self.url(&request.deployment)).json(&body);
        let response = self
            .authorize(builder)
            .await?
            .send()
            .await
            .map_err(transport_error)?;
        let status = response.status().as_u16();
        let headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let text = response.text().await.map_err(transport_error)?;
        interpret(status, &headers, &text, self.clock.now())
    }
}

/// Maps one HTTP answer to a completion or the error the retry layer branches on.
pub fn interpret(
    status: u16,
    headers: &[(String, String)],
    body: &str,
    now: EpochMillis,
) -> Result<Completion, LlmError> {
    let pairs = || headers.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    match status {
        200..=299 => completion(body, parse_rate_limit_view(pairs())),
        429 => {
            let message = error_body(body).message;
            Err(LlmError::RateLimited {
                hint: parse_throttle_hint(pairs(), &message, now),
                message,
            })
        }
        408 => Err(LlmError::Timeout),
        400..=499 => {
            let error = error_body(body);
            let code = error.code.as_deref().unwrap_or_default();
            let inner = error.inner_code.as_deref().unwrap_or_default();
            if code == "content_filter" || inner == "ResponsibleAIPolicyViolation" {
                Err(LlmError::ContentFiltered {
                    message: error.message,
                })
            } else if code == "context_length_exceeded" {
                Err(LlmError::ContextLength {
                    message: error.message,
                })
            } else {
                Err(LlmError::Rejected {
                    status,
                    message: error.message,
                })
            }
        }
        _ => Err(LlmError::Server {
            status,
            message: error_body(body).message,
        }),
    }
}

#[derive(Debug, Deserialize)]
struct ChatResponse {
    #[serde(default)]
    model: String,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<ResponseMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ResponseMessage {
    #[serde(default)]
    content: Option<String>,
}

fn completion(
    body: &str,
    rate_limit: stormgate_shared::llm::RateLimitView,
) -> Result<Completion, LlmError> {
    let parsed: ChatResponse = serde_json::from_str(body).map_err(|e| LlmError::Server {
        status: 200,
        message: format!("malformed completion: {e}"),
    })?;
    let choice = parsed.choices.into_iter().next();
    if choice.as_ref().and_then(|c| c.finish_reason.as_deref()) == Some("content_filter") {
        return Err(LlmError::ContentFiltered {
            message: "completion stopped by the content filter".to_owned(),
        });
    }
    let text = choice
        .and_then(|c| c.message)
        .and_then(|m| m.content)
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| LlmError::Server {
            status: 200,
            message: "completion without content".to_owned(),
        })?;
    Ok(Completion {
        text,
        model: parsed.model,
        usage: parsed.usage.unwrap_or_default(),
        rate_limit,
    })
}

/// The `{"error": {"code", "message", "innererror": {"code"}}}` shape; a body that is
/// not JSON becomes the message itself (proxies answer with HTML).
struct ErrorBody {
    code: Option<String>,
    inner_code: Option<String>,
    message: String,
}

fn error_body(body: &str) -> ErrorBody {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let error = &value["error"];
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    ErrorBody {
        code: text(&error["code"]),
        inner_code: text(&error["innererror"]["code"]),
        message: text(&error["message"])
            .unwrap_or_else(|| body.chars().take(500).collect::<String>()),
    }
}

fn transport_error(e: reqwest::Error) -> LlmError {
    if e.is_timeout() {
        LlmError::Timeout
    } else {
        LlmError::Transport {
            message: e.to_string(),
        }
    }
}

/// Deployment names are letters, digits, `-`, `_` and `.`; anything else is escaped
/// so a setting can never reshape the URL.
fn percent_encode_segment(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                char::from(b).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}
