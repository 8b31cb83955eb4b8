//! The storm lab's HTML report, opened in headless Chromium: the page loads from a
//! file with no network, and its charts are drawn.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use stormgate_shared::lab::replay::{ReplayOptions, replay};
use stormgate_shared::lab::report::{Report, html};
use stormgate_shared::lab::scenario::Scenario;

/// Debian's package installs `chromium`; .ci/run installs it when missing.
fn chromium() -> PathBuf {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH")?
                .to_str()?
                .split(':')
                .map(|dir| Path::new(dir).join(name))
                .find(|p| p.is_file())
        })
        .expect("headless Chromium is needed for this test: apt-get install chromium")
}

/// Runs headless Chromium on `page` with `args`; what it printed on stdout.
fn headless(page: &Path, profile: &Path, args: &[&str]) -> String {
    let output = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,4000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

async fn short_report() -> Report {
    // The first hour of the storm's arrival is enough to draw every chart.
    let scenario = Scenario::seed_storm().unwrap().truncated(200);
    let options = ReplayOptions::default();
    let runs = replay(&scenario, &options, &mut |_, _| {}).await.unwrap();
    Report::build(&scenario, options.seed, &runs, 0.0)
}

#[tokio::test(flavor = "current_thread")]
async fn the_html_report_renders_its_charts_in_headless_chromium() {
    let report = short_report().await;
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, html(&report)).unwrap();
    let blank = dir.path().join("blank.html");
    std::fs::write(&blank, "<!doctype html><html><body></body></html>").unwrap();

    // The DOM Chromium built: every chart is an SVG with drawn series in it.
    let dom = headless(&page, &dir.path().join("profile-dom"), &["--dump-dom"]);
    let charts = dom.matches("<svg").count();
    assert!(
        charts >= 5,
        "expected the report's charts, found {charts} <svg> in the DOM"
    );
    assert!(
        dom.matches("<path").count() >= charts,
        "charts without lines"
    );
    assert!(dom.contains("Tokens per minute vs quota: premium"));
    assert!(dom.contains("HTTP 429s per minute"));

    // And it paints them: the screenshot holds far more than an empty page's.
    let shot = dir.path().join("report.png");
    let empty = dir.path().join("blank.png");
    headless(
        &page,
        &dir.path().join("profile-shot"),
        &[&format!("--screenshot={}", shot.display())],
    );
    headless(
        &blank,
        &dir.path().join("profile-blank"),
        &[&format!("--screenshot={}", empty.display())],
    );
    let painted = std::fs::metadata(&shot).unwrap().len();
    let nothing = std::fs::metadata(&empty).unwrap().len();
    assert!(
        painted > 10 * nothing,
        "the report's screenshot ({painted} bytes) is hardly more than an empty page's ({nothing} bytes)"
    );
    if let Some(keep) = std::env::var_os("STORMGATE_KEEP_REPORT_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
