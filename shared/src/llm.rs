//! The LLM client interface the tier workers call, and its typed outcomes.
//!
//! Two implementations exist: the Azure OpenAI REST client in `stormgate-handlers`
//! (real HTTP) and the in-process simulator the storm lab runs on virtual time. Both
//! report throttling and failures as [`LlmError`] so that the one retry layer
//! ([`crate::retry`]) can decide what to do without knowing where the call went.
//!
//! The header parsing lives here too, as pure functions over `(name, value)` pairs, so
//! the REST client, the simulator and the tests read throttle hints the same way.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
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

/// The longest wait a hint may express; anything longer is clamped here so that
/// arithmetic on it can never overflow (the retry layer treats it as "deployment down").
pub const MAX_HINT: Duration = Duration::from_secs(30 * 24 * 3600);

/// Reads the throttle hint of a 429 from its headers, then, as a last resort, from the
/// seconds quoted in its message text.
///
/// Precedence, most precise first: `retry-after-ms`, `retry-after` (delay-seconds or an
/// HTTP-date, measured from `now`), `x-ratelimit-reset-tokens`,
/// `x-ratelimit-reset-requests`, the message text. Header names match case-insensitively;
/// values that do not parse are skipped, never fatal.
pub fn parse_throttle_hint<I, K, V>(headers: I, message: &str, now: EpochMillis) -> ThrottleHint
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut best: Option<(HintSource, Duration)> = None;
    for (name, value) in headers {
        let (name, value) = (name.as_ref(), value.as_ref());
        let parsed = if name.eq_ignore_ascii_case("retry-after-ms") {
            parse_millis(value).map(|d| (HintSource::RetryAfterMs, d))
        } else if name.eq_ignore_ascii_case("retry-after") {
            parse_retry_after(value, now).map(|d| (HintSource::RetryAfter, d))
        } else if name.eq_ignore_ascii_case("x-ratelimit-reset-tokens") {
            parse_reset_duration(value).map(|d| (HintSource::ResetTokens, d))
        } else if name.eq_ignore_ascii_case("x-ratelimit-reset-requests") {
            parse_reset_duration(value).map(|d| (HintSource::ResetRequests, d))
        } else {
            None
        };
        if let Some((source, wait)) = parsed
            && best.is_none_or(|(held, _)| precedence(source) < precedence(held))
        {
            best = Some((source, wait));
        }
    }
    let best =
        best.or_else(|| retry_wait_in_message(message).map(|d| (HintSource::MessageText, d)));
    match best {
        Some((source, wait)) => ThrottleHint {
            wait: Some(wait.min(MAX_HINT)),
            source,
        },
        None => ThrottleHint {
            wait: None,
            source: HintSource::None,
        },
    }
}

/// Reads `x-ratelimit-remaining-tokens` / `-requests` (case-insensitive; unparsable
/// values are treated as absent).
pub fn parse_rate_limit_view<I, K, V>(headers: I) -> RateLimitView
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut view = RateLimitView::default();
    for (name, value) in headers {
        let (name, value) = (name.as_ref(), value.as_ref().trim());
        if name.eq_ignore_ascii_case("x-ratelimit-remaining-tokens") {
            view.remaining_tokens = value.parse().ok().or(view.remaining_tokens);
        } else if name.eq_ignore_ascii_case("x-ratelimit-remaining-requests") {
            view.remaining_requests = value.parse().ok().or(view.remaining_requests);
        }
    }
    view
}

fn precedence(source: HintSource) -> u8 {
    match source {
        HintSource::RetryAfterMs => 0,
        HintSource::RetryAfter => 1,
        HintSource::ResetTokens => 2,
        HintSource::ResetRequests => 3,
        HintSource::MessageText => 4,
        HintSource::None => 5,
    }
}

/// `retry-after-ms`: a non-negative number of milliseconds (fractions allowed).
fn parse_millis(value: &str) -> Option<Duration> {
    seconds_to_duration(parse_non_negative(value)? / 1000.0)
}

/// `retry-after`: delay-seconds, or an HTTP-date that is turned into a wait from `now`
/// (a date in the past means "now").
pub fn parse_retry_after(value: &str, now: EpochMillis) -> Option<Duration> {
    let value = value.trim();
    if let Some(seconds) = parse_non_negative(value) {
        return seconds_to_duration(seconds);
    }
    let at = jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(value)
        .ok()?;
    let at_millis = u64::try_from(at.as_millisecond()).unwrap_or(0);
    Some(EpochMillis(at_millis).since(now))
}

