//! Bounds a ticket log before anything expensive sees it: repeated alarm lines collapse into
//! one line with a count, the head and tail are kept, and a hard byte cap holds.
//!
//! During a storm the same alarm repeats hundreds of times with only a timestamp, counter,
//! interface or serial changed, so lines are compared after replacing every word that holds
//! a digit (`10:40:12`, `HundredGigE0/1/0/34`, `ALCL09B0603B`) with `#`.
//! Everything is one pass plus a hash map: linear in the log's size.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// How much of a log survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundingLimits {
    /// Hard cap on the rendered log, in bytes.
    pub max_bytes: usize,
    /// Share of `max_bytes` given to the oldest lines (the rest goes to the newest), in percent.
    pub head_percent: u8,
}

impl Default for BoundingLimits {
    fn default() -> Self {
        BoundingLimits {
            max_bytes: 6 * 1024,
            head_percent: 35,
        }
    }
}

/// One distinct line and how often it (or a line differing only in numbers) occurred.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundedLine {
    pub text: String,
    pub occurrences: u32,
}

/// What bounding did, for the summary's metadata.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundingReport {
    pub bytes_in: usize,
    pub bytes_out: usize,
    pub lines_in: usize,
    pub lines_out: usize,
    /// Distinct lines dropped from the middle to fit the cap.
    pub lines_dropped: usize,
    /// Occurrences folded into an earlier line's count.
    pub repeats_collapsed: usize,
    /// True when the collapsed log still exceeded the byte cap, so lines were omitted or cut.
    pub capped: bool,
}

/// A log after bounding: head lines, an omission marker position, tail lines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundedLog {
    pub head: Vec<BoundedLine>,
    /// Distinct lines omitted between head and tail.
    pub omitted: usize,
    pub tail: Vec<BoundedLine>,
    pub report: BoundingReport,
}

impl BoundedLog {
    /// Kept lines in order (head then tail).
    pub fn lines(&self) -> impl Iterator<Item = &BoundedLine> {
        self.head.iter().chain(self.tail.iter())
    }

    /// The text a prompt or a reader sees; never longer than the limit it was bounded with.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.report.bytes_out);
        for line in &self.head {
            render_line(&mut out, line);
        }
        if self.omitted > 0 {
            out.push_str(&omission_marker(self.omitted));
        }
        for line in &self.tail {
            render_line(&mut out, line);
        }
        out
    }
}

impl BoundedLog {
    /// Reads back what [`BoundedLog::render`] wrote (counts and the omission marker included):
    /// only for snapshots stored before the log was kept as data, which hold it rendered.
    /// A line whose own text ends in ` [xN]` reads back as N occurrences of the rest.
    pub fn parse_rendered(text: &str, report: BoundingReport) -> BoundedLog {
        let mut log = BoundedLog {
            report,
            ..BoundedLog::default()
        };
        for line in text.lines() {
            if let Some(n) = line
                .strip_prefix("[... ")
                .and_then(|r| r.strip_suffix(" lines omitted ...]"))
            {
                log.omitted = n.parse().unwrap_or(0);
                continue;
            }
            let (text, occurrences) = match line.rsplit_once(" [x") {
                Some((t, n)) => match n.strip_suffix(']').and_then(|n| n.parse::<u32>().ok()) {
                    Some(n) => (t, n),
                    None => (line, 1),
                },
                None => (line, 1),
            };
            let bounded = BoundedLine {
                text: text.to_owned(),
                occurrences,
            };
            if log.omitted > 0 {
                log.tail.push(bounded)
            } else {
                log.head.push(bounded)
            }
        }
        log
    }
}

fn render_line(out: &mut String, line: &BoundedLine) {
    out.push_str(&line.text);
    if line.occurrences > 1 {
        out.push_str(&format!(" [x{}]", line.occurrences));
    }
    out.push('\n');
}

fn rendered_len(line: &BoundedLine) -> usize {
    let suffix = if line.occurrences > 1 {
        4 + decimal_digits(line.occurrences)
    } else {
        0
    };
    line.text.len() + suffix + 1
}

fn decimal_digits(n: u32) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

