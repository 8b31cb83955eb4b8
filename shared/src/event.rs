//! The ServiceNow incident event contract: raw Kafka value to a typed [`Ticket`] or a typed rejection.
//!
//! Stream Connect publishes whatever the producer flow builds, so the contract is ours and is
//! documented in `docs/ticket-events.md`. Parsing accepts what ServiceNow really sends
//! (string-typed numbers, reference fields as plain strings, `{"link","value"}` objects or
//! `{"display_value","value"}` objects, journal text or entry lists) and is total: any bytes
//! yield a [`Ticket`] or an [`EventRejection`] naming the offending field, never a panic.
//! The fields are read from the event's text by `event_fields.rs`, without a
//! `serde_json::Value` tree.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::clock::EpochMillis;
use crate::event_fields::{Decoded, FieldValue, Item, Member, RecordFields};
use crate::severity::Severity;
use crate::ticket::{CdcAction, Level, LogEntry, LogSource, Ticket, TicketState, priority_matrix};
use crate::ticket_id::TicketId;

/// The CDC headers the Stream Producer adds, passed in alongside the value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdcHeaders {
    /// `insert`, `update` or `delete`.
    pub action: Option<String>,
    /// The source table; only `incident` is accepted when present.
    pub table_name: Option<String>,
}

/// Why an event was not accepted. Every variant names what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventRejection {
    #[error("event of {size} bytes exceeds the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },
    #[error("event is not UTF-8 text")]
    NotUtf8,
    #[error("event is not JSON: {0}")]
    NotJson(String),
    #[error("event is not a JSON object (found {0})")]
    NotAnObject(&'static str),
    #[error("event is for table {0:?}, not incident")]
    WrongTable(String),
    #[error("unknown CDC action {0:?}")]
    UnknownAction(String),
    #[error("required field `{0}` is missing or empty")]
    MissingField(&'static str),
    #[error("field `{field}` has the wrong type: expected {expected}, found {found}")]
    WrongType {
        field: &'static str,
        expected: &'static str,
        found: &'static str,
    },
    #[error("field `{field}` has an invalid value {value:?}: expected {expected}")]
    InvalidValue {
        field: &'static str,
        value: String,
        expected: &'static str,
    },
}

/// Limits applied before parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParseLimits {
    pub max_event_bytes: usize,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_event_bytes: 2 * 1024 * 1024,
        }
    }
}

/// Parses one Kafka value (with its CDC headers) into a ticket.
pub fn parse_event(
    value: &[u8],
    headers: &CdcHeaders,
    limits: ParseLimits,
) -> Result<Ticket, EventRejection> {
    if value.len() > limits.max_event_bytes {
        return Err(EventRejection::TooLarge {
            size: value.len(),
            limit: limits.max_event_bytes,
        });
    }
    let text = std::str::from_utf8(value).map_err(|_| EventRejection::NotUtf8)?;
    match RecordFields::from_json(text).map_err(|e| EventRejection::NotJson(e.to_string()))? {
        Decoded::Record(fields) => parse_fields(*fields, headers),
        Decoded::NotAnObject(found) => Err(EventRejection::NotAnObject(found)),
    }
}

/// Why a record of the shared topic is not taken for an incident event. Such records
/// are skipped and counted by reason, never dead-lettered: the topic carries other
/// tables, heartbeats and other formats too (docs/ticket-events.md, *Shared topic*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The `table_name` header names another table.
    OtherTable,
    /// No `table_name` header, and the value is empty or a JSON object that is no
    /// ServiceNow record (neither `sys_id` nor `number`): heartbeats, control messages.
    Heartbeat,
    /// No `table_name` header, and a record without the evidence of an incident: its
    /// `number` is not an `INC` number, or it has none of the incident fields.
    NotAnIncident,
    /// No `table_name` header, and the value is not a JSON object (not UTF-8, not
    /// JSON, an array or a scalar: another encoding).
    OtherFormat,
}

