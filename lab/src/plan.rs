//! Capacity planning in tokens (`stormgate plan`): replay one trace (a scenario's or a
//! recorded export's) under a grid of premium and standard TPM quotas (and governor
//! headrooms), judge every point against the SLOs ([`crate::slo`]), and name the
//! cheapest pair that meets them, with the frontier of cost against P1/P2 latency and
//! long-tail coverage.
//!
//! Only the stormgate policy runs. What does not depend on a quota, the ingest of the
//! trace, is computed once ([`PreparedTrace::prepare`]) and shared by every point; the
//! command runs points side by side, each on its own single-threaded runtime. A point's
//! result is exactly what `stormgate replay --policies stormgate` gives at its quotas.
//!
//! "Cost" is what the replay bills: tokens × the scenario's prices (pay-as-you-go
//! quota costs nothing until used). Lower quotas cost less only by sending work to the
//! cheaper model or the extractive path, which is what the SLOs guard against; among
//! points that meet them, ties (to the cent) go to the smaller premium, then standard quota.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::replay::{PolicyName, PreparedTrace, ReplayError, ReplayOptions, replay_prepared};
use crate::report::{PolicyReport, Report, ScenarioInfo, SummaryCounts, thousands};
use crate::scenario::Scenario;
use crate::slo::Slo;
use stormgate_shared::governor::GovernorPolicy;
use stormgate_shared::headroom::Headroom;
use stormgate_shared::severity::Severity;

/// The quotas searched: every premium TPM with every standard TPM, at every headroom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanGrid {
    pub premium_tpm: Vec<u64>,
    pub standard_tpm: Vec<u64>,
    pub headroom: Vec<f64>,
}

/// Azure grants quota in steps of 1,000 TPM.
pub const TPM_STEP: u64 = 1_000;

impl PlanGrid {
    /// `steps` quotas per deployment spaced evenly on a log scale from `from` to `to`
    /// times the scenario's, rounded to [`TPM_STEP`]; the governor's default headroom.
    pub fn around(scenario: &Scenario, steps: usize, from: f64, to: f64) -> PlanGrid {
        let ladder = |tpm: u64| {
            let steps = steps.max(1);
            let mut values: Vec<u64> = (0..steps)
                .map(|i| {
                    let f = if steps == 1 {
                        1.0
                    } else {
                        from * (to / from).powf(i as f64 / (steps - 1) as f64)
                    };
                    let v = (tpm as f64 * f / TPM_STEP as f64).round() as u64 * TPM_STEP;
                    v.max(TPM_STEP)
                })
                .collect();
            values.dedup();
            values
        };
        PlanGrid {
            premium_tpm: ladder(scenario.premium.tpm),
            standard_tpm: ladder(scenario.standard.tpm),
            headroom: vec![GovernorPolicy::default().headroom.fraction()],
        }
    }

    /// Every point of the grid, premium-major.
    pub fn points(&self) -> Vec<Quotas> {
        let mut points = Vec::new();
        for &premium_tpm in &self.premium_tpm {
            for &standard_tpm in &self.standard_tpm {
                for &headroom in &self.headroom {
                    points.push(Quotas {
                        premium_tpm,
                        standard_tpm,
                        headroom,
                    });
                }
            }
        }
        points
    }
}

/// One point of the grid.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quotas {
    pub premium_tpm: u64,
    pub standard_tpm: u64,
    pub headroom: f64,
}

/// What one point gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanPoint {
    #[serde(flatten)]
    pub quotas: Quotas,
    pub cost_usd: f64,
    pub meets_slos: bool,
    /// The SLO checks missed, as `name measured (needs bound)`.
    pub missed: Vec<String>,
    pub p1_llm_p95_seconds: Option<f64>,
    pub p2_llm_p95_seconds: Option<f64>,
    /// Share of P4 and P5 tickets with an LLM technician summary.
    pub long_tail_llm_share: f64,
    pub http_429: u64,
    pub summaries: SummaryCounts,
    pub peak_utilization: BTreeMap<String, f64>,
    /// Not beaten on cost, worst P1/P2 p95 and long-tail coverage at once by any other point.
    pub on_frontier: bool,
    /// Wall time of this point's replay (set by the caller, which owns the clock).
    pub wall_seconds: f64,
}

