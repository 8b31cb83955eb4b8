//! Technician summaries written back to ServiceNow as work notes.
//!
//! `PATCH /api/now/table/incident/{sys_id}` with `{"work_notes": "..."}` appends a
//! journal entry. The write-back must never hold up summaries: each note gets one
//! short attempt after its summary is stored, and whatever fails goes to a Redis-backed
//! outbox that the `dispatch` timer drains within a bounded time. ServiceNow limits
//! REST calls per user per hour and answers 429 with `Retry-After`; that wait is
//! honoured by the whole fleet (it is kept next to the outbox, and no instance calls
//! before it ends), and the outbox is the only retrying this sink does.
//!
//! Delivery is at least once: a drain claims a note (moving its due time past a hold)
//! before sending it and removes it only after ServiceNow answered, so a drain that is
//! cut short or an instance that dies mid-call leaves the note to be sent again after
//! the hold, never lost.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use stormgate_shared::clock::{Clock, EpochMillis};
use stormgate_shared::fault_switches::{self, Mechanism};
use stormgate_shared::llm::parse_retry_after;
use stormgate_shared::redis_link::RedisLink;
use stormgate_shared::sinks::WorkNote;
use stormgate_shared::store::StoreError;
use stormgate_shared::store::outbox::{OutboxStore, RedisOutbox};
use stormgate_shared::ticket_id::TicketId;

use crate::secrets::Secret;

/// How long to stay away after a 429 that names no wait.
const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(60);
/// A pending note is dropped after this many failed attempts.
pub const MAX_NOTE_ATTEMPTS: u32 = 20;

#[derive(Debug, Clone)]
pub struct ServiceNowConfig {
    /// `https://<instance>.service-now.com`.
    pub instance_url: String,
    pub username: String,
    /// Leaves the process only as the basic-auth header.
    pub password: Secret,
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

    /// Stays away until `until` (a 429 another instance saw); never shortens.
    pub fn extend_cooldown(&self, until: EpochMillis) {
        if let Ok(mut current) = self.cooldown_until.lock() {
            *current = (*current).max(until);
        }
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
            .basic_auth(&self.config.username, Some(self.config.password.expose()))
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
            self.extend_cooldown(now.plus(wait));
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

impl From<StoreError> for OutboxError {
    /// The storage's own words: the message already says the outbox is unavailable.
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(message) | StoreError::Corrupt(message) => OutboxError(message),
        }
    }
}

/// A note taken out of the outbox for one attempt: `member` is how it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedNote {
    pub pending: PendingNote,
    member: String,
}

/// Pending work notes, each stored as its JSON, in the outbox's storage
/// ([`stormgate_shared::store::outbox`]: a set scored by the earliest next attempt, and
/// the fleet-wide ServiceNow cooldown next to it).
#[derive(Debug, Clone)]
pub struct WorkNoteOutbox {
    store: Arc<dyn OutboxStore>,
}

impl WorkNoteOutbox {
    /// The keys' prefix under the handler's namespace.
    pub const DEFAULT_PREFIX: &'static str = "stormgate:servicenow";

    /// The outbox in Redis, keys `<prefix>:pending` and `<prefix>:cooldown_until`; the
    /// connection is made on first use, so building the outbox touches nothing.
    pub fn new(redis: Arc<RedisLink>, prefix: &str) -> Self {
        WorkNoteOutbox::over(Arc::new(RedisOutbox::new(redis, prefix)))
    }

    /// The outbox over any of its storage backends.
    pub fn over(store: Arc<dyn OutboxStore>) -> Self {
        WorkNoteOutbox { store }
    }

    /// Queues `note` for an attempt at or after `not_before`.
    pub async fn push(
        &self,
        note: &PendingNote,
        not_before: EpochMillis,
    ) -> Result<(), OutboxError> {
        self.push_all(std::slice::from_ref(note), not_before).await
    }

    /// Queues `notes` for attempts at or after `not_before`, in one round trip.
    pub async fn push_all(
        &self,
        notes: &[PendingNote],
        not_before: EpochMillis,
    ) -> Result<(), OutboxError> {
        let members = notes.iter().map(encode).collect::<Result<Vec<_>, _>>()?;
        Ok(self.store.push(&members, not_before).await?)
    }

