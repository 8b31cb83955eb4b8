//! The leak scrubber: customer-facing text must never carry internal hostnames or FQDNs, IP
//! addresses (v4/v6), e-mail addresses, phone numbers, people's names, CI names or internal
//! ticket text.
//!
//! Every customer notification passes through [`scrub`] (LLM output and the extractive path
//! alike); [`find_leaks`] is the independent check tests and callers assert with. Patterns
//! catch what has a shape (addresses, numbers, device-like tokens); the [`ScrubContext`]
//! built from the ticket catches what does not (names, CI and group names, and any run of
//! [`COPIED_WORDS`] words copied from the ticket's internal text). Over-scrubbing is the
//! accepted failure mode: a lost word is cheaper than a leaked address.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::ticket::Ticket;

/// What replaces a scrubbed fragment.
pub const REDACTED: &str = "[removed]";

/// A run of this many consecutive words shared with the ticket's internal text is a leak.
pub const COPIED_WORDS: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeakKind {
    Url,
    Email,
    Ipv6,
    Ipv4,
    Phone,
    Fqdn,
    DeviceName,
    Person,
    InternalTerm,
    InternalText,
}

/// One leak found in a text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leak {
    pub kind: LeakKind,
    pub fragment: String,
}

/// What a ticket says must not reach customers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubContext {
    /// People: assignee, caller, journal authors. Whole names and their parts are removed.
    pub people: Vec<String>,
    /// CI names, assignment groups, locations: removed as whole phrases.
    pub internal_terms: Vec<String>,
    /// Hashes of every `COPIED_WORDS`-word run of the ticket's internal text.
    #[serde(skip)]
    internal_runs: HashSet<u64>,
}

impl ScrubContext {
    pub fn new(
        people: Vec<String>,
        internal_terms: Vec<String>,
        internal_texts: &[&str],
    ) -> ScrubContext {
        let mut internal_runs = HashSet::new();
        let mut words = WordBuffer::default();
        for text in internal_texts {
            words.insert_run_hashes(text, &mut internal_runs);
        }
        ScrubContext {
            people,
            internal_terms,
            internal_runs,
        }
    }

    /// Everything a ticket names: people, CI, group, location; its descriptions and log as internal text.
    pub fn from_ticket(ticket: &Ticket) -> ScrubContext {
        let people = ticket.people().into_iter().map(str::to_owned).collect();
        let internal_terms = [&ticket.cmdb_ci, &ticket.assignment_group, &ticket.location]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        let mut texts: Vec<&str> = vec![&ticket.short_description, &ticket.description];
        texts.extend(ticket.log.iter().map(|e| e.text.as_str()));
        ScrubContext::new(people, internal_terms, &texts)
    }

    /// Adds everything `other` names, so that a text speaking for several tickets is
    /// scrubbed against all of them.
    pub fn absorb(&mut self, other: ScrubContext) {
        for person in other.people {
            if !self.people.contains(&person) {
                self.people.push(person);
            }
        }
        for term in other.internal_terms {
            if !self.internal_terms.contains(&term) {
                self.internal_terms.push(term);
            }
        }
        self.internal_runs.extend(other.internal_runs);
    }

    /// Everything any of `contexts` names, people and terms sorted and without repeats: for
    /// a text speaking for many tickets, where [`ScrubContext::absorb`]'s order-keeping
    /// merge would compare every name with every other.
    pub fn union(contexts: impl IntoIterator<Item = ScrubContext>) -> ScrubContext {
        let mut union = ScrubContext::default();
        for context in contexts {
            union.people.extend(context.people);
            union.internal_terms.extend(context.internal_terms);
            union.internal_runs.extend(context.internal_runs);
        }
        union.people.sort();
        union.people.dedup();
        union.internal_terms.sort();
        union.internal_terms.dedup();
        union
    }

    /// Adds internal text (e.g. bounded log lines) to the copied-run check.
    pub fn add_internal_text(&mut self, text: &str) {
        WordBuffer::default().insert_run_hashes(text, &mut self.internal_runs);
    }
}

/// Scrubbed text and how many fragments were removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scrubbed {
    pub text: String,
    pub removed: usize,
}

struct Pattern {
    kind: LeakKind,
    regex: Regex,
    /// Extra test on a match (e.g. a phone needs enough digits).
    accept: fn(&str) -> bool,
}

fn always(_: &str) -> bool {
    true
}

fn enough_phone_digits(s: &str) -> bool {
    s.bytes().filter(u8::is_ascii_digit).count() >= 9
}

fn is_ipv6(s: &str) -> bool {
    s.parse::<std::net::Ipv6Addr>().is_ok()
        || s.split('/')
            .next()
            .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok())
}

