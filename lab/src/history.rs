//! Reading a real ServiceNow incident export for replay (`stormgate replay --history`).
//!
//! Two shapes are read, told apart by their first character: a CSV export (a list view's
//! "Export → CSV", or the UCI "Incident management process enriched event log", which
//! is one row per update) and the Table API's JSON (`{"result": [...]}`, also a bare
//! array or the JSONv2 `{"records": [...]}`), whose values may be strings, numbers,
//! reference objects or `{"display_value", "value"}` pairs.
//!
//! Columns are found by their ServiceNow field names, case-insensitively, with the
//! UCI log's spellings as aliases (`sys_updated_at`, `incident_state`); a renamed
//! column is named with [`HistoryOptions::columns`]. Times are `yyyy-MM-dd HH:mm:ss`
//! (ServiceNow's own form, or RFC 3339) or the day/month/year forms exports use
//! (`d/m/yyyy HH:MM`, also with `-` or `.`, optional seconds and AM/PM). Whether such a
//! date is day- or month-first is never guessed row by row: the whole file decides (a
//! first number above 12 proves day-first, a second one month-first), and a file that
//! cannot tell, or that says both, is refused unless [`DateOrder`] is given.
//!
//! Reading is total. A row that cannot become an event (no number, an impossible date,
//! no priority) is skipped and counted under its reason with its line (CSV) or record
//! (JSON) number; a field that cannot be read is dropped and counted. What the reader
//! decided for the whole file (date order, impact scale, versions numbered by time) is
//! said in [`HistoryReport::notes`]. Every event it emits is accepted by the event
//! parser (`stormgate_shared::event::parse_event`), which a property test holds it to.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Read;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::rng::fnv1a;
use crate::trace::{RecordedEvent, TraceEvent};
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::severity::Severity;
use stormgate_shared::ticket::{Level, TicketState, priority_matrix};

/// How `a/b/yyyy` dates are read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DateOrder {
    /// Decided by the file: refused when no date tells (every day ≤ 12) or dates disagree.
    #[default]
    Auto,
    /// `d/m/yyyy` (the UCI export, most of the world).
    DayFirst,
    /// `m/d/yyyy` (United States).
    MonthFirst,
}

impl std::str::FromStr for DateOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DateOrder::Auto),
            "day-first" | "dmy" => Ok(DateOrder::DayFirst),
            "month-first" | "mdy" => Ok(DateOrder::MonthFirst),
            other => Err(format!(
                "unknown date order {other:?} (auto, day-first, month-first)"
            )),
        }
    }
}

/// The scale `impact` and `urgency` are recorded on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LevelScale {
    /// 1–3 unless a value above 3 appears, then 1–5.
    #[default]
    Auto,
    /// ServiceNow's default: 1 High, 2 Medium, 3 Low.
    Three,
    /// Instances that widened the choice list: 1–2 read as High, 3 Medium, 4–5 Low.
    Five,
}

impl std::str::FromStr for LevelScale {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(LevelScale::Auto),
            "3" => Ok(LevelScale::Three),
            "5" => Ok(LevelScale::Five),
            other => Err(format!("unknown impact scale {other:?} (auto, 3, 5)")),
        }
    }
}

/// How to read an export.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryOptions {
    /// Where the first recorded instant lands on the replay's clock.
    pub start: EpochMillis,
    /// Recorded time is divided by this (60: an hour of history per replayed minute).
    pub time_scale: f64,
    pub date_order: DateOrder,
    pub level_scale: LevelScale,
    /// Field → the column (CSV header or JSON key) holding it, for renamed columns.
    pub columns: BTreeMap<String, String>,
}

impl HistoryOptions {
    pub fn new(start: EpochMillis, time_scale: f64) -> Self {
        HistoryOptions {
            start,
            time_scale,
            date_order: DateOrder::Auto,
            level_scale: LevelScale::Auto,
            columns: BTreeMap::new(),
        }
    }
}

