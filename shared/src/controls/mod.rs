//! Controls: what the NOC can change while a storm runs, without a redeploy, and the
//! audit of every change.
//!
//! A control is a [`Setting`] under a [`ControlKey`]: a tier paused or forced to the
//! extractive summary, a deployment marked down, a deployment's TPM or headroom
//! overridden. Each may end by itself at `until` (on the product's clock: the store drops
//! it, and records that in the audit, the first time it is read after that instant).
//! The `dispatch` tick reads the controls once ([`ControlStore::settings`], one round
//! trip) and acts on them: [`ControlState::tier`] for the dispatcher
//! ([`crate::dispatcher::dispatch_controlled`]), [`crate::governor::Governor::with_controls`]
//! for admission. One-shot actions (re-summarize a ticket, re-submit dead letters) change
//! no setting; they are audited all the same.
//!
//! Every change goes with its [`AuditEntry`] in one atomic step (a Lua script in Redis),
//! into a stream capped at [`AUDIT_CAP`] entries. [`crate::control_actions`] turns a
//! request (HTTP, command line) into a change after checking it.

pub mod memory;
pub mod redis;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::deployment_name::DeploymentName;
use crate::headroom::Headroom;
use crate::job::Tier;

/// The most audit entries kept; an older one is dropped for each one more.
pub const AUDIT_CAP: usize = 1_000;

/// Who the audit names for changes the product makes itself (an override ending).
pub const PRODUCT_ACTOR: &str = "stormgate";

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("control store unavailable: {0}")]
    Unavailable(String),
    #[error("control store answered something unexpected: {0}")]
    Corrupt(String),
}

impl From<::redis::RedisError> for ControlError {
    fn from(e: ::redis::RedisError) -> Self {
        if matches!(e.kind(), ::redis::ErrorKind::UnexpectedReturnType) {
            ControlError::Corrupt(e.to_string())
        } else {
            ControlError::Unavailable(e.to_string())
        }
    }
}

/// What a setting controls.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ControlKey {
    /// The dispatcher leases nothing from this tier.
    Paused(Tier),
    /// The dispatcher settles this tier's jobs with the extractive summary at once.
    ExtractiveOnly(Tier),
    /// The governor admits nothing to this deployment: its work spills.
    Down(DeploymentName),
    /// The deployment's tokens per minute, instead of the configured ones.
    Tpm(DeploymentName),
    /// The deployment's headroom, instead of the configured one.
    Headroom(DeploymentName),
}

impl fmt::Display for ControlKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlKey::Paused(tier) => write!(f, "tier:{tier}:paused"),
            ControlKey::ExtractiveOnly(tier) => write!(f, "tier:{tier}:extractive_only"),
            ControlKey::Down(d) => write!(f, "deployment:{d}:down"),
            ControlKey::Tpm(d) => write!(f, "deployment:{d}:tpm"),
            ControlKey::Headroom(d) => write!(f, "deployment:{d}:headroom"),
        }
    }
}

impl FromStr for ControlKey {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("not a control: {s:?}");
        let mut parts = s.splitn(3, ':');
        let (scope, name, what) = (parts.next(), parts.next(), parts.next());
        match (scope, name, what) {
            (Some("tier"), Some(tier), Some(what)) => {
                let tier: Tier = tier.parse()?;
                match what {
                    "paused" => Ok(ControlKey::Paused(tier)),
                    "extractive_only" => Ok(ControlKey::ExtractiveOnly(tier)),
                    _ => Err(bad()),
                }
            }
            (Some("deployment"), Some(name), Some(what)) => {
                let d: DeploymentName = name.parse().map_err(|_| bad())?;
                match what {
                    "down" => Ok(ControlKey::Down(d)),
                    "tpm" => Ok(ControlKey::Tpm(d)),
                    "headroom" => Ok(ControlKey::Headroom(d)),
                    _ => Err(bad()),
                }
            }
            _ => Err(bad()),
        }
    }
}

/// One control in force: who set it, when, until when, and its value where it has one
/// (a TPM, a headroom fraction).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setting {
    pub by: String,
    pub at: EpochMillis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<EpochMillis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}

impl Setting {
    /// Whether it still holds at `now`.
    pub fn holds_at(&self, now: EpochMillis) -> bool {
        self.until.is_none_or(|until| until > now)
    }
}

/// An audit entry as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub at: EpochMillis,
    /// The operator (or [`PRODUCT_ACTOR`]).
    pub by: String,
    /// What was done (`pause`, `mark_down`, `override_tpm`, `expired`, ...).
    pub action: String,
    /// What it was done to (a tier, a deployment, a ticket, dead letters).
    pub target: String,
    /// Anything else worth knowing (the value, the time it holds, what came of it).
    pub detail: String,
    /// Where the request came from (`http`, `cli`, `stormgate`).
    pub source: String,
}

/// An audit entry as kept, with its id in the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub id: String,
    #[serde(flatten)]
    pub entry: AuditEntry,
}

/// The controls of one tier.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TierControls {
    pub paused: Option<Setting>,
    pub extractive_only: Option<Setting>,
}

impl TierControls {
    pub fn is_paused(&self) -> bool {
        self.paused.is_some()
    }

    pub fn is_extractive_only(&self) -> bool {
        self.extractive_only.is_some()
    }
}

