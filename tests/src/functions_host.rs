//! The Azure Functions host, as far as the fault suite needs it: it sends invocations to
//! handler instances exactly as the host does (`POST /<function>` with `{Data, Metadata}`,
//! forwarded HTTP at `/api/...`), and plays the Storage queues between `dispatch` and the
//! tier functions with the host's semantics: a message is only enqueued when `dispatch`
//! answered 2xx (a failed invocation's outputs are discarded), a delivery that fails
//! (non-2xx, or the instance died) leaves the message for redelivery, and after
//! `maxDequeueCount` (host.json: 5) failures it goes to the poison queue. Customer
//! notices that `dispatch` and the tier functions emit through their Kafka output
//! binding, in answers that succeeded, are kept as the notifications topic.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde_json::{Value, json};
use stormgate_handlers::functions::dispatch::{PREMIUM_QUEUE_BINDING, STANDARD_QUEUE_BINDING};
use stormgate_handlers::functions::summarize::{HANDOFF_BINDING, NOTIFICATIONS_BINDING};
use stormgate_shared::job::Tier;
use tokio::task::JoinSet;

use crate::kafka::{KafkaRecord, batch_invocation};

/// host.json `extensions.queues.maxDequeueCount`.
pub const MAX_DEQUEUE_COUNT: u32 = 5;

/// What an instance answered; `status` is `None` when it never answered (it died, or
/// was not listening).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: Option<u16>,
    pub body: Value,
}

