//! An Azure Storage queue as the queue trigger sees it: messages in insertion order,
//! each invisible while a delivery of it runs and for `visibilityTimeout` after a
//! delivery failed, its `DequeueCount` raised by every receive, and moved to
//! `<queue>-poison` once a delivery fails with the count at `maxDequeueCount`.

use std::collections::VecDeque;
use std::time::Instant;

use serde_json::Value;
use stormgate_shared::clock::EpochMillis;

/// A message waiting in, or received from, a queue.
#[derive(Debug, Clone)]
pub struct QueuedMessage {
    pub id: String,
    pub body: Value,
    /// Receives so far (the host's `DequeueCount` of the last delivery).
    pub dequeue_count: u32,
    pub inserted: EpochMillis,
    /// Not received again before this instant (`None`: visible).
    visible_at: Option<Instant>,
}

/// What a failed delivery did to its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedDelivery {
    /// Back in the queue, visible again after the visibility timeout.
    Released,
    /// Moved to the poison queue.
    Poisoned,
}

/// One queue and its poison queue.
#[derive(Debug, Default)]
pub struct StorageQueue {
    messages: VecDeque<QueuedMessage>,
    /// Messages that failed `maxDequeueCount` times.
    pub poison: Vec<QueuedMessage>,
    inserted: u64,
}

impl StorageQueue {
    /// Adds a message (an output binding's value).
    pub fn push(&mut self, body: Value, now: EpochMillis) {
        self.inserted += 1;
        self.messages.push_back(QueuedMessage {
            id: format!("m{:06}", self.inserted),
            body,
            dequeue_count: 0,
            inserted: now,
            visible_at: None,
        });
    }

    /// Messages waiting, visible or not.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Receives up to `max` visible messages, raising their dequeue counts; they stay
    /// out of the queue until [`StorageQueue::fail`] puts one back.
    pub fn receive(&mut self, max: usize, now: Instant) -> Vec<QueuedMessage> {
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(self.messages.len());
        while let Some(mut m) = self.messages.pop_front() {
            if taken.len() < max && m.visible_at.is_none_or(|at| at <= now) {
                m.dequeue_count += 1;
                m.visible_at = None;
                taken.push(m);
            } else {
                kept.push_back(m);
            }
        }
        self.messages = kept;
        taken
    }

    /// Takes every message without receiving it (a test delivers or loses them itself).
    pub fn drain(&mut self) -> Vec<QueuedMessage> {
        self.messages.drain(..).collect()
    }

    /// A delivery of `message` (received, so its count includes that delivery) failed:
    /// poisoned at `max_dequeue_count`, otherwise queued again, invisible until
    /// `visible_at`.
    pub fn fail(
        &mut self,
        mut message: QueuedMessage,
        max_dequeue_count: u32,
        visible_at: Instant,
    ) -> FailedDelivery {
        if message.dequeue_count >= max_dequeue_count {
            self.poison.push(message);
            FailedDelivery::Poisoned
        } else {
            message.visible_at = Some(visible_at);
            self.messages.push_back(message);
            FailedDelivery::Released
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn a_failed_message_is_invisible_for_the_timeout_then_poisoned_at_the_count() {
        let mut q = StorageQueue::default();
        q.push(json!({"n": 1}), EpochMillis(0));
        q.push(json!({"n": 2}), EpochMillis(0));
        let t0 = Instant::now();
        let first = q.receive(1, t0);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].dequeue_count, 1);
        let timeout = Duration::from_secs(15);
        let message = first.into_iter().next().unwrap();
        assert_eq!(q.fail(message, 2, t0 + timeout), FailedDelivery::Released);
        // Only the other message is visible until the timeout has passed.
        let visible = q.receive(8, t0 + Duration::from_secs(1));
        assert_eq!(visible.len(), 1);
        assert_eq!(visible[0].body["n"], 2);
        let again = q.receive(8, t0 + timeout);
        assert_eq!(again[0].dequeue_count, 2);
        let message = again.into_iter().next().unwrap();
        assert_eq!(q.fail(message, 2, t0 + timeout), FailedDelivery::Poisoned);
        assert_eq!(q.poison.len(), 1);
        assert!(q.is_empty());
    }
}
