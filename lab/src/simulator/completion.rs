//! The text of a simulated completion, written from the prompt's own facts
//! (deterministic, extractive), and the fast token count its usage reports.

use std::collections::BTreeMap;

use stormgate_shared::llm::{ChatRequest, Role};
/// Tokens a chat message costs beyond its content (role and separators).
pub(super) const MESSAGE_OVERHEAD_TOKENS: u64 = 4;

/// A fast stand-in for a BPE tokenizer, used for `usage`: every run of letters is one
/// token per four letters started, every run of digits one per three, every other
/// visible character one. On alarm logs it lands within a few per cent of o200k
/// counts, and it costs nothing, which matters when a replay makes ~10⁵ calls.
pub fn approximate_tokens(text: &str) -> u64 {
    let mut tokens = 0u64;
    let mut run_len = 0u64;
    let mut run_kind = CharKind::Space;
    for c in text.chars() {
        let kind = CharKind::of(c);
        if kind != run_kind || kind == CharKind::Other {
            tokens += run_kind.tokens(run_len);
            run_kind = kind;
            run_len = 0;
        }
        run_len += 1;
    }
    tokens + run_kind.tokens(run_len)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CharKind {
    Letter,
    Digit,
    Space,
    Other,
}

impl CharKind {
    fn of(c: char) -> CharKind {
        if c.is_alphabetic() {
            CharKind::Letter
        } else if c.is_ascii_digit() {
            CharKind::Digit
        } else if c.is_whitespace() {
            CharKind::Space
        } else {
            CharKind::Other
        }
    }

    fn tokens(self, run: u64) -> u64 {
        match self {
            CharKind::Letter => run.div_ceil(4),
            CharKind::Digit => run.div_ceil(3),
            CharKind::Space => 0,
            CharKind::Other => run,
        }
    }
}

/// Words that make a log line worth a summary sentence, most telling first.
const SALIENT: &[&str] = &[
    "dying gasp",
    "power",
    "battery",
    "loss of light",
    "los",
    "fibre",
    "fiber",
    "down",
    "bgp",
    "ospf",
    "psu",
    "fail",
    "restored",
    "up",
    "customers",
    "outage",
];

/// A deterministic summary of the request's user content, shaped like a model's answer
/// to the product's prompts: a headline (the ticket's short description, else its first
/// line), the most salient distinct lines with their repeat counts, then the latest line,
/// as many sentences as the system message allows ("at most five sentences") and cut to
/// fit `max_tokens`. Alarm lines are told by their message, without the syslog prefix
/// (timestamp, host, process) that a model would not copy, and the prompt's own markup
/// (the `<ticket>` delimiters) is never quoted. Returns the text and whether it was cut.
pub fn completion_text(request: &ChatRequest) -> (String, bool) {
    let user: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| m.content.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty() && !is_markup(l))
        .collect();
    let limit = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .find_map(|m| sentence_limit(&m.content))
        .unwrap_or(DEFAULT_SENTENCES);
    let sentences = salient_sentences(&user, limit);
    let budget_chars = usize::try_from(request.max_tokens)
        .unwrap_or(usize::MAX)
        .saturating_mul(3);
    let mut text = String::new();
    let mut truncated = false;
    for sentence in sentences {
        let candidate_len = text.len() + sentence.len() + 1;
        if candidate_len > budget_chars {
            truncated = true;
            break;
        }
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&sentence);
    }
    if text.is_empty() {
        text = "No log content was provided; the ticket has no recorded activity.".to_owned();
        let cut: String = text.chars().take(budget_chars.max(1)).collect();
        truncated = cut.len() < text.len();
        text = cut;
    }
    (text, truncated)
}

/// Sentences an answer has when the system message sets no limit.
const DEFAULT_SENTENCES: usize = 5;

/// The limit an "at most N sentences" instruction sets, N in digits or in words.
pub(super) fn sentence_limit(system: &str) -> Option<usize> {
    const NUMBERS: [&str; 10] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    let lower = system.to_lowercase();
    let (_, rest) = lower.split_once("at most ")?;
    let mut words = rest.split_whitespace();
    let count = words.next()?;
    if !words.next()?.starts_with("sentence") {
        return None;
    }
    count
        .parse()
        .ok()
        .or_else(|| NUMBERS.iter().position(|n| *n == count).map(|i| i + 1))
}

/// A line of the prompt's own markup (a `<ticket …>` or `</ticket>` delimiter), not data.
fn is_markup(line: &str) -> bool {
    line.starts_with('<') && line.ends_with('>')
}