impl Answer {
    pub fn is_success(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// A message waiting in a tier's Storage queue.
#[derive(Debug, Clone)]
pub struct QueuedMessage {
    pub body: Value,
    pub dequeue_count: u32,
}

/// The host: queues, the notifications topic and an HTTP client.
#[derive(Debug)]
pub struct FunctionsHost {
    http: reqwest::Client,
    queues: BTreeMap<&'static str, VecDeque<QueuedMessage>>,
    /// Messages that failed `MAX_DEQUEUE_COUNT` times, per queue.
    pub poison: Vec<(&'static str, Value)>,
    /// Every customer notice published to the notifications topic, by any function.
    pub notices: Vec<Value>,
    /// Every tier-function answer that succeeded (its `ReturnValue`).
    pub summarized: Vec<Value>,
}

impl Default for FunctionsHost {
    fn default() -> Self {
        FunctionsHost::new()
    }
}

impl FunctionsHost {
    pub fn new() -> FunctionsHost {
        FunctionsHost {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(300))
                .build()
                .unwrap(),
            queues: BTreeMap::new(),
            poison: Vec::new(),
            notices: Vec::new(),
            summarized: Vec::new(),
        }
    }

    /// `POST {base}/{function}` with an invocation payload.
    pub async fn invoke(&self, base: &str, function: &str, body: &Value) -> Answer {
        post(&self.http, base, function, body).await
    }

    /// Delivers Kafka records to `classify`.
    pub async fn classify(&self, base: &str, records: &[KafkaRecord]) -> Answer {
        self.invoke(base, "classify", &batch_invocation(records))
            .await
    }

    /// One `dispatch` timer tick; its queue messages are enqueued and its customer
    /// notices published only if it succeeded.
    pub async fn dispatch(&mut self, base: &str) -> Answer {
        let answer = self.invoke(base, "dispatch", &timer_invocation()).await;
        if answer.is_success() {
            self.enqueue_outputs(&answer);
            self.publish_notices(&answer);
        }
        answer
    }

    /// The customer notices of an answer that succeeded, added to the topic (for an
    /// invocation whose answer the test obtained itself).
    pub fn publish_notices(&mut self, answer: &Answer) {
        match &answer.body["Outputs"][NOTIFICATIONS_BINDING] {
            Value::Array(notices) => self.notices.extend(notices.iter().cloned()),
            Value::Null => {}
            other => panic!("{NOTIFICATIONS_BINDING} is not an array of messages: {other}"),
        }
    }

    /// Delivers one message of `tier`'s queue to the instance at `base`, as the host
    /// does when that instance dequeues it, and answers what the instance answered. The
    /// message is not queued again whatever happens: a test that delivers the same
    /// message to two instances plays a redelivery itself. A success's notices are
    /// published only when the test hands the answer to [`FunctionsHost::record`].
    pub async fn deliver_message(&self, base: &str, tier: Tier, message: &QueuedMessage) -> Answer {
        let function = format!("summarize-{tier}");
        post(&self.http, base, &function, &queue_invocation(message)).await
    }

    /// Records a tier function's answer as the host would: a success publishes its
    /// notices and keeps its `ReturnValue`.
    pub fn record(&mut self, answer: &Answer) {
        if answer.is_success() {
            self.record_summarized(answer);
        }
    }

    /// The queue messages a `dispatch` answer carries, added to their queues (for a
    /// tick whose answer the test obtained itself).
    pub fn enqueue_outputs(&mut self, answer: &Answer) {
        for binding in [PREMIUM_QUEUE_BINDING, STANDARD_QUEUE_BINDING] {
            let messages = match &answer.body["Outputs"][binding] {
                Value::Array(messages) => messages.clone(),
                Value::Null => Vec::new(),
                other => panic!("{binding} is not an array of messages: {other}"),
            };
            let queue = self.queues.entry(queue_name(binding)).or_default();
            queue.extend(messages.into_iter().map(|body| QueuedMessage {
                body,
                dequeue_count: 0,
            }));
        }
    }

    /// Messages waiting in a tier's queue.
    pub fn queued(&self, tier: Tier) -> usize {
        self.queues.get(tier_queue(tier)).map_or(0, VecDeque::len)
    }

    /// Takes every message waiting in `tier`'s queue, without delivering it (a message
    /// the host lost, or one a test delivers itself).
    pub fn take_queued(&mut self, tier: Tier) -> Vec<QueuedMessage> {
        self.queues
            .get_mut(tier_queue(tier))
            .map(|q| q.drain(..).collect())
            .unwrap_or_default()
    }

    /// Delivers every message waiting in both tiers' queues to `base`, all at once (the
    /// host runs a batch of queue messages concurrently). A failed delivery stays queued
    /// (or is poisoned); returns the answers.
    pub async fn deliver(&mut self, base: &str) -> Vec<Answer> {
        let mut deliveries = JoinSet::new();
        for tier in Tier::LLM {
            let function = format!("summarize-{tier}");
            for message in self.take_queued(tier) {
                let http = self.http.clone();
                let base = base.to_owned();
                let function = function.clone();
                deliveries.spawn(async move {
                    let invocation = queue_invocation(&message);
                    let answer = post(&http, &base, &function, &invocation).await;
                    (tier, message, answer)
                });
            }
        }
        let mut answers = Vec::new();
        while let Some(joined) = deliveries.join_next().await {
            let (tier, mut message, answer) = joined.unwrap();
            if answer.is_success() {
                self.record_summarized(&answer);
            } else {
                message.dequeue_count += 1;
                if message.dequeue_count >= MAX_DEQUEUE_COUNT {
                    self.poison.push((tier_queue(tier), message.body));
                } else {
                    self.queues
                        .entry(tier_queue(tier))
                        .or_default()
                        .push_back(message);
                }
            }
            answers.push(answer);
        }
        answers
    }

    fn record_summarized(&mut self, answer: &Answer) {
        self.publish_notices(answer);
        self.summarized.push(answer.body["ReturnValue"].clone());
    }

    /// One `rollup` timer tick (regional roll-ups, and the ServiceNow outbox drained).
    pub async fn rollup(&self, base: &str) -> Answer {
        self.invoke(base, "rollup", &timer_invocation()).await
    }

    /// `GET {base}/api/summaries/{ticket}`: the read API, as a caller with the function
    /// key reaches it (the host checks the key, then forwards).
    pub async fn summaries(&self, base: &str, ticket: &str) -> Answer {
        match self
            .http
            .get(format!("{base}/api/summaries/{ticket}"))
            .send()
            .await
        {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = response.json().await.unwrap_or(Value::Null);
                Answer {
                    status: Some(status),
                    body,
                }
            }
            Err(_) => Answer {
                status: None,
                body: Value::Null,
            },
        }
    }
}

async fn post(http: &reqwest::Client, base: &str, function: &str, body: &Value) -> Answer {
    match http
        .post(format!("{base}/{function}"))
        .json(body)
        .send()
        .await
    {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.json().await.unwrap_or(Value::Null);
            Answer {
                status: Some(status),
                body,
            }
        }
        Err(_) => Answer {
            status: None,
            body: Value::Null,
        },
    }
}

fn queue_name(binding: &str) -> &'static str {
    if binding == PREMIUM_QUEUE_BINDING {
        tier_queue(Tier::Premium)
    } else {
        tier_queue(Tier::Standard)
    }
}

fn tier_queue(tier: Tier) -> &'static str {
    match tier {
        Tier::Premium => "summarize-premium",
        _ => "summarize-standard",
    }
}

/// A timer invocation (`dispatch`, `rollup`): the host sends the timer info as a string.
pub fn timer_invocation() -> Value {
    let timer = json!({
        "Schedule": {"AdjustForDST": true},
        "ScheduleStatus": {"Last": "2027-01-15T08:30:00+00:00", "Next": "2027-01-15T08:30:05+00:00",
                           "LastUpdated": "2027-01-15T08:30:00+00:00"},
        "IsPastDue": false
    });
    json!({
        "Data": {"timer": timer.to_string()},
        "Metadata": {"sys": {"MethodName": "dispatch", "UtcNow": "2027-01-15T08:30:05Z", "RandGuid": "t"}}
    })
}

