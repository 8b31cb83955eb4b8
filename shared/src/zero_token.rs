//! The zero-token path the tier worker falls back to, behind the
//! [`ZeroTokenPath`](crate::summarize::ZeroTokenPath) port.
//!
//! [`BasicZeroTokenPath`] is a deliberately plain implementation: a summary from the
//! ticket's header facts and its latest log lines, and a scrubber that removes IP
//! addresses, host names, e-mail addresses, phone numbers, the people and the internal
//! names (CI, group, ticket number) of the tickets, replacing each with a neutral
//! placeholder. Over-redaction is the safe failure: a customer notice that says
//! "[address]" is fine, one that names a router is not.

use std::fmt::Write as _;

use crate::job::SummaryKind;
use crate::summarize::ZeroTokenPath;
use crate::ticket_view::TicketView;

#[derive(Debug, Clone, Copy, Default)]
pub struct BasicZeroTokenPath;

impl ZeroTokenPath for BasicZeroTokenPath {
    fn extractive(&self, ticket: &TicketView, kind: SummaryKind) -> String {
        match kind {
            SummaryKind::Technician | SummaryKind::Rollup => technician(ticket),
            SummaryKind::Customer => customer(ticket),
        }
    }

    fn ticket_line(&self, ticket: &TicketView) -> String {
        let mut line = format!(
            "{}; state {}",
            ticket.short_description.trim(),
            ticket.state_label()
        );
        if let Some(ci) = &ticket.cmdb_ci {
            let _ = write!(line, "; CI {ci}");
        }
        if let Some(latest) = latest_line(ticket) {
            let _ = write!(line, "; latest: {latest}");
        }
        line.push('.');
        line
    }

    fn scrub_customer(&self, text: &str, tickets: &[&TicketView]) -> String {
        scrub(text, tickets)
    }
}

fn technician(ticket: &TicketView) -> String {
    let mut out = format!(
        "{} {}: {}.",
        ticket.number,
        ticket.severity.map(|s| s.as_str()).unwrap_or("P?"),
        ticket.short_description.trim().trim_end_matches('.')
    );
    if let Some(ci) = &ticket.cmdb_ci {
        let _ = write!(out, " Affected: {ci}.");
    }
    if let Some(n) = ticket.customers_affected {
        let _ = write!(out, " Customers affected: {n}.");
    }
    let _ = write!(out, " State: {}.", ticket.state_label());
    if let Some(latest) = latest_line(ticket) {
        let _ = write!(out, " Latest: {}.", latest.trim_end_matches('.'));
    }
    out
}

fn customer(ticket: &TicketView) -> String {
    let service = ticket
        .category
        .as_deref()
        .unwrap_or("network service")
        .to_lowercase();
    let place = ticket
        .region
        .as_deref()
        .map(|r| format!(" in the {r} area"))
        .unwrap_or_default();
    let status = match ticket.state.as_deref() {
        Some("resolved" | "closed") => "The issue has been resolved.",
        _ => "Our engineers are working to restore service.",
    };
    format!("We are aware of a disruption affecting {service}{place}. {status}")
}

fn latest_line(ticket: &TicketView) -> Option<&str> {
    ticket
        .log
        .iter()
        .rev()
        .flat_map(|l| l.text.lines().rev())
        .map(str::trim)
        .find(|l| !l.is_empty())
}

/// Removes what must not reach customers from `text`.
pub fn scrub(text: &str, tickets: &[&TicketView]) -> String {
    let mut out = text.to_owned();
    for term in internal_terms(tickets) {
        out = replace_word_ci(&out, &term, "[redacted]");
    }
    let words: Vec<String> = out
        .split_inclusive(char::is_whitespace)
        .map(scrub_token)
        .collect();
    scrub_phone_numbers(&words.concat())
}

/// People (full names first, then each name part of three letters or more), CIs,
/// groups and ticket numbers, longest first so "Jane Roe" goes before "Jane".
fn internal_terms(tickets: &[&TicketView]) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for t in tickets {
        for person in t.people() {
            terms.push(person.to_owned());
            terms.extend(
                person
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|p| p.chars().count() >= 3)
                    .map(str::to_owned),
            );
        }
        terms.extend(t.cmdb_ci.iter().cloned());
        terms.extend(t.assignment_group.iter().cloned());
        terms.push(t.number.clone());
    }
    terms.retain(|t| !t.trim().is_empty());
    terms.sort_by_key(|t| std::cmp::Reverse(t.len()));
    terms.dedup();
    terms
}

fn replace_word_ci(text: &str, term: &str, with: &str) -> String {
    let lower_text = text.to_lowercase();
    let lower_term = term.to_lowercase();
    // Lower-casing may change byte lengths outside ASCII; fall back to exact matching.
    let (haystack, needle) = if lower_text.len() == text.len() && lower_term.len() == term.len() {
        (lower_text, lower_term)
    } else {
        (text.to_owned(), term.to_owned())
    };
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (at, _) in haystack.match_indices(&needle) {
        let end = at + needle.len();
        if at < last {
            continue;
        }
        let before = text.get(..at).and_then(|s| s.chars().next_back());
        let after = text.get(end..).and_then(|s| s.chars().next());
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
        if boundary(before) && boundary(after) {
            out.push_str(text.get(last..at).unwrap_or_default());
            out.push_str(with);
            last = end;
        }
    }
    out.push_str(text.get(last..).unwrap_or_default());
    out
}

