//! The Redis store: production state, every multi-key change one atomic Lua script.
//!
//! Construction never touches the network: the connection (a [`ConnectionManager`],
//! which reconnects by itself) is made on first use, and the scripts are loaded on it
//! then, so the handler can answer the host before Redis is reachable. A connection
//! failure is [`StoreError::Unavailable`]; the next call tries again.
//!
//! Scripts live in `scripts/*.lua`, each prefixed with `scripts/lib.lua`, and run by
//! EVALSHA (reloaded and retried once if the server lost its script cache). `ingest`
//! sends one EVALSHA per record in a single pipeline: one round trip per batch.
//!
//! # Key layout
//!
//! Every key starts with the namespace in braces, `{ns}`, a Redis Cluster hash tag: all
//! of a namespace's keys live in one slot, so scripts may touch any of them.
//!
//! | key                               | type   | content                                                  |
//! |-----------------------------------|--------|----------------------------------------------------------|
//! | `{ns}:ticket:<sys_id>`            | hash   | `version`, `snapshot` (JSON), `region` (when it has one), `number` |
//! | `{ns}:number:<number>`            | string | the `sys_id` of the ticket numbered so (`INC0012345`); expires and is purged with the ticket |
//! | `{ns}:summary:<sys_id>`           | hash   | per kind: `<kind>` (JSON), `<kind>:version`, `<kind>:rank` (its standing: extractive 0, degraded extractive 1, LLM 2) |
//! | `{ns}:summary:<region key>`       | hash   | a region's roll-up: `rollup` (JSON), `rollup:version`, `rollup:rank`; the key is [`RegionKey`]'s 32 hex digits |
//! | `{ns}:job:<job id>`               | hash   | `json`, `ticket`, `version`, `kind`, `tier`, `rank`, `enq`, `co`; while leased `token`, `exp`; `cancelled` |
//! | `{ns}:ticket_jobs:<sys_id>`       | set    | ids of the ticket's pending and leased jobs              |
//! | `{ns}:pending:<tier>:<rank>`      | zset   | pending job ids of one tier and severity, score = enqueued_at |
//! | `{ns}:coalesce:<tier>:<key>`      | zset   | pending job ids sharing a coalescing key, held ones too, score = enqueued_at |
//! | `{ns}:held:<tier>`                | zset   | queued job ids on hold (not yet in `pending`), score = hold end |
//! | `{ns}:leased:<tier>`              | zset   | leased job ids, score = lease expiry                     |
//! | `{ns}:lease_seq`                  | string | counter behind lease tokens (`<seq>.<position in group>`) |
//! | `{ns}:dead_letters`               | stream | `reason`, `raw`, `at`, `replayable` (`1`/`0`; absent = `1`), and `action`, `table_name`, `topic`, `partition`, `offset` when known; at most `dead_letter_cap` entries |
//! | `{ns}:dead_letters_trimmed`       | string | dead letters the cap trimmed, in total                   |
//! | `{ns}:expiry`                     | zset   | kept tickets, score = end of retention (ingest of the latest version + retention) |
//! | `{ns}:rollup_due`                 | set    | regions whose roll-up is due                             |
//! | `{ns}:region_tickets:<region>`    | zset   | the region's tickets, score = `{ns}:ingest_seq` at ingest (latest highest), capped |
//! | `{ns}:ingest_seq`                 | string | counter ordering the region indexes                     |
//! | `{ns}:owed:<kind>`                | zset   | job ids whose stored summary owes its sink a delivery, score = when it is due (a claim moves it to the claim's end); a job leaves it when its delivery is completed, found superseded, or its summary gone |
//! | `{ns}:call:<job id>`              | hash   | `holder`, `until`: the claim on the job's LLM call; expires with the claim |
//!
//! Next to these, outside the `{ns}` hash tag as they have always been (each of their
//! commands and scripts touches one key), the ServiceNow work-note outbox keeps
//! `<ns>:servicenow:pending` (zset: encoded pending notes, score = next attempt) and
//! `<ns>:servicenow:cooldown_until` (string: epoch ms, expiring with the cooldown); see
//! [`super::outbox`], whose scripts are `scripts/outbox_*.lua`.
//!
//! The summary hash also keeps `<kind>:delivered`, the latest version of that kind whose
//! delivery (customer notice, work note) was completed; it lives and goes with the hash.
//!
//! A job id is `<sys_id>:<version>:<kind>`; tiers and kinds are their lower-case names;
//! ranks are 1 (P1) to 5 (P5).
//!
//! Retention ([`StoreLimits`]): `purge_expired` deletes a ticket's `ticket`, `summary`
//! and `ticket_jobs` keys, its pending jobs and its region-index entry once its
//! `expiry` score has passed, on the product's clock (so a lab or a soak in virtual
//! time sees it). Each ingest also sets Redis's own expiry on those keys (and on the
//! region's index) to the retention plus [`KEY_EXPIRY_GRACE`]: the bound holds even
//! where no purge runs. A region's roll-up expires that long after its latest roll-up.
//! Jobs, queues and leases are bounded by the work in flight; the dead-letter stream by
//! its cap.
//!
//! Queue order needs no rescoring: pending jobs are kept per severity in arrival order,
//! and `lease` compares the five heads by `enqueued_at + (rank - 1) × promote_every`
//! (see [`AgingPolicy::effective_score`]), so the aging policy is a lease parameter and
//! can change without touching stored data. Times and versions must stay below 2^53
//! (Lua numbers are doubles); epoch milliseconds are far below.

