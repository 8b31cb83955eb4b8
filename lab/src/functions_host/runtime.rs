//! The host in real time: what drives the app's functions when it runs on one machine
//! without Azure (`stormgate local`). From the app's definitions it starts
//!
//! - one Kafka listener per `kafkaTrigger`: records produced to the topic are delivered
//!   in batches of up to `maxBatchSize`, one invocation at a time; a batch leaves when it
//!   is full or `subscriberIntervalInSeconds` after the previous one;
//! - one timer per `timerTrigger`, firing on its NCRONTAB schedule (and at start when
//!   `runOnStartup`), never overlapping itself; an occurrence missed while a run overran
//!   fires at once as past due;
//! - one listener per `queueTrigger`: it receives up to `batchSize` visible messages and
//!   runs them concurrently, receives the next batch when the messages still running
//!   fall to `newBatchThreshold`, and polls an empty queue at intervals doubling from
//!   100 ms to `maxPollingInterval`. A failed delivery makes its message invisible for
//!   `visibilityTimeout`; one that fails with its dequeue count at `maxDequeueCount` goes
//!   to `<queue>-poison`.
//!
//! Every invocation that fails is run again under its function's `retry` policy, if it
//! has one (with `Metadata.RetryContext`); only then does the trigger's own failure
//! handling apply. A Kafka batch whose retries are exhausted is lost, as the extension
//! commits its offsets anyway: it is reported ([`HostEvent::KafkaBatchLost`]), never
//! silent. A success's outputs are routed by its bindings: queue messages enqueued,
//! Kafka messages kept as published on their topic.
//!
//! Everything the host does is reported on a channel of [`HostEvent`]s.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use stormgate_shared::clock::{Clock, EpochMillis};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;

use stormgate_handlers::system_clock::SystemClock;

use super::app_definition::{AppDefinition, FunctionDefinition, Trigger};
use super::invocation_client::{Answer, InvocationClient};
use super::outputs::route;
use super::payloads::{self, KafkaRecord, TimerFiring};
use super::storage_queue::{FailedDelivery, QueuedMessage, StorageQueue};

/// The shortest wait between polls of an empty Storage queue.
pub const MIN_QUEUE_POLLING_INTERVAL: Duration = Duration::from_millis(100);
/// How often a Kafka listener looks whether its batch is full before the interval ends.
const KAFKA_FILL_CHECK: Duration = Duration::from_millis(50);

/// What an invocation was started by.
#[derive(Debug, Clone)]
pub enum TriggerInput {
    Kafka(Vec<KafkaRecord>),
    Timer(TimerFiring),
    Queue(QueuedMessage),
}

/// What the host did.
#[derive(Debug, Clone)]
pub enum HostEvent {
    /// One invocation (one attempt of it), with its answer.
    Invoked {
        function: String,
        input: TriggerInput,
        /// 0 for the first attempt, then the retry number.
        retry: u32,
        started: EpochMillis,
        finished: EpochMillis,
        answer: Answer,
    },
    /// A message moved to its queue's poison queue.
    Poisoned { queue: String, message: Value },
    /// A Kafka batch whose invocation failed after every retry: its offsets are
    /// committed, its records are not processed.
    KafkaBatchLost { function: String, records: usize },
}

/// The wall clock as epoch milliseconds: the host stand-in runs in real time.
pub fn wall_clock() -> EpochMillis {
    SystemClock.now()
}

#[derive(Debug, Default)]
struct Topic {
    records: VecDeque<KafkaRecord>,
    next_offset: i64,
}

#[derive(Debug, Default)]
struct State {
    topic: Topic,
    queues: BTreeMap<String, StorageQueue>,
    published: Vec<(String, Value)>,
}

/// The host's shared state and its view of the app.
#[derive(Debug)]
struct Inner {
    app: Arc<AppDefinition>,
    base: String,
    settings: BTreeMap<String, String>,
    client: InvocationClient,
    state: Mutex<State>,
    events: mpsc::UnboundedSender<HostEvent>,
    /// Invocations running now.
    running: AtomicUsize,
    /// A Kafka batch has been taken and its invocation has not settled.
    kafka_busy: AtomicBool,
    /// Wakes queue listeners waiting for a running delivery to finish.
    finished: Notify,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn emit(&self, event: HostEvent) {
        // Nobody listening is not the host's failure.
        let _ = self.events.send(event);
    }

