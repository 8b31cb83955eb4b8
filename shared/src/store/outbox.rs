//! The ServiceNow work-note outbox's storage: members waiting for their next attempt,
//! scored by when it is due, and the fleet-wide cooldown every instance honours.
//!
//! Two backends, as for the [`Store`](super::Store): [`MemoryOutbox`] and [`RedisOutbox`]
//! (its scripts in `scripts/outbox_*.lua`, beside the store's). One conformance suite
//! (`tests/outbox_conformance.rs` in this crate) runs against both. Members are opaque
//! text here (the handler's encoded notes).
//!
//! # Keys
//!
//! `<prefix>:pending` (zset: member → next attempt, epoch ms) and `<prefix>:cooldown_until`
//! (string: epoch ms, expiring with the cooldown), where the handler's prefix is
//! `<namespace>:servicenow`. They sit outside the store's `{ns}` hash tag, as they always
//! have: every command and script touches one key, so a cluster needs no shared slot,
//! and the deployed keys keep being read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;

use super::StoreError;
use crate::clock::EpochMillis;
use crate::redis_link::RedisLink;

/// The outbox's operations. Each is one atomic step.
#[async_trait]
pub trait OutboxStore: Send + Sync + std::fmt::Debug {
    /// Queues `members` for an attempt at or after `not_before` (a member queued already
    /// takes the new time).
    async fn push(&self, members: &[String], not_before: EpochMillis) -> Result<(), StoreError>;
    /// Takes the earliest member due at `now`, holding it until `hold_until`: if it is
    /// neither removed nor rescheduled by then, it is due again.
    async fn claim_due(
        &self,
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Result<Option<String>, StoreError>;
    /// Removes a member for good.
    async fn remove(&self, member: &str) -> Result<(), StoreError>;
    /// Replaces `member` by `next`, due at `not_before`.
    async fn reschedule(
        &self,
        member: &str,
        next: &str,
        not_before: EpochMillis,
    ) -> Result<(), StoreError>;
    /// Members waiting, due or not.
    async fn pending(&self) -> Result<u64, StoreError>;
    /// Until when every instance stays away from ServiceNow (zero when none was set, or,
    /// in Redis, once its key expired).
    async fn cooldown_until(&self) -> Result<EpochMillis, StoreError>;
    /// Extends the cooldown to `until`, never shortening it; in Redis its key expires
    /// `wait` (at least a second) later.
    async fn extend_cooldown(&self, until: EpochMillis, wait: Duration) -> Result<(), StoreError>;
}

/// The outbox in memory (local runs and tests).
#[derive(Debug, Default)]
pub struct MemoryOutbox {
    state: Mutex<MemoryState>,
}

#[derive(Debug, Default)]
struct MemoryState {
    due: BTreeMap<String, u64>,
    order: BTreeSet<(u64, String)>,
    cooldown_until: EpochMillis,
}

impl MemoryState {
    fn put(&mut self, member: &str, at: u64) {
        self.remove(member);
        self.due.insert(member.to_owned(), at);
        self.order.insert((at, member.to_owned()));
    }

