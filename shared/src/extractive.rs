//! The zero-token summarizer: all three summary kinds built from the ticket itself.
//!
//! It is what every ticket shows the moment it arrives, and what stands when the LLM budget
//! is spent. It is extraction with salience, not truncation: repeated alarms are already
//! collapsed by [`crate::log_bounding`]; alarms are counted by class; journal lines are picked
//! for what was tried (actions), state changes (restored/cleared/resolved) and next steps;
//! the latest update is always shown; ticket number, severity, service and state are kept.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::classifier::features::{AlarmClass, AlarmCounts};
use crate::clock::EpochMillis;
use crate::log_bounding::BoundedLog;
use crate::scrubber::{Scrubbed, scrub};
use crate::severity::Severity;
use crate::snapshot::TicketSnapshot;
use crate::ticket::{LogEntry, TicketState};

/// Longest sentence fragment quoted from the ticket, in characters.
const QUOTE_CHARS: usize = 160;

const ACTION_WORDS: &[&str] = &[
    "restart",
    "reboot",
    "reset",
    "replace",
    "swapp",
    "swap ",
    "dispatch",
    "rerout",
    "re-rout",
    "checked",
    "tested",
    "bounced",
    "cleared the",
    "reseat",
    "power cycl",
    "failover",
    "failed over",
    "escalat",
    "contacted",
    "engaged",
];
const RESTORATION_WORDS: &[&str] = &[
    "restored",
    "recovered",
    "back up",
    "back online",
    "link up",
    "established",
    "resolved",
    "service resumed",
    "cleared",
];
const NEXT_WORDS: &[&str] = &[
    "next",
    " will ",
    "plan",
    "eta",
    "awaiting",
    "pending",
    "scheduled",
    "to be ",
    "en route",
];

/// `line` lowercased between two spaces, so a word list's " will " matches at either end.
fn padded_lowercase(line: &str) -> String {
    let mut padded = String::with_capacity(line.len() + 2);
    padded.push(' ');
    padded.push_str(line);
    padded.push(' ');
    padded.make_ascii_lowercase();
    padded
}

/// The first sentence of `text` on one line, clipped to [`QUOTE_CHARS`].
fn quote(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let first_sentence = match one_line.find(". ") {
        Some(end) => &one_line[..end],
        None => one_line.as_str(),
    };
    let trimmed = first_sentence.trim_end_matches(['.', ' ']);
    if trimmed.chars().count() <= QUOTE_CHARS {
        return trimmed.to_owned();
    }
    let cut: String = trimmed.chars().take(QUOTE_CHARS).collect();
    format!("{}…", cut.trim_end())
}

/// A candidate line with its recency (higher is newer) and whether a person wrote it.
struct Line<'a> {
    text: &'a str,
    /// [`padded_lowercase`] of `text`, made once: every word list is matched against it.
    lower: String,
    order: usize,
    human: bool,
}

/// Journal lines (oldest first) then bounded log lines, each numbered by recency.
fn candidate_lines<'a>(s: &'a TicketSnapshot, alarms: &'a BoundedLog) -> Vec<Line<'a>> {
    let mut out = Vec::new();
    let mut order = 0;
    for line in alarms.lines() {
        out.push(Line {
            text: &line.text,
            lower: padded_lowercase(&line.text),
            order,
            human: false,
        });
        order += 1;
    }
    // Journal entries are newer than the alarm dump in practice; rank them above it.
    for entry in s.journal() {
        for text in entry.text.lines().filter(|l| !l.trim().is_empty()) {
            out.push(Line {
                text,
                lower: padded_lowercase(text),
                order,
                human: true,
            });
            order += 1;
        }
    }
    out
}