    /// Runs one invocation under the function's retry policy; returns the last answer.
    async fn invoke(
        &self,
        function: &FunctionDefinition,
        payload: Value,
        input: &TriggerInput,
    ) -> Answer {
        let mut retry = 0;
        loop {
            let body = match (&function.retry, retry) {
                (Some(policy), r) if r > 0 => {
                    payloads::with_retry_context(payload.clone(), r, policy.max_retry_count())
                }
                _ => payload.clone(),
            };
            self.running.fetch_add(1, Ordering::SeqCst);
            let started = wall_clock();
            let answer = self.client.invoke(&self.base, &function.name, &body).await;
            let finished = wall_clock();
            if answer.is_success() {
                self.accept(function, &answer);
            }
            self.running.fetch_sub(1, Ordering::SeqCst);
            self.emit(HostEvent::Invoked {
                function: function.name.clone(),
                input: input.clone(),
                retry,
                started,
                finished,
                answer: answer.clone(),
            });
            if answer.is_success() {
                return answer;
            }
            let next = retry + 1;
            match function.retry.as_ref().and_then(|p| p.delay_before(next)) {
                Some(delay) => {
                    tokio::time::sleep(delay).await;
                    retry = next;
                }
                None => return answer,
            }
        }
    }

    /// A success's outputs, routed by the function's bindings.
    fn accept(&self, function: &FunctionDefinition, answer: &Answer) {
        let routed = route(function, &answer.body, &self.settings);
        let now = wall_clock();
        let mut state = self.state();
        for (queue, message) in routed.queue_messages {
            state.queues.entry(queue).or_default().push(message, now);
        }
        state.published.extend(routed.kafka_messages);
    }
}

/// The running host; dropping it stops every listener (invocations in flight are
/// abandoned, as when the host stops).
#[derive(Debug)]
pub struct HostRuntime {
    inner: Arc<Inner>,
    tasks: JoinSet<()>,
}

impl HostRuntime {
    /// Starts the listeners of every non-HTTP function of `app` against the handler at
    /// `base`; `settings` resolve `%SETTING%` binding expressions. Returns the host and
    /// the channel of what it does.
    pub fn start(
        app: Arc<AppDefinition>,
        base: String,
        settings: BTreeMap<String, String>,
    ) -> (HostRuntime, mpsc::UnboundedReceiver<HostEvent>) {
        let (events, receiver) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            client: InvocationClient::new(app.host.function_timeout),
            app: app.clone(),
            base,
            settings,
            state: Mutex::default(),
            events,
            running: AtomicUsize::new(0),
            kafka_busy: AtomicBool::new(false),
            finished: Notify::new(),
        });
        let mut tasks = JoinSet::new();
        for function in app.functions.values() {
            let (inner, function) = (inner.clone(), function.clone());
            match &function.trigger {
                Trigger::Http { .. } => {}
                Trigger::Kafka { .. } => {
                    tasks.spawn(kafka_listener(inner, function));
                }
                Trigger::Timer { .. } => {
                    tasks.spawn(timer(inner, function));
                }
                Trigger::Queue { .. } => {
                    tasks.spawn(queue_listener(inner, function));
                }
            }
        }
        (HostRuntime { inner, tasks }, receiver)
    }

    /// Produces records to the topic the Kafka trigger reads; returns how many are now
    /// waiting to be delivered.
    pub fn produce(&self, events: impl IntoIterator<Item = Value>) -> usize {
        let mut state = self.inner.state();
        for event in events {
            let offset = state.topic.next_offset;
            state.topic.next_offset += 1;
            state.topic.records.push_back(KafkaRecord {
                partition: 0,
                offset,
                event,
            });
        }
        state.topic.records.len()
    }

    /// Records produced and not yet delivered, or in an invocation still settling.
    pub fn kafka_backlog(&self) -> usize {
        self.inner.state().topic.records.len()
            + usize::from(self.inner.kafka_busy.load(Ordering::SeqCst))
    }

    /// Messages waiting in each Storage queue (visible or not).
    pub fn queue_depths(&self) -> BTreeMap<String, usize> {
        self.inner
            .state()
            .queues
            .iter()
            .map(|(name, q)| (name.clone(), q.len()))
            .collect()
    }

    /// Messages in each poison queue.
    pub fn poisoned(&self) -> BTreeMap<String, usize> {
        self.inner
            .state()
            .queues
            .iter()
            .filter(|(_, q)| !q.poison.is_empty())
            .map(|(name, q)| (format!("{name}-poison"), q.poison.len()))
            .collect()
    }

    /// Invocations running now.
    pub fn running(&self) -> usize {
        self.inner.running.load(Ordering::SeqCst)
    }

    /// Every message published on a Kafka output so far: (topic, message).
    pub fn published(&self) -> Vec<(String, Value)> {
        self.inner.state().published.clone()
    }

    /// Stops every listener now.
    pub fn stop(&mut self) {
        self.tasks.abort_all();
    }
}

