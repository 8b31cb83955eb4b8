//! Feature extraction: ServiceNow fields one-hot and hashed, alarm counts by class, hashed text n-grams.
//!
//! Features are sparse `(index, value)` pairs in a fixed layout, so a model file is a dense weight
//! matrix and scoring touches only the few non-zero features. Hashing is FNV-1a: stable across
//! platforms and releases, which a model file written today and read next year depends on.

use serde::{Deserialize, Serialize};

use crate::log_bounding::BoundedLog;
use crate::ticket::{Level, LogSource, Ticket};

/// Buckets for hashed categorical fields (category, subcategory, symptom, ...).
pub const CATEGORICAL_BUCKETS: usize = 1024;
/// Buckets for hashed word unigrams and bigrams.
pub const TEXT_BUCKETS: usize = 1024;

const BIAS: usize = 0;
const IMPACT: usize = 1; // 3 levels + missing
const URGENCY: usize = 5; // 3 levels + missing
const IMPACT_X_URGENCY: usize = 9; // 9 combinations
const ALARMS: usize = 18; // AlarmClass::ALL.len()
const CUSTOMERS: usize = 24; // log1p(count)
const CUSTOMERS_KNOWN: usize = 25;
const DENSE: usize = 32;
const CATEGORICAL: usize = DENSE;
const TEXT: usize = CATEGORICAL + CATEGORICAL_BUCKETS;
/// Length of a feature vector.
pub const DIMENSIONS: usize = TEXT + TEXT_BUCKETS;

/// Alarm families that matter for severity during a network storm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlarmClass {
    LinkDown,
    LossOfLight,
    PowerOrBattery,
    DyingGasp,
    RoutingProtocol,
    Psu,
}

impl AlarmClass {
    pub const ALL: [AlarmClass; 6] = [
        AlarmClass::LinkDown,
        AlarmClass::LossOfLight,
        AlarmClass::PowerOrBattery,
        AlarmClass::DyingGasp,
        AlarmClass::RoutingProtocol,
        AlarmClass::Psu,
    ];

    pub fn label(self) -> &'static str {
        match self {
            AlarmClass::LinkDown => "link down",
            AlarmClass::LossOfLight => "loss of light",
            AlarmClass::PowerOrBattery => "power/battery",
            AlarmClass::DyingGasp => "dying gasp",
            AlarmClass::RoutingProtocol => "BGP/OSPF",
            AlarmClass::Psu => "PSU",
        }
    }

    /// Lower-case phrases whose presence puts a line in this class.
    fn phrases(self) -> &'static [&'static str] {
        match self {
            AlarmClass::LinkDown => &[
                "link down",
                "linkdown",
                "interface down",
                "port down",
                "if down",
                "carrier lost",
                "link_down",
            ],
            AlarmClass::LossOfLight => &[
                "loss of light",
                "loss of signal",
                " los ",
                "los alarm",
                "rx power low",
                "fibre cut",
                "fiber cut",
                "optical power",
            ],
            AlarmClass::PowerOrBattery => &[
                "mains fail",
                "power fail",
                "power outage",
                "on battery",
                "battery low",
                "battery discharg",
                "ac fail",
                "rectifier",
            ],
            AlarmClass::DyingGasp => &["dying gasp", "dying-gasp", "dyinggasp"],
            AlarmClass::RoutingProtocol => &["bgp", "ospf", "is-is", "isis adjacency"],
            AlarmClass::Psu => &["psu", "power supply"],
        }
    }
}

/// How many log lines fell into each alarm class (a line may count in several).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmCounts(pub [u32; 6]);

impl AlarmCounts {
    pub fn get(&self, class: AlarmClass) -> u32 {
        self.0[class_index(class)]
    }

    /// Counts one line that occurred `occurrences` times.
    pub fn add_line(&mut self, line: &str, occurrences: u32) {
        self.add_line_in(line, occurrences, &mut String::new());
    }

