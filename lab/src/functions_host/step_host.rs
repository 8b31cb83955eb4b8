//! The host driven one step at a time, for tests that decide when each thing happens:
//! a `dispatch` tick, a delivery of every queued message, one message to one instance.
//! Invocations are sent exactly as the host sends them, and a success's outputs are
//! routed by the function's bindings (a failed invocation's are discarded); a failed
//! delivery stays queued, visible at once (a test moves its own clock past the
//! visibility timeout where that matters), and is poisoned at `maxDequeueCount`.
//! Customer notices published on any Kafka output are kept as the notifications topic.
//!
//! [`crate::functions_host::runtime`] drives the same app in real time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use stormgate_shared::clock::{Clock, EpochMillis};
use stormgate_shared::job::Tier;
use tokio::task::JoinSet;

use stormgate_handlers::system_clock::SystemClock;

use super::app_definition::{AppDefinition, Trigger};
use super::invocation_client::{Answer, InvocationClient};
use super::outputs::route;
use super::payloads::{self, KafkaRecord, TimerFiring};
use super::storage_queue::{QueuedMessage, StorageQueue};

/// The host: the app's definitions, its queues, the notifications topic.
#[derive(Debug)]
pub struct FunctionsHost {
    app: Arc<AppDefinition>,
    client: InvocationClient,
    settings: BTreeMap<String, String>,
    queues: BTreeMap<String, StorageQueue>,
    /// Messages that failed `maxDequeueCount` times: (queue, message).
    pub poison: Vec<(String, Value)>,
    /// Every message published on a Kafka output (the customer notices), by any function.
    pub notices: Vec<Value>,
    /// Every tier-function answer that succeeded (its `ReturnValue`).
    pub summarized: Vec<Value>,
}

impl Default for FunctionsHost {
    fn default() -> Self {
        FunctionsHost::new()
    }
}

/// The tier function of `tier` (`summarize-premium`, `summarize-standard`).
pub fn tier_function(tier: Tier) -> String {
    format!("summarize-{tier}")
}

fn now_millis() -> EpochMillis {
    SystemClock.now()
}

impl FunctionsHost {
    /// The host of this build's app (`function-defs/` and `host.json`). A built-in
    /// definition that does not parse leaves the host with no functions, which every
    /// test notices at once; `functions_host::app_definition`'s tests parse it.
    pub fn new() -> FunctionsHost {
        let app = AppDefinition::built_in().unwrap_or_else(|e| {
            tracing::error!(error = %e, "the built-in app definition does not parse");
            AppDefinition::default()
        });
        FunctionsHost::for_app(Arc::new(app))
    }

    /// The host of `app`.
    pub fn for_app(app: Arc<AppDefinition>) -> FunctionsHost {
        FunctionsHost {
            client: InvocationClient::new(app.host.function_timeout),
            app,
            settings: BTreeMap::new(),
            queues: BTreeMap::new(),
            poison: Vec::new(),
            notices: Vec::new(),
            summarized: Vec::new(),
        }
    }

    pub fn app(&self) -> &AppDefinition {
        &self.app
    }

    /// `POST {base}/{function}` with an invocation payload.
    pub async fn invoke(&self, base: &str, function: &str, body: &Value) -> Answer {
        self.client.invoke(base, function, body).await
    }

    /// Delivers Kafka records to `classify` (one invocation, no retry).
    pub async fn classify(&self, base: &str, records: &[KafkaRecord]) -> Answer {
        let binding = match self.app.function("classify").map(|f| &f.trigger) {
            Some(Trigger::Kafka { binding, .. }) => binding.clone(),
            _ => "events".to_owned(),
        };
        let body = payloads::kafka_batch(&binding, records, now_millis());
        self.invoke(base, "classify", &body).await
    }

    /// One `dispatch` timer tick; its outputs are routed only if it succeeded.
    pub async fn dispatch(&mut self, base: &str) -> Answer {
        let answer = self.invoke(base, "dispatch", &timer_invocation()).await;
        if answer.is_success() {
            self.accept("dispatch", &answer);
        }
        answer
    }

    /// A successful answer of `function`: its queue messages enqueued, its Kafka
    /// messages published.
    fn accept(&mut self, function: &str, answer: &Answer) {
        let Some(definition) = self.app.function(function) else {
            return;
        };
        let routed = route(definition, &answer.body, &self.settings);
        let now = now_millis();
        for (queue, message) in routed.queue_messages {
            self.queues.entry(queue).or_default().push(message, now);
        }
        self.notices
            .extend(routed.kafka_messages.into_iter().map(|(_, m)| m));
    }

    /// The Kafka messages of an answer that succeeded, published (for an invocation
    /// whose answer the test obtained itself).
    pub fn publish_notices(&mut self, answer: &Answer) {
        for binding in self.app.kafka_output_bindings() {
            match &answer.body["Outputs"][binding] {
                Value::Null => {}
                Value::Array(items) => self.notices.extend(items.iter().cloned()),
                one => self.notices.push(one.clone()),
            }
        }
    }

