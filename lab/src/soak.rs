//! The retention soak: weeks of tickets on a virtual clock through the store's real
//! ingest, summary writes and purge, with the store's memory read once a virtual day.
//!
//! Every virtual hour the day's intake (spread evenly; a storm multiplies it) arrives as
//! version 1 of new tickets; an hour later each gets version 2 and its LLM technician and
//! customer summaries, five hours after that version 3 resolves it. Then the retention
//! run ([`stormgate_shared::retention::keep_within_limits`]) purges what is due, as the `rollup`
//! timer does each minute. The records are real: a pool of storm tickets is parsed,
//! bounded, classified and summarized by [`stormgate_shared::ingest::prepare`] once, and each new
//! ticket is one of them under its own id, so a ticket weighs what production's do. Jobs
//! are left out: they are work in flight, bounded by the queues draining, while the
//! soak measures what stays. `stormgate soak` runs it against a Redis of the operator's;
//! docs/operations.md, *Redis memory*, has its figures.

use std::collections::VecDeque;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use stormgate_shared::assembly::ClassifierSettings;
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::ingest::{IngestContext, IngestPolicy, prepare};
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::retention::{PURGE_PER_RUN, keep_within_limits};
use stormgate_shared::sample_events::{rng, storm_event, sys_id};
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::store::{IngestRecord, Store, StoreError};
use stormgate_shared::summary::Summary;
use stormgate_shared::ticket_id::TicketId;
use stormgate_shared::tokens::Tokens;

/// Where the virtual clock starts (2027-01-01T00:00:00Z).
const START: EpochMillis = EpochMillis(1_798_761_600_000);
const HOUR: Duration = Duration::from_secs(3600);
/// Distinct prepared tickets the soak's tickets are copies of.
const POOL: u64 = 64;
/// Tickets ingested per store call (the Kafka trigger's batch size).
const BATCH: usize = 100;
/// Hours from a ticket's first version to its second (with LLM summaries) and third
/// (resolved).
const SECOND_VERSION_AFTER: u64 = 1;
const RESOLVED_AFTER: u64 = 6;
/// Characters of the LLM summaries written for each ticket (300 and 200 output tokens).
const TECHNICIAN_CHARS: usize = 1_200;
const CUSTOMER_CHARS: usize = 800;

/// A storm: for `days` days from `first_day` (0-based) the intake is `factor` times more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StormWeek {
    pub first_day: u32,
    pub days: u32,
    pub factor: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SoakConfig {
    pub days: u32,
    pub tickets_per_day: u32,
    pub storm: Option<StormWeek>,
    /// The store's retention (reported; the store applies its own).
    #[serde(with = "stormgate_shared::duration_secs")]
    pub retention: Duration,
    pub seed: u64,
}

impl SoakConfig {
    /// The intake of day `day`.
    pub fn intake(&self, day: u32) -> u64 {
        let factor = match self.storm {
            Some(s) if (s.first_day..s.first_day + s.days).contains(&day) => s.factor,
            _ => 1,
        };
        u64::from(self.tickets_per_day) * u64::from(factor)
    }
}

/// The store at the end of one virtual day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoakSample {
    /// 1-based: the sample at the end of day 1 is taken after 24 virtual hours.
    pub day: u32,
    pub intake: u64,
    pub tickets_total: u64,
    pub purged_total: u64,
    /// Tickets the store keeps (ingested, not yet purged).
    pub live_tickets: u64,
    pub used_memory: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakReport {
    pub config: SoakConfig,
    /// Memory before the first ticket.
    pub baseline_memory: u64,
    pub samples: Vec<SoakSample>,
}

impl SoakReport {
    pub fn peak(&self) -> Option<&SoakSample> {
        self.samples.iter().max_by_key(|s| s.used_memory)
    }

    pub fn last(&self) -> Option<&SoakSample> {
        self.samples.last()
    }

    /// Memory above the baseline per ticket kept, at the last sample.
    pub fn bytes_per_live_ticket(&self) -> Option<u64> {
        let last = self.last()?;
        let above = last.used_memory.saturating_sub(self.baseline_memory);
        above.checked_div(last.live_tickets)
    }

    /// A table for people: one row per day.
    pub fn render(&self) -> String {
        let mut out = String::from("day  intake  kept tickets  purged total  used_memory (MiB)\n");
        for s in &self.samples {
            out.push_str(&format!(
                "{:>3}  {:>6}  {:>12}  {:>12}  {:>17.1}\n",
                s.day,
                s.intake,
                s.live_tickets,
                s.purged_total,
                s.used_memory as f64 / (1024.0 * 1024.0)
            ));
        }
        if let (Some(peak), Some(last)) = (self.peak(), self.last()) {
            out.push_str(&format!(
                "baseline {:.1} MiB; peak {:.1} MiB on day {}; last {:.1} MiB with {} tickets kept \
                 ({} bytes per ticket above the baseline)\n",
                self.baseline_memory as f64 / (1024.0 * 1024.0),
                peak.used_memory as f64 / (1024.0 * 1024.0),
                peak.day,
                last.used_memory as f64 / (1024.0 * 1024.0),
                last.live_tickets,
                self.bytes_per_live_ticket().unwrap_or(0)
            ));
        }
        out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the store's memory could not be read: {0}")]
    Probe(String),
    #[error("the soak's tickets could not be prepared: {0}")]
    Prepare(String),
}

/// Reads how much memory the store holds.
#[async_trait]
pub trait MemoryProbe: Send + Sync {
    async fn used_memory(&self) -> Result<u64, SoakError>;
}

/// `used_memory` from a Redis server's `INFO memory`.
#[derive(Debug, Clone)]
pub struct RedisMemory(pub redis::Client);

#[async_trait]
impl MemoryProbe for RedisMemory {
    async fn used_memory(&self) -> Result<u64, SoakError> {
        let mut connection = self
            .0
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| SoakError::Probe(e.to_string()))?;
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut connection)
            .await
            .map_err(|e| SoakError::Probe(e.to_string()))?;
        info.lines()
            .find_map(|line| line.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| SoakError::Probe("INFO memory has no used_memory".to_owned()))
    }
}

