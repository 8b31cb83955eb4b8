//! The fleet-wide ledger: the ledger rules as Redis Lua scripts, one atomic script
//! (one EVALSHA round trip) per operation.
//!
//! Per deployment six keys share one hash tag (`<prefix>:{<deployment>}:…`) so the
//! scripts stay single-slot on a clustered Redis: a state hash (timeline, running
//! token total, cooldown/down, counters), the window's sorted set of reservation ids
//! scored by admission time, their charges, the set of reconciled ids, the short window's
//! sorted set, and the sorted set of the last second's sends. An admitted job costs three
//! round trips in all: its admission (the dispatcher's hold), its send (the hold replaced by
//! the call at the instant it goes out) and its reconciliation.
//!
//! Time comes from the callers' `now`, never from Redis's clock, so the same scripts run
//! on a virtual clock in the storm lab. The ledger's timeline is the latest `now` any
//! instance has shown it: instances are expected to be NTP-synchronised, and one running
//! ahead only makes the others' admissions count from its (later) time.

use std::sync::LazyLock;

use async_trait::async_trait;
use redis::Script;
use redis::aio::ConnectionManager;

use super::budget::WindowLimits;
use super::ledger::{
    Admission, ExternalUsage, Ledger, LedgerError, LedgerSnapshot, Reconciliation,
    ReportedRemaining, Reservation, ReservationId, ThrottleKind,
};
use crate::clock::EpochMillis;
use crate::deployment_name::DeploymentName;
use crate::tokens::Tokens;

const PRELUDE: &str = include_str!("lua/advance.lua");

static ADMIT: LazyLock<Script> = LazyLock::new(|| with_prelude(include_str!("lua/admit.lua")));
static ADMIT_SEND: LazyLock<Script> =
    LazyLock::new(|| with_prelude(include_str!("lua/admit_send.lua")));
static RECONCILE: LazyLock<Script> =
    LazyLock::new(|| with_prelude(include_str!("lua/reconcile.lua")));
static THROTTLE: LazyLock<Script> =
    LazyLock::new(|| with_prelude(include_str!("lua/throttle.lua")));
static SNAPSHOT: LazyLock<Script> =
    LazyLock::new(|| with_prelude(include_str!("lua/snapshot.lua")));
static OBSERVE: LazyLock<Script> = LazyLock::new(|| with_prelude(include_str!("lua/observe.lua")));
static CLEAR: LazyLock<Script> = LazyLock::new(|| with_prelude(include_str!("lua/clear.lua")));

fn with_prelude(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}\n{body}"))
}

/// The governor ledger in Redis. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct RedisLedger {
    conn: ConnectionManager,
    prefix: String,
}

