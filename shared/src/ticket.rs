//! The stored ticket: one accepted ServiceNow incident version as the product keeps it
//! (its state, levels, severity, people and log), whatever wire form it arrived in.
//! Reading that wire form is `crate::event`'s job.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::severity::Severity;
use crate::ticket_id::TicketId;

/// What the CDC producer says happened to the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CdcAction {
    Insert,
    #[default]
    Update,
    /// The record was deleted in ServiceNow: treated like a cancelled ticket.
    Delete,
}

/// ServiceNow incident `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TicketState {
    New,
    InProgress,
    OnHold,
    Resolved,
    Closed,
    Canceled,
}

impl TicketState {
    pub const ALL: [TicketState; 6] = [
        TicketState::New,
        TicketState::InProgress,
        TicketState::OnHold,
        TicketState::Resolved,
        TicketState::Closed,
        TicketState::Canceled,
    ];

    /// Resolved, closed and cancelled tickets need no further technician work.
    pub fn is_closed(self) -> bool {
        matches!(
            self,
            TicketState::Resolved | TicketState::Closed | TicketState::Canceled
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TicketState::New => "New",
            TicketState::InProgress => "In Progress",
            TicketState::OnHold => "On Hold",
            TicketState::Resolved => "Resolved",
            TicketState::Closed => "Closed",
            TicketState::Canceled => "Canceled",
        }
    }

    /// Accepts the numeric codes (1, 2, 3, 6, 7, 8) and the display names.
    pub fn parse(s: &str) -> Option<TicketState> {
        let t = s.trim();
        let code = t.split(|c: char| !c.is_ascii_digit()).next().unwrap_or("");
        match code {
            "1" => return Some(TicketState::New),
            "2" => return Some(TicketState::InProgress),
            "3" => return Some(TicketState::OnHold),
            "6" => return Some(TicketState::Resolved),
            "7" => return Some(TicketState::Closed),
            "8" => return Some(TicketState::Canceled),
            "" => {}
            _ => return None,
        }
        let lower = t.to_ascii_lowercase();
        match lower.as_str() {
            "new" => Some(TicketState::New),
            "in progress" | "in_progress" | "active" => Some(TicketState::InProgress),
            "on hold" | "on_hold" | "awaiting user info" | "awaiting problem"
            | "awaiting vendor" | "awaiting evidence" => Some(TicketState::OnHold),
            "resolved" => Some(TicketState::Resolved),
            "closed" => Some(TicketState::Closed),
            "canceled" | "cancelled" => Some(TicketState::Canceled),
            _ => None,
        }
    }
}

impl fmt::Display for TicketState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// ServiceNow `impact` / `urgency`: 1 (high) to 3 (low).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    High,
    Medium,
    Low,
}

impl Level {
    pub const ALL: [Level; 3] = [Level::High, Level::Medium, Level::Low];

    /// 1 for high through 3 for low.
    pub fn rank(self) -> u8 {
        match self {
            Level::High => 1,
            Level::Medium => 2,
            Level::Low => 3,
        }
    }

    /// Accepts `1`..`3` and display values such as `1 - High`.
    pub fn parse(s: &str) -> Option<Level> {
        let t = s.trim();
        let code = t.split(|c: char| !c.is_ascii_digit()).next().unwrap_or("");
        match code {
            "1" => Some(Level::High),
            "2" => Some(Level::Medium),
            "3" => Some(Level::Low),
            "" => match t.to_ascii_lowercase().as_str() {
                "high" => Some(Level::High),
                "medium" => Some(Level::Medium),
                "low" => Some(Level::Low),
                _ => None,
            },
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::High => "High",
            Level::Medium => "Medium",
            Level::Low => "Low",
        }
    }
}

/// ServiceNow's own priority matrix: priority = f(impact, urgency).
pub fn priority_matrix(impact: Level, urgency: Level) -> Severity {
    match impact.rank() + urgency.rank() {
        2 => Severity::P1,
        3 => Severity::P2,
        4 => Severity::P3,
        5 => Severity::P4,
        _ => Severity::P5,
    }
}

/// Where a log line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogSource {
    WorkNote,
    Comment,
    /// Machine alarm/monitoring text (`u_alarm_log`, or entries without a journal kind).
    Alarm,
}

/// One journal entry or alarm line block, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub at: Option<EpochMillis>,
    pub author: Option<String>,
    pub source: LogSource,
    pub text: String,
}

/// A parsed incident version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    pub id: TicketId,
    pub number: String,
    /// `sys_mod_count`: the idempotency version.
    pub version: u64,
    pub action: CdcAction,
    pub updated_at: Option<EpochMillis>,
    pub opened_at: Option<EpochMillis>,
    /// ServiceNow's priority (derived from impact × urgency when only those are sent).
    pub severity: Severity,
    pub impact: Option<Level>,
    pub urgency: Option<Level>,
    pub state: TicketState,
    pub category: Option<String>,
    pub subcategory: Option<String>,
    pub symptom: Option<String>,
    pub contact_type: Option<String>,
    pub cmdb_ci: Option<String>,
    pub location: Option<String>,
    pub region: Option<String>,
    pub assignment_group: Option<String>,
    pub assigned_to: Option<String>,
    pub caller: Option<String>,
    pub short_description: String,
    pub description: String,
    pub log: Vec<LogEntry>,
    pub customers_affected: Option<u64>,
    /// Parent incident number or sys_id, when this ticket is a child of an outage.
    pub parent: Option<String>,
}

impl Ticket {
    /// Closed for work purposes: resolved, closed, cancelled, or deleted upstream.
    pub fn is_closed(&self) -> bool {
        self.state.is_closed() || self.action == CdcAction::Delete
    }

    /// Every log line, oldest entry first, in the order they were written.
    pub fn log_lines(&self) -> impl Iterator<Item = &str> {
        self.log.iter().flat_map(|e| e.text.lines())
    }

    /// Lines of the alarm/monitoring log entries (not the journal), oldest first.
    pub fn alarm_lines(&self) -> impl Iterator<Item = &str> {
        self.log
            .iter()
            .filter(|e| e.source == LogSource::Alarm)
            .flat_map(|e| e.text.lines())
    }

    /// People named by the ticket (assignee, caller, journal authors): never shown to customers.
    pub fn people(&self) -> Vec<&str> {
        let mut out: Vec<&str> = [self.assigned_to.as_deref(), self.caller.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        out.extend(self.log.iter().filter_map(|e| e.author.as_deref()));
        out.sort_unstable();
        out.dedup();
        out
    }
}
