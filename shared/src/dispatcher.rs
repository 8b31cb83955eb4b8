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
//!      than any window): spill;
//!    - when the budget stops the tier for this tick, the jobs behind the best one are
//!      looked at too: any that the tier's backlog would keep past its deadline spills
//!      now, while the next tier can still serve it in time (`Tick::shed_backlog`). To the standard tier the jobs are released into its
//!      queue; to the extractive tier the leases are returned in
//!      [`DispatchOutcome::spilled`] still held, and the caller writes their extractive
//!      summary and acknowledges them, so no job ever ends without a summary;
//! 3. logs its counters and the gauges ([`crate::gauges`]).
//!
//! Operators' controls ([`crate::controls`]) act here, read once per tick by the caller
//! and passed to [`dispatch_controlled`]: a paused tier is not served at all (its jobs
//! wait, its deadlines pass, the status says so); a tier forced to extractive-only has its
//! groups leased in serve order and settled with the extractive summary at once
//! ([`SpillReason::Controlled`]), none of them reaching a deployment. A deployment marked
//! down or given another budget acts through the governor the caller passes
//! ([`crate::governor::Governor::with_controls`]).
//!
//! A tick that fails (Redis unreachable midway) hands the jobs it leased back to their
//! queues before returning the error, since the caller's answer, and with it every
//! queue message, is discarded; what cannot be handed back returns at lease expiry.
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
use crate::controls::ControlState;
use crate::deployment_name::DeploymentName;
use crate::dispatch_policy::DispatchConfig;
use crate::fault_switches::{self, Mechanism};
use crate::gauges::{self, GaugeError, Gauges};
use crate::governor::{Admission, Governor, GovernorError, Reservation};
use crate::job::{Job, LlmUse, SummaryKind, Tier};
use crate::metering::CallCost;
use crate::store::{Lease, Store, StoreError};
use crate::tokens::Tokens;

/// Sleeps per tick at most, whatever the clock does: a guard, not a tuning knob.
const MAX_WAITS_PER_TICK: u32 = 10_000;

/// Pending jobs per tier a tick looks through for ones the tier cannot serve in time.
/// Deeper jobs are looked at as the queue drains; a bound keeps one tick's work bounded.
const BACKLOG_SCAN: usize = 2_000;

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
    /// Reconcile it with what the call was charged ([`Governor::reconcile`]). Its
    /// deployment is the one the call goes to ([`AdmittedGroup::deployment`]).
    pub reservation: Reservation,
    /// What the call was admitted for. The call's `max_tokens` must not exceed its
    /// `max_output_tokens`: that is what was charged for output. Flattened, so the queue
    /// message keeps the `max_output_tokens` field every version reads and writes.
    #[serde(flatten)]
    pub cost: CallCost,
}