/// Device-like tokens: letters and digits mixed (`lon-pe-01`, `rtr01`, `ge-0/0/1`, `INC0012345`).
fn device_like(s: &str) -> bool {
    let has_digit = s.bytes().any(|b| b.is_ascii_digit());
    let has_alpha = s.bytes().any(|b| b.is_ascii_alphabetic());
    let joined = s.contains(['-', '_', '/']);
    has_digit && has_alpha && (s.len() >= 4 || joined) && !is_plain_wording(s)
}

/// Letter-digit words customers may legitimately read.
fn is_plain_wording(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    matches!(lower.as_str(), "4g" | "5g" | "3g" | "24x7" | "wi-fi")
        || lower.ends_with("am") && lower.len() <= 4
        || lower.ends_with("pm") && lower.len() <= 4
}

static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    let p = |kind, re: &str, accept| {
        Regex::new(re).ok().map(|regex| Pattern {
            kind,
            regex,
            accept,
        })
    };
    [
        p(
            LeakKind::Url,
            r"(?i)\b[a-z][a-z0-9+.-]*://[^\s<>()]+",
            always,
        ),
        p(
            LeakKind::Email,
            r"(?i)[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+",
            always,
        ),
        p(
            LeakKind::Ipv6,
            r"(?i)(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?:%\w+)?(?:/\d{1,3})?",
            is_ipv6,
        ),
        p(
            LeakKind::Ipv4,
            r"\b(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?\b",
            always,
        ),
        p(
            LeakKind::Phone,
            r"\+?\(?\d[\d\s().-]{6,}\d",
            enough_phone_digits,
        ),
        p(
            LeakKind::Fqdn,
            r"(?i)\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}\b",
            always,
        ),
        p(
            LeakKind::DeviceName,
            r"\b[A-Za-z0-9]+(?:[-_/][A-Za-z0-9]+)*\b",
            device_like,
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
});

/// Removes every leak from `text`.
///
/// Copied sentences go first, while the text still reads as the ticket did; then what
/// has a shape (addresses, numbers, devices), each as a whole, before any name inside it
/// is: a name removed first would cut an e-mail address in two and leave pieces of it
/// that no longer have an address's shape.
pub fn scrub(text: &str, ctx: &ScrubContext) -> Scrubbed {
    let mut removed = 0;
    let mut out = drop_copied_sentences(text, ctx, &mut removed);
    for pattern in PATTERNS.iter() {
        let mut count = 0;
        let replaced = pattern
            .regex
            .replace_all(&out, |caps: &regex::Captures<'_>| {
                let m = caps.get(0).map_or("", |m| m.as_str());
                if (pattern.accept)(m) {
                    count += 1;
                    REDACTED.to_owned()
                } else {
                    m.to_owned()
                }
            });
        if count > 0 {
            removed += count;
            out = replaced.into_owned();
        }
    }
    for term in terms(ctx) {
        out = replace_phrase(&out, &term, &mut removed);
    }
    Scrubbed { text: out, removed }
}

/// Every leak in `text`; empty for a clean text.
pub fn find_leaks(text: &str, ctx: &ScrubContext) -> Vec<Leak> {
    let mut leaks = Vec::new();
    for pattern in PATTERNS.iter() {
        for m in pattern.regex.find_iter(text) {
            if (pattern.accept)(m.as_str()) {
                leaks.push(Leak {
                    kind: pattern.kind,
                    fragment: m.as_str().to_owned(),
                });
            }
        }
    }
    let lower = text.to_ascii_lowercase();
    for person in &ctx.people {
        for part in person_terms(person) {
            if contains_phrase(&lower, &part) {
                leaks.push(Leak {
                    kind: LeakKind::Person,
                    fragment: part,
                });
            }
        }
    }
    for term in &ctx.internal_terms {
        let t = term.trim().to_ascii_lowercase();
        if t.len() >= 3 && contains_phrase(&lower, &t) {
            leaks.push(Leak {
                kind: LeakKind::InternalTerm,
                fragment: term.clone(),
            });
        }
    }
    let w = words(text);
    for run in w.windows(COPIED_WORDS) {
        if ctx.internal_runs.contains(&run_hash(run)) {
            leaks.push(Leak {
                kind: LeakKind::InternalText,
                fragment: run.join(" "),
            });
        }
    }
    leaks
}

/// Whole names first, then their parts (a sentence may say only "Priya").
fn person_terms(person: &str) -> Vec<String> {
    let whole = person.trim().to_ascii_lowercase();
    let mut out = vec![whole.clone()];
    out.extend(
        whole
            .split(|c: char| !c.is_alphanumeric())
            .filter(|p| p.chars().count() >= 3)
            .map(str::to_owned),
    );
    out.retain(|t| !t.is_empty());
    out
}

