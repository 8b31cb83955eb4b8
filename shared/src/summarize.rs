//! The tier worker's step: turn one leased group of jobs into stored summaries.
//!
//! A group is one outage's related jobs, leased together by dispatch. Per summary
//! kind the group costs ONE LLM call (through the one retry layer), whose answer fans
//! out to every ticket: technician summaries keep each ticket's own specifics (the
//! group summary plus that ticket's extractive line), customer notices are scrubbed
//! against every person and host the group's tickets name. When the call cannot be had
//! (attempts exhausted, deadline, deployment down, content filter), the extractive
//! summary stands, marked degraded. Leases are acknowledged only after the summary is
//! stored, so a job never leaves the system without one; storing it records what it owes
//! the notifications topic and ServiceNow ([`crate::sinks`]), for the caller to deliver.
//!
//! A hand-off can be delivered twice (a redelivery after a worker died or lost its hold
//! on the message). Before its call, the worker claims each job's call in the store
//! ([`Store::claim_calls`]): a job whose call another worker is making is left to that
//! worker (its lease untouched), a job whose final summary is stored already is only
//! acknowledged, and when no job is left the call is not made and its reservation is
//! refunded. So a job's call is paid for once however often its message arrives. A
//! claim runs for [`SummarizeSettings::call_claim`]: the caller renews it while the
//! worker runs ([`Store::renew_calls`]), so that only a worker that died loses it.
//!
//! With a [`RelatedContext`] configured, the technician prompt also carries a bounded
//! excerpt of similar past incidents. Its tokens are counted: a call dispatch admitted
//! gets them as an extra reservation first (the excerpt is left out when the governor
//! has no room for it right now), and every retry is admitted for them too. A search
//! that fails or finds nothing only leaves the excerpt out.

use std::cell::LazyCell;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::clock::{Clock, EpochMillis};
use crate::configured_sinks::Sinks;
use crate::deployment_name::DeploymentName;
use crate::dispatcher::AdmittedGroup;
use crate::extractive;
use crate::fault_switches::{self, Mechanism};
use crate::governor::Reservation;
use crate::job::{JobId, SummaryKind, Tier};
use crate::llm::{ChatRequest, LlmClient, RateLimitView, Usage};
use crate::metering::{self, CallCost};
use crate::prompts::{self, TicketText};
use crate::related_context::RelatedContext;
use crate::retry::{
    CallRecord, GiveUp, Readmission, RetryEnv, RetryGate, RetryPolicy, complete_with_retry,
};
use crate::scrubber::{ScrubContext, scrub};
use crate::snapshot::{SnapshotLoad, TicketSnapshot};
use crate::store::{CallClaim, Lease, LeasedGroup, Store, StoreError};
use crate::summary::{PutOutcome, Summary, SummaryOf};
use crate::tokens::Tokens;

/// Technician summaries are five sentences at most.
pub const TECHNICIAN_SENTENCES: usize = 5;

/// A claim on a job's call lasts this long unless renewed. Shorter than the queue's
/// visibility timeout after a failed invocation (host.json: 15 s), so that the message's
/// redelivery finds a dead worker's claims run out.
pub const DEFAULT_CALL_CLAIM: Duration = Duration::from_secs(10);

/// The deployment a tier worker serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    pub tier: Tier,
    /// The Azure OpenAI deployment name: what calls go to, are admitted on and cool down.
    pub name: DeploymentName,
    /// The model behind it, recorded with each summary.
    pub model: String,
}

/// Why a tier worker refuses a hand-off: it was admitted for another tier or on another
/// deployment than the worker serves (its reservation would be settled on one deployment
/// while the call went to another), or it holds a job of another kind than its one call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandoffRefusal {
    #[error("a {handoff} hand-off reached the {serving} function")]
    OtherTier { handoff: Tier, serving: Tier },
    #[error("a hand-off admitted on deployment {handoff} reached the worker of {serving}")]
    OtherDeployment {
        handoff: DeploymentName,
        serving: DeploymentName,
    },
    #[error("a {kind} hand-off holds the {other} job {job}")]
    OtherKind {
        kind: SummaryKind,
        other: SummaryKind,
        job: JobId,
    },
}

/// Whether `serving`'s worker must refuse `group`; `None` when the hand-off is its own.
pub fn handoff_refusal(group: &AdmittedGroup, serving: &Deployment) -> Option<HandoffRefusal> {
    if group.tier != serving.tier {
        return Some(HandoffRefusal::OtherTier {
            handoff: group.tier,
            serving: serving.tier,
        });
    }
    if *group.deployment() != serving.name {
        return Some(HandoffRefusal::OtherDeployment {
            handoff: group.deployment().clone(),
            serving: serving.name.clone(),
        });
    }
    group
        .leases
        .iter()
        .find(|l| l.job.id.kind != group.kind)
        .map(|l| HandoffRefusal::OtherKind {
            kind: group.kind,
            other: l.job.id.kind,
            job: l.job.id.clone(),
        })
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
    /// How long a claim on a job's call lasts unless renewed: how soon another delivery
    /// of the hand-off may make the call after the worker holding it died.
    pub call_claim: Duration,
}

