//! The dispatch step: drains the priority queues within the governor's budget, spills past deadlines.
//!
//! [`dispatch_once`] is the one step the `dispatch` timer, the tests and the storm lab
//! all drive. A tick:
//! 1. returns expired leases to their queues (a worker died or a message was lost);
//! 2. for each LLM tier in priority order (premium, then standard), leases the best
//!    group (severity improved by waiting, coalesced by key), splits it into one call
//!    per summary kind, and asks the governor to admit each call:
//!    - admitted: the group goes out in [`DispatchOutcome::admitted`] with its
//!      [`Reservation`] (the handler turns it into a queue message, the lab delivers it
//!      in-process);
//!    - deferred or cooling down until an instant before the group's deadline: if that
//!      instant is within the tick's budget, sleep on the injected clock and ask again;
//!      otherwise put the group back and stop serving this tier until the next tick
//!      (the best job waits; nothing behind it jumps the queue);
//!    - unable before the deadline (budget, cooldown, deployment down, or a call larger
//!      than any window): spill. To the standard tier the jobs are released into its
//!      queue; to the extractive tier the leases are returned in
//!      [`DispatchOutcome::spilled`] still held, and the caller writes their extractive
//!      summary and acknowledges them, so no job ever ends without a summary;
//! 3. logs its counters and the gauges ([`crate::gauges`]).
//!
//! A group's deadline is the earliest its jobs carry: ingest stamped each from the one
//! [`crate::deadline_policy::DeadlinePolicy`], so there is no second table to disagree with.
//! A job whose deadline has passed is still admitted if budget is there right now: a
//! late LLM summary beats none; it spills only when the tier cannot serve it at once.
//!
//! Tiers are served one after the other, premium first: while premium waits for its
//! budget within the tick, standard waits too, and is then served with whatever its
//! own (separate) budget holds at that moment, without waiting. Standard therefore
//! still uses its whole budget each tick; its jobs may start up to the tick budget later.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clock::{Clock, EpochMillis};
use crate::dispatch_policy::DispatchConfig;
use crate::gauges::{self, GaugeError, Gauges};
use crate::governor::{Admission, DeploymentName, Governor, GovernorError, Reservation};
use crate::job::{SummaryKind, Tier};
use crate::store::{Lease, Store, StoreError};
use crate::tokens::Tokens;

/// Sleeps per tick at most, whatever the clock does: a guard, not a tuning knob.
const MAX_WAITS_PER_TICK: u32 = 10_000;

/// What one tick needs. Everything is borrowed: the caller owns the long-lived parts.
#[derive(Debug, Clone, Copy)]
pub struct DispatchContext<'a> {
    pub store: &'a dyn Store,
    pub governor: &'a Governor,
    pub clock: &'a dyn Clock,
    pub config: &'a DispatchConfig,
    /// Collect and log the gauges at the end of the tick.
    pub emit_gauges: bool,
}

/// A group admitted for one LLM call: the queue message for its tier's worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdmittedGroup {
    pub tier: Tier,
    pub kind: SummaryKind,
    pub leases: Vec<Lease>,
    /// Reconcile it with the call's real usage ([`Governor::reconcile`]).
    pub reservation: Reservation,
    /// The call's `max_tokens` must not exceed this: it is what was charged for output.
    pub max_output_tokens: Tokens,
}

/// Why a group left its tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum SpillReason {
    /// The budget frees up only after the deadline.
    DeadlineUnreachable {
        earliest: EpochMillis,
        deadline: EpochMillis,
    },
    CoolingDown {
        until: EpochMillis,
        deadline: EpochMillis,
    },
    Down {
        until: EpochMillis,
    },
    TooLarge {
        tokens: Tokens,
        limit: Tokens,
    },
    /// No deployment is configured for the tier.
    NoDeployment,
}

/// A group moved to the next tier. When `to` is [`Tier::Extractive`] the leases are
/// still held: write each job's extractive summary, then acknowledge the lease. When
/// `to` is [`Tier::Standard`] they were released into that queue (listed for the record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpilledGroup {
    pub from: Tier,
    pub to: Tier,
    pub reason: SpillReason,
    pub leases: Vec<Lease>,
}

