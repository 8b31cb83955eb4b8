//! The storm lab's HTML pages, opened in headless Chromium: the report loads from a file
//! with no network, leads with a verdict per policy, holds real tables, and every chart
//! (the report's and the capacity plan's) has both axes labelled and ticked where
//! Chromium lays them out.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use stormgate_lab::replay::{ReplayOptions, replay};
use stormgate_lab::report::{Report, html};
use stormgate_lab::scenario::Scenario;

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

/// Appended to a copy of the page: measures every chart as Chromium laid it out and
/// leaves the findings in an attribute `--dump-dom` prints.
const CHECK_SCRIPT: &str = r#"<script>
const out = [];
for (const f of document.querySelectorAll('figure.chart')) {
  const svg = f.querySelector('svg');
  const box = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')].map(t => {
    const r = t.getBoundingClientRect();
    return {s: t.textContent.trim(), x: (r.left + r.right) / 2 - box.left, y: (r.top + r.bottom) / 2 - box.top, w: r.width, h: r.height};
  });
  const numeric = texts.filter(t => /^[-$]?[\d,.]+$/.test(t.s) && t.w > 0);
  // A title may repeat an axis's words: the axis label is the one placed as one.
  const xs = texts.filter(t => t.s === f.dataset.xLabel);
  const x = xs.find(t => t.y > box.height * 0.8) || xs[0];
  const ys = texts.filter(t => t.s === f.dataset.yLabel);
  const y = ys.find(t => t.h > t.w) || ys[0];
  out.push({
    title: (svg.querySelector('text') || {}).textContent || '',
    x_label: f.dataset.xLabel, y_label: f.dataset.yLabel,
    x_label_drawn: !!x && x.w > 0, y_label_drawn: !!y && y.h > 0,
    // The y label is turned upright: taller than wide, at the left edge.
    y_label_upright_left: !!y && y.h > y.w && y.x < box.width * 0.12,
    // The x label under the plot.
    x_label_below: !!x && x.y > box.height * 0.8,
    x_ticks: numeric.filter(t => t.y > box.height * 0.75 && t !== x).length,
    y_ticks: numeric.filter(t => t.x < box.width * 0.15).length,
    lines: svg.querySelectorAll('polyline, path, circle').length,
    texts: texts.map(t => t.s),
  });
}
document.body.setAttribute('data-check', JSON.stringify(out));
</script>"#;

/// Each chart as Chromium laid it out.
fn measured_charts(html: &str, dir: &Path, name: &str) -> (String, Vec<serde_json::Value>) {
    let page = dir.join(format!("{name}.html"));
    std::fs::write(
        &page,
        html.replace("</body>", &format!("{CHECK_SCRIPT}</body>")),
    )
    .unwrap();
    let dom = headless(&page, &dir.join(format!("profile-{name}")), &["--dump-dom"]);
    let start = dom.find("data-check=\"").expect("the check script ran") + "data-check=\"".len();
    let end = start + dom[start..].find('"').unwrap();
    let json = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let charts: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    (dom, charts)
}