impl Default for SummarizeSettings {
    fn default() -> Self {
        SummarizeSettings {
            retry: RetryPolicy::default(),
            prompt_chars: prompts::DEFAULT_PROMPT_CHARS,
            lease_margin: Duration::from_secs(5),
            call_claim: DEFAULT_CALL_CLAIM,
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
    pub deployment: Deployment,
    pub settings: SummarizeSettings,
    /// Seeds each call's jitter; seeded by the caller so the lab is reproducible.
    pub rng: Mutex<SmallRng>,
    /// Similar past incidents for technician prompts; `None` when not configured.
    pub related: Option<&'a dyn RelatedContext>,
    /// What a stored summary owes beyond the store.
    pub sinks: Sinks,
    /// Names this worker in its claims on calls: distinct per invocation.
    pub holder: String,
}

/// The characters of a short description a related-context search is asked with.
const RELATED_QUERY_CHARS: usize = 200;

/// A related-context excerpt going into a technician prompt, with what it costs.
struct RelatedExcerpt {
    text: String,
    tokens: Tokens,
    /// The extra reservation it holds on a call dispatch already admitted.
    reservation: Option<Reservation>,
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

/// What one group's step did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummarizeOutcome {
    /// Per job: where its stored summary came from.
    pub summaries: BTreeMap<String, SummarySource>,
    /// Every LLM call made, in order.
    pub calls: Vec<CallRecord>,
    pub tokens_used: Tokens,
    /// What the deployment billed for the answered calls (their `usage`), summed: prompt
    /// and completion tokens apart, as they are priced apart.
    #[serde(default)]
    pub billed: Usage,
    pub acked: usize,
    /// Leases that were no longer ours when acknowledged (reclaimed after expiry).
    pub lost_leases: usize,
    /// Jobs whose ticket version was already superseded: acknowledged without a call.
    pub superseded: usize,
    /// Jobs whose snapshot is missing or unreadable: acknowledged (their instant
    /// summary stands) and logged, rather than retried for ever.
    pub unreadable: usize,
    /// Jobs whose final summary was stored already (an earlier delivery of the hand-off
    /// settled them): acknowledged without a call.
    pub already_settled: usize,
    /// Jobs whose call another worker is making (the same hand-off delivered to it
    /// too): left to it, leases untouched.
    pub in_flight_elsewhere: usize,
}

/// One job of the group with the ticket it summarizes.
struct Item<'g> {
    lease: &'g Lease,
    snapshot: TicketSnapshot,
}

impl TierWorker<'_> {
    /// Summarizes a leased group and acknowledges its leases.
    ///
    /// `reservation` is what dispatch admitted for the group's call; it is settled
    /// with what the call was charged. A group mixing summary kinds needs one call per kind: the
    /// further calls are admitted through the governor first. Store failures abort
    /// without acknowledging, so the leases expire and the jobs are served again.
    pub async fn summarize_group(
        &self,
        group: &LeasedGroup,
        reservation: Option<Reservation>,
    ) -> Result<SummarizeOutcome, StoreError> {
        let mut outcome = SummarizeOutcome::default();
        let mut by_kind: BTreeMap<SummaryKind, Vec<Item<'_>>> = BTreeMap::new();
        for item in self.load_current(group, &mut outcome).await? {
            by_kind
                .entry(item.lease.job.id.kind)
                .or_default()
                .push(item);
        }
        let mut reservation = reservation;
        for (kind, items) in by_kind {
            // Each kind's call costs what its jobs carry.
            self.call_for_kind(kind, items, reservation.take(), None, &mut outcome)
                .await?;
        }
        Ok(outcome)
    }

    /// Summarizes a group as dispatch handed it off: one call of the hand-off's kind,
    /// for which its reservation is spent, whose `max_tokens` never exceeds the output
    /// that was charged. The caller has checked the hand-off is this worker's
    /// ([`handoff_refusal`]); a lease of another kind, which dispatch never hands off, is
    /// left untouched to expire and be dispatched again.
    pub async fn summarize_admitted(
        &self,
        group: &AdmittedGroup,
    ) -> Result<SummarizeOutcome, StoreError> {
        let mut outcome = SummarizeOutcome::default();
        let leases: Vec<&Lease> = group
            .leases
            .iter()
            .filter(|l| l.job.id.kind == group.kind)
            .collect();
        let items = self.load_current(leases, &mut outcome).await?;
        if !items.is_empty() {
            self.call_for_kind(
                group.kind,
                items,
                Some(group.reservation.clone()),
                Some(group.cost),
                &mut outcome,
            )
            .await?;
        }
        Ok(outcome)
    }