/// The fields read, each with the column names tried when no mapping names one.
pub const FIELDS: &[(&str, &[&str])] = &[
    ("number", &["number"]),
    ("sys_id", &["sys_id"]),
    ("sys_updated_on", &["sys_updated_on", "sys_updated_at"]),
    ("opened_at", &["opened_at"]),
    ("sys_mod_count", &["sys_mod_count"]),
    ("state", &["state", "incident_state"]),
    ("priority", &["priority"]),
    ("impact", &["impact"]),
    ("urgency", &["urgency"]),
    ("category", &["category"]),
    ("subcategory", &["subcategory"]),
    ("u_symptom", &["u_symptom"]),
    ("location", &["location"]),
    ("u_region", &["u_region", "region"]),
    ("cmdb_ci", &["cmdb_ci"]),
    ("assignment_group", &["assignment_group"]),
    ("assigned_to", &["assigned_to"]),
    ("contact_type", &["contact_type"]),
    ("parent_incident", &["parent_incident", "parent"]),
    ("u_customers_affected", &["u_customers_affected"]),
    ("short_description", &["short_description"]),
    ("description", &["description"]),
    ("work_notes", &["work_notes"]),
    ("comments", &["comments"]),
    ("u_alarm_log", &["u_alarm_log"]),
];

/// Fields whose JSON `{"display_value", "value"}` form is read by its value (codes,
/// times); the others (names, text) by their display value.
const CODE_FIELDS: &[&str] = &[
    "sys_id",
    "sys_updated_on",
    "opened_at",
    "sys_mod_count",
    "state",
    "priority",
    "impact",
    "urgency",
    "u_customers_affected",
];

/// Where a row came from, for messages: a CSV line or a JSON record (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowRef {
    Line(u64),
    Record(u64),
}

impl fmt::Display for RowRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowRef::Line(n) => write!(f, "line {n}"),
            RowRef::Record(n) => write!(f, "record {n}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot read the history: {0}")]
    Read(String),
    #[error("the history is not valid JSON: {0}")]
    Json(String),
    #[error(
        "the JSON history holds no list of records (expected {{\"result\": [...]}}, {{\"records\": [...]}} or [...])"
    )]
    NoRecords,
    #[error(
        "the history has no {field} column (tried {tried}; columns found: {found}); name it with --column {field}=COLUMN"
    )]
    MissingColumn {
        field: &'static str,
        tried: String,
        found: String,
    },
    #[error("--column {0}: {1}")]
    BadMapping(String, String),
    #[error(
        "dates such as {value:?} ({row}) could be day/month or month/day, and no date in the file tells (none has a number above 12 in either place); say which with --date-order day-first or --date-order month-first"
    )]
    AmbiguousDates { row: RowRef, value: String },
    #[error(
        "dates disagree: {day_row} has {day_value:?} (day first) and {month_row} has {month_value:?} (month first); say which with --date-order"
    )]
    ConflictingDateOrder {
        day_row: RowRef,
        day_value: String,
        month_row: RowRef,
        month_value: String,
    },
    #[error("the time scale must be a number of at least 0.001, got {0}")]
    BadTimeScale(f64),
    #[error("the history has no usable rows ({rows} read){}", skipped_text(.skipped))]
    Empty {
        rows: u64,
        skipped: BTreeMap<String, Skipped>,
    },
}

fn skipped_text(skipped: &BTreeMap<String, Skipped>) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = skipped
        .iter()
        .map(|(reason, s)| format!("{} × {reason} ({})", s.rows, s.examples.join("; ")))
        .collect();
    format!(": skipped {}", parts.join(", "))
}

/// Rows skipped for one reason: how many, and the first few with where they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub rows: u64,
    /// Up to [`EXAMPLES`] of them: `line 4: "31/2/2016 25:10"`.
    pub examples: Vec<String>,
}

/// The slowest replay: a thousand times slower than recorded.
pub const MIN_TIME_SCALE: f64 = 0.001;

/// How many rows are named per reason.
pub const EXAMPLES: usize = 5;

/// What reading the export did, printed by the CLI and kept in the JSON report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryReport {
    pub file: String,
    /// `csv` or `json`.
    pub format: String,
    pub rows: u64,
    pub events: u64,
    pub tickets: u64,
    /// Rows that became no event, by reason.
    pub skipped: BTreeMap<String, Skipped>,
    /// Fields dropped from rows that were kept, by reason (the row's event goes on
    /// without them).
    pub dropped: BTreeMap<String, Skipped>,
    /// Field → the column it was read from.
    pub columns: BTreeMap<String, String>,
    /// Decisions taken for the whole file.
    pub notes: Vec<String>,
    /// First and last recorded update, `yyyy-MM-dd HH:mm:ss`.
    pub recorded_from: String,
    pub recorded_to: String,
    pub time_scale: f64,
    /// Minutes of virtual time from the first to the last event.
    pub replay_minutes: f64,
}

