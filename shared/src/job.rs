//! A unit of LLM work: which summary of which ticket version, for which tier, by when.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::severity::Severity;
use crate::ticket_id::TicketId;
use crate::tokens::Tokens;

/// The summaries stormgate produces of a ticket. (A region's executive roll-up is not a
/// ticket's summary: see [`crate::region_rollup`].)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryKind {
    /// Five sentences for the engineer working the ticket.
    Technician,
    /// Plain-language status for affected customers; scrubbed of internals.
    Customer,
}

impl SummaryKind {
    pub const ALL: [SummaryKind; 2] = [SummaryKind::Technician, SummaryKind::Customer];

    pub fn as_str(self) -> &'static str {
        match self {
            SummaryKind::Technician => "technician",
            SummaryKind::Customer => "customer",
        }
    }
}

impl fmt::Display for SummaryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SummaryKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "technician" => Ok(SummaryKind::Technician),
            "customer" => Ok(SummaryKind::Customer),
            other => Err(format!("unknown summary kind {other:?}")),
        }
    }
}

/// Where a summary comes from. Premium and Standard are two Azure OpenAI deployments of
/// different models, hence separate quota pools; Extractive spends no tokens at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    Premium,
    Standard,
    Extractive,
}

impl Tier {
    pub const LLM: [Tier; 2] = [Tier::Premium, Tier::Standard];

    /// The tier a job spills to when this one cannot serve it before its deadline.
    pub fn spill(self) -> Tier {
        match self {
            Tier::Premium => Tier::Standard,
            Tier::Standard | Tier::Extractive => Tier::Extractive,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Premium => "premium",
            Tier::Standard => "standard",
            Tier::Extractive => "extractive",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "premium" => Ok(Tier::Premium),
            "standard" => Ok(Tier::Standard),
            "extractive" => Ok(Tier::Extractive),
            other => Err(format!("unknown tier {other:?}")),
        }
    }
}

/// When a queued job may use the LLM (the tier table's entry, [`crate::tier_table`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmUse {
    /// Whenever its tier admits it.
    #[default]
    Always,
    /// In this tier only while the tier is calm: while its tokens are contested the
    /// dispatcher moves the job down to the next tier ([`Tier::spill`]: premium to
    /// standard, where it is served like any job, standard to the extractive summary).
    WhenCalm(Tier),
    /// Never: the dispatcher settles it with the extractive summary when it leases it.
    Never,
}

impl LlmUse {
    pub fn is_always(&self) -> bool {
        *self == LlmUse::Always
    }

    /// Whether a job leased from `tier` may use the LLM there only while it is calm.
    pub fn only_when_calm_in(&self, tier: Tier) -> bool {
        *self == LlmUse::WhenCalm(tier)
    }
}

/// Identity of a job: one summary kind of one ticket version. Re-enqueueing the same
/// id is a no-op, which is what makes at-least-once delivery safe.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobId {
    pub ticket: TicketId,
    pub version: u64,
    pub kind: SummaryKind,
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.ticket, self.version, self.kind)
    }
}

/// A queued request for one LLM summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub id: JobId,
    /// The human ticket number (`INC0012345`), for logs and prompts.
    pub number: String,
    /// The routing severity: what the deadline and the tier were chosen by.
    pub severity: Severity,
    /// The severity the job queues and ages at within its tier, when it is not `severity`
    /// ([`crate::routing::Routing::queue_rank`]): a lifted technician summary queues at
    /// ServiceNow's priority, a customer notice one level below its routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_rank: Option<Severity>,
    pub tier: Tier,
    /// When the job may use the LLM (the tier table's entry).
    #[serde(default, skip_serializing_if = "LlmUse::is_always")]
    pub llm: LlmUse,
    /// Upper bound of the prompt's tokens, as the governor will charge it.
    pub prompt_tokens: Tokens,
    /// The `max_tokens` the call will set (its kind's prompt template's); charged in full at
    /// admission, as Azure does.
    pub max_output_tokens: Tokens,
    pub enqueued_at: EpochMillis,
    /// After this the job spills to the next tier.
    pub deadline: EpochMillis,
    /// Jobs sharing a key (same outage) may be served by one LLM call.
    pub coalesce_key: Option<String>,
    pub region: Option<String>,
    /// Not served first of a group before this instant, though it joins any group of its
    /// coalescing key leased earlier: the hold gives an outage's related tickets time to
    /// arrive and share one call. Only a queued job is held; one released or reclaimed
    /// after a lease is served at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_until: Option<EpochMillis>,
}

impl Job {
    /// The severity the job is ordered by in its tier's queue.
    pub fn rank(&self) -> Severity {
        self.queue_rank.unwrap_or(self.severity)
    }
}