impl PlanPoint {
    pub fn from_report(quotas: Quotas, p: &PolicyReport) -> PlanPoint {
        let p95 = |s: Severity| p.llm_summary_seconds.get(s.as_str()).map(|x| x.p95);
        let tail: u64 = [Severity::P4, Severity::P5]
            .iter()
            .filter_map(|s| p.tickets_by_severity.get(s.as_str()))
            .sum();
        let tail_llm: f64 = [Severity::P4, Severity::P5]
            .iter()
            .map(|s| {
                let n = p.tickets_by_severity.get(s.as_str()).copied().unwrap_or(0) as f64;
                n * p.llm_share.get(s.as_str()).copied().unwrap_or(0.0)
            })
            .sum();
        PlanPoint {
            quotas,
            cost_usd: p.cost_usd,
            meets_slos: p.verdict.met,
            missed: p
                .verdict
                .checks
                .iter()
                .filter(|c| !c.met)
                .map(|c| format!("{} {} (needs {})", c.name, c.measured, c.bound))
                .collect(),
            p1_llm_p95_seconds: p95(Severity::P1),
            p2_llm_p95_seconds: p95(Severity::P2),
            long_tail_llm_share: if tail == 0 {
                0.0
            } else {
                tail_llm.round() / tail as f64
            },
            http_429: p.http_429,
            summaries: p.summaries,
            peak_utilization: p.peak_utilization.clone(),
            on_frontier: false,
            wall_seconds: 0.0,
        }
    }

    /// The slower of the P1 and P2 p95s (infinite when either has tickets but no LLM summary).
    pub fn worst_p95(&self) -> f64 {
        [self.p1_llm_p95_seconds, self.p2_llm_p95_seconds]
            .into_iter()
            .flatten()
            .fold(0.0, f64::max)
    }
}

/// The scenario at one point's quotas.
pub fn scenario_at(scenario: &Scenario, q: Quotas) -> Scenario {
    let mut s = scenario.clone();
    s.premium.tpm = q.premium_tpm;
    s.standard.tpm = q.standard_tpm;
    s
}

/// Replays the stormgate policy at one point of the grid.
pub async fn run_point(
    scenario: &Scenario,
    trace: Arc<PreparedTrace>,
    quotas: Quotas,
    base: &ReplayOptions,
) -> Result<(PlanPoint, Report), ReplayError> {
    let scenario = scenario_at(scenario, quotas);
    let headroom = Headroom::new(quotas.headroom).map_err(|e| ReplayError::Setup(e.to_string()))?;
    let options = ReplayOptions {
        policies: vec![PolicyName::Stormgate],
        governor: GovernorPolicy {
            headroom,
            ..base.governor
        },
        ..base.clone()
    };
    let runs = replay_prepared(&scenario, trace, &options, &mut |_, _| {}).await?;
    let mut report = Report::build(&scenario, options.seed, &runs, 0.0);
    if quotas.headroom != GovernorPolicy::default().headroom.fraction() {
        report.scenario.headroom = Some(quotas.headroom);
    }
    let point = report
        .policies
        .first()
        .map(|p| PlanPoint::from_report(quotas, p))
        .ok_or_else(|| ReplayError::Setup("the replay ran no policy".into()))?;
    Ok((point, report))
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    pub scenario: ScenarioInfo,
    pub slo: Slo,
    pub grid: PlanGrid,
    pub points: Vec<PlanPoint>,
    /// Index into `points` of the cheapest point meeting the SLOs.
    pub cheapest: Option<usize>,
    /// Seconds spent computing the trace's ingest once, and in all.
    pub prepare_seconds: f64,
    pub wall_seconds: f64,
    pub threads: usize,
}

impl PlanReport {
    /// Marks the frontier and picks the cheapest point meeting the SLOs.
    pub fn new(
        scenario: ScenarioInfo,
        grid: PlanGrid,
        mut points: Vec<PlanPoint>,
        threads: usize,
    ) -> PlanReport {
        let snapshot = points.clone();
        for p in &mut points {
            p.on_frontier = !snapshot.iter().any(|q| dominates(q, p));
        }
        let cheapest = points
            .iter()
            .enumerate()
            .filter(|(_, p)| p.meets_slos)
            .min_by(|(_, a), (_, b)| {
                cents(a.cost_usd)
                    .cmp(&cents(b.cost_usd))
                    .then(a.quotas.premium_tpm.cmp(&b.quotas.premium_tpm))
                    .then(a.quotas.standard_tpm.cmp(&b.quotas.standard_tpm))
                    .then(b.quotas.headroom.total_cmp(&a.quotas.headroom))
            })
            .map(|(i, _)| i);
        PlanReport {
            scenario,
            slo: Slo::default(),
            grid,
            points,
            cheapest,
            prepare_seconds: 0.0,
            wall_seconds: 0.0,
            threads,
        }
    }

