//! The operators' actions: a request (from `POST /api/controls` or `stormgate control`)
//! checked, applied and audited.
//!
//! Every action names its operator (`by`) and is recorded in the audit stream with what
//! it did, whether it changed a setting (pause, resume, force or end extractive-only, mark
//! a deployment down or up, override or clear a TPM or headroom) or acted once
//! (re-summarize a ticket, re-submit dead letters). A request that cannot apply (an
//! unknown tier or deployment, a value out of range) is refused with a typed error and
//! changes nothing.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::controls::{AuditEntry, ControlError, ControlKey, ControlStore, Setting};
use crate::dead_letters::{ResubmitError, ResubmitReport, Selection, resubmit};
use crate::deployment_name::DeploymentName;
use crate::governor::Governor;
use crate::headroom::Headroom;
use crate::ingest::{IngestContext, IngestPolicy};
use crate::job::Tier;
use crate::resummarize::{ResummarizeError, ResummarizeReport, resummarize};
use crate::store::Store;
use crate::ticket_id::TicketId;
use crate::ticket_number::TicketNumber;

/// The longest a control may be set for, and the most dead letters one request re-submits.
pub const MAX_MINUTES: u64 = 7 * 24 * 60;
pub const MAX_RESUBMIT: usize = 1_000;
/// The most a TPM override may be.
pub const MAX_TPM: u64 = 100_000_000;

/// One action. JSON: `{"action": "pause", "tier": "premium"}` and so on (snake case).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ControlAction {
    /// Lease nothing from the tier until resumed (or for `minutes`).
    Pause {
        tier: Tier,
        #[serde(default)]
        minutes: Option<u64>,
    },
    Resume {
        tier: Tier,
    },
    /// Settle the tier's jobs with the extractive summary, spending no tokens.
    ForceExtractive {
        tier: Tier,
        #[serde(default)]
        minutes: Option<u64>,
    },
    EndExtractive {
        tier: Tier,
    },
    /// Admit nothing to the deployment: its work spills to the next tier.
    MarkDown {
        deployment: DeploymentName,
        #[serde(default)]
        minutes: Option<u64>,
    },
    /// End a down mark, and any cooldown or down time a 429 set.
    MarkUp {
        deployment: DeploymentName,
    },
    /// Govern the deployment by this TPM for `minutes`, then by the configured one again.
    OverrideTpm {
        deployment: DeploymentName,
        tpm: u64,
        minutes: u64,
    },
    /// Govern the deployment with this headroom (0 to 0.9) for `minutes`.
    OverrideHeadroom {
        deployment: DeploymentName,
        headroom: f64,
        minutes: u64,
    },
    /// End the deployment's TPM and headroom overrides now.
    ClearOverrides {
        deployment: DeploymentName,
    },
    /// Summarize one ticket again now (by `sys_id` or number).
    Resummarize {
        ticket: String,
    },
    /// Re-submit dead letters through ingest (these ids, or the oldest ones).
    ResubmitDeadLetters {
        #[serde(default)]
        ids: Vec<String>,
    },
}

/// An action with the operator who asks for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlRequest {
    /// Who asks: named in the audit (1 to 64 printable characters).
    pub by: String,
    #[serde(flatten)]
    pub action: ControlAction,
}

/// Why a request was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ControlRejection {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("internal: {0}")]
    Internal(String),
}

impl From<ControlError> for ControlRejection {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::Unavailable(e) => ControlRejection::Unavailable(e),
            ControlError::Corrupt(e) => ControlRejection::Internal(e),
        }
    }
}

/// What an applied action did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum ControlOutcome {
    /// A setting was set (`setting` present) or cleared.
    Changed {
        control: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        setting: Option<Setting>,
    },
    /// Several settings cleared at once (overrides, a mark up).
    Cleared {
        controls: Vec<String>,
    },
    Resummarized {
        report: ResummarizeReport,
    },
    Resubmitted {
        report: ResubmitReport,
    },
}

/// What applying an action needs.
#[derive(Clone, Copy)]
pub struct ControlContext<'a> {
    pub controls: &'a dyn ControlStore,
    pub store: &'a dyn Store,
    /// The configured governor: the deployments a request may name, and the ledger a
    /// mark up clears.
    pub governor: &'a Governor,
    /// Ingest for re-submitting dead letters (`None`: that action is refused).
    pub ingest: Option<&'a IngestContext<'a>>,
    /// What re-summarized jobs are built with (deadlines, output limits, prompt size).
    pub policy: &'a IngestPolicy,
    pub now: EpochMillis,
    /// Where the request came from, for the audit (`http`, `cli`).
    pub source: &'a str,
}