/// The invocation for one queue message: its JSON as a string, with queue metadata.
fn queue_invocation(message: &QueuedMessage) -> Value {
    json!({
        "Data": {HANDOFF_BINDING: message.body.to_string()},
        "Metadata": {"DequeueCount": (message.dequeue_count + 1).to_string(), "Id": "m",
                     "PopReceipt": "p", "InsertionTime": "2027-01-15T08:30:05+00:00"}
    })
}

/// The platform facts the emulation follows (`tests/fixtures/platform/retry-and-offsets.json`,
/// written from the Functions host's and the Kafka extension's sources).
#[derive(Debug, Clone)]
pub struct PlatformFacts {
    /// The `maxRetryCount` that means "retry for ever".
    pub unlimited_max_retry_count: i64,
    /// The smallest `maxRetryCount` the host takes.
    pub smallest_max_retry_count: i64,
    pub strategies: Vec<String>,
    /// The exponential strategy's spread (r in [1 - x, 1 + x]).
    pub exponential_randomization: f64,
    /// The Kafka trigger commits a batch's offsets once the retry loop ends, failed or not.
    pub commits_when_retries_end_in_failure: bool,
}

impl PlatformFacts {
    pub fn load() -> PlatformFacts {
        let path = repo_path("tests/fixtures/platform/retry-and-offsets.json");
        let facts: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let policy = &facts["retry_policy"];
        PlatformFacts {
            unlimited_max_retry_count: policy["unlimited_max_retry_count"].as_i64().unwrap(),
            smallest_max_retry_count: policy["smallest_max_retry_count"].as_i64().unwrap(),
            strategies: policy["strategies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_owned())
                .collect(),
            exponential_randomization: policy["exponential_randomization"].as_f64().unwrap(),
            commits_when_retries_end_in_failure:
                facts["kafka_trigger"]["offsets_committed_when_retries_end_in_failure"]
                    .as_bool()
                    .unwrap(),
        }
    }
}

/// A path in the repository.
pub fn repo_path(relative: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

/// The delays of a retry strategy.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryStrategy {
    FixedDelay(Duration),
    ExponentialBackoff {
        minimum: Duration,
        maximum: Duration,
    },
}

/// A function's retry policy (function.json `retry`) with the host's semantics.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    pub strategy: RetryStrategy,
    /// `None`: retried for ever.
    pub max_retries: Option<u32>,
    pub randomization: f64,
}

impl RetryPolicy {
    /// The policy of `function-defs/<function>/function.json`; `None` when it has none.
    pub fn of_function(
        function: &str,
        facts: &PlatformFacts,
    ) -> Result<Option<RetryPolicy>, String> {
        let path = repo_path(&format!("function-defs/{function}/function.json"));
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let definition: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        RetryPolicy::from_definition(&definition, facts)
    }

    /// Reads a definition's `retry` as the host does; an error names what the host would refuse.
    pub fn from_definition(
        definition: &Value,
        facts: &PlatformFacts,
    ) -> Result<Option<RetryPolicy>, String> {
        let Some(retry) = definition.get("retry") else {
            return Ok(None);
        };
        let strategy = retry["strategy"]
            .as_str()
            .ok_or("retry.strategy is missing")?;
        if !facts.strategies.iter().any(|s| s == strategy) {
            return Err(format!("unknown retry strategy {strategy:?}"));
        }
        let count = retry["maxRetryCount"]
            .as_i64()
            .ok_or("retry.maxRetryCount is not an integer")?;
        if count < facts.smallest_max_retry_count {
            return Err(format!(
                "maxRetryCount {count} is below {}",
                facts.smallest_max_retry_count
            ));
        }
        let max_retries = if count == facts.unlimited_max_retry_count {
            None
        } else {
            Some(u32::try_from(count).map_err(|e| e.to_string())?)
        };
        let interval = |name: &str| -> Result<Duration, String> {
            let text = retry[name]
                .as_str()
                .ok_or_else(|| format!("retry.{name} is missing"))?;
            time_span(text).ok_or_else(|| format!("retry.{name} {text:?} is not hh:mm:ss"))
        };
        let strategy = if strategy == "fixedDelay" {
            RetryStrategy::FixedDelay(interval("delayInterval")?)
        } else {
            let (minimum, maximum) = (interval("minimumInterval")?, interval("maximumInterval")?);
            if minimum > maximum {
                return Err("minimumInterval is above maximumInterval".to_owned());
            }
            RetryStrategy::ExponentialBackoff { minimum, maximum }
        };
        Ok(Some(RetryPolicy {
            strategy,
            max_retries,
            randomization: facts.exponential_randomization,
        }))
    }