/// People's names and parts, and internal terms, longest first so whole names go before parts.
fn terms(ctx: &ScrubContext) -> Vec<String> {
    let mut all: Vec<String> = ctx.people.iter().flat_map(|p| person_terms(p)).collect();
    all.extend(
        ctx.internal_terms
            .iter()
            .map(|t| t.trim().to_ascii_lowercase())
            .filter(|t| t.len() >= 3),
    );
    all.sort_by_key(|t| std::cmp::Reverse(t.len()));
    all.dedup();
    all
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b >= 0x80
}

/// Finds `needle` (lower-case) in `lower` at word boundaries.
fn find_phrase(lower: &str, needle: &str, from: usize) -> Option<usize> {
    let mut start = from;
    while let Some(pos) = lower.get(start..)?.find(needle) {
        let at = start + pos;
        let end = at + needle.len();
        let before_ok = at == 0 || !is_word_byte(lower.as_bytes()[at - 1]);
        let after_ok = end >= lower.len() || !is_word_byte(lower.as_bytes()[end]);
        if before_ok && after_ok {
            return Some(at);
        }
        start = at + needle.len().max(1);
        while start < lower.len() && !lower.is_char_boundary(start) {
            start += 1;
        }
    }
    None
}

fn contains_phrase(lower: &str, needle: &str) -> bool {
    !needle.is_empty() && find_phrase(lower, needle, 0).is_some()
}

/// Case-insensitive whole-word replacement. Lower-casing is ASCII-only so byte offsets line up.
fn replace_phrase(text: &str, needle: &str, removed: &mut usize) -> String {
    let needle = needle.to_ascii_lowercase();
    let lower = text.to_ascii_lowercase();
    if needle.is_empty() || find_phrase(&lower, &needle, 0).is_none() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut from = 0;
    while let Some(at) = find_phrase(&lower, &needle, from) {
        out.push_str(&text[last..at]);
        out.push_str(REDACTED);
        *removed += 1;
        last = at + needle.len();
        from = last;
    }
    out.push_str(&text[last..]);
    out
}

/// Sentences sharing a `COPIED_WORDS`-word run with internal text are dropped whole.
fn drop_copied_sentences(text: &str, ctx: &ScrubContext, removed: &mut usize) -> String {
    if ctx.internal_runs.is_empty() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for sentence in sentences(text) {
        let copied = words(sentence)
            .windows(COPIED_WORDS)
            .any(|run| ctx.internal_runs.contains(&run_hash(run)));
        if copied {
            *removed += 1;
        } else {
            out.push_str(sentence);
        }
    }
    out
}