fn omission_marker(n: usize) -> String {
    format!("[... {n} lines omitted ...]\n")
}

/// What a byte is to the comparison key.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ByteClass {
    /// Kept as it is (punctuation, and every byte of a non-ASCII character).
    Other,
    Space,
    Letter,
    Digit,
}

/// One lookup per byte instead of a chain of range tests: keys are computed for every
/// line of every log, so this loop is the hottest one on the ingest path.
const BYTE_CLASS: [ByteClass; 256] = {
    let mut table = [ByteClass::Other; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        table[b] = if byte.is_ascii_digit() {
            ByteClass::Digit
        } else if byte.is_ascii_alphabetic() {
            ByteClass::Letter
        } else if byte.is_ascii_whitespace() {
            ByteClass::Space
        } else {
            ByteClass::Other
        };
        b += 1;
    }
    table
};

/// Writes the line's comparison key into `out`: trimmed, every ASCII alphanumeric word
/// holding a digit replaced by `#` (adjacent ones by one), whitespace runs by one space.
/// Only whole ASCII words are replaced, so the key is still UTF-8.
fn normalise_into(line: &str, out: &mut Vec<u8>) {
    let bytes = line.trim().as_bytes();
    // A key is never longer than its line, so it is written in place into a buffer of
    // the line's length and cut to size at the end: no growth checks per byte.
    out.clear();
    out.resize(bytes.len(), 0);
    let mut len = 0;
    let mut i = 0;
    while i < bytes.len() {
        match BYTE_CLASS[usize::from(bytes[i])] {
            ByteClass::Letter | ByteClass::Digit => {
                // A word with a digit in it (a counter, a port, a serial, a MAC) is one
                // variable: its letters are as much a value as its digits.
                let start = i;
                let mut has_digit = false;
                while let Some(&b) = bytes.get(i) {
                    let class = BYTE_CLASS[usize::from(b)];
                    if class < ByteClass::Letter {
                        break;
                    }
                    has_digit |= class == ByteClass::Digit;
                    i += 1;
                }
                if !has_digit {
                    out[len..len + (i - start)].copy_from_slice(&bytes[start..i]);
                    len += i - start;
                } else if len == 0 || out[len - 1] != b'#' {
                    out[len] = b'#';
                    len += 1;
                }
            }
            ByteClass::Space => {
                if len == 0 || out[len - 1] != b' ' {
                    out[len] = b' ';
                    len += 1;
                }
                i += 1;
            }
            ByteClass::Other => {
                out[len] = bytes[i];
                len += 1;
                i += 1;
            }
        }
    }
    out.truncate(len);
}

