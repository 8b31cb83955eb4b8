//! A stored executive roll-up of one region: what the read API serves and what the
//! next roll-up compares its counts against.
//!
//! It is stored as the JSON a ticket's summary has (`ticket` the region's key, `number`
//! the region's name, `kind` `rollup`, the counts as `input`), the layout roll-ups have
//! always had, so roll-ups written before and after this type read alike.

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::job::Tier;
use crate::region_key::RegionKey;
use crate::summary::{EXTRACTIVE_MODEL, standing_of};
use crate::tokens::Tokens;

/// One roll-up of one region. Its version is its creation time, so the newest wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "StoredRollup", try_from = "StoredRollup")]
pub struct RegionRollup {
    pub region: RegionKey,
    pub version: u64,
    pub text: String,
    pub tier: Tier,
    /// Deployment model name, or [`EXTRACTIVE_MODEL`].
    pub model: String,
    /// True when the model could not be had and the text is the extractive roll-up.
    pub degraded: bool,
    pub tokens_used: Tokens,
    pub created_at: EpochMillis,
    /// Prompt template version, for a roll-up the model wrote.
    pub prompt_version: Option<String>,
    /// The counts the roll-up was built from (`open`, `by_severity`, `by_state`, `trend`).
    pub facts: serde_json::Value,
}

impl RegionRollup {
    /// A roll-up written by `model` on `tier`'s deployment with `prompt_version`.
    pub fn llm(
        region: RegionKey,
        created_at: EpochMillis,
        text: String,
        tier: Tier,
        model: &str,
        tokens_used: Tokens,
        prompt_version: &str,
    ) -> RegionRollup {
        RegionRollup {
            region,
            version: created_at.as_millis(),
            text,
            tier,
            model: model.to_owned(),
            degraded: false,
            tokens_used,
            created_at,
            prompt_version: Some(prompt_version.to_owned()),
            facts: serde_json::Value::Null,
        }
    }

    /// The extractive roll-up standing in for one the model could not write.
    pub fn fallback(region: RegionKey, created_at: EpochMillis, text: String) -> RegionRollup {
        RegionRollup {
            region,
            version: created_at.as_millis(),
            text,
            tier: Tier::Extractive,
            model: EXTRACTIVE_MODEL.to_owned(),
            degraded: true,
            tokens_used: Tokens::ZERO,
            created_at,
            prompt_version: None,
            facts: serde_json::Value::Null,
        }
    }

    /// The same roll-up, recording the counts it was built from.
    pub fn with_facts(self, facts: serde_json::Value) -> RegionRollup {
        RegionRollup { facts, ..self }
    }

    /// How it ranks against a roll-up of the same version, as summaries do (see
    /// [`crate::summary::standing`]).
    pub fn standing(&self) -> u8 {
        standing_of(self.tier, self.degraded)
    }

    /// Whether this roll-up should replace `current`: newer wins, then standing.
    pub fn replaces(&self, current: &RegionRollup) -> bool {
        if self.version != current.version {
            return self.version > current.version;
        }
        self.standing() > current.standing()
    }
}

/// The only kind a stored roll-up names.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum RollupKind {
    #[serde(rename = "rollup")]
    Rollup,
}

/// A roll-up as stored: the summary layout, field for field.
#[derive(Serialize, Deserialize)]
struct StoredRollup {
    ticket: String,
    number: String,
    version: u64,
    kind: RollupKind,
    text: String,
    tier: Tier,
    model: String,
    degraded: bool,
    tokens_used: Tokens,
    created_at: EpochMillis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prompt_version: Option<String>,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    input: serde_json::Value,
}

impl From<RegionRollup> for StoredRollup {
    fn from(r: RegionRollup) -> StoredRollup {
        StoredRollup {
            ticket: r.region.as_str().to_owned(),
            number: r.region.name().to_owned(),
            version: r.version,
            kind: RollupKind::Rollup,
            text: r.text,
            tier: r.tier,
            model: r.model,
            degraded: r.degraded,
            tokens_used: r.tokens_used,
            created_at: r.created_at,
            prompt_version: r.prompt_version,
            input: r.facts,
        }
    }
}

impl TryFrom<StoredRollup> for RegionRollup {
    type Error = String;

    /// A stored roll-up whose key is not its region's was written under another key.
    fn try_from(s: StoredRollup) -> Result<RegionRollup, String> {
        let region = RegionKey::of(&s.number);
        if region.as_str() != s.ticket {
            return Err(format!(
                "roll-up of region {:?} stored with key {}",
                s.number, s.ticket
            ));
        }
        Ok(RegionRollup {
            region,
            version: s.version,
            text: s.text,
            tier: s.tier,
            model: s.model,
            degraded: s.degraded,
            tokens_used: s.tokens_used,
            created_at: s.created_at,
            prompt_version: s.prompt_version,
            facts: s.input,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roll_up_is_stored_in_the_layout_roll_ups_always_had() {
        let rollup = RegionRollup::fallback(
            RegionKey::of("North"),
            EpochMillis(1_800_000_000_000),
            "North: 3 open tickets.".into(),
        )
        .with_facts(serde_json::json!({"open": 3}));
        let stored = serde_json::to_value(&rollup).unwrap();
        assert_eq!(
            stored,
            serde_json::json!({
                "ticket": "642a9f4e3ef8bd6689c62e008bee52d0",
                "number": "North",
                "version": 1_800_000_000_000_u64,
                "kind": "rollup",
                "text": "North: 3 open tickets.",
                "tier": "extractive",
                "model": "extractive",
                "degraded": true,
                "tokens_used": 0,
                "created_at": 1_800_000_000_000_u64,
                "input": {"open": 3},
            })
        );
        let back: RegionRollup = serde_json::from_value(stored).unwrap();
        assert_eq!(back, rollup);
    }

    #[test]
    fn a_stored_roll_up_under_another_regions_key_is_refused() {
        let mut stored = serde_json::to_value(RegionRollup::fallback(
            RegionKey::of("North"),
            EpochMillis(1),
            "x".into(),
        ))
        .unwrap();
        stored["number"] = "South".into();
        assert!(serde_json::from_value::<RegionRollup>(stored).is_err());
    }
}
