//! `dispatch` (timer, every 5 s): one [`dispatch_once`] tick on the real clock. Each
//! admitted group leaves as one message on its tier's queue (the tier function decodes
//! it as the same [`AdmittedGroup`]); each job spilled to the extractive tier is settled
//! here, with its degraded extractive summary stored and its lease acknowledged.
//!
//! Jobs settled here reach the same sinks as the tier functions' ([`crate::deliveries`]):
//! their customer notices leave through this function's own Kafka output
//! ([`NOTIFICATIONS_BINDING`]), one per affected service and place, and their work notes
//! go to the outbox. The tick also takes up to [`OWED_PER_TICK`] deliveries of each kind
//! whose claim ran out (an invocation failed or died before it delivered them).
//!
//! When ServiceNow write-back is configured, the tick then drains the work-note outbox
//! for a bounded time ([`WORK_NOTE_DRAIN_BUDGET`]): the timer runs every 5 s on one
//! instance at a time, so notes that failed are retried soon after ServiceNow is back
//! (or its Retry-After has passed), and a slow ServiceNow delays the tick by at most
//! the budget. A drain failure is logged and never fails the tick.
//!
//! A failed tick answers non-2xx and the host discards its outputs: the jobs it leased
//! are handed back to their queues before it answers (`dispatch_once`), or, when Redis
//! is too far gone for that, come back when their leases expire; a later tick (the
//! timer fires every 5 s) dispatches them again. Nothing is lost, only delayed. A
//! failure to settle one spilled job does not
//! fail the tick (that would discard the other groups' messages): its lease expires and
//! it is dispatched again.

use std::time::Duration;

use axum::extract::State;
use serde::Serialize;
use stormgate_shared::configured_sinks::Sinks;
use stormgate_shared::dispatcher::{
    AdmittedGroup, DispatchContext, DispatchCounters, DispatchError, DispatchOutcome,
    dispatch_controlled,
};
use stormgate_shared::extractive_settlement::{Settlement, settle_extractive};
use stormgate_shared::gauges::GaugeError;
use stormgate_shared::governor::{GovernorError, LedgerError};
use stormgate_shared::job::{JobId, Tier};
use stormgate_shared::store::{Store, StoreError};

use crate::deliveries::{self, NoteAttempt, SinkReport};
use crate::error::ApiError;
use crate::invocation::{InvocationRequest, InvocationResponse};
use crate::servicenow::DeliveryReport;
use crate::signals;
use crate::state::AppState;

pub const TIMER_BINDING: &str = "timer";
/// Queue output bindings, one per tier (queues `summarize-premium` / `summarize-standard`).
pub const PREMIUM_QUEUE_BINDING: &str = "premiumQueue";
pub const STANDARD_QUEUE_BINDING: &str = "standardQueue";
/// The Kafka output binding the customer notices of jobs settled here are published
/// through (the notifications topic, as the tier functions').
pub const NOTIFICATIONS_BINDING: &str = "notifications";
/// Deliveries of each kind whose claim ran out that one tick takes on.
pub const OWED_PER_TICK: usize = 500;

/// Wall time a tick may spend retrying pending work notes.
pub const WORK_NOTE_DRAIN_BUDGET: Duration = Duration::from_secs(2);
/// Pending work notes retried per tick at most.
pub const WORK_NOTES_PER_TICK: usize = 50;

/// The invocation's `ReturnValue`: what the tick did, for the Functions monitor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DispatchReport {
    pub counters: DispatchCounters,
    pub premium_messages: usize,
    pub standard_messages: usize,
    pub extractive: ExtractiveReport,
    /// The work-note outbox drain; absent when write-back is off or the drain failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_notes: Option<DeliveryReport>,
    /// Customer notices and work notes of the jobs settled here, of deliveries taken up
    /// again, and of the outbox drain; and what still waits.
    pub sinks: SinkReport,
}

/// How the jobs spilled to the extractive tier were settled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExtractiveReport {
    pub summarized: u64,
    pub superseded: u64,
    pub unreadable: u64,
    pub lease_lost: u64,
    /// Store errors: left leased, dispatched again after the lease expires.
    pub failed: u64,
}