/// Collapses repeats, then keeps head and tail within `limits.max_bytes`.
pub fn bound_lines<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    limits: BoundingLimits,
) -> BoundedLog {
    let mut report = BoundingReport::default();
    let mut distinct: Vec<(&'a str, u32)> = Vec::new();
    // Normalised key → index of its first line. The key buffer is reused, so a repeat
    // (the common case in a storm) costs one pass over the line and one hash, no allocation.
    let mut seen: HashMap<Vec<u8>, usize, foldhash::fast::RandomState> = HashMap::default();
    let mut key = Vec::with_capacity(256);
    for line in lines {
        report.bytes_in += line.len() + 1;
        report.lines_in += 1;
        if line.trim().is_empty() {
            continue;
        }
        normalise_into(line, &mut key);
        match seen.get(key.as_slice()) {
            Some(&i) => {
                distinct[i].1 = distinct[i].1.saturating_add(1);
                report.repeats_collapsed += 1;
            }
            None => {
                seen.insert(key.clone(), distinct.len());
                distinct.push((line, 1));
            }
        }
    }
    let lines: Vec<BoundedLine> = distinct
        .into_iter()
        .map(|(text, occurrences)| BoundedLine {
            text: text.trim_end().to_owned(),
            occurrences,
        })
        .collect();
    fit(lines, limits, report)
}

/// Bounds a whole text (split into lines).
pub fn bound_text(text: &str, limits: BoundingLimits) -> BoundedLog {
    bound_lines(text.lines(), limits)
}

fn fit(
    mut lines: Vec<BoundedLine>,
    limits: BoundingLimits,
    mut report: BoundingReport,
) -> BoundedLog {
    let total: usize = lines.iter().map(rendered_len).sum();
    if total <= limits.max_bytes {
        report.lines_out = lines.len();
        report.bytes_out = total;
        return BoundedLog {
            head: lines,
            omitted: 0,
            tail: Vec::new(),
            report,
        };
    }
    report.capped = true;
    // Reserve room for the marker (its count has at most as many digits as the line count).
    let marker = omission_marker(lines.len()).len();
    let budget = limits.max_bytes.saturating_sub(marker);
    let head_budget = budget * usize::from(limits.head_percent.min(100)) / 100;

    let mut head_len = 0;
    let mut used = 0;
    while head_len < lines.len() && used + rendered_len(&lines[head_len]) <= head_budget {
        used += rendered_len(&lines[head_len]);
        head_len += 1;
    }
    let mut tail_start = lines.len();
    while tail_start > head_len && used + rendered_len(&lines[tail_start - 1]) <= budget {
        tail_start -= 1;
        used += rendered_len(&lines[tail_start]);
    }
    // A single line longer than the whole budget: keep its beginning, cut at a char boundary.
    if head_len == 0 && tail_start == lines.len() && !lines.is_empty() {
        let suffix = rendered_len(&lines[0]) - lines[0].text.len();
        let room = budget.saturating_sub(suffix + TRUNCATED.len());
        if room == 0 {
            // Not even the truncation marker fits: the cap is a promise, so nothing is kept.
            return nothing_fits(lines.len(), limits, report);
        }
        let mut first = lines.swap_remove(0);
        let cut = floor_char_boundary(&first.text, room);
        first.text.truncate(cut);
        first.text.push_str(TRUNCATED);
        used = rendered_len(&first);
        let omitted = lines.len();
        report.lines_dropped = omitted;
        report.lines_out = 1;
        report.bytes_out = used
            + if omitted > 0 {
                omission_marker(omitted).len()
            } else {
                0
            };
        return BoundedLog {
            head: vec![first],
            omitted,
            tail: Vec::new(),
            report,
        };
    }
    let tail = lines.split_off(tail_start);
    let omitted = lines.len() - head_len;
    lines.truncate(head_len);
    report.lines_dropped = omitted;
    report.lines_out = lines.len() + tail.len();
    report.bytes_out = used
        + if omitted > 0 {
            omission_marker(omitted).len()
        } else {
            0
        };
    BoundedLog {
        head: lines,
        omitted,
        tail,
        report,
    }
}

/// A cap too small for any line: every line is dropped, and the omission marker is kept
/// only if it fits.
fn nothing_fits(lines: usize, limits: BoundingLimits, mut report: BoundingReport) -> BoundedLog {
    let marker = omission_marker(lines).len();
    let omitted = if marker <= limits.max_bytes { lines } else { 0 };
    report.lines_dropped = lines;
    report.lines_out = 0;
    report.bytes_out = if omitted > 0 { marker } else { 0 };
    BoundedLog {
        head: Vec::new(),
        omitted,
        tail: Vec::new(),
        report,
    }
}

const TRUNCATED: &str = " [truncated]";

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn repeats_differing_only_in_numbers_collapse_with_counts() {
        let log = "2026-11-29T10:00:01 LINK DOWN ge-0/0/1 seq 100\n\
                   2026-11-29T10:00:02 LINK DOWN ge-0/0/2 seq 101\n\
                   2026-11-29T10:00:03 BGP peer 10.0.0.1 down\n\
                   2026-11-29T10:00:04 LINK DOWN ge-0/0/7 seq 102\n";
        let b = bound_text(log, BoundingLimits::default());
        let lines: Vec<_> = b.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].occurrences, 3);
        assert!(lines[1].text.contains("BGP"));
        assert_eq!(b.report.repeats_collapsed, 2);
        assert!(b.render().contains("[x3]"));
    }

    #[test]
    fn repeats_differing_in_serials_and_interface_names_collapse_too() {
        let log = "10:40:12 olt1 GPON: ONT 1/11/11 DYING-GASP received, serial ALCL09B0603B\n\
                   10:41:12 olt1 GPON: ONT 1/13/3 DYING-GASP received, serial ALCLD8996E23\n\
                   10:42:12 olt1 GPON: ONT 0/2/16 DYING-GASP received, serial ALCLF12A6305\n\
                   10:43:01 core2 Interface HundredGigE0/1/0/34 changed state to Down\n\
                   10:43:09 core2 Interface HundredGigE0/2/0/8 changed state to Down\n";
        let b = bound_text(log, BoundingLimits::default());
        let lines: Vec<_> = b.lines().collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0].occurrences, 3);
        assert_eq!(lines[1].occurrences, 2);
        // The first occurrence is kept as it was written.
        assert!(lines[0].text.ends_with("ALCL09B0603B"));
    }

    #[test]
    fn words_without_digits_keep_lines_apart() {
        let b = bound_text(
            "olt1 DYING-GASP serial ALCL1\nolt1 LOS serial ALCL2\n",
            BoundingLimits::default(),
        );
        assert_eq!(b.lines().count(), 2);
    }

    #[test]
    fn different_words_never_merge() {
        let b = bound_text(
            "LINK DOWN port 1\nLINK UP port 1\n",
            BoundingLimits::default(),
        );
        assert_eq!(b.lines().count(), 2);
    }

    #[test]
    fn long_logs_keep_head_and_tail_and_report_the_drop() {
        let log: String = (0..500)
            .map(|i| format!("event {} kind-{}\n", i, "abcdefghij".repeat(1 + i % 7)))
            .collect();
        // Make lines distinct in words so they do not collapse.
        let log: String = log
            .lines()
            .enumerate()
            .map(|(i, l)| format!("{l} {}\n", word(i)))
            .collect();
        let limits = BoundingLimits {
            max_bytes: 2_000,
            head_percent: 35,
        };
        let b = bound_text(&log, limits);
        let out = b.render();
        assert!(
            out.len() <= limits.max_bytes,
            "{} > {}",
            out.len(),
            limits.max_bytes
        );
        assert_eq!(out.len(), b.report.bytes_out);
        assert!(out.starts_with("event 0 "));
        assert!(out.trim_end().ends_with(&word(499)));
        assert!(out.contains("lines omitted"));
        assert_eq!(b.report.lines_dropped, b.omitted);
        assert_eq!(b.report.lines_out + b.report.lines_dropped, 500);
    }

    fn word(i: usize) -> String {
        let mut s = String::new();
        let mut n = i + 1;
        while n > 0 {
            s.push(char::from(b'a' + (n % 26) as u8));
            n /= 26;
        }
        s
    }

    #[test]
    fn rendered_log_reads_back_into_the_same_lines() {
        let log: String = (0..300)
            .map(|i| format!("alarm {} on port {}\nevent {}\n", i % 3, i, word(i)))
            .collect();
        let b = bound_text(
            &log,
            BoundingLimits {
                max_bytes: 1_500,
                head_percent: 35,
            },
        );
        assert!(b.omitted > 0);
        assert_eq!(BoundedLog::parse_rendered(&b.render(), b.report), b);
    }

    #[test]
    fn one_giant_line_is_truncated_under_the_cap() {
        let log = "é".repeat(10_000);
        let limits = BoundingLimits {
            max_bytes: 1_000,
            head_percent: 35,
        };
        let b = bound_text(&log, limits);
        assert!(b.render().len() <= 1_000);
        assert!(b.report.capped);
    }

    /// Found by fuzzing (and the proptest below): a cap smaller than the truncation marker
    /// used to render " [truncated]" anyway, 13 bytes over a cap of 0.
    #[test]
    fn a_cap_smaller_than_any_line_keeps_nothing_and_still_holds() {
        for max_bytes in 0..40 {
            let limits = BoundingLimits {
                max_bytes,
                head_percent: 0,
            };
            let b = bound_text("\u{800}\nLINK DOWN xe-0/0/1\n", limits);
            let out = b.render();
            assert!(out.len() <= max_bytes, "{out:?} over a cap of {max_bytes}");
            assert_eq!(out.len(), b.report.bytes_out);
            assert_eq!(b.report.lines_in, 2);
        }
        let bound = |max_bytes| {
            bound_text(
                "a long line that cannot fit\n",
                BoundingLimits {
                    max_bytes,
                    head_percent: 50,
                },
            )
        };
        // The marker (26 bytes) does not fit 24: nothing is rendered, the report says why.
        assert_eq!(bound(24).render(), "");
        assert_eq!(bound(24).report.lines_dropped, 1);
        // It fits 27 where the line (28) would not: the reader still learns a line was omitted.
        assert_eq!(bound(27).render(), "[... 1 lines omitted ...]\n");
    }

    /// The straightforward key, kept as the reference the table-driven one must equal.
    fn reference_key(line: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let bytes = line.trim().as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b.is_ascii_alphanumeric() {
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                let word = &bytes[start..i];
                if word.iter().any(u8::is_ascii_digit) {
                    if out.last() != Some(&b'#') {
                        out.push(b'#');
                    }
                } else {
                    out.extend_from_slice(word);
                }
                continue;
            }
            let class = if b.is_ascii_whitespace() { b' ' } else { b };
            if !(class == b' ' && out.last() == Some(&b' ')) {
                out.push(class);
            }
            i += 1;
        }
        out
    }

    proptest! {
        #[test]
        fn key_equals_the_reference_key_on_any_text(
            line in "\\PC{0,80}|[a-zA-Z0-9 #:/.\t-]{0,80}|([a-z]{0,20}[0-9]?[a-zA-Z0-9]{0,20}[ #.\u{e9}]{0,2}){0,6}",
        ) {
            let mut key = b"stale".to_vec();
            normalise_into(&line, &mut key);
            prop_assert_eq!(key, reference_key(&line));
        }

        #[test]
        fn lines_differing_only_in_words_with_digits_share_a_key(
            words in prop::collection::vec(("[a-zA-Z:/().-]{1,8}", "[a-zA-Z]{0,4}[0-9][a-zA-Z0-9]{0,6}", "[a-zA-Z]{0,4}[0-9][a-zA-Z0-9]{0,6}", any::<bool>()), 1..12),
        ) {
            let (mut first, mut second) = (String::new(), String::new());
            for (plain, one, other, variable) in &words {
                let (a, b) = if *variable { (one, other) } else { (plain, plain) };
                first.push_str(a);
                first.push(' ');
                second.push_str(b);
                second.push(' ');
            }
            let (mut k1, mut k2) = (Vec::new(), Vec::new());
            normalise_into(&first, &mut k1);
            normalise_into(&second, &mut k2);
            prop_assert_eq!(k1, k2);
        }

        #[test]
        fn keys_of_any_text_are_utf8(line in "\\PC{0,64}") {
            let mut key = vec![b'x'; 3];
            normalise_into(&line, &mut key);
            prop_assert!(std::str::from_utf8(&key).is_ok());
        }

        #[test]
        fn rendered_log_never_exceeds_the_cap_and_report_adds_up(
            lines in prop::collection::vec("[a-zA-Z0-9 /:.é]{0,120}", 0..200),
            max_bytes in 64usize..4_000,
            head_percent in 0u8..=100,
        ) {
            let limits = BoundingLimits { max_bytes, head_percent };
            let b = bound_lines(lines.iter().map(String::as_str), limits);
            let out = b.render();
            prop_assert!(out.len() <= max_bytes);
            prop_assert_eq!(out.len(), b.report.bytes_out);
            prop_assert_eq!(b.report.lines_in, lines.len());
        }

        #[test]
        fn any_text_under_any_cap_stays_within_the_cap(
            text in ".{0,400}|(.{0,40}\n){0,40}",
            max_bytes in 0usize..600,
            head_percent in any::<u8>(),
        ) {
            let limits = BoundingLimits { max_bytes, head_percent };
            let b = bound_text(&text, limits);
            let out = b.render();
            prop_assert!(out.len() <= max_bytes, "{} bytes over a cap of {}", out.len(), max_bytes);
            prop_assert_eq!(out.len(), b.report.bytes_out);
            let _ = BoundedLog::parse_rendered(&out, b.report);
        }
    }
}