    /// The answer in one line.
    pub fn verdict(&self) -> String {
        match self.cheapest.and_then(|i| self.points.get(i)) {
            Some(p) => format!(
                "cheapest quotas meeting the SLOs: premium {} TPM, standard {} TPM, headroom {:.0} %: ${:.2} for the replay (P1/P2 LLM summary p95 {} / {}, long tail {:.0} % LLM-summarized, 0 HTTP 429s)",
                thousands(p.quotas.premium_tpm),
                thousands(p.quotas.standard_tpm),
                p.quotas.headroom * 100.0,
                p.cost_usd,
                seconds(p.p1_llm_p95_seconds),
                seconds(p.p2_llm_p95_seconds),
                p.long_tail_llm_share * 100.0
            ),
            None => format!(
                "no point of the grid meets the SLOs (premium {}–{} TPM, standard {}–{} TPM): widen it with --premium-tpm / --standard-tpm",
                thousands(self.grid.premium_tpm.first().copied().unwrap_or(0)),
                thousands(self.grid.premium_tpm.last().copied().unwrap_or(0)),
                thousands(self.grid.standard_tpm.first().copied().unwrap_or(0)),
                thousands(self.grid.standard_tpm.last().copied().unwrap_or(0)),
            ),
        }
    }
}

fn cents(usd: f64) -> i64 {
    (usd * 100.0).round() as i64
}

/// `a` is no worse than `b` on cost, worst P1/P2 p95 and long-tail coverage, and better on one.
fn dominates(a: &PlanPoint, b: &PlanPoint) -> bool {
    let no_worse = cents(a.cost_usd) <= cents(b.cost_usd)
        && a.worst_p95() <= b.worst_p95()
        && a.long_tail_llm_share >= b.long_tail_llm_share;
    let better = cents(a.cost_usd) < cents(b.cost_usd)
        || a.worst_p95() < b.worst_p95()
        || a.long_tail_llm_share > b.long_tail_llm_share;
    no_worse && better
}

fn seconds(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0} s")).unwrap_or_else(|| "–".into())
}