use std::str::FromStr;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, Script, ScriptInvocation, ServerErrorKind, Value};
use tokio::sync::OnceCell;

use super::{
    AgingPolicy, BREAKDOWN_SCAN, CallClaim, ConsoleStore, DeadLetter, DeadLetterStats,
    IngestOutcome, IngestRecord, KEY_EXPIRY_GRACE, Lease, LeasedGroup, OwedStats, PurgeReport,
    QueueStats, REGION_INDEX_CAP, ResummarizeOutcome, SeverityBreakdown, Store, StoreError,
    StoreLimits,
};
use crate::clock::EpochMillis;
use crate::event::CdcHeaders;
use crate::fault_switches::{self, Mechanism};
use crate::job::{Job, JobId, SummaryKind, Tier};
use crate::region_key::RegionKey;
use crate::region_rollup::RegionRollup;
use crate::severity::Severity;
use crate::summary::{PutOutcome, Summary, standing};
use crate::ticket_id::TicketId;
use crate::ticket_number::TicketNumber;

/// A store namespace: 1 to 64 characters from `A-Z a-z 0-9 _ - . :`, so that it can
/// sit inside a hash tag and never collide with the key separators that follow it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Namespace(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a store namespace (1-64 characters of A-Z a-z 0-9 _ - . :): {0:?}")]
pub struct NamespaceParseError(pub String);

impl FromStr for Namespace {
    type Err = NamespaceParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
        if (1..=64).contains(&s.len()) && s.chars().all(allowed) {
            Ok(Namespace(s.to_owned()))
        } else {
            Err(NamespaceParseError(s.chars().take(80).collect()))
        }
    }
}

impl Namespace {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

struct Scripts {
    ingest: Script,
    enqueue: Script,
    put_summary: Script,
    put_rollup: Script,
    lease: Script,
    pending: Script,
    lease_jobs: Script,
    ack: Script,
    release: Script,
    reclaim: Script,
    cancel: Script,
    take_due_regions: Script,
    purge: Script,
    dead_letter: Script,
}

macro_rules! store_script {
    ($file:literal) => {
        Script::new(concat!(
            include_str!("scripts/lib.lua"),
            include_str!(concat!("scripts/", $file))
        ))
    };
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    ingest: store_script!("ingest.lua"),
    enqueue: store_script!("enqueue.lua"),
    put_summary: store_script!("put_summary.lua"),
    put_rollup: store_script!("put_rollup.lua"),
    lease: store_script!("lease.lua"),
    pending: store_script!("pending.lua"),
    lease_jobs: store_script!("lease_jobs.lua"),
    ack: store_script!("ack.lua"),
    release: store_script!("release.lua"),
    reclaim: store_script!("reclaim.lua"),
    cancel: store_script!("cancel.lua"),
    take_due_regions: store_script!("take_due_regions.lua"),
    purge: store_script!("purge.lua"),
    dead_letter: store_script!("dead_letter.lua"),
});

impl Scripts {
    fn all(&self) -> [&Script; 14] {
        [
            &self.ingest,
            &self.enqueue,
            &self.put_summary,
            &self.put_rollup,
            &self.lease,
            &self.pending,
            &self.lease_jobs,
            &self.ack,
            &self.release,
            &self.reclaim,
            &self.cancel,
            &self.take_due_regions,
            &self.purge,
            &self.dead_letter,
        ]
    }
}

/// The scripts of the delivery ledger (owed customer notices and work notes) and of the
/// claims on LLM calls.
struct LedgerScripts {
    put_summary_owed: Script,
    claim_owed: Script,
    claim_due_owed: Script,
    complete_owed: Script,
    claim_calls: Script,
    renew_calls: Script,
    release_calls: Script,
}

static LEDGER_SCRIPTS: LazyLock<LedgerScripts> = LazyLock::new(|| LedgerScripts {
    put_summary_owed: store_script!("put_summary_owed.lua"),
    claim_owed: store_script!("claim_owed.lua"),
    claim_due_owed: store_script!("claim_due_owed.lua"),
    complete_owed: store_script!("complete_owed.lua"),
    claim_calls: store_script!("claim_calls.lua"),
    renew_calls: store_script!("renew_calls.lua"),
    release_calls: store_script!("release_calls.lua"),
});

impl LedgerScripts {
    fn all(&self) -> [&Script; 7] {
        [
            &self.put_summary_owed,
            &self.claim_owed,
            &self.claim_due_owed,
            &self.complete_owed,
            &self.claim_calls,
            &self.renew_calls,
            &self.release_calls,
        ]
    }
}

/// The scripts of the console's reads and the operators' actions ([`ConsoleStore`]).
struct ConsoleScripts {
    severity_breakdown: Script,
    resummarize: Script,
}

static CONSOLE_SCRIPTS: LazyLock<ConsoleScripts> = LazyLock::new(|| ConsoleScripts {
    severity_breakdown: store_script!("severity_breakdown.lua"),
    resummarize: store_script!("resummarize.lua"),
});

impl ConsoleScripts {
    fn all(&self) -> [&Script; 2] {
        [&self.severity_breakdown, &self.resummarize]
    }
}