    /// Takes the earliest note due at `now`, holding it until `hold_until`: if it is
    /// neither completed nor rescheduled by then, it is due again.
    pub async fn claim_due(
        &self,
        now: EpochMillis,
        hold_until: EpochMillis,
    ) -> Result<Option<ClaimedNote>, OutboxError> {
        loop {
            let Some(member) = self.store.claim_due(now, hold_until).await? else {
                return Ok(None);
            };
            match serde_json::from_str(&member) {
                Ok(pending) => return Ok(Some(ClaimedNote { pending, member })),
                Err(error) => {
                    tracing::error!(%error, "dropping an undecodable pending work note");
                    self.store.remove(&member).await?;
                }
            }
        }
    }

    /// Removes a claimed note for good (delivered, or dropped).
    pub async fn complete(&self, claimed: &ClaimedNote) -> Result<(), OutboxError> {
        Ok(self.store.remove(&claimed.member).await?)
    }

    /// Replaces a claimed note by `next`, due at `not_before`, in one step.
    pub async fn reschedule(
        &self,
        claimed: &ClaimedNote,
        next: &PendingNote,
        not_before: EpochMillis,
    ) -> Result<(), OutboxError> {
        let member = encode(next)?;
        Ok(self
            .store
            .reschedule(&claimed.member, &member, not_before)
            .await?)
    }

    /// Notes waiting, due or not.
    pub async fn pending(&self) -> Result<u64, OutboxError> {
        Ok(self.store.pending().await?)
    }

    /// Until when every instance stays away from ServiceNow (zero when it need not).
    pub async fn cooldown_until(&self) -> Result<EpochMillis, OutboxError> {
        Ok(self.store.cooldown_until().await?)
    }

    /// Tells every instance to stay away until `until` (`wait` from now).
    pub async fn extend_cooldown(
        &self,
        until: EpochMillis,
        wait: Duration,
    ) -> Result<(), OutboxError> {
        Ok(self.store.extend_cooldown(until, wait).await?)
    }
}

fn encode(note: &PendingNote) -> Result<String, OutboxError> {
    serde_json::to_string(note).map_err(|e| OutboxError(e.to_string()))
}

/// What one delivery round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryReport {
    pub delivered: usize,
    /// Put (back) in the outbox for a later attempt.
    pub queued: usize,
    pub dropped: usize,
}

/// What to do with a note after one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Disposition {
    Delivered,
    Dropped,
    /// Try again at `not_before`. ServiceNow is throttling or looks unavailable, so
    /// nothing more is attempted this round.
    Retry {
        next: PendingNote,
        not_before: EpochMillis,
    },
}

/// How long a drain holds a claimed note before another drain may take it again.
const CLAIM_HOLD: Duration = Duration::from_secs(120);

/// The work-note sink: one attempt now, the outbox for later.
#[derive(Debug)]
pub struct WorkNoteSink {
    pub client: ServiceNowClient,
    pub outbox: WorkNoteOutbox,
}

impl WorkNoteSink {
    /// Delivers fresh notes from a tier function: one attempt each; what fails
    /// transiently is queued (after the cooldown when ServiceNow asked for one), what
    /// ServiceNow rejects is dropped with a log line. After a failure that says
    /// ServiceNow is throttling or unavailable, the rest are queued without an attempt,
    /// so a slow ServiceNow costs the invocation one timeout at most.
    pub async fn deliver_new(
        &self,
        notes: &[WorkNote],
        clock: &dyn Clock,
    ) -> Result<DeliveryReport, OutboxError> {
        self.adopt_fleet_cooldown().await?;
        let mut report = DeliveryReport::default();
        let mut held_back: Option<EpochMillis> = None;
        for note in notes {
            let pending = PendingNote {
                note: note.clone(),
                attempts: 0,
            };
            if let Some(not_before) = held_back {
                self.outbox.push(&pending, not_before).await?;
                report.queued += 1;
                continue;
            }
            match self.attempt(pending, clock).await? {
                Disposition::Delivered => report.delivered += 1,
                Disposition::Dropped => report.dropped += 1,
                Disposition::Retry { next, not_before } => {
                    self.outbox.push(&next, not_before).await?;
                    report.queued += 1;
                    held_back = Some(not_before);
                }
            }
        }
        Ok(report)
    }

    /// Queues fresh notes in the outbox without an attempt, due at once (or when
    /// ServiceNow's Retry-After ends): for a caller that must not wait on ServiceNow for
    /// many notes, such as the `dispatch` tick, whose bounded drain then sends them.
    pub async fn enqueue(
        &self,
        notes: &[WorkNote],
        clock: &dyn Clock,
    ) -> Result<DeliveryReport, OutboxError> {
        self.adopt_fleet_cooldown().await?;
        let not_before = clock.now().max(self.client.cooldown_until());
        let pending: Vec<PendingNote> = notes
            .iter()
            .map(|note| PendingNote {
                note: note.clone(),
                attempts: 0,
            })
            .collect();
        self.outbox.push_all(&pending, not_before).await?;
        Ok(DeliveryReport {
            queued: notes.len(),
            ..DeliveryReport::default()
        })
    }

