//! What a settled job owes beyond the store: its customer notice on the notifications
//! topic, its technician summary in ServiceNow as a work note.
//!
//! Every path that settles a job (the LLM answer, the tier worker's fallback, the
//! dispatcher's spill or shed to the extractive tier) stores its summary with
//! [`Store::put_summary_owed`], which records the delivery owed in the same atomic step.
//! Whoever settled the job then claims what its jobs owe ([`Owed::jobs`]), hands it to
//! the sink and completes it; a delivery whose claim runs out (the invocation failed or
//! died first) is due again, and the `dispatch` tick takes it ([`Owed::due`]). So
//! nothing stored is left undelivered, and a version is delivered once: a delivery
//! completed is recorded with the summaries, and storing the version again owes nothing.
//!
//! Customer notices speak for an outage, not a ticket: the claimed tickets of one
//! invocation are grouped by the service and place they affect ([`CustomerNotice`]),
//! each notice naming the ticket versions it covers. Work notes stay per ticket: each
//! goes to its own incident's journal.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::clock::EpochMillis;
use crate::extractive;
use crate::job::{JobId, SummaryKind};
use crate::snapshot::{SnapshotLoad, TicketSnapshot};
use crate::store::{Store, StoreError};
use crate::summary::{Summary, standing};
use crate::ticket_id::TicketId;

/// How long a claimed delivery is held: long enough for the invocation that claimed it
/// to answer, after which it is due again for the `dispatch` tick.
pub const DELIVERY_HOLD: Duration = Duration::from_secs(60);

/// A technician summary to write back to ServiceNow as a work note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkNote {
    pub ticket: TicketId,
    pub number: String,
    pub text: String,
}

/// One ticket version a customer notice speaks for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NoticeTicket {
    /// The incident's `sys_id`.
    pub ticket: TicketId,
    pub number: String,
    pub version: u64,
}

/// A customer notice for the notifications topic: one per affected service and place
/// (docs/ticket-events.md, *Customer notices*).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerNotice {
    /// The same for the same ticket versions: a consumer that receives a notice again
    /// (delivery is at least once) recognises it.
    pub id: String,
    /// The service affected, in customers' words (`internet service`).
    pub service: String,
    /// The region affected, when the tickets name one.
    pub region: Option<String>,
    /// Plain language, scrubbed against every ticket it covers.
    pub text: String,
    /// Not the LLM's notice: written by the extractive summarizer.
    pub degraded: bool,
    /// The ticket versions it covers, ordered by ticket.
    pub tickets: Vec<NoticeTicket>,
}

/// Which owed deliveries to claim: those of the jobs the caller settled, and up to `due`
/// more of any job whose delivery is due (its claim ran out: the invocation that had it
/// failed or died), earliest first.
#[derive(Debug, Clone, Copy)]
pub struct Owed<'a> {
    pub jobs: &'a [JobId],
    pub due: usize,
}

impl<'a> Owed<'a> {
    /// Only those of `jobs`.
    pub fn jobs(jobs: &'a [JobId]) -> Owed<'a> {
        Owed { jobs, due: 0 }
    }

    /// Only deliveries due, at most `limit`.
    pub fn due(limit: usize) -> Owed<'static> {
        Owed {
            jobs: &[],
            due: limit,
        }
    }
}

/// Deliveries claimed for one invocation: hand `items` to the sink, then
/// [`Claimed::complete`]. Left uncompleted, they are due again after [`DELIVERY_HOLD`].
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed<T> {
    pub items: Vec<T>,
    /// Every delivery claimed, those that turned out to have nothing to send included.
    pub claimed: Vec<JobId>,
    /// Claimed ticket versions a newer version's summary replaced: that one is delivered
    /// instead.
    pub superseded: u64,
    /// Claimed ticket versions whose summary is gone (trimmed from the store).
    pub missing: u64,
    /// Ticket versions the items cover.
    pub tickets: u64,
}

impl<T> Default for Claimed<T> {
    fn default() -> Self {
        Claimed {
            items: Vec::new(),
            claimed: Vec::new(),
            superseded: 0,
            missing: 0,
            tickets: 0,
        }
    }
}