/// The newest lines matching `words`, human-written first, at most `n`.
fn salient<'a>(lines: &'a [Line<'a>], words: &[&str], n: usize) -> Vec<&'a str> {
    let mut hits: Vec<&Line<'_>> = lines
        .iter()
        .filter(|l| words.iter().any(|w| l.lower.contains(w)))
        .collect();
    hits.sort_by_key(|l| (std::cmp::Reverse(l.human), std::cmp::Reverse(l.order)));
    hits.into_iter().take(n).map(|l| l.text).collect()
}

fn alarm_phrase(counts: &AlarmCounts) -> Option<String> {
    let present = counts.present();
    if present.is_empty() {
        return None;
    }
    let parts: Vec<String> = present
        .iter()
        .take(4)
        .map(|(c, n)| format!("{n}x {}", c.label()))
        .collect();
    Some(parts.join(", "))
}

/// The technician summary: at most five sentences (what failed, impact, what was tried,
/// current state, next step), keeping number, severity, service and state.
pub fn technician(s: &TicketSnapshot) -> String {
    technician_from(s, &s.alarm_log, AlarmCounts::from_bounded(&s.alarm_log))
}

/// [`technician`] from the snapshot's bounded alarm log and its alarm counts as ingest
/// already holds them, rather than read back from the snapshot and counted again.
pub fn technician_from(s: &TicketSnapshot, alarms: &BoundedLog, counts: AlarmCounts) -> String {
    let t = &s.ticket;
    let lines = candidate_lines(s, alarms);

    let mut what = format!(
        "{} ({}, {}): {}",
        t.number,
        s.routing,
        t.state,
        quote(&fallback_title(s))
    );
    if let Some(ci) = &t.cmdb_ci {
        let _ = write!(what, " on {ci}");
    }
    if let Some(region) = &t.region {
        let _ = write!(what, " in {region}");
    }
    if let Some(alarms) = alarm_phrase(&counts) {
        let _ = write!(what, "; alarms: {alarms}");
    }

    let mut impact = match t.customers_affected {
        Some(n) if n > 0 => format!("Impact: {n} customers affected"),
        _ if s.customer_impacting => "Impact: customer-affecting, count not yet known".to_owned(),
        _ => "Impact: no customer impact reported".to_owned(),
    };
    if let Some(level) = t.impact {
        let _ = write!(impact, " (ServiceNow impact {})", level.as_str());
    }
    if s.routing < t.severity {
        let _ = write!(impact, "; routed up from {} by the classifier", t.severity);
    }

    let tried_lines = salient(&lines, ACTION_WORDS, 2);
    let tried = if tried_lines.is_empty() {
        "Tried: nothing recorded yet".to_owned()
    } else {
        format!(
            "Tried: {}",
            tried_lines
                .iter()
                .map(|l| quote(l))
                .collect::<Vec<_>>()
                .join("; ")
        )
    };

    let next_line = salient(&lines, NEXT_WORDS, 1)
        .first()
        .copied()
        .filter(|_| !t.is_closed());
    let next = match next_line {
        Some(line) => format!("Next: {}", quote(line)),
        None => format!("Next: {}", default_next_step(s, &counts)),
    };

    let mut state = format!("State: {}", t.state);
    let restored = salient(&lines, RESTORATION_WORDS, 1).first().copied();
    if let Some(line) = restored.filter(|l| !tried_lines.contains(l) && Some(*l) != next_line) {
        let _ = write!(state, "; last change: {}", quote(line));
    } else if let Some(latest) =
        latest_update(s, alarms).filter(|l| Some(*l) != next_line && !tried_lines.contains(l))
    {
        let _ = write!(state, "; latest update: {}", quote(latest));
    }

    [what, impact, tried, state, next]
        .iter()
        .map(|sentence| format!("{sentence}."))
        .collect::<Vec<_>>()
        .join(" ")
}

fn fallback_title(s: &TicketSnapshot) -> String {
    let t = &s.ticket;
    if !t.short_description.trim().is_empty() {
        return t.short_description.clone();
    }
    if let Some(first) = t.description.lines().find(|l| !l.trim().is_empty()) {
        return first.to_owned();
    }
    t.category
        .clone()
        .unwrap_or_else(|| "no description".to_owned())
}

fn latest_update<'a>(s: &'a TicketSnapshot, alarms: &'a BoundedLog) -> Option<&'a str> {
    let journal: Vec<&LogEntry> = s.journal().collect();
    let latest = journal
        .iter()
        .rev()
        .find_map(|e| e.text.lines().rev().find(|l| !l.trim().is_empty()));
    latest.or_else(|| {
        alarms
            .tail
            .last()
            .or(alarms.head.last())
            .map(|l| l.text.as_str())
    })
}

fn default_next_step(s: &TicketSnapshot, counts: &AlarmCounts) -> String {
    if s.ticket.is_closed() {
        return "none, ticket is closed; confirm with affected customers".to_owned();
    }
    let strongest = counts.present().first().map(|(c, _)| *c);
    let step = match strongest {
        Some(AlarmClass::PowerOrBattery | AlarmClass::DyingGasp) => {
            "confirm mains or generator power at the site"
        }
        Some(AlarmClass::LossOfLight) => "dispatch the fibre team to locate the break",
        Some(AlarmClass::LinkDown) => "check the far end and optics of the down links",
        Some(AlarmClass::RoutingProtocol) => "check routing sessions and the underlying transport",
        Some(AlarmClass::Psu) => "schedule a PSU replacement",
        None => "triage and confirm the fault",
    };
    match &s.ticket.assignment_group {
        Some(group) => format!("{step} ({group})"),
        None => step.to_owned(),
    }
}

/// The customer notification: plain language, built from categories not ticket text, then
/// scrubbed so no internal detail can survive even if a template changes.
pub fn customer(s: &TicketSnapshot) -> Scrubbed {
    customer_outage(std::slice::from_ref(&s))
}

/// The customer notification for the tickets of one affected service and place (an
/// outage's tickets, which a notice covers at once): the service and area of the first,
/// the customers affected of all of them added up, the cause their alarms point to
/// together, and resolved only when every one of them is. Scrubbed against every one of
/// them. For one ticket it is exactly [`customer`].
pub fn customer_outage(tickets: &[&TicketSnapshot]) -> Scrubbed {
    let Some(first) = tickets.first() else {
        return Scrubbed {
            text: String::new(),
            removed: 0,
        };
    };
    let t = &first.ticket;
    let mut counts = AlarmCounts::default();
    for s in tickets {
        let own = AlarmCounts::from_bounded(&s.alarm_log);
        for (total, n) in counts.0.iter_mut().zip(own.0) {
            *total = total.saturating_add(n);
        }
    }
    let service = service_name(&t.category, &t.subcategory);
    let area = t
        .region
        .as_deref()
        .map(|r| format!(" in the {r} area"))
        .unwrap_or_default();
    let closed = tickets.iter().all(|s| s.ticket.is_closed());
    let mut text = if closed {
        format!("The issue affecting {service}{area} has been resolved.")
    } else {
        format!("We are aware of an issue affecting {service}{area}.")
    };
    let customers = tickets
        .iter()
        .filter_map(|s| s.ticket.customers_affected)
        .fold(0u64, u64::saturating_add);
    if customers > 1 {
        let _ = write!(
            text,
            " Around {} customers are affected.",
            round_count(customers)
        );
    }
    if !closed {
        if let Some(cause) = plain_cause(&counts) {
            let _ = write!(text, " The cause is {cause}.");
        }
        let open = || tickets.iter().filter(|s| !s.ticket.is_closed());
        let action = if open().all(|s| s.ticket.state == TicketState::New) {
            "Our engineers have been alerted and are investigating."
        } else if open().all(|s| s.ticket.state == TicketState::OnHold) {
            "Our engineers are waiting on a third party to continue the repair."
        } else {
            "Our engineers are working to restore service."
        };
        let _ = write!(
            text,
            " {action} We will send another update as soon as we know more."
        );
    } else {
        text.push_str(" If you still have problems, please restart your equipment or contact us.");
    }
    text.push_str(" We apologise for the disruption.");
    let mut context = first.scrub_context();
    for s in &tickets[1..] {
        context.absorb(s.scrub_context());
    }
    scrub(&text, &context)
}

/// The service a ticket's category and subcategory say customers use, in their words
/// (`internet service`, `phone service`, ...): what a customer notice names, and with
/// the region what notices are grouped by.
pub fn service_name(category: &Option<String>, subcategory: &Option<String>) -> &'static str {
    service_words(category.as_deref(), subcategory.as_deref())
}

