//! `stormgate status`: the storm console in a terminal, against the handler's Redis.
//!
//! It reads what `GET /api/status` reads (the store, the governor's ledger, the signal
//! series, the controls) straight from Redis, with the deployments, prices and deadlines
//! the fleet's `dispatch` tick publishes there, and redraws every `--interval` seconds
//! until interrupted (plain text: the screen is cleared between frames on a terminal).
//! `--once` prints one frame, `--json` the status document itself.

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use stormgate_shared::clock::Clock;
use stormgate_shared::controls::ControlStore;
use stormgate_shared::dispatch_policy::DispatchConfig;
use stormgate_shared::governor::Governor;
use stormgate_shared::signals::collect::{StatusInputs, collect};
use stormgate_shared::signals::status::{AUDIT_SHOWN, DeploymentState, Status};
use stormgate_shared::signals::verdict::human;
use stormgate_shared::signals::{DeploymentConfig, FleetConfig, SignalStore};
use stormgate_shared::store::Store;

use stormgate_handlers::config::{RedisAuth, RedisSettings};
use stormgate_handlers::lazy_store::ConnectStore;
use stormgate_handlers::redis_connector::{NAMESPACE, RedisConnector};
use stormgate_handlers::secrets::Secret;
use stormgate_handlers::servicenow::WorkNoteOutbox;
use stormgate_handlers::system_clock::SystemClock;

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The handler's Redis (its STORMGATE_REDIS_URL): `redis://[user:password@]host:port`.
    #[arg(long, value_name = "URL")]
    pub redis: String,
    /// The key namespace the handler writes under.
    #[arg(long, default_value = NAMESPACE)]
    pub namespace: String,
    /// Seconds between frames.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub interval: u64,
    /// Print one frame and exit.
    #[arg(long)]
    pub once: bool,
    /// Print the status document (`GET /api/status`'s JSON) once and exit.
    #[arg(long)]
    pub json: bool,
}

/// Everything the console reads, connected to the handler's Redis.
pub struct Fleet {
    pub store: Arc<dyn Store>,
    pub signals: Arc<dyn SignalStore>,
    pub controls: Arc<dyn ControlStore>,
    pub governor: Governor,
    pub config: FleetConfig,
    /// The ServiceNow work-note outbox's keys (empty when write-back is off).
    pub outbox: WorkNoteOutbox,
}

impl Fleet {
    /// Connects through the handler's own connector and reads the published
    /// configuration; an error when no `dispatch` tick has published one yet.
    pub async fn connect(url: &str, namespace: &str) -> anyhow::Result<Fleet> {
        let settings = RedisSettings {
            url: Secret::new(url.to_owned()),
            auth: RedisAuth::Url,
        };
        let connector = RedisConnector::with_namespace(settings, namespace);
        let store = connector
            .connect()
            .await
            .map_err(|e| anyhow::anyhow!("--redis: {e}"))?;
        let signals = connector.signals();
        let config = signals
            .config()
            .await
            .map_err(|e| anyhow::anyhow!("--redis: {e}"))?
            .context(
                "no configuration is published in this Redis: no `dispatch` tick of this \
                 namespace has run yet (or --namespace is not the handler's)",
            )?;
        let governor = Governor::new(
            connector.ledger(),
            config.policy,
            config.deployments.iter().map(DeploymentConfig::budget),
        );
        Ok(Fleet {
            store,
            signals,
            controls: connector.controls(),
            outbox: WorkNoteOutbox::new(connector.link(), &connector.key("servicenow")),
            governor,
            config,
        })
    }

    /// The status now, as `GET /api/status` answers it.
    pub async fn status(&self, clock: &dyn Clock) -> anyhow::Result<Status> {
        let now = clock.now();
        let controls = self.controls.state(now).await?;
        let governor = self.governor.with_controls(&controls, now);
        let audit = self.controls.audit(AUDIT_SHOWN).await?;
        let audit_trimmed = self.controls.audit_trimmed().await?;
        let work_notes_in_outbox = self
            .outbox
            .pending()
            .await
            .map_err(|e| anyhow::anyhow!("the ServiceNow outbox: {e}"))?;
        Ok(collect(&StatusInputs {
            store: self.store.as_ref(),
            governor: &governor,
            signals: self.signals.as_ref(),
            controls: &controls,
            audit: &audit,
            audit_trimmed,
            work_notes_in_outbox,
            config: &self.config,
            aging: DispatchConfig::default().aging(),
            now,
        })
        .await?)
    }
}

