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
use crate::job::{JobId, SummaryKind, Tier};
use crate::llm::{ChatRequest, LlmClient};
use crate::prompts::{self, TicketText};
use crate::retry::{Admission, CallRecord, GiveUp, RetryEnv, RetryPolicy, complete_with_retry};
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
    pub admission: &'a dyn Admission,
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
    /// `reserved` is what dispatch reserved for the group's first call(s); it is
    /// reconciled with real usage. Store failures abort without acknowledging, so
    /// the leases expire and the jobs are served again.
    pub async fn summarize_group(
        &self,
        group: &LeasedGroup,
        reserved: Tokens,
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
        let partitions = by_kind.len().max(1) as u64;
        for (kind, items) in by_kind {
            let share = Tokens(reserved.get() / partitions);
            self.summarize_kind(kind, &items, share, &mut outcome)
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
        reserved: Tokens,
        outcome: &mut SummarizeOutcome,
    ) -> Result<(), StoreError> {
        let template = prompts::current(kind);
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
            admission: self.admission,
            clock: self.clock,
            policy: &self.settings.retry,
            deadline: self.deadline(items),
        };
        let retried = complete_with_retry(env, request, reserved, Some(&shorten), &mut rng).await;
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
