//! `summarize-premium` and `summarize-standard` (queue triggers): run the shared
//! summarize step on one handed-off group of leases for that tier, then acknowledge.
//!
//! The queue message is dispatch's [`AdmittedGroup`]: one call of one kind, admitted on
//! one deployment; a hand-off for another tier or deployment, or mixing kinds, is refused
//! ([`handoff_refusal`]). The summaries are stored and the
//! leases acknowledged by the shared step; afterwards what they owe is delivered
//! ([`crate::deliveries`]): technician summaries go to ServiceNow as work notes (one
//! attempt, failures to the outbox, never failing the invocation) and customer notices
//! leave through the Kafka output binding, one per affected service and place.
//!
//! The queue delivers at least once, so the same message may reach two instances. The
//! step claims each job's call under this invocation's own name before making it, and
//! while the invocation runs a background task keeps those claims alive
//! ([`CLAIM_RENEWAL`]): a second delivery makes no call for a job whose call is in flight
//! or done, and only a dead invocation's claims run out, after
//! [`stormgate_shared::summarize::DEFAULT_CALL_CLAIM`].

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use serde_json::json;
use stormgate_shared::clock::Clock;
use stormgate_shared::dispatcher::AdmittedGroup;
use stormgate_shared::job::{JobId, Tier};
use stormgate_shared::store::Store;
use stormgate_shared::summarize::{HandoffRefusal, handoff_refusal};

use crate::deliveries::{self, SinkReport};
use crate::error::ApiError;
use crate::invocation::{InvocationRequest, InvocationResponse};
use crate::signals;
use crate::state::AppState;

/// How often a running invocation renews its claims on calls: a few times within a
/// claim's life, so that a slow Redis answer does not let one run out.
pub const CLAIM_RENEWAL: Duration = Duration::from_secs(3);

/// The queueTrigger binding's name in both tiers' function.json.
pub const HANDOFF_BINDING: &str = "handoff";
/// The Kafka output binding customer notices are published through.
pub const NOTIFICATIONS_BINDING: &str = "notifications";

pub async fn premium(
    state: State<AppState>,
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    summarize(state, Tier::Premium, invocation).await
}

pub async fn standard(
    state: State<AppState>,
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    summarize(state, Tier::Standard, invocation).await
}