/// `text` cut into sentences, each with the punctuation and the space that end it, so
/// that they join back into `text`. A `.`, `!` or `?` ends a sentence only where a space
/// or the end of the text follows it (closing brackets and quotes in between belong to
/// the sentence); a line break always does. A dot inside `10.1.2.3`, `core1.example.net`,
/// `jane.roe@example.com` or `020.555.0100` ends nothing: dropping the half of an address
/// that shares words with the ticket would leave the other half without an address's
/// shape, where no pattern finds it any more.
fn sentences(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let end = match bytes[i] {
            b'\n' => Some(i + 1),
            b'.' | b'!' | b'?' => {
                let mut j = i + 1;
                while j < bytes.len()
                    && matches!(bytes[j], b'.' | b'!' | b'?' | b')' | b']' | b'"' | b'\'')
                {
                    j += 1;
                }
                if j == bytes.len() {
                    Some(j)
                } else if bytes[j].is_ascii_whitespace() {
                    // The spaces after a sentence go with it, up to a line break.
                    while j < bytes.len() && bytes[j].is_ascii_whitespace() && bytes[j] != b'\n' {
                        j += 1;
                    }
                    if bytes.get(j) == Some(&b'\n') {
                        j += 1;
                    }
                    Some(j)
                } else {
                    None
                }
            }
            _ => None,
        };
        match end {
            Some(end) => {
                out.push(&text[start..end]);
                start = end;
                i = end;
            }
            None => i += 1,
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn run_hash(run: &[String]) -> u64 {
    let parts: Vec<&[u8]> = run.iter().flat_map(|w| [w.as_bytes(), b" "]).collect();
    crate::classifier::features::fnv1a(&parts)
}

/// A text's words as [`words`] gives them, laid end to end in one buffer: hashing every
/// run of a ticket's text (a context is built for every customer notice) without a
/// string per word or a vector per run.
#[derive(Default)]
struct WordBuffer {
    text: String,
    spans: Vec<(usize, usize)>,
}

impl WordBuffer {
    /// Adds the [`run_hash`] of every `COPIED_WORDS`-word run of `text` to `runs`.
    fn insert_run_hashes(&mut self, text: &str, runs: &mut HashSet<u64>) {
        self.text.clear();
        self.spans.clear();
        for word in text.split(|c: char| !c.is_alphanumeric()) {
            if word.is_empty() {
                continue;
            }
            let start = self.text.len();
            if word.is_ascii() {
                self.text.push_str(word);
                self.text[start..].make_ascii_lowercase();
            } else {
                self.text.push_str(&word.to_lowercase());
            }
            self.spans.push((start, self.text.len()));
        }
        let bytes = self.text.as_bytes();
        for run in self.spans.windows(COPIED_WORDS) {
            let mut parts: [&[u8]; 2 * COPIED_WORDS] = [b" "; 2 * COPIED_WORDS];
            for (i, &(start, end)) in run.iter().enumerate() {
                parts[2 * i] = &bytes[start..end];
            }
            runs.insert(crate::classifier::features::fnv1a(&parts));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> ScrubContext {
        ScrubContext::new(
            vec!["Priya Raman".into(), "Tom O'Neill".into()],
            vec!["lon-pe-01".into(), "Core Network Ops".into()],
            &["technician swapped the optic on the aggregation card at the north exchange"],
        )
    }

    #[test]
    fn run_hashes_from_the_word_buffer_are_those_of_the_words() {
        let text = "Technician SWAPPED the optic — on the Straße card, at the north exchange; İstanbul 42 x";
        let mut from_buffer = HashSet::new();
        WordBuffer::default().insert_run_hashes(text, &mut from_buffer);
        let from_words: HashSet<u64> = words(text).windows(COPIED_WORDS).map(run_hash).collect();
        assert_eq!(from_buffer, from_words);
        assert_eq!(from_words.len(), words(text).len() - COPIED_WORDS + 1);
    }

    #[test]
    fn a_union_names_everything_its_contexts_name_once_each() {
        let other = ScrubContext::new(
            vec!["Tom O'Neill".into(), "Ada Okafor".into()],
            vec!["lon-pe-01".into()],
            &["splice crew found the duct crushed under the new road works"],
        );
        let union = ScrubContext::union([ctx(), other]);
        assert_eq!(union.people, ["Ada Okafor", "Priya Raman", "Tom O'Neill"]);
        assert_eq!(union.internal_terms, ["Core Network Ops", "lon-pe-01"]);
        // Copied runs of either context's internal text are caught.
        for copied in [
            "The splice crew found the duct crushed under the new road works.",
            "The technician swapped the optic on the aggregation card at the north exchange.",
        ] {
            let out = scrub(copied, &union);
            assert!(
                out.removed > 0 && !out.text.contains("crushed") && !out.text.contains("optic"),
                "{out:?}"
            );
        }
    }

    #[test]
    fn removes_addresses_names_and_devices() {
        let text = "Contact priya.raman@corp.example.com or +44 20 7946 0958. Device lon-pe-01 (10.12.0.1, \
                    2001:db8::1) at core1.lon.corp.example.net failed; Priya and Core Network Ops are on it. \
                    See INC0012345 and https://intranet.example.com/x.";
        let s = scrub(text, &ctx());
        for bad in [
            "priya",
            "Priya",
            "7946",
            "lon-pe-01",
            "10.12.0.1",
            "2001:db8::1",
            "corp.example",
            "Core Network Ops",
            "INC0012345",
            "https",
        ] {
            assert!(!s.text.contains(bad), "{bad} survived in {:?}", s.text);
        }
        assert!(
            find_leaks(&s.text, &ctx()).is_empty(),
            "{:?}",
            find_leaks(&s.text, &ctx())
        );
        assert!(s.removed >= 9);
    }

    #[test]
    fn plain_customer_wording_survives() {
        let text = "We are aware of an issue affecting internet service in the North area. Around 1,200 \
                    customers are affected since 10:05. Our engineers are working to restore service.";
        let s = scrub(text, &ctx());
        assert_eq!(s.text, text);
        assert_eq!(s.removed, 0);
    }

    #[test]
    fn sentences_end_at_a_stop_before_a_space_not_inside_an_address() {
        let text =
            "BGP to 10.1.2.3 is down (see core1.example.net). Call 020.555.0100!\nDone?  Yes";
        assert_eq!(
            sentences(text),
            vec![
                "BGP to 10.1.2.3 is down (see core1.example.net). ",
                "Call 020.555.0100!\n",
                "Done?  ",
                "Yes"
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn sentences_join_back_into_the_text(text in "[a-z .!?()\"\n0-9é]{0,60}") {
            proptest::prop_assert_eq!(sentences(&text).concat(), text);
        }
    }

    #[test]
    fn sentences_copied_from_internal_text_are_dropped() {
        let text = "Service is degraded. The technician swapped the optic on the aggregation card yesterday. We will update you.";
        let s = scrub(text, &ctx());
        assert_eq!(s.text, "Service is degraded. We will update you.");
    }
}