/// The Redis [`Store`]. Clone-free: share it behind an `Arc`.
pub struct RedisStore {
    client: redis::Client,
    config: ConnectionManagerConfig,
    prefix: String,
    connection: OnceCell<ConnectionManager>,
    round_trips: AtomicU64,
    limits: StoreLimits,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client's connection info may hold credentials: show the namespace only.
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("connected", &self.connection.initialized())
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A store over `client` with stormgate's connection defaults (5 s connect and
    /// response timeouts, 2 connection retries). Does not connect.
    pub fn new(client: redis::Client, namespace: Namespace) -> Self {
        Self::with_config(client, namespace, Self::connection_defaults())
    }

    /// stormgate's connection defaults, for stores and for other connections to the
    /// same Redis (the governor's ledger): 5 s connect and response timeouts, 2 retries.
    pub fn connection_defaults() -> ConnectionManagerConfig {
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(2)
    }

    /// A store with an explicit connection configuration (e.g. a credentials provider
    /// for Entra ID). Does not connect.
    pub fn with_config(
        client: redis::Client,
        namespace: Namespace,
        config: ConnectionManagerConfig,
    ) -> Self {
        RedisStore {
            client,
            config,
            prefix: format!("{{{}}}", namespace.as_str()),
            connection: OnceCell::new(),
            round_trips: AtomicU64::new(0),
            limits: StoreLimits::default(),
        }
    }

    /// The same store keeping within `limits` (the default limits otherwise).
    pub fn with_limits(mut self, limits: StoreLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Redis's own expiry of a ticket's keys, in ms (0: none).
    fn key_ttl_ms(&self) -> u64 {
        if self.limits.retention.is_zero() {
            0
        } else {
            millis(self.limits.retention.saturating_add(KEY_EXPIRY_GRACE))
        }
    }

    /// Requests this store has sent to Redis (a pipeline counts once), for benchmarks.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    fn key(&self, parts: &[&str]) -> String {
        let mut key = self.prefix.clone();
        for part in parts {
            key.push(':');
            key.push_str(part);
        }
        key
    }

    async fn connection(&self) -> Result<ConnectionManager, StoreError> {
        let connection = self
            .connection
            .get_or_try_init(|| async {
                let mut connection =
                    ConnectionManager::new_with_config(self.client.clone(), self.config.clone())
                        .await?;
                self.load_scripts(&mut connection).await?;
                Ok::<_, StoreError>(connection)
            })
            .await?;
        Ok(connection.clone())
    }

    async fn load_scripts(&self, connection: &mut ConnectionManager) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        for script in SCRIPTS
            .all()
            .into_iter()
            .chain(LEDGER_SCRIPTS.all())
            .chain(CONSOLE_SCRIPTS.all())
        {
            pipe.load_script(script);
        }
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        pipe.query_async::<()>(connection).await?;
        Ok(())
    }

    /// Runs one script; EVALSHA, reloading the script if the server lost it.
    async fn run<T: redis::FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let mut connection = self.connection().await?;
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        Ok(invocation.invoke_async(&mut connection).await?)
    }

    /// Runs a pipeline of EVALSHAs; if the server lost its script cache (restart,
    /// failover) nothing ran, so the scripts are loaded again and the pipeline retried.
    async fn run_pipeline<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, StoreError> {
        let mut connection = self.connection().await?;
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        match pipe.query_async(&mut connection).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.load_scripts(&mut connection).await?;
                self.round_trips.fetch_add(1, Ordering::Relaxed);
                Ok(pipe.query_async(&mut connection).await?)
            }
            result => Ok(result?),
        }
    }

    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, StoreError> {
        let mut connection = self.connection().await?;
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        Ok(cmd.query_async(&mut connection).await?)
    }

    fn ingest_invocation(
        &self,
        record: &IngestRecord,
    ) -> Result<ScriptInvocation<'static>, StoreError> {
        let summary = &record.instant_summary;
        let mut invocation = SCRIPTS.ingest.prepare_invoke();
        invocation
            .key(self.key(&["ticket", record.ticket.as_str()]))
            .arg(&self.prefix)
            .arg(record.ticket.as_str())
            .arg(record.version)
            .arg(record.snapshot.as_str())
            .arg(if record.closed { "1" } else { "0" })
            .arg(record.region.as_deref().unwrap_or(""))
            .arg(summary.kind.as_str())
            .arg(summary.version)
            .arg(summary_rank(summary))
            .arg(to_json(summary)?)
            .arg(record.jobs.len())
            .arg(REGION_INDEX_CAP);
        for job in &record.jobs {
            push_job_args(&mut invocation, job)?;
        }
        invocation
            .arg(
                self.limits
                    .expires_at(summary.created_at)
                    .map(|at| at.as_millis().to_string())
                    .unwrap_or_default(),
            )
            .arg(self.key_ttl_ms())
            .arg(
                summary
                    .number
                    .parse::<TicketNumber>()
                    .map(String::from)
                    .unwrap_or_default(),
            );
        Ok(invocation)
    }
}

/// The field of a region's summary hash its roll-up is kept in (with `rollup:version`
/// and `rollup:rank`), as a ticket's summary of a kind is kept in the kind's field.
const ROLLUP_FIELD: &str = "rollup";

/// A summary's standing against others of the same version (see [`standing`]).
fn summary_rank(summary: &Summary) -> u8 {
    standing(summary)
}