    fn remove(&mut self, member: &str) {
        if let Some(at) = self.due.remove(member) {
            self.order.remove(&(at, member.to_owned()));
        }
    }
}

impl MemoryOutbox {
    pub fn new() -> MemoryOutbox {
        MemoryOutbox::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MemoryState> {
        // Every step leaves the maps consistent before it can panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl OutboxStore for MemoryOutbox {
    async fn push(&self, members: &[String], not_before: EpochMillis) -> Result<(), StoreError> {
        let mut state = self.state();
        for member in members {
            state.put(member, not_before.as_millis());
        }
        Ok(())
    }

    async fn claim_due(
        &self,
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Result<Option<String>, StoreError> {
        let mut state = self.state();
        let Some((at, member)) = state.order.first().cloned() else {
            return Ok(None);
        };
        if at > now.as_millis() {
            return Ok(None);
        }
        state.put(&member, hold_until.as_millis());
        Ok(Some(member))
    }

    async fn remove(&self, member: &str) -> Result<(), StoreError> {
        self.state().remove(member);
        Ok(())
    }

    async fn reschedule(
        &self,
        member: &str,
        next: &str,
        not_before: EpochMillis,
    ) -> Result<(), StoreError> {
        let mut state = self.state();
        state.remove(member);
        state.put(next, not_before.as_millis());
        Ok(())
    }

    async fn pending(&self) -> Result<u64, StoreError> {
        Ok(self.state().due.len() as u64)
    }

    async fn cooldown_until(&self) -> Result<EpochMillis, StoreError> {
        Ok(self.state().cooldown_until)
    }

    async fn extend_cooldown(&self, until: EpochMillis, _wait: Duration) -> Result<(), StoreError> {
        let mut state = self.state();
        state.cooldown_until = state.cooldown_until.max(until);
        Ok(())
    }
}

static CLAIM: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/outbox_claim.lua")));
static EXTEND_COOLDOWN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/outbox_extend_cooldown.lua")));

/// The outbox in Redis, over a connection made on first use.
#[derive(Debug, Clone)]
pub struct RedisOutbox {
    link: Arc<RedisLink>,
    pending_key: String,
    cooldown_key: String,
}

impl RedisOutbox {
    /// Keys `<prefix>:pending` and `<prefix>:cooldown_until` (see the module docs).
    pub fn new(link: Arc<RedisLink>, prefix: &str) -> RedisOutbox {
        RedisOutbox {
            link,
            pending_key: format!("{prefix}:pending"),
            cooldown_key: format!("{prefix}:cooldown_until"),
        }
    }

    async fn connection(&self) -> Result<redis::aio::ConnectionManager, StoreError> {
        Ok(self.link.get().await?)
    }
}

#[async_trait]
impl OutboxStore for RedisOutbox {
    async fn push(&self, members: &[String], not_before: EpochMillis) -> Result<(), StoreError> {
        if members.is_empty() {
            return Ok(());
        }
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(&self.pending_key);
        for member in members {
            zadd.arg(not_before.as_millis()).arg(member);
        }
        let mut conn = self.connection().await?;
        zadd.query_async::<()>(&mut conn).await?;
        Ok(())
    }

    async fn claim_due(
        &self,
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Result<Option<String>, StoreError> {
        let mut conn = self.connection().await?;
        Ok(CLAIM
            .key(&self.pending_key)
            .arg(now.as_millis())
            .arg(hold_until.as_millis())
            .invoke_async(&mut conn)
            .await?)
    }

    async fn remove(&self, member: &str) -> Result<(), StoreError> {
        let mut conn = self.connection().await?;
        redis::cmd("ZREM")
            .arg(&self.pending_key)
            .arg(member)
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }

    async fn reschedule(
        &self,
        member: &str,
        next: &str,
        not_before: EpochMillis,
    ) -> Result<(), StoreError> {
        let mut conn = self.connection().await?;
        redis::pipe()
            .atomic()
            .zrem(&self.pending_key, member)
            .ignore()
            .zadd(&self.pending_key, next, not_before.as_millis())
            .ignore()
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }

    async fn pending(&self) -> Result<u64, StoreError> {
        let mut conn = self.connection().await?;
        Ok(redis::cmd("ZCARD")
            .arg(&self.pending_key)
            .query_async(&mut conn)
            .await?)
    }

    async fn cooldown_until(&self) -> Result<EpochMillis, StoreError> {
        let mut conn = self.connection().await?;
        let until: Option<u64> = redis::cmd("GET")
            .arg(&self.cooldown_key)
            .query_async(&mut conn)
            .await?;
        Ok(EpochMillis(until.unwrap_or(0)))
    }

    async fn extend_cooldown(&self, until: EpochMillis, wait: Duration) -> Result<(), StoreError> {
        let ttl_ms = u64::try_from(wait.as_millis())
            .unwrap_or(u64::MAX)
            .max(1_000);
        let mut conn = self.connection().await?;
        EXTEND_COOLDOWN
            .key(&self.cooldown_key)
            .arg(until.as_millis())
            .arg(ttl_ms)
            .invoke_async::<()>(&mut conn)
            .await?;
        Ok(())
    }
}
