//! Technician summaries written back to ServiceNow as work notes.
//!
//! `PATCH /api/now/table/incident/{sys_id}` with `{"work_notes": "..."}` appends a
//! journal entry. The write-back must never hold up summaries: each note gets one
//! short attempt, and whatever fails goes to a Redis-backed outbox that later ticks
//! drain. ServiceNow limits REST calls per user per hour and answers 429 with
//! `Retry-After`; that wait is honoured for the whole instance (no call before it
//! ends), and it is the only retrying this sink does.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use stormgate_shared::clock::{Clock, EpochMillis};
use stormgate_shared::fault_switches::{self, Mechanism};
use stormgate_shared::llm::parse_retry_after;
use stormgate_shared::summarize::WorkNote;
use stormgate_shared::ticket_id::TicketId;

/// How long to stay away after a 429 that names no wait.
const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(60);
/// A pending note is dropped after this many failed attempts.
pub const MAX_NOTE_ATTEMPTS: u32 = 20;

#[derive(Debug, Clone)]
pub struct ServiceNowConfig {
    /// `https://<instance>.service-now.com`.
    pub instance_url: String,
    pub username: String,
    pub password: String,
    pub timeout: Duration,
}

/// Why one write-back attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteBackError {
    #[error("ServiceNow rate limit; retry after {wait:?}")]
    RateLimited { wait: Duration },
    #[error("ServiceNow is cooling down until {until}")]
    CoolingDown { until: EpochMillis },
    #[error("ServiceNow answered {status}: {message}")]
    Server { status: u16, message: String },
    /// 4xx other than 429: the record is gone or the credentials are wrong.
    #[error("ServiceNow rejected the note ({status}): {message}")]
    Rejected { status: u16, message: String },
    #[error("ServiceNow unreachable: {0}")]
    Transport(String),
}

impl WriteBackError {
    /// Whether sending the same note later may succeed.
    pub fn is_transient(&self) -> bool {
        !matches!(self, WriteBackError::Rejected { .. })
    }
}

/// The Table API client for work notes.
#[derive(Debug)]
pub struct ServiceNowClient {
    http: reqwest::Client,
    config: ServiceNowConfig,
    /// No call before this instant (set by a 429's Retry-After).
    cooldown_until: Mutex<EpochMillis>,
}

impl ServiceNowClient {
    pub fn new(config: ServiceNowConfig) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .retry(reqwest::retry::never())
            .build()?;
        Ok(ServiceNowClient {
            http,
            config,
            cooldown_until: Mutex::new(EpochMillis::ZERO),
        })
    }

    /// Until when this instance stays away from ServiceNow.
    pub fn cooldown_until(&self) -> EpochMillis {
        self.cooldown_until
            .lock()
            .map(|c| *c)
            .unwrap_or(EpochMillis::ZERO)
    }

    /// One attempt to append `text` as a work note of incident `sys_id`.
    pub async fn add_work_note(
        &self,
        sys_id: &TicketId,
        text: &str,
        now: EpochMillis,
    ) -> Result<(), WriteBackError> {
        let until = self.cooldown_until();
        if now < until {
            return Err(WriteBackError::CoolingDown { until });
        }
        let url = format!(
            "{}/api/now/table/incident/{}?sysparm_fields=sys_id",
            self.config.instance_url.trim_end_matches('/'),
            sys_id.as_str()
        );
        let response = self
            .http
            .patch(url)
            .basic_auth(&self.config.username, Some(&self.config.password))
            .header("accept", "application/json")
            .json(&json!({ "work_notes": text }))
            .send()
            .await
            .map_err(|e| WriteBackError::Transport(e.to_string()))?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(());
        }
        if status == 429 {
            let wait = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, now))
                .unwrap_or(DEFAULT_RATE_LIMIT_WAIT);
            if let Ok(mut until) = self.cooldown_until.lock() {
                *until = (*until).max(now.plus(wait));
            }
            return Err(WriteBackError::RateLimited { wait });
        }
        let message: String = response
            .text()
            .await
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect();
        if status >= 500 {
            Err(WriteBackError::Server { status, message })
        } else {
            Err(WriteBackError::Rejected { status, message })
        }
    }
}

/// A work note waiting to be delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingNote {
    pub note: WorkNote,
    pub attempts: u32,
}

/// Failures of the outbox's storage.
#[derive(Debug, thiserror::Error)]
#[error("work-note outbox unavailable: {0}")]
pub struct OutboxError(String);

impl From<redis::RedisError> for OutboxError {
    fn from(e: redis::RedisError) -> Self {
        OutboxError(e.to_string())
    }
}

/// Pending work notes in Redis: a sorted set scored by the earliest next attempt.
/// Taking a note removes it (ZREM decides which instance got it), so two instances
/// draining at once never send the same note twice.
#[derive(Clone)]
pub struct WorkNoteOutbox {
    redis: redis::aio::ConnectionManager,
    key: String,
}

