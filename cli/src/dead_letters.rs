//! `stormgate dead-letters`: lists the events `classify` rejected, and re-submits them.
//!
//! Listing reads the dead-letter stream in Redis; re-submission is
//! [`stormgate_shared::dead_letters::resubmit`], exactly what `POST /api/dead-letters`
//! runs: each event goes through ingest again with its CDC headers and Kafka coordinates,
//! and its entry leaves the stream only once the event is stored. An event rejected again
//! stays, under a new entry with the new reason.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use stormgate_shared::dead_letters::{
    Resubmission, ResubmitReport, ResubmittedEntry, Selection, resubmit,
};
use stormgate_shared::ingest::{IngestContext, IngestPolicy};
use stormgate_shared::store::{DeadLetter, Store};
use stormgate_shared::tier_table::TierTable;

use stormgate_handlers::classifier_loader::load_classifier;
use stormgate_handlers::config::{RedisAuth, RedisSettings};
use stormgate_handlers::functions::dead_letters::{Entry, MAX_ENTRIES};
use stormgate_handlers::lazy_store::ConnectStore;
use stormgate_handlers::redis_connector::{NAMESPACE, RedisConnector};
use stormgate_handlers::secrets::Secret;
use stormgate_handlers::system_clock::SystemClock;

/// Characters of an event's value shown in the listing.
const EXCERPT_CHARS: usize = 160;
/// Entries listed when `--limit` is not given.
const DEFAULT_LIST_LIMIT: usize = 100;

#[derive(Debug, Args)]
pub struct DeadLettersArgs {
    /// The handler's Redis (its STORMGATE_REDIS_URL): `redis://[user:password@]host:port`.
    #[arg(long, global = true, value_name = "URL")]
    pub redis: Option<String>,
    /// The key namespace the handler writes under.
    #[arg(long, global = true, default_value = NAMESPACE)]
    pub namespace: String,
    /// Entries looked at, oldest first (listing: 100; re-submission: 1000).
    #[arg(long, global = true)]
    pub limit: Option<usize>,
    /// Print JSON (the `dead-letters` HTTP function's shapes) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// The classifier model file the handler uses (its STORMGATE_CLASSIFIER_MODEL_PATH);
    /// default: the embedded model.
    #[arg(long, global = true, value_name = "PATH")]
    pub model: Option<PathBuf>,
    /// The handler's STORMGATE_ROUTE_UP_THRESHOLD, if it sets one.
    #[arg(long, global = true, value_parser = probability)]
    pub route_up_threshold: Option<f64>,
    /// The handler's STORMGATE_COALESCE_HOLD_SECONDS, if it sets one (default 300).
    #[arg(long, global = true, value_name = "SECONDS")]
    pub coalesce_hold_seconds: Option<u64>,
    /// The handler's STORMGATE_TIER_TABLE, if it sets one (default: the seed's table).
    #[arg(long, global = true, value_name = "TABLE")]
    pub tier_table: Option<TierTable>,
    #[command(subcommand)]
    pub action: Option<DeadLetterAction>,
}

#[derive(Debug, Subcommand)]
pub enum DeadLetterAction {
    /// List dead letters, oldest first: id, time, Kafka coordinates, reason, value excerpt (the default).
    List,
    /// Run the given entries (or all) through ingest again; stored events leave the stream.
    Resubmit {
        /// Entry ids, as listed.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        ids: Vec<String>,
        /// Every entry among the oldest `--limit`.
        #[arg(long)]
        all: bool,
    },
}

fn probability(raw: &str) -> Result<f64, String> {
    match raw.parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 1.0 => Ok(p),
        _ => Err(format!(
            "{raw:?} is not a probability above 0 and at most 1"
        )),
    }
}

pub async fn run(args: DeadLettersArgs) -> anyhow::Result<()> {
    let url = args
        .redis
        .clone()
        .context("--redis URL is required (the handler's STORMGATE_REDIS_URL)")?;
    let store = connect(url, &args.namespace).await?;
    match &args.action {
        None | Some(DeadLetterAction::List) => list(store.as_ref(), &args).await,
        Some(DeadLetterAction::Resubmit { ids, all }) => {
            let selection = if *all {
                Selection::All
            } else {
                Selection::Ids(ids.clone())
            };
            resubmit_entries(store.as_ref(), &args, &selection).await
        }
    }
}