/// One whitespace-delimited token (with its trailing whitespace).
fn scrub_token(token: &str) -> String {
    let trimmed_end = token.trim_end();
    let space = token.get(trimmed_end.len()..).unwrap_or_default();
    let core = trimmed_end.trim_matches(|c: char| "()[]{}<>\"',;!?".contains(c));
    let core = core.trim_end_matches('.');
    if core.is_empty() {
        return token.to_owned();
    }
    let replacement = if is_email(core) {
        Some("[contact]")
    } else if is_ip(core) {
        Some("[address]")
    } else if is_hostname(core) {
        Some("[internal system]")
    } else {
        None
    };
    match replacement {
        Some(r) => {
            let start = trimmed_end.find(core).unwrap_or(0);
            format!(
                "{}{}{}{}",
                trimmed_end.get(..start).unwrap_or_default(),
                r,
                trimmed_end.get(start + core.len()..).unwrap_or_default(),
                space
            )
        }
        None => token.to_owned(),
    }
}

fn is_email(s: &str) -> bool {
    s.split_once('@')
        .is_some_and(|(user, domain)| !user.is_empty() && domain.contains('.'))
}

fn is_ip(s: &str) -> bool {
    let s = s.split('/').next().unwrap_or(s);
    let v4 = s.split(':').next().unwrap_or(s);
    let octets: Vec<&str> = v4.split('.').collect();
    let ipv4 = octets.len() == 4
        && octets
            .iter()
            .all(|o| !o.is_empty() && o.len() <= 3 && o.chars().all(|c| c.is_ascii_digit()));
    let ipv6 = s.matches(':').count() >= 2
        && s.chars().all(|c| c.is_ascii_hexdigit() || c == ':')
        && s.chars().any(|c| c.is_ascii_hexdigit());
    ipv4 || ipv6
}

/// `a.b` or longer with a final label of letters: `core1.ams.example.net`, `db.internal`.
fn is_hostname(s: &str) -> bool {
    let labels: Vec<&str> = s.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        && labels
            .last()
            .is_some_and(|tld| tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic()))
        && labels.first().is_some_and(|first| first.len() > 1)
}

/// Runs of digits and phone punctuation holding seven digits or more.
fn scrub_phone_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts_run = chars[i].is_ascii_digit()
            || (chars[i] == '+' && chars.get(i + 1).is_some_and(char::is_ascii_digit));
        if !starts_run {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let mut j = i;
        let mut digits = 0;
        while j < chars.len() && (chars[j].is_ascii_digit() || " -().+".contains(chars[j])) {
            if chars[j].is_ascii_digit() {
                digits += 1;
            }
            j += 1;
        }
        // Keep trailing separators outside the match.
        let mut end = j;
        while end > i && !chars[end - 1].is_ascii_digit() {
            end -= 1;
        }
        if digits >= 7 {
            out.push_str("[phone]");
        } else {
            out.extend(&chars[i..end]);
        }
        out.extend(&chars[end..j]);
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ticket_view::LogLine;

    fn ticket() -> TicketView {
        TicketView {
            number: "INC0042424".into(),
            cmdb_ci: Some("ams-core-rtr-07".into()),
            assignment_group: Some("NOC Tier 2".into()),
            assigned_to: Some("Jane Roe".into()),
            caller: Some("Pat Smith".into()),
            short_description: "Fibre cut".into(),
            log: vec![LogLine {
                author: Some("Wei Chen".into()),
                text: "spliced".into(),
            }],
            ..TicketView::default()
        }
    }

    #[test]
    fn removes_addresses_hosts_contacts_people_and_internal_names() {
        let t = ticket();
        let text = "Jane Roe and wei chen rebooted ams-core-rtr-07 (10.20.30.40) and \
                    core1.ams.example.net; call +31 20 555 0100 or noc@example.com. \
                    Ask Jane. NOC Tier 2 on INC0042424, fe80::1:2 down.";
        let out = scrub(text, &[&t]);
        for leak in [
            "Jane",
            "Roe",
            "wei",
            "chen",
            "ams-core-rtr-07",
            "10.20.30.40",
            "core1.ams",
            "555",
            "noc@",
            "NOC Tier 2",
            "INC0042424",
            "fe80",
        ] {
            assert!(
                !out.to_lowercase().contains(&leak.to_lowercase()),
                "{leak} in {out}"
            );
        }
        assert!(out.contains("[address]") && out.contains("[phone]") && out.contains("[contact]"));
    }

    #[test]
    fn plain_customer_language_survives() {
        let t = ticket();
        let text = "Broadband in the Amsterdam area is disrupted since 14:05. Version 2.5 is fine.";
        assert_eq!(scrub(text, &[&t]), text);
    }

    #[test]
    fn the_extractive_customer_notice_names_no_internals() {
        let t = ticket();
        let path = BasicZeroTokenPath;
        let notice = path.scrub_customer(&path.extractive(&t, SummaryKind::Customer), &[&t]);
        assert!(!notice.contains("ams-core") && !notice.contains("Jane"));
        assert!(
            path.extractive(&t, SummaryKind::Technician)
                .contains("INC0042424")
        );
    }
}
