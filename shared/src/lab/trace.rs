//! What a replay feeds in: ticket events with arrival instants, either planned by a
//! scenario or read from a real ServiceNow incident history (`--history FILE`).
//!
//! The history format is the ServiceNow incident audit export used by the public UCI
//! "Incident management process enriched event log" (one row per update: `number`,
//! `incident_state`, `sys_mod_count`, `sys_updated_at` as `d/m/yyyy HH:MM`,
//! `opened_at`, `impact`/`urgency`/`priority` as display values, `category`,
//! `subcategory`, `u_symptom`, `location`, `cmdb_ci`, `assignment_group`,
//! `contact_type`; missing values are `?`). Rows become incident records in the
//! event contract; their instants are compressed by a time scale onto the scenario's
//! start, so a month of history can be replayed as an afternoon.

use std::collections::BTreeMap;
use std::io::Read;

use serde_json::{Value, json};

use crate::clock::EpochMillis;
use crate::lab::rng::fnv1a;
use crate::lab::scenario::{PlannedEvent, render_event, sys_id};
use crate::severity::Severity;

/// One event of a replay.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    Planned(PlannedEvent),
    Recorded(RecordedEvent),
}

/// A row of a recorded history, already in the event contract.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEvent {
    pub at: EpochMillis,
    pub number: String,
    pub sys_id: String,
    pub severity: Severity,
    pub record: Value,
}

impl TraceEvent {
    pub fn at(&self) -> EpochMillis {
        match self {
            TraceEvent::Planned(p) => p.at,
            TraceEvent::Recorded(r) => r.at,
        }
    }

    pub fn number(&self) -> String {
        match self {
            TraceEvent::Planned(p) => p.number(),
            TraceEvent::Recorded(r) => r.number.clone(),
        }
    }

    pub fn sys_id(&self, seed: u64) -> String {
        match self {
            TraceEvent::Planned(p) => sys_id(seed, p.ticket.index),
            TraceEvent::Recorded(r) => r.sys_id.clone(),
        }
    }

    /// The priority ServiceNow carries: what the report groups by.
    pub fn severity(&self) -> Severity {
        match self {
            TraceEvent::Planned(p) => p.ticket.severity,
            TraceEvent::Recorded(r) => r.severity,
        }
    }