fn assert_labelled_axes(charts: &[serde_json::Value]) {
    for c in charts {
        for check in [
            "x_label_drawn",
            "y_label_drawn",
            "y_label_upright_left",
            "x_label_below",
        ] {
            assert_eq!(c[check], true, "{check} fails for {c:#}");
        }
        assert!(c["x_ticks"].as_u64().unwrap() >= 3, "x ticks: {c:#}");
        assert!(c["y_ticks"].as_u64().unwrap() >= 3, "y ticks: {c:#}");
        assert!(c["lines"].as_u64().unwrap() >= 1, "nothing drawn: {c:#}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_html_report_has_verdicts_tables_and_charts_with_labelled_axes_in_chromium() {
    let report = short_report().await;
    let dir = tempfile::tempdir().unwrap();
    let html_text = html(&report);
    let (dom, charts) = measured_charts(&html_text, dir.path(), "report");

    // A verdict line per policy, first thing under the title.
    for policy in ["naive", "stormgate"] {
        let verdict = [
            "met\">{p}: MEETS the SLOs (",
            "missed\">{p}: MISSES the SLOs: ",
        ]
        .iter()
        .any(|v| dom.contains(&format!("class=\"verdict {}", v.replace("{p}", policy))));
        assert!(verdict, "no verdict line for {policy}");
    }
    assert!(dom.find("class=\"verdict").unwrap() < dom.find("<table").unwrap());
    // Real tables with a column per policy.
    assert!(dom.matches("<table").count() >= 3, "tables");
    assert!(dom.contains("<th scope=\"col\">naive</th><th scope=\"col\">stormgate</th>"));
    assert!(dom.contains("<caption>SLO checks</caption>"));

    // Every chart: both axes labelled, ticked and drawn where a reader looks for them.
    // 429s, tokens per deployment (2), queue depth, and one small chart per severity.
    assert_eq!(charts.len(), 9, "{charts:#?}");
    assert_labelled_axes(&charts);
    let texts = |title: &str| -> Vec<String> {
        charts
            .iter()
            .find(|c| c["title"].as_str().unwrap().trim().starts_with(title))
            .unwrap_or_else(|| panic!("no chart {title}"))["texts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect()
    };
    assert!(texts("Tokens per minute vs quota: premium").contains(&"quota 20,000 TPM".to_owned()));
    assert!(texts("P1: time to LLM summary").contains(&"deadline 30 s".to_owned()));
    assert!(texts("P3: time to LLM summary").contains(&"deadline 900 s".to_owned()));

    // And it paints them: the screenshot holds far more than an empty page's.
    let page = dir.path().join("plain.html");
    std::fs::write(&page, &html_text).unwrap();
    let blank = dir.path().join("blank.html");
    std::fs::write(&blank, "<!doctype html><html><body></body></html>").unwrap();
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

#[test]
fn the_plan_page_names_the_cheapest_quotas_and_labels_its_frontier_axes_in_chromium() {
    use std::collections::BTreeMap;
    use stormgate_lab::plan::{PlanGrid, PlanPoint, PlanReport, Quotas, plan_html};
    use stormgate_lab::report::SummaryCounts;

    let point = |premium: u64, cost: f64, p95: f64, meets: bool| PlanPoint {
        quotas: Quotas {
            premium_tpm: premium,
            standard_tpm: 120_000,
            headroom: 0.1,
        },
        cost_usd: cost,
        meets_slos: meets,
        missed: if meets {
            vec![]
        } else {
            vec!["P1 LLM summary p95 90 s (needs ≤ 30 s)".into()]
        },
        p1_llm_p95_seconds: Some(p95),
        p2_llm_p95_seconds: Some(p95 + 2.0),
        long_tail_llm_share: 0.9,
        http_429: 0,
        summaries: SummaryCounts::default(),
        peak_utilization: BTreeMap::new(),
        on_frontier: false,
        wall_seconds: 1.0,
    };
    let scenario = Scenario::seed_storm().unwrap();
    let info = Report::build(&scenario, 1, &[], 0.0).scenario;
    let plan = PlanReport::new(
        info,
        PlanGrid {
            premium_tpm: vec![10_000, 20_000, 40_000],
            standard_tpm: vec![120_000],
            headroom: vec![0.1],
        },
        vec![
            point(10_000, 20.1, 90.0, false),
            point(20_000, 27.38, 8.0, true),
            point(40_000, 27.9, 7.0, true),
        ],
        2,
    );
    let dir = tempfile::tempdir().unwrap();
    let (dom, charts) = measured_charts(&plan_html(&plan), dir.path(), "plan");
    assert!(
        dom.contains("cheapest quotas meeting the SLOs: premium 20,000 TPM, standard 120,000 TPM")
    );
    assert!(dom.contains("(cheapest)"));
    assert_eq!(charts.len(), 2, "{charts:#?}");
    assert_labelled_axes(&charts);
}
