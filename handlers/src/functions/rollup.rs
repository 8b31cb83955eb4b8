//! `rollup` (timer, every minute): first the store's retention (expired tickets purged,
//! the dead-letter stream's size read; `stormgate_shared::retention`), then an executive
//! summary for each region whose roll-up is due, on the standard deployment when the
//! governor admits the call, extractive otherwise. (The ServiceNow work-note outbox is
//! drained by the `dispatch` tick, every 5 s.)

use std::sync::Mutex;
use std::time::Duration;

use axum::extract::State;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde_json::json;
use stormgate_shared::retention::{PURGE_PER_RUN, keep_within_limits};
use stormgate_shared::retry::RetryPolicy;
use stormgate_shared::rollup::RollupWorker;

use crate::error::ApiError;
use crate::invocation::{InvocationRequest, InvocationResponse};
use crate::state::AppState;

pub const TIMER_BINDING: &str = "timer";

/// Tickets a roll-up reads per region (the most recent ones).
const TICKETS_PER_ROLLUP: usize = 500;

pub async fn run(
    State(state): State<AppState>,
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    let _timer = invocation.timer(TIMER_BINDING)?;
    let store = state.store().await?;
    // Retention never fails the tick: a purge left undone is done by the next one.
    let retention = match keep_within_limits(store.as_ref(), state.clock.now(), PURGE_PER_RUN).await
    {
        Ok(report) => {
            report.emit();
            Some(report)
        }
        Err(error) => {
            tracing::warn!(%error, "retention skipped in this tick");
            None
        }
    };
    let runtime = state.summarization.clone().ok_or_else(|| {
        ApiError::Internal("the process was assembled without the LLM runtime".into())
    })?;
    let worker = RollupWorker {
        store: store.as_ref(),
        client: runtime.client.as_ref(),
        gate: &state.governor,
        clock: state.clock.as_ref(),
        deployment: runtime.standard.clone(),
        admission_wait: Duration::from_secs(10),
        retry: RetryPolicy {
            max_attempts: 2,
            ..runtime.settings.retry
        },
        rng: Mutex::new(SmallRng::seed_from_u64(
            runtime.seed ^ state.clock.now().as_millis(),
        )),
    };
    let mut rolled = Vec::new();
    for region in store.take_due_regions().await? {
        // A region whose tickets cannot be listed is skipped, not failed: its next
        // ingest marks it due again.
        let tickets = match store.region_tickets(&region, TICKETS_PER_ROLLUP).await {
            Ok(tickets) => tickets,
            Err(error) => {
                tracing::warn!(%region, %error, "region skipped in this roll-up");
                continue;
            }
        };
        let outcome = worker.rollup_region(&region, &tickets).await?;
        rolled.push(json!({
            "region": region,
            "tier": outcome.rollup.tier,
            "degraded": outcome.rollup.degraded,
            "llm_calls": outcome.llm_calls,
        }));
    }
    InvocationResponse::new()
        .with_return_value(json!({"rollups": rolled, "retention": retention}))
        .map_err(|e| ApiError::Internal(e.to_string()))
}