    /// The incident record a producer would publish.
    pub fn record(&self, seed: u64) -> Value {
        match self {
            TraceEvent::Planned(p) => render_event(seed, p),
            TraceEvent::Recorded(r) => r.record.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot read the history: {0}")]
    Read(String),
    #[error("the history lacks the column {0:?}")]
    MissingColumn(&'static str),
    #[error("the history has no usable rows")]
    Empty,
}

/// Reads a ServiceNow incident-export CSV; row instants become
/// `start + (t − first) / time_scale`. Rows without a parseable update time or
/// priority are skipped (counted in the second value).
pub fn read_history(
    input: impl Read,
    start: EpochMillis,
    time_scale: f64,
) -> Result<(Vec<TraceEvent>, usize), HistoryError> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(input);
    let headers = reader
        .headers()
        .map_err(|e| HistoryError::Read(e.to_string()))?
        .clone();
    let column = |name: &'static str| headers.iter().position(|h| h.trim() == name);
    let required = |name: &'static str| column(name).ok_or(HistoryError::MissingColumn(name));
    let number_at = required("number")?;
    let updated_at = required("sys_updated_at")?;
    let priority_at = required("priority")?;
    let optional: BTreeMap<&str, Option<usize>> = [
        "incident_state",
        "sys_mod_count",
        "opened_at",
        "impact",
        "urgency",
        "category",
        "subcategory",
        "u_symptom",
        "location",
        "cmdb_ci",
        "assignment_group",
        "contact_type",
    ]
    .into_iter()
    .map(|c| (c, column(c)))
    .collect();
    let mut rows = Vec::new();
    let mut skipped = 0;
    for row in reader.records() {
        let Ok(row) = row else {
            skipped += 1;
            continue;
        };
        let field = |i: Option<usize>| {
            i.and_then(|i| row.get(i))
                .map(str::trim)
                .filter(|v| !v.is_empty() && *v != "?")
        };
        let get = |name: &str| field(optional.get(name).copied().flatten());
        let (Some(number), Some(at), Some(severity)) = (
            field(Some(number_at)),
            field(Some(updated_at)).and_then(parse_uci_time),
            field(Some(priority_at)).and_then(|p| p.parse::<Severity>().ok()),
        ) else {
            skipped += 1;
            continue;
        };
        let version = get("sys_mod_count")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let headline = [get("category"), get("subcategory"), get("u_symptom")]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" / ");
        let id = format!(
            "{:016x}{:016x}",
            fnv1a(number.as_bytes()),
            fnv1a(format!("{number}#").as_bytes())
        );
        let mut record = json!({
            "sys_id": id,
            "number": number,
            "sys_mod_count": version.to_string(),
            "state": state_code(get("incident_state")),
            "priority": severity.rank().to_string(),
            "short_description": if headline.is_empty() { format!("Incident {number}") } else { headline },
            "sys_updated_on": servicenow_time(at),
        });
        if let Value::Object(map) = &mut record {
            for (key, column) in [
                ("impact", "impact"),
                ("urgency", "urgency"),
                ("category", "category"),
                ("subcategory", "subcategory"),
                ("u_symptom", "u_symptom"),
                ("location", "location"),
                ("u_region", "location"),
                ("cmdb_ci", "cmdb_ci"),
                ("assignment_group", "assignment_group"),
                ("contact_type", "contact_type"),
            ] {
                if let Some(v) = get(column) {
                    let v = if matches!(key, "impact" | "urgency") {
                        v.split(' ').next().unwrap_or(v)
                    } else {
                        v
                    };
                    map.insert(key.to_owned(), json!(v));
                }
            }
            if let Some(opened) = get("opened_at").and_then(parse_uci_time) {
                map.insert("opened_at".into(), json!(servicenow_time(opened)));
            }
        }
        rows.push((at, number.to_owned(), id, severity, record));
    }
    let Some(first) = rows.iter().map(|r| r.0).min() else {
        return Err(HistoryError::Empty);
    };
    let scale = if time_scale > 0.0 { time_scale } else { 1.0 };
    let mut events: Vec<TraceEvent> = rows
        .into_iter()
        .map(|(at, number, sys_id, severity, record)| {
            let offset = (at.since(first).as_millis() as f64 / scale) as u64;
            TraceEvent::Recorded(RecordedEvent {
                at: EpochMillis(start.0 + offset),
                number,
                sys_id,
                severity,
                record,
            })
        })
        .collect();
    events.sort_by(|a, b| {
        a.at()
            .cmp(&b.at())
            .then_with(|| a.number().cmp(&b.number()))
    });
    Ok((events, skipped))
}

/// `d/m/yyyy HH:MM` (the UCI export) to epoch milliseconds.
fn parse_uci_time(s: &str) -> Option<EpochMillis> {
    let (date, time) = s.split_once(' ')?;
    let mut d = date.split('/').map(|p| p.parse::<i16>().ok());
    let (day, month, year) = (d.next()??, d.next()??, d.next()??);
    let (hour, minute) = time.split_once(':')?;
    let dt = jiff::civil::date(year, i8::try_from(month).ok()?, i8::try_from(day).ok()?).at(
        hour.parse().ok()?,
        minute.parse().ok()?,
        0,
        0,
    );
    let ts = dt.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    u64::try_from(ts.as_millisecond()).ok().map(EpochMillis)
}

fn servicenow_time(t: EpochMillis) -> String {
    jiff::Timestamp::from_millisecond(t.0 as i64)
        .map(|ts| ts.strftime("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

/// The export's state names to ServiceNow state codes.
fn state_code(state: Option<&str>) -> &'static str {
    match state.map(str::to_ascii_lowercase).as_deref() {
        Some("new") => "1",
        Some("resolved") => "6",
        Some("closed") => "7",
        Some(s) if s.starts_with("awaiting") => "3",
        _ => "2",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{CdcHeaders, ParseLimits, parse_event};

    // Four rows in the UCI export's format (Amaral, Fantinato, Peres (2018), UCI ML
    // Repository id 498, DOI 10.24432/C57S4H, CC BY 4.0), cut to the columns used here.
    const SAMPLE: &str = "number,incident_state,sys_mod_count,opened_at,sys_updated_at,contact_type,location,category,subcategory,u_symptom,cmdb_ci,impact,urgency,priority,assignment_group
INC0000045,New,0,29/2/2016 01:16,29/2/2016 01:23,Phone,Location 143,Category 55,Subcategory 170,Symptom 72,?,2 - Medium,2 - Medium,3 - Moderate,Group 56
INC0000045,Resolved,2,29/2/2016 01:16,29/2/2016 08:53,Phone,Location 143,Category 55,Subcategory 170,Symptom 72,?,2 - Medium,2 - Medium,3 - Moderate,Group 56
INC0000047,Active,1,29/2/2016 04:40,29/2/2016 06:10,Phone,Location 165,Category 40,Subcategory 215,Symptom 471,?,1 - High,1 - High,1 - Critical,Group 70
INC0000048,Active,1,29/2/2016 04:40,not a date,Phone,Location 165,Category 40,Subcategory 215,Symptom 471,?,2 - Medium,2 - Medium,3 - Moderate,Group 70
";

    #[test]
    fn history_rows_become_events_the_parser_accepts_on_a_compressed_clock() {
        let start = EpochMillis(1_768_197_600_000);
        let (events, skipped) = read_history(SAMPLE.as_bytes(), start, 60.0).unwrap();
        assert_eq!(skipped, 1);
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].at(), start);
        // 7 h 30 min later in the history, 7.5 minutes later in the replay.
        assert_eq!(events[2].at(), EpochMillis(start.0 + 450_000));
        assert_eq!(events[1].severity(), Severity::P1);
        for e in &events {
            let raw = serde_json::to_vec(&e.record(0)).unwrap();
            let t = parse_event(&raw, &CdcHeaders::default(), ParseLimits::default()).unwrap();
            assert_eq!(t.number, e.number());
        }
    }

    #[test]
    fn a_history_without_the_needed_columns_is_refused() {
        let err = read_history("a,b\n1,2\n".as_bytes(), EpochMillis(0), 1.0).unwrap_err();
        assert!(matches!(err, HistoryError::MissingColumn("number")));
    }
}
