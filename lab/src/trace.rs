//! What a replay feeds in: ticket events with arrival instants, either planned by a
//! scenario or read from a real ServiceNow incident export ([`crate::history`],
//! `--history FILE`), already in the event contract.

use serde_json::Value;

use crate::scenario::{PlannedEvent, render_event, sys_id};
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::severity::Severity;

/// One event of a replay.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    Planned(PlannedEvent),
    Recorded(RecordedEvent),
}

/// A row of a recorded history, already in the event contract.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEvent {
    pub at: EpochMillis,
    pub number: String,
    pub sys_id: String,
    pub severity: Severity,
    pub record: Value,
}

impl TraceEvent {
    pub fn at(&self) -> EpochMillis {
        match self {
            TraceEvent::Planned(p) => p.at,
            TraceEvent::Recorded(r) => r.at,
        }
    }

    pub fn number(&self) -> String {
        match self {
            TraceEvent::Planned(p) => p.number(),
            TraceEvent::Recorded(r) => r.number.clone(),
        }
    }

    pub fn sys_id(&self, seed: u64) -> String {
        match self {
            TraceEvent::Planned(p) => sys_id(seed, p.ticket.index),
            TraceEvent::Recorded(r) => r.sys_id.clone(),
        }
    }

    /// The priority ServiceNow carries: what the report groups by.
    pub fn severity(&self) -> Severity {
        match self {
            TraceEvent::Planned(p) => p.ticket.severity,
            TraceEvent::Recorded(r) => r.severity,
        }
    }

    /// The incident record a producer would publish.
    pub fn record(&self, seed: u64) -> Value {
        match self {
            TraceEvent::Planned(p) => render_event(seed, p),
            TraceEvent::Recorded(r) => r.record.clone(),
        }
    }
}
