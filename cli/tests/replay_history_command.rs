//! `stormgate replay --history` itself on small synthetic ServiceNow exports: a list
//! view's CSV and a Table API JSON export replay to the end; an impossible date is a
//! row-numbered skip, not a panic; month-first dates are refused until the order is
//! given; a 1–5 impact scale is mapped and said; `stormgate plan` on an export names the
//! cheapest quotas meeting the SLOs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../lab/tests/fixtures/history")
        .join(name)
}

/// Runs `stormgate replay --history FILE --json - ...` in `dir` (stormgate only, so it is quick).
fn replay(dir: &Path, file: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stormgate"))
        .current_dir(dir)
        .args(["replay", "--policies", "stormgate", "--json", "-"])
        .arg("--history")
        .arg(fixture(file))
        .args(extra)
        .output()
        .unwrap()
}

fn report(output: &Output) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_servicenow_csv_and_a_table_api_export_replay_with_every_event_accepted() {
    let dir = tempfile::tempdir().unwrap();
    for (file, events) in [("servicenow_export.csv", 5), ("table_api.json", 2)] {
        let r = report(&replay(dir.path(), file, &[]));
        let history = &r["scenario"]["history"];
        assert_eq!(history["events"], events, "{file}: {history:#}");
        let sg = &r["policies"][0];
        assert_eq!(sg["ingest"]["accepted"], events, "{file}: {sg:#}");
        assert_eq!(sg["ingest"]["rejected"], 0, "{file}");
        assert_eq!(sg["summaries"]["none"], 0, "{file}");
        // The history's own length of virtual time, not the scenario's 780 minutes.
        assert!(r["scenario"]["minutes"].as_u64().unwrap() < 10, "{file}");
        assert!(dir.path().join("report.html").is_file());
    }
}

#[test]
fn an_impossible_date_is_skipped_with_its_line_in_the_summary_and_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let output = replay(dir.path(), "impossible_date.csv", &[]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let r = report(&output);
    assert!(
        stderr.contains("1 × update time is an impossible date: line 3: \"31/2/2016 25:10\""),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let skipped = &r["scenario"]["history"]["skipped"]["update time is an impossible date"];
    assert_eq!(skipped["rows"], 1);
    assert_eq!(r["scenario"]["history"]["events"], 2);
}

#[test]
fn month_first_dates_are_refused_until_the_order_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let refused = replay(dir.path(), "us_order_dates.csv", &[]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("line 2") && stderr.contains("--date-order"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    let r = report(&replay(
        dir.path(),
        "us_order_dates.csv",
        &["--date-order", "month-first"],
    ));
    assert_eq!(r["scenario"]["history"]["events"], 3);
    assert_eq!(
        r["scenario"]["history"]["recorded_from"],
        "2016-03-04 09:15:00"
    );
}

#[test]
fn impact_on_a_five_point_scale_is_mapped_and_noted() {
    let dir = tempfile::tempdir().unwrap();
    let r = report(&replay(dir.path(), "impact_five_scale.csv", &[]));
    let notes = r["scenario"]["history"]["notes"].to_string();
    assert!(notes.contains("1–5 scale"), "{notes}");
    assert_eq!(r["scenario"]["history"]["events"], 4);
    assert_eq!(r["policies"][0]["tickets_by_severity"]["P1"], 1);
    assert_eq!(r["policies"][0]["ingest"]["rejected"], 0);
}

#[test]
fn plan_on_an_export_names_the_cheapest_quotas_meeting_the_slos() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_stormgate"))
        .current_dir(dir.path())
        .args(["plan", "--json", "-", "--threads", "2"])
        .arg("--history")
        .arg(fixture("servicenow_export.csv"))
        .args(["--premium-tpm", "1000,20000", "--standard-tpm", "120000"])
        .output()
        .unwrap();
    let plan = report(&output);
    assert_eq!(plan["points"].as_array().unwrap().len(), 2);
    // Five events of four tickets: the scenario's own quotas carry them.
    let cheapest = plan["cheapest"].as_u64().expect("a point meets the SLOs") as usize;
    let best = &plan["points"][cheapest];
    assert_eq!(best["meets_slos"], true, "{plan:#}");
    assert!(dir.path().join("plan.html").is_file());
}
