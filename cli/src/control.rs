//! `stormgate control`: the operators' actions against the handler's Redis, the same as
//! `POST /api/controls` ([`stormgate_shared::control_actions::apply`]): checked,
//! applied and audited (source `cli`), with the operator named by `--by`. The fleet's
//! `dispatch` tick reads the controls once per tick, so a change acts within one tick.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use stormgate_shared::clock::Clock;
use stormgate_shared::control_actions::{ControlAction, ControlContext, ControlRequest, apply};
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::ingest::{IngestContext, IngestPolicy};
use stormgate_shared::job::Tier;

use super::status::Fleet;
use stormgate_handlers::classifier_loader::load_classifier;
use stormgate_handlers::redis_connector::NAMESPACE;
use stormgate_handlers::system_clock::SystemClock;

#[derive(Debug, Args)]
pub struct ControlArgs {
    /// The handler's Redis (its STORMGATE_REDIS_URL): `redis://[user:password@]host:port`.
    #[arg(long, value_name = "URL")]
    pub redis: String,
    /// The key namespace the handler writes under.
    #[arg(long, default_value = NAMESPACE)]
    pub namespace: String,
    /// Who acts: named in the audit.
    #[arg(long)]
    pub by: String,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// Re-submission only: the classifier model file the handler uses, if not the embedded one.
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,
    /// Re-submission only: the handler's STORMGATE_ROUTE_UP_THRESHOLD, if it sets one.
    #[arg(long)]
    pub route_up_threshold: Option<f64>,
    /// Re-submission and re-summarize: the handler's STORMGATE_COALESCE_HOLD_SECONDS.
    #[arg(long, value_name = "SECONDS")]
    pub coalesce_hold_seconds: Option<u64>,
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, Subcommand)]
pub enum Action {
    /// Stop dispatching a tier (its jobs wait) until resumed, or for --minutes.
    Pause {
        tier: Tier,
        #[arg(long)]
        minutes: Option<u64>,
    },
    /// Dispatch a paused tier again.
    Resume { tier: Tier },
    /// Settle a tier's jobs with the extractive summary (no tokens), until ended or for --minutes.
    ForceExtractive {
        tier: Tier,
        #[arg(long)]
        minutes: Option<u64>,
    },
    /// End a tier's extractive-only mode.
    EndExtractive { tier: Tier },
    /// Admit nothing to a deployment (its work spills), until marked up or for --minutes.
    MarkDown {
        deployment: DeploymentName,
        #[arg(long)]
        minutes: Option<u64>,
    },
    /// End a down mark, and any cooldown or down time a 429 set.
    MarkUp { deployment: DeploymentName },
    /// Govern a deployment by another TPM for --minutes.
    OverrideTpm {
        deployment: DeploymentName,
        tpm: u64,
        #[arg(long)]
        minutes: u64,
    },
    /// Govern a deployment with another headroom (0 to 0.9) for --minutes.
    OverrideHeadroom {
        deployment: DeploymentName,
        headroom: f64,
        #[arg(long)]
        minutes: u64,
    },
    /// End a deployment's TPM and headroom overrides now.
    ClearOverrides { deployment: DeploymentName },
    /// Summarize one ticket again now (its sys_id or its number).
    Resummarize { ticket: String },
    /// Re-submit dead letters through ingest (these ids, or the oldest ones).
    ResubmitDeadLetters { ids: Vec<String> },
}

impl Action {
    fn into_action(self) -> ControlAction {
        match self {
            Action::Pause { tier, minutes } => ControlAction::Pause { tier, minutes },
            Action::Resume { tier } => ControlAction::Resume { tier },
            Action::ForceExtractive { tier, minutes } => {
                ControlAction::ForceExtractive { tier, minutes }
            }
            Action::EndExtractive { tier } => ControlAction::EndExtractive { tier },
            Action::MarkDown {
                deployment,
                minutes,
            } => ControlAction::MarkDown {
                deployment,
                minutes,
            },
            Action::MarkUp { deployment } => ControlAction::MarkUp { deployment },
            Action::OverrideTpm {
                deployment,
                tpm,
                minutes,
            } => ControlAction::OverrideTpm {
                deployment,
                tpm,
                minutes,
            },
            Action::OverrideHeadroom {
                deployment,
                headroom,
                minutes,
            } => ControlAction::OverrideHeadroom {
                deployment,
                headroom,
                minutes,
            },
            Action::ClearOverrides { deployment } => ControlAction::ClearOverrides { deployment },
            Action::Resummarize { ticket } => ControlAction::Resummarize { ticket },
            Action::ResubmitDeadLetters { ids } => ControlAction::ResubmitDeadLetters { ids },
        }
    }
}

pub async fn run(args: ControlArgs) -> anyhow::Result<()> {
    let fleet = Fleet::connect(&args.redis, &args.namespace).await?;
    let classifier = load_classifier(args.model.as_deref(), args.route_up_threshold)
        .map_err(anyhow::Error::msg)?;
    // The handler's ingest policy (`AppState::new`): the default one with its hold.
    let default = IngestPolicy::default();
    let policy = IngestPolicy {
        coalesce_hold: args
            .coalesce_hold_seconds
            .map_or(default.coalesce_hold, Duration::from_secs),
        deadlines: fleet.config.deadlines,
        ..default
    };
    let clock = SystemClock;
    let ingest = IngestContext {
        store: fleet.store.as_ref(),
        clock: &clock,
        classifier: &classifier,
        policy: &policy,
    };
    let ctx = ControlContext {
        controls: fleet.controls.as_ref(),
        store: fleet.store.as_ref(),
        governor: &fleet.governor,
        ingest: Some(&ingest),
        policy: &policy,
        now: clock.now(),
        source: "cli",
    };
    let request = ControlRequest {
        by: args.by.clone(),
        action: args.action.into_action(),
    };
    let outcome = apply(&ctx, &request)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        println!("{}", serde_json::to_string(&outcome)?);
        let audit = fleet.controls.audit(1).await?;
        if let Some(last) = audit.first() {
            let e = &last.entry;
            println!(
                "audited: {} {} {} by {} ({})",
                e.action, e.target, e.detail, e.by, e.source
            );
        }
    }
    Ok(())
}