async fn summarize(
    State(state): State<AppState>,
    tier: Tier,
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    let handoff: AdmittedGroup = invocation.queue_message(HANDOFF_BINDING)?;
    if handoff.tier != tier {
        let refusal = HandoffRefusal::OtherTier {
            handoff: handoff.tier,
            serving: tier,
        };
        return Err(ApiError::BadRequest(refusal.to_string()));
    }
    let runtime = state.summarization.clone().ok_or_else(|| {
        ApiError::Internal("the process was assembled without the LLM runtime".into())
    })?;
    let Some(deployment) = runtime.deployment(tier).cloned() else {
        return Err(ApiError::BadRequest(
            "extractive work has no tier function".into(),
        ));
    };
    // The call goes to the deployment the hand-off was admitted on, which must be the one
    // this tier serves; and it is of the hand-off's one kind.
    if let Some(refusal) = handoff_refusal(&handoff, &deployment) {
        return Err(ApiError::BadRequest(refusal.to_string()));
    }
    let store = state.store().await?;
    // The operators' controls shape this invocation's admissions too (a retry is admitted
    // again): read once; without them the configured budget holds.
    let now = state.clock.now();
    let governor = match state.controls.state(now).await {
        Ok(controls) => state.governor.with_controls(&controls, now),
        Err(error) => {
            tracing::warn!(%error, "controls not read: admitting under the configured budgets");
            state.governor.clone()
        }
    };
    let deployment_name = deployment.name.clone();
    let holder = format!("{:016x}", rand::random::<u64>());
    let jobs: Vec<JobId> = handoff.leases.iter().map(|l| l.job.id.clone()).collect();
    let _renewal = ClaimRenewal::start(
        store.clone(),
        state.clock.clone(),
        jobs.clone(),
        holder.clone(),
        runtime.settings.call_claim,
    );
    // Distinct per invocation so that workers never share a jitter sequence: the host
    // starts a batch of queue messages in the same millisecond, so the time cannot be the
    // distinguishing part.
    let worker = runtime.worker(
        store.as_ref(),
        &governor,
        state.clock.as_ref(),
        deployment,
        runtime.seed ^ rand::random::<u64>(),
        deliveries::sinks(&state),
        holder.clone(),
    );
    let outcome = match worker.summarize_admitted(&handoff).await {
        Ok(outcome) => outcome,
        Err(error) => {
            // Free the calls at once for the redelivery instead of at the claims' end.
            if let Err(e) = store.release_calls(&jobs, &holder).await {
                tracing::warn!(error = %e, "claims on calls left to run out");
            }
            return Err(error.into());
        }
    };

    // Summaries are stored already: a sink problem must not fail them.
    let mut sinks = SinkReport::default();
    let notices = deliveries::deliver(
        &state,
        store.as_ref(),
        &jobs,
        0,
        deliveries::NoteAttempt::Now,
        &mut sinks,
    )
    .await;
    let notices = notices.record(store.as_ref(), &mut sinks).await;
    deliveries::finish(&state, store.as_ref(), &mut sinks).await;
    signals::summarized(&state, tier, deployment_name.as_str(), &outcome, &sinks).await;

    // What the calls cost at the tier's prices (STORMGATE_<TIER>_PRICE_*_PER_1M, written by the
    // Bicep from the same object as the deployment).
    let prices = match tier {
        Tier::Premium => &state.settings.premium,
        _ => &state.settings.standard,
    };
    let cost_usd = (outcome.billed.prompt_tokens as f64 * prices.price_input_per_1m
        + outcome.billed.completion_tokens as f64 * prices.price_output_per_1m)
        / 1_000_000.0;
    tracing::info!(
        event = "summarize.cost",
        %tier,
        prompt_tokens = outcome.billed.prompt_tokens,
        completion_tokens = outcome.billed.completion_tokens,
        cost_usd,
    );
    let mut response = InvocationResponse::new()
        .with_return_value(json!({
            "tier": tier,
            "jobs": handoff.leases.len(),
            "acked": outcome.acked,
            "lost_leases": outcome.lost_leases,
            "superseded": outcome.superseded,
            "already_settled": outcome.already_settled,
            "in_flight_elsewhere": outcome.in_flight_elsewhere,
            "llm_calls": outcome.calls.len(),
            "tokens_used": outcome.tokens_used,
            "cost_usd": cost_usd,
            "summaries": outcome.summaries,
            "sinks": sinks,
        }))
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    if !notices.is_empty() {
        // One Kafka message per notice; objects, never bare strings (see with_output).
        response = response
            .with_output(NOTIFICATIONS_BINDING, &notices)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
    }
    Ok(response)
}

/// Keeps an invocation's claims on its calls alive until dropped.
struct ClaimRenewal(tokio::task::JoinHandle<()>);

impl ClaimRenewal {
    fn start(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        jobs: Vec<JobId>,
        holder: String,
        claim: Duration,
    ) -> ClaimRenewal {
        ClaimRenewal(tokio::spawn(async move {
            let mut every = tokio::time::interval(CLAIM_RENEWAL);
            every.tick().await;
            loop {
                every.tick().await;
                let now = clock.now();
                if let Err(error) = store
                    .renew_calls(&jobs, &holder, now, now.plus(claim))
                    .await
                {
                    tracing::warn!(%error, "claims on calls not renewed");
                }
            }
        }))
    }
}

impl Drop for ClaimRenewal {
    fn drop(&mut self) {
        self.0.abort();
    }
}