/// Checks, applies and audits one request.
pub async fn apply(
    ctx: &ControlContext<'_>,
    request: &ControlRequest,
) -> Result<ControlOutcome, ControlRejection> {
    let by = operator(&request.by)?;
    let audit = |action: &str, target: String, detail: String| AuditEntry {
        at: ctx.now,
        by: by.clone(),
        action: action.to_owned(),
        target,
        detail,
        source: ctx.source.to_owned(),
    };
    let setting = |minutes: Option<u64>, value: Option<f64>| -> Result<Setting, ControlRejection> {
        let until = minutes
            .map(|m| checked_minutes(m).map(|d| ctx.now.plus(d)))
            .transpose()?;
        Ok(Setting {
            by: by.clone(),
            at: ctx.now,
            until,
            value,
        })
    };
    match &request.action {
        ControlAction::Pause { tier, minutes } => {
            let key = ControlKey::Paused(llm_tier(*tier)?);
            set(ctx, key, setting(*minutes, None)?, "pause", &audit).await
        }
        ControlAction::ForceExtractive { tier, minutes } => {
            let key = ControlKey::ExtractiveOnly(llm_tier(*tier)?);
            set(
                ctx,
                key,
                setting(*minutes, None)?,
                "force_extractive",
                &audit,
            )
            .await
        }
        ControlAction::MarkDown {
            deployment,
            minutes,
        } => {
            let key = ControlKey::Down(known(ctx, deployment)?);
            set(ctx, key, setting(*minutes, None)?, "mark_down", &audit).await
        }
        ControlAction::OverrideTpm {
            deployment,
            tpm,
            minutes,
        } => {
            if !(1..=MAX_TPM).contains(tpm) {
                return Err(ControlRejection::Invalid(format!(
                    "tpm must be between 1 and {MAX_TPM}, got {tpm}"
                )));
            }
            let key = ControlKey::Tpm(known(ctx, deployment)?);
            let s = setting(Some(*minutes), Some(*tpm as f64))?;
            set(ctx, key, s, "override_tpm", &audit).await
        }
        ControlAction::OverrideHeadroom {
            deployment,
            headroom,
            minutes,
        } => {
            Headroom::new(*headroom).map_err(|e| ControlRejection::Invalid(e.to_string()))?;
            let key = ControlKey::Headroom(known(ctx, deployment)?);
            let s = setting(Some(*minutes), Some(*headroom))?;
            set(ctx, key, s, "override_headroom", &audit).await
        }
        ControlAction::Resume { tier } => {
            let key = ControlKey::Paused(llm_tier(*tier)?);
            clear(ctx, vec![key], "resume", &audit).await
        }
        ControlAction::EndExtractive { tier } => {
            let key = ControlKey::ExtractiveOnly(llm_tier(*tier)?);
            clear(ctx, vec![key], "end_extractive", &audit).await
        }
        ControlAction::MarkUp { deployment } => {
            let deployment = known(ctx, deployment)?;
            ctx.governor
                .clear_throttle(&deployment)
                .await
                .map_err(|e| ControlRejection::Unavailable(e.to_string()))?;
            clear(ctx, vec![ControlKey::Down(deployment)], "mark_up", &audit).await
        }
        ControlAction::ClearOverrides { deployment } => {
            let d = known(ctx, deployment)?;
            let keys = vec![ControlKey::Tpm(d.clone()), ControlKey::Headroom(d)];
            clear(ctx, keys, "clear_overrides", &audit).await
        }
        ControlAction::Resummarize { ticket } => {
            let id = ticket_id(ctx.store, ticket).await?;
            let report = resummarize(ctx.store, ctx.policy, &id, ctx.now)
                .await
                .map_err(|e| match e {
                    ResummarizeError::UnknownTicket(_) => ControlRejection::NotFound(e.to_string()),
                    ResummarizeError::Unreadable(..) => ControlRejection::Internal(e.to_string()),
                    ResummarizeError::Store(e) => ControlRejection::Unavailable(e.to_string()),
                })?;
            let detail = report
                .kinds
                .iter()
                .map(|k| format!("{}: {}", k.kind, outcome_text(k.outcome)))
                .collect::<Vec<_>>()
                .join(", ");
            let target = format!("{} ({}) version {}", report.number, id, report.version);
            record(ctx, None, None, &audit("resummarize", target, detail)).await?;
            Ok(ControlOutcome::Resummarized { report })
        }
        ControlAction::ResubmitDeadLetters { ids } => {
            let ingest = ctx.ingest.ok_or_else(|| {
                ControlRejection::Invalid("dead letters cannot be re-submitted here".into())
            })?;
            let selection = if ids.is_empty() {
                Selection::All
            } else {
                Selection::Ids(ids.clone())
            };
            let report = resubmit(ingest, &selection, MAX_RESUBMIT)
                .await
                .map_err(|e| match e {
                    ResubmitError::Unavailable(e) => ControlRejection::Unavailable(e),
                    ResubmitError::Corrupt(e) => ControlRejection::Internal(e),
                })?;
            let detail = format!(
                "{} re-submitted: {} accepted, {} already stored, {} rejected again, {} skipped, {} kept, {} not found",
                report.resubmitted,
                report.accepted,
                report.duplicate_or_stale,
                report.rejected_again,
                report.skipped,
                report.kept,
                report.not_found.len()
            );
            let target = if ids.is_empty() {
                "dead letters (oldest)".to_owned()
            } else {
                format!("dead letters {}", ids.join(" "))
            };
            let entry = audit("resubmit_dead_letters", target, detail);
            record(ctx, None, None, &entry).await?;
            Ok(ControlOutcome::Resubmitted { report })
        }
    }
}