impl HistoryReport {
    pub fn skipped_rows(&self) -> u64 {
        self.skipped.values().map(|s| s.rows).sum()
    }

    /// One paragraph for the terminal.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "history {} ({}): {} rows, {} events of {} tickets, recorded {} to {}, replayed at {}x as {:.0} min of virtual time",
            self.file,
            self.format,
            self.rows,
            self.events,
            self.tickets,
            self.recorded_from,
            self.recorded_to,
            self.time_scale,
            self.replay_minutes
        );
        for (title, map) in [
            ("rows skipped", &self.skipped),
            ("fields dropped", &self.dropped),
        ] {
            if map.is_empty() {
                continue;
            }
            let total: u64 = map.values().map(|s| s.rows).sum();
            out.push_str(&format!("\n  {total} {title}:"));
            for (reason, s) in map {
                out.push_str(&format!(
                    "\n    {} × {reason}: {}{}",
                    s.rows,
                    s.examples.join("; "),
                    if s.rows as usize > s.examples.len() {
                        "; ..."
                    } else {
                        ""
                    }
                ));
            }
        }
        for note in &self.notes {
            out.push_str(&format!("\n  note: {note}"));
        }
        out
    }
}

/// A read export: its events in arrival order and what reading it did.
#[derive(Debug, Clone)]
pub struct History {
    pub events: Vec<TraceEvent>,
    pub report: HistoryReport,
}

/// One row as text by field, before any interpretation.
#[derive(Debug)]
struct RawRow {
    at: RowRef,
    fields: BTreeMap<&'static str, String>,
}

impl RawRow {
    fn get(&self, field: &str) -> Option<&str> {
        self.fields
            .get(field)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty() && *v != "?" && !v.eq_ignore_ascii_case("null"))
    }
}

/// Reads an export (CSV or Table API JSON) into replay events.
pub fn read_history(
    mut input: impl Read,
    file: &str,
    options: &HistoryOptions,
) -> Result<History, HistoryError> {
    // Below 1/1000 a long history would stretch past what the replay's clock can hold.
    if !(options.time_scale.is_finite() && options.time_scale >= MIN_TIME_SCALE) {
        return Err(HistoryError::BadTimeScale(options.time_scale));
    }
    for field in options.columns.keys() {
        if !FIELDS.iter().any(|(f, _)| f == field) {
            let known: Vec<&str> = FIELDS.iter().map(|(f, _)| *f).collect();
            return Err(HistoryError::BadMapping(
                field.clone(),
                format!("not a field read here (fields: {})", known.join(", ")),
            ));
        }
    }
    let mut bytes = Vec::new();
    input
        .read_to_end(&mut bytes)
        .map_err(|e| HistoryError::Read(e.to_string()))?;
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    let first = text.iter().find(|b| !b.is_ascii_whitespace());
    let mut report = HistoryReport {
        file: file.to_owned(),
        time_scale: options.time_scale,
        ..HistoryReport::default()
    };
    let rows = if matches!(first, Some(b'{' | b'[')) {
        report.format = "json".into();
        json_rows(text, options, &mut report)?
    } else {
        report.format = "csv".into();
        csv_rows(text, options, &mut report)?
    };
    report.rows = rows.len() as u64 + report.skipped_rows();
    interpret(rows, options, report)
}