/// The `JOB_ARGS` (10) arguments `enqueue_at` in `lib.lua` reads for one job.
fn push_job_args(invocation: &mut ScriptInvocation<'_>, job: &Job) -> Result<(), StoreError> {
    invocation
        .arg(job.id.to_string())
        .arg(to_json(job)?)
        .arg(job.id.ticket.as_str())
        .arg(job.id.version)
        .arg(job.id.kind.as_str())
        .arg(job.tier.as_str())
        .arg(job.rank().rank())
        .arg(job.enqueued_at.as_millis())
        .arg(job.coalesce_key.as_deref().unwrap_or(""))
        .arg(
            job.hold_until
                .map(|at| at.as_millis().to_string())
                .unwrap_or_default(),
        );
    Ok(())
}

/// What a put script's answer means: 1 when it stored the value, 0 when what the store
/// holds already supersedes it.
fn put_outcome(stored: u8) -> PutOutcome {
    if stored == 1 {
        PutOutcome::Stored
    } else {
        PutOutcome::Superseded
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// A count as Redis (and Lua's doubles) can take it: beyond 2^53 means "all" anyway.
fn redis_count(n: usize) -> u64 {
    (n as u64).min(1 << 53)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn ingest_outcome(reply: &str) -> Result<IngestOutcome, StoreError> {
    match reply {
        "accepted" => Ok(IngestOutcome::Accepted),
        "duplicate" => Ok(IngestOutcome::Duplicate),
        "stale" => Ok(IngestOutcome::Stale),
        other => Err(StoreError::Corrupt(format!(
            "unexpected ingest reply {other:?}"
        ))),
    }
}

/// Turns the lease script's `{json, token, ...}` reply into leases on `tier`.
fn leases_from_reply(
    reply: Vec<String>,
    tier: Tier,
    expires_at: EpochMillis,
) -> Result<LeasedGroup, StoreError> {
    reply
        .chunks(2)
        .map(|pair| match pair {
            [json, token] => {
                let mut job: Job = from_json(json)?;
                job.tier = tier;
                Ok(Lease {
                    job,
                    token: token.clone(),
                    expires_at,
                })
            }
            _ => Err(StoreError::Corrupt(
                "lease reply has an odd number of entries".to_owned(),
            )),
        })
        .collect()
}

/// Stream ids are `<ms>-<seq>`; anything else cannot name a dead letter.
fn is_stream_id(id: &str) -> bool {
    let mut parts = id.splitn(2, '-');
    let digits =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && digits(parts.next())
}

fn dead_letter_from_fields(
    id: &str,
    fields: &[(String, String)],
) -> Result<DeadLetter, StoreError> {
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let number = |name: &str| -> Result<Option<i64>, StoreError> {
        field(name)
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|e| StoreError::Corrupt(format!("dead letter {id} {name}: {e}")))
            })
            .transpose()
    };
    let required = |name: &str| {
        field(name)
            .map(str::to_owned)
            .ok_or_else(|| StoreError::Corrupt(format!("dead letter {id} lacks {name}")))
    };
    let at = required("at")?
        .parse::<u64>()
        .map_err(|e| StoreError::Corrupt(format!("dead letter {id} at: {e}")))?;
    Ok(DeadLetter {
        reason: required("reason")?,
        raw: required("raw")?,
        headers: CdcHeaders {
            action: field("action").map(str::to_owned),
            table_name: field("table_name").map(str::to_owned),
        },
        replayable: field("replayable") != Some("0"),
        topic: field("topic").map(str::to_owned),
        partition: number("partition")?,
        offset: number("offset")?,
        at: EpochMillis(at),
    })
}

/// One stream entry: its id and its (field, value) pairs.
type StreamEntry = (String, Vec<(String, String)>);