/// The store the handler uses, through the handler's own connector.
async fn connect(url: String, namespace: &str) -> anyhow::Result<Arc<dyn Store>> {
    let settings = RedisSettings {
        url: Secret::new(url),
        auth: RedisAuth::Url,
    };
    RedisConnector::with_namespace(settings, namespace)
        .connect()
        .await
        .map_err(|e| anyhow::anyhow!("--redis: {e}"))
}

async fn list(store: &dyn Store, args: &DeadLettersArgs) -> anyhow::Result<()> {
    let limit = args.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    let entries = store.dead_letters(limit).await?;
    if args.json {
        let entries: Vec<Entry> = entries
            .into_iter()
            .map(|(id, letter)| Entry { id, letter })
            .collect();
        println!("{}", serde_json::to_string_pretty(&entries)?);
        return Ok(());
    }
    for (id, letter) in &entries {
        print!("{}", render_entry(id, letter));
    }
    println!(
        "{} dead letter{} listed (oldest first, at most {limit})",
        entries.len(),
        if entries.len() == 1 { "" } else { "s" }
    );
    let stats = store.dead_letter_stats().await?;
    println!(
        "{} in the stream; {} trimmed by its cap (STORMGATE_DEAD_LETTER_MAX) so far",
        stats.entries, stats.trimmed_total
    );
    Ok(())
}

async fn resubmit_entries(
    store: &dyn Store,
    args: &DeadLettersArgs,
    selection: &Selection,
) -> anyhow::Result<()> {
    let classifier = load_classifier(args.model.as_deref(), args.route_up_threshold)
        .map_err(anyhow::Error::msg)?;
    // The handler's ingest policy (`AppState::new`): the default one with its hold.
    let default = IngestPolicy::default();
    let policy = IngestPolicy {
        coalesce_hold: args
            .coalesce_hold_seconds
            .map_or(default.coalesce_hold, Duration::from_secs),
        tiers: args.tier_table.unwrap_or(default.tiers),
        ..default
    };
    let ctx = IngestContext {
        store,
        clock: &SystemClock,
        classifier: &classifier,
        policy: &policy,
    };
    let scan = args.limit.unwrap_or(MAX_ENTRIES);
    let report = resubmit(&ctx, selection, scan).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render_report(&report, scan));
    }
    if !report.not_found.is_empty() {
        anyhow::bail!("{} id(s) not found", report.not_found.len());
    }
    Ok(())
}

/// One listed entry, several lines. Text from the event is escaped: it came from outside
/// and must not drive the terminal.
pub fn render_entry(id: &str, letter: &DeadLetter) -> String {
    let mut out = String::new();
    let at = jiff::Timestamp::from_millisecond(i64::try_from(letter.at.0).unwrap_or(i64::MAX))
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("{} ms", letter.at.0));
    let _ = writeln!(out, "{id}  {at}  {}", coordinates(letter));
    let _ = writeln!(out, "  reason: {}", escaped(&letter.reason, usize::MAX));
    let _ = writeln!(
        out,
        "  value:  {} ({} bytes stored{})",
        escaped(&letter.raw, EXCERPT_CHARS),
        letter.raw.len(),
        if letter.replayable {
            ""
        } else {
            "; not the event as delivered, cannot be re-submitted"
        }
    );
    if letter.headers.action.is_some() || letter.headers.table_name.is_some() {
        let _ = writeln!(
            out,
            "  headers: action={} table_name={}",
            escaped(letter.headers.action.as_deref().unwrap_or("-"), 40),
            escaped(letter.headers.table_name.as_deref().unwrap_or("-"), 40),
        );
    }
    out
}

fn coordinates(letter: &DeadLetter) -> String {
    match (&letter.topic, letter.partition, letter.offset) {
        (None, None, None) => "Kafka coordinates unknown".to_owned(),
        (topic, partition, offset) => format!(
            "topic {} partition {} offset {}",
            escaped(topic.as_deref().unwrap_or("?"), 200),
            partition.map_or("?".to_owned(), |p| p.to_string()),
            offset.map_or("?".to_owned(), |o| o.to_string()),
        ),
    }
}

/// At most `max_chars` of `text`, control characters escaped, `…` when cut.
fn escaped(text: &str, max_chars: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max_chars)
        .flat_map(|c| {
            let escape = c.is_control();
            let shown: Vec<char> = if escape {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            shown
        })
        .collect();
    if text.chars().nth(max_chars).is_some() {
        out.push('…');
    }
    out
}

