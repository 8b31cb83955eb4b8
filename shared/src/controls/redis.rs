//! The fleet's [`ControlStore`] in Redis: reading expires what has ended (and audits it)
//! in one script, every change goes with its audit entry in another.
//!
//! # Key layout (under the store's namespace hash tag `{ns}`)
//!
//! | key                     | type   | content                                              |
//! |-------------------------|--------|------------------------------------------------------|
//! | `{ns}:controls`         | hash   | [`ControlKey`] text → the [`Setting`] (JSON)         |
//! | `{ns}:controls:until`   | zset   | [`ControlKey`] text, scored by the setting's end      |
//! | `{ns}:controls:ends`    | hash   | [`ControlKey`] text → the detail its expiry's audit entry carries |
//! | `{ns}:audit`            | stream | `at`, `by`, `action`, `target`, `detail`, `source`; at most [`AUDIT_CAP`] entries |
//! | `{ns}:audit:trimmed`    | string | entries the cap dropped, counted |
//!
//! Bounds: a setting per control key; the audit stream is trimmed to its cap on each write.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use redis::{Script, Value};

use super::memory::expired_entry;
use super::{
    AUDIT_CAP, AuditEntry, AuditRecord, ControlError, ControlKey, ControlStore, PRODUCT_ACTOR,
    Setting,
};
use crate::clock::EpochMillis;
use crate::redis_link::RedisLink;
use crate::store::redis::Namespace;

static STATE: LazyLock<Script> = LazyLock::new(|| with_audit(include_str!("lua/state.lua")));
static CHANGE: LazyLock<Script> = LazyLock::new(|| with_audit(include_str!("lua/change.lua")));

/// A script with `append_audit` (lua/audit.lua) inserted after its first line marked
/// `-- audit.lua here`, where `key` and `cap` are defined: one copy of the audit's
/// append-and-count for both scripts.
fn with_audit(script: &str) -> Script {
    let helper = include_str!("lua/audit.lua");
    Script::new(&script.replacen("-- audit.lua here\n", helper, 1))
}

/// The Redis control store. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RedisControls {
    link: Arc<RedisLink>,
    prefix: String,
}

impl RedisControls {
    /// Controls under `namespace` (the store's), over `link`.
    pub fn new(link: Arc<RedisLink>, namespace: &Namespace) -> RedisControls {
        RedisControls {
            link,
            prefix: format!("{{{}}}", namespace.as_str()),
        }
    }
}

fn corrupt(what: impl std::fmt::Display) -> ControlError {
    ControlError::Corrupt(what.to_string())
}

#[async_trait]
impl ControlStore for RedisControls {
    async fn settings(
        &self,
        now: EpochMillis,
    ) -> Result<BTreeMap<ControlKey, Setting>, ControlError> {
        let mut connection = self.link.get().await?;
        let pairs: Vec<(String, String)> = STATE
            .arg(&self.prefix)
            .arg(now.0)
            .arg(AUDIT_CAP)
            .arg(PRODUCT_ACTOR)
            .invoke_async(&mut connection)
            .await?;
        pairs
            .into_iter()
            .map(|(field, json)| {
                let key: ControlKey = field.parse().map_err(corrupt)?;
                let setting: Setting = serde_json::from_str(&json).map_err(corrupt)?;
                Ok((key, setting))
            })
            .collect()
    }

    async fn change(
        &self,
        key: Option<&ControlKey>,
        setting: Option<&Setting>,
        audit: &AuditEntry,
    ) -> Result<(), ControlError> {
        let mut invocation = CHANGE.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(AUDIT_CAP)
            .arg(key.map(ToString::to_string).unwrap_or_default());
        match (key, setting) {
            (Some(key), Some(setting)) => {
                invocation
                    .arg(serde_json::to_string(setting).map_err(corrupt)?)
                    .arg(setting.until.map(|u| u.0.to_string()).unwrap_or_default())
                    .arg(expired_entry(key, setting, setting.until.unwrap_or_default()).detail);
            }
            _ => {
                invocation.arg("").arg("").arg("");
            }
        }
        invocation
            .arg(audit.at.0)
            .arg(&audit.by)
            .arg(&audit.action)
            .arg(&audit.target)
            .arg(&audit.detail)
            .arg(&audit.source);
        let mut connection = self.link.get().await?;
        invocation.invoke_async::<String>(&mut connection).await?;
        Ok(())
    }

    async fn audit_trimmed(&self) -> Result<u64, ControlError> {
        let mut connection = self.link.get().await?;
        let trimmed: Option<u64> = redis::cmd("GET")
            .arg(format!("{}:audit:trimmed", self.prefix))
            .query_async(&mut connection)
            .await?;
        Ok(trimmed.unwrap_or(0))
    }

    async fn audit(&self, limit: usize) -> Result<Vec<AuditRecord>, ControlError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut connection = self.link.get().await?;
        let reply: Value = redis::cmd("XREVRANGE")
            .arg(format!("{}:audit", self.prefix))
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(limit.min(AUDIT_CAP))
            .query_async(&mut connection)
            .await?;
        let entries: Vec<(String, Vec<(String, String)>)> =
            redis::from_redis_value(reply).map_err(corrupt)?;
        entries
            .into_iter()
            .map(|(id, fields)| {
                let field = |name: &str| {
                    fields
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                };
                let at = field("at")
                    .parse::<u64>()
                    .map_err(|e| corrupt(format!("audit {id} at: {e}")))?;
                Ok(AuditRecord {
                    id,
                    entry: AuditEntry {
                        at: EpochMillis(at),
                        by: field("by"),
                        action: field("action"),
                        target: field("target"),
                        detail: field("detail"),
                        source: field("source"),
                    },
                })
            })
            .collect()
    }
}