fn round_count(n: u64) -> String {
    let rounded = match n {
        0..=99 => n,
        100..=999 => n / 10 * 10,
        _ => n / 100 * 100,
    };
    // Thousands separators for readability.
    let digits = rounded.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn service_words(category: Option<&str>, subcategory: Option<&str>) -> &'static str {
    let text =
        format!("{} {}", category.unwrap_or(""), subcategory.unwrap_or("")).to_ascii_lowercase();
    if text.contains("voice") || text.contains("phone") || text.contains("telephon") {
        "phone service"
    } else if text.contains("mobile") || text.contains("cellular") || text.contains("wireless") {
        "mobile service"
    } else if text.contains("tv") || text.contains("video") {
        "TV service"
    } else if text.contains("network")
        || text.contains("internet")
        || text.contains("broadband")
        || text.contains("fib")
    {
        "internet service"
    } else {
        "some of our services"
    }
}

fn plain_cause(counts: &AlarmCounts) -> Option<&'static str> {
    let strongest = counts.present().first().map(|(c, _)| *c)?;
    Some(match strongest {
        AlarmClass::PowerOrBattery | AlarmClass::DyingGasp => {
            "a power problem affecting our equipment"
        }
        AlarmClass::LossOfLight => "damage to a fibre cable",
        AlarmClass::LinkDown => "a fault on part of our network",
        AlarmClass::RoutingProtocol => "a fault in how traffic is routed across our network",
        AlarmClass::Psu => "a hardware fault on our equipment",
    })
}

