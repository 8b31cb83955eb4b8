//! A stored summary and the facts a reader needs to trust it.

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::job::{SummaryKind, Tier};
use crate::ticket_id::TicketId;
use crate::tokens::Tokens;

/// The model name recorded for summaries that spent no tokens.
pub const EXTRACTIVE_MODEL: &str = "extractive";

/// One summary of one ticket version. The store keeps the latest version per
/// (ticket, kind); writing an older version is a no-op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub ticket: TicketId,
    pub number: String,
    pub version: u64,
    pub kind: SummaryKind,
    pub text: String,
    pub tier: Tier,
    /// Deployment model name, or [`EXTRACTIVE_MODEL`].
    pub model: String,
    /// True when this is a fallback for an LLM summary that could not be had in time.
    pub degraded: bool,
    pub tokens_used: Tokens,
    pub created_at: EpochMillis,
    /// Prompt template version, for LLM summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_version: Option<String>,
    /// What bounding did to the input log (bytes kept/dropped, collapsed repeats).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub input: serde_json::Value,
}

/// How a summary write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PutOutcome {
    Stored,
    /// A newer (or equal, with an LLM over an extractive) version was already stored.
    Superseded,
}

/// Whether `candidate` should replace `current` for the same (ticket, kind).
///
/// Newer versions always win. For the same version the [`standing`] decides, so a
/// late fallback cannot overwrite a finished LLM summary, while a fallback does
/// replace the instant extractive summary: its `degraded` flag tells readers that
/// the LLM summary of this version is not coming.
pub fn replaces(candidate: &Summary, current: &Summary) -> bool {
    if candidate.version != current.version {
        return candidate.version > current.version;
    }
    standing(candidate) > standing(current)
}

/// How summaries of one version rank: the instant extractive summary (0), an
/// extractive fallback after the LLM path gave up (1), an LLM summary (2). Both
/// store backends rank by this one function.
pub fn standing(summary: &Summary) -> u8 {
    match (summary.tier, summary.degraded) {
        (Tier::Extractive, false) => 0,
        (Tier::Extractive, true) => 1,
        (Tier::Standard | Tier::Premium, _) => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(tier: Tier, degraded: bool) -> Summary {
        Summary {
            ticket: format!("{:032x}", 7).parse().unwrap(),
            number: "INC0010007".into(),
            version: 3,
            kind: SummaryKind::Technician,
            text: "Site 7 down.".into(),
            tier,
            model: EXTRACTIVE_MODEL.into(),
            degraded,
            tokens_used: Tokens::ZERO,
            created_at: EpochMillis(1),
            prompt_version: None,
            input: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_degraded_fallback_replaces_the_instant_summary_but_never_an_llm_one() {
        let instant = summary(Tier::Extractive, false);
        let degraded = summary(Tier::Extractive, true);
        let llm = summary(Tier::Premium, false);
        assert!(replaces(&degraded, &instant));
        assert!(!replaces(&instant, &degraded));
        assert!(!replaces(&degraded, &degraded), "idempotent");
        assert!(replaces(&llm, &degraded));
        assert!(!replaces(&degraded, &llm));
    }
}