async fn kafka_listener(inner: Arc<Inner>, function: FunctionDefinition) {
    let Trigger::Kafka { binding, many, .. } = &function.trigger else {
        return;
    };
    let kafka = inner.app.host.kafka;
    let max = if *many { kafka.max_batch_size } else { 1 };
    // A batch leaves when it is full, or when the subscriber interval has passed since
    // the last one with whatever has arrived (the extension's `SubscriberIntervalInSeconds`).
    let mut window = Instant::now();
    loop {
        let waiting = inner.state().topic.records.len();
        let elapsed = window.elapsed();
        if waiting < max && elapsed < kafka.subscriber_interval {
            let left = kafka.subscriber_interval - elapsed;
            tokio::time::sleep(left.min(KAFKA_FILL_CHECK)).await;
            continue;
        }
        window = Instant::now();
        let batch: Vec<KafkaRecord> = {
            let mut state = inner.state();
            let n = state.topic.records.len().min(max);
            if n > 0 {
                inner.kafka_busy.store(true, Ordering::SeqCst);
            }
            state.topic.records.drain(..n).collect()
        };
        if batch.is_empty() {
            continue;
        }
        let payload = payloads::kafka_batch(binding, &batch, wall_clock());
        let records = batch.len();
        let answer = inner
            .invoke(&function, payload, &TriggerInput::Kafka(batch))
            .await;
        if !answer.is_success() {
            inner.emit(HostEvent::KafkaBatchLost {
                function: function.name.clone(),
                records,
            });
        }
        inner.kafka_busy.store(false, Ordering::SeqCst);
    }
}

async fn timer(inner: Arc<Inner>, function: FunctionDefinition) {
    let Trigger::Timer {
        binding,
        schedule,
        run_on_startup,
    } = &function.trigger
    else {
        return;
    };
    let mut last = wall_clock();
    let mut fire = |scheduled: EpochMillis, past_due: bool| {
        let next = schedule.next_after(scheduled).unwrap_or(scheduled);
        let firing = TimerFiring {
            last,
            next,
            past_due,
        };
        last = scheduled;
        (
            payloads::timer(&function.name, binding, firing, wall_clock()),
            firing,
        )
    };
    if *run_on_startup {
        let (payload, firing) = fire(wall_clock(), false);
        inner
            .invoke(&function, payload, &TriggerInput::Timer(firing))
            .await;
    }
    let mut scheduled = wall_clock();
    loop {
        let Some(next) = schedule.next_after(scheduled) else {
            return;
        };
        let now = wall_clock();
        let past_due = next < now;
        if !past_due {
            tokio::time::sleep(Duration::from_millis(next.0 - now.0)).await;
        }
        let (payload, firing) = fire(next, past_due);
        inner
            .invoke(&function, payload, &TriggerInput::Timer(firing))
            .await;
        // A run that overran skips to the latest occurrence it missed (fired at once,
        // past due), never a backlog of them.
        let now = wall_clock();
        scheduled = match schedule.next_after(next) {
            Some(following) if following < now => {
                let mut latest = following;
                while let Some(n) = schedule.next_after(latest).filter(|n| *n < now) {
                    latest = n;
                }
                EpochMillis(latest.0.saturating_sub(1))
            }
            _ => next,
        };
    }
}

async fn queue_listener(inner: Arc<Inner>, function: FunctionDefinition) {
    let Trigger::Queue { binding, queue } = &function.trigger else {
        return;
    };
    let settings = inner.app.host.queues;
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut deliveries = JoinSet::new();
    let mut polling = MIN_QUEUE_POLLING_INTERVAL;
    loop {
        while deliveries.try_join_next().is_some() {}
        if in_flight.load(Ordering::SeqCst) > settings.new_batch_threshold as usize {
            // Wait for running deliveries to fall to the threshold.
            let _ = tokio::time::timeout(polling, inner.finished.notified()).await;
            continue;
        }
        let batch = inner
            .state()
            .queues
            .entry(queue.clone())
            .or_default()
            .receive(settings.batch_size as usize, Instant::now());
        if batch.is_empty() {
            tokio::time::sleep(polling).await;
            polling = (polling * 2).min(settings.max_polling_interval);
            continue;
        }
        polling = MIN_QUEUE_POLLING_INTERVAL;
        for message in batch {
            in_flight.fetch_add(1, Ordering::SeqCst);
            let (inner, function, binding, queue, in_flight) = (
                inner.clone(),
                function.clone(),
                binding.clone(),
                queue.clone(),
                in_flight.clone(),
            );
            deliveries.spawn(async move {
                deliver(&inner, &function, &binding, &queue, message).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                inner.finished.notify_waiters();
            });
        }
    }
}

async fn deliver(
    inner: &Inner,
    function: &FunctionDefinition,
    binding: &str,
    queue: &str,
    message: QueuedMessage,
) {
    let payload = payloads::queue_message(
        binding,
        &message.body,
        &message.id,
        message.dequeue_count,
        message.inserted,
    );
    let answer = inner
        .invoke(function, payload, &TriggerInput::Queue(message.clone()))
        .await;
    if answer.is_success() {
        return;
    }
    let settings = inner.app.host.queues;
    let body = message.body.clone();
    let failed = inner
        .state()
        .queues
        .entry(queue.to_owned())
        .or_default()
        .fail(
            message,
            settings.max_dequeue_count,
            Instant::now() + settings.visibility_timeout,
        );
    if failed == FailedDelivery::Poisoned {
        inner.emit(HostEvent::Poisoned {
            queue: format!("{queue}-poison"),
            message: body,
        });
    }
}