impl<T> Claimed<T> {
    /// Ends the claimed deliveries: call it once the sink has the items.
    pub async fn complete(&self, store: &dyn Store) -> Result<(), StoreError> {
        store.complete_owed(&self.claimed).await?;
        Ok(())
    }
}

/// Claims the customer notices owed and writes them: one notice per affected service
/// and place.
pub async fn claim_notices(
    store: &dyn Store,
    owed: Owed<'_>,
    now: EpochMillis,
) -> Result<Claimed<CustomerNotice>, StoreError> {
    let (claimed, settled) = claim(store, SummaryKind::Customer, owed, now).await?;
    let mut groups: BTreeMap<(String, Option<String>), Vec<Settled>> = BTreeMap::new();
    for item in settled.delivered {
        let (service, region) = match &item.snapshot {
            Some(s) => (
                extractive::service_name(&s.ticket.category, &s.ticket.subcategory),
                s.ticket.region.clone(),
            ),
            None => (extractive::service_name(&None, &None), None),
        };
        groups
            .entry((service.to_owned(), region))
            .or_default()
            .push(item);
    }
    let items: Vec<CustomerNotice> = groups
        .into_iter()
        .map(|((service, region), group)| notice(service, region, &group))
        .collect();
    Ok(Claimed {
        tickets: items.iter().map(|n| n.tickets.len() as u64).sum(),
        items,
        claimed,
        superseded: settled.superseded,
        missing: settled.missing,
    })
}

/// Claims the work notes owed: one per ticket version, the technician summary stored.
pub async fn claim_work_notes(
    store: &dyn Store,
    owed: Owed<'_>,
    now: EpochMillis,
) -> Result<Claimed<WorkNote>, StoreError> {
    let (claimed, settled) = claim(store, SummaryKind::Technician, owed, now).await?;
    let items: Vec<WorkNote> = settled
        .delivered
        .into_iter()
        .map(|item| WorkNote {
            ticket: item.summary.ticket,
            number: item.summary.number,
            text: item.summary.text,
        })
        .collect();
    Ok(Claimed {
        tickets: items.len() as u64,
        items,
        claimed,
        superseded: settled.superseded,
        missing: settled.missing,
    })
}

/// A claimed delivery's stored summary, and its ticket as the notice groups it.
struct Settled {
    summary: Summary,
    snapshot: Option<TicketSnapshot>,
}

#[derive(Default)]
struct Read {
    delivered: Vec<Settled>,
    superseded: u64,
    missing: u64,
}

async fn claim(
    store: &dyn Store,
    kind: SummaryKind,
    owed: Owed<'_>,
    now: EpochMillis,
) -> Result<(Vec<JobId>, Read), StoreError> {
    let hold_until = now.plus(DELIVERY_HOLD);
    let ours: Vec<JobId> = owed
        .jobs
        .iter()
        .filter(|id| id.kind == kind)
        .cloned()
        .collect();
    let mut claimed = store.claim_owed(&ours, now, hold_until).await?;
    if owed.due > 0 {
        claimed.extend(
            store
                .claim_due_owed(kind, owed.due, now, hold_until)
                .await?,
        );
    }
    // One round trip's worth of latency for all of them: the reads are independent.
    let reads = claimed.iter().map(|id| read(store, id));
    let mut out = Read::default();
    for read in futures_util::future::join_all(reads).await {
        match read? {
            Reading::Delivered(item) => out.delivered.push(*item),
            Reading::Superseded => out.superseded += 1,
            Reading::Missing => out.missing += 1,
        }
    }
    Ok((claimed, out))
}

enum Reading {
    Delivered(Box<Settled>),
    Superseded,
    Missing,
}