pub async fn run(args: StatusArgs) -> anyhow::Result<()> {
    let fleet = Fleet::connect(&args.redis, &args.namespace).await?;
    let clock = SystemClock;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&fleet.status(&clock).await?)?
        );
        return Ok(());
    }
    let terminal = std::io::stdout().is_terminal();
    loop {
        let frame = match fleet.status(&clock).await {
            Ok(status) => render(&status),
            Err(error) => format!("status unavailable: {error:#}\n"),
        };
        if terminal && !args.once {
            // Home and clear: one frame at a time.
            print!("\x1b[H\x1b[2J");
        }
        print!("{frame}");
        if args.once {
            return Ok(());
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(args.interval)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

fn ms(v: Option<u64>) -> String {
    v.map_or("-".to_owned(), human)
}

/// One frame of the terminal console.
pub fn render(status: &Status) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "stormgate  {}  [{}] {}",
        status.at_utc,
        status.verdict.level.as_str().to_uppercase(),
        status.verdict.text
    );
    let i = &status.ingest;
    let _ = writeln!(
        out,
        "\ningest     {} events/min  {} accepted  {} skipped  {} dead-lettered   lag p50 {}  max {}",
        i.events_per_minute,
        i.accepted_per_minute,
        i.skipped_per_minute,
        i.dead_lettered_per_minute,
        ms(i.lag.p50_ms),
        ms(i.lag.max_ms)
    );
    for p in &i.lag.partitions {
        let _ = writeln!(
            out,
            "  {} [{}]  {} records  p50 {}  max {}  ({} ago)",
            p.lag.topic,
            p.lag.partition,
            p.lag.records,
            human(p.lag.p50_ms),
            human(p.lag.max_ms),
            human(p.age_ms)
        );
    }
    let _ = writeln!(
        out,
        "\nseverity   queued   held  in flight  oldest      deadline   behind"
    );
    for s in &status.severities {
        let _ = writeln!(
            out,
            "{:<9}{:>8}{:>7}{:>11}  {:<11} {:<10} {}",
            s.severity.as_str(),
            s.queued,
            s.held,
            s.in_flight,
            ms(s.oldest_age_ms),
            human(s.deadline_ms),
            if s.behind_ms > 0 {
                human(s.behind_ms)
            } else {
                "-".to_owned()
            }
        );
    }
    let _ = writeln!(out, "\ndeployments");
    for d in &status.deployments {
        let state = match &d.state {
            DeploymentState::Ok => "ok".to_owned(),
            DeploymentState::CoolingDown { until } => format!("cooling down until {until}"),
            DeploymentState::Down { until } => format!("DOWN until {until}"),
            DeploymentState::MarkedDown { mark } => format!("MARKED DOWN by {}", mark.by),
        };
        let _ = writeln!(
            out,
            "  {} {} ({}): {state}{}{}",
            d.tier,
            d.deployment,
            d.model,
            if d.paused { ", PAUSED" } else { "" },
            if d.extractive_only {
                ", EXTRACTIVE ONLY"
            } else {
                ""
            },
        );
        let _ = writeln!(
            out,
            "    tokens {}/{} a minute (TPM {}{}), requests {}/min (RPM {}), window {}/{} tokens {}/{} requests",
            d.minute_tokens,
            d.minute_token_limit,
            d.tpm,
            if d.tpm_override.is_some() {
                " overridden"
            } else {
                ""
            },
            d.requests_per_minute,
            d.rpm,
            d.window.tokens,
            d.window.token_limit,
            d.window.requests,
            d.window.request_limit
        );
        let _ = writeln!(
            out,
            "    429s {}/min ({} total), spilled {}/min, today {} + {} tokens = ${:.2}",
            d.throttles_per_minute,
            d.throttles_total,
            d.spilled_per_minute,
            d.today.prompt_tokens,
            d.today.completion_tokens,
            d.today.spend_usd
        );
    }
    let stored: Vec<String> = status
        .summaries
        .stored_per_minute
        .iter()
        .map(|s| format!("{} {} {}", s.count, s.tier, s.kind))
        .collect();
    let _ = writeln!(
        out,
        "\nsummaries  {}/min   notices {}/min ({} waiting)   work notes {}/min ({} waiting)",
        if stored.is_empty() {
            "none".to_owned()
        } else {
            stored.join(", ")
        },
        status.sinks.notices.delivered_per_minute,
        status.sinks.notices.waiting,
        status.sinks.work_notes.delivered_per_minute,
        status.sinks.work_notes.waiting
    );
    let _ = writeln!(
        out,
        "dead letters {} (cap {}, {} trimmed){}",
        status.dead_letters.entries,
        status.dead_letters.cap,
        status.dead_letters.trimmed_total,
        status.redis.map_or(String::new(), |r| format!(
            "   Redis {} MiB{}",
            r.used_memory / (1024 * 1024),
            r.used_memory_percent
                .map_or(String::new(), |p| format!(" ({p} % of maxmemory)"))
        ))
    );
    for q in &status.queues {
        let _ = writeln!(
            out,
            "\n{} queue: {} pending, {} held, {} leased",
            q.tier, q.pending, q.held, q.leased
        );
        for job in q.top.iter().take(5) {
            let due = if job.due_in_ms < 0 {
                format!("{} late", human(job.due_in_ms.unsigned_abs()))
            } else {
                format!("due in {}", human(job.due_in_ms.unsigned_abs()))
            };
            let _ = writeln!(
                out,
                "  {} {} {}  waited {}  {due}",
                job.severity,
                job.number,
                job.kind,
                human(job.age_ms)
            );
        }
    }
    if !status.audit.is_empty() {
        let _ = writeln!(out, "\naudit (latest first)");
        for r in status.audit.iter().take(5) {
            let e = &r.entry;
            let _ = writeln!(
                out,
                "  {} {} {} {} {}",
                e.at, e.by, e.action, e.target, e.detail
            );
        }
    }
    out
}
