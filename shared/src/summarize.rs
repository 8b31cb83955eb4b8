//! The tier worker's step: turn one leased group of jobs into stored summaries.
//!
//! A group is one outage's related jobs, leased together by dispatch. Per summary
//! kind the group costs ONE LLM call (through the one retry layer), whose answer fans
//! out to every ticket: technician summaries keep each ticket's own specifics (the
//! group summary plus that ticket's extractive line), customer notices are scrubbed
//! against every person and host the group's tickets name. When the call cannot be had
//! (attempts exhausted, deadline, deployment down, content filter), the extractive
//! summary stands, marked degraded. Leases are acknowledged only after the summary is
//! stored, so a job never leaves the system without one.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::clock::{Clock, EpochMillis};
use crate::governor::Reservation;
use crate::job::{JobId, SummaryKind, Tier};
use crate::llm::{ChatRequest, LlmClient};
use crate::prompts::{self, TicketText};
use crate::retry::{CallRecord, GiveUp, RetryEnv, RetryGate, RetryPolicy, complete_with_retry};
use crate::store::{Lease, LeasedGroup, Store, StoreError};
use crate::summary::{EXTRACTIVE_MODEL, PutOutcome, Summary};
use crate::ticket_id::TicketId;
use crate::ticket_view::TicketView;
use crate::tokens::Tokens;

/// Technician summaries are five sentences at most.
pub const TECHNICIAN_SENTENCES: usize = 5;

/// The zero-token side of summarization: extractive text for any kind, and the
/// scrubber every customer-facing text passes through (LLM output included).
pub trait ZeroTokenPath: Send + Sync + std::fmt::Debug {
    /// A summary of `kind` built from the ticket alone, spending no tokens.
    fn extractive(&self, ticket: &TicketView, kind: SummaryKind) -> String;
    /// One line with what is specific to this ticket (its CI, state, latest update).
    fn ticket_line(&self, ticket: &TicketView) -> String;
    /// Removes whatever must not reach customers: hosts, IPs, e-mail addresses, phone
    /// numbers and the people named in `tickets`.
    fn scrub_customer(&self, text: &str, tickets: &[&TicketView]) -> String;
}

/// The deployment a tier worker serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    pub tier: Tier,
    /// The Azure OpenAI deployment name.
    pub name: String,
    /// The model behind it, recorded with each summary.
    pub model: String,
}

/// Tunables of the worker step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SummarizeSettings {
    pub retry: RetryPolicy,
    /// Characters of ticket text a prompt may carry (split across a group).
    pub prompt_chars: usize,
    /// Stop retrying this long before the first lease expires, so the summary is
    /// stored and acknowledged while the lease is still ours.
    pub lease_margin: Duration,
}

impl Default for SummarizeSettings {
    fn default() -> Self {
        SummarizeSettings {
            retry: RetryPolicy::default(),
            prompt_chars: 24_000,
            lease_margin: Duration::from_secs(5),
        }
    }
}

/// Everything the step talks to. Built once per worker and shared by its invocations.
#[derive(Debug)]
pub struct TierWorker<'a> {
    pub store: &'a dyn Store,
    pub client: &'a dyn LlmClient,
    pub gate: &'a dyn RetryGate,
    pub clock: &'a dyn Clock,
    pub zero_token: &'a dyn ZeroTokenPath,
    pub deployment: Deployment,
    pub settings: SummarizeSettings,
    /// Seeds each call's jitter; seeded by the caller so the lab is reproducible.
    pub rng: Mutex<SmallRng>,
}

/// Where a stored summary came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "source")]
pub enum SummarySource {
    Llm,
    /// The extractive summary stands; `reason` says why the LLM one is missing.
    Extractive {
        reason: GiveUp,
    },
}

/// A technician summary to write back to ServiceNow as a work note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkNote {
    pub ticket: TicketId,
    pub number: String,
    pub text: String,
}