/// The terminal output: the answer, then every point.
pub fn plan_table(plan: &PlanReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", plan.verdict());
    let _ = writeln!(
        out,
        "{:>12} {:>12} {:>8} {:>9} {:>6} {:>8} {:>8} {:>9} {:>8}  missed",
        "premium TPM",
        "standard TPM",
        "headroom",
        "cost USD",
        "SLOs",
        "P1 p95",
        "P2 p95",
        "long tail",
        "frontier",
    );
    for (i, p) in plan.points.iter().enumerate() {
        let _ = writeln!(
            out,
            "{:>12} {:>12} {:>7.0}% {:>9.2} {:>6} {:>8} {:>8} {:>8.0}% {:>8}  {}",
            thousands(p.quotas.premium_tpm),
            thousands(p.quotas.standard_tpm),
            p.quotas.headroom * 100.0,
            p.cost_usd,
            if plan.cheapest == Some(i) {
                "best"
            } else if p.meets_slos {
                "met"
            } else {
                "missed"
            },
            seconds(p.p1_llm_p95_seconds),
            seconds(p.p2_llm_p95_seconds),
            p.long_tail_llm_share * 100.0,
            if p.on_frontier { "yes" } else { "" },
            p.missed.join("; ")
        );
    }
    let _ = writeln!(
        out,
        "{} points on {} threads in {:.1} s of wall time (ingest of the trace, once: {:.1} s)",
        plan.points.len(),
        plan.threads,
        plan.wall_seconds,
        plan.prepare_seconds
    );
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A named measure of a point, charted against its cost.
type Metric<'a> = (&'a str, &'a dyn Fn(&PlanPoint) -> Option<f64>);

/// A scatter of the points against cost, drawn by `plotters` as inline SVG.
fn scatter(
    plan: &PlanReport,
    title: &str,
    y_label: &str,
    series: &[Metric<'_>],
    references: &[(String, f64)],
) -> String {
    let mut svg = String::new();
    let drawn = draw_scatter(plan, title, y_label, series, references, &mut svg);
    match drawn {
        Ok(()) => format!(
            "<figure class=\"chart\" data-x-label=\"{}\" data-y-label=\"{}\">{svg}</figure>",
            escape(COST),
            escape(y_label)
        ),
        Err(e) => format!("<p>chart not drawn: {}</p>", escape(&e)),
    }
}

const COST: &str = "cost of the replay (USD)";

fn draw_scatter(
    plan: &PlanReport,
    title: &str,
    y_label: &str,
    series: &[Metric<'_>],
    references: &[(String, f64)],
    out: &mut String,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let costs: Vec<f64> = plan.points.iter().map(|p| p.cost_usd).collect();
    let (x_min, x_max) = costs
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), c| (lo.min(*c), hi.max(*c)));
    let x_min = if x_min == f64::MAX { 0.0 } else { x_min };
    let pad = ((x_max - x_min) * 0.08).max(0.5);
    let y_max = plan
        .points
        .iter()
        .flat_map(|p| series.iter().filter_map(|(_, f)| f(p)))
        .chain(references.iter().map(|r| r.1))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.1;
    let root = SVGBackend::with_string(out, (940, 380)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 17))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((x_min - pad).max(0.0)..(x_max + pad), 0f64..y_max)
        .map_err(|e| err(&e))?;
    let x_fmt = |v: &f64| format!("${v:.0}");
    let y_fmt = |v: &f64| format!("{v:.0}");
    chart
        .configure_mesh()
        .x_desc(COST)
        .y_desc(y_label)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .axis_desc_style(("sans-serif", 13))
        .label_style(("sans-serif", 11))
        .light_line_style(RGBColor(0xee, 0xee, 0xee))
        .draw()
        .map_err(|e| err(&e))?;
    let colors = [RGBColor(0x1f, 0x77, 0xb4), RGBColor(0xd6, 0x27, 0x28)];
    for (i, (label, f)) in series.iter().enumerate() {
        let color = colors[i % colors.len()];
        let met: Vec<(f64, f64)> = plan
            .points
            .iter()
            .filter(|p| p.meets_slos)
            .filter_map(|p| f(p).map(|y| (p.cost_usd, y)))
            .collect();
        let missed: Vec<(f64, f64)> = plan
            .points
            .iter()
            .filter(|p| !p.meets_slos)
            .filter_map(|p| f(p).map(|y| (p.cost_usd, y)))
            .collect();
        chart
            .draw_series(met.iter().map(|&c| Circle::new(c, 5, color.filled())))
            .map_err(|e| err(&e))?
            .label(format!("{label}, meets the SLOs"))
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, color.filled()));
        chart
            .draw_series(
                missed
                    .iter()
                    .map(|&c| Circle::new(c, 5, color.stroke_width(1))),
            )
            .map_err(|e| err(&e))?
            .label(format!("{label}, misses them"))
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, color.stroke_width(1)));
        let mut frontier: Vec<(f64, f64)> = plan
            .points
            .iter()
            .filter(|p| p.on_frontier)
            .filter_map(|p| f(p).map(|y| (p.cost_usd, y)))
            .collect();
        frontier.sort_by(|a, b| a.0.total_cmp(&b.0));
        if frontier.len() > 1 {
            chart
                .draw_series(LineSeries::new(frontier, color.mix(0.5).stroke_width(1)))
                .map_err(|e| err(&e))?;
        }
    }
    if let Some(best) = plan.cheapest.and_then(|i| plan.points.get(i))
        && let Some(y) = series.first().and_then(|(_, f)| f(best))
    {
        chart
            .draw_series(std::iter::once(Text::new(
                format!(
                    "cheapest: {}k / {}k TPM",
                    best.quotas.premium_tpm / 1000,
                    best.quotas.standard_tpm / 1000
                ),
                (best.cost_usd, y),
                ("sans-serif", 12),
            )))
            .map_err(|e| err(&e))?;
    }
    for (label, y) in references {
        let (x0, x1) = ((x_min - pad).max(0.0), x_max + pad);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x0, *y), (x1, *y)],
                6,
                4,
                RGBColor(0x55, 0x55, 0x55).stroke_width(2),
            ))
            .map_err(|e| err(&e))?
            .label(label.clone())
            .legend(|(x, y)| {
                PathElement::new(
                    vec![(x, y), (x + 18, y)],
                    RGBColor(0x55, 0x55, 0x55).stroke_width(2),
                )
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(0xcc, 0xcc, 0xcc))
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// The self-contained HTML page of a plan.
pub fn plan_html(plan: &PlanReport) -> String {
    let mut body = format!(
        "<h1>stormgate capacity plan: {}</h1><p class=\"verdict {}\">{}</p>",
        escape(
            &plan
                .scenario
                .history
                .as_ref()
                .map(|h| h.file.clone())
                .unwrap_or_else(|| plan.scenario.name.clone())
        ),
        if plan.cheapest.is_some() {
            "met"
        } else {
            "missed"
        },
        escape(&plan.verdict())
    );
    // The grid: premium quotas down, standard across, cost and verdict in each cell.
    for &headroom in &plan.grid.headroom {
        let _ = write!(
            body,
            "<table><caption>Cost of the replay (USD) by quota, headroom {:.0} %: ✔ meets the SLOs, ✘ misses them</caption><thead><tr><th scope=\"col\">premium TPM \\ standard TPM</th>",
            headroom * 100.0
        );
        for s in &plan.grid.standard_tpm {
            let _ = write!(body, "<th scope=\"col\">{}</th>", thousands(*s));
        }
        body.push_str("</tr></thead><tbody>");
        for prem in &plan.grid.premium_tpm {
            let _ = write!(body, "<tr><th scope=\"row\">{}</th>", thousands(*prem));
            for std_tpm in &plan.grid.standard_tpm {
                let cell = plan.points.iter().enumerate().find(|(_, p)| {
                    p.quotas.premium_tpm == *prem
                        && p.quotas.standard_tpm == *std_tpm
                        && p.quotas.headroom == headroom
                });
                match cell {
                    Some((i, p)) => {
                        let _ = write!(
                            body,
                            "<td class=\"{}\" title=\"{}\">{} {:.2}{}</td>",
                            if plan.cheapest == Some(i) {
                                "best"
                            } else if p.meets_slos {
                                "met"
                            } else {
                                "missed"
                            },
                            escape(&p.missed.join("; ")),
                            if p.meets_slos { "✔" } else { "✘" },
                            p.cost_usd,
                            if plan.cheapest == Some(i) {
                                " (cheapest)"
                            } else {
                                ""
                            }
                        );
                    }
                    None => body.push_str("<td>–</td>"),
                }
            }
            body.push_str("</tr>");
        }
        body.push_str("</tbody></table>");
    }
    body.push_str("<table><caption>Every point</caption><thead><tr>");
    for h in [
        "premium TPM",
        "standard TPM",
        "headroom",
        "cost (USD)",
        "SLOs",
        "P1 LLM p95 (s)",
        "P2 LLM p95 (s)",
        "P4/P5 LLM-summarized",
        "HTTP 429s",
        "on the frontier",
        "missed",
    ] {
        let _ = write!(body, "<th scope=\"col\">{h}</th>");
    }
    body.push_str("</tr></thead><tbody>");
    for p in &plan.points {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{:.0} %</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} %</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            thousands(p.quotas.premium_tpm),
            thousands(p.quotas.standard_tpm),
            p.quotas.headroom * 100.0,
            p.cost_usd,
            if p.meets_slos { "✔" } else { "✘" },
            seconds(p.p1_llm_p95_seconds),
            seconds(p.p2_llm_p95_seconds),
            p.long_tail_llm_share * 100.0,
            thousands(p.http_429),
            if p.on_frontier { "yes" } else { "" },
            escape(&p.missed.join("; "))
        );
    }
    body.push_str("</tbody></table><h2>Frontier</h2>");
    body.push_str(&scatter(
        plan,
        "P1 and P2 time to LLM summary (p95) against cost",
        "seconds to LLM summary, p95",
        &[
            ("P1", &|p: &PlanPoint| p.p1_llm_p95_seconds),
            ("P2", &|p: &PlanPoint| p.p2_llm_p95_seconds),
        ],
        &[
            (
                format!("P1 deadline {:.0} s", plan.slo.p1_seconds),
                plan.slo.p1_seconds,
            ),
            (
                format!("P2 deadline {:.0} s", plan.slo.p2_seconds),
                plan.slo.p2_seconds,
            ),
        ],
    ));
    body.push_str(&scatter(
        plan,
        "Long tail (P4/P5) LLM-summarized against cost",
        "P4/P5 tickets LLM-summarized (%)",
        &[("P4/P5", &|p: &PlanPoint| {
            Some(p.long_tail_llm_share * 100.0)
        })],
        &[],
    ));
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>stormgate capacity plan</title>\
         <style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:980px;color:#222}}\
         .verdict{{font-size:1.15em;font-weight:600;padding:.4em .6em;border-radius:4px}}\
         .verdict.met{{background:#e6f4ea;color:#1e5e2f}}.verdict.missed{{background:#fce8e6;color:#8a1c12}}\
         table{{border-collapse:collapse;margin:1em 0;font-size:.92em}}caption{{text-align:left;font-weight:600;padding:.3em 0}}\
         th,td{{border:1px solid #ddd;padding:.25em .6em}}td{{text-align:right;font-variant-numeric:tabular-nums}}\
         td.met{{background:#e6f4ea}}td.missed{{background:#fce8e6}}td.best{{background:#b7e1c1;font-weight:600}}\
         thead th{{background:#f4f4f4}}figure{{margin:1em 0}}figure svg{{border:1px solid #ddd}}</style>\
         </head><body>{body}</body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(cost: f64, p95: f64, tail: f64, meets: bool, premium: u64) -> PlanPoint {
        PlanPoint {
            quotas: Quotas {
                premium_tpm: premium,
                standard_tpm: 100_000,
                headroom: 0.1,
            },
            cost_usd: cost,
            meets_slos: meets,
            missed: Vec::new(),
            p1_llm_p95_seconds: Some(p95),
            p2_llm_p95_seconds: Some(p95),
            long_tail_llm_share: tail,
            http_429: 0,
            summaries: SummaryCounts::default(),
            peak_utilization: BTreeMap::new(),
            on_frontier: false,
            wall_seconds: 0.0,
        }
    }

    fn info() -> ScenarioInfo {
        ScenarioInfo {
            name: "t".into(),
            seed: 1,
            start: "2026-01-12T06:00:00Z".into(),
            minutes: 1,
            tpm: BTreeMap::new(),
            models: BTreeMap::new(),
            rpm: BTreeMap::new(),
            reading: Default::default(),
            history: None,
            headroom: None,
        }
    }

    #[test]
    fn the_cheapest_point_meeting_the_slos_wins_ties_going_to_the_smaller_premium_quota() {
        let grid = PlanGrid {
            premium_tpm: vec![10_000, 20_000, 30_000],
            standard_tpm: vec![100_000],
            headroom: vec![0.1],
        };
        let points = vec![
            point(20.0, 90.0, 1.0, false, 10_000),
            point(27.381, 8.0, 1.0, true, 30_000),
            point(27.379, 9.0, 1.0, true, 20_000),
        ];
        let plan = PlanReport::new(info(), grid, points, 2);
        assert_eq!(plan.cheapest, Some(2));
        assert!(plan.verdict().contains("premium 20,000 TPM"));
        // The 10k point is cheapest of all but slow: on the frontier, not the answer.
        assert!(plan.points[0].on_frontier);
        assert!(plan.points[1].on_frontier, "fastest");
    }

    #[test]
    fn a_grid_where_nothing_meets_the_slos_says_so() {
        let grid = PlanGrid {
            premium_tpm: vec![1_000],
            standard_tpm: vec![2_000],
            headroom: vec![0.1],
        };
        let plan = PlanReport::new(info(), grid, vec![point(1.0, 500.0, 0.0, false, 1_000)], 1);
        assert_eq!(plan.cheapest, None);
        assert!(plan.verdict().contains("no point of the grid"));
    }

    #[test]
    fn the_default_grid_spans_half_to_twice_the_scenarios_quotas_in_whole_thousands() {
        let s = Scenario::seed_storm().unwrap_or_else(|e| panic!("{e}"));
        let g = PlanGrid::around(&s, 5, 0.5, 2.0);
        assert_eq!(g.premium_tpm, vec![10_000, 14_000, 20_000, 28_000, 40_000]);
        assert_eq!(
            g.standard_tpm,
            vec![60_000, 85_000, 120_000, 170_000, 240_000]
        );
        assert_eq!(g.points().len(), 25);
    }
}