/// One ticket as the regional roll-up sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RollupEntry {
    pub number: String,
    pub severity: Severity,
    pub state: TicketState,
    pub customers_affected: Option<u64>,
    pub parent: Option<String>,
    pub title: String,
    /// The best summary available (LLM or extractive technician summary).
    pub summary: String,
    pub updated_at: Option<EpochMillis>,
}

impl RollupEntry {
    pub fn from_snapshot(s: &TicketSnapshot, summary: Option<&str>) -> RollupEntry {
        RollupEntry {
            number: s.ticket.number.clone(),
            severity: s.routing,
            state: s.ticket.state,
            customers_affected: s.ticket.customers_affected,
            parent: s.ticket.parent.clone(),
            title: quote(&fallback_title(s)),
            summary: summary.map(str::to_owned).unwrap_or_else(|| technician(s)),
            updated_at: s.ticket.updated_at,
        }
    }
}

/// How many top tickets the roll-up quotes.
pub const ROLLUP_TOP: usize = 5;

/// The executive roll-up of a region: counts by severity and state, major outages, top tickets.
pub fn rollup(region: &str, entries: &[RollupEntry]) -> String {
    let open: Vec<&RollupEntry> = entries.iter().filter(|e| !e.state.is_closed()).collect();
    let mut out = format!("Region {region}: {} open tickets", open.len());
    let by_sev: Vec<String> = Severity::ALL
        .iter()
        .map(|s| (s, open.iter().filter(|e| e.severity == *s).count()))
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{s} {n}"))
        .collect();
    if !by_sev.is_empty() {
        let _ = write!(out, " ({})", by_sev.join(", "));
    }
    let by_state: Vec<String> = TicketState::ALL
        .iter()
        .map(|st| (st, entries.iter().filter(|e| e.state == *st).count()))
        .filter(|(_, n)| *n > 0)
        .map(|(st, n)| format!("{st} {n}"))
        .collect();
    let _ = writeln!(
        out,
        "; by state: {}.",
        if by_state.is_empty() {
            "none".to_owned()
        } else {
            by_state.join(", ")
        }
    );
    let customers: u64 = open.iter().filter_map(|e| e.customers_affected).sum();
    if customers > 0 {
        let _ = writeln!(out, "Customers affected by open tickets: {customers}.");
    }

    let outages = major_outages(&open);
    if outages.is_empty() {
        out.push_str("Major outages: none.\n");
    } else {
        out.push_str("Major outages:\n");
        for o in outages {
            let _ = writeln!(out, "- {o}");
        }
    }

    let mut top = open.clone();
    top.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then(
                b.customers_affected
                    .unwrap_or(0)
                    .cmp(&a.customers_affected.unwrap_or(0)),
            )
            .then(b.updated_at.cmp(&a.updated_at))
    });
    if !top.is_empty() {
        out.push_str("Top tickets:\n");
        for e in top.iter().take(ROLLUP_TOP) {
            let _ = writeln!(out, "- {}", quote_summary(&e.summary));
        }
    }
    out
}

fn quote_summary(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= 400 {
        flat
    } else {
        format!("{}…", flat.chars().take(400).collect::<String>())
    }
}