/// Reads an `XRANGE` reply.
fn stream_entries(reply: Value) -> Result<Vec<StreamEntry>, StoreError> {
    redis::from_redis_value(reply).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Job ids as the ledger scripts return them.
fn job_ids(reply: Vec<String>) -> Result<Vec<JobId>, StoreError> {
    reply.iter().map(|id| parse_job_id(id)).collect()
}

/// `<sys_id>:<version>:<kind>`, as [`JobId`]'s `Display` writes it.
fn parse_job_id(text: &str) -> Result<JobId, StoreError> {
    let corrupt = || StoreError::Corrupt(format!("not a job id: {text:?}"));
    let mut parts = text.splitn(3, ':');
    let ticket = parts
        .next()
        .and_then(|t| t.parse().ok())
        .ok_or_else(corrupt)?;
    let version = parts
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(corrupt)?;
    let kind = parts
        .next()
        .and_then(|k| k.parse().ok())
        .ok_or_else(corrupt)?;
    Ok(JobId {
        ticket,
        version,
        kind,
    })
}

/// One reply of `claim_calls.lua`.
fn call_claim(reply: &str) -> Result<CallClaim, StoreError> {
    match reply {
        "claimed" => Ok(CallClaim::Claimed),
        "done" => Ok(CallClaim::Done),
        other => other
            .strip_prefix("busy:")
            .and_then(|until| until.parse().ok())
            .map(|until| CallClaim::InFlight {
                until: EpochMillis(until),
            })
            .ok_or_else(|| StoreError::Corrupt(format!("unexpected call claim {other:?}"))),
    }
}

#[async_trait]
impl Store for RedisStore {
    async fn ingest_each(
        &self,
        records: &[IngestRecord],
    ) -> Result<Vec<Result<IngestOutcome, StoreError>>, StoreError> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let mut outcomes: Vec<Option<Result<IngestOutcome, StoreError>>> =
            (0..records.len()).map(|_| None).collect();
        let mut pending: Vec<usize> = (0..records.len()).collect();
        // A pipeline whose scripts the server lost (a restart, `SCRIPT FLUSH`) is
        // refused NOSCRIPT record by record: load them and send just those records again.
        for attempt in 0..2 {
            let mut connection = self.connection().await?;
            let mut pipe = redis::pipe();
            // Each record's reply is its own, error or not: the others were applied.
            pipe.ignore_errors();
            for &i in &pending {
                let record = &records[i];
                if fault_switches::is_off(Mechanism::IngestDedup) {
                    // The design being proven against: every delivery looks like a new version.
                    pipe.hdel(self.key(&["ticket", record.ticket.as_str()]), "version")
                        .ignore();
                }
                match self.ingest_invocation(record) {
                    Ok(invocation) => {
                        pipe.invoke_script(&invocation);
                    }
                    Err(e) => {
                        outcomes[i] = Some(Err(e));
                    }
                }
            }
            let sent: Vec<usize> = pending
                .iter()
                .copied()
                .filter(|&i| outcomes[i].is_none())
                .collect();
            if sent.is_empty() {
                break;
            }
            self.round_trips.fetch_add(1, Ordering::Relaxed);
            let replies: Vec<Value> = pipe.query_async(&mut connection).await?;
            if replies.len() != sent.len() {
                return Err(StoreError::Corrupt(format!(
                    "ingest pipeline answered {} replies for {} records",
                    replies.len(),
                    sent.len()
                )));
            }
            let mut unscripted = Vec::new();
            for (i, reply) in sent.into_iter().zip(replies) {
                outcomes[i] = match reply {
                    Value::ServerError(error)
                        if attempt == 0 && error.kind() == Some(ServerErrorKind::NoScript) =>
                    {
                        unscripted.push(i);
                        None
                    }
                    Value::ServerError(error) => {
                        Some(Err(StoreError::from(redis::RedisError::from(error))))
                    }
                    other => Some(
                        redis::from_redis_value::<String>(other)
                            .map_err(|e| StoreError::Corrupt(e.to_string()))
                            .and_then(|reply| ingest_outcome(&reply)),
                    ),
                };
            }
            if unscripted.is_empty() {
                break;
            }
            self.load_scripts(&mut connection).await?;
            pending = unscripted;
        }
        Ok(outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| Err(StoreError::Corrupt("record was not sent".to_owned())))
            })
            .collect())
    }

    async fn ticket_snapshot(
        &self,
        ticket: &TicketId,
    ) -> Result<Option<(u64, serde_json::Value)>, StoreError> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(self.key(&["ticket", ticket.as_str()]))
            .arg("version")
            .arg("snapshot");
        let (version, snapshot): (Option<u64>, Option<String>) = self.query(&cmd).await?;
        match (version, snapshot) {
            (Some(version), Some(snapshot)) => Ok(Some((version, from_json(&snapshot)?))),
            _ => Ok(None),
        }
    }

    async fn enqueue(&self, jobs: &[Job]) -> Result<u64, StoreError> {
        if jobs.is_empty() {
            return Ok(0);
        }
        let mut invocation = SCRIPTS.enqueue.prepare_invoke();
        invocation.arg(&self.prefix).arg(jobs.len());
        for job in jobs {
            push_job_args(&mut invocation, job)?;
        }
        self.run(&invocation).await
    }

    async fn put_summary(&self, summary: &Summary) -> Result<PutOutcome, StoreError> {
        let mut invocation = SCRIPTS.put_summary.prepare_invoke();
        invocation
            .key(self.key(&["summary", summary.ticket.as_str()]))
            .arg(&self.prefix)
            .arg(summary.ticket.as_str())
            .arg(summary.kind.as_str())
            .arg(summary.version)
            .arg(summary_rank(summary))
            .arg(to_json(summary)?)
            .arg(self.key_ttl_ms());
        Ok(put_outcome(self.run(&invocation).await?))
    }

    async fn summary(
        &self,
        ticket: &TicketId,
        kind: SummaryKind,
    ) -> Result<Option<Summary>, StoreError> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(self.key(&["summary", ticket.as_str()]))
            .arg(kind.as_str());
        let json: Option<String> = self.query(&cmd).await?;
        json.map(|j| from_json(&j)).transpose()
    }

    async fn put_rollup(&self, rollup: &RegionRollup) -> Result<PutOutcome, StoreError> {
        let mut invocation = SCRIPTS.put_rollup.prepare_invoke();
        invocation
            .key(self.key(&["summary", rollup.region.as_str()]))
            .arg(&self.prefix)
            .arg(rollup.region.as_str())
            .arg(rollup.version)
            .arg(rollup.standing())
            .arg(to_json(rollup)?)
            .arg(self.key_ttl_ms());
        Ok(put_outcome(self.run(&invocation).await?))
    }

    async fn rollup(&self, region: &RegionKey) -> Result<Option<RegionRollup>, StoreError> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(self.key(&["summary", region.as_str()]))
            .arg(ROLLUP_FIELD);
        let json: Option<String> = self.query(&cmd).await?;
        json.map(|j| from_json(&j)).transpose()
    }

    async fn lease(
        &self,
        tier: Tier,
        now: EpochMillis,
        lease_for: Duration,
        max_group: usize,
        aging: AgingPolicy,
    ) -> Result<LeasedGroup, StoreError> {
        let expires_at = now.plus(lease_for);
        let mut invocation = SCRIPTS.lease.prepare_invoke();
        invocation
            .key(self.key(&["leased", tier.as_str()]))
            .arg(&self.prefix)
            .arg(tier.as_str())
            .arg(expires_at.as_millis())
            .arg(redis_count(max_group).max(1))
            .arg(millis(aging.promote_every))
            .arg(now.as_millis());
        let reply: Vec<String> = self.run(&invocation).await?;
        leases_from_reply(reply, tier, expires_at)
    }

    async fn pending_jobs(
        &self,
        tier: Tier,
        limit: usize,
        aging: AgingPolicy,
    ) -> Result<Vec<Job>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut invocation = SCRIPTS.pending.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(tier.as_str())
            .arg(redis_count(limit))
            .arg(millis(aging.promote_every));
        let reply: Vec<String> = self.run(&invocation).await?;
        reply
            .iter()
            .map(|json| {
                let mut job: Job = from_json(json)?;
                job.tier = tier;
                Ok(job)
            })
            .collect()
    }

    async fn lease_jobs(
        &self,
        tier: Tier,
        ids: &[JobId],
        now: EpochMillis,
        lease_for: Duration,
    ) -> Result<LeasedGroup, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let expires_at = now.plus(lease_for);
        let mut invocation = SCRIPTS.lease_jobs.prepare_invoke();
        invocation
            .key(self.key(&["leased", tier.as_str()]))
            .arg(&self.prefix)
            .arg(tier.as_str())
            .arg(expires_at.as_millis());
        for id in ids {
            invocation.arg(id.to_string());
        }
        let reply: Vec<String> = self.run(&invocation).await?;
        leases_from_reply(reply, tier, expires_at)
    }

    async fn ack(&self, lease: &Lease) -> Result<bool, StoreError> {
        let id = lease.job.id.to_string();
        let mut invocation = SCRIPTS.ack.prepare_invoke();
        invocation
            .key(self.key(&["job", &id]))
            .arg(&self.prefix)
            .arg(&id)
            .arg(&lease.token);
        let acked: u8 = self.run(&invocation).await?;
        Ok(acked == 1)
    }

    async fn release(&self, lease: &Lease, tier: Tier) -> Result<bool, StoreError> {
        let id = lease.job.id.to_string();
        let mut invocation = SCRIPTS.release.prepare_invoke();
        invocation
            .key(self.key(&["job", &id]))
            .arg(&self.prefix)
            .arg(&id)
            .arg(&lease.token)
            .arg(tier.as_str());
        let released: u8 = self.run(&invocation).await?;
        Ok(released == 1)
    }

    async fn reclaim_expired(&self, now: EpochMillis) -> Result<u64, StoreError> {
        let mut invocation = SCRIPTS.reclaim.prepare_invoke();
        invocation.arg(&self.prefix).arg(now.as_millis());
        self.run(&invocation).await
    }

    async fn cancel(
        &self,
        ticket: &TicketId,
        below_version: u64,
        kinds: &[SummaryKind],
    ) -> Result<u64, StoreError> {
        if kinds.is_empty() {
            return Ok(0);
        }
        let mut invocation = SCRIPTS.cancel.prepare_invoke();
        invocation
            .key(self.key(&["ticket_jobs", ticket.as_str()]))
            .arg(&self.prefix)
            .arg(ticket.as_str())
            .arg(below_version);
        for kind in kinds {
            invocation.arg(kind.as_str());
        }
        self.run(&invocation).await
    }

    async fn queue_stats(&self, tier: Tier) -> Result<QueueStats, StoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for severity in Severity::ALL {
            let key = self.key(&["pending", tier.as_str(), &severity.rank().to_string()]);
            pipe.zcard(&key).zrange_withscores(&key, 0, 0);
        }
        pipe.zcard(self.key(&["held", tier.as_str()]));
        pipe.zcard(self.key(&["leased", tier.as_str()]));
        let mut replies: Vec<Value> = self.run_pipeline(&pipe).await?;
        let mut count = || -> Result<u64, StoreError> {
            Ok(replies
                .pop()
                .map(redis::from_redis_value)
                .transpose()
                .map_err(|e| StoreError::Corrupt(e.to_string()))?
                .unwrap_or(0))
        };
        let leased = count()?;
        let held = count()?;
        let mut stats = QueueStats {
            leased,
            held,
            ..QueueStats::default()
        };
        for (severity, pair) in Severity::ALL.iter().zip(replies.chunks(2)) {
            let [count, head] = pair else { continue };
            let count: u64 = redis::from_redis_value(count.clone())
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let head: Vec<(String, f64)> = redis::from_redis_value(head.clone())
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let oldest = head.first().map(|(_, score)| EpochMillis(*score as u64));
            stats.pending += count;
            stats.pending_by_severity[severity.index()] = count;
            stats.oldest_by_severity[severity.index()] = oldest;
            stats.oldest_enqueued_at = match (stats.oldest_enqueued_at, oldest) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(stats)
    }

    async fn job_exists(&self, id: &JobId) -> Result<bool, StoreError> {
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(self.key(&["job", &id.to_string()]));
        let exists: u8 = self.query(&cmd).await?;
        Ok(exists == 1)
    }

    async fn dead_letter(&self, entry: &DeadLetter) -> Result<String, StoreError> {
        let mut cmd = SCRIPTS.dead_letter.prepare_invoke();
        cmd.key(self.key(&["dead_letters"]))
            .arg(&self.prefix)
            .arg(self.limits.dead_letter_cap)
            .arg("reason")
            .arg(&entry.reason)
            .arg("raw")
            .arg(&entry.raw)
            .arg("at")
            .arg(entry.at.as_millis())
            .arg("replayable")
            .arg(if entry.replayable { "1" } else { "0" });
        if let Some(action) = &entry.headers.action {
            cmd.arg("action").arg(action);
        }
        if let Some(table_name) = &entry.headers.table_name {
            cmd.arg("table_name").arg(table_name);
        }
        if let Some(topic) = &entry.topic {
            cmd.arg("topic").arg(topic);
        }
        if let Some(partition) = entry.partition {
            cmd.arg("partition").arg(partition);
        }
        if let Some(offset) = entry.offset {
            cmd.arg("offset").arg(offset);
        }
        self.run(&cmd).await
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<(String, DeadLetter)>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("XRANGE");
        cmd.arg(self.key(&["dead_letters"]))
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(redis_count(limit));
        let reply: Value = self.query(&cmd).await?;
        stream_entries(reply)?
            .into_iter()
            .map(|(id, fields)| {
                let letter = dead_letter_from_fields(&id, &fields)?;
                Ok((id, letter))
            })
            .collect()
    }

    async fn remove_dead_letter(&self, id: &str) -> Result<bool, StoreError> {
        if !is_stream_id(id) {
            return Ok(false);
        }
        let mut cmd = redis::cmd("XDEL");
        cmd.arg(self.key(&["dead_letters"])).arg(id);
        let removed: u64 = self.query(&cmd).await?;
        Ok(removed == 1)
    }

    async fn take_due_regions(&self) -> Result<Vec<String>, StoreError> {
        let mut invocation = SCRIPTS.take_due_regions.prepare_invoke();
        invocation.key(self.key(&["rollup_due"])).arg(&self.prefix);
        let mut regions: Vec<String> = self.run(&invocation).await?;
        regions.sort();
        Ok(regions)
    }

    async fn purge_expired(
        &self,
        now: EpochMillis,
        limit: usize,
    ) -> Result<PurgeReport, StoreError> {
        if limit == 0 {
            return Ok(PurgeReport::default());
        }
        let mut invocation = SCRIPTS.purge.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(now.as_millis())
            .arg(redis_count(limit));
        let (tickets, more_due): (u64, u8) = self.run(&invocation).await?;
        Ok(PurgeReport {
            tickets,
            more_due: more_due == 1,
        })
    }

    async fn dead_letter_stats(&self) -> Result<DeadLetterStats, StoreError> {
        let mut pipe = redis::pipe();
        pipe.cmd("XLEN")
            .arg(self.key(&["dead_letters"]))
            .cmd("GET")
            .arg(self.key(&["dead_letters_trimmed"]));
        let (entries, trimmed): (u64, Option<u64>) = self.run_pipeline(&pipe).await?;
        Ok(DeadLetterStats {
            entries,
            cap: self.limits.dead_letter_cap,
            trimmed_total: trimmed.unwrap_or(0),
        })
    }

    async fn region_tickets(
        &self,
        region: &str,
        limit: usize,
    ) -> Result<Vec<TicketId>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("ZREVRANGE");
        cmd.arg(self.key(&["region_tickets", region]))
            .arg(0)
            .arg(redis_count(limit) - 1);
        let members: Vec<String> = self.query(&cmd).await?;
        members
            .iter()
            .map(|m| {
                m.parse()
                    .map_err(|e: crate::ticket_id::TicketIdParseError| {
                        StoreError::Corrupt(e.to_string())
                    })
            })
            .collect()
    }

    async fn put_summary_owed(
        &self,
        summary: &Summary,
        owes: bool,
        now: EpochMillis,
    ) -> Result<PutOutcome, StoreError> {
        let id = JobId {
            ticket: summary.ticket.clone(),
            version: summary.version,
            kind: summary.kind,
        };
        let mut invocation = LEDGER_SCRIPTS.put_summary_owed.prepare_invoke();
        invocation
            .key(self.key(&["summary", summary.ticket.as_str()]))
            .arg(&self.prefix)
            .arg(summary.ticket.as_str())
            .arg(summary.kind.as_str())
            .arg(summary.version)
            .arg(summary_rank(summary))
            .arg(to_json(summary)?)
            .arg(if owes { "1" } else { "0" })
            .arg(now.as_millis())
            .arg(id.to_string());
        Ok(put_outcome(self.run(&invocation).await?))
    }

    async fn claim_owed(
        &self,
        ids: &[JobId],
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Result<Vec<JobId>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut invocation = LEDGER_SCRIPTS.claim_owed.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(now.as_millis())
            .arg(hold_until.as_millis());
        for id in ids {
            invocation.arg(id.kind.as_str()).arg(id.to_string());
        }
        job_ids(self.run(&invocation).await?)
    }

    async fn claim_due_owed(
        &self,
        kind: SummaryKind,
        limit: usize,
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Result<Vec<JobId>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut invocation = LEDGER_SCRIPTS.claim_due_owed.prepare_invoke();
        invocation
            .key(self.key(&["owed", kind.as_str()]))
            .arg(&self.prefix)
            .arg(now.as_millis())
            .arg(hold_until.as_millis())
            .arg(redis_count(limit));
        job_ids(self.run(&invocation).await?)
    }

    async fn complete_owed(&self, ids: &[JobId]) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut invocation = LEDGER_SCRIPTS.complete_owed.prepare_invoke();
        invocation.arg(&self.prefix);
        for id in ids {
            invocation
                .arg(id.kind.as_str())
                .arg(id.to_string())
                .arg(id.ticket.as_str())
                .arg(id.version);
        }
        self.run(&invocation).await
    }

    async fn owed_stats(
        &self,
        kind: SummaryKind,
        now: EpochMillis,
    ) -> Result<OwedStats, StoreError> {
        let key = self.key(&["owed", kind.as_str()]);
        let mut pipe = redis::pipe();
        pipe.zcount(&key, "-inf", now.as_millis()).zcard(&key);
        let (due, all): (u64, u64) = self.run_pipeline(&pipe).await?;
        Ok(OwedStats {
            due,
            claimed: all.saturating_sub(due),
        })
    }

    async fn claim_calls(
        &self,
        ids: &[JobId],
        holder: &str,
        now: EpochMillis,
        until: EpochMillis,
    ) -> Result<Vec<CallClaim>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut invocation = LEDGER_SCRIPTS.claim_calls.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(holder)
            .arg(now.as_millis())
            .arg(until.as_millis());
        for id in ids {
            invocation
                .arg(id.to_string())
                .arg(id.ticket.as_str())
                .arg(id.kind.as_str())
                .arg(id.version);
        }
        let reply: Vec<String> = self.run(&invocation).await?;
        reply.iter().map(|r| call_claim(r)).collect()
    }

    async fn renew_calls(
        &self,
        ids: &[JobId],
        holder: &str,
        now: EpochMillis,
        until: EpochMillis,
    ) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut invocation = LEDGER_SCRIPTS.renew_calls.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(holder)
            .arg(now.as_millis())
            .arg(until.as_millis());
        for id in ids {
            invocation.arg(id.to_string());
        }
        self.run(&invocation).await
    }

    async fn release_calls(&self, ids: &[JobId], holder: &str) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut invocation = LEDGER_SCRIPTS.release_calls.prepare_invoke();
        invocation.arg(&self.prefix).arg(holder);
        for id in ids {
            invocation.arg(id.to_string());
        }
        self.run::<u64>(&invocation).await?;
        Ok(())
    }
}

