//! The part of a stored ticket snapshot that the summarizers read.
//!
//! `classify` stores each accepted ticket version as a JSON snapshot (the parsed
//! ticket with its bounded log). The summarizers read it leniently: missing fields
//! default, unknown fields are ignored, so a snapshot written by an older or newer
//! build still yields a summary rather than a stuck job.

use std::fmt::Write as _;

use serde::Deserialize;

use crate::severity::Severity;

/// One log entry of the snapshot (journal note, comment or alarm block).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LogLine {
    pub author: Option<String>,
    pub text: String,
}

/// The summarizers' view of a ticket version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TicketView {
    pub number: String,
    pub version: u64,
    pub severity: Option<Severity>,
    /// `new`, `in_progress`, `on_hold`, `resolved`, `closed`, `canceled`.
    pub state: Option<String>,
    pub category: Option<String>,
    pub subcategory: Option<String>,
    pub cmdb_ci: Option<String>,
    pub location: Option<String>,
    pub region: Option<String>,
    pub assignment_group: Option<String>,
    pub assigned_to: Option<String>,
    pub caller: Option<String>,
    pub short_description: String,
    pub description: String,
    pub log: Vec<LogLine>,
    pub customers_affected: Option<u64>,
    pub parent: Option<String>,
}

impl TicketView {
    /// Reads a snapshot; `None` when it is not a JSON object at all.
    pub fn from_snapshot(snapshot: &serde_json::Value) -> Option<TicketView> {
        // Ingest stores a `TicketSnapshot` (ticket + bounded log); read that shape first.
        if let Ok(s) = serde_json::from_value::<crate::snapshot::TicketSnapshot>(snapshot.clone()) {
            return Some(TicketView::from(&s));
        }
        serde_json::from_value(snapshot.clone()).ok()
    }

    /// People named by the ticket: never shown to customers.
    pub fn people(&self) -> Vec<&str> {
        let mut people: Vec<&str> = [self.assigned_to.as_deref(), self.caller.as_deref()]
            .into_iter()
            .flatten()
            .chain(self.log.iter().filter_map(|l| l.author.as_deref()))
            .filter(|p| !p.trim().is_empty())
            .collect();
        people.sort_unstable();
        people.dedup();
        people
    }

    /// The state as a reader says it (`in progress`), or `open` when unknown.
    pub fn state_label(&self) -> String {
        self.state
            .as_deref()
            .map(|s| s.replace('_', " "))
            .unwrap_or_else(|| "open".to_owned())
    }

    /// The ticket as prompt text: header facts, then the log, within `max_chars`.
    /// When the log does not fit, its head and tail are kept: the first lines say
    /// what failed, the last ones where things stand.
    pub fn prompt_body(&self, max_chars: usize) -> String {
        let mut head = String::new();
        let _ = writeln!(head, "Number: {}", self.number);
        if let Some(severity) = self.severity {
            let _ = writeln!(head, "Severity: {severity}");
        }
        let _ = writeln!(head, "State: {}", self.state_label());
        for (label, value) in [
            ("Service/CI", &self.cmdb_ci),
            ("Category", &self.category),
            ("Location", &self.location),
            ("Region", &self.region),
        ] {
            if let Some(v) = value {
                let _ = writeln!(head, "{label}: {v}");
            }
        }
        if let Some(n) = self.customers_affected {
            let _ = writeln!(head, "Customers affected: {n}");
        }
        let _ = writeln!(head, "Short description: {}", self.short_description);
        if !self.description.trim().is_empty() {
            let _ = writeln!(head, "Description: {}", self.description.trim());
        }
        let _ = writeln!(head, "Log:");
        let lines: Vec<&str> = self.log.iter().flat_map(|l| l.text.lines()).collect();
        let budget = max_chars.saturating_sub(head.len());
        head.push_str(&head_and_tail(&lines, budget));
        truncate_chars(&head, max_chars)
    }
}