/// The column each field is read from, given the names present.
fn resolve_columns(
    present: &[String],
    options: &HistoryOptions,
) -> Result<BTreeMap<&'static str, usize>, HistoryError> {
    let find = |name: &str| {
        present
            .iter()
            .position(|h| h.trim().eq_ignore_ascii_case(name.trim()))
    };
    let mut columns = BTreeMap::new();
    for (field, aliases) in FIELDS {
        if let Some(mapped) = options.columns.get(*field) {
            let i = find(mapped).ok_or_else(|| {
                HistoryError::BadMapping(
                    (*field).to_owned(),
                    format!(
                        "no column {mapped:?} in the history (columns found: {})",
                        present.join(", ")
                    ),
                )
            })?;
            columns.insert(*field, i);
        } else if let Some(i) = aliases.iter().find_map(|a| find(a)) {
            columns.insert(*field, i);
        }
    }
    for required in ["number", "sys_updated_on"] {
        if !columns.contains_key(required) {
            let tried = FIELDS
                .iter()
                .find(|(f, _)| *f == required)
                .map(|(_, a)| a.join(", "))
                .unwrap_or_default();
            let mut found = present.join(", ");
            if found.len() > 300 {
                found = format!("{}...", found.chars().take(300).collect::<String>());
            }
            return Err(HistoryError::MissingColumn {
                field: required,
                tried,
                found,
            });
        }
    }
    Ok(columns)
}

fn csv_rows(
    text: &[u8],
    options: &HistoryOptions,
    report: &mut HistoryReport,
) -> Result<Vec<RawRow>, HistoryError> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(text);
    let headers: Vec<String> = reader
        .byte_headers()
        .map_err(|e| HistoryError::Read(e.to_string()))?
        .iter()
        .map(|h| String::from_utf8_lossy(h).into_owned())
        .collect();
    let columns = resolve_columns(&headers, options)?;
    for (field, &i) in &columns {
        report
            .columns
            .insert((*field).to_owned(), headers[i].trim().to_owned());
    }
    let mut rows = Vec::new();
    let mut record = csv::ByteRecord::new();
    let mut data_row = 0u64;
    loop {
        data_row += 1;
        let line = reader.position().line().max(data_row + 1);
        match reader.read_byte_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let at = e
                    .position()
                    .map(|p| RowRef::Line(p.line()))
                    .unwrap_or(RowRef::Line(line));
                note(&mut report.skipped, "not a CSV row", at, &e.to_string());
                // A broken quote or I/O error leaves the reader where it cannot go on.
                if !matches!(e.kind(), csv::ErrorKind::UnequalLengths { .. }) {
                    break;
                }
                continue;
            }
        }
        let at = RowRef::Line(record.position().map(|p| p.line()).unwrap_or(line));
        let mut fields = BTreeMap::new();
        let mut lossy = false;
        for (field, &i) in &columns {
            if let Some(v) = record.get(i) {
                let value = match std::str::from_utf8(v) {
                    Ok(s) => s.to_owned(),
                    Err(_) => {
                        lossy = true;
                        String::from_utf8_lossy(v).into_owned()
                    }
                };
                fields.insert(*field, value);
            }
        }
        if lossy {
            note(
                &mut report.dropped,
                "text not UTF-8 (invalid bytes replaced)",
                at,
                "",
            );
        }
        rows.push(RawRow { at, fields });
    }
    Ok(rows)
}

fn json_rows(
    text: &[u8],
    options: &HistoryOptions,
    report: &mut HistoryReport,
) -> Result<Vec<RawRow>, HistoryError> {
    let value: Value =
        serde_json::from_slice(text).map_err(|e| HistoryError::Json(e.to_string()))?;
    let records = match value {
        Value::Array(a) => a,
        Value::Object(mut o) => match o.remove("result").or_else(|| o.remove("records")) {
            Some(Value::Array(a)) => a,
            _ => return Err(HistoryError::NoRecords),
        },
        _ => return Err(HistoryError::NoRecords),
    };
    let mut keys: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for r in &records {
        if let Value::Object(o) = r {
            for k in o.keys() {
                if seen.insert(k.clone()) {
                    keys.push(k.clone());
                }
            }
        }
    }
    let columns = resolve_columns(&keys, options)?;
    for (field, &i) in &columns {
        report.columns.insert((*field).to_owned(), keys[i].clone());
    }
    let mut rows = Vec::new();
    for (n, r) in records.into_iter().enumerate() {
        let at = RowRef::Record(n as u64 + 1);
        let Value::Object(o) = r else {
            note(&mut report.skipped, "record is not a JSON object", at, "");
            continue;
        };
        let mut fields = BTreeMap::new();
        for (field, &i) in &columns {
            if let Some(v) = o.get(&keys[i]).and_then(|v| json_text(v, field)) {
                fields.insert(*field, v);
            }
        }
        rows.push(RawRow { at, fields });
    }
    Ok(rows)
}

