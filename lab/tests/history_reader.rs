//! The storm lab's history reader on the export shapes ServiceNow produces: a list
//! view's CSV, the Table API's JSON, the UCI audit log's form, and what goes wrong in
//! real files (impossible dates, month-first dates, a widened impact scale). Every
//! event it emits must be one the event parser accepts; no input may panic it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use stormgate_lab::history::{
    DateOrder, HistoryError, HistoryOptions, LevelScale, RowRef, read_history,
};
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::event::{CdcHeaders, ParseLimits, parse_event};
use stormgate_shared::severity::Severity;
use stormgate_shared::ticket::{Level, Ticket, TicketState};

const START: EpochMillis = EpochMillis(1_768_197_600_000);

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/history/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn options() -> HistoryOptions {
    HistoryOptions::new(START, 60.0)
}

fn parsed(events: &[stormgate_lab::trace::TraceEvent]) -> Vec<Ticket> {
    events
        .iter()
        .map(|e| {
            let raw = serde_json::to_vec(&e.record(0)).unwrap();
            parse_event(&raw, &CdcHeaders::default(), ParseLimits::default()).unwrap()
        })
        .collect()
}

#[test]
fn a_servicenow_list_export_keeps_its_text_display_values_and_journal() {
    let h = read_history(
        fixture("servicenow_export.csv").as_slice(),
        "servicenow_export.csv",
        &options(),
    )
    .unwrap();
    assert_eq!(h.report.format, "csv");
    assert_eq!(h.report.rows, 5);
    assert_eq!(h.report.events, 5);
    assert_eq!(h.report.tickets, 4);
    assert!(h.report.skipped.is_empty(), "{:?}", h.report.skipped);
    assert_eq!(h.report.columns["sys_updated_on"], "sys_updated_on");
    let tickets = parsed(&h.events);
    let fibre = &tickets[0];
    assert_eq!(fibre.number, "INC0100001");
    assert_eq!(fibre.severity, Severity::P1);
    assert_eq!(fibre.state, TicketState::InProgress);
    assert_eq!(fibre.impact, Some(Level::High));
    assert_eq!(fibre.id.as_str(), "6f1a2b3c4d5e6f708192a3b4c5d6e7f8");
    assert_eq!(
        fibre.short_description,
        "Fibre cut north ring: 14 sites dark"
    );
    assert!(fibre.description.contains("span NR-7"));
    let journal: Vec<&str> = fibre.log.iter().map(|l| l.text.as_str()).collect();
    assert!(
        journal.iter().any(|t| t.contains("OTDR shows break")),
        "{journal:?}"
    );
    assert!(
        journal
            .iter()
            .any(|t| t.contains("north ring are affected")),
        "{journal:?}"
    );
    // No sys_mod_count: the fibre ticket's two rows become versions 0 and 1, in time order.
    let versions: Vec<(String, u64)> = tickets
        .iter()
        .map(|t| (t.number.clone(), t.version))
        .collect();
    assert!(versions.contains(&("INC0100001".into(), 0)));
    assert!(versions.contains(&("INC0100001".into(), 1)));
    assert!(h.report.notes.iter().any(|n| n.contains("sys_mod_count")));
    let last = tickets.last().unwrap();
    assert_eq!(last.state, TicketState::Resolved);
    assert_eq!(tickets[1].parent.as_deref(), Some("INC0100001"));
    // Recorded 06:02:11 → 07:40:00 at 60×: the last event 5,869 s / 60 after the start.
    assert_eq!(h.events.last().unwrap().at(), EpochMillis(START.0 + 97_816));
    assert_eq!(h.report.recorded_from, "2026-01-12 06:02:11");
}