/// A customer notice for the notifications topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerNotice {
    pub ticket: TicketId,
    pub number: String,
    pub version: u64,
    pub region: Option<String>,
    pub text: String,
    pub degraded: bool,
}

/// What one group's step did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummarizeOutcome {
    /// Per job: where its stored summary came from.
    pub summaries: BTreeMap<String, SummarySource>,
    /// Every LLM call made, in order.
    pub calls: Vec<CallRecord>,
    pub tokens_used: Tokens,
    pub acked: usize,
    /// Leases that were no longer ours when acknowledged (reclaimed after expiry).
    pub lost_leases: usize,
    /// Jobs whose ticket version was already superseded: acknowledged without a call.
    pub superseded: usize,
    pub work_notes: Vec<WorkNote>,
    pub notices: Vec<CustomerNotice>,
}

/// One job of the group with the ticket it summarizes.
struct Item<'g> {
    lease: &'g Lease,
    ticket: TicketView,
}

impl TierWorker<'_> {
    /// Summarizes a leased group and acknowledges its leases.
    ///
    /// `reservation` is what dispatch admitted for the group's call; it is settled
    /// with real usage. A group mixing summary kinds needs one call per kind: the
    /// further calls are admitted through the governor first. Store failures abort
    /// without acknowledging, so the leases expire and the jobs are served again.
    pub async fn summarize_group(
        &self,
        group: &LeasedGroup,
        reservation: Option<Reservation>,
    ) -> Result<SummarizeOutcome, StoreError> {
        let mut outcome = SummarizeOutcome::default();
        let mut by_kind: BTreeMap<SummaryKind, Vec<Item<'_>>> = BTreeMap::new();
        for lease in group {
            match self.load(lease).await? {
                Some(ticket) => by_kind
                    .entry(lease.job.id.kind)
                    .or_default()
                    .push(Item { lease, ticket }),
                None => {
                    outcome.superseded += 1;
                    self.ack(lease, &mut outcome).await?;
                }
            }
        }
        let mut reservation = reservation;
        for (kind, items) in by_kind {
            self.summarize_kind(kind, &items, reservation.take(), &mut outcome)
                .await?;
        }
        Ok(outcome)
    }

    /// The ticket a job summarizes, or `None` when a newer version has replaced it
    /// (or the snapshot is gone): that job's summary would be superseded on arrival.
    async fn load(&self, lease: &Lease) -> Result<Option<TicketView>, StoreError> {
        let Some((version, snapshot)) = self.store.ticket_snapshot(&lease.job.id.ticket).await?
        else {
            tracing::warn!(job = %lease.job.id, "no ticket snapshot for a leased job");
            return Ok(None);
        };
        if version > lease.job.id.version {
            return Ok(None);
        }
        match TicketView::from_snapshot(&snapshot) {
            Some(mut ticket) => {
                if ticket.number.is_empty() {
                    ticket.number.clone_from(&lease.job.number);
                }
                Ok(Some(ticket))
            }
            None => Err(StoreError::Corrupt(format!(
                "snapshot of {} is not an object",
                lease.job.id.ticket
            ))),
        }
    }

    async fn summarize_kind(
        &self,
        kind: SummaryKind,
        items: &[Item<'_>],
        reservation: Option<Reservation>,
        outcome: &mut SummarizeOutcome,
    ) -> Result<(), StoreError> {
        let template = prompts::current(kind);
        // What a call costs at admission: every ticket's prompt plus max_tokens.
        let cost = items
            .iter()
            .map(|i| i.lease.job.prompt_tokens)
            .sum::<Tokens>()
            + Tokens(u64::from(template.max_tokens));
        let per_ticket = self.settings.prompt_chars / items.len().max(1);
        let request = self.request(kind, items, per_ticket);
        let shorten = |_: &ChatRequest| Some(self.request(kind, items, per_ticket / 2));
        let seed = self
            .rng
            .lock()
            .map(|mut r| r.random::<u64>())
            .unwrap_or_default();
        let mut rng = SmallRng::seed_from_u64(seed);
        let env = RetryEnv {
            client: self.client,
            gate: self.gate,
            clock: self.clock,
            policy: &self.settings.retry,
            deadline: self.deadline(items),
        };
        let retried =
            complete_with_retry(env, request, reservation, cost, Some(&shorten), &mut rng).await;
        outcome.calls.extend(retried.calls);
        let result = retried.result;
        if let Ok(completion) = &result {
            outcome.tokens_used += completion.usage.total();
        }
        let tickets: Vec<&TicketView> = items.iter().map(|i| &i.ticket).collect();
        for item in items {
            let (summary, source) = match &result {
                Ok(completion) => {
                    let text = self.fan_out(kind, &completion.text, item, &tickets);
                    let share = Tokens(completion.usage.total().get() / items.len() as u64);
                    let summary = self.summary(item, kind, text, &completion.model, false, share);
                    let summary = Summary {
                        prompt_version: Some(template.id.to_owned()),
                        ..summary
                    };
                    (summary, SummarySource::Llm)
                }
                Err(reason) => {
                    let text = self.fallback_text(kind, item, &tickets);
                    let summary =
                        self.summary(item, kind, text, EXTRACTIVE_MODEL, true, Tokens::ZERO);
                    let summary = Summary {
                        tier: Tier::Extractive,
                        ..summary
                    };
                    (
                        summary,
                        SummarySource::Extractive {
                            reason: reason.clone(),
                        },
                    )
                }
            };
            self.store_summary(item, summary, source, outcome).await?;
        }
        Ok(())
    }

    fn request(&self, kind: SummaryKind, items: &[Item<'_>], per_ticket: usize) -> ChatRequest {
        let texts: Vec<TicketText> = items
            .iter()
            .map(|i| TicketText {
                number: i.ticket.number.clone(),
                body: i.ticket.prompt_body(per_ticket),
            })
            .collect();
        prompts::ticket_request(prompts::current(kind), &self.deployment.name, &texts)
    }

    /// Retrying ends before the earliest job deadline or lease expiry (minus a margin).
    fn deadline(&self, items: &[Item<'_>]) -> EpochMillis {
        items
            .iter()
            .map(|i| {
                i.lease
                    .expires_at
                    .minus(self.settings.lease_margin)
                    .min(i.lease.job.deadline)
            })
            .min()
            .unwrap_or_else(|| self.clock.now())
    }

    /// The group answer as this ticket's summary.
    fn fan_out(
        &self,
        kind: SummaryKind,
        answer: &str,
        item: &Item<'_>,
        tickets: &[&TicketView],
    ) -> String {
        match kind {
            SummaryKind::Technician if tickets.len() > 1 => {
                let group = prompts::at_most_sentences(answer, TECHNICIAN_SENTENCES - 1);
                let own = self.zero_token.ticket_line(&item.ticket);
                format!("{group} This ticket ({}): {own}", item.ticket.number)
            }
            SummaryKind::Technician | SummaryKind::Rollup => {
                prompts::at_most_sentences(answer, TECHNICIAN_SENTENCES)
            }
            SummaryKind::Customer => self.zero_token.scrub_customer(answer.trim(), tickets),
        }
    }

    fn fallback_text(&self, kind: SummaryKind, item: &Item<'_>, tickets: &[&TicketView]) -> String {
        let text = self.zero_token.extractive(&item.ticket, kind);
        match kind {
            SummaryKind::Customer => self.zero_token.scrub_customer(&text, tickets),
            SummaryKind::Technician | SummaryKind::Rollup => text,
        }
    }

    fn summary(
        &self,
        item: &Item<'_>,
        kind: SummaryKind,
        text: String,
        model: &str,
        degraded: bool,
        tokens_used: Tokens,
    ) -> Summary {
        let id: &JobId = &item.lease.job.id;
        Summary {
            ticket: id.ticket.clone(),
            number: item.ticket.number.clone(),
            version: id.version,
            kind,
            text,
            tier: self.deployment.tier,
            model: model.to_owned(),
            degraded,
            tokens_used,
            created_at: self.clock.now(),
            prompt_version: None,
            input: serde_json::Value::Null,
        }
    }

    async fn store_summary(
        &self,
        item: &Item<'_>,
        summary: Summary,
        source: SummarySource,
        outcome: &mut SummarizeOutcome,
    ) -> Result<(), StoreError> {
        let put = self.store.put_summary(&summary).await?;
        if put == PutOutcome::Stored {
            match summary.kind {
                SummaryKind::Technician => outcome.work_notes.push(WorkNote {
                    ticket: summary.ticket.clone(),
                    number: summary.number.clone(),
                    text: summary.text.clone(),
                }),
                SummaryKind::Customer => outcome.notices.push(CustomerNotice {
                    ticket: summary.ticket.clone(),
                    number: summary.number.clone(),
                    version: summary.version,
                    region: item.ticket.region.clone(),
                    text: summary.text.clone(),
                    degraded: summary.degraded,
                }),
                SummaryKind::Rollup => {}
            }
        }
        outcome
            .summaries
            .insert(item.lease.job.id.to_string(), source);
        self.ack(item.lease, outcome).await
    }

    async fn ack(&self, lease: &Lease, outcome: &mut SummarizeOutcome) -> Result<(), StoreError> {
        if self.store.ack(lease).await? {
            outcome.acked += 1;
        } else {
            outcome.lost_leases += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Arc;

    use async_trait::async_trait;

    use super::*;
    use crate::clock::ManualClock;
    use crate::governor::{DeploymentBudget, Governor, GovernorPolicy, MemoryLedger};
    use crate::job::Job;
    use crate::llm::{Completion, LlmError, RateLimitView, Usage};
    use crate::severity::Severity;
    use crate::store::memory::MemoryStore;
    use crate::store::{AgingPolicy, IngestRecord};
    use crate::zero_token::BasicZeroTokenPath;

    #[derive(Debug)]
    struct ScriptedClient {
        script: Mutex<VecDeque<Result<Completion, LlmError>>>,
        seen: Mutex<Vec<ChatRequest>>,
    }

    #[async_trait]
    impl LlmClient for ScriptedClient {
        async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
            self.seen.lock().unwrap().push(request.clone());
            self.script
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Err(LlmError::Timeout))
        }
    }

    fn client(script: Vec<Result<Completion, LlmError>>) -> ScriptedClient {
        ScriptedClient {
            script: Mutex::new(script.into()),
            seen: Mutex::default(),
        }
    }

    fn answer(text: &str) -> Result<Completion, LlmError> {
        Ok(Completion {
            text: text.into(),
            model: "gpt-4o-2024-08-06".into(),
            usage: Usage {
                prompt_tokens: 900,
                completion_tokens: 100,
                total_tokens: 1_000,
            },
            rate_limit: RateLimitView::default(),
        })
    }

    const T0: EpochMillis = EpochMillis(1_800_000_000_000);

    fn ticket_id(n: u8) -> TicketId {
        format!("{n:032x}").parse().unwrap()
    }

    fn record(n: u8, version: u64, kinds: &[SummaryKind]) -> IngestRecord {
        let id = ticket_id(n);
        let number = format!("INC00100{n:02}");
        let snapshot = serde_json::json!({
            "id": id.as_str(), "number": number, "version": version, "severity": "P1",
            "state": "in_progress", "cmdb_ci": format!("ams-agg-0{n}"), "region": "north",
            "assigned_to": "Jane Roe",
            "short_description": format!("Site {n} down after fibre cut"),
            "log": [{"author": "Wei Chen", "source": "work_note",
                     "text": format!("BGP session to 10.0.0.{n} down\nsplice crew dispatched to site {n}")}]
        });
        let jobs = kinds
            .iter()
            .map(|&kind| Job {
                id: JobId {
                    ticket: id.clone(),
                    version,
                    kind,
                },
                number: number.clone(),
                severity: Severity::P1,
                tier: Tier::Premium,
                prompt_tokens: Tokens(400),
                max_output_tokens: Tokens(300),
                enqueued_at: T0,
                deadline: T0.plus(Duration::from_secs(300)),
                coalesce_key: Some("north:fibre".into()),
                region: Some("north".into()),
            })
            .collect();
        IngestRecord {
            ticket: id.clone(),
            version,
            snapshot,
            instant_summary: Summary {
                ticket: id,
                number,
                version,
                kind: SummaryKind::Technician,
                text: "instant extractive".into(),
                tier: Tier::Extractive,
                model: EXTRACTIVE_MODEL.into(),
                degraded: false,
                tokens_used: Tokens::ZERO,
                created_at: T0,
                prompt_version: None,
                input: serde_json::Value::Null,
            },
            jobs,
            closed: false,
            region: Some("north".into()),
        }
    }

    struct Rig {
        store: MemoryStore,
        governor: Governor,
        clock: ManualClock,
        zero: BasicZeroTokenPath,
    }

    impl Rig {
        async fn new(records: Vec<IngestRecord>) -> Rig {
            let store = MemoryStore::new();
            store.ingest(&records).await.unwrap();
            Rig {
                store,
                governor: Governor::new(
                    Arc::new(MemoryLedger::new()),
                    GovernorPolicy::default(),
                    [DeploymentBudget {
                        tier: Tier::Premium,
                        deployment: "premium".parse().unwrap(),
                        tpm: 100_000,
                    }],
                ),
                clock: ManualClock::starting_at(T0),
                zero: BasicZeroTokenPath,
            }
        }

        fn worker<'a>(&'a self, client: &'a ScriptedClient) -> TierWorker<'a> {
            TierWorker {
                store: &self.store,
                client,
                gate: &self.governor,
                clock: &self.clock,
                zero_token: &self.zero,
                deployment: Deployment {
                    tier: Tier::Premium,
                    name: "premium".into(),
                    model: "gpt-4o".into(),
                },
                settings: SummarizeSettings::default(),
                rng: Mutex::new(SmallRng::seed_from_u64(11)),
            }
        }

        async fn lease(&self) -> LeasedGroup {
            self.store
                .lease(
                    Tier::Premium,
                    self.clock.now(),
                    Duration::from_secs(120),
                    8,
                    AgingPolicy {
                        promote_every: Duration::from_secs(60),
                    },
                )
                .await
                .unwrap()
        }
    }

    #[tokio::test]
    async fn a_coalesced_group_costs_one_call_and_each_ticket_keeps_its_specifics() {
        let rig = Rig::new(vec![
            record(1, 3, &[SummaryKind::Technician]),
            record(2, 5, &[SummaryKind::Technician]),
        ])
        .await;
        let group = rig.lease().await;
        assert_eq!(group.len(), 2);
        let llm = client(vec![answer(
            "A fibre cut took down two aggregation sites. Broadband is out. Crews dispatched. \
             Sessions are down. Splice expected at 18:00. Extra sentence.",
        )]);
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        assert_eq!(llm.seen.lock().unwrap().len(), 1);
        assert_eq!(outcome.acked, 2);
        assert_eq!(outcome.tokens_used, Tokens(1_000));
        for n in [1u8, 2] {
            let stored = rig
                .store
                .summary(&ticket_id(n), SummaryKind::Technician)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(stored.tier, Tier::Premium);
            assert_eq!(stored.model, "gpt-4o-2024-08-06");
            assert_eq!(stored.prompt_version.as_deref(), Some("technician/v1"));
            assert!(!stored.degraded);
            assert_eq!(stored.tokens_used, Tokens(500));
            assert!(
                stored
                    .text
                    .starts_with("A fibre cut took down two aggregation sites.")
            );
            assert!(
                stored
                    .text
                    .contains(&format!("This ticket (INC00100{n:02})")),
                "{}",
                stored.text
            );
            assert!(stored.text.contains(&format!("ams-agg-0{n}")));
            assert!(!stored.text.contains("Extra sentence"));
        }
        assert_eq!(outcome.work_notes.len(), 2);
        assert!(!rig.store.job_exists(&group[0].job.id).await.unwrap());
    }

    #[tokio::test]
    async fn when_every_attempt_fails_the_extractive_summary_stands_degraded() {
        let rig = Rig::new(vec![record(3, 1, &[SummaryKind::Customer])]).await;
        let group = rig.lease().await;
        let llm = client(vec![]); // every call times out
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        let calls = llm.seen.lock().unwrap().len();
        assert_eq!(calls, RetryPolicy::default().max_attempts as usize);
        let stored = rig
            .store
            .summary(&ticket_id(3), SummaryKind::Customer)
            .await
            .unwrap()
            .expect("a job never ends without a summary");
        assert!(stored.degraded);
        assert_eq!(stored.tier, Tier::Extractive);
        assert_eq!(stored.model, EXTRACTIVE_MODEL);
        assert!(!stored.text.contains("Jane") && !stored.text.contains("ams-agg"));
        assert_eq!(outcome.acked, 1);
        assert!(matches!(
            outcome.summaries.values().next(),
            Some(SummarySource::Extractive {
                reason: GiveUp::AttemptsExhausted { .. }
            })
        ));
    }

    #[tokio::test]
    async fn a_content_filter_verdict_falls_back_after_one_call() {
        let rig = Rig::new(vec![record(4, 1, &[SummaryKind::Technician])]).await;
        let group = rig.lease().await;
        let llm = client(vec![Err(LlmError::ContentFiltered {
            message: "violence".into(),
        })]);
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        assert_eq!(llm.seen.lock().unwrap().len(), 1);
        assert_eq!(outcome.acked, 1);
        // The instant extractive summary of this version stands.
        let stored = rig
            .store
            .summary(&ticket_id(4), SummaryKind::Technician)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.tier, Tier::Extractive);
    }

    #[tokio::test]
    async fn customer_notices_from_the_llm_are_scrubbed() {
        let rig = Rig::new(vec![record(5, 1, &[SummaryKind::Customer])]).await;
        let group = rig.lease().await;
        let llm = client(vec![answer(
            "Jane Roe reports that ams-agg-05 (10.0.0.5) lost power; call 020 555 0100.",
        )]);
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        let notice = &outcome.notices[0];
        for leak in ["Jane", "Roe", "ams-agg-05", "10.0.0.5", "555"] {
            assert!(
                !notice.text.contains(leak),
                "{leak} leaked: {}",
                notice.text
            );
        }
        assert_eq!(notice.region.as_deref(), Some("north"));
    }

    #[tokio::test]
    async fn a_superseded_version_is_acknowledged_without_a_call() {
        let rig = Rig::new(vec![record(6, 1, &[SummaryKind::Technician])]).await;
        let group = rig.lease().await;
        rig.store.ingest(&[record(6, 2, &[])]).await.unwrap();
        let llm = client(vec![]);
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        assert!(llm.seen.lock().unwrap().is_empty());
        assert_eq!((outcome.superseded, outcome.acked), (1, 1));
    }

    #[tokio::test]
    async fn a_group_of_two_kinds_makes_one_call_per_kind_within_the_bound() {
        let rig = Rig::new(vec![record(
            7,
            1,
            &[SummaryKind::Technician, SummaryKind::Customer],
        )])
        .await;
        let group = rig.lease().await;
        assert_eq!(group.len(), 2);
        let llm = client(vec![
            answer("Tech."),
            answer("Customers in the north may see outages."),
        ]);
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        assert_eq!(llm.seen.lock().unwrap().len(), 2);
        assert_eq!(outcome.summaries.len(), 2);
        assert!(outcome.summaries.values().all(|s| *s == SummarySource::Llm));
    }
}