/// A JSON value as the text a CSV export would show for `field`.
fn json_text(v: &Value, field: &str) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Object(o) => {
            let pick = |k: &str| o.get(k).filter(|v| !v.is_null() && *v != "");
            let (first, second) = if CODE_FIELDS.contains(&field) {
                ("value", "display_value")
            } else {
                ("display_value", "value")
            };
            pick(first)
                .or_else(|| pick(second))
                .and_then(|v| json_text(v, field))
        }
        Value::Array(items) => {
            // A journal as a list of entries: their text, newest first as ServiceNow shows it.
            let parts: Vec<String> = items
                .iter()
                .filter_map(|i| match i {
                    Value::Object(o) => ["value", "text", "message", "display_value"]
                        .iter()
                        .find_map(|k| o.get(*k).and_then(Value::as_str))
                        .map(str::to_owned),
                    other => json_text(other, field),
                })
                .collect();
            (!parts.is_empty()).then(|| parts.join("\n\n"))
        }
        Value::Null => None,
    }
}

fn note(map: &mut BTreeMap<String, Skipped>, reason: &str, at: RowRef, detail: &str) {
    let entry = map.entry(reason.to_owned()).or_default();
    entry.rows += 1;
    if entry.examples.len() < EXAMPLES {
        entry.examples.push(if detail.is_empty() {
            at.to_string()
        } else {
            format!("{at}: {}", clip(detail))
        });
    }
}

fn clip(s: &str) -> String {
    if s.chars().count() <= 160 {
        s.to_owned()
    } else {
        format!("{}...", s.chars().take(160).collect::<String>())
    }
}

/// A date-time's parts, as written, before the date order is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// A year-first or RFC 3339 instant, already read.
    Exact(EpochMillis),
    /// `a/b/yyyy HH:MM[:SS] [AM|PM]`.
    Numeric {
        a: u32,
        b: u32,
        year: i32,
        hour: u32,
        minute: u32,
        second: u32,
    },
}

/// Splits a time as written; `None` when it is no recognisable form.
fn written(s: &str) -> Option<Written> {
    let t = s.trim();
    if let Some(at) = stormgate_shared::event::parse_servicenow_time(t) {
        return Some(Written::Exact(at));
    }
    // yyyy-MM-dd HH:mm without seconds.
    if let Ok(dt) = t.parse::<jiff::civil::DateTime>()
        && let Ok(z) = dt.to_zoned(jiff::tz::TimeZone::UTC)
    {
        return u64::try_from(z.timestamp().as_millisecond())
            .ok()
            .map(|ms| Written::Exact(EpochMillis(ms)));
    }
    let mut words = t.split_whitespace();
    let date = words.next()?;
    let time = words.next().unwrap_or("00:00");
    let meridiem = words.next().map(str::to_ascii_uppercase);
    if words.next().is_some() {
        return None;
    }
    let sep = date.chars().find(|c| matches!(c, '/' | '-' | '.'))?;
    let mut d = date.split(sep);
    let number = |p: Option<&str>| -> Option<u32> {
        let p = p?;
        (!p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse().ok())
            .flatten()
    };
    let (a, b, year) = (number(d.next())?, number(d.next())?, number(d.next())?);
    if d.next().is_some() || year < 1000 {
        return None;
    }
    let mut tp = time.split(':');
    let (hour, minute) = (number(tp.next())?, number(tp.next())?);
    let second = match tp.next() {
        Some(s) => number(Some(s.split('.').next().unwrap_or(s)))?,
        None => 0,
    };
    if tp.next().is_some() {
        return None;
    }
    let hour = match meridiem.as_deref() {
        None => hour,
        Some("AM") if (1..=12).contains(&hour) => hour % 12,
        Some("PM") if (1..=12).contains(&hour) => hour % 12 + 12,
        Some(_) => return None,
    };
    Some(Written::Numeric {
        a,
        b,
        year: year as i32,
        hour,
        minute,
        second,
    })
}