#[async_trait]
impl ConsoleStore for RedisStore {
    async fn ticket_by_number(
        &self,
        number: &TicketNumber,
    ) -> Result<Option<TicketId>, StoreError> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.key(&["number", number.as_str()]));
        let id: Option<String> = self.query(&cmd).await?;
        id.map(|id| {
            id.parse()
                .map_err(|e: crate::ticket_id::TicketIdParseError| {
                    StoreError::Corrupt(e.to_string())
                })
        })
        .transpose()
    }

    async fn severity_breakdown(
        &self,
        tier: Tier,
        head: usize,
    ) -> Result<SeverityBreakdown, StoreError> {
        let mut invocation = CONSOLE_SCRIPTS.severity_breakdown.prepare_invoke();
        invocation
            .arg(&self.prefix)
            .arg(tier.as_str())
            .arg(redis_count(head))
            .arg(BREAKDOWN_SCAN);
        type Reply = (Vec<u64>, Vec<Vec<String>>, Vec<u64>, Vec<u64>);
        let (pending, oldest, held, leased): Reply = self.run(&invocation).await?;
        let five = |v: Vec<u64>| -> Result<[u64; 5], StoreError> {
            v.try_into()
                .map_err(|_| StoreError::Corrupt("severity breakdown: not 5 ranks".into()))
        };
        let mut breakdown = SeverityBreakdown {
            pending: five(pending)?,
            held: five(held)?,
            leased: five(leased)?,
            ..SeverityBreakdown::default()
        };
        for (slot, jsons) in breakdown.oldest.iter_mut().zip(oldest) {
            for json in jsons {
                let mut job: Job = from_json(&json)?;
                job.tier = tier;
                slot.push(job);
            }
        }
        Ok(breakdown)
    }

    async fn resummarize(&self, jobs: &[Job]) -> Result<Vec<ResummarizeOutcome>, StoreError> {
        let mut outcomes = Vec::with_capacity(jobs.len());
        for job in jobs {
            let mut invocation = CONSOLE_SCRIPTS.resummarize.prepare_invoke();
            invocation.arg(&self.prefix);
            push_job_args(&mut invocation, job)?;
            let reply: String = self.run(&invocation).await?;
            outcomes.push(match reply.as_str() {
                "queued" => ResummarizeOutcome::Queued,
                "already_llm" => ResummarizeOutcome::AlreadyLlm,
                "in_flight" => ResummarizeOutcome::InFlight,
                "stale" => ResummarizeOutcome::Stale,
                other => {
                    return Err(StoreError::Corrupt(format!(
                        "unexpected resummarize reply {other:?}"
                    )));
                }
            });
        }
        Ok(outcomes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_parses_only_hash_tag_safe_text() {
        assert!("stormgate".parse::<Namespace>().is_ok());
        assert!("tenant-a:test_1.x".parse::<Namespace>().is_ok());
        for bad in ["", "a}b", "{a}", "a b", "ä", &"x".repeat(65)] {
            assert!(bad.parse::<Namespace>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn stream_ids_are_recognised() {
        assert!(is_stream_id("1700000000000-0"));
        assert!(!is_stream_id("1700000000000"));
        assert!(!is_stream_id("x-1"));
        assert!(!is_stream_id("1-"));
    }
}