/// What a tick did, for logs, tests and the lab.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchCounters {
    pub reclaimed: u64,
    pub leased_jobs: u64,
    pub admitted_calls: u64,
    pub admitted_jobs: u64,
    pub admitted_tokens: u64,
    /// Admission answers of Deferred (each retry within the tick counts).
    pub deferrals: u64,
    /// Admission answers of CoolingDown.
    pub cooling_down: u64,
    /// Sleeps waiting for budget, and their total virtual duration.
    pub waits: u64,
    pub waited_ms: u64,
    /// Jobs put back in their own tier for the next tick.
    pub released_jobs: u64,
    pub spilled_to_standard: u64,
    pub spilled_to_extractive: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchOutcome {
    pub started_at: EpochMillis,
    pub finished_at: EpochMillis,
    pub admitted: Vec<AdmittedGroup>,
    pub spilled: Vec<SpilledGroup>,
    pub counters: DispatchCounters,
    /// Present when the context asked for gauges.
    pub gauges: Option<Gauges>,
}

impl DispatchOutcome {
    /// The groups whose extractive summary the caller must write and acknowledge.
    pub fn extractive_work(&self) -> impl Iterator<Item = &SpilledGroup> {
        self.spilled.iter().filter(|s| s.to == Tier::Extractive)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Governor(#[from] GovernorError),
    #[error(transparent)]
    Gauges(#[from] GaugeError),
}

/// Runs one dispatch tick. See the module docs.
pub async fn dispatch_once(ctx: &DispatchContext<'_>) -> Result<DispatchOutcome, DispatchError> {
    let started_at = ctx.clock.now();
    let mut tick = Tick {
        ctx,
        tick_end: started_at.plus(ctx.config.tick_budget()),
        waits_left: MAX_WAITS_PER_TICK,
        admitted: Vec::new(),
        spilled: Vec::new(),
        counters: DispatchCounters {
            reclaimed: ctx.store.reclaim_expired(started_at).await?,
            ..DispatchCounters::default()
        },
    };
    for tier in Tier::LLM {
        tick.serve_tier(tier).await?;
    }
    let finished_at = ctx.clock.now();
    let gauges = if ctx.emit_gauges {
        let g = Gauges::collect(ctx.store, ctx.governor, finished_at).await?;
        g.emit();
        Some(g)
    } else {
        None
    };
    let outcome = DispatchOutcome {
        started_at,
        finished_at,
        admitted: tick.admitted,
        spilled: tick.spilled,
        counters: tick.counters,
        gauges,
    };
    log_counters(&outcome);
    Ok(outcome)
}

/// Where one call's worth of jobs ended up.
enum Placement {
    Admitted,
    Spilled,
    /// Put back for the next tick: stop serving this tier.
    Released,
}

struct Tick<'c, 'a> {
    ctx: &'c DispatchContext<'a>,
    tick_end: EpochMillis,
    waits_left: u32,
    admitted: Vec<AdmittedGroup>,
    spilled: Vec<SpilledGroup>,
    counters: DispatchCounters,
}

impl Tick<'_, '_> {
    async fn serve_tier(&mut self, tier: Tier) -> Result<(), DispatchError> {
        let config = self.ctx.config;
        let deployment = self.ctx.governor.deployment_for(tier).cloned();
        for _ in 0..config.max_groups_per_tier() {
            let group = self
                .ctx
                .store
                .lease(
                    tier,
                    self.ctx.clock.now(),
                    config.lease_for(),
                    config.max_group(),
                    config.aging(),
                )
                .await?;
            if group.is_empty() {
                return Ok(());
            }
            self.counters.leased_jobs += group.len() as u64;
            let mut calls = split_by_kind(group).into_iter();
            let mut stop = false;
            for (kind, leases) in calls.by_ref() {
                let placement = match &deployment {
                    Some(d) => self.place(tier, d, kind, leases).await?,
                    None => self.spill(tier, SpillReason::NoDeployment, leases).await?,
                };
                if matches!(placement, Placement::Released) {
                    stop = true;
                    break;
                }
            }
            if stop {
                // The rest of the group waits with it.
                for (_, leases) in calls {
                    self.release(tier, &leases).await?;
                }
                return Ok(());
            }
        }
        Ok(())
    }

    /// Admits one call's jobs, waiting within the tick, or spills or releases them.
    async fn place(
        &mut self,
        tier: Tier,
        deployment: &DeploymentName,
        kind: SummaryKind,
        leases: Vec<Lease>,
    ) -> Result<Placement, DispatchError> {
        let (cost, max_output_tokens) = call_cost(&leases);
        let deadline = leases
            .iter()
            .map(|l| l.job.deadline)
            .min()
            .unwrap_or(EpochMillis::ZERO);
        loop {
            let now = self.ctx.clock.now();
            let free_at = match self.ctx.governor.admit(deployment, cost, now).await? {
                Admission::Admitted(reservation) => {
                    self.counters.admitted_calls += 1;
                    self.counters.admitted_jobs += leases.len() as u64;
                    self.counters.admitted_tokens += reservation.tokens.0;
                    self.admitted.push(AdmittedGroup {
                        tier,
                        kind,
                        leases,
                        reservation,
                        max_output_tokens,
                    });
                    return Ok(Placement::Admitted);
                }
                Admission::TooLarge { tokens, limit } => {
                    return self
                        .spill(tier, SpillReason::TooLarge { tokens, limit }, leases)
                        .await;
                }
                Admission::Down { until } => {
                    return self.spill(tier, SpillReason::Down { until }, leases).await;
                }
                Admission::Deferred { retry_at } => {
                    self.counters.deferrals += 1;
                    if retry_at > deadline {
                        let reason = SpillReason::DeadlineUnreachable {
                            earliest: retry_at,
                            deadline,
                        };
                        return self.spill(tier, reason, leases).await;
                    }
                    retry_at
                }
                Admission::CoolingDown { until } => {
                    self.counters.cooling_down += 1;
                    if until > deadline {
                        return self
                            .spill(tier, SpillReason::CoolingDown { until, deadline }, leases)
                            .await;
                    }
                    until
                }
            };
            if free_at > self.tick_end || self.waits_left == 0 {
                self.release(tier, &leases).await?;
                return Ok(Placement::Released);
            }
            self.waits_left -= 1;
            let wait = free_at.since(now);
            self.counters.waits += 1;
            self.counters.waited_ms += u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            self.ctx.clock.sleep(wait).await;
        }
    }

    async fn spill(
        &mut self,
        from: Tier,
        reason: SpillReason,
        leases: Vec<Lease>,
    ) -> Result<Placement, DispatchError> {
        let to = from.spill();
        if to == Tier::Extractive {
            self.counters.spilled_to_extractive += leases.len() as u64;
        } else {
            for lease in &leases {
                self.ctx.store.release(lease, to).await?;
            }
            self.counters.spilled_to_standard += leases.len() as u64;
        }
        tracing::info!(
            event = "spill",
            from = from.as_str(),
            to = to.as_str(),
            reason = ?reason,
            jobs = leases.len(),
        );
        self.spilled.push(SpilledGroup {
            from,
            to,
            reason,
            leases,
        });
        Ok(Placement::Spilled)
    }

    async fn release(&mut self, tier: Tier, leases: &[Lease]) -> Result<(), DispatchError> {
        for lease in leases {
            self.ctx.store.release(lease, tier).await?;
        }
        self.counters.released_jobs += leases.len() as u64;
        Ok(())
    }
}

/// One call per summary kind: the tier worker makes one call per kind of a group, and
/// each call is one request against the deployment's budget.
fn split_by_kind(group: Vec<Lease>) -> Vec<(SummaryKind, Vec<Lease>)> {
    let mut by_kind: BTreeMap<SummaryKind, Vec<Lease>> = BTreeMap::new();
    let first_kind = group.first().map(|l| l.job.id.kind);
    for lease in group {
        by_kind.entry(lease.job.id.kind).or_default().push(lease);
    }
    // The best job's kind goes first: it is the one the group was leased for.
    let mut calls: Vec<_> = by_kind.into_iter().collect();
    calls.sort_by_key(|(kind, _)| Some(*kind) != first_kind);
    calls
}

/// What one call over these jobs is charged: every prompt (an upper bound; the worker's
/// prompt may bound the group's text further) plus the largest `max_tokens`.
fn call_cost(leases: &[Lease]) -> (Tokens, Tokens) {
    let prompts: Tokens = leases.iter().map(|l| l.job.prompt_tokens).sum();
    let output = leases
        .iter()
        .map(|l| l.job.max_output_tokens)
        .max()
        .unwrap_or(Tokens::ZERO);
    (prompts + output, output)
}

fn log_counters(outcome: &DispatchOutcome) {
    let c = &outcome.counters;
    tracing::info!(
        target: gauges::TARGET,
        event = "dispatch",
        started_at_ms = outcome.started_at.0,
        duration_ms = outcome.finished_at.0.saturating_sub(outcome.started_at.0),
        reclaimed = c.reclaimed,
        leased_jobs = c.leased_jobs,
        admitted_calls = c.admitted_calls,
        admitted_jobs = c.admitted_jobs,
        admitted_tokens = c.admitted_tokens,
        deferrals = c.deferrals,
        cooling_down = c.cooling_down,
        waits = c.waits,
        waited_ms = c.waited_ms,
        released_jobs = c.released_jobs,
        spilled_to_standard = c.spilled_to_standard,
        spilled_to_extractive = c.spilled_to_extractive,
    );
}