async fn read(store: &dyn Store, id: &JobId) -> Result<Reading, StoreError> {
    let Some(summary) = store.summary(&id.ticket, id.kind).await? else {
        return Ok(Reading::Missing);
    };
    if summary.version != id.version || standing(&summary) == 0 {
        // Only a newer version (owing its own delivery) can have replaced a settled one.
        return Ok(Reading::Superseded);
    }
    let snapshot = match id.kind {
        SummaryKind::Customer => match store.load_snapshot(&id.ticket, None).await? {
            SnapshotLoad::Unreadable { reason, .. } => {
                // The notice still goes out, worded from its summary alone.
                tracing::warn!(job = %id, error = %reason, "unreadable ticket snapshot: notice without its facts");
                None
            }
            load => load.current(),
        },
        SummaryKind::Technician => None,
    };
    Ok(Reading::Delivered(Box::new(Settled { summary, snapshot })))
}

/// The notice of one service and place. When its tickets settled with one text (one
/// coalesced call's answer), that text; when their texts differ (separate outages, or
/// each ticket's own fallback), a text written from all their facts together, so that
/// the notice tells the whole scale instead of one ticket's part of it.
fn notice(service: String, region: Option<String>, group: &[Settled]) -> CustomerNotice {
    let mut tickets: Vec<NoticeTicket> = group
        .iter()
        .map(|s| NoticeTicket {
            ticket: s.summary.ticket.clone(),
            number: s.summary.number.clone(),
            version: s.summary.version,
        })
        .collect();
    tickets.sort();
    let first = &group[0].summary;
    let one_text = group.iter().all(|s| s.summary.text == first.text);
    let snapshots: Vec<&TicketSnapshot> =
        group.iter().filter_map(|s| s.snapshot.as_ref()).collect();
    let (text, degraded) = if one_text || snapshots.len() < group.len() {
        (first.text.clone(), group.iter().any(|s| s.summary.degraded))
    } else {
        (extractive::customer_outage(&snapshots).text, true)
    };
    CustomerNotice {
        id: notice_id(&tickets),
        service,
        region,
        text,
        degraded,
        tickets,
    }
}

