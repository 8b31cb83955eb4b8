//! The in-memory [`ControlStore`]: one process's controls, with the Redis backend's
//! semantics (expiry audited when read, the audit capped at [`AUDIT_CAP`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use super::{
    AUDIT_CAP, AuditEntry, AuditRecord, ControlError, ControlKey, ControlStore, PRODUCT_ACTOR,
    Setting,
};
use crate::clock::EpochMillis;

#[derive(Debug, Default)]
pub struct MemoryControls {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    settings: BTreeMap<ControlKey, Setting>,
    audit: VecDeque<AuditRecord>,
    /// Stream ids are `<ms>-<seq>` as in Redis: the sequence within one millisecond.
    last_id: (u64, u64),
    /// Entries the cap dropped.
    trimmed: u64,
}

impl MemoryControls {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn append(&mut self, entry: AuditEntry) {
        let ms = entry.at.0.max(self.last_id.0);
        let seq = if ms == self.last_id.0 {
            self.last_id.1 + 1
        } else {
            0
        };
        self.last_id = (ms, seq);
        self.audit.push_back(AuditRecord {
            id: format!("{ms}-{seq}"),
            entry,
        });
        while self.audit.len() > AUDIT_CAP {
            self.audit.pop_front();
            self.trimmed += 1;
        }
    }
}

#[async_trait]
impl ControlStore for MemoryControls {
    async fn settings(
        &self,
        now: EpochMillis,
    ) -> Result<BTreeMap<ControlKey, Setting>, ControlError> {
        let mut state = self.state();
        let ended: Vec<ControlKey> = state
            .settings
            .iter()
            .filter(|(_, s)| !s.holds_at(now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in ended {
            if let Some(setting) = state.settings.remove(&key) {
                let entry = expired_entry(&key, &setting, now);
                state.append(entry);
            }
        }
        Ok(state.settings.clone())
    }

    async fn change(
        &self,
        key: Option<&ControlKey>,
        setting: Option<&Setting>,
        audit: &AuditEntry,
    ) -> Result<(), ControlError> {
        let mut state = self.state();
        if let Some(key) = key {
            match setting {
                Some(setting) => {
                    state.settings.insert(key.clone(), setting.clone());
                }
                None => {
                    state.settings.remove(key);
                }
            }
        }
        state.append(audit.clone());
        Ok(())
    }

    async fn audit_trimmed(&self) -> Result<u64, ControlError> {
        Ok(self.state().trimmed)
    }

    async fn audit(&self, limit: usize) -> Result<Vec<AuditRecord>, ControlError> {
        Ok(self
            .state()
            .audit
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect())
    }
}

/// The audit entry of a setting that ended by itself (the Redis script writes the same).
pub fn expired_entry(key: &ControlKey, setting: &Setting, now: EpochMillis) -> AuditEntry {
    AuditEntry {
        at: now,
        by: PRODUCT_ACTOR.to_owned(),
        action: "expired".to_owned(),
        target: key.to_string(),
        detail: format!(
            "set by {} at {}, until {}",
            setting.by,
            setting.at,
            setting.until.unwrap_or(now)
        ),
        source: PRODUCT_ACTOR.to_owned(),
    }
}