/// `x-ratelimit-reset-*`: Azure sends either plain seconds (`"6"`, `"0.5"`) or a Go
/// duration (`"6s"`, `"1m0s"`, `"250ms"`, `"1h2m3.5s"`).
pub fn parse_reset_duration(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Some(seconds) = parse_non_negative(value) {
        return seconds_to_duration(seconds);
    }
    parse_go_duration(value)
}

/// A Go `time.Duration` string: one or more `<number><unit>` pairs, units `h`, `m`,
/// `s`, `ms`, `us`/`µs`, `ns`.
fn parse_go_duration(value: &str) -> Option<Duration> {
    let mut rest = value;
    let mut total = 0.0_f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest.get(..number_len)?.parse().ok()?;
        rest = rest.get(number_len..)?;
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match rest.get(..unit_len)? {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" | "μs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = rest.get(unit_len..)?;
        total += number * scale;
    }
    seconds_to_duration(total)
}

/// The wait quoted in a 429's message: Azure's "Please retry after 7 seconds" (also
/// "second", "sec", "s"), or OpenAI's "try again in 1.5s" / "in 120ms".
pub fn retry_wait_in_message(message: &str) -> Option<Duration> {
    // ASCII lowering keeps byte offsets identical to the original text.
    let lower = message.to_ascii_lowercase();
    ["retry after ", "try again in "].iter().find_map(|marker| {
        lower
            .match_indices(marker)
            .find_map(|(at, m)| wait_at_start(lower.get(at + m.len()..)?))
    })
}

fn wait_at_start(text: &str) -> Option<Duration> {
    let number_len = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let number = parse_non_negative(text.get(..number_len)?)?;
    let unit: String = text
        .get(number_len..)?
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let seconds = match unit.as_str() {
        "ms" | "millisecond" | "milliseconds" => number / 1000.0,
        "s" | "sec" | "secs" | "second" | "seconds" => number,
        "m" | "min" | "mins" | "minute" | "minutes" => number * 60.0,
        _ => return None,
    };
    seconds_to_duration(seconds)
}

fn parse_non_negative(value: &str) -> Option<f64> {
    let value = value.trim();
    // Only plain decimal numbers: f64's parser would also take "inf", "NaN" and "1e9".
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    value.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn seconds_to_duration(seconds: f64) -> Option<Duration> {
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(seconds.min(MAX_HINT.as_secs_f64())).unwrap_or(MAX_HINT))
}

/// A chat-completions endpoint. Implementations must not retry on their own:
/// retrying is the job of [`crate::retry`] alone, so that exactly one layer does it.
#[async_trait]
pub trait LlmClient: Send + Sync + std::fmt::Debug {
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: EpochMillis = EpochMillis(1_445_412_480_000); // 2015-10-21T07:28:00Z

    fn hint(headers: &[(&str, &str)], message: &str) -> ThrottleHint {
        parse_throttle_hint(headers.iter().copied(), message, NOW)
    }

    #[test]
    fn retry_after_ms_wins_over_every_other_hint() {
        let h = hint(
            &[
                ("Retry-After", "7"),
                ("x-ratelimit-reset-tokens", "3s"),
                ("retry-after-ms", "1250"),
            ],
            "Please retry after 9 seconds.",
        );
        assert_eq!(h.source, HintSource::RetryAfterMs);
        assert_eq!(h.wait, Some(Duration::from_millis(1250)));
    }

    #[test]
    fn retry_after_seconds_and_http_date_are_both_read() {
        let h = hint(&[("retry-after", "7")], "");
        assert_eq!(
            (h.source, h.wait),
            (HintSource::RetryAfter, Some(Duration::from_secs(7)))
        );
        let h = hint(&[("Retry-After", "Wed, 21 Oct 2015 07:28:30 GMT")], "");
        assert_eq!(
            (h.source, h.wait),
            (HintSource::RetryAfter, Some(Duration::from_secs(30)))
        );
        let past = hint(&[("Retry-After", "Wed, 21 Oct 2015 07:00:00 GMT")], "");
        assert_eq!(past.wait, Some(Duration::ZERO));
    }