fn salient_sentences(lines: &[&str], limit: usize) -> Vec<String> {
    let Some(first) = lines.first() else {
        return Vec::new();
    };
    let headline = lines
        .iter()
        .find_map(|l| l.strip_prefix("Short description:"))
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .unwrap_or(first);
    // Each line's message is read once; the ranking, the filling and the close share it.
    let messages: Vec<(String, usize)> = lines.iter().map(|l| alarm_message(l)).collect();
    // The latest log line closes the answer; a prompt of facts only has none.
    let latest: Option<&str> = lines
        .iter()
        .zip(&messages)
        .skip(1)
        .rev()
        .find(|(l, _)| !is_fact(l))
        .map(|(_, (message, _))| message.as_str());
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (position, (key, repeats)) in messages.iter().enumerate().skip(1) {
        let entry = counts.entry(key).or_insert((0, position));
        entry.0 += repeats;
    }
    let mut ranked: Vec<(usize, usize, usize, &str)> = counts
        .into_iter()
        // What the headline or the closing sentence says is not said twice.
        .filter(|(shape, _)| !shape.contains(headline) && latest != Some(*shape))
        .filter_map(|(shape, (count, position))| {
            let lower = shape.to_lowercase();
            SALIENT
                .iter()
                .position(|w| lower.contains(w))
                .map(|rank| (rank, position, count, shape))
        })
        .collect();
    ranked.sort();
    let mut out = vec![sentence(headline)];
    let room = limit.saturating_sub(1 + usize::from(latest.is_some()));
    let mut told: Vec<&str> = Vec::with_capacity(room);
    for (_, _, count, shape) in ranked.into_iter().take(room) {
        let line = if count > 1 {
            format!("{shape} (seen {count} times)")
        } else {
            shape.to_owned()
        };
        out.push(sentence(&line));
        told.push(shape);
    }
    // Like a model asked for "at most N sentences", it uses them: when few lines are
    // telling (a customer notice's prompt is facts only), the other facts follow in order.
    // Headings (`Alarm log (repeats collapsed):`) introduce lines, they say nothing.
    for (_, (message, _)) in lines
        .iter()
        .zip(&messages)
        .filter(|(l, _)| !l.ends_with(':'))
    {
        if told.len() >= room {
            break;
        }
        let message = message.as_str();
        if message.contains(headline) || latest == Some(message) || told.contains(&message) {
            continue;
        }
        out.push(sentence(message));
        told.push(message);
    }
    if let Some(latest) = latest.filter(|_| limit > 1) {
        out.push(sentence(&format!("Latest: {latest}")));
    }
    out
}

/// A `Label: value` line of the ticket's facts (`State: New`, `Service/CI: …`), as the
/// product's prompts write them, rather than a line of its log.
fn is_fact(line: &str) -> bool {
    line.split_once(": ").is_some_and(|(label, _)| {
        label.starts_with(|c: char| c.is_ascii_uppercase())
            && label
                .chars()
                .all(|c| c.is_ascii_alphabetic() || matches!(c, ' ' | '/'))
    })
}

/// What an alarm line says and how often the log had it: the message without its
/// syslog prefix (up to the process, `ifmgr[290]: `, and a `%FACILITY-…` mnemonic) or,
/// lacking one, without its leading timestamp; the count from a collapsed line's `[xN]`.
fn alarm_message(line: &str) -> (String, usize) {
    let (line, repeats) = match line.rsplit_once(" [x") {
        Some((text, n)) => match n.strip_suffix(']').and_then(|n| n.parse::<usize>().ok()) {
            Some(n) => (text, n.max(1)),
            None => (line, 1),
        },
        None => (line, 1),
    };
    let message = match line.split_once("]: ") {
        Some((_, rest)) => match rest.strip_prefix('%').and_then(|r| r.split_once(" : ")) {
            Some((_, text)) => text,
            None => rest,
        },
        None => alarm_shape(line),
    };
    (message.chars().take(200).collect(), repeats)
}

/// A log line without its leading timestamp, so repeats of one alarm collapse.
fn alarm_shape(line: &str) -> &str {
    let rest = line.trim_start_matches(|c: char| {
        c.is_ascii_digit() || matches!(c, '-' | ':' | '.' | 'T' | 'Z' | ' ' | '+' | '/')
    });
    if rest.is_empty() { line } else { rest }
}

fn sentence(text: &str) -> String {
    let t = text.trim().trim_end_matches(['.', ';', ',']);
    format!("{t}.")
}