    /// [`AlarmCounts::add_line`] with a scratch buffer the caller reuses from line to line.
    fn add_line_in(&mut self, line: &str, occurrences: u32, padded: &mut String) {
        // Padding lets " los " match at the ends of a line.
        padded.clear();
        padded.push(' ');
        padded.push_str(line);
        padded.push(' ');
        padded.make_ascii_lowercase();
        for class in AlarmClass::ALL {
            if class.phrases().iter().any(|p| padded.contains(p)) {
                let slot = &mut self.0[class_index(class)];
                *slot = slot.saturating_add(occurrences);
            }
        }
    }

    pub fn from_bounded(log: &BoundedLog) -> AlarmCounts {
        let mut counts = AlarmCounts::default();
        let mut padded = String::new();
        for line in log.lines() {
            counts.add_line_in(&line.text, line.occurrences, &mut padded);
        }
        counts
    }

    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a str>) -> AlarmCounts {
        let mut counts = AlarmCounts::default();
        let mut padded = String::new();
        for line in lines {
            counts.add_line_in(line, 1, &mut padded);
        }
        counts
    }

    pub fn total(&self) -> u64 {
        self.0.iter().map(|&c| u64::from(c)).sum()
    }

    /// Classes with a non-zero count, most frequent first.
    pub fn present(&self) -> Vec<(AlarmClass, u32)> {
        let mut v: Vec<_> = AlarmClass::ALL
            .iter()
            .map(|&c| (c, self.get(c)))
            .filter(|(_, n)| *n > 0)
            .collect();
        v.sort_by_key(|c| std::cmp::Reverse(c.1));
        v
    }
}

fn class_index(class: AlarmClass) -> usize {
    match class {
        AlarmClass::LinkDown => 0,
        AlarmClass::LossOfLight => 1,
        AlarmClass::PowerOrBattery => 2,
        AlarmClass::DyingGasp => 3,
        AlarmClass::RoutingProtocol => 4,
        AlarmClass::Psu => 5,
    }
}

/// What the classifier looks at, borrowed from a ticket or a training row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeatureInput<'a> {
    pub impact: Option<Level>,
    pub urgency: Option<Level>,
    pub category: Option<&'a str>,
    pub subcategory: Option<&'a str>,
    pub symptom: Option<&'a str>,
    pub contact_type: Option<&'a str>,
    pub location: Option<&'a str>,
    pub assignment_group: Option<&'a str>,
    pub customers_affected: Option<u64>,
    /// Short description and description.
    pub text: [&'a str; 2],
    pub alarms: AlarmCounts,
}

