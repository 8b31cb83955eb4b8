//! What a local run went through, per ticket, in the storm lab's own terms
//! ([`TicketTrack`]), so that [`crate::report`] turns it into the same
//! figures as `stormgate replay`:
//!
//! - arrival: when the trace's event was produced to the topic;
//! - first summary: when the `classify` invocation that stored it answered 2xx;
//! - LLM summary, tier, settled and wait: when a tier function's answer says the job's
//!   summary is the LLM's (or its fallback), from the job in the hand-off message
//!   (its routing severity and `enqueued_at`) and the answer's instant;
//! - jobs `dispatch` spilled to the extractive summary settle inside `dispatch` and its
//!   answer names none, so they are taken from the read API at the end
//!   ([`Recorder::settle_from_read_api`]): the degraded summary's `created_at`.
//!
//! - technician jobs queued (one per version ingest accepted), and of those not seen
//!   leave, which were still queued at the end and which a newer version or a
//!   resolution cancelled ([`Recorder::close_open_job`]), as the replay counts them;
//! - what ingest made of the records, from `classify`'s answers.
//!
//! It also counts what the host did (invocations per function, failures, retries,
//! poisoned messages, lost Kafka batches) for the live line and the verdict.

use std::collections::{BTreeMap, BTreeSet};

use crate::replay::{IngestTally, TicketTrack};
use crate::report::Percentiles;
use crate::trace::TraceEvent;
use serde::Serialize;
use serde_json::Value;
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::dispatcher::AdmittedGroup;
use stormgate_shared::job::{SummaryKind, Tier};

use super::verdict::ExpectedJob;
use crate::functions_host::runtime::{HostEvent, TriggerInput};

/// Invocations of one function.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct InvocationCounts {
    pub succeeded: u64,
    pub failed: u64,
    /// Attempts made under the function's retry policy.
    pub retries: u64,
}

/// What the host did over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostCounts {
    pub invocations: BTreeMap<String, InvocationCounts>,
    pub poisoned: u64,
    pub kafka_batches_lost: u64,
    pub kafka_records_lost: u64,
    /// The hops the virtual-time replay does not have, in seconds: a record's wait in
    /// the topic (produced to the start of the `classify` invocation that took it), and
    /// a hand-off's wait in its Storage queue (`dispatch` answered to the start of its
    /// first delivery).
    pub kafka_wait_seconds: Option<Percentiles>,
    pub queue_wait_seconds: Option<Percentiles>,
    /// How long tier-function invocations ran.
    pub tier_invocation_seconds: Option<Percentiles>,
}

/// The figures of the minute in progress, for the live line.
#[derive(Debug, Clone, Copy, Default)]
pub struct MinuteTally {
    pub arrived: u64,
    pub classified: u64,
    pub llm_summaries: u64,
    pub fallbacks: u64,
    pub failed_invocations: u64,
}

#[derive(Debug, Default)]
pub struct Recorder {
    pub tickets: BTreeMap<String, TicketTrack>,
    /// sys_id → number.
    numbers: BTreeMap<String, String>,
    pub counts: HostCounts,
    pub minute: MinuteTally,
    /// When each record was produced, by offset (the topic numbers them from 0 in
    /// the order they were produced).
    produced: Vec<EpochMillis>,
    kafka_waits: Vec<f64>,
    queue_waits: Vec<f64>,
    tier_runs: Vec<f64>,
    /// Technician jobs seen leave the queue, by (sys_id, version).
    left: BTreeSet<(String, u64)>,
    ingest: IngestTally,
}

impl Recorder {
    /// The trace's event `e` was produced to the topic at `at`.
    pub fn arrived(&mut self, e: &TraceEvent, seed: u64, at: EpochMillis) {
        self.produced.push(at);
        let number = e.number();
        self.numbers.insert(e.sys_id(seed), number.clone());
        self.minute.arrived += 1;
        self.tickets
            .entry(number.clone())
            .or_insert_with(|| TicketTrack::arriving(number, e.severity(), at));
    }

    fn track(&mut self, sys_id: &str) -> Option<&mut TicketTrack> {
        let number = self.numbers.get(sys_id)?;
        self.tickets.get_mut(number)
    }

    /// The sys_ids of every ticket seen, with their numbers.
    pub fn sys_ids(&self) -> impl Iterator<Item = (&String, &String)> {
        self.numbers.iter()
    }

    pub fn observe(&mut self, event: &HostEvent) {
        match event {
            HostEvent::Poisoned { .. } => self.counts.poisoned += 1,
            HostEvent::KafkaBatchLost { records, .. } => {
                self.counts.kafka_batches_lost += 1;
                self.counts.kafka_records_lost += *records as u64;
            }
            HostEvent::Invoked {
                function,
                input,
                retry,
                started,
                finished,
                answer,
            } => {
                let seconds = |from: EpochMillis, to: EpochMillis| to.since(from).as_secs_f64();
                match input {
                    TriggerInput::Kafka(records) if *retry == 0 => {
                        for r in records {
                            let produced = usize::try_from(r.offset)
                                .ok()
                                .and_then(|o| self.produced.get(o));
                            if let Some(&at) = produced {
                                self.kafka_waits.push(seconds(at, *started));
                            }
                        }
                    }
                    TriggerInput::Queue(message) => {
                        if message.dequeue_count == 1 && *retry == 0 {
                            self.queue_waits.push(seconds(message.inserted, *started));
                        }
                        self.tier_runs.push(seconds(*started, *finished));
                    }
                    _ => {}
                }
                let counts = self.counts.invocations.entry(function.clone()).or_default();
                if *retry > 0 {
                    counts.retries += 1;
                }
                if !answer.is_success() {
                    counts.failed += 1;
                    self.minute.failed_invocations += 1;
                    return;
                }
                counts.succeeded += 1;
                match input {
                    TriggerInput::Kafka(records) => {
                        self.count_ingest(answer.return_value());
                        for r in records {
                            self.minute.classified += 1;
                            if let Some(id) = r.event["sys_id"].as_str()
                                && let Some(t) = self.track(id)
                            {
                                t.first_summary.get_or_insert(*finished);
                            }
                        }
                    }
                    TriggerInput::Queue(message) => {
                        self.summarized(&message.body, answer.return_value(), *finished);
                    }
                    TriggerInput::Timer(_) => {}
                }
            }
        }
    }