    /// The waits before each retry of one invocation.
    pub fn schedule(&self) -> RetrySchedule {
        RetrySchedule {
            policy: self.clone(),
            retries: 0,
            exponent: 0,
            current: None,
        }
    }
}

/// The host's waits before the retries of one failed invocation. The exponential spread
/// is taken at its middle (r = 1), so the schedule is deterministic.
#[derive(Debug, Clone)]
pub struct RetrySchedule {
    policy: RetryPolicy,
    retries: u32,
    exponent: u32,
    current: Option<Duration>,
}

impl RetrySchedule {
    /// The wait before the next retry; `None` once the policy's retries are spent.
    pub fn next_delay(&mut self) -> Option<Duration> {
        if self
            .policy
            .max_retries
            .is_some_and(|max| self.retries >= max)
        {
            return None;
        }
        self.retries += 1;
        let delay = match self.policy.strategy {
            RetryStrategy::FixedDelay(delay) => delay,
            RetryStrategy::ExponentialBackoff { minimum, maximum } => {
                if self.current == Some(maximum) {
                    maximum
                } else {
                    let mut next = minimum;
                    if self.exponent > 0 {
                        next += minimum.mul_f64(2f64.powi(self.exponent as i32 - 1));
                    }
                    if next < maximum {
                        self.exponent += 1;
                    } else {
                        next = maximum;
                    }
                    self.current = Some(next);
                    next
                }
            }
        };
        Some(delay)
    }

    /// Retries made so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }
}

/// `hh:mm:ss` (optionally `d.hh:mm:ss` and fractional seconds), as .NET's TimeSpan reads it.
fn time_span(text: &str) -> Option<Duration> {
    let (days, clock) = match text.split_once('.') {
        Some((d, rest)) if rest.contains(':') && !d.contains(':') => (d.parse::<u64>().ok()?, rest),
        _ => (0, text),
    };
    let mut parts = clock.split(':');
    let hours: u64 = parts.next()?.parse().ok()?;
    let minutes: u64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || minutes > 59 || !(0.0..60.0).contains(&seconds) {
        return None;
    }
    Some(
        Duration::from_secs(days * 86_400 + hours * 3600 + minutes * 60)
            + Duration::from_secs_f64(seconds),
    )
}

#[cfg(test)]
mod retry_tests {
    use super::*;

    fn facts() -> PlatformFacts {
        PlatformFacts::load()
    }

    #[test]
    fn exponential_waits_double_from_the_minimum_up_to_the_maximum() {
        let definition = json!({"retry": {"strategy": "exponentialBackoff", "maxRetryCount": 5,
            "minimumInterval": "00:00:02", "maximumInterval": "00:01:00"}});
        let policy = RetryPolicy::from_definition(&definition, &facts())
            .unwrap()
            .unwrap();
        let mut schedule = policy.schedule();
        let waits: Vec<u64> = std::iter::from_fn(|| schedule.next_delay())
            .map(|d| d.as_secs())
            .collect();
        assert_eq!(waits, vec![2, 4, 6, 10, 18]);
    }

    #[test]
    fn minus_one_retries_for_ever_at_the_maximum() {
        let definition = json!({"retry": {"strategy": "exponentialBackoff", "maxRetryCount": -1,
            "minimumInterval": "00:00:02", "maximumInterval": "00:01:00"}});
        let policy = RetryPolicy::from_definition(&definition, &facts())
            .unwrap()
            .unwrap();
        assert_eq!(policy.max_retries, None);
        let mut schedule = policy.schedule();
        let waits: Vec<Duration> = (0..100).map_while(|_| schedule.next_delay()).collect();
        assert_eq!(waits.len(), 100);
        assert_eq!(waits[99], Duration::from_secs(60));
    }

    #[test]
    fn what_the_host_refuses_is_refused() {
        for retry in [
            json!({"strategy": "linear", "maxRetryCount": 1, "delayInterval": "00:00:01"}),
            json!({"strategy": "fixedDelay", "maxRetryCount": -2, "delayInterval": "00:00:01"}),
            json!({"strategy": "fixedDelay", "maxRetryCount": 1, "delayInterval": "5s"}),
            json!({"strategy": "exponentialBackoff", "maxRetryCount": 1,
                   "minimumInterval": "00:01:00", "maximumInterval": "00:00:02"}),
        ] {
            assert!(
                RetryPolicy::from_definition(&json!({ "retry": retry }), &facts()).is_err(),
                "{retry}"
            );
        }
    }
}