/// Open P1/P2 tickets, plus parents with three or more open children (one outage, many tickets).
fn major_outages(open: &[&RollupEntry]) -> Vec<String> {
    let mut out = Vec::new();
    let mut parents: Vec<(&str, usize, u64)> = Vec::new();
    for e in open {
        if let Some(p) = e.parent.as_deref() {
            match parents.iter_mut().find(|(q, _, _)| *q == p) {
                Some(slot) => {
                    slot.1 += 1;
                    slot.2 += e.customers_affected.unwrap_or(0);
                }
                None => parents.push((p, 1, e.customers_affected.unwrap_or(0))),
            }
        }
    }
    for (parent, children, customers) in parents.iter().filter(|(_, n, _)| *n >= 3) {
        out.push(format!(
            "{parent}: {children} related tickets, {customers} customers"
        ));
    }
    let mut severe: Vec<&&RollupEntry> =
        open.iter().filter(|e| e.severity <= Severity::P2).collect();
    severe.sort_by_key(|e| {
        (
            e.severity,
            std::cmp::Reverse(e.customers_affected.unwrap_or(0)),
        )
    });
    for e in severe.into_iter().take(10) {
        let customers = e
            .customers_affected
            .map(|n| format!(", {n} customers"))
            .unwrap_or_default();
        out.push(format!(
            "{} ({}, {}): {}{customers}",
            e.number, e.severity, e.state, e.title
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned byte for byte: the summaries must not change with the way the log is kept.
    #[test]
    fn the_extractive_summaries_of_a_bounded_log_stay_as_they_were() {
        let s = crate::snapshot::bounded_storm_snapshot();
        assert_eq!(
            technician(&s),
            "INC0010004 (P1, In Progress): Site 4 down after fibre cut on ams-agg-04 in north; alarms: 12x loss of light, 4x PSU, 2x BGP/OSPF. Impact: 1200 customers affected; routed up from P2 by the classifier. Tried: Splice crew dispatched to site 4; BGP to 10.0.0.4 down. State: In Progress. Next: dispatch the fibre team to locate the break (NOC Tier 2)."
        );
        assert_eq!(
            customer(&s).text,
            "We are aware of an issue affecting internet service in the north area. Around 1,200 customers are affected. The cause is damage to a fibre cable. Our engineers are working to restore service. We will send another update as soon as we know more. We apologise for the disruption."
        );
    }

    use crate::scrubber::find_leaks;
    use crate::snapshot::snapshot_of_event;

    fn snapshot(json: serde_json::Value) -> TicketSnapshot {
        snapshot_of_event(&json)
    }

    #[test]
    fn ingest_path_summary_equals_the_summary_read_back_from_the_snapshot() {
        use crate::event::{CdcHeaders, ParseLimits, parse_event};
        use crate::log_bounding::{BoundingLimits, bound_lines};
        let event = storm_ticket().to_string();
        let ticket = parse_event(
            event.as_bytes(),
            &CdcHeaders::default(),
            ParseLimits::default(),
        )
        .unwrap();
        let log = bound_lines(ticket.alarm_lines(), BoundingLimits::default());
        let counts = AlarmCounts::from_bounded(&log);
        let s = snapshot(storm_ticket());
        assert_eq!(technician_from(&s, &log, counts), technician(&s));
    }

    fn storm_ticket() -> serde_json::Value {
        let mut alarms = String::new();
        for i in 0..200 {
            alarms.push_str(&format!(
                "2026-11-29 10:{:02}:{:02} LOS alarm on xe-0/0/{} at lon-pe-01 (10.1.2.{})\n",
                i / 60,
                i % 60,
                i % 48,
                i % 250
            ));
        }
        alarms.push_str("2026-11-29 10:04:00 BGP neighbor 10.0.0.1 state Idle\n");
        serde_json::json!({
            "sys_id": "9d385017c611228701d22104cc95c371", "number": "INC0012345", "sys_mod_count": "7",
            "priority": "2", "impact": "1", "urgency": "2", "state": "2", "category": "Network",
            "short_description": "Fibre cut on Leeds ring", "cmdb_ci": "lon-pe-01", "u_region": "North",
            "assignment_group": {"display_value": "Core Network Ops", "value": "abc"},
            "assigned_to": {"display_value": "Priya Raman", "value": "def"},
            "u_customers_affected": "1234", "u_alarm_log": alarms,
            "work_notes": "2026-11-29 10:20:00 - Priya Raman (Work notes)\nField team will splice the cable, ETA 14:00. Call Priya on +44 20 7946 0958.\n\n2026-11-29 10:10:00 - Tom Smith (Work notes)\nRerouted traffic via the south ring, partial restore.\n\n"
        })
    }

    #[test]
    fn technician_summary_keeps_the_facts_in_five_sentences() {
        let text = technician(&snapshot(storm_ticket()));
        assert!(text.starts_with("INC0012345 (P"), "{text}");
        assert!(text.contains("In Progress"));
        assert!(
            text.contains("201x loss of light") || text.contains("200x loss of light"),
            "{text}"
        );
        assert!(text.contains("1234 customers"));
        assert!(
            text.contains("Rerouted traffic via the south ring"),
            "{text}"
        );
        assert!(text.contains("splice the cable"), "{text}");
        assert!(text.matches(". ").count() <= 4, "{text}");
        assert!(text.len() < 1_500);
    }

    #[test]
    fn customer_notification_is_plain_and_leak_free() {
        let s = snapshot(storm_ticket());
        let out = customer(&s);
        assert!(
            out.text.contains("internet service in the North area"),
            "{}",
            out.text
        );
        assert!(out.text.contains("Around 1,200 customers"), "{}", out.text);
        assert!(out.text.contains("fibre cable"), "{}", out.text);
        assert!(
            find_leaks(&out.text, &s.scrub_context()).is_empty(),
            "{}",
            out.text
        );
        for bad in ["Priya", "lon-pe-01", "10.", "INC0012345", "Core Network"] {
            assert!(!out.text.contains(bad), "{bad}: {}", out.text);
        }
    }

    #[test]
    fn an_outage_notice_adds_up_its_tickets_and_leaks_nothing_of_any() {
        let first = snapshot(storm_ticket());
        let mut other = storm_ticket();
        other["number"] = "INC0012346".into();
        other["assigned_to"] = "Wendy Okoro".into();
        other["cmdb_ci"] = "lon-pe-02".into();
        other["u_customers_affected"] = "300".into();
        let second = snapshot(other);
        let out = customer_outage(&[&first, &second]);
        assert!(out.text.contains("Around 1,500 customers"), "{}", out.text);
        assert!(
            out.text
                .starts_with("We are aware of an issue affecting internet service")
        );
        for s in [&first, &second] {
            assert!(
                find_leaks(&out.text, &s.scrub_context()).is_empty(),
                "{}",
                out.text
            );
        }
        assert_eq!(customer_outage(&[&first]), customer(&first));

        // Resolved only when every ticket is.
        let mut closed = storm_ticket();
        closed["state"] = "6".into();
        let closed = snapshot(closed);
        assert!(
            !customer_outage(&[&closed, &second])
                .text
                .contains("resolved")
        );
        assert!(
            customer_outage(&[&closed, &closed])
                .text
                .contains("has been resolved")
        );
    }

    #[test]
    fn closed_ticket_says_resolved_and_no_next_action() {
        let mut v = storm_ticket();
        v["state"] = "6".into();
        let s = snapshot(v);
        assert!(
            customer(&s)
                .text
                .starts_with("The issue affecting internet service")
        );
        assert!(technician(&s).contains("Next: none, ticket is closed"));
    }

    #[test]
    fn rollup_counts_and_names_major_outages() {
        let s = snapshot(storm_ticket());
        let mut entries = vec![RollupEntry::from_snapshot(&s, None)];
        for i in 0..3 {
            entries.push(RollupEntry {
                number: format!("INC00200{i}"),
                severity: Severity::P4,
                state: if i == 2 {
                    TicketState::Resolved
                } else {
                    TicketState::New
                },
                customers_affected: Some(10),
                parent: Some("INC0012345".into()),
                title: "Customer offline".into(),
                summary: format!("INC00200{i} (P4, New): Customer offline."),
                updated_at: None,
            });
        }
        let text = rollup("North", &entries);
        assert!(text.starts_with("Region North: 3 open tickets"), "{text}");
        assert!(text.contains("Resolved 1"));
        assert!(text.contains("Major outages:\n- INC0012345 ("), "{text}");
        assert!(text.contains("Top tickets:\n- INC0012345"), "{text}");
    }
}