/// The controls of one deployment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeploymentControls {
    pub down: Option<Setting>,
    pub tpm: Option<Setting>,
    pub headroom: Option<Setting>,
}

impl DeploymentControls {
    /// The overriding TPM, if one is in force.
    pub fn tpm(&self) -> Option<u64> {
        self.tpm
            .as_ref()
            .and_then(|s| s.value)
            .filter(|v| v.is_finite() && *v >= 1.0)
            .map(|v| v as u64)
    }

    /// The overriding headroom, if one is in force (a stored value out of range is ignored).
    pub fn headroom(&self) -> Option<Headroom> {
        self.headroom
            .as_ref()
            .and_then(|s| s.value)
            .and_then(|v| Headroom::new(v).ok())
    }
}

/// Every control in force at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ControlState {
    pub tiers: BTreeMap<Tier, TierControls>,
    pub deployments: BTreeMap<DeploymentName, DeploymentControls>,
}

impl ControlState {
    /// The state the settings in force at `now` make (others are ignored).
    pub fn from_settings(settings: &BTreeMap<ControlKey, Setting>, now: EpochMillis) -> Self {
        let mut state = ControlState::default();
        for (key, setting) in settings.iter().filter(|(_, s)| s.holds_at(now)) {
            let s = Some(setting.clone());
            match key {
                ControlKey::Paused(t) => state.tiers.entry(*t).or_default().paused = s,
                ControlKey::ExtractiveOnly(t) => {
                    state.tiers.entry(*t).or_default().extractive_only = s;
                }
                ControlKey::Down(d) => state.deployments.entry(d.clone()).or_default().down = s,
                ControlKey::Tpm(d) => state.deployments.entry(d.clone()).or_default().tpm = s,
                ControlKey::Headroom(d) => {
                    state.deployments.entry(d.clone()).or_default().headroom = s;
                }
            }
        }
        state
    }

    /// A tier's controls (none when nothing is set).
    pub fn tier(&self, tier: Tier) -> TierControls {
        self.tiers.get(&tier).cloned().unwrap_or_default()
    }

    /// A deployment's controls (none when nothing is set).
    pub fn deployment(&self, deployment: &DeploymentName) -> DeploymentControls {
        self.deployments
            .get(deployment)
            .cloned()
            .unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.tiers.is_empty() && self.deployments.is_empty()
    }
}

/// Where controls and their audit live. See the module docs.
#[async_trait]
pub trait ControlStore: Send + Sync + std::fmt::Debug {
    /// The settings in force at `now`. Settings whose `until` has come are removed, each
    /// with an `expired` audit entry, in the same step.
    async fn settings(
        &self,
        now: EpochMillis,
    ) -> Result<BTreeMap<ControlKey, Setting>, ControlError>;

    /// Sets (`Some`) or clears (`None`) the setting under `key`, if any, and appends
    /// `audit`, atomically.
    async fn change(
        &self,
        key: Option<&ControlKey>,
        setting: Option<&Setting>,
        audit: &AuditEntry,
    ) -> Result<(), ControlError>;

    /// The latest `limit` audit entries, newest first.
    async fn audit(&self, limit: usize) -> Result<Vec<AuditRecord>, ControlError>;

    /// How many audit entries the cap has dropped, ever (oldest first).
    async fn audit_trimmed(&self) -> Result<u64, ControlError>;

    /// The controls in force at `now` (see [`ControlStore::settings`]).
    async fn state(&self, now: EpochMillis) -> Result<ControlState, ControlError> {
        Ok(ControlState::from_settings(&self.settings(now).await?, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_their_field_names() {
        let d: DeploymentName = "gpt-4o".parse().unwrap();
        for key in [
            ControlKey::Paused(Tier::Premium),
            ControlKey::ExtractiveOnly(Tier::Standard),
            ControlKey::Down(d.clone()),
            ControlKey::Tpm(d.clone()),
            ControlKey::Headroom(d),
        ] {
            assert_eq!(key.to_string().parse::<ControlKey>(), Ok(key));
        }
        for bad in [
            "",
            "tier:premium:sleep",
            "tier:gold:paused",
            "deployment:a b:down",
            "x:y:z",
        ] {
            assert!(bad.parse::<ControlKey>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_setting_past_its_end_is_not_in_the_state() {
        let d: DeploymentName = "gpt-4o".parse().unwrap();
        let setting = |until: Option<u64>, value: Option<f64>| Setting {
            by: "alice".into(),
            at: EpochMillis(1),
            until: until.map(EpochMillis),
            value,
        };
        let settings = BTreeMap::from([
            (ControlKey::Paused(Tier::Premium), setting(None, None)),
            (
                ControlKey::Tpm(d.clone()),
                setting(Some(100), Some(5_000.0)),
            ),
            (
                ControlKey::Headroom(d.clone()),
                setting(Some(50), Some(0.3)),
            ),
        ]);
        let state = ControlState::from_settings(&settings, EpochMillis(50));
        assert!(state.tier(Tier::Premium).is_paused());
        assert!(!state.tier(Tier::Standard).is_paused());
        assert_eq!(state.deployment(&d).tpm(), Some(5_000));
        assert_eq!(state.deployment(&d).headroom(), None, "ended at 50");
    }
}