    /// Retries due notes from the outbox, at most `limit` of them and for at most
    /// `budget` of wall time (a note cut off mid-call is sent again after its hold).
    /// Sends nothing while ServiceNow's Retry-After runs, and stops at the first sign
    /// that ServiceNow is throttling or unavailable.
    pub async fn drain(
        &self,
        clock: &dyn Clock,
        limit: usize,
        budget: Duration,
    ) -> Result<DeliveryReport, OutboxError> {
        let mut report = DeliveryReport::default();
        let round = self.drain_round(clock, limit, &mut report);
        match tokio::time::timeout(budget, round).await {
            Ok(result) => result?,
            Err(_) => tracing::info!(
                ?report,
                "work-note drain stopped at its time budget; the rest wait for the next tick"
            ),
        }
        Ok(report)
    }

    async fn drain_round(
        &self,
        clock: &dyn Clock,
        limit: usize,
        report: &mut DeliveryReport,
    ) -> Result<(), OutboxError> {
        self.adopt_fleet_cooldown().await?;
        for _ in 0..limit {
            let now = clock.now();
            if now < self.client.cooldown_until() {
                break;
            }
            let Some(claimed) = self.outbox.claim_due(now, now.plus(CLAIM_HOLD)).await? else {
                break;
            };
            match self.attempt(claimed.pending.clone(), clock).await? {
                Disposition::Delivered => {
                    self.outbox.complete(&claimed).await?;
                    report.delivered += 1;
                }
                Disposition::Dropped => {
                    self.outbox.complete(&claimed).await?;
                    report.dropped += 1;
                }
                Disposition::Retry { next, not_before } => {
                    self.outbox.reschedule(&claimed, &next, not_before).await?;
                    report.queued += 1;
                    break;
                }
            }
        }
        Ok(())
    }

    /// Takes over a cooldown another instance was told by ServiceNow.
    async fn adopt_fleet_cooldown(&self) -> Result<(), OutboxError> {
        let until = self.outbox.cooldown_until().await?;
        self.client.extend_cooldown(until);
        Ok(())
    }

    /// One attempt at `pending`, and what follows from its answer.
    async fn attempt(
        &self,
        mut pending: PendingNote,
        clock: &dyn Clock,
    ) -> Result<Disposition, OutboxError> {
        let now = clock.now();
        let result = self
            .client
            .add_work_note(&pending.note.ticket, &pending.note.text, now)
            .await;
        let error = match result {
            Ok(()) => return Ok(Disposition::Delivered),
            Err(error) => error,
        };
        if let WriteBackError::RateLimited { wait } = &error {
            // Every instance honours the Retry-After, not only this one.
            self.outbox
                .extend_cooldown(self.client.cooldown_until(), *wait)
                .await?;
        }
        // A note that never reached ServiceNow (cooling down) keeps its count.
        if !matches!(error, WriteBackError::CoolingDown { .. }) {
            pending.attempts += 1;
        }
        // With the outbox switched off (fault-suite builds only), nothing is kept for later.
        let keep = !fault_switches::is_off(Mechanism::WorkNoteOutbox);
        if !error.is_transient() || pending.attempts >= MAX_NOTE_ATTEMPTS || !keep {
            tracing::warn!(ticket = %pending.note.number, attempts = pending.attempts, %error, "work note dropped");
            return Ok(Disposition::Dropped);
        }
        let not_before = match error {
            // ServiceNow said when: come back exactly then.
            WriteBackError::RateLimited { .. } | WriteBackError::CoolingDown { .. } => {
                self.client.cooldown_until()
            }
            _ => now.plus(retry_delay(pending.attempts)),
        };
        tracing::info!(ticket = %pending.note.number, attempts = pending.attempts, %error, not_before = not_before.as_millis(), "work note queued for a later attempt");
        Ok(Disposition::Retry {
            next: pending,
            not_before,
        })
    }
}

/// 30 s, doubling per failed attempt, at most an hour (ServiceNow's limits are hourly).
fn retry_delay(attempts: u32) -> Duration {
    Duration::from_secs(30)
        .saturating_mul(1u32 << attempts.min(7))
        .min(Duration::from_secs(3600))
}