/// Lines from both ends, alternating, until `budget` characters are used.
fn head_and_tail(lines: &[&str], budget: usize) -> String {
    let total: usize = lines.iter().map(|l| l.len() + 1).sum();
    if total <= budget {
        return lines.iter().fold(String::new(), |mut out, l| {
            let _ = writeln!(out, "{l}");
            out
        });
    }
    let (mut front, mut back) = (0usize, lines.len());
    let mut used = "[...]\n".len();
    let mut take_front = true;
    while front < back {
        let candidate = if take_front { front } else { back - 1 };
        let cost = lines.get(candidate).map_or(0, |l| l.len() + 1);
        if used + cost > budget {
            break;
        }
        used += cost;
        if take_front {
            front += 1;
        } else {
            back -= 1;
        }
        take_front = !take_front;
    }
    let mut out = String::new();
    for l in lines.get(..front).unwrap_or_default() {
        let _ = writeln!(out, "{l}");
    }
    out.push_str("[...]\n");
    for l in lines.get(back..).unwrap_or_default() {
        let _ = writeln!(out, "{l}");
    }
    out
}

fn truncate_chars(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => text.get(..at).unwrap_or(text).to_owned(),
        None => text.to_owned(),
    }
}

impl From<&crate::snapshot::TicketSnapshot> for TicketView {
    /// The worker's view of what ingest stored: the routing severity, the bounded log
    /// (repeats collapsed with their counts) followed by the latest journal entries.
    fn from(s: &crate::snapshot::TicketSnapshot) -> TicketView {
        let t = &s.ticket;
        let mut log: Vec<LogLine> = s
            .log
            .lines()
            .map(|l| LogLine {
                author: None,
                text: if l.occurrences > 1 {
                    format!("{} (x{})", l.text, l.occurrences)
                } else {
                    l.text.clone()
                },
            })
            .collect();
        log.extend(t.log.iter().map(|e| LogLine {
            author: e.author.clone(),
            text: e.text.clone(),
        }));
        TicketView {
            number: t.number.clone(),
            version: t.version,
            severity: Some(s.routing),
            state: Some(t.state.as_str().to_owned()),
            category: t.category.clone(),
            subcategory: t.subcategory.clone(),
            cmdb_ci: t.cmdb_ci.clone(),
            location: t.location.clone(),
            region: t.region.clone(),
            assignment_group: t.assignment_group.clone(),
            assigned_to: t.assigned_to.clone(),
            caller: t.caller.clone(),
            short_description: t.short_description.clone(),
            description: t.description.clone(),
            log,
            customers_affected: t.customers_affected,
            parent: t.parent.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(lines: usize) -> TicketView {
        TicketView {
            number: "INC0010001".into(),
            severity: Some(Severity::P1),
            state: Some("in_progress".into()),
            short_description: "Fibre cut".into(),
            log: (0..lines)
                .map(|i| LogLine {
                    author: Some("Jane Roe".into()),
                    text: format!("line {i}"),
                })
                .collect(),
            ..TicketView::default()
        }
    }

    #[test]
    fn reads_a_snapshot_leniently() {
        let snapshot = serde_json::json!({
            "id": "0123456789abcdef0123456789abcdef",
            "number": "INC1", "version": 3, "severity": "P2", "state": "on_hold",
            "log": [{"at": null, "author": "A B", "source": "work_note", "text": "x"}],
            "something_new": {"nested": true}
        });
        let view = TicketView::from_snapshot(&snapshot).unwrap();
        assert_eq!(view.number, "INC1");
        assert_eq!(view.severity, Some(Severity::P2));
        assert_eq!(view.state_label(), "on hold");
        assert_eq!(view.people(), vec!["A B"]);
        assert!(TicketView::from_snapshot(&serde_json::json!([1, 2])).is_none());
    }

    #[test]
    fn a_long_log_keeps_its_head_and_tail_within_budget() {
        let body = ticket(1_000).prompt_body(600);
        assert!(body.chars().count() <= 600);
        assert!(body.contains("line 0\n"));
        assert!(body.contains("line 999\n"));
        assert!(body.contains("[...]"));
        let short = ticket(3).prompt_body(600);
        assert!(short.contains("line 2") && !short.contains("[...]"));
    }
}
