//! A stored summary and the facts a reader needs to trust it.

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::job::{JobId, SummaryKind, Tier};
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

/// What every summary says of its subject: which ticket version it summarizes, as what kind, and when it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryOf {
    pub ticket: TicketId,
    /// The human ticket number.
    pub number: String,
    pub version: u64,
    pub kind: SummaryKind,
    pub created_at: EpochMillis,
}

impl SummaryOf {
    /// The summary a job owes, written at `created_at`.
    pub fn job(id: &JobId, number: &str, created_at: EpochMillis) -> SummaryOf {
        SummaryOf {
            ticket: id.ticket.clone(),
            number: number.to_owned(),
            version: id.version,
            kind: id.kind,
            created_at,
        }
    }
}

/// The one way to make each kind of summary, so its tier, model, `degraded` flag and
/// tokens always agree with its [`standing`].
impl Summary {
    /// The zero-token summary written the moment a ticket version is accepted (standing 0).
    pub fn instant(of: SummaryOf, text: String, input: serde_json::Value) -> Summary {
        Summary::extractive(of, text, false, input)
    }

    /// The zero-token summary standing in for an LLM summary that could not be had
    /// (standing 1): `degraded` tells readers the LLM one of this version is not coming.
    pub fn fallback(of: SummaryOf, text: String) -> Summary {
        Summary::extractive(of, text, true, serde_json::Value::Null)
    }

    /// A summary written by `model` on `tier`'s deployment with `prompt_version`, which
    /// used `tokens_used` of the call's tokens (standing 2).
    pub fn llm(
        of: SummaryOf,
        text: String,
        tier: Tier,
        model: &str,
        tokens_used: Tokens,
        prompt_version: &str,
    ) -> Summary {
        Summary {
            ticket: of.ticket,
            number: of.number,
            version: of.version,
            kind: of.kind,
            text,
            tier,
            model: model.to_owned(),
            degraded: false,
            tokens_used,
            created_at: of.created_at,
            prompt_version: Some(prompt_version.to_owned()),
            input: serde_json::Value::Null,
        }
    }

    /// The same summary, recording what it was written from.
    pub fn with_input(self, input: serde_json::Value) -> Summary {
        Summary { input, ..self }
    }

    fn extractive(
        of: SummaryOf,
        text: String,
        degraded: bool,
        input: serde_json::Value,
    ) -> Summary {
        Summary {
            ticket: of.ticket,
            number: of.number,
            version: of.version,
            kind: of.kind,
            text,
            tier: Tier::Extractive,
            model: EXTRACTIVE_MODEL.to_owned(),
            degraded,
            tokens_used: Tokens::ZERO,
            created_at: of.created_at,
            prompt_version: None,
            input,
        }
    }
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
    standing_of(summary.tier, summary.degraded)
}

/// The [`standing`] of a text written on `tier`, `degraded` or not (roll-ups rank so too).
pub fn standing_of(tier: Tier, degraded: bool) -> u8 {
    match (tier, degraded) {
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