impl AdmittedGroup {
    /// The deployment the call was admitted on.
    pub fn deployment(&self) -> &DeploymentName {
        &self.reservation.deployment
    }
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
    /// Behind the tier's backlog the job could not start before its deadline: the
    /// tier's sustained rate serves the jobs ahead of it no sooner than `expected`.
    Backlog {
        expected: EpochMillis,
        deadline: EpochMillis,
    },
    /// No deployment is configured for the tier.
    NoDeployment,
    /// The tier table keeps this job extractive (`extractive` entry): settled when leased.
    TierTable,
    /// The job may use this tier only while it is calm (a `...-when-calm` entry of the
    /// tier table), and the tier's deployment was contested when the job was leased: its
    /// sliding minute held `minute_tokens` of the governor's `budget` (contested from
    /// `contested_share` of it), or it was cooling down or down.
    Contested {
        minute_tokens: u64,
        budget: u64,
        throttled: bool,
    },
    /// An operator forced the tier to the extractive summary.
    Controlled,
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
    /// Jobs taken out of a blocked tier's queue because its backlog would keep them past
    /// their deadline (included in the spill counts).
    pub shed_jobs: u64,
    pub spilled_to_standard: u64,
    pub spilled_to_extractive: u64,
    /// Jobs settled with the extractive summary because the tier table says so (in
    /// `spilled_to_extractive` too).
    #[serde(default)]
    pub extractive_by_table: u64,
    /// Jobs the tier table lets use their tier only while it is calm, moved one tier down
    /// because it was contested (in `spilled_to_standard` or `spilled_to_extractive` too).
    #[serde(default)]
    pub moved_down_while_contested: u64,
    /// Jobs settled extractive because an operator forced their tier to it (included in
    /// `spilled_to_extractive`).
    #[serde(default)]
    pub forced_extractive: u64,
    /// LLM tiers not served because an operator paused them.
    #[serde(default)]
    pub paused_tiers: u64,
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

/// Runs one dispatch tick with no operator controls in force. See the module docs.
pub async fn dispatch_once(ctx: &DispatchContext<'_>) -> Result<DispatchOutcome, DispatchError> {
    dispatch_controlled(ctx, &ControlState::default()).await
}

/// Runs one dispatch tick under the operators' tier controls (pause, extractive-only).
pub async fn dispatch_controlled(
    ctx: &DispatchContext<'_>,
    controls: &ControlState,
) -> Result<DispatchOutcome, DispatchError> {
    let started_at = ctx.clock.now();
    let mut tick = Tick {
        ctx,
        controls,
        tick_end: started_at.plus(ctx.config.tick_budget()),
        waits_left: MAX_WAITS_PER_TICK,
        admitted: Vec::new(),
        spilled: Vec::new(),
        in_hand: Vec::new(),
        counters: DispatchCounters {
            reclaimed: reclaim_expired(ctx, started_at).await?,
            ..DispatchCounters::default()
        },
    };
    for tier in Tier::LLM {
        if let Err(error) = tick.serve_tier(tier).await {
            tick.hand_back().await;
            return Err(error);
        }
    }
    let finished_at = ctx.clock.now();
    let gauges = if ctx.emit_gauges {
        match Gauges::collect(ctx.store, ctx.governor, finished_at).await {
            Ok(g) => {
                g.emit();
                Some(g)
            }
            Err(error) => {
                tick.hand_back().await;
                return Err(error.into());
            }
        }
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

/// Returns expired leases to their queues: what makes a dead worker's jobs come back.
async fn reclaim_expired(ctx: &DispatchContext<'_>, now: EpochMillis) -> Result<u64, StoreError> {
    if fault_switches::is_off(Mechanism::LeaseReclaim) {
        return Ok(0);
    }
    ctx.store.reclaim_expired(now).await
}

/// Where one call's worth of jobs ended up.
enum Placement {
    Admitted,
    Spilled,
    /// Put back for the next tick: stop serving this tier. The budget frees up at `free_at`.
    Released {
        free_at: EpochMillis,
    },
}

struct Tick<'c, 'a> {
    ctx: &'c DispatchContext<'a>,
    controls: &'c ControlState,
    tick_end: EpochMillis,
    waits_left: u32,
    admitted: Vec<AdmittedGroup>,
    spilled: Vec<SpilledGroup>,
    /// The group being placed: leased, not yet admitted, spilled or released.
    in_hand: Vec<Lease>,
    counters: DispatchCounters,
}

impl Tick<'_, '_> {
    /// The tick failed (Redis went away mid-tick), so the host discards its answer and
    /// no message will carry the jobs it leased: hand them back to their queues now and
    /// refund their reservations, instead of leaving them until their leases expire
    /// (minutes, longer than a P1's deadline). Best effort: whatever cannot be handed
    /// back now still comes back through lease expiry.
    async fn hand_back(&mut self) {
        let admitted = std::mem::take(&mut self.admitted);
        for group in &admitted {
            if let Err(error) = self
                .ctx
                .governor
                .reconcile(&group.reservation, Tokens::ZERO)
                .await
            {
                tracing::warn!(%error, "reservation of a failed tick not refunded");
            }
        }
        let held = admitted
            .into_iter()
            .flat_map(|g| g.leases)
            .chain(std::mem::take(&mut self.in_hand))
            .chain(
                std::mem::take(&mut self.spilled)
                    .into_iter()
                    .filter(|s| s.to == Tier::Extractive)
                    .flat_map(|s| s.leases),
            );
        let mut handed_back = 0;
        for lease in held {
            // False when the lease was already released or spilled: nothing to do.
            match self.ctx.store.release(&lease, lease.job.tier).await {
                Ok(released) => handed_back += u64::from(released),
                Err(error) => {
                    tracing::warn!(job = %lease.job.id, %error, "left to lease expiry");
                }
            }
        }
        tracing::warn!(
            handed_back,
            "dispatch tick failed; its leased jobs handed back"
        );
    }

    async fn serve_tier(&mut self, tier: Tier) -> Result<(), DispatchError> {
        let control = self.controls.tier(tier);
        if control.is_paused() {
            self.counters.paused_tiers += 1;
            return Ok(());
        }
        if control.is_extractive_only() {
            return self.settle_extractive(tier).await;
        }
        let deployment = self.ctx.governor.deployment_for(tier).cloned();
        let blocked_until = self.serve_queue(tier, deployment.as_ref()).await?;
        if let (Some(free_at), Some(deployment)) = (blocked_until, deployment) {
            self.shed_backlog(tier, &deployment, free_at).await?;
        }
        Ok(())
    }

    /// Leases and places groups until the queue is empty or the budget stops the tier;
    /// in the latter case, when the budget frees up again.
    async fn serve_queue(
        &mut self,
        tier: Tier,
        deployment: Option<&DeploymentName>,
    ) -> Result<Option<EpochMillis>, DispatchError> {
        let config = self.ctx.config;
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
                return Ok(None);
            }
            self.counters.leased_jobs += group.len() as u64;
            self.in_hand = group.clone();
            let group = self.settle_without_llm(tier, deployment, group).await?;
            let mut calls = split_by_kind(group).into_iter();
            let mut blocked = None;
            for (kind, leases) in calls.by_ref() {
                let placement = match deployment {
                    Some(d) => self.place(tier, d, kind, leases).await?,
                    None => self.spill(tier, SpillReason::NoDeployment, leases).await?,
                };
                if let Placement::Released { free_at } = placement {
                    blocked = Some(free_at);
                    break;
                }
            }
            if blocked.is_some() {
                // The rest of the group waits with it.
                for (_, leases) in calls {
                    self.release(tier, &leases).await?;
                }
                self.in_hand.clear();
                return Ok(blocked);
            }
            self.in_hand.clear();
        }
        Ok(None)
    }

    /// Takes out of a leased group the jobs that may not use this tier's LLM now: those
    /// the tier table keeps extractive (settled with the extractive summary), and those
    /// allowed this tier only while it is calm when its deployment is contested
    /// ([`Tick::contention`]; moved one tier down: premium to standard, standard to the
    /// extractive summary). Returns the rest, to be placed as usual.
    async fn settle_without_llm(
        &mut self,
        tier: Tier,
        deployment: Option<&DeploymentName>,
        group: Vec<Lease>,
    ) -> Result<Vec<Lease>, DispatchError> {
        if group.iter().all(|l| l.job.llm.is_always()) {
            return Ok(group);
        }
        let (never, rest): (Vec<Lease>, Vec<Lease>) =
            group.into_iter().partition(|l| l.job.llm == LlmUse::Never);
        if !never.is_empty() {
            self.counters.extractive_by_table += never.len() as u64;
            self.spill_to(tier, Tier::Extractive, SpillReason::TierTable, never)
                .await?;
        }
        let when_calm = |l: &Lease| l.job.llm.only_when_calm_in(tier);
        let contention = match deployment {
            Some(d) if rest.iter().any(when_calm) => self.contention(d).await?,
            _ => None,
        };
        let Some(reason) = contention else {
            return Ok(rest);
        };
        let (contested, keep): (Vec<Lease>, Vec<Lease>) = rest.into_iter().partition(when_calm);
        self.counters.moved_down_while_contested += contested.len() as u64;
        self.spill(tier, reason, contested).await?;
        Ok(keep)
    }

    /// Whether `deployment` is contested now: its sliding minute holds at least the
    /// configured share of the governor's budget (this tick's admissions included), or a
    /// throttle has it cooling down or down. The spill reason when it is.
    async fn contention(
        &self,
        deployment: &DeploymentName,
    ) -> Result<Option<SpillReason>, DispatchError> {
        let used = self
            .ctx
            .governor
            .minute_use(deployment, self.ctx.clock.now())
            .await?;
        let contested = used.throttled || used.share() >= self.ctx.config.contested_share();
        Ok(contested.then_some(SpillReason::Contested {
            minute_tokens: used.tokens,
            budget: used.budget,
            throttled: used.throttled,
        }))
    }

    /// Leases the tier's groups in serve order and hands each to the extractive tier: an
    /// operator forced the tier to extractive-only.
    async fn settle_extractive(&mut self, tier: Tier) -> Result<(), DispatchError> {
        let config = self.ctx.config;
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
                break;
            }
            self.counters.leased_jobs += group.len() as u64;
            self.counters.forced_extractive += group.len() as u64;
            self.in_hand = group.clone();
            self.spill_to(tier, Tier::Extractive, SpillReason::Controlled, group)
                .await?;
            self.in_hand.clear();
        }
        Ok(())
    }

    /// Spills now, rather than at the head of the queue, every job that the tier's
    /// backlog would keep past its deadline.
    ///
    /// The tier is blocked until `free_at`; after that its deployment admits at most
    /// `minute_tokens` a minute and `requests` a short window. Walking the queue in serve
    /// order, a job is expected to start once everything kept ahead of it has gone out at
    /// that rate (an optimistic estimate: refunds make the real rate higher, coalescing
    /// makes calls fewer). A job expected after its deadline leaves for the next tier now,
    /// while that tier can still serve it in time; it does not count against the jobs behind.
    async fn shed_backlog(
        &mut self,
        tier: Tier,
        deployment: &DeploymentName,
        free_at: EpochMillis,
    ) -> Result<(), DispatchError> {
        let Some(limits) = self.ctx.governor.limits(deployment) else {
            return Ok(());
        };
        let config = self.ctx.config;
        let tokens_per_ms = limits.minute_tokens.max(1) as f64 / 60_000.0;
        let ms_per_request = limits.window_ms as f64 / limits.requests.max(1) as f64;
        let (mut ahead_tokens, mut ahead_requests) = (0u64, 0u64);
        let mut unreachable = BTreeMap::new();
        // Visited in place: only the jobs that leave are copied (their ids).
        let mut visit = |job: &Job| {
            let wait_ms =
                (ahead_tokens as f64 / tokens_per_ms).max(ahead_requests as f64 * ms_per_request);
            let expected = free_at.plus(std::time::Duration::from_millis(wait_ms as u64));
            if expected > job.deadline {
                unreachable.insert(job.id.clone(), (expected, job.deadline));
            } else if !(job.llm == LlmUse::Never || job.llm.only_when_calm_in(tier)) {
                // Jobs the tier table keeps extractive, or lets use this tier only while it
                // is calm, count for nothing ahead: leased from a tier this busy, they leave it.
                ahead_tokens += CallCost::of_jobs([job]).total().0;
                ahead_requests += 1;
            }
        };
        self.ctx
            .store
            .visit_pending_jobs(tier, BACKLOG_SCAN, config.aging(), &mut visit)
            .await?;
        if unreachable.is_empty() {
            return Ok(());
        }
        let ids: Vec<_> = unreachable.keys().cloned().collect();
        let leases = self
            .ctx
            .store
            .lease_jobs(tier, &ids, self.ctx.clock.now(), config.lease_for())
            .await?;
        self.counters.shed_jobs += leases.len() as u64;
        self.in_hand = leases.clone();
        for lease in leases {
            let Some(&(expected, deadline)) = unreachable.get(&lease.job.id) else {
                continue;
            };
            let reason = SpillReason::Backlog { expected, deadline };
            self.spill(tier, reason, vec![lease]).await?;
        }
        self.in_hand.clear();
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
        let cost = CallCost::of_jobs(leases.iter().map(|l| &l.job));
        let deadline = leases
            .iter()
            .map(|l| l.job.deadline)
            .min()
            .unwrap_or(EpochMillis::ZERO);
        loop {
            let now = self.ctx.clock.now();
            let free_at = match self
                .ctx
                .governor
                .admit(deployment, cost.total(), now)
                .await?
            {
                Admission::Admitted(reservation) => {
                    self.counters.admitted_calls += 1;
                    self.counters.admitted_jobs += leases.len() as u64;
                    self.counters.admitted_tokens += reservation.tokens.0;
                    self.admitted.push(AdmittedGroup {
                        tier,
                        kind,
                        leases,
                        reservation,
                        cost,
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
                return Ok(Placement::Released { free_at });
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
        self.spill_to(from, from.spill(), reason, leases).await
    }

    async fn spill_to(
        &mut self,
        from: Tier,
        to: Tier,
        reason: SpillReason,
        leases: Vec<Lease>,
    ) -> Result<Placement, DispatchError> {
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
        shed_jobs = c.shed_jobs,
        spilled_to_standard = c.spilled_to_standard,
        spilled_to_extractive = c.spilled_to_extractive,
        extractive_by_table = c.extractive_by_table,
        moved_down_while_contested = c.moved_down_while_contested,
        forced_extractive = c.forced_extractive,
        paused_tiers = c.paused_tiers,
    );
}
