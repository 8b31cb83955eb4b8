//! Virtual time for the replay: a discrete-event scheduler under the product's own
//! async code.
//!
//! Every actor of a replay (the ticket feed, the dispatch timer, each tier worker
//! invocation, each naive call chain) is a task started with [`VirtualTime::spawn`]
//! and waits only through [`VirtualClock::sleep`]. [`VirtualTime::run`] lets exactly
//! one task run at a time: it wakes the earliest sleeper (ties in the order they went
//! to sleep), waits until that task sleeps again or ends, and repeats. Time jumps from
//! one event to the next, so hours of storm take seconds, and because only one task
//! runs at a time the interleaving is a function of virtual time alone: a Redis round
//! trip takes wall time but no virtual time and cannot reorder anything. Hence the
//! same seed gives the same run, with the memory store or with Redis.
//!
//! Tasks must not wait on each other except through time (no channels between
//! tasks): a task blocked on something else would stall the scheduler, which waits
//! for it to sleep or end.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Notify, oneshot};

use stormgate_shared::clock::{Clock, EpochMillis};

#[derive(Debug, Default)]
struct State {
    now: u64,
    seq: u64,
    sleepers: BTreeMap<(u64, u64), oneshot::Sender<()>>,
    /// Tasks woken and not yet asleep or finished.
    running: usize,
    /// Tasks started and not finished.
    live: usize,
}

/// The scheduler. Clone the [`VirtualClock`] it hands out into everything that needs time.
#[derive(Debug)]
pub struct VirtualTime {
    state: Mutex<State>,
    idle: Notify,
}

impl VirtualTime {
    pub fn starting_at(t: EpochMillis) -> Arc<VirtualTime> {
        Arc::new(VirtualTime {
            state: Mutex::new(State {
                now: t.0,
                ..State::default()
            }),
            idle: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn clock(self: &Arc<Self>) -> VirtualClock {
        VirtualClock(self.clone())
    }

    pub fn now(&self) -> EpochMillis {
        EpochMillis(self.lock().now)
    }

    /// Queues a wake-up at `at` and returns what to wait on.
    fn enqueue(&self, at: u64) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut s = self.lock();
        let at = at.max(s.now);
        let seq = s.seq;
        s.seq += 1;
        s.sleepers.insert((at, seq), tx);
        rx
    }

    fn stop_running(&self) {
        let mut s = self.lock();
        s.running = s.running.saturating_sub(1);
        if s.running == 0 {
            self.idle.notify_one();
        }
    }

    /// Starts `task` as a virtual task on the current `LocalSet`. It first runs when
    /// the scheduler reaches the current instant's turn, never concurrently with the
    /// task that spawned it.
    pub fn spawn<F>(self: &Arc<Self>, task: F)
    where
        F: Future<Output = ()> + 'static,
    {
        let wake = {
            let now = self.lock().now;
            self.enqueue(now)
        };
        self.lock().live += 1;
        let vt = self.clone();
        tokio::task::spawn_local(async move {
            let _ = wake.await;
            task.await;
            let mut s = vt.lock();
            s.live = s.live.saturating_sub(1);
            drop(s);
            vt.stop_running();
        });
    }

    /// Runs the tasks until none is left or the next event lies beyond `until`.
    /// Returns the number of wake-ups performed.
    pub async fn run(&self, until: EpochMillis) -> u64 {
        let mut wakes = 0;
        loop {
            loop {
                let notified = self.idle.notified();
                if self.lock().running == 0 {
                    break;
                }
                notified.await;
            }
            let mut s = self.lock();
            let Some((&(at, seq), _)) = s.sleepers.iter().next() else {
                return wakes;
            };
            if at > until.0 {
                return wakes;
            }
            let Some(tx) = s.sleepers.remove(&(at, seq)) else {
                return wakes;
            };
            s.now = s.now.max(at);
            s.running += 1;
            drop(s);
            wakes += 1;
            if tx.send(()).is_err() {
                // The sleeper is gone (its task was dropped): nothing will run.
                self.stop_running();
            }
        }
    }

    /// Tasks started and not finished.
    pub fn live_tasks(&self) -> usize {
        self.lock().live
    }
}

/// A [`Clock`] on virtual time: `sleep` parks the task until the scheduler reaches it.
#[derive(Debug, Clone)]
pub struct VirtualClock(Arc<VirtualTime>);

#[async_trait]
impl Clock for VirtualClock {
    fn now(&self) -> EpochMillis {
        self.0.now()
    }

    async fn sleep(&self, d: Duration) {
        let at = self.0.now().plus(d).0;
        let wake = self.0.enqueue(at);
        self.0.stop_running();
        let _ = wake.await;
    }
}

/// A value tasks of one replay share (single-threaded: the replay runs on a `LocalSet`).
pub type Shared<T> = Rc<RefCell<T>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tasks_interleave_by_virtual_time_only() {
        let vt = VirtualTime::starting_at(EpochMillis(1_000));
        let log: Shared<Vec<(u64, &'static str)>> = Rc::default();
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                for (name, step) in [("a", 300u64), ("b", 200)] {
                    let clock = vt.clock();
                    let log = log.clone();
                    vt.spawn(async move {
                        for _ in 0..3 {
                            clock.sleep(Duration::from_millis(step)).await;
                            log.borrow_mut().push((clock.now().0, name));
                        }
                    });
                }
                vt.run(EpochMillis(u64::MAX)).await;
            })
            .await;
        assert_eq!(
            *log.borrow(),
            vec![
                (1_200, "b"),
                (1_300, "a"),
                (1_400, "b"),
                (1_600, "a"),
                (1_600, "b"),
                (1_900, "a"),
            ]
        );
        assert_eq!(vt.live_tasks(), 0);
        assert_eq!(vt.now(), EpochMillis(1_900));
    }

    #[tokio::test]
    async fn run_stops_at_the_horizon() {
        let vt = VirtualTime::starting_at(EpochMillis(0));
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let clock = vt.clock();
                vt.spawn(async move { clock.sleep(Duration::from_secs(3_600)).await });
                vt.run(EpochMillis(60_000)).await;
            })
            .await;
        assert_eq!(vt.now(), EpochMillis(0));
        assert_eq!(vt.live_tasks(), 1);
    }
}