    #[test]
    fn reset_headers_accept_go_durations_and_plain_seconds() {
        assert_eq!(parse_reset_duration("6s"), Some(Duration::from_secs(6)));
        assert_eq!(parse_reset_duration("1m0s"), Some(Duration::from_secs(60)));
        assert_eq!(
            parse_reset_duration("1m30.5s"),
            Some(Duration::from_millis(90_500))
        );
        assert_eq!(
            parse_reset_duration("250ms"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(parse_reset_duration("12"), Some(Duration::from_secs(12)));
        assert_eq!(
            parse_reset_duration("0.5"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse_reset_duration("soon"), None);
        assert_eq!(parse_reset_duration("5x"), None);
        assert_eq!(parse_reset_duration(""), None);
    }

    #[test]
    fn reset_tokens_is_preferred_to_reset_requests() {
        let h = hint(
            &[
                ("x-ratelimit-reset-requests", "1s"),
                ("x-ratelimit-reset-tokens", "1m0s"),
            ],
            "",
        );
        assert_eq!(
            (h.source, h.wait),
            (HintSource::ResetTokens, Some(Duration::from_secs(60)))
        );
        let h = hint(&[("x-ratelimit-reset-requests", "2s")], "");
        assert_eq!(h.source, HintSource::ResetRequests);
    }

    #[test]
    fn message_text_is_the_last_resort() {
        let azure = "Requests to the ChatCompletions_Create Operation under Azure OpenAI API \
                     version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 \
                     pricing tier. Please retry after 86400 seconds.";
        let h = hint(&[("content-type", "application/json")], azure);
        assert_eq!(
            (h.source, h.wait),
            (HintSource::MessageText, Some(Duration::from_secs(86_400)))
        );
        assert_eq!(
            retry_wait_in_message("Rate limit reached. Please try again in 1.5s."),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_wait_in_message("Please retry after 1 second"),
            Some(Duration::from_secs(1))
        );
        let none = hint(&[], "exceeded call rate limit");
        assert_eq!((none.source, none.wait), (HintSource::None, None));
    }

    #[test]
    fn unparsable_headers_fall_through_to_the_next_source() {
        let h = hint(
            &[
                ("retry-after-ms", "soon"),
                ("retry-after", "NaN"),
                ("retry-after", "-3"),
            ],
            "Please retry after 4 seconds",
        );
        assert_eq!(
            (h.source, h.wait),
            (HintSource::MessageText, Some(Duration::from_secs(4)))
        );
    }

    #[test]
    fn absurd_waits_are_clamped_not_overflowed() {
        let h = hint(&[("retry-after", "99999999999999999999999")], "");
        assert_eq!(h.wait, Some(MAX_HINT));
    }

    #[test]
    fn remaining_headers_become_the_rate_limit_view() {
        let view = parse_rate_limit_view([
            ("X-RateLimit-Remaining-Tokens", "41000"),
            ("x-ratelimit-remaining-requests", "12"),
            ("x-ratelimit-remaining-other", "1"),
        ]);
        assert_eq!(view.remaining_tokens, Some(41_000));
        assert_eq!(view.remaining_requests, Some(12));
        let garbage = parse_rate_limit_view([("x-ratelimit-remaining-tokens", "-1")]);
        assert_eq!(garbage, RateLimitView::default());
    }

    proptest! {
        #[test]
        fn hint_parsing_never_panics(
            headers in proptest::collection::vec((
                prop_oneof![
                    Just("retry-after".to_owned()),
                    Just("Retry-After-Ms".to_owned()),
                    Just("x-ratelimit-reset-tokens".to_owned()),
                    Just("x-ratelimit-reset-requests".to_owned()),
                    Just("x-ratelimit-remaining-tokens".to_owned()),
                    ".{0,20}",
                ],
                ".{0,40}",
            ), 0..6),
            message in ".{0,200}",
            now in any::<u64>(),
        ) {
            let h = parse_throttle_hint(headers.iter().map(|(k, v)| (k, v)), &message, EpochMillis(now));
            prop_assert!(h.wait.is_none_or(|w| w <= MAX_HINT));
            prop_assert_eq!(h.wait.is_none(), h.source == HintSource::None);
            let _ = parse_rate_limit_view(headers.iter().map(|(k, v)| (k, v)));
        }

        #[test]
        fn message_text_with_any_suffix_never_panics(prefix in ".{0,30}", n in ".{0,12}", unit in ".{0,12}") {
            let text = format!("{prefix}Please retry after {n}{unit}");
            if let Some(w) = retry_wait_in_message(&text) {
                prop_assert!(w <= MAX_HINT);
            }
        }

        #[test]
        fn go_durations_round_trip_whole_seconds(m in 0u64..10_000, s in 0u64..60) {
            prop_assert_eq!(
                parse_reset_duration(&format!("{m}m{s}s")),
                Some(Duration::from_secs(m * 60 + s))
            );
        }

        #[test]
        fn delay_seconds_round_trip(secs in 0u64..=MAX_HINT.as_secs()) {
            prop_assert_eq!(
                parse_retry_after(&secs.to_string(), NOW),
                Some(Duration::from_secs(secs))
            );
        }
    }
}