/// The instant of a numeric date in a known order, or why it is impossible.
fn resolve(w: Written, day_first: bool) -> Result<EpochMillis, String> {
    match w {
        Written::Exact(at) => Ok(at),
        Written::Numeric {
            a,
            b,
            year,
            hour,
            minute,
            second,
        } => {
            let (day, month) = if day_first { (a, b) } else { (b, a) };
            let small = |v: u32| i8::try_from(v).map_err(|_| format!("{v} is out of range"));
            let date = jiff::civil::Date::new(
                i16::try_from(year).map_err(|e| e.to_string())?,
                small(month)?,
                small(day)?,
            )
            .map_err(|e| e.to_string())?;
            let time = jiff::civil::Time::new(small(hour)?, small(minute)?, small(second)?, 0)
                .map_err(|e| e.to_string())?;
            let ts = date
                .to_datetime(time)
                .to_zoned(jiff::tz::TimeZone::UTC)
                .map_err(|e| e.to_string())?
                .timestamp();
            u64::try_from(ts.as_millisecond())
                .map(EpochMillis)
                .map_err(|_| "before 1970".to_owned())
        }
    }
}

/// The file's date order: given, or proven by its dates.
fn date_order(
    rows: &[RawRow],
    options: &HistoryOptions,
    report: &mut HistoryReport,
) -> Result<bool, HistoryError> {
    match options.date_order {
        DateOrder::DayFirst => return Ok(true),
        DateOrder::MonthFirst => return Ok(false),
        DateOrder::Auto => {}
    }
    let mut day_proof: Option<(RowRef, String)> = None;
    let mut month_proof: Option<(RowRef, String)> = None;
    let mut unproven: Option<(RowRef, String)> = None;
    for row in rows {
        for field in ["sys_updated_on", "opened_at"] {
            let Some(v) = row.get(field) else { continue };
            let Some(Written::Numeric { a, b, .. }) = written(v) else {
                continue;
            };
            if a > 12 && b <= 12 && day_proof.is_none() {
                day_proof = Some((row.at, v.to_owned()));
            } else if b > 12 && a <= 12 && month_proof.is_none() {
                month_proof = Some((row.at, v.to_owned()));
            } else if unproven.is_none() {
                unproven = Some((row.at, v.to_owned()));
            }
        }
        if day_proof.is_some() && month_proof.is_some() {
            break;
        }
    }
    match (day_proof, month_proof) {
        (Some((day_row, day_value)), Some((month_row, month_value))) => {
            Err(HistoryError::ConflictingDateOrder {
                day_row,
                day_value,
                month_row,
                month_value,
            })
        }
        (Some((row, value)), None) => {
            report.notes.push(format!(
                "dates a/b/yyyy read day first: {row} has {value:?}"
            ));
            Ok(true)
        }
        (None, Some((row, value))) => {
            report.notes.push(format!(
                "dates a/b/yyyy read month first: {row} has {value:?}"
            ));
            Ok(false)
        }
        (None, None) => match unproven {
            Some((row, value)) => Err(HistoryError::AmbiguousDates { row, value }),
            None => Ok(true),
        },
    }
}