    /// The queue messages a `dispatch` answer carries, enqueued (for a tick whose answer
    /// the test obtained itself).
    pub fn enqueue_outputs(&mut self, answer: &Answer) {
        let Some(dispatch) = self.app.function("dispatch") else {
            return;
        };
        let routed = route(dispatch, &answer.body, &self.settings);
        let now = now_millis();
        for (queue, message) in routed.queue_messages {
            self.queues.entry(queue).or_default().push(message, now);
        }
    }

    fn tier_queue(&self, tier: Tier) -> String {
        self.app
            .queue_of(&tier_function(tier))
            .map(str::to_owned)
            .unwrap_or_else(|| tier_function(tier))
    }

    /// Messages waiting in a tier's queue.
    pub fn queued(&self, tier: Tier) -> usize {
        self.queues
            .get(&self.tier_queue(tier))
            .map_or(0, StorageQueue::len)
    }

    /// Takes every message waiting in `tier`'s queue without delivering it (a message
    /// the host lost, or one a test delivers itself).
    pub fn take_queued(&mut self, tier: Tier) -> Vec<QueuedMessage> {
        let queue = self.tier_queue(tier);
        self.queues
            .get_mut(&queue)
            .map(StorageQueue::drain)
            .unwrap_or_default()
    }

    /// Delivers one message of `tier`'s queue to the instance at `base` (as its next
    /// receive), and answers what the instance answered. The message is not queued
    /// again whatever happens; a success's outputs count only when the test hands the
    /// answer to [`FunctionsHost::record`].
    pub async fn deliver_message(&self, base: &str, tier: Tier, message: &QueuedMessage) -> Answer {
        let function = tier_function(tier);
        let body = self.queue_invocation(&function, message, message.dequeue_count + 1);
        self.invoke(base, &function, &body).await
    }

    fn queue_invocation(&self, function: &str, message: &QueuedMessage, count: u32) -> Value {
        let binding = match self.app.function(function).map(|f| &f.trigger) {
            Some(Trigger::Queue { binding, .. }) => binding.as_str(),
            _ => "handoff",
        };
        payloads::queue_message(binding, &message.body, &message.id, count, message.inserted)
    }

    /// Records a tier function's answer as the host would: a success publishes its
    /// Kafka messages and keeps its `ReturnValue`.
    pub fn record(&mut self, answer: &Answer) {
        if answer.is_success() {
            self.record_summarized(answer);
        }
    }

    fn record_summarized(&mut self, answer: &Answer) {
        self.publish_notices(answer);
        self.summarized.push(answer.return_value().clone());
    }

    /// Delivers every message waiting in both tiers' queues to `base`, all at once (the
    /// host runs a batch of queue messages concurrently). A failed delivery stays queued
    /// (or is poisoned); returns the answers.
    pub async fn deliver(&mut self, base: &str) -> Vec<Answer> {
        let mut deliveries = JoinSet::new();
        for tier in Tier::LLM {
            let function = tier_function(tier);
            let queue = self.tier_queue(tier);
            let messages = self
                .queues
                .get_mut(&queue)
                .map(|q| q.receive(usize::MAX, Instant::now()))
                .unwrap_or_default();
            for message in messages {
                let body = self.queue_invocation(&function, &message, message.dequeue_count);
                let (client, base, function, queue) = (
                    self.client.clone(),
                    base.to_owned(),
                    function.clone(),
                    queue.clone(),
                );
                deliveries.spawn(async move {
                    let answer = client.invoke(&base, &function, &body).await;
                    (queue, message, answer)
                });
            }
        }
        let max_dequeue = self.app.host.queues.max_dequeue_count;
        let mut answers = Vec::new();
        while let Some(joined) = deliveries.join_next().await {
            let Ok((queue, message, answer)) = joined else {
                continue;
            };
            if answer.is_success() {
                self.record_summarized(&answer);
            } else {
                let q = self.queues.entry(queue.clone()).or_default();
                let poisoned = q.fail(message, max_dequeue, Instant::now());
                if poisoned == super::storage_queue::FailedDelivery::Poisoned
                    && let Some(m) = q.poison.pop()
                {
                    self.poison.push((format!("{queue}-poison"), m.body));
                }
            }
            answers.push(answer);
        }
        answers
    }

    /// One `rollup` timer tick (regional roll-ups).
    pub async fn rollup(&self, base: &str) -> Answer {
        self.invoke(base, "rollup", &timer_invocation()).await
    }

    /// `GET {base}/api/summaries/{ticket}`: the read API, as a caller with the function
    /// key reaches it (the host checks the key, then forwards).
    pub async fn summaries(&self, base: &str, ticket: &str) -> Answer {
        self.client
            .get(base, &format!("/api/summaries/{ticket}"))
            .await
    }
}

/// A timer invocation (`dispatch`, `rollup`) at a fixed instant, for step-driven tests.
pub fn timer_invocation() -> Value {
    let firing = TimerFiring {
        last: EpochMillis(1_800_002_000_000),
        next: EpochMillis(1_800_002_005_000),
        past_due: false,
    };
    payloads::timer("dispatch", "timer", firing, EpochMillis(1_800_002_005_000))
}