impl std::fmt::Debug for WorkNoteOutbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkNoteOutbox")
            .field("key", &self.key)
            .finish()
    }
}

impl WorkNoteOutbox {
    pub const DEFAULT_KEY: &'static str = "stormgate:servicenow:pending";

    pub fn new(redis: redis::aio::ConnectionManager, key: impl Into<String>) -> Self {
        WorkNoteOutbox {
            redis,
            key: key.into(),
        }
    }

    pub async fn push(
        &self,
        note: &PendingNote,
        not_before: EpochMillis,
    ) -> Result<(), OutboxError> {
        let member = serde_json::to_string(note).map_err(|e| OutboxError(e.to_string()))?;
        let mut conn = self.redis.clone();
        redis::cmd("ZADD")
            .arg(&self.key)
            .arg(not_before.as_millis())
            .arg(member)
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }

    /// Removes and returns up to `limit` notes due at `now`.
    pub async fn take_due(
        &self,
        now: EpochMillis,
        limit: usize,
    ) -> Result<Vec<PendingNote>, OutboxError> {
        let mut conn = self.redis.clone();
        let members: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(&self.key)
            .arg("-inf")
            .arg(now.as_millis())
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .query_async(&mut conn)
            .await?;
        let mut taken = Vec::with_capacity(members.len());
        for member in members {
            let removed: u64 = redis::cmd("ZREM")
                .arg(&self.key)
                .arg(&member)
                .query_async(&mut conn)
                .await?;
            if removed == 0 {
                continue; // another instance took it
            }
            match serde_json::from_str(&member) {
                Ok(note) => taken.push(note),
                Err(e) => tracing::error!(error = %e, "dropping an undecodable pending work note"),
            }
        }
        Ok(taken)
    }

    pub async fn pending(&self) -> Result<u64, OutboxError> {
        let mut conn = self.redis.clone();
        Ok(redis::cmd("ZCARD")
            .arg(&self.key)
            .query_async(&mut conn)
            .await?)
    }
}

/// What one delivery round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryReport {
    pub delivered: usize,
    pub queued: usize,
    pub dropped: usize,
}

/// The work-note sink: one attempt now, the outbox for later.
#[derive(Debug)]
pub struct WorkNoteSink {
    pub client: ServiceNowClient,
    pub outbox: WorkNoteOutbox,
}

impl WorkNoteSink {
    /// Tries each note once; what fails transiently is queued (after the cooldown when
    /// ServiceNow asked for one), what ServiceNow rejects is dropped with a log line.
    pub async fn deliver(
        &self,
        notes: Vec<PendingNote>,
        clock: &dyn Clock,
    ) -> Result<DeliveryReport, OutboxError> {
        let mut report = DeliveryReport::default();
        for mut pending in notes {
            let now = clock.now();
            match self
                .client
                .add_work_note(&pending.note.ticket, &pending.note.text, now)
                .await
            {
                Ok(()) => report.delivered += 1,
                Err(error)
                    if !error.is_transient() || pending.attempts + 1 >= MAX_NOTE_ATTEMPTS =>
                {
                    tracing::warn!(ticket = %pending.note.number, %error, "work note dropped");
                    report.dropped += 1;
                }
                Err(error) if fault_switches::is_off(Mechanism::WorkNoteOutbox) => {
                    tracing::warn!(ticket = %pending.note.number, %error, "work note dropped");
                    report.dropped += 1;
                }
                Err(error) => {
                    // A note that never reached ServiceNow (cooling down) keeps its count.
                    if !matches!(error, WriteBackError::CoolingDown { .. }) {
                        pending.attempts += 1;
                    }
                    let not_before = self
                        .client
                        .cooldown_until()
                        .max(now.plus(retry_delay(pending.attempts)));
                    self.outbox.push(&pending, not_before).await?;
                    report.queued += 1;
                }
            }
        }
        Ok(report)
    }

    /// Delivers fresh notes from a tier function.
    pub async fn deliver_new(
        &self,
        notes: &[WorkNote],
        clock: &dyn Clock,
    ) -> Result<DeliveryReport, OutboxError> {
        let pending = notes
            .iter()
            .map(|note| PendingNote {
                note: note.clone(),
                attempts: 0,
            })
            .collect();
        self.deliver(pending, clock).await
    }

    /// Retries what is due in the outbox (called from a timer).
    pub async fn drain(
        &self,
        clock: &dyn Clock,
        limit: usize,
    ) -> Result<DeliveryReport, OutboxError> {
        if clock.now() < self.client.cooldown_until() {
            return Ok(DeliveryReport::default());
        }
        let due = self.outbox.take_due(clock.now(), limit).await?;
        self.deliver(due, clock).await
    }
}

/// 30 s, doubling per failed attempt, at most an hour (ServiceNow's limits are hourly).
fn retry_delay(attempts: u32) -> Duration {
    Duration::from_secs(30)
        .saturating_mul(1u32 << attempts.min(7))
        .min(Duration::from_secs(3600))
}
