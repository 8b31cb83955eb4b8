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