/// One line per entry, then the totals.
pub fn render_report(report: &ResubmitReport, scan: usize) -> String {
    let mut out = String::new();
    for ResubmittedEntry { id, resubmission } in &report.entries {
        let what = match resubmission {
            Resubmission::Accepted => "accepted; removed".to_owned(),
            Resubmission::DuplicateOrStale => {
                "already stored (duplicate or stale version); removed".to_owned()
            }
            Resubmission::RejectedAgain { new_id, reason } => format!(
                "rejected again: {}; kept as {new_id}",
                escaped(reason, usize::MAX)
            ),
            Resubmission::Skipped { reason } => {
                format!("not an incident event ({reason}): skipped; removed")
            }
            Resubmission::Kept { reason } => format!("kept: {}", escaped(reason, usize::MAX)),
        };
        let _ = writeln!(out, "{id}: {what}");
    }
    for id in &report.not_found {
        let _ = writeln!(
            out,
            "{}: not found among the oldest {scan} entries",
            escaped(id, 80)
        );
    }
    let _ = writeln!(
        out,
        "resubmitted {}: {} accepted, {} already stored, {} rejected again; {} kept, {} not found",
        report.resubmitted,
        report.accepted,
        report.duplicate_or_stale,
        report.rejected_again,
        report.kept,
        report.not_found.len()
    );
    out
}

#[cfg(test)]
mod tests {
    use stormgate_shared::clock::EpochMillis;
    use stormgate_shared::event::CdcHeaders;

    use super::*;

    fn letter(raw: &str) -> DeadLetter {
        DeadLetter {
            reason: "event is not JSON: expected value at line 1 column 1".to_owned(),
            raw: raw.to_owned(),
            headers: CdcHeaders {
                action: Some("update".to_owned()),
                table_name: Some("incident".to_owned()),
            },
            replayable: true,
            topic: Some("servicenow.incident".to_owned()),
            partition: Some(3),
            offset: Some(300),
            at: EpochMillis(1_764_410_400_000),
        }
    }

    #[test]
    fn a_listed_entry_shows_id_time_coordinates_reason_and_an_escaped_excerpt() {
        let text = render_entry("1764410400000-0", &letter("oops\u{1b}[2J\n{\"a\": 1}"));
        assert_eq!(
            text,
            "1764410400000-0  2025-11-29T10:00:00Z  topic servicenow.incident partition 3 offset 300\n\
             \x20 reason: event is not JSON: expected value at line 1 column 1\n\
             \x20 value:  oops\\u{1b}[2J\\n{\"a\": 1} (17 bytes stored)\n\
             \x20 headers: action=update table_name=incident\n"
        );
    }

    #[test]
    fn a_long_value_is_cut_and_an_inexact_one_says_it_cannot_be_resubmitted() {
        let mut l = letter(&"x".repeat(1_000));
        l.replayable = false;
        l.topic = None;
        l.partition = None;
        l.offset = None;
        let text = render_entry("1-0", &l);
        assert!(text.contains(&format!(
            "{}… (1000 bytes stored; not the event",
            "x".repeat(160)
        )));
        assert!(text.contains("Kafka coordinates unknown"));
    }

    #[test]
    fn the_report_names_each_entry_and_the_totals() {
        let report = ResubmitReport {
            resubmitted: 2,
            accepted: 1,
            rejected_again: 1,
            entries: vec![
                ResubmittedEntry {
                    id: "1-0".into(),
                    resubmission: Resubmission::Accepted,
                },
                ResubmittedEntry {
                    id: "2-0".into(),
                    resubmission: Resubmission::RejectedAgain {
                        new_id: "3-0".into(),
                        reason: "missing field sys_id".into(),
                    },
                },
            ],
            not_found: vec!["9-9".into()],
            ..ResubmitReport::default()
        };
        assert_eq!(
            render_report(&report, 1000),
            "1-0: accepted; removed\n\
             2-0: rejected again: missing field sys_id; kept as 3-0\n\
             9-9: not found among the oldest 1000 entries\n\
             resubmitted 2: 1 accepted, 0 already stored, 1 rejected again; 0 kept, 1 not found\n"
        );
    }
}