/// A digest of the ticket versions a notice covers.
fn notice_id(tickets: &[NoticeTicket]) -> String {
    let mut hash = Sha256::new();
    for t in tickets {
        hash.update(t.ticket.as_str().as_bytes());
        hash.update(b":");
        hash.update(t.version.to_string().as_bytes());
        hash.update(b";");
    }
    hash.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::configured_sinks::Sinks;
    use crate::extractive_settlement::{Settlement, settle_extractive};
    use crate::job::Tier;
    use crate::store::memory::MemoryStore;
    use crate::store::{AgingPolicy, Lease, OwedStats};
    use crate::testing::ingested::{T0, event, record};

    const BOTH: Sinks = Sinks {
        notices: true,
        work_notes: true,
    };

    /// Tickets `ns` ingested and settled by the dispatcher's extractive path.
    async fn settled(store: &MemoryStore, clock: &ManualClock, ns: &[(u8, &str)]) -> Vec<Lease> {
        let records: Vec<_> = ns
            .iter()
            .map(|(n, customers)| {
                let mut e = event(*n, 1, "1", "2");
                e["u_customers_affected"] = (*customers).into();
                record(&e, &[SummaryKind::Technician, SummaryKind::Customer])
            })
            .collect();
        store.ingest(&records).await.unwrap();
        let mut leases = Vec::new();
        loop {
            let aging = AgingPolicy {
                promote_every: Duration::from_secs(60),
            };
            let group = store
                .lease(Tier::Premium, T0, Duration::from_secs(300), 1, aging)
                .await
                .unwrap();
            if group.is_empty() {
                break;
            }
            for lease in group {
                let done = settle_extractive(store, clock, &lease, BOTH).await.unwrap();
                assert_eq!(done, Settlement::Summarized);
                leases.push(lease);
            }
        }
        leases
    }

    fn ids(leases: &[Lease]) -> Vec<JobId> {
        leases.iter().map(|l| l.job.id.clone()).collect()
    }

    #[tokio::test]
    async fn the_tickets_of_one_service_and_place_get_one_notice_naming_them_all() {
        let store = MemoryStore::new();
        let clock = ManualClock::starting_at(T0);
        let leases = settled(&store, &clock, &[(1, "1200"), (2, "300"), (3, "1200")]).await;
        let notices = claim_notices(&store, Owed::jobs(&ids(&leases)), clock.now())
            .await
            .unwrap();
        assert_eq!(notices.items.len(), 1, "{:?}", notices.items);
        let notice = &notices.items[0];
        assert_eq!(notice.service, "internet service");
        assert_eq!(notice.region.as_deref(), Some("north"));
        assert!(notice.degraded);
        let numbers: Vec<&str> = notice.tickets.iter().map(|t| t.number.as_str()).collect();
        assert_eq!(numbers, ["INC0010001", "INC0010002", "INC0010003"]);
        // The tickets' own texts differ (their scale): the notice tells the whole of it.
        assert!(
            notice.text.contains("Around 2,700 customers are affected"),
            "{}",
            notice.text
        );
        assert_eq!(notices.tickets, 3);
        assert_eq!(notices.claimed.len(), 3, "customer deliveries only");

        // Completed, they are delivered for good: neither due again nor owed again.
        notices.complete(&store).await.unwrap();
        let later = clock.now().plus(DELIVERY_HOLD);
        let again = claim_notices(&store, Owed::due(10), later).await.unwrap();
        assert!(again.items.is_empty() && again.claimed.is_empty());
        assert_eq!(
            store
                .owed_stats(SummaryKind::Customer, later)
                .await
                .unwrap(),
            OwedStats::default()
        );
    }

    #[tokio::test]
    async fn a_claim_not_completed_is_delivered_by_the_next_drain() {
        let store = MemoryStore::new();
        let clock = ManualClock::starting_at(T0);
        let leases = settled(&store, &clock, &[(4, "50")]).await;
        // The invocation that claimed them died before it answered.
        let lost = claim_work_notes(&store, Owed::jobs(&ids(&leases)), clock.now())
            .await
            .unwrap();
        assert_eq!(lost.items.len(), 1);
        let drained = claim_work_notes(&store, Owed::due(10), clock.now())
            .await
            .unwrap();
        assert!(drained.items.is_empty(), "held while the claim runs");
        clock.advance(DELIVERY_HOLD);
        let drained = claim_work_notes(&store, Owed::due(10), clock.now())
            .await
            .unwrap();
        assert_eq!(drained.items, lost.items);
        let stored = store
            .summary(&leases[0].job.id.ticket, SummaryKind::Technician)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(drained.items[0].text, stored.text);
        assert_eq!(drained.items[0].number, "INC0010004");
    }

    #[tokio::test]
    async fn a_version_replaced_before_its_delivery_is_not_delivered() {
        let store = MemoryStore::new();
        let clock = ManualClock::starting_at(T0);
        let leases = settled(&store, &clock, &[(5, "50")]).await;
        // Version 2 arrived and was settled before version 1's notice went out.
        let v1 = store
            .summary(&leases[0].job.id.ticket, SummaryKind::Customer)
            .await
            .unwrap()
            .unwrap();
        let v2 = Summary {
            version: 2,
            text: "We are aware of an issue. It is being fixed.".into(),
            ..v1
        };
        store.put_summary(&v2).await.unwrap();
        let notices = claim_notices(&store, Owed::jobs(&ids(&leases)), clock.now())
            .await
            .unwrap();
        assert!(notices.items.is_empty());
        assert_eq!((notices.superseded, notices.claimed.len()), (1, 1));
    }

    #[tokio::test]
    async fn nothing_is_owed_where_no_sink_is_configured() {
        let store = MemoryStore::new();
        let clock = ManualClock::starting_at(T0);
        store
            .ingest(&[record(&event(6, 1, "1", "2"), &[SummaryKind::Technician])])
            .await
            .unwrap();
        let aging = AgingPolicy {
            promote_every: Duration::from_secs(60),
        };
        let lease = store
            .lease(Tier::Premium, T0, Duration::from_secs(300), 1, aging)
            .await
            .unwrap()
            .remove(0);
        let notices_only = Sinks {
            notices: true,
            work_notes: false,
        };
        settle_extractive(&store, &clock, &lease, notices_only)
            .await
            .unwrap();
        assert_eq!(
            store
                .owed_stats(SummaryKind::Technician, clock.now())
                .await
                .unwrap(),
            OwedStats::default()
        );
    }
}