#[test]
fn a_table_api_json_export_reads_values_for_codes_and_display_values_for_names() {
    let h = read_history(
        fixture("table_api.json").as_slice(),
        "table_api.json",
        &options(),
    )
    .unwrap();
    assert_eq!(h.report.format, "json");
    assert_eq!(h.report.events, 2);
    assert!(h.report.skipped.is_empty(), "{:?}", h.report.skipped);
    let tickets = parsed(&h.events);
    let power = &tickets[0];
    assert_eq!(power.number, "INC0200001");
    assert_eq!(power.severity, Severity::P1);
    // The value (UTC), not the display value in the user's zone and format.
    assert_eq!(power.updated_at, Some(EpochMillis(1_768_198_200_000)));
    assert_eq!(power.cmdb_ci.as_deref(), Some("sh-olt04.net.example"));
    assert_eq!(power.assignment_group.as_deref(), Some("NOC Power"));
    assert!(
        power
            .log
            .iter()
            .any(|l| l.text.contains("Generator failed to start"))
    );
    let slow = &tickets[1];
    assert_eq!(slow.version, 3);
    assert_eq!(slow.severity, Severity::P3);
    assert_eq!(slow.state, TicketState::New);
    // A reference without a display value falls back to its value.
    assert_eq!(slow.cmdb_ci.as_deref(), Some("77aa"));
}

#[test]
fn an_impossible_date_skips_its_row_with_the_line_number_and_the_rest_replays() {
    let h = read_history(
        fixture("impossible_date.csv").as_slice(),
        "impossible_date.csv",
        &options(),
    )
    .unwrap();
    assert_eq!(h.report.rows, 3);
    assert_eq!(h.report.events, 2);
    let skipped = &h.report.skipped["update time is an impossible date"];
    assert_eq!(skipped.rows, 1);
    assert!(
        skipped.examples[0].starts_with("line 3: \"31/2/2016 25:10\""),
        "{:?}",
        skipped.examples
    );
    assert!(h.report.describe().contains("line 3"));
    assert!(h.report.notes.iter().any(|n| n.contains("day first")));
}

#[test]
fn month_first_dates_that_no_row_disambiguates_are_refused_unless_the_order_is_given() {
    let err = read_history(fixture("us_order_dates.csv").as_slice(), "us", &options()).unwrap_err();
    match &err {
        HistoryError::AmbiguousDates { row, value } => {
            assert_eq!(*row, RowRef::Line(2));
            assert_eq!(value, "3/4/2016 09:15");
        }
        other => panic!("expected ambiguous dates, got {other}"),
    }
    assert!(err.to_string().contains("--date-order"));

    let h = read_history(
        fixture("us_order_dates.csv").as_slice(),
        "us",
        &HistoryOptions {
            date_order: DateOrder::MonthFirst,
            ..options()
        },
    )
    .unwrap();
    let tickets = parsed(&h.events);
    // 4 March 2016 09:15 UTC, not 3 April.
    assert_eq!(tickets[0].updated_at, Some(EpochMillis(1_457_082_900_000)));
    // The third row is a day later (5 March), not a month.
    assert_eq!(
        h.events[2].at().0 - h.events[0].at().0,
        ((24 * 60 - 75) * 60_000) / 60
    );
}

#[test]
fn a_file_whose_dates_prove_both_orders_is_refused_naming_both_rows() {
    let text = "number,sys_updated_on,priority\nA1,13/1/2016 10:00,3\nA2,1/13/2016 10:00,3\n";
    let err = read_history(text.as_bytes(), "mixed", &options()).unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, HistoryError::ConflictingDateOrder { .. }),
        "{message}"
    );
    assert!(
        message.contains("line 2") && message.contains("line 3"),
        "{message}"
    );
}

#[test]
fn impact_and_urgency_on_a_five_point_scale_are_mapped_and_said() {
    let h = read_history(
        fixture("impact_five_scale.csv").as_slice(),
        "five",
        &options(),
    )
    .unwrap();
    assert_eq!(h.report.events, 4);
    assert!(
        h.report.notes.iter().any(|n| n.contains("1–5 scale")),
        "{:?}",
        h.report.notes
    );
    let tickets = parsed(&h.events);
    let got: Vec<(Option<Level>, Severity)> =
        tickets.iter().map(|t| (t.impact, t.severity)).collect();
    assert_eq!(
        got,
        vec![
            (Some(Level::High), Severity::P1),
            (Some(Level::Low), Severity::P4),
            (Some(Level::Low), Severity::P5),
            (Some(Level::Medium), Severity::P2),
        ]
    );

    // Told the scale is 1–3, values above 3 are refused by name and the rows without
    // another priority are skipped, counted.
    let h = read_history(
        fixture("impact_five_scale.csv").as_slice(),
        "five",
        &HistoryOptions {
            level_scale: LevelScale::Three,
            ..options()
        },
    )
    .unwrap();
    assert_eq!(h.report.events, 2);
    assert_eq!(h.report.dropped["impact not understood"].rows, 2);
    assert!(h.report.dropped["impact not understood"].examples[0].contains("outside 1–3"));
    assert_eq!(
        h.report.skipped["no priority (nor impact and urgency)"].rows,
        2
    );
}