async fn set(
    ctx: &ControlContext<'_>,
    key: ControlKey,
    setting: Setting,
    action: &str,
    audit: &impl Fn(&str, String, String) -> AuditEntry,
) -> Result<ControlOutcome, ControlRejection> {
    let mut detail = match setting.value {
        Some(value) => format!("value {value}"),
        None => String::new(),
    };
    detail = match setting.until {
        Some(until) if detail.is_empty() => format!("until {until}"),
        Some(until) => format!("{detail} until {until}"),
        None if detail.is_empty() => "until undone".to_owned(),
        None => detail,
    };
    let entry = audit(action, key.to_string(), detail);
    record(ctx, Some(&key), Some(&setting), &entry).await?;
    Ok(ControlOutcome::Changed {
        control: key.to_string(),
        setting: Some(setting),
    })
}

async fn clear(
    ctx: &ControlContext<'_>,
    keys: Vec<ControlKey>,
    action: &str,
    audit: &impl Fn(&str, String, String) -> AuditEntry,
) -> Result<ControlOutcome, ControlRejection> {
    let names: Vec<String> = keys.iter().map(ToString::to_string).collect();
    let (last, rest) = keys
        .split_last()
        .ok_or_else(|| ControlRejection::Internal("nothing to clear".into()))?;
    // Each key is cleared with its own step; the audit entry goes with the last.
    for key in rest {
        let entry = audit(action, key.to_string(), "cleared".to_owned());
        record(ctx, Some(key), None, &entry).await?;
    }
    let entry = audit(action, last.to_string(), "cleared".to_owned());
    record(ctx, Some(last), None, &entry).await?;
    Ok(if names.len() == 1 {
        ControlOutcome::Changed {
            control: names.into_iter().next().unwrap_or_default(),
            setting: None,
        }
    } else {
        ControlOutcome::Cleared { controls: names }
    })
}

/// Makes one change with its audit entry, and logs the entry as a `control` line.
async fn record(
    ctx: &ControlContext<'_>,
    key: Option<&ControlKey>,
    setting: Option<&Setting>,
    entry: &AuditEntry,
) -> Result<(), ControlRejection> {
    ctx.controls.change(key, setting, entry).await?;
    crate::signals::emit::control(entry);
    Ok(())
}

fn outcome_text(outcome: crate::store::ResummarizeOutcome) -> &'static str {
    use crate::store::ResummarizeOutcome::*;
    match outcome {
        Queued => "queued",
        AlreadyLlm => "already summarized by the LLM",
        InFlight => "being summarized now",
        Stale => "a newer version arrived",
    }
}

/// The operator's name, checked.
fn operator(by: &str) -> Result<String, ControlRejection> {
    let by = by.trim();
    if (1..=64).contains(&by.chars().count()) && !by.chars().any(char::is_control) {
        Ok(by.to_owned())
    } else {
        Err(ControlRejection::Invalid(
            "`by` must name the operator: 1 to 64 printable characters".into(),
        ))
    }
}

fn llm_tier(tier: Tier) -> Result<Tier, ControlRejection> {
    if Tier::LLM.contains(&tier) {
        Ok(tier)
    } else {
        Err(ControlRejection::Invalid(format!(
            "only the LLM tiers (premium, standard) have controls, not {tier}"
        )))
    }
}

fn known(
    ctx: &ControlContext<'_>,
    deployment: &DeploymentName,
) -> Result<DeploymentName, ControlRejection> {
    if ctx.governor.budget(deployment).is_some() {
        Ok(deployment.clone())
    } else {
        let known: Vec<String> = ctx
            .governor
            .deployments()
            .map(|b| b.deployment.to_string())
            .collect();
        Err(ControlRejection::NotFound(format!(
            "no deployment {deployment} is configured (configured: {})",
            known.join(", ")
        )))
    }
}

fn checked_minutes(minutes: u64) -> Result<Duration, ControlRejection> {
    if (1..=MAX_MINUTES).contains(&minutes) {
        Ok(Duration::from_secs(minutes * 60))
    } else {
        Err(ControlRejection::Invalid(format!(
            "minutes must be between 1 and {MAX_MINUTES}, got {minutes}"
        )))
    }
}

/// A ticket named by its `sys_id` or its number; not found when no ticket has that number.
pub async fn ticket_id(store: &dyn Store, text: &str) -> Result<TicketId, ControlRejection> {
    if let Ok(id) = text.parse::<TicketId>() {
        return Ok(id);
    }
    let number: TicketNumber =
        text.parse()
            .map_err(|e: crate::ticket_number::TicketNumberParseError| {
                ControlRejection::Invalid(format!("{e}; or a 32-character sys_id"))
            })?;
    store
        .ticket_by_number(&number)
        .await
        .map_err(|e| ControlRejection::Unavailable(e.to_string()))?
        .ok_or_else(|| ControlRejection::NotFound(format!("no ticket numbered {number} is kept")))
}