    /// The leases whose ticket version is current, with their snapshots; the others
    /// (superseded, unreadable, missing) are acknowledged.
    async fn load_current<'g>(
        &self,
        leases: impl IntoIterator<Item = &'g Lease>,
        outcome: &mut SummarizeOutcome,
    ) -> Result<Vec<Item<'g>>, StoreError> {
        let mut items = Vec::new();
        for lease in leases {
            match self.load(lease).await? {
                SnapshotLoad::Current { snapshot, .. } => items.push(Item {
                    lease,
                    snapshot: *snapshot,
                }),
                SnapshotLoad::Superseded { .. } => {
                    outcome.superseded += 1;
                    self.ack(lease, outcome).await?;
                }
                SnapshotLoad::Unreadable { .. } | SnapshotLoad::Missing => {
                    outcome.unreadable += 1;
                    self.ack(lease, outcome).await?;
                }
            }
        }
        Ok(items)
    }

    /// One call for `items` (all of `kind`), once their calls are claimed; without any
    /// left to call for, `reservation` goes back to the budget.
    async fn call_for_kind(
        &self,
        kind: SummaryKind,
        items: Vec<Item<'_>>,
        reservation: Option<Reservation>,
        admitted_cost: Option<CallCost>,
        outcome: &mut SummarizeOutcome,
    ) -> Result<(), StoreError> {
        let items = self.claim_calls(items, outcome).await?;
        if items.is_empty() {
            if let Some(unused) = reservation {
                // No call: what dispatch reserved for it goes back to the budget.
                self.gate
                    .settle(
                        &unused,
                        Tokens::ZERO,
                        RateLimitView::default(),
                        self.clock.now(),
                    )
                    .await;
            }
            return Ok(());
        }
        let cost =
            admitted_cost.unwrap_or_else(|| CallCost::of_jobs(items.iter().map(|i| &i.lease.job)));
        let max_output = admitted_cost.map(|c| c.max_output_tokens);
        self.summarize_kind(kind, &items, reservation, cost, max_output, outcome)
            .await?;
        let ids: Vec<JobId> = items.iter().map(|i| i.lease.job.id.clone()).collect();
        self.store.release_calls(&ids, &self.holder).await
    }

    /// The items whose call this worker now holds; the others are settled already
    /// (acknowledged here) or in another worker's hands (left alone).
    async fn claim_calls<'g>(
        &self,
        items: Vec<Item<'g>>,
        outcome: &mut SummarizeOutcome,
    ) -> Result<Vec<Item<'g>>, StoreError> {
        if fault_switches::is_off(Mechanism::CallClaims) {
            // The design being proven against: every delivery makes its own call.
            return Ok(items);
        }
        let ids: Vec<JobId> = items.iter().map(|i| i.lease.job.id.clone()).collect();
        let now = self.clock.now();
        let until = now.plus(self.settings.call_claim);
        let claims = self
            .store
            .claim_calls(&ids, &self.holder, now, until)
            .await?;
        let mut ours = Vec::with_capacity(items.len());
        for (item, claim) in items.into_iter().zip(claims) {
            match claim {
                CallClaim::Claimed => ours.push(item),
                CallClaim::Done => {
                    outcome.already_settled += 1;
                    self.ack(item.lease, outcome).await?;
                }
                CallClaim::InFlight { until } => {
                    tracing::info!(job = %item.lease.job.id, until = until.as_millis(), "another worker is making this call; left to it");
                    outcome.in_flight_elsewhere += 1;
                }
            }
        }
        Ok(ours)
    }

    /// The ticket version a job summarizes.
    async fn load(&self, lease: &Lease) -> Result<SnapshotLoad, StoreError> {
        let id = &lease.job.id;
        let load = self
            .store
            .load_snapshot(&id.ticket, Some(id.version))
            .await?;
        match &load {
            SnapshotLoad::Missing => {
                tracing::error!(job = %id, "no ticket snapshot for a leased job");
            }
            SnapshotLoad::Unreadable { reason, .. } => {
                tracing::error!(job = %id, error = %reason, "unreadable ticket snapshot");
            }
            SnapshotLoad::Current { .. } | SnapshotLoad::Superseded { .. } => {}
        }
        Ok(load)
    }

    async fn summarize_kind(
        &self,
        kind: SummaryKind,
        items: &[Item<'_>],
        reservation: Option<Reservation>,
        cost: CallCost,
        max_output: Option<Tokens>,
        outcome: &mut SummarizeOutcome,
    ) -> Result<(), StoreError> {
        let template = prompts::current(kind);
        let cap = |mut request: ChatRequest| {
            if let Some(limit) = max_output {
                let limit = u32::try_from(limit.get()).unwrap_or(u32::MAX).max(1);
                request.max_tokens = request.max_tokens.min(limit);
            }
            request
        };
        let related = match kind {
            SummaryKind::Technician => self.related_excerpt(items, reservation.is_some()).await,
            SummaryKind::Customer => None,
        };
        // What a call costs at admission, plus the related excerpt when one goes with it.
        let cost = cost.total() + related.as_ref().map_or(Tokens::ZERO, |r| r.tokens);
        let per_ticket = self.settings.prompt_chars / items.len().max(1);
        let prompt_version = match &related {
            Some(_) => prompts::TECHNICIAN_RELATED_V1.id,
            None => template.id,
        };
        let request = cap(match &related {
            Some(excerpt) => prompts::technician_request_with_related(
                self.deployment.name.as_str(),
                &self.ticket_texts(kind, items, per_ticket),
                &excerpt.text,
            ),
            None => self.request(kind, items, per_ticket),
        });
        let shorten = |_: &ChatRequest| Some(cap(self.request(kind, items, per_ticket / 2)));
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
            deployment: &self.deployment.name,
            deadline: self.deadline(items),
        };
        let retried =
            complete_with_retry(env, request, reservation, cost, Some(&shorten), &mut rng).await;
        if let Some(extra) = related.and_then(|r| r.reservation) {
            // The call's charge, excerpt included, was settled on its own reservation.
            self.gate
                .settle(
                    &extra,
                    Tokens::ZERO,
                    RateLimitView::default(),
                    self.clock.now(),
                )
                .await;
        }
        outcome.calls.extend(retried.calls);
        let result = retried.result;
        if let Ok(completion) = &result {
            outcome.tokens_used += completion.usage.total();
            outcome.billed.prompt_tokens += completion.usage.prompt_tokens;
            outcome.billed.completion_tokens += completion.usage.completion_tokens;
            outcome.billed.total_tokens += completion.usage.total().get();
        }
        // Built on first use: only customer text is scrubbed, and building it reads every
        // ticket's log, which for a technician summary would be work thrown away.
        let scrub_context = LazyCell::new(|| group_scrub_context(items));
        for item in items {
            if result.is_err() && fault_switches::is_off(Mechanism::ExtractiveFallback) {
                // The design being proven against: the job leaves with nothing new.
                self.ack(item.lease, outcome).await?;
                continue;
            }
            let (summary, source) = match &result {
                Ok(completion) => {
                    let text = fan_out(kind, &completion.text, item, items.len(), &scrub_context);
                    let share = Tokens(completion.usage.total().get() / items.len() as u64);
                    let summary = Summary::llm(
                        self.summary_of(item),
                        text,
                        self.deployment.tier,
                        &completion.model,
                        share,
                        prompt_version,
                    );
                    (summary, SummarySource::Llm)
                }
                Err(reason) => {
                    let text = fallback_text(kind, item, &scrub_context);
                    let summary = Summary::fallback(self.summary_of(item), text);
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
        prompts::ticket_request(
            prompts::current(kind),
            self.deployment.name.as_str(),
            &self.ticket_texts(kind, items, per_ticket),
        )
    }

    fn ticket_texts(
        &self,
        kind: SummaryKind,
        items: &[Item<'_>],
        per_ticket: usize,
    ) -> Vec<TicketText> {
        items
            .iter()
            .map(|i| prompts::ticket_text_for(kind, &i.snapshot, per_ticket))
            .collect()
    }

    /// Similar past incidents for the group's lead ticket, bounded, with their token
    /// bound. On a call dispatch already admitted, the excerpt's tokens are reserved
    /// now or the excerpt is left out: it never waits for budget.
    async fn related_excerpt(&self, items: &[Item<'_>], admitted: bool) -> Option<RelatedExcerpt> {
        let related = self.related?;
        let lead = items.first()?;
        let query: String = lead
            .snapshot
            .ticket
            .short_description
            .chars()
            .take(RELATED_QUERY_CHARS)
            .collect();
        if query.trim().is_empty() {
            return None;
        }
        let text = prompts::related_excerpt(&related.related(&query).await)?;
        // The limiter's estimate of exactly what is appended to the prompt.
        let tokens = metering::text_charge(&prompts::related_block(&text));
        if !admitted {
            return Some(RelatedExcerpt {
                text,
                tokens,
                reservation: None,
            });
        }
        match self
            .gate
            .reserve(&self.deployment.name, tokens, self.clock.now())
            .await
        {
            Readmission::Admitted(reservation) => Some(RelatedExcerpt {
                text,
                tokens,
                reservation: Some(reservation),
            }),
            other => {
                tracing::info!(
                    deployment = %self.deployment.name,
                    tokens = tokens.get(),
                    answer = ?other,
                    "related context left out: no budget for it right now"
                );
                None
            }
        }
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

    /// What the item's summary is of, written now.
    fn summary_of(&self, item: &Item<'_>) -> SummaryOf {
        let id: &JobId = &item.lease.job.id;
        SummaryOf::job(id, &item.snapshot.ticket.number, self.clock.now())
    }

    async fn store_summary(
        &self,
        item: &Item<'_>,
        summary: Summary,
        source: SummarySource,
        outcome: &mut SummarizeOutcome,
    ) -> Result<(), StoreError> {
        let owes =
            self.sinks.owes(summary.kind) && !fault_switches::is_off(Mechanism::DeliveryLedger);
        let put = self
            .store
            .put_summary_owed(&summary, owes, self.clock.now())
            .await?;
        if put == PutOutcome::Superseded {
            tracing::debug!(job = %item.lease.job.id, "a better summary was already stored");
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

/// The group answer as this ticket's summary.
fn fan_out(
    kind: SummaryKind,
    answer: &str,
    item: &Item<'_>,
    group_size: usize,
    scrub_context: &LazyCell<ScrubContext, impl FnOnce() -> ScrubContext>,
) -> String {
    match kind {
        SummaryKind::Technician if group_size > 1 => {
            let group = prompts::at_most_sentences(answer, TECHNICIAN_SENTENCES - 1);
            let own = prompts::at_most_sentences(&extractive::technician(&item.snapshot), 1);
            format!("{group} This ticket: {own}")
        }
        SummaryKind::Technician => prompts::at_most_sentences(answer, TECHNICIAN_SENTENCES),
        SummaryKind::Customer => scrub(answer.trim(), scrub_context).text,
    }
}

/// The zero-token summary of this ticket; customer text is scrubbed against the whole
/// group as well as its own ticket.
fn fallback_text(
    kind: SummaryKind,
    item: &Item<'_>,
    scrub_context: &LazyCell<ScrubContext, impl FnOnce() -> ScrubContext>,
) -> String {
    match kind {
        SummaryKind::Technician => extractive::technician(&item.snapshot),
        SummaryKind::Customer => {
            let own = extractive::customer(&item.snapshot);
            scrub(&own.text, scrub_context).text
        }
    }
}

/// Everything any ticket of the group names: a coalesced customer notice is checked
/// against all of them, since the model saw all of them.
fn group_scrub_context(items: &[Item<'_>]) -> ScrubContext {
    // Each ticket's own context already holds the copied-run hashes of its descriptions
    // and log: taken as they are, not hashed a second time.
    ScrubContext::union(items.iter().map(|item| {
        let mut own = item.snapshot.scrub_context();
        own.internal_terms.push(item.snapshot.ticket.number.clone());
        own
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;
    use crate::event::{CdcHeaders, ParseLimits, parse_event};
    use crate::governor::{DeploymentBudget, Governor, GovernorPolicy, MemoryLedger};
    use crate::llm::{Completion, LlmError, RateLimitView, Usage};
    use crate::scrubber::find_leaks;
    use crate::sinks::{Owed, claim_notices};
    use crate::store::memory::MemoryStore;
    use crate::store::{AgingPolicy, IngestRecord, OwedStats};
    use crate::testing::ingested::{T0, event, record};
    use crate::testing::scripted_llm::ScriptedLlm;
    use crate::ticket_id::TicketId;

    pub(crate) fn answer(text: &str) -> Result<Completion, LlmError> {
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

    pub(crate) fn ticket_id(n: u8) -> TicketId {
        format!("{n:032x}").parse().unwrap()
    }

    struct Rig {
        store: MemoryStore,
        governor: Governor,
        clock: ManualClock,
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
                    [
                        DeploymentBudget {
                            tier: Tier::Premium,
                            deployment: "premium".parse().unwrap(),
                            tpm: 100_000,
                            rpm: 600,
                        },
                        DeploymentBudget {
                            tier: Tier::Standard,
                            deployment: "standard".parse().unwrap(),
                            tpm: 100_000,
                            rpm: 600,
                        },
                    ],
                ),
                clock: ManualClock::starting_at(T0),
            }
        }

        fn worker<'a>(&'a self, client: &'a ScriptedLlm) -> TierWorker<'a> {
            TierWorker {
                store: &self.store,
                client,
                gate: &self.governor,
                clock: &self.clock,
                deployment: Deployment {
                    tier: Tier::Premium,
                    name: "premium".parse().unwrap(),
                    model: "gpt-4o".into(),
                },
                settings: SummarizeSettings::default(),
                rng: Mutex::new(SmallRng::seed_from_u64(11)),
                related: None,
                sinks: Sinks {
                    notices: true,
                    work_notes: true,
                },
                holder: "worker-a".into(),
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
            record(&event(1, 3, "1", "2"), &[SummaryKind::Technician]),
            record(&event(2, 5, "1", "2"), &[SummaryKind::Technician]),
        ])
        .await;
        let group = rig.lease().await;
        assert_eq!(group.len(), 2);
        let llm = ScriptedLlm::new(vec![answer(
            "A fibre cut took down two aggregation sites. Broadband is out. Crews dispatched. \
             Sessions are down. Splice expected at 18:00. Extra sentence.",
        )]);
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        assert_eq!(llm.calls(), 1);
        let prompt = llm.requests()[0].messages[1].content.clone();
        assert!(prompt.contains("INC0010001") && prompt.contains("INC0010002"));
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
                    .contains(&format!("This ticket: INC00100{n:02}")),
                "{}",
                stored.text
            );
            assert!(!stored.text.contains("Extra sentence"));
        }
        assert_eq!(
            rig.store
                .owed_stats(SummaryKind::Technician, rig.clock.now())
                .await
                .unwrap(),
            OwedStats { due: 2, claimed: 0 },
            "each stored summary owes its work note"
        );
        assert!(!rig.store.job_exists(&group[0].job.id).await.unwrap());
    }

    #[tokio::test]
    async fn when_every_attempt_fails_the_extractive_summary_stands_degraded() {
        let rig = Rig::new(vec![record(
            &event(3, 1, "1", "2"),
            &[SummaryKind::Customer],
        )])
        .await;
        let group = rig.lease().await;
        assert_eq!(group.len(), 1, "the P1 ticket is customer-impacting");
        let llm = ScriptedLlm::new(vec![]); // every call times out
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        let calls = llm.calls();
        assert_eq!(calls, RetryPolicy::default().max_attempts as usize);
        let stored = rig
            .store
            .summary(&ticket_id(3), SummaryKind::Customer)
            .await
            .unwrap()
            .expect("a job never ends without a summary");
        assert!(stored.degraded);
        assert_eq!(stored.tier, Tier::Extractive);
        assert_eq!(stored.model, crate::summary::EXTRACTIVE_MODEL);
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
        let rig = Rig::new(vec![record(
            &event(4, 1, "1", "2"),
            &[SummaryKind::Technician],
        )])
        .await;
        let group = rig.lease().await;
        let llm = ScriptedLlm::new(vec![Err(LlmError::ContentFiltered {
            message: "violence".into(),
        })]);
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        assert_eq!(llm.calls(), 1);
        assert_eq!(outcome.acked, 1);
        // The instant extractive summary of this version stands.
        let stored = rig
            .store
            .summary(&ticket_id(4), SummaryKind::Technician)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.tier, Tier::Extractive);
        assert!(stored.text.contains("INC0010004"));
    }

    #[tokio::test]
    async fn customer_notices_from_the_llm_are_scrubbed() {
        let ev = event(5, 1, "1", "2");
        let rig = Rig::new(vec![record(&ev, &[SummaryKind::Customer])]).await;
        let group = rig.lease().await;
        let llm = ScriptedLlm::new(vec![answer(
            "Jane Roe reports that ams-agg-05 (10.0.0.5) lost power; call +31 20 555 0100 or \
             noc@ops.example.net. Splice crew dispatched to site 5; BGP to 10.0.0.5 down.",
        )]);
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        assert_eq!(outcome.acked, 1);
        let notices = claim_notices(
            &rig.store,
            Owed::jobs(&[group[0].job.id.clone()]),
            rig.clock.now(),
        )
        .await
        .unwrap();
        let notice = &notices.items[0];
        for leak in ["Jane", "Roe", "ams-agg-05", "10.0.0.5", "555", "noc@"] {
            assert!(
                !notice.text.contains(leak),
                "{leak} leaked: {}",
                notice.text
            );
        }
        let ticket = parse_event(
            ev.to_string().as_bytes(),
            &CdcHeaders::default(),
            ParseLimits::default(),
        )
        .unwrap();
        let ctx = crate::scrubber::ScrubContext::from_ticket(&ticket);
        assert_eq!(find_leaks(&notice.text, &ctx), vec![]);
        assert_eq!(notice.region.as_deref(), Some("north"));
    }

    #[tokio::test]
    async fn a_superseded_version_is_acknowledged_without_a_call() {
        let rig = Rig::new(vec![record(
            &event(6, 1, "1", "2"),
            &[SummaryKind::Technician],
        )])
        .await;
        let group = rig.lease().await;
        rig.store
            .ingest(&[record(&event(6, 2, "1", "2"), &[])])
            .await
            .unwrap();
        let llm = ScriptedLlm::new(vec![]);
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        assert_eq!(llm.calls(), 0);
        assert_eq!((outcome.superseded, outcome.acked), (1, 1));
    }

    #[tokio::test]
    async fn a_group_of_two_kinds_makes_one_call_per_kind_within_the_bound() {
        let rig = Rig::new(vec![record(
            &event(7, 1, "1", "2"),
            &[SummaryKind::Technician, SummaryKind::Customer],
        )])
        .await;
        let group = rig.lease().await;
        assert_eq!(group.len(), 2);
        let llm = ScriptedLlm::new(vec![
            answer("Tech."),
            answer("Customers in the north may see outages."),
        ]);
        let outcome = rig
            .worker(&llm)
            .summarize_group(&group, None)
            .await
            .unwrap();
        assert_eq!(llm.calls(), 2);
        assert_eq!(outcome.summaries.len(), 2);
        assert!(outcome.summaries.values().all(|s| *s == SummarySource::Llm));
    }

    /// A hand-off is one call of one kind on one deployment: the worker of another tier or
    /// deployment refuses it, and so does any worker when a job of another kind is in it.
    #[tokio::test]
    async fn a_worker_refuses_a_handoff_not_its_own() {
        let rig = Rig::new(vec![record(
            &event(9, 1, "1", "2"),
            &[SummaryKind::Technician, SummaryKind::Customer],
        )])
        .await;
        let leases = rig.lease().await;
        let technician: LeasedGroup = leases
            .iter()
            .filter(|l| l.job.id.kind == SummaryKind::Technician)
            .cloned()
            .collect();
        let own = handoff(&rig, technician).await;
        let llm = ScriptedLlm::new(vec![]);
        let serving = rig.worker(&llm).deployment;
        assert_eq!(handoff_refusal(&own, &serving), None);

        let standard = Deployment {
            tier: Tier::Standard,
            name: "standard".parse().unwrap(),
            model: "gpt-4o-mini".into(),
        };
        assert_eq!(
            handoff_refusal(&own, &standard),
            Some(HandoffRefusal::OtherTier {
                handoff: Tier::Premium,
                serving: Tier::Standard
            })
        );
        let renamed = Deployment {
            name: "premium-2".parse().unwrap(),
            ..serving.clone()
        };
        assert_eq!(
            handoff_refusal(&own, &renamed).map(|r| r.to_string()),
            Some(
                "a hand-off admitted on deployment premium reached the worker of premium-2"
                    .to_owned()
            )
        );
        let mixed = AdmittedGroup {
            leases: leases.clone(),
            ..own.clone()
        };
        assert!(
            matches!(
                handoff_refusal(&mixed, &serving),
                Some(HandoffRefusal::OtherKind {
                    kind: SummaryKind::Technician,
                    other: SummaryKind::Customer,
                    ..
                })
            ),
            "{:?}",
            handoff_refusal(&mixed, &serving)
        );
    }

    /// The worker makes the hand-off's one call and no other, even if a job of another
    /// kind slipped in: that job's lease is left to expire, not summarized as the wrong kind.
    #[tokio::test]
    async fn a_handoff_makes_only_the_call_of_its_kind() {
        let rig = Rig::new(vec![record(
            &event(10, 1, "1", "2"),
            &[SummaryKind::Technician, SummaryKind::Customer],
        )])
        .await;
        let leases = rig.lease().await;
        assert_eq!(leases.len(), 2);
        let technician = leases
            .iter()
            .find(|l| l.job.id.kind == SummaryKind::Technician)
            .map(|l| l.job.id.to_string());
        let group = handoff(&rig, leases).await;
        let llm = ScriptedLlm::new(vec![answer("Tech."), answer("Customers may see outages.")]);
        let outcome = rig.worker(&llm).summarize_admitted(&group).await.unwrap();
        assert_eq!(llm.calls(), 1);
        assert_eq!(outcome.acked, 1);
        assert_eq!(
            outcome.summaries.keys().cloned().collect::<Vec<_>>(),
            Vec::from_iter(technician)
        );
    }

    #[tokio::test]
    async fn a_handed_off_group_keeps_to_the_output_dispatch_charged() {
        let rig = Rig::new(vec![record(
            &event(8, 1, "1", "2"),
            &[SummaryKind::Technician],
        )])
        .await;
        let leases = rig.lease().await;
        let crate::retry::Readmission::Admitted(reservation) = crate::retry::RetryGate::reserve(
            &rig.governor,
            &"premium".parse().unwrap(),
            Tokens(700),
            rig.clock.now(),
        )
        .await
        else {
            panic!("an idle deployment admits");
        };
        let group = AdmittedGroup {
            tier: Tier::Premium,
            kind: SummaryKind::Technician,
            leases,
            reservation,
            cost: CallCost {
                prompt_tokens: Tokens(580),
                max_output_tokens: Tokens(120),
            },
        };
        let llm = ScriptedLlm::new(vec![answer("Fibre cut at site 8.")]);
        let outcome = rig.worker(&llm).summarize_admitted(&group).await.unwrap();
        assert_eq!(outcome.acked, 1);
        let seen = llm.requests();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].max_tokens, 120);
    }

    /// The hand-off dispatch would send for `leases`, with its reservation admitted.
    async fn handoff(rig: &Rig, leases: LeasedGroup) -> AdmittedGroup {
        let crate::retry::Readmission::Admitted(reservation) = crate::retry::RetryGate::readmit(
            &rig.governor,
            &"premium".parse().unwrap(),
            Tokens(2_000),
            rig.clock.now(),
        )
        .await
        else {
            panic!("an idle deployment admits");
        };
        AdmittedGroup {
            tier: Tier::Premium,
            kind: SummaryKind::Technician,
            leases,
            reservation,
            cost: CallCost {
                prompt_tokens: Tokens(1_800),
                max_output_tokens: Tokens(200),
            },
        }
    }

    #[tokio::test]
    async fn a_429_answered_to_the_worker_cools_its_deployment_down_for_every_instance() {
        for (tier, name, other, n) in [
            (Tier::Premium, "premium", "standard", 14),
            (Tier::Standard, "standard", "premium", 15),
        ] {
            let rig = Rig::new(vec![record(
                &event(n, 1, "1", "2"),
                &[SummaryKind::Technician],
            )])
            .await;
            let (name, other): (DeploymentName, DeploymentName) =
                (name.parse().unwrap(), other.parse().unwrap());
            let leases = rig.lease().await;
            let crate::governor::Admission::Admitted(reservation) = rig
                .governor
                .admit(&name, Tokens(2_000), rig.clock.now())
                .await
                .unwrap()
            else {
                panic!("an idle deployment admits");
            };
            let group = AdmittedGroup {
                tier,
                kind: SummaryKind::Technician,
                leases,
                reservation,
                cost: CallCost {
                    prompt_tokens: Tokens(1_700),
                    max_output_tokens: Tokens(300),
                },
            };
            let throttled = Err(LlmError::RateLimited {
                hint: crate::llm::ThrottleHint {
                    wait: Some(Duration::from_secs(7)),
                    source: crate::llm::HintSource::RetryAfter,
                },
                message: "exceeded token rate limit".into(),
            });
            let llm = ScriptedLlm::new(vec![throttled]);
            let mut worker = rig.worker(&llm);
            worker.deployment = Deployment {
                tier,
                name: name.clone(),
                model: "gpt-4o".into(),
            };
            // One attempt: the worker gives up at once, so the cooldown is still running.
            worker.settings.retry.max_attempts = 1;
            worker.summarize_admitted(&group).await.unwrap();
            assert_eq!(llm.requests()[0].deployment, name.as_str());
            let now = rig.clock.now();
            let admission = rig.governor.admit(&name, Tokens(100), now).await.unwrap();
            assert!(
                matches!(admission, crate::governor::Admission::CoolingDown { .. }),
                "{name}: {admission:?}"
            );
            let untouched = rig.governor.admit(&other, Tokens(100), now).await.unwrap();
            assert!(
                matches!(untouched, crate::governor::Admission::Admitted(_)),
                "{other}: {untouched:?}"
            );
        }
    }

    async fn remaining_tokens(rig: &Rig) -> u64 {
        rig.governor.gauges(rig.clock.now()).await.unwrap()[0].remaining_tokens
    }

    #[tokio::test]
    async fn a_second_delivery_of_a_settled_handoff_makes_no_call() {
        let rig = Rig::new(vec![
            record(&event(9, 1, "1", "2"), &[SummaryKind::Technician]),
            record(&event(10, 1, "1", "2"), &[SummaryKind::Technician]),
        ])
        .await;
        let leases = rig.lease().await;
        let first = handoff(&rig, leases.clone()).await;
        let llm = ScriptedLlm::new(vec![answer("Fibre cut at sites 9 and 10.")]);
        let settled = rig.worker(&llm).summarize_admitted(&first).await.unwrap();
        assert_eq!((settled.acked, settled.calls.len()), (2, 1));

        // The message again, on another worker: the summaries are there, nothing is paid.
        let before = remaining_tokens(&rig).await;
        let again = handoff(&rig, leases).await;
        let mut other = rig.worker(&llm);
        other.holder = "worker-b".into();
        let outcome = other.summarize_admitted(&again).await.unwrap();
        assert_eq!(llm.calls(), 1, "no second call");
        assert_eq!(outcome.already_settled, 2);
        assert_eq!(
            outcome.lost_leases, 2,
            "the first delivery acknowledged them"
        );
        assert!(outcome.calls.is_empty());
        assert_eq!(
            remaining_tokens(&rig).await,
            before,
            "the second reservation went back to the budget"
        );
    }

    #[tokio::test]
    async fn a_job_whose_call_another_worker_is_making_is_left_to_it() {
        let rig = Rig::new(vec![
            record(&event(11, 1, "1", "2"), &[SummaryKind::Technician]),
            record(&event(12, 1, "1", "2"), &[SummaryKind::Technician]),
        ])
        .await;
        let leases = rig.lease().await;
        let now = rig.clock.now();
        // Another delivery of the message holds the call of the first job.
        let busy = rig
            .store
            .claim_calls(
                &[leases[0].job.id.clone()],
                "worker-b",
                now,
                now.plus(Duration::from_secs(10)),
            )
            .await
            .unwrap();
        assert_eq!(busy, vec![CallClaim::Claimed]);
        let group = handoff(&rig, leases.clone()).await;
        let llm = ScriptedLlm::new(vec![answer("Fibre cut at site 12.")]);
        let outcome = rig.worker(&llm).summarize_admitted(&group).await.unwrap();
        let seen = llm.requests();
        assert_eq!(seen.len(), 1);
        assert!(
            !seen[0].messages[1].content.contains("INC0010011"),
            "only the free job is called for"
        );
        assert_eq!((outcome.in_flight_elsewhere, outcome.acked), (1, 1));
        assert!(
            rig.store.job_exists(&leases[0].job.id).await.unwrap(),
            "its lease is left to the other worker"
        );
        assert!(!rig.store.job_exists(&leases[1].job.id).await.unwrap());
        // This worker let go of its own claim; the other's still runs.
        let later = now.plus(Duration::from_secs(1));
        let claims = rig
            .store
            .claim_calls(
                &[leases[0].job.id.clone()],
                "worker-c",
                later,
                later.plus(Duration::from_secs(10)),
            )
            .await
            .unwrap();
        assert!(
            matches!(claims[0], CallClaim::InFlight { .. }),
            "{claims:?}"
        );
    }

    #[tokio::test]
    async fn when_every_job_is_in_flight_elsewhere_the_reservation_goes_back() {
        let rig = Rig::new(vec![record(
            &event(13, 1, "1", "2"),
            &[SummaryKind::Technician],
        )])
        .await;
        let leases = rig.lease().await;
        let now = rig.clock.now();
        let ids: Vec<JobId> = leases.iter().map(|l| l.job.id.clone()).collect();
        rig.store
            .claim_calls(&ids, "worker-b", now, now.plus(Duration::from_secs(10)))
            .await
            .unwrap();
        let before = remaining_tokens(&rig).await;
        let group = handoff(&rig, leases).await;
        let llm = ScriptedLlm::new(vec![]);
        let outcome = rig.worker(&llm).summarize_admitted(&group).await.unwrap();
        assert_eq!(llm.calls(), 0);
        assert_eq!((outcome.in_flight_elsewhere, outcome.acked), (1, 0));
        assert_eq!(remaining_tokens(&rig).await, before);
    }
}