impl std::fmt::Debug for RedisLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLedger")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisLedger {
    /// `prefix` namespaces the keys (e.g. `sg:gov`); every instance of a fleet must use the same.
    pub fn new(conn: ConnectionManager, prefix: impl Into<String>) -> Self {
        RedisLedger {
            conn,
            prefix: prefix.into(),
        }
    }

    fn keys(&self, deployment: &DeploymentName) -> [String; 6] {
        let base = format!("{}:{{{}}}", self.prefix, deployment.as_str());
        [
            format!("{base}:state"),
            format!("{base}:window"),
            format!("{base}:charges"),
            format!("{base}:reconciled"),
            format!("{base}:short"),
            format!("{base}:sent"),
        ]
    }

    /// Loads every script so the first admission is a single EVALSHA.
    pub async fn preload(&self) -> Result<(), LedgerError> {
        let mut conn = self.conn.clone();
        for script in [
            &*ADMIT,
            &*ADMIT_SEND,
            &*RECONCILE,
            &*THROTTLE,
            &*SNAPSHOT,
            &*OBSERVE,
            &*CLEAR,
        ] {
            script.prepare_invoke().load_async(&mut conn).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Ledger for RedisLedger {
    async fn admit(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        cost: Tokens,
        now: EpochMillis,
    ) -> Result<Admission, LedgerError> {
        let answer: (String, u64, u64) = ADMIT
            .key(&self.keys(deployment))
            .arg(now.0)
            .arg(cost.0)
            .arg(limits.window_ms)
            .arg(limits.tokens)
            .arg(limits.requests)
            .arg(limits.minute_tokens)
            .invoke_async(&mut self.conn.clone())
            .await?;
        admission(deployment, cost, answer)
    }

    async fn admit_send(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        cost: Tokens,
        replacing: Option<ReservationId>,
        now: EpochMillis,
    ) -> Result<Admission, LedgerError> {
        let answer: (String, u64, u64) = ADMIT_SEND
            .key(&self.keys(deployment))
            .arg(now.0)
            .arg(cost.0)
            .arg(limits.window_ms)
            .arg(limits.tokens)
            .arg(limits.requests)
            .arg(limits.minute_tokens)
            .arg(limits.send_requests)
            .arg(replacing.map(|id| id.0.to_string()).unwrap_or_default())
            .invoke_async(&mut self.conn.clone())
            .await?;
        admission(deployment, cost, answer)
    }

    async fn reconcile(
        &self,
        reservation: &Reservation,
        used: Tokens,
    ) -> Result<Reconciliation, LedgerError> {
        let (kind, tokens): (String, u64) = RECONCILE
            .key(&self.keys(&reservation.deployment))
            .arg(reservation.id.0)
            .arg(used.0)
            .invoke_async(&mut self.conn.clone())
            .await?;
        match kind.as_str() {
            "refunded" => Ok(Reconciliation::Refunded(Tokens(tokens))),
            "overran" => Ok(Reconciliation::Overran(Tokens(tokens))),
            "settled" => Ok(Reconciliation::Settled),
            other => Err(LedgerError::Corrupt(format!(
                "reconcile answered {other:?}"
            ))),
        }
    }

    async fn throttle(
        &self,
        deployment: &DeploymentName,
        kind: ThrottleKind,
        until: EpochMillis,
    ) -> Result<EpochMillis, LedgerError> {
        let field = match kind {
            ThrottleKind::CoolingDown => "cooldown_until",
            ThrottleKind::Down => "down_until",
        };
        let until: u64 = THROTTLE
            .key(&self.keys(deployment))
            .arg(field)
            .arg(until.0)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(EpochMillis(until))
    }

    async fn clear_throttle(&self, deployment: &DeploymentName) -> Result<(), LedgerError> {
        CLEAR
            .key(&self.keys(deployment))
            .invoke_async::<u64>(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    async fn observe_remaining(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        reported: ReportedRemaining,
        now: EpochMillis,
    ) -> Result<ExternalUsage, LedgerError> {
        let absent_or = |v: Option<u64>| v.map(|n| n.to_string()).unwrap_or_default();
        let (tokens, requests, until): (u64, u64, u64) = OBSERVE
            .key(&self.keys(deployment))
            .arg(now.0)
            .arg(limits.window_ms)
            .arg(limits.tokens)
            .arg(limits.requests)
            .arg(limits.minute_tokens)
            .arg(absent_or(reported.tokens))
            .arg(absent_or(reported.requests))
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(external_usage(tokens, requests, until))
    }

    async fn snapshot(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        now: EpochMillis,
    ) -> Result<LedgerSnapshot, LedgerError> {
        let v: Vec<u64> = SNAPSHOT
            .key(&self.keys(deployment))
            .arg(now.0)
            .arg(limits.window_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        let [
            t,
            window_tokens,
            window_requests,
            minute_tokens,
            cooldown,
            down,
            admitted,
            deferred,
            reserved,
            used,
            refunded,
            throttles,
            shortfalls,
            ext_tokens,
            ext_requests,
            ext_until,
        ] = v[..]
        else {
            return Err(LedgerError::Corrupt(format!(
                "snapshot answered {} fields",
                v.len()
            )));
        };
        Ok(LedgerSnapshot {
            window_tokens,
            window_requests,
            minute_tokens,
            cooldown_until: (cooldown > t).then_some(EpochMillis(cooldown)),
            down_until: (down > t).then_some(EpochMillis(down)),
            external: external_usage(ext_tokens, ext_requests, ext_until),
            admitted,
            deferred,
            reserved_tokens: reserved,
            used_tokens: used,
            refunded_tokens: refunded,
            throttles,
            shortfalls,
        })
    }
}

/// The script's `{tokens, requests, ext_until}` (zeros when none is in force) as the
/// memory ledger states it.
fn external_usage(tokens: u64, requests: u64, until: u64) -> ExternalUsage {
    let active = tokens > 0 || requests > 0;
    ExternalUsage {
        tokens,
        requests,
        until: active.then_some(EpochMillis(until)),
    }
}

/// An admission script's answer as an [`Admission`].
fn admission(
    deployment: &DeploymentName,
    cost: Tokens,
    (kind, a, b): (String, u64, u64),
) -> Result<Admission, LedgerError> {
    match kind.as_str() {
        "admitted" | "sent" => Ok(Admission::Admitted(Reservation {
            id: ReservationId(a),
            deployment: deployment.clone(),
            tokens: cost,
            admitted_at: EpochMillis(b),
            sent: kind == "sent",
        })),
        "deferred" => Ok(Admission::Deferred {
            retry_at: EpochMillis(a),
        }),
        "cooling_down" => Ok(Admission::CoolingDown {
            until: EpochMillis(a),
        }),
        "down" => Ok(Admission::Down {
            until: EpochMillis(a),
        }),
        other => Err(LedgerError::Corrupt(format!("admit answered {other:?}"))),
    }
}
