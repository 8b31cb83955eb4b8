//! Settling a job spilled to the extractive tier: store its zero-token summary, marked
//! degraded, then acknowledge its lease.
//!
//! The dispatcher hands such leases back still held ([`crate::dispatcher::SpilledGroup`]
//! with `to == Tier::Extractive`) so that whoever drives it (the `dispatch` function, the
//! storm lab) can close them here: a job never leaves the queue without a summary. The
//! summary is the same text the instant summary and the tier worker's fallback use; being
//! degraded it replaces the instant one ([`crate::summary::standing`]), so readers can tell that
//! no LLM summary is coming for this version. Storing it records what it owes the
//! notifications topic and ServiceNow ([`crate::sinks`]), exactly as the tier worker's
//! does: the caller delivers it with the jobs it settled.

use serde::{Deserialize, Serialize};

use crate::clock::Clock;
use crate::configured_sinks::Sinks;
use crate::extractive;
use crate::fault_switches::{self, Mechanism};
use crate::job::SummaryKind;
use crate::snapshot::{SnapshotLoad, TicketSnapshot};
use crate::store::{Lease, Store, StoreError};
use crate::summary::{PutOutcome, Summary, SummaryOf};

/// What settling one lease did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Settlement {
    /// The degraded summary was stored (or an equal or better one already was) and the
    /// job acknowledged.
    Summarized,
    /// A newer ticket version exists: its own jobs will summarize it. Acknowledged.
    Superseded,
    /// The ticket's snapshot is missing or unreadable: the instant summary stands.
    /// Acknowledged rather than retried for ever.
    Unreadable,
    /// The lease was no longer ours (reclaimed after expiry): whoever holds it now
    /// settles the job.
    LeaseLost,
}

/// Stores the extractive summary of a spilled job, with the delivery it owes to `sinks`,
/// and acknowledges it. A store failure leaves the lease unacknowledged: it expires and
/// the job is dispatched again.
pub async fn settle_extractive(
    store: &dyn Store,
    clock: &dyn Clock,
    lease: &Lease,
    sinks: Sinks,
) -> Result<Settlement, StoreError> {
    let job = &lease.job;
    let load = store
        .load_snapshot(&job.id.ticket, Some(job.id.version))
        .await?;
    let settlement = match load {
        SnapshotLoad::Superseded { .. } => Settlement::Superseded,
        SnapshotLoad::Current { snapshot, .. } => {
            let summary = degraded_summary(lease, &snapshot, clock);
            let owes =
                sinks.owes(summary.kind) && !fault_switches::is_off(Mechanism::DeliveryLedger);
            let put = store.put_summary_owed(&summary, owes, clock.now()).await?;
            if put == PutOutcome::Superseded {
                tracing::debug!(job = %job.id, "a better summary was already stored");
            }
            Settlement::Summarized
        }
        SnapshotLoad::Unreadable { reason, .. } => {
            tracing::error!(job = %job.id, error = %reason, "unreadable ticket snapshot");
            Settlement::Unreadable
        }
        SnapshotLoad::Missing => {
            tracing::error!(job = %job.id, "no ticket snapshot for a spilled job");
            Settlement::Unreadable
        }
    };
    if store.ack(lease).await? {
        Ok(settlement)
    } else {
        Ok(Settlement::LeaseLost)
    }
}

fn degraded_summary(lease: &Lease, snapshot: &TicketSnapshot, clock: &dyn Clock) -> Summary {
    let id = &lease.job.id;
    let text = match id.kind {
        SummaryKind::Technician => extractive::technician(snapshot),
        // Scrubbed against the ticket's own people, hosts and internal terms.
        SummaryKind::Customer => extractive::customer(snapshot).text,
    };
    Summary::fallback(SummaryOf::job(id, &lease.job.number, clock.now()), text)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;
    use crate::job::Tier;
    use crate::store::AgingPolicy;
    use crate::store::memory::MemoryStore;
    use crate::testing::ingested::{T0, event, record};

    async fn leased(store: &MemoryStore, kinds: &[SummaryKind]) -> Vec<Lease> {
        store
            .ingest(&[record(&event(4, 2, "1", "2"), kinds)])
            .await
            .unwrap();
        store
            .lease(
                Tier::Premium,
                T0,
                Duration::from_secs(300),
                8,
                AgingPolicy {
                    promote_every: Duration::from_secs(60),
                },
            )
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_spilled_job_ends_acknowledged_with_a_degraded_summary() {
        let store = MemoryStore::new();
        let clock = ManualClock::starting_at(T0);
        let leases = leased(&store, &[SummaryKind::Technician, SummaryKind::Customer]).await;
        assert_eq!(leases.len(), 2);
        for lease in &leases {
            let settled = settle_extractive(&store, &clock, lease, Sinks::NONE)
                .await
                .unwrap();
            assert_eq!(settled, Settlement::Summarized);
            let stored = store
                .summary(&lease.job.id.ticket, lease.job.id.kind)
                .await
                .unwrap()
                .unwrap();
            assert!(
                stored.degraded,
                "{:?} summary not marked degraded",
                stored.kind
            );
            assert_eq!(stored.tier, Tier::Extractive);
            assert_eq!(stored.version, 2);
            assert!(!stored.text.is_empty());
        }
        let stats = store.queue_stats(Tier::Premium).await.unwrap();
        assert_eq!((stats.pending, stats.leased), (0, 0));
    }

    #[tokio::test]
    async fn settling_a_lease_twice_loses_it_the_second_time_without_a_second_write() {
        let store = MemoryStore::new();
        let clock = ManualClock::starting_at(T0);
        let leases = leased(&store, &[SummaryKind::Customer]).await;
        settle_extractive(&store, &clock, &leases[0], Sinks::NONE)
            .await
            .unwrap();
        clock.advance(Duration::from_secs(1));
        let again = settle_extractive(&store, &clock, &leases[0], Sinks::NONE)
            .await
            .unwrap();
        assert_eq!(again, Settlement::LeaseLost);
        let stored = store
            .summary(&leases[0].job.id.ticket, SummaryKind::Customer)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.created_at, T0, "the first summary stands");
    }
}