impl SkipReason {
    pub const ALL: [SkipReason; 4] = [
        SkipReason::OtherTable,
        SkipReason::Heartbeat,
        SkipReason::NotAnIncident,
        SkipReason::OtherFormat,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::OtherTable => "other_table",
            SkipReason::Heartbeat => "heartbeat",
            SkipReason::NotAnIncident => "not_an_incident",
            SkipReason::OtherFormat => "other_format",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a record of the shared topic is: an incident event (parsed, or rejected with the
/// reason its dead letter gives), or something else, skipped. (Boxed: a ticket is large,
/// a skip is a byte.)
#[derive(Debug, Clone, PartialEq)]
pub enum Examined {
    Incident(Box<Result<Ticket, EventRejection>>),
    Skipped(SkipReason),
}

/// The incident fields whose presence, with an `INC` number, marks a record without a
/// `table_name` header as an incident.
const INCIDENT_FIELDS: [&str; 6] = [
    "sys_id",
    "sys_mod_count",
    "state",
    "priority",
    "impact",
    "urgency",
];

/// Decides whether a record is an incident event, on positive evidence only, and parses
/// it if so. A `table_name` header decides alone: `incident` claims an incident (which
/// is then parsed and, if invalid, rejected), any other table is skipped. Without the
/// header the value must be a JSON object whose `number` is an `INC` number (`INC`
/// followed by a digit, any case) and which has at least one more incident field
/// (`sys_id`, `sys_mod_count`, `state`, `priority`, `impact` or `urgency`); anything
/// else is skipped with its reason. Total: no input panics.
pub fn examine_event(value: &[u8], headers: &CdcHeaders, limits: ParseLimits) -> Examined {
    match headers.table_name.as_deref().map(str::trim) {
        Some("incident") => {
            return Examined::Incident(Box::new(parse_event(value, headers, limits)));
        }
        Some(table) if !table.is_empty() => return Examined::Skipped(SkipReason::OtherTable),
        _ => {}
    }
    if value.iter().all(u8::is_ascii_whitespace) {
        return Examined::Skipped(SkipReason::Heartbeat);
    }
    let Ok(text) = std::str::from_utf8(value) else {
        return Examined::Skipped(SkipReason::OtherFormat);
    };
    let fields = match RecordFields::from_json(text) {
        Ok(Decoded::Record(fields)) => fields,
        Ok(Decoded::NotAnObject(_)) | Err(_) => return Examined::Skipped(SkipReason::OtherFormat),
    };
    if let Some(reason) = not_an_incident(&fields) {
        return Examined::Skipped(reason);
    }
    if value.len() > limits.max_event_bytes {
        return Examined::Incident(Box::new(Err(EventRejection::TooLarge {
            size: value.len(),
            limit: limits.max_event_bytes,
        })));
    }
    Examined::Incident(Box::new(parse_fields(*fields, headers)))
}

/// Why a record without a `table_name` header is not an incident; `None` when it is one.
fn not_an_incident(fields: &RecordFields<'_>) -> Option<SkipReason> {
    let present = |name: &'static str| {
        fields.get(name).is_some_and(|v| {
            scalar_of(name, v, Prefer::Value).is_ok_and(|s| s.is_some_and(|s| !s.trim().is_empty()))
        })
    };
    let number = fields
        .get("number")
        .and_then(|v| scalar_of("number", v, Prefer::Value).ok().flatten())
        .map(|n| n.trim().to_owned());
    let Some(number) = number.filter(|n| !n.is_empty()) else {
        return Some(if present("sys_id") {
            SkipReason::NotAnIncident
        } else {
            SkipReason::Heartbeat
        });
    };
    let bytes = number.as_bytes();
    let inc_number =
        bytes.len() > 3 && bytes[..3].eq_ignore_ascii_case(b"INC") && bytes[3].is_ascii_digit();
    if inc_number && INCIDENT_FIELDS.iter().any(|f| present(f)) {
        None
    } else {
        Some(SkipReason::NotAnIncident)
    }
}

/// Parses an already-decoded incident record.
pub fn parse_record(
    record: &Map<String, Value>,
    headers: &CdcHeaders,
) -> Result<Ticket, EventRejection> {
    parse_fields(RecordFields::from_map(record), headers)
}

fn parse_fields(record: RecordFields<'_>, headers: &CdcHeaders) -> Result<Ticket, EventRejection> {
    if let Some(table) = headers
        .table_name
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        && table != "incident"
    {
        return Err(EventRejection::WrongTable(table.to_owned()));
    }
    let action = parse_action(headers.action.as_deref())?;
    let mut fields = Fields(record);

    let id = fields.required_code("sys_id")?;
    let id: TicketId = id.parse().map_err(|_| EventRejection::InvalidValue {
        field: "sys_id",
        value: clip(&id),
        expected: "32 hexadecimal characters",
    })?;
    let number = fields.required_code("number")?;
    let version = parse_u64("sys_mod_count", &fields.required_code("sys_mod_count")?)?;
    let state = fields.required_code("state")?;
    let state = TicketState::parse(&state).ok_or_else(|| EventRejection::InvalidValue {
        field: "state",
        value: clip(&state),
        expected: "a ServiceNow incident state (1, 2, 3, 6, 7, 8 or its name)",
    })?;
    let impact = fields
        .optional_code("impact")?
        .map(|v| parse_level("impact", &v))
        .transpose()?;
    let urgency = fields
        .optional_code("urgency")?
        .map(|v| parse_level("urgency", &v))
        .transpose()?;
    let severity = match fields.optional_code("priority")? {
        Some(p) => p
            .parse::<Severity>()
            .map_err(|_| EventRejection::InvalidValue {
                field: "priority",
                value: clip(&p),
                expected: "1-5 or a display value such as \"1 - Critical\"",
            })?,
        None => match (impact, urgency) {
            (Some(i), Some(u)) => priority_matrix(i, u),
            _ => return Err(EventRejection::MissingField("priority")),
        },
    };

    Ok(Ticket {
        id,
        number,
        version,
        action,
        updated_at: fields
            .optional_code("sys_updated_on")?
            .map(|v| parse_time("sys_updated_on", &v))
            .transpose()?,
        opened_at: fields
            .optional_code("opened_at")?
            .map(|v| parse_time("opened_at", &v))
            .transpose()?,
        severity,
        impact,
        urgency,
        state,
        category: fields.optional_text("category")?,
        subcategory: fields.optional_text("subcategory")?,
        symptom: fields.optional_text("u_symptom")?,
        contact_type: fields.optional_text("contact_type")?,
        cmdb_ci: fields.optional_text("cmdb_ci")?,
        location: fields.optional_text("location")?,
        region: fields.first_text(&["u_region", "region"])?,
        assignment_group: fields.optional_text("assignment_group")?,
        assigned_to: fields.optional_text("assigned_to")?,
        caller: fields.optional_text("caller_id")?,
        short_description: fields
            .optional_text("short_description")?
            .unwrap_or_default(),
        description: fields.optional_text("description")?.unwrap_or_default(),
        log: parse_log(&mut fields)?,
        customers_affected: match fields
            .first_code(&["u_customers_affected", "customers_affected"])?
        {
            Some((field, v)) => Some(parse_u64(field, &v)?),
            None => None,
        },
        parent: fields.first_text(&["parent_incident", "parent"])?,
    })
}

fn parse_action(action: Option<&str>) -> Result<CdcAction, EventRejection> {
    match action.map(|a| a.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("update") => Ok(CdcAction::Update),
        Some("insert") | Some("create") => Ok(CdcAction::Insert),
        Some("delete") => Ok(CdcAction::Delete),
        Some(other) => Err(EventRejection::UnknownAction(clip(other))),
    }
}

/// Field access with ServiceNow's three spellings of a value.
struct Fields<'a>(RecordFields<'a>);

/// Which half of a `{"display_value","value"}` pair a field wants.
#[derive(Clone, Copy)]
enum Prefer {
    /// Codes and counts: the stored value (`"1"`, not `"1 - Critical"`).
    Value,
    /// Names and text: what a human sees (`"Network Operations"`, not a sys_id).
    Display,
}

impl Fields<'_> {
    fn scalar(
        &self,
        field: &'static str,
        prefer: Prefer,
    ) -> Result<Option<String>, EventRejection> {
        let Some(v) = self.0.get(field) else {
            return Ok(None);
        };
        let s = scalar_of(field, v, prefer)?;
        Ok(s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()))
    }

    fn required_code(&self, field: &'static str) -> Result<String, EventRejection> {
        self.scalar(field, Prefer::Value)?
            .ok_or(EventRejection::MissingField(field))
    }

    fn optional_code(&self, field: &'static str) -> Result<Option<String>, EventRejection> {
        self.scalar(field, Prefer::Value)
    }

    fn optional_text(&self, field: &'static str) -> Result<Option<String>, EventRejection> {
        self.scalar(field, Prefer::Display)
    }

    fn first_text(&self, names: &[&'static str]) -> Result<Option<String>, EventRejection> {
        for &name in names {
            if let Some(v) = self.optional_text(name)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    fn first_code(
        &self,
        names: &[&'static str],
    ) -> Result<Option<(&'static str, String)>, EventRejection> {
        for &name in names {
            if let Some(v) = self.optional_code(name)? {
                return Ok(Some((name, v)));
            }
        }
        Ok(None)
    }
}

/// A field's scalar text: a string, a number, a bool, a reference object or a display-value object.
fn scalar_of<'v>(
    field: &'static str,
    v: &'v FieldValue<'_>,
    prefer: Prefer,
) -> Result<Option<Cow<'v, str>>, EventRejection> {
    match v {
        FieldValue::Null => Ok(None),
        FieldValue::Text(s) => Ok(Some(Cow::Borrowed(s))),
        FieldValue::Number(n) => Ok(Some(Cow::Owned(n.to_string()))),
        FieldValue::Bool(b) => Ok(Some(Cow::Owned(b.to_string()))),
        FieldValue::Object(o) => {
            let pick = |member: &Option<Member<'_>>| member.as_ref().and_then(Member::text);
            let chosen = match prefer {
                Prefer::Display => pick(&o.display_value).or_else(|| pick(&o.value)),
                Prefer::Value => pick(&o.value).or_else(|| pick(&o.display_value)),
            };
            if chosen.is_some() || o.value.is_some() || o.display_value.is_some() || o.has_link {
                Ok(chosen.map(Cow::Owned))
            } else {
                Err(EventRejection::WrongType {
                    field,
                    expected: "a string or a {\"value\"} / {\"display_value\"} object",
                    found: "object without value",
                })
            }
        }
        FieldValue::Array(_) => Err(EventRejection::WrongType {
            field,
            expected: "a string",
            found: "array",
        }),
    }
}

fn parse_u64(field: &'static str, s: &str) -> Result<u64, EventRejection> {
    let t = s.trim();
    // ServiceNow sometimes formats counts with thousands separators in display values.
    let digits: String = t.chars().filter(|c| *c != ',').collect();
    digits
        .parse::<u64>()
        .map_err(|_| EventRejection::InvalidValue {
            field,
            value: clip(s),
            expected: "a non-negative integer",
        })
}

fn parse_level(field: &'static str, s: &str) -> Result<Level, EventRejection> {
    Level::parse(s).ok_or_else(|| EventRejection::InvalidValue {
        field,
        value: clip(s),
        expected: "1-3 (high to low)",
    })
}

/// `YYYY-MM-DD HH:MM:SS` in UTC (ServiceNow's format) or an RFC 3339 timestamp.
fn parse_time(field: &'static str, s: &str) -> Result<EpochMillis, EventRejection> {
    parse_servicenow_time(s).ok_or_else(|| EventRejection::InvalidValue {
        field,
        value: clip(s),
        expected: "\"YYYY-MM-DD HH:MM:SS\" (UTC) or RFC 3339",
    })
}

/// Parses ServiceNow's UTC time format (or RFC 3339); `None` for anything else or before 1970.
pub fn parse_servicenow_time(s: &str) -> Option<EpochMillis> {
    let t = s.trim();
    let ts = match t.parse::<jiff::Timestamp>() {
        Ok(ts) => ts,
        Err(_) => t
            .parse::<jiff::civil::DateTime>()
            .ok()?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp(),
    };
    u64::try_from(ts.as_millisecond()).ok().map(EpochMillis)
}

fn parse_log(fields: &mut Fields<'_>) -> Result<Vec<LogEntry>, EventRejection> {
    let mut entries = Vec::new();
    for (field, source) in [
        ("log_entries", LogSource::Alarm),
        ("u_alarm_log", LogSource::Alarm),
        ("work_notes", LogSource::WorkNote),
        ("comments", LogSource::Comment),
    ] {
        // Taken, not borrowed: an alarm dump (the bulk of a storm event) moves into its entry.
        let Some(v) = fields.0.take(field) else {
            continue;
        };
        match v {
            FieldValue::Null => {}
            FieldValue::Text(s) if source == LogSource::Alarm => push_text(&mut entries, s, source),
            FieldValue::Text(s) => entries.extend(parse_journal(&s, source)),
            FieldValue::Array(items) => {
                for item in items {
                    entries.push(parse_log_item(field, item, source)?);
                }
            }
            FieldValue::Object(_) => {
                if let Some(s) = scalar_of(field, &v, Prefer::Display)? {
                    entries.extend(parse_journal(&s, source));
                }
            }
            other => {
                return Err(EventRejection::WrongType {
                    field,
                    expected: "a string or a list of entries",
                    found: other.type_name(),
                });
            }
        }
    }
    // Entries arrive from several fields; a stable sort by time interleaves them. Undated
    // entries (alarm dumps) sort first, keeping their relative order.
    entries.sort_by_key(|e| e.at.unwrap_or(EpochMillis::ZERO));
    Ok(entries)
}

fn push_text(entries: &mut Vec<LogEntry>, text: Cow<'_, str>, source: LogSource) {
    if !text.trim().is_empty() {
        entries.push(LogEntry {
            at: None,
            author: None,
            source,
            text: text.into_owned(),
        });
    }
}

fn parse_log_item(
    field: &'static str,
    item: Item<'_>,
    default_source: LogSource,
) -> Result<LogEntry, EventRejection> {
    match item {
        Item::Text(s) => Ok(LogEntry {
            at: None,
            author: None,
            source: default_source,
            text: s.into_owned(),
        }),
        Item::Entry(e) => {
            let text = e
                .text
                .or(e.value)
                .or(e.message)
                .ok_or(EventRejection::WrongType {
                    field,
                    expected: "entries with a `text` string",
                    found: "entry without text",
                })?;
            let at =
                e.at.as_deref()
                    .or(e.sys_created_on.as_deref())
                    .or(e.timestamp.as_deref())
                    .and_then(parse_servicenow_time);
            let author = e
                .author
                .or(e.sys_created_by)
                .map(Cow::into_owned)
                .filter(|a| !a.trim().is_empty());
            let source = match e.element.as_deref() {
                Some("work_notes") => LogSource::WorkNote,
                Some("comments") => LogSource::Comment,
                _ => default_source,
            };
            Ok(LogEntry {
                at,
                author,
                source,
                text: text.into_owned(),
            })
        }
        Item::Other(found) => Err(EventRejection::WrongType {
            field,
            expected: "entries that are strings or objects",
            found,
        }),
    }
}

/// Splits ServiceNow journal text (`YYYY-MM-DD HH:MM:SS - Name (Work notes)\ntext\n\n...`,
/// newest first) into entries, oldest first. Text without headers is one undated entry.
pub fn parse_journal(text: &str, source: LogSource) -> Vec<LogEntry> {
    let mut entries: Vec<LogEntry> = Vec::new();
    let mut current: Option<LogEntry> = None;
    let mut preamble = String::new();
    for line in text.lines() {
        if let Some((at, author)) = journal_header(line) {
            if let Some(done) = current.take() {
                entries.push(done);
            }
            current = Some(LogEntry {
                at: Some(at),
                author,
                source,
                text: String::new(),
            });
        } else if let Some(entry) = current.as_mut() {
            append_line(&mut entry.text, line);
        } else {
            append_line(&mut preamble, line);
        }
    }
    entries.extend(current);
    for e in &mut entries {
        e.text.truncate(e.text.trim_end().len());
    }
    entries.retain(|e| !e.text.is_empty());
    entries.reverse();
    if !preamble.trim().is_empty() {
        entries.insert(
            0,
            LogEntry {
                at: None,
                author: None,
                source,
                text: preamble.trim_end().to_owned(),
            },
        );
    }
    entries
}

fn append_line(buf: &mut String, line: &str) {
    if !buf.is_empty() {
        buf.push('\n');
    }
    buf.push_str(line);
}

/// `2026-11-29 10:00:00 - Jane Doe (Work notes)` → (time, author).
fn journal_header(line: &str) -> Option<(EpochMillis, Option<String>)> {
    let ts = line.get(..19)?;
    let rest = line.get(19..)?.strip_prefix(" - ")?;
    let at = parse_servicenow_time(ts)?;
    let rest = rest.trim_end();
    let author = match rest.rfind(" (") {
        Some(i) if rest.ends_with(')') => &rest[..i],
        _ => rest,
    };
    let author = author.trim();
    Some((at, (!author.is_empty()).then(|| author.to_owned())))
}

/// Values quoted in rejections are clipped: a rejection reason must stay small.
fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SYS_ID: &str = "9d385017c611228701d22104cc95c371";

    fn minimal() -> Value {
        serde_json::json!({
            "sys_id": SYS_ID, "number": "INC0012345", "sys_mod_count": "4",
            "priority": "2", "state": "2", "short_description": "Fibre cut"
        })
    }

    #[test]
    fn records_of_the_shared_topic_are_told_apart_on_positive_evidence() {
        let none = CdcHeaders::default();
        let examine =
            |v: &Value| examine_event(v.to_string().as_bytes(), &none, ParseLimits::default());
        let incident = |examined: Examined| match examined {
            Examined::Incident(parsed) => Some(*parsed),
            Examined::Skipped(_) => None,
        };
        assert!(matches!(incident(examine(&minimal())), Some(Ok(_))));
        let mut problem = minimal();
        problem["number"] = "PRB0000042".into();
        assert_eq!(
            examine(&problem),
            Examined::Skipped(SkipReason::NotAnIncident)
        );
        let mut bare = serde_json::json!({"number": "INC0000042"});
        assert_eq!(examine(&bare), Examined::Skipped(SkipReason::NotAnIncident));
        bare["state"] = "2".into();
        assert!(
            matches!(
                incident(examine(&bare)),
                Some(Err(EventRejection::MissingField("sys_id")))
            ),
            "an INC record with incident fields is an incident, and an invalid one"
        );
        let heartbeat = serde_json::json!({"type": "heartbeat", "ts": 1});
        assert_eq!(
            examine(&heartbeat),
            Examined::Skipped(SkipReason::Heartbeat)
        );
        assert_eq!(
            examine_event(b" \n", &none, ParseLimits::default()),
            Examined::Skipped(SkipReason::Heartbeat)
        );
        for other in [&b"<xml/>"[..], b"[1]", b"\xff\xfe", b"\"text\""] {
            assert_eq!(
                examine_event(other, &none, ParseLimits::default()),
                Examined::Skipped(SkipReason::OtherFormat),
                "{other:?}"
            );
        }
        let claimed = CdcHeaders {
            action: None,
            table_name: Some("incident".into()),
        };
        assert!(matches!(
            incident(examine_event(b"<xml/>", &claimed, ParseLimits::default())),
            Some(Err(EventRejection::NotJson(_)))
        ));
        let too_large = ParseLimits {
            max_event_bytes: 10,
        };
        assert!(matches!(
            incident(examine_event(
                minimal().to_string().as_bytes(),
                &none,
                too_large
            )),
            Some(Err(EventRejection::TooLarge { .. }))
        ));
    }

    fn parse(v: &Value) -> Result<Ticket, EventRejection> {
        parse_event(
            v.to_string().as_bytes(),
            &CdcHeaders::default(),
            ParseLimits::default(),
        )
    }

    #[test]
    fn parses_string_typed_numbers_and_codes() {
        let t = parse(&minimal()).unwrap();
        assert_eq!(t.version, 4);
        assert_eq!(t.severity, Severity::P2);
        assert_eq!(t.state, TicketState::InProgress);
        assert_eq!(t.number, "INC0012345");
    }

    #[test]
    fn accepts_reference_and_display_value_objects() {
        let mut v = minimal();
        v["assignment_group"] = serde_json::json!({"link": "https://x.service-now.com/api/now/table/sys_user_group/abc", "value": "abc"});
        v["priority"] = serde_json::json!({"display_value": "1 - Critical", "value": "1"});
        v["cmdb_ci"] =
            serde_json::json!({"display_value": "lon-pe-01", "value": "0123", "link": "x"});
        v["u_customers_affected"] = serde_json::json!(1200);
        let t = parse(&v).unwrap();
        assert_eq!(t.assignment_group.as_deref(), Some("abc"));
        assert_eq!(t.severity, Severity::P1);
        assert_eq!(t.cmdb_ci.as_deref(), Some("lon-pe-01"));
        assert_eq!(t.customers_affected, Some(1200));
    }

    #[test]
    fn derives_priority_from_impact_and_urgency_when_absent() {
        let mut v = minimal();
        v.as_object_mut().unwrap().remove("priority");
        v["impact"] = "1".into();
        v["urgency"] = "2 - Medium".into();
        assert_eq!(parse(&v).unwrap().severity, Severity::P2);
    }

    #[test]
    fn missing_required_field_is_named() {
        for field in ["sys_id", "number", "sys_mod_count", "state"] {
            let mut v = minimal();
            v.as_object_mut().unwrap().remove(field);
            assert_eq!(
                parse(&v),
                Err(EventRejection::MissingField(field)),
                "{field}"
            );
        }
    }

    #[test]
    fn wrong_types_and_values_name_the_field() {
        let mut v = minimal();
        v["sys_mod_count"] = "four".into();
        assert!(matches!(
            parse(&v),
            Err(EventRejection::InvalidValue {
                field: "sys_mod_count",
                ..
            })
        ));
        let mut v = minimal();
        v["number"] = serde_json::json!([1, 2]);
        assert!(matches!(
            parse(&v),
            Err(EventRejection::WrongType {
                field: "number",
                ..
            })
        ));
        let mut v = minimal();
        v["state"] = "5".into();
        assert!(matches!(
            parse(&v),
            Err(EventRejection::InvalidValue { field: "state", .. })
        ));
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let mut v = minimal();
        v["x_custom_thing"] = serde_json::json!({"deep": [1, 2, {"z": null}]});
        assert!(parse(&v).is_ok());
    }

    #[test]
    fn other_tables_and_actions_are_rejected_by_header() {
        let bytes = minimal().to_string();
        let h = CdcHeaders {
            action: Some("update".into()),
            table_name: Some("change_request".into()),
        };
        assert_eq!(
            parse_event(bytes.as_bytes(), &h, ParseLimits::default()),
            Err(EventRejection::WrongTable("change_request".into()))
        );
        let h = CdcHeaders {
            action: Some("delete".into()),
            table_name: Some("incident".into()),
        };
        let t = parse_event(bytes.as_bytes(), &h, ParseLimits::default()).unwrap();
        assert!(t.is_closed());
    }

    #[test]
    fn journal_text_becomes_entries_oldest_first() {
        let mut v = minimal();
        v["work_notes"] = "2026-11-29 10:05:00 - Jane Doe (Work notes)\nDispatched field tech.\n\n2026-11-29 10:00:00 - Sam Roe (Work notes)\nLOS on ge-0/0/1\nsecond line\n\n".into();
        let t = parse(&v).unwrap();
        assert_eq!(t.log.len(), 2);
        assert_eq!(t.log[0].author.as_deref(), Some("Sam Roe"));
        assert_eq!(t.log[0].text, "LOS on ge-0/0/1\nsecond line");
        assert_eq!(t.log[1].text, "Dispatched field tech.");
        assert!(t.log[0].at < t.log[1].at);
        assert_eq!(t.people(), vec!["Jane Doe", "Sam Roe"]);
    }

    #[test]
    fn oversized_and_non_object_values_are_rejected() {
        let limits = ParseLimits {
            max_event_bytes: 10,
        };
        assert!(matches!(
            parse_event(&[b' '; 11], &CdcHeaders::default(), limits),
            Err(EventRejection::TooLarge { .. })
        ));
        assert_eq!(
            parse_event(b"[1]", &CdcHeaders::default(), ParseLimits::default()),
            Err(EventRejection::NotAnObject("array"))
        );
        assert_eq!(
            parse_event(
                &[0xff, 0xfe],
                &CdcHeaders::default(),
                ParseLimits::default()
            ),
            Err(EventRejection::NotUtf8)
        );
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            ".{0,12}".prop_map(Value::String),
            prop::sample::select(vec!["1", "2", "7", SYS_ID, "2026-11-29 10:00:00", "INC1"])
                .prop_map(|s| Value::String(s.into())),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop::sample::select(vec![
                        "sys_id",
                        "number",
                        "sys_mod_count",
                        "priority",
                        "state",
                        "impact",
                        "urgency",
                        "work_notes",
                        "log_entries",
                        "u_customers_affected",
                        "value",
                        "display_value",
                        "link",
                        "text",
                        "at",
                        "sys_updated_on",
                        "parent",
                        "u_region",
                        "u_alarm_log",
                        "comments",
                        "message",
                        "author",
                        "element",
                        "cmdb_ci",
                    ]),
                    inner,
                    0..10,
                )
                .prop_map(|m| Value::Object(
                    m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
                )),
            ]
        })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_event(&bytes, &CdcHeaders::default(), ParseLimits::default());
        }

        #[test]
        fn arbitrary_json_never_panics(v in arb_json(), action in prop::option::of(".{0,8}")) {
            let h = CdcHeaders { action, table_name: None };
            let _ = parse_event(v.to_string().as_bytes(), &h, ParseLimits::default());
        }

        #[test]
        fn parsing_the_text_agrees_with_parsing_the_decoded_object(
            v in arb_json(),
            field in prop::sample::select(vec!["work_notes", "log_entries", "u_alarm_log", "cmdb_ci", "impact", "u_customers_affected"]),
            value in arb_json(),
        ) {
            // On a valid record and on anything else: the fields decoded from the text are
            // the fields a `serde_json::Value` holds.
            for record in [v.clone(), { let mut r = minimal(); r[field] = value.clone(); r }] {
                let from_text = parse(&record);
                match &record {
                    Value::Object(map) => prop_assert_eq!(from_text, parse_record(map, &CdcHeaders::default())),
                    other => prop_assert_eq!(from_text, Err(EventRejection::NotAnObject(match other {
                        Value::Null => "null",
                        Value::Bool(_) => "boolean",
                        Value::Number(_) => "number",
                        Value::String(_) => "string",
                        _ => "array",
                    }))),
                }
            }
        }

        #[test]
        fn examining_anything_never_panics_and_the_table_header_alone_decides(
            bytes in prop::collection::vec(any::<u8>(), 0..512),
            table in prop::option::of(prop_oneof![
                Just("incident".to_owned()), Just(" incident ".to_owned()), Just(" ".to_owned()),
                Just("problem".to_owned()), ".{0,12}",
            ]),
        ) {
            let headers = CdcHeaders { action: None, table_name: table.clone() };
            let examined = examine_event(&bytes, &headers, ParseLimits::default());
            match table.as_deref().map(str::trim) {
                Some("incident") => prop_assert_eq!(
                    examined,
                    Examined::Incident(Box::new(parse_event(&bytes, &headers, ParseLimits::default())))
                ),
                Some(other) if !other.is_empty() => {
                    prop_assert_eq!(examined, Examined::Skipped(SkipReason::OtherTable))
                }
                _ => {}
            }
        }

        #[test]
        fn without_a_header_only_an_inc_numbered_record_with_incident_fields_is_an_incident(
            v in arb_json(),
            number in prop_oneof![Just("INC0012345".to_owned()), Just("inc42".to_owned()),
                                  Just("PRB0001".to_owned()), Just("INC".to_owned()), ".{0,10}"],
            field in prop::sample::select(vec!["sys_id", "state", "priority", "short_description"]),
        ) {
            for record in [v.clone(), serde_json::json!({"number": number, field: "2"})] {
                let text = record.to_string();
                let examined = examine_event(text.as_bytes(), &CdcHeaders::default(), ParseLimits::default());
                let number = record.get("number").and_then(Value::as_str).unwrap_or("");
                let evidence = number.len() > 3
                    && number.as_bytes()[..3].eq_ignore_ascii_case(b"INC")
                    && number.as_bytes()[3].is_ascii_digit();
                if let Examined::Incident(parsed) = examined {
                    prop_assert!(evidence, "{record} taken for an incident");
                    prop_assert_eq!(*parsed, parse(&record));
                } else if record.is_object() && evidence && field != "short_description" && record.get(field).is_some() {
                    prop_assert!(false, "{record} was skipped");
                }
            }
        }

        #[test]
        fn arbitrary_field_values_on_a_valid_record_never_panic(field in prop::sample::select(vec![
            "sys_id", "number", "sys_mod_count", "priority", "state", "impact", "urgency", "work_notes",
            "log_entries", "u_customers_affected", "sys_updated_on", "parent",
        ]), value in arb_json()) {
            let mut v = minimal();
            v[field] = value;
            let _ = parse(&v);
        }
    }
}