    /// A tier function settled the jobs of `handoff`; `report` is its `ReturnValue`.
    fn summarized(&mut self, handoff: &Value, report: &Value, at: EpochMillis) {
        let Ok(group) = serde_json::from_value::<AdmittedGroup>(handoff.clone()) else {
            return;
        };
        for lease in &group.leases {
            if lease.job.id.kind != SummaryKind::Technician {
                continue;
            }
            let source = &report["summaries"][lease.job.id.to_string()]["source"];
            let llm = source == "llm";
            if llm {
                self.minute.llm_summaries += 1;
            } else {
                self.minute.fallbacks += 1;
            }
            self.left.insert((
                lease.job.id.ticket.as_str().to_owned(),
                lease.job.id.version,
            ));
            let Some(t) = self.track(lease.job.id.ticket.as_str()) else {
                continue;
            };
            t.settled = Some(at);
            t.record_wait(lease, at);
            if llm {
                t.llm_summary.get_or_insert(at);
                t.llm_tier.get_or_insert(group.tier);
            } else {
                t.extractive_only = t.llm_summary.is_none();
            }
        }
    }

    /// The read API's answer for a ticket at the end of the run: a technician summary
    /// that is `dispatch`'s degraded extractive one settles the ticket at its
    /// `created_at` if no tier function did.
    pub fn settle_from_read_api(&mut self, sys_id: &str, summaries: &Value) {
        let technician = &summaries["summaries"][SummaryKind::Technician.as_str()];
        if technician.is_null() {
            return;
        }
        let tier: Option<Tier> = serde_json::from_value(technician["tier"].clone()).ok();
        let degraded = technician["degraded"].as_bool().unwrap_or(false);
        let spilled = tier == Some(Tier::Extractive) && degraded;
        if spilled && let Some(version) = technician["version"].as_u64() {
            self.left.insert((sys_id.to_owned(), version));
        }
        let Some(t) = self.track(sys_id) else {
            return;
        };
        if spilled && t.llm_summary.is_none() {
            t.extractive_only = true;
            if t.settled.is_none()
                && let Some(at) = technician["created_at"].as_u64().map(EpochMillis)
            {
                t.settled = Some(at);
                t.max_wait_ms = t
                    .max_wait_ms
                    .max(u64::try_from(at.since(t.arrived).as_millis()).unwrap_or(u64::MAX));
            }
        }
    }

    /// A `classify` answer's counts (its `ReturnValue`, ingest's `BatchOutcome`).
    fn count_ingest(&mut self, outcome: &Value) {
        let count = |name: &str| outcome[name].as_u64().unwrap_or(0);
        self.ingest.accepted += count("accepted");
        self.ingest.duplicate_or_stale += count("duplicate_or_stale");
        let dead_lettered = count("dead_lettered");
        if dead_lettered > 0 {
            self.ingest.rejected += dead_lettered;
            // classify's answer counts dead letters without their reasons; the
            // dead-letter stream (`stormgate dead-letters`) has them.
            *self
                .ingest
                .rejected_by_reason
                .entry("dead-lettered by classify".to_owned())
                .or_default() += dead_lettered;
        }
    }

    /// What ingest made of the records, as `classify` answered.
    pub fn ingest_tally(&self) -> IngestTally {
        self.ingest.clone()
    }

    /// A technician job ingest queued: counted; whether it was seen leave the queue.
    pub fn technician_job_queued(&mut self, job: &ExpectedJob) -> bool {
        if let Some(t) = self.track(&job.sys_id) {
            t.technician_jobs += 1;
        }
        self.left.contains(&(job.sys_id.clone(), job.version))
    }

    /// A technician job not seen leave: still in the store's queue at the end (it
    /// waited since its record was produced), or cancelled by a newer version or a
    /// resolution (it waited for nothing).
    pub fn close_open_job(&mut self, job: &ExpectedJob, still_in_store: bool) {
        let queued_at = self.produced.get(job.event).copied();
        let Some(t) = self.track(&job.sys_id) else {
            return;
        };
        match (still_in_store, queued_at) {
            (true, Some(at)) => {
                if t.still_queued.is_none_or(|(since, _)| at < since) {
                    t.still_queued = Some((at, job.severity));
                }
            }
            _ => t.cancelled_jobs += 1,
        }
    }

    /// The host's counts with the hops' percentiles.
    pub fn host_counts(&self) -> HostCounts {
        HostCounts {
            kafka_wait_seconds: Percentiles::of(self.kafka_waits.clone()),
            queue_wait_seconds: Percentiles::of(self.queue_waits.clone()),
            tier_invocation_seconds: Percentiles::of(self.tier_runs.clone()),
            ..self.counts.clone()
        }
    }

    /// Starts the next minute's tally; returns the one that ended.
    pub fn next_minute(&mut self) -> MinuteTally {
        std::mem::take(&mut self.minute)
    }
}