pub async fn run(
    State(state): State<AppState>,
    invocation: InvocationRequest,
) -> Result<InvocationResponse, ApiError> {
    let timer = invocation.timer(TIMER_BINDING)?;
    if timer.is_past_due {
        tracing::info!("dispatch tick is past due");
    }
    let store = state.store().await?;
    // The operators' controls, read once for the tick: they pause or force tiers here and
    // shape the governor every admission of the tick goes through.
    let now = state.clock.now();
    let controls = state.controls.state(now).await?;
    let governor = state.governor.with_controls(&controls, now);
    let ctx = DispatchContext {
        store: store.as_ref(),
        governor: &governor,
        clock: state.clock.as_ref(),
        config: &state.dispatch,
        emit_gauges: true,
    };
    let outcome = dispatch_controlled(&ctx, &controls)
        .await
        .map_err(api_error)?;
    let (extractive, settled, summarized) =
        settle_spilled(store.as_ref(), &state, &outcome, deliveries::sinks(&state)).await;
    let mut sinks = SinkReport::default();
    let notices = deliveries::deliver(
        &state,
        store.as_ref(),
        &settled,
        OWED_PER_TICK,
        NoteAttempt::Queue,
        &mut sinks,
    )
    .await;
    let work_notes = drain_work_notes(&state).await;
    if let Some(drained) = work_notes {
        sinks.work_notes.add(drained);
    }
    let notices = notices.record(store.as_ref(), &mut sinks).await;
    deliveries::finish(&state, store.as_ref(), &mut sinks).await;
    signals::dispatch_tick(
        &state,
        store.as_ref(),
        &controls,
        &governor,
        &outcome,
        &summarized,
        &sinks,
    )
    .await;
    let premium = messages(&outcome.admitted, Tier::Premium);
    let standard = messages(&outcome.admitted, Tier::Standard);
    let report = DispatchReport {
        counters: outcome.counters,
        premium_messages: premium.len(),
        standard_messages: standard.len(),
        extractive,
        work_notes,
        sinks,
    };
    let mut response = InvocationResponse::new().with_return_value(&report)?;
    if !notices.is_empty() {
        // One Kafka message per notice; objects, never bare strings (see with_output).
        response = response.with_output(NOTIFICATIONS_BINDING, &notices)?;
    }
    // Each message is an object: a bare string could be mistaken for base64 by the host.
    if !premium.is_empty() {
        response = response.with_output(PREMIUM_QUEUE_BINDING, premium)?;
    }
    if !standard.is_empty() {
        response = response.with_output(STANDARD_QUEUE_BINDING, standard)?;
    }
    Ok(response)
}

/// Retries the work notes that are due, within [`WORK_NOTE_DRAIN_BUDGET`].
async fn drain_work_notes(state: &AppState) -> Option<DeliveryReport> {
    let sink = state.work_notes.as_deref()?;
    match sink
        .drain(
            state.clock.as_ref(),
            WORK_NOTES_PER_TICK,
            WORK_NOTE_DRAIN_BUDGET,
        )
        .await
    {
        Ok(report) => Some(report),
        Err(error) => {
            tracing::warn!(%error, "work-note outbox not drained this tick");
            None
        }
    }
}

fn messages(admitted: &[AdmittedGroup], tier: Tier) -> Vec<&AdmittedGroup> {
    admitted.iter().filter(|group| group.tier == tier).collect()
}

/// Settles every job spilled to the extractive tier; the ids of those it settled, and of
/// those it stored a summary for.
async fn settle_spilled(
    store: &dyn Store,
    state: &AppState,
    outcome: &DispatchOutcome,
    sinks: Sinks,
) -> (ExtractiveReport, Vec<JobId>, Vec<JobId>) {
    let mut report = ExtractiveReport::default();
    let mut settled = Vec::new();
    let mut summarized = Vec::new();
    for lease in outcome.extractive_work().flat_map(|group| &group.leases) {
        match settle_extractive(store, state.clock.as_ref(), lease, sinks).await {
            Ok(settlement) => {
                settled.push(lease.job.id.clone());
                match settlement {
                    Settlement::Summarized => {
                        report.summarized += 1;
                        summarized.push(lease.job.id.clone());
                    }
                    Settlement::Superseded => report.superseded += 1,
                    Settlement::Unreadable => report.unreadable += 1,
                    Settlement::LeaseLost => report.lease_lost += 1,
                }
            }
            Err(error) => {
                report.failed += 1;
                tracing::warn!(job = %lease.job.id, %error, "spilled job not settled; its lease will expire and it will be dispatched again");
            }
        }
    }
    (report, settled, summarized)
}

/// Redis unreachable (store or ledger) is a 503; anything else is a bug or corrupt data.
fn api_error(error: DispatchError) -> ApiError {
    match error {
        DispatchError::Store(e) | DispatchError::Gauges(GaugeError::Store(e)) => e.into(),
        DispatchError::Governor(e) | DispatchError::Gauges(GaugeError::Governor(e)) => match e {
            GovernorError::Ledger(LedgerError::Unavailable(detail)) => {
                ApiError::from(StoreError::Unavailable(detail))
            }
            other => ApiError::Internal(other.to_string()),
        },
    }
}