#[test]
fn a_renamed_column_is_read_through_the_mapping_and_a_missing_one_is_named() {
    let text = "Number,Last change,priority\nINC1,2026-01-12 06:00:00,2\n";
    let err = read_history(text.as_bytes(), "renamed", &options()).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("sys_updated_on") && message.contains("Last change"),
        "{message}"
    );
    assert!(message.contains("--column sys_updated_on="), "{message}");
    let mut o = options();
    o.columns
        .insert("sys_updated_on".into(), "Last change".into());
    let h = read_history(text.as_bytes(), "renamed", &o).unwrap();
    assert_eq!(h.report.events, 1);
    assert_eq!(h.report.columns["sys_updated_on"], "Last change");

    o.columns.insert("nonsense".into(), "x".into());
    assert!(matches!(
        read_history(text.as_bytes(), "renamed", &o),
        Err(HistoryError::BadMapping(..))
    ));
}

#[test]
fn a_time_scale_that_is_not_a_usable_number_is_refused() {
    let text = "number,sys_updated_on,priority\nINC1,2026-01-12 06:00:00,2\n";
    for scale in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-9] {
        let o = HistoryOptions {
            time_scale: scale,
            ..options()
        };
        assert!(matches!(
            read_history(text.as_bytes(), "t", &o),
            Err(HistoryError::BadTimeScale(_))
        ));
    }
}

#[test]
fn a_file_with_no_usable_row_says_why_row_by_row() {
    let text =
        "number,sys_updated_on,priority\nINC1,yesterday,2\nINC2,2026-01-12 06:00:00,urgent\n";
    let message = read_history(text.as_bytes(), "bad", &options())
        .unwrap_err()
        .to_string();
    assert!(message.contains("no usable rows"), "{message}");
    assert!(
        message.contains("line 2") && message.contains("line 3"),
        "{message}"
    );
    assert!(message.contains("priority not understood"), "{message}");
}

fn cell() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("?".to_owned()),
        "[0-9]{1,2}/[0-9]{1,2}/[0-9]{4} [0-9]{1,2}:[0-9]{1,2}",
        "20[0-9]{2}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}",
        "[1-7]( - [A-Za-z]{3,8})?",
        "INC[0-9]{1,3}",
        "[a-f0-9]{32}",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary bytes: an error or events, never a panic.
    #[test]
    fn any_bytes_are_read_or_refused_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = read_history(bytes.as_slice(), "fuzz", &options());
    }

    /// Rows of plausible and implausible cells under real column names: every event
    /// read is accepted by the event parser, and every row is an event or counted skipped.
    #[test]
    fn every_event_read_is_one_the_parser_accepts(
        rows in prop::collection::vec(prop::collection::vec(cell(), 8), 1..12),
        order in prop_oneof![Just(DateOrder::DayFirst), Just(DateOrder::MonthFirst), Just(DateOrder::Auto)],
        json in any::<bool>(),
    ) {
        let columns = ["number", "sys_updated_on", "priority", "impact", "urgency", "state", "sys_mod_count", "sys_id"];
        let text = if json {
            let records: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| columns.iter().zip(r).map(|(c, v)| ((*c).to_owned(), serde_json::json!(v))).collect())
                .collect();
            serde_json::json!({"result": records}).to_string()
        } else {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(columns).unwrap();
            for r in &rows {
                w.write_record(r).unwrap();
            }
            String::from_utf8(w.into_inner().unwrap()).unwrap()
        };
        let o = HistoryOptions { date_order: order, ..options() };
        if let Ok(h) = read_history(text.as_bytes(), "prop", &o) {
            prop_assert_eq!(h.report.events + h.report.skipped_rows(), rows.len() as u64);
            for e in &h.events {
                let raw = serde_json::to_vec(&e.record(0)).unwrap();
                let parsed = parse_event(&raw, &CdcHeaders::default(), ParseLimits::default());
                prop_assert!(parsed.is_ok(), "{:?} from {}", parsed, e.record(0));
            }
        }
    }
}