impl<'a> FeatureInput<'a> {
    /// The classifier's view of a ticket whose alarm log has been bounded (journal lines
    /// count too: engineers paste alarms into work notes).
    pub fn from_ticket(ticket: &'a Ticket, alarm_log: &BoundedLog) -> FeatureInput<'a> {
        FeatureInput::with_log_alarms(ticket, AlarmCounts::from_bounded(alarm_log))
    }

    /// [`FeatureInput::from_ticket`] given the bounded alarm log's counts already.
    pub fn with_log_alarms(ticket: &'a Ticket, log_alarms: AlarmCounts) -> FeatureInput<'a> {
        let mut alarms = log_alarms;
        let mut padded = String::new();
        for entry in ticket.log.iter().filter(|e| e.source != LogSource::Alarm) {
            for line in entry.text.lines() {
                alarms.add_line_in(line, 1, &mut padded);
            }
        }
        FeatureInput {
            impact: ticket.impact,
            urgency: ticket.urgency,
            category: ticket.category.as_deref(),
            subcategory: ticket.subcategory.as_deref(),
            symptom: ticket.symptom.as_deref(),
            contact_type: ticket.contact_type.as_deref(),
            location: ticket.location.as_deref(),
            assignment_group: ticket.assignment_group.as_deref(),
            customers_affected: ticket.customers_affected,
            text: [&ticket.short_description, &ticket.description],
            alarms,
        }
    }
}

/// A sparse feature vector: `(index < DIMENSIONS, value)` pairs; an index may repeat (values add).
pub type SparseFeatures = Vec<(u32, f32)>;

/// Builds the feature vector.
pub fn extract(input: &FeatureInput<'_>) -> SparseFeatures {
    let mut f: SparseFeatures = Vec::with_capacity(48);
    f.push((BIAS as u32, 1.0));
    f.push(((IMPACT + level_slot(input.impact)) as u32, 1.0));
    f.push(((URGENCY + level_slot(input.urgency)) as u32, 1.0));
    if let (Some(i), Some(u)) = (input.impact, input.urgency) {
        let cross = usize::from(i.rank() - 1) * 3 + usize::from(u.rank() - 1);
        f.push(((IMPACT_X_URGENCY + cross) as u32, 1.0));
    }
    for (k, class) in AlarmClass::ALL.iter().enumerate() {
        let n = input.alarms.get(*class);
        if n > 0 {
            f.push(((ALARMS + k) as u32, (1.0 + n as f32).ln()));
        }
    }
    if let Some(n) = input.customers_affected {
        f.push((CUSTOMERS as u32, (1.0 + n as f32).ln()));
        f.push((CUSTOMERS_KNOWN as u32, 1.0));
    }
    for (name, value) in [
        ("category", input.category),
        ("subcategory", input.subcategory),
        ("symptom", input.symptom),
        ("contact_type", input.contact_type),
        ("location", input.location),
        ("assignment_group", input.assignment_group),
    ] {
        if let Some(v) = value.map(str::trim).filter(|v| !v.is_empty() && *v != "?") {
            let bucket = fnv1a(&[name.as_bytes(), b"=", v.as_bytes()]) % CATEGORICAL_BUCKETS as u64;
            f.push(((CATEGORICAL as u64 + bucket) as u32, 1.0));
        }
    }
    push_text_ngrams(&mut f, &input.text);
    f
}

fn level_slot(level: Option<Level>) -> usize {
    level.map_or(3, |l| usize::from(l.rank() - 1))
}

/// Word unigrams and bigrams, hashed, L2-normalised so long descriptions don't dominate.
fn push_text_ngrams(f: &mut SparseFeatures, texts: &[&str; 2]) {
    let start = f.len();
    let mut prev: Option<String> = None;
    for text in texts {
        // Text features look at the opening of a description: that is where the problem is named.
        let head = &text[..floor_boundary(text, 2048)];
        for word in head
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 1)
        {
            if word.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let word = word.to_lowercase();
            f.push((text_bucket(&[word.as_bytes()]), 1.0));
            if let Some(p) = &prev {
                f.push((text_bucket(&[p.as_bytes(), b" ", word.as_bytes()]), 1.0));
            }
            prev = Some(word);
        }
        prev = None;
    }
    let n = f.len() - start;
    if n > 0 {
        let scale = 1.0 / (n as f32).sqrt();
        for entry in &mut f[start..] {
            entry.1 = scale;
        }
    }
}

fn text_bucket(parts: &[&[u8]]) -> u32 {
    (TEXT as u64 + fnv1a(parts) % TEXT_BUCKETS as u64) as u32
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// 64-bit FNV-1a over the concatenated parts.
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alarm_lines_count_by_class_with_occurrences() {
        let mut c = AlarmCounts::default();
        c.add_line("Nov 29 10:00 DYING GASP from ONT 12", 40);
        c.add_line("LOS on xe-0/0/1", 2);
        c.add_line("BGP neighbor 10.0.0.1 Idle", 1);
        c.add_line("PSU 2 failed: power supply redundancy lost", 1);
        assert_eq!(c.get(AlarmClass::DyingGasp), 40);
        assert_eq!(c.get(AlarmClass::LossOfLight), 2);
        assert_eq!(c.get(AlarmClass::RoutingProtocol), 1);
        assert_eq!(c.get(AlarmClass::Psu), 1);
        assert_eq!(c.present()[0].0, AlarmClass::DyingGasp);
    }

    #[test]
    fn features_stay_inside_the_layout_and_are_deterministic() {
        let input = FeatureInput {
            impact: Some(Level::High),
            urgency: Some(Level::Low),
            category: Some("Network"),
            customers_affected: Some(300),
            text: ["Fibre cut near Leeds", "Multiple ONTs lost light"],
            ..FeatureInput::default()
        };
        let a = extract(&input);
        assert_eq!(a, extract(&input));
        assert!(
            a.iter()
                .all(|(i, v)| (*i as usize) < DIMENSIONS && v.is_finite())
        );
        assert!(a.iter().any(|(i, _)| *i as usize == IMPACT_X_URGENCY + 2));
    }
}
