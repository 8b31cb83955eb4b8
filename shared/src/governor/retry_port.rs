//! The governor as the retry layer sees it: [`crate::retry::Admission`] over [`Governor`].
//!
//! The retry layer makes one call at a time and reconciles each before it re-admits
//! the next, so the reservations of one request form a queue: the one dispatch made
//! (given to [`GovernorRetryPort::new`]), then one per re-admission. Each reconcile
//! settles the oldest open reservation with the call's usage. Build one port per
//! admitted group (it is cheap) from the group's [`Reservation`].

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use super::{Admission, DeploymentName, Governor, Reservation};
use crate::clock::EpochMillis;
use crate::llm::RateLimitView;
use crate::retry::{self, Readmission};
use crate::tokens::Tokens;

#[derive(Debug)]
pub struct GovernorRetryPort {
    governor: Governor,
    open: Mutex<VecDeque<Reservation>>,
    /// The latest `now` the retry layer passed (it reconciles just before a cooldown).
    last_now: AtomicU64,
}

impl GovernorRetryPort {
    /// A port for one request whose first call dispatch admitted as `first`.
    pub fn new(governor: Governor, first: Reservation) -> Self {
        GovernorRetryPort {
            governor,
            last_now: AtomicU64::new(first.admitted_at.0),
            open: Mutex::new(VecDeque::from([first])),
        }
    }

    /// Reservations admitted but not yet reconciled.
    pub fn open_reservations(&self) -> Vec<Reservation> {
        self.open
            .lock()
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn push(&self, r: Reservation) {
        if let Ok(mut q) = self.open.lock() {
            q.push_back(r);
        }
    }

    fn pop(&self, deployment: &DeploymentName) -> Option<Reservation> {
        let mut q = self.open.lock().ok()?;
        let at = q.iter().position(|r| &r.deployment == deployment)?;
        q.remove(at)
    }
}

fn parse(deployment: &str) -> Option<DeploymentName> {
    let parsed = deployment.parse().ok();
    if parsed.is_none() {
        tracing::error!(event = "governor.bad_deployment", deployment);
    }
    parsed
}

#[async_trait]
impl retry::Admission for GovernorRetryPort {
    async fn readmit(
        &self,
        deployment: &str,
        reservation: Tokens,
        now: EpochMillis,
    ) -> Readmission {
        self.last_now.fetch_max(now.0, Ordering::Relaxed);
        let Some(name) = parse(deployment) else {
            return Readmission::Refused;
        };
        match self.governor.admit(&name, reservation, now).await {
            Ok(Admission::Admitted(r)) => {
                self.push(r);
                Readmission::Admitted
            }
            Ok(Admission::Deferred { retry_at }) => Readmission::WaitUntil(retry_at),
            Ok(Admission::CoolingDown { until }) => Readmission::WaitUntil(until),
            Ok(Admission::Down { .. } | Admission::TooLarge { .. }) => Readmission::Refused,
            Err(e) => {
                tracing::warn!(event = "governor.unavailable", deployment, error = %e);
                Readmission::Refused
            }
        }
    }

    async fn cooldown(&self, deployment: &str, until: EpochMillis) {
        let Some(name) = parse(deployment) else {
            return;
        };
        // The layer says until when; the governor decides cooling down versus down
        // from how far that is from the last instant the layer showed us.
        let now = EpochMillis(self.last_now.load(Ordering::Relaxed));
        if let Err(e) = self
            .governor
            .report_throttle(&name, until.since(now), now)
            .await
        {
            tracing::warn!(event = "governor.unavailable", deployment, error = %e);
        }
    }

    async fn reconcile(
        &self,
        deployment: &str,
        _reserved: Tokens,
        used: Tokens,
        _view: RateLimitView,
        now: EpochMillis,
    ) {
        self.last_now.fetch_max(now.0, Ordering::Relaxed);
        let Some(name) = parse(deployment) else {
            return;
        };
        let Some(reservation) = self.pop(&name) else {
            tracing::warn!(event = "governor.reconcile_without_reservation", deployment);
            return;
        };
        if let Err(e) = self.governor.reconcile(&reservation, used).await {
            tracing::warn!(event = "governor.unavailable", deployment, error = %e);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::governor::{DeploymentBudget, GovernorPolicy, MemoryLedger};
    use crate::job::Tier;
    use crate::retry::Admission as _;

    fn governor() -> Governor {
        Governor::new(
            Arc::new(MemoryLedger::new()),
            GovernorPolicy::default(),
            [DeploymentBudget {
                tier: Tier::Premium,
                deployment: "gpt-4o".parse().unwrap(),
                tpm: 60_000,
            }],
        )
    }

    #[tokio::test]
    async fn retries_are_admitted_and_each_call_settles_its_own_reservation() {
        let g = governor();
        let name: DeploymentName = "gpt-4o".parse().unwrap();
        let Ok(Admission::Admitted(first)) =
            g.admit(&name, Tokens(4_000), EpochMillis(1_000)).await
        else {
            panic!("first call must be admitted");
        };
        let port = GovernorRetryPort::new(g.clone(), first);
        // The first call failed before doing any work: its reservation is refunded.
        port.reconcile(
            "gpt-4o",
            Tokens(4_000),
            Tokens(0),
            RateLimitView::default(),
            EpochMillis(1_500),
        )
        .await;
        assert!(port.open_reservations().is_empty());
        assert_eq!(
            port.readmit("gpt-4o", Tokens(4_000), EpochMillis(2_000))
                .await,
            Readmission::Admitted
        );
        assert_eq!(
            port.readmit("gpt-4o", Tokens(4_000), EpochMillis(2_000))
                .await,
            Readmission::Admitted
        );
        // 8,000 of 9,000 are held: a third would have to wait for the window.
        assert_eq!(
            port.readmit("gpt-4o", Tokens(4_000), EpochMillis(2_000))
                .await,
            Readmission::WaitUntil(EpochMillis(12_000))
        );
        port.reconcile(
            "gpt-4o",
            Tokens(4_000),
            Tokens(1_000),
            RateLimitView::default(),
            EpochMillis(3_000),
        )
        .await;
        assert_eq!(port.open_reservations().len(), 1);
        let gauges = g.gauges(EpochMillis(3_000)).await.unwrap();
        assert_eq!(gauges[0].ledger.window_tokens, 5_000);
    }

    #[tokio::test]
    async fn cooldowns_from_the_retry_layer_reach_every_instance() {
        let g = governor();
        let name: DeploymentName = "gpt-4o".parse().unwrap();
        let Ok(Admission::Admitted(first)) = g.admit(&name, Tokens(100), EpochMillis(1_000)).await
        else {
            panic!("first call must be admitted");
        };
        let port = GovernorRetryPort::new(g.clone(), first);
        port.reconcile(
            "gpt-4o",
            Tokens(100),
            Tokens(0),
            RateLimitView::default(),
            EpochMillis(2_000),
        )
        .await;
        port.cooldown("gpt-4o", EpochMillis(2_000).plus(Duration::from_secs(20)))
            .await;
        assert_eq!(
            g.admit(&name, Tokens(100), EpochMillis(3_000))
                .await
                .unwrap(),
            Admission::CoolingDown {
                until: EpochMillis(22_000)
            }
        );
        port.cooldown(
            "gpt-4o",
            EpochMillis(2_000).plus(Duration::from_secs(86_400)),
        )
        .await;
        assert_eq!(
            port.readmit("gpt-4o", Tokens(100), EpochMillis(3_000))
                .await,
            Readmission::Refused
        );
    }
}