/// The pool of prepared storm tickets.
fn pool(seed: u64) -> Result<Vec<IngestRecord>, SoakError> {
    let classifier = ClassifierSettings::default()
        .load()
        .map_err(|e| SoakError::Prepare(e.to_string()))?;
    let store = MemoryStore::new();
    let clock = ManualClock::starting_at(START);
    let policy = IngestPolicy::default();
    let ctx = IngestContext {
        store: &store,
        clock: &clock,
        classifier: &classifier,
        policy: &policy,
    };
    let mut r = rng(seed);
    (0..POOL)
        .map(|n| {
            let log_bytes = 6_000 + (n as usize % 9) * 1_000;
            let event = storm_event(&mut r, n, 1, log_bytes);
            let ticket = stormgate_shared::event::parse_record(
                event
                    .as_object()
                    .ok_or_else(|| SoakError::Prepare("not an object".into()))?,
                &stormgate_shared::event::CdcHeaders::default(),
            )
            .map_err(|e| SoakError::Prepare(e.to_string()))?;
            prepare(ticket, &ctx, START).map_err(SoakError::Prepare)
        })
        .collect()
}

/// Ticket `n`'s record at `version`, ingested at `at`.
fn version_of(
    pool: &[IngestRecord],
    n: u64,
    version: u64,
    at: EpochMillis,
) -> Result<IngestRecord, SoakError> {
    let template = &pool[(n % POOL) as usize];
    let id: TicketId =
        sys_id(n)
            .parse()
            .map_err(|e: stormgate_shared::ticket_id::TicketIdParseError| {
                SoakError::Prepare(e.to_string())
            })?;
    let mut record = template.clone();
    record.ticket = id.clone();
    record.version = version;
    record.closed = version >= 3;
    record.jobs.clear();
    record.instant_summary.ticket = id;
    record.instant_summary.version = version;
    record.instant_summary.created_at = at;
    Ok(record)
}

fn llm_summary(record: &IngestRecord, kind: SummaryKind, at: EpochMillis) -> Summary {
    let chars = match kind {
        SummaryKind::Customer => CUSTOMER_CHARS,
        _ => TECHNICIAN_CHARS,
    };
    let sentence = "Fibre cut on the aggregation ring; traffic rerouted, field team on site. ";
    let text: String = sentence.chars().cycle().take(chars).collect();
    Summary {
        kind,
        text,
        tier: if kind == SummaryKind::Customer {
            Tier::Standard
        } else {
            Tier::Premium
        },
        model: "gpt-4o-2024-08-06".to_owned(),
        tokens_used: Tokens(1_500),
        created_at: at,
        prompt_version: Some("soak".to_owned()),
        ..record.instant_summary.clone()
    }
}

/// Runs the soak against `store` (whose retention should be `config.retention`),
/// reading `probe` at the end of every virtual day.
pub async fn run(
    store: &dyn Store,
    probe: &dyn MemoryProbe,
    config: &SoakConfig,
) -> Result<SoakReport, SoakError> {
    let pool = pool(config.seed)?;
    let mut report = SoakReport {
        config: *config,
        baseline_memory: probe.used_memory().await?,
        samples: Vec::new(),
    };
    // Tickets opened each hour, oldest first, while they still have versions to come.
    let mut opened: VecDeque<(u64, std::ops::Range<u64>)> = VecDeque::new();
    let (mut next, mut purged) = (0u64, 0u64);
    for hour in 0..u64::from(config.days) * 24 {
        let now = START.plus(HOUR * hour as u32);
        let day = (hour / 24) as u32;
        let per_day = config.intake(day);
        let h = hour % 24;
        let count = per_day * (h + 1) / 24 - per_day * h / 24;
        let mut records = Vec::new();
        for n in next..next + count {
            records.push(version_of(&pool, n, 1, now)?);
        }
        opened.push_back((hour, next..next + count));
        next += count;
        let mut second = Vec::new();
        for (at, range) in &opened {
            if hour == at + SECOND_VERSION_AFTER {
                for n in range.clone() {
                    second.push(version_of(&pool, n, 2, now)?);
                }
            }
            if hour == at + RESOLVED_AFTER {
                for n in range.clone() {
                    records.push(version_of(&pool, n, 3, now)?);
                }
            }
        }
        while opened
            .front()
            .is_some_and(|(at, _)| hour >= at + RESOLVED_AFTER)
        {
            opened.pop_front();
        }
        records.extend(second.iter().cloned());
        for chunk in records.chunks(BATCH) {
            for outcome in store.ingest_each(chunk).await? {
                outcome?;
            }
        }
        for record in &second {
            store
                .put_summary(&llm_summary(record, SummaryKind::Technician, now))
                .await?;
            store
                .put_summary(&llm_summary(record, SummaryKind::Customer, now))
                .await?;
        }
        // The rollup timer's retention run, once a minute: as many runs as an hour has.
        for _ in 0..60 {
            let run = keep_within_limits(store, now, PURGE_PER_RUN).await?;
            purged += run.purged.tickets;
            if !run.purged.more_due {
                break;
            }
        }
        if h == 23 {
            report.samples.push(SoakSample {
                day: day + 1,
                intake: per_day,
                tickets_total: next,
                purged_total: purged,
                live_tickets: next - purged,
                used_memory: probe.used_memory().await?,
            });
        }
    }
    Ok(report)
}