/// The leading number of a code or display value (`"4 - Low"` → 4).
fn leading_number(s: &str) -> Option<u32> {
    let digits: String = s
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// Whether impact and urgency are on a 1–5 scale.
fn five_scale(rows: &[RawRow], options: &HistoryOptions, report: &mut HistoryReport) -> bool {
    match options.level_scale {
        LevelScale::Three => false,
        LevelScale::Five => {
            report.notes.push(
                "impact and urgency read on a 1–5 scale: 1–2 as 1 High, 3 as 2 Medium, 4–5 as 3 Low"
                    .into(),
            );
            true
        }
        LevelScale::Auto => {
            let proof = rows.iter().find_map(|row| {
                ["impact", "urgency"].iter().find_map(|f| {
                    let v = row.get(f)?;
                    matches!(leading_number(v), Some(4 | 5))
                        .then(|| format!("{} has {f} {v:?}", row.at))
                })
            });
            match proof {
                Some(proof) => {
                    report.notes.push(format!(
                        "impact and urgency read on a 1–5 scale ({proof}): 1–2 as 1 High, 3 as 2 Medium, 4–5 as 3 Low; --impact-scale 3 refuses such values instead"
                    ));
                    true
                }
                None => false,
            }
        }
    }
}

/// A level on the file's scale, as the 1–3 level the event contract carries.
fn level(v: &str, five: bool) -> Result<Level, String> {
    match (leading_number(v), five) {
        (Some(1 | 2), true) => Ok(Level::High),
        (Some(3), true) => Ok(Level::Medium),
        (Some(4 | 5), true) => Ok(Level::Low),
        (Some(4 | 5), false) => Err(format!(
            "{v:?} is outside 1–3 (--impact-scale 5 reads a 1–5 scale)"
        )),
        _ => Level::parse(v).ok_or_else(|| format!("{v:?} is not 1–3 or High/Medium/Low")),
    }
}

fn servicenow_time(t: EpochMillis) -> String {
    jiff::Timestamp::from_millisecond(t.0 as i64)
        .map(|ts| ts.strftime("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

/// A row that will become an event.
struct Kept {
    at: EpochMillis,
    row: RowRef,
    number: String,
    sys_id: String,
    version: Option<u64>,
    severity: Severity,
    record: Map<String, Value>,
}

fn interpret(
    rows: Vec<RawRow>,
    options: &HistoryOptions,
    mut report: HistoryReport,
) -> Result<History, HistoryError> {
    let day_first = date_order(&rows, options, &mut report)?;
    let five = five_scale(&rows, options, &mut report);
    let has_versions = report.columns.contains_key("sys_mod_count");
    let mut kept: Vec<Kept> = Vec::with_capacity(rows.len());
    let mut derived_priorities = 0u64;
    for row in &rows {
        let Some(number) = row.get("number") else {
            note(&mut report.skipped, "no incident number", row.at, "");
            continue;
        };
        let Some(updated) = row.get("sys_updated_on") else {
            note(&mut report.skipped, "no update time", row.at, "");
            continue;
        };
        let at = match written(updated).map(|w| resolve(w, day_first)) {
            None => {
                note(
                    &mut report.skipped,
                    "update time is not a date",
                    row.at,
                    &format!("{updated:?}"),
                );
                continue;
            }
            Some(Err(why)) => {
                note(
                    &mut report.skipped,
                    "update time is an impossible date",
                    row.at,
                    &format!("{updated:?} ({why})"),
                );
                continue;
            }
            Some(Ok(at)) => at,
        };
        let mut levels = [None, None];
        for (slot, field) in levels.iter_mut().zip(["impact", "urgency"]) {
            if let Some(v) = row.get(field) {
                match level(v, five) {
                    Ok(l) => *slot = Some(l),
                    Err(why) => note(
                        &mut report.dropped,
                        &format!("{field} not understood"),
                        row.at,
                        &why,
                    ),
                }
            }
        }
        let severity = match row.get("priority").map(|p| (p, p.parse::<Severity>())) {
            Some((_, Ok(s))) => s,
            other => match levels {
                [Some(i), Some(u)] => {
                    derived_priorities += 1;
                    priority_matrix(i, u)
                }
                _ => {
                    let (reason, detail) = match other {
                        Some((p, _)) => ("priority not understood", format!("{p:?}")),
                        None => ("no priority (nor impact and urgency)", String::new()),
                    };
                    note(&mut report.skipped, reason, row.at, &detail);
                    continue;
                }
            },
        };
        let version = match row.get("sys_mod_count") {
            None => None,
            Some(v) => match v.parse::<u64>() {
                Ok(n) => Some(n),
                Err(_) => {
                    note(
                        &mut report.skipped,
                        "sys_mod_count not a whole number",
                        row.at,
                        &format!("{v:?}"),
                    );
                    continue;
                }
            },
        };
        let state = match row.get("state") {
            None => TicketState::InProgress,
            Some(s) => TicketState::parse(s).unwrap_or_else(|| {
                note(
                    &mut report.dropped,
                    "state not understood (read as In Progress)",
                    row.at,
                    &format!("{s:?}"),
                );
                TicketState::InProgress
            }),
        };
        let sys_id = row
            .get("sys_id")
            .filter(|s| s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_ascii_lowercase)
            .unwrap_or_else(|| {
                format!(
                    "{:016x}{:016x}",
                    fnv1a(number.as_bytes()),
                    fnv1a(format!("{number}#").as_bytes())
                )
            });
        let mut record = Map::new();
        record.insert("sys_id".into(), json!(sys_id));
        record.insert("number".into(), json!(number));
        record.insert("state".into(), json!(state.as_str()));
        record.insert("priority".into(), json!(severity.rank().to_string()));
        record.insert("sys_updated_on".into(), json!(servicenow_time(at)));
        for (field, l) in ["impact", "urgency"].iter().zip(levels) {
            if let Some(l) = l {
                record.insert((*field).into(), json!(l.rank().to_string()));
            }
        }
        if let Some(v) = row.get("opened_at") {
            match written(v).map(|w| resolve(w, day_first)) {
                Some(Ok(opened)) => {
                    record.insert("opened_at".into(), json!(servicenow_time(opened)));
                }
                _ => note(
                    &mut report.dropped,
                    "opened_at not a date",
                    row.at,
                    &format!("{v:?}"),
                ),
            }
        }
        if let Some(v) = row.get("u_customers_affected") {
            match v.parse::<u64>() {
                Ok(n) => {
                    record.insert("u_customers_affected".into(), json!(n.to_string()));
                }
                Err(_) => note(
                    &mut report.dropped,
                    "u_customers_affected not a whole number",
                    row.at,
                    &format!("{v:?}"),
                ),
            }
        }
        for field in [
            "category",
            "subcategory",
            "u_symptom",
            "location",
            "cmdb_ci",
            "assignment_group",
            "assigned_to",
            "contact_type",
            "parent_incident",
            "description",
            "work_notes",
            "comments",
            "u_alarm_log",
        ] {
            if let Some(v) = row.get(field) {
                record.insert(field.into(), json!(v));
            }
        }
        if let Some(region) = row.get("u_region").or_else(|| row.get("location")) {
            record.insert("u_region".into(), json!(region));
        }
        let headline = match row.get("short_description") {
            Some(s) => s.to_owned(),
            None => {
                let parts: Vec<&str> = [
                    row.get("category"),
                    row.get("subcategory"),
                    row.get("u_symptom"),
                ]
                .into_iter()
                .flatten()
                .collect();
                if parts.is_empty() {
                    format!("Incident {number}")
                } else {
                    parts.join(" / ")
                }
            }
        };
        record.insert("short_description".into(), json!(headline));
        kept.push(Kept {
            at,
            row: row.at,
            number: number.to_owned(),
            sys_id,
            version,
            severity,
            record,
        });
    }
    if derived_priorities > 0 {
        report.notes.push(format!(
            "{derived_priorities} rows without a priority: derived from impact × urgency with ServiceNow's matrix"
        ));
    }
    let Some(first) = kept.iter().map(|k| k.at).min() else {
        return Err(HistoryError::Empty {
            rows: report.rows,
            skipped: report.skipped,
        });
    };
    let last = kept.iter().map(|k| k.at).max().unwrap_or(first);
    kept.sort_by(|a, b| a.at.cmp(&b.at).then(a.row.cmp(&b.row)));
    if !has_versions {
        report.notes.push(
            "no sys_mod_count column: each ticket's rows are numbered 0, 1, ... in order of update time"
                .into(),
        );
    }
    let mut next_version: BTreeMap<String, u64> = BTreeMap::new();
    let mut tickets = BTreeSet::new();
    let scale = options.time_scale;
    let events: Vec<TraceEvent> = kept
        .into_iter()
        .map(|mut k| {
            let counter = next_version.entry(k.sys_id.clone()).or_insert(0);
            let version = k.version.unwrap_or(*counter);
            *counter = version + 1;
            k.record
                .insert("sys_mod_count".into(), json!(version.to_string()));
            tickets.insert(k.number.clone());
            let offset = (k.at.since(first).as_millis() as f64 / scale) as u64;
            TraceEvent::Recorded(RecordedEvent {
                at: EpochMillis(options.start.0.saturating_add(offset)),
                number: k.number,
                sys_id: k.sys_id,
                severity: k.severity,
                record: Value::Object(k.record),
            })
        })
        .collect();
    report.events = events.len() as u64;
    report.tickets = tickets.len() as u64;
    report.recorded_from = servicenow_time(first);
    report.recorded_to = servicenow_time(last);
    report.replay_minutes = last.since(first).as_secs_f64() / scale / 60.0;
    Ok(History { events, report })
}
