//! The comparison report: figures per policy from [`PolicyRun`]s, as the stable JSON
//! shape (docs/storm-lab.md), a terminal table, and a self-contained HTML page with
//! inline SVG charts (no network).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::deadline_policy::DeadlinePolicy;
use crate::job::{SummaryKind, Tier};
use crate::lab::replay::PolicyRun;
use crate::lab::scenario::Scenario;
use crate::severity::Severity;

/// p50 / p95 / max of a set of durations, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(mut values: Vec<f64>) -> Option<Percentiles> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((values.len() as f64 - 1.0) * q).round() as usize;
            values[i.min(values.len() - 1)]
        };
        Some(Percentiles {
            p50: at(0.5),
            p95: at(0.95),
            max: at(1.0),
        })
    }
}

/// Summaries delivered, by where they came from (one per ticket: its best technician summary).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryCounts {
    pub premium: u64,
    pub standard: u64,
    pub extractive: u64,
    pub none: u64,
}

/// One policy's figures. Field names are the documented JSON shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyReport {
    pub name: String,
    pub tickets: u64,
    pub llm_calls: u64,
    pub http_429: u64,
    pub tokens_by_deployment: BTreeMap<String, u64>,
    pub cost_usd: f64,
    pub summaries: SummaryCounts,
    pub first_summary_seconds: BTreeMap<String, Percentiles>,
    pub llm_summary_seconds: BTreeMap<String, Percentiles>,
    pub max_wait_seconds: BTreeMap<String, f64>,
    /// The same waits by the severity the job was queued with, which its configured
    /// bound (the technician deadline, `wait_bound_seconds`) applies to; a ticket the
    /// classifier routed as P3 waits as a P3 whatever its true severity.
    #[serde(default)]
    pub max_wait_by_queued_severity_seconds: BTreeMap<String, f64>,
    #[serde(default)]
    pub wait_bound_seconds: BTreeMap<String, f64>,
    pub peak_utilization: BTreeMap<String, f64>,
    /// Chart series (not part of the stable shape's required fields).
    #[serde(default)]
    pub series: Series,
}

/// Time series for the charts, one point per minute of virtual time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// 429s per minute.
    pub http_429: Vec<u64>,
    /// Per deployment, the meter's tokens in the last minute, sampled each minute.
    pub tokens_per_minute: BTreeMap<String, Vec<u64>>,
    pub queue_depth: Vec<u64>,
    /// Per severity, the p95 of time to LLM summary of tickets arriving in each minute.
    pub llm_latency_p95: BTreeMap<String, Vec<Option<f64>>>,
}

/// The scenario as the report describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioInfo {
    pub name: String,
    pub seed: u64,
    pub start: String,
    pub minutes: u64,
    pub tpm: BTreeMap<String, u64>,
    pub models: BTreeMap<String, String>,
    /// Requests per minute per deployment.
    #[serde(default)]
    pub rpm: BTreeMap<String, u64>,
    /// How the simulated deployments read Azure's metering (`lenient` or `strict`).
    #[serde(default)]
    pub reading: crate::metering::MeterReading,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub scenario: ScenarioInfo,
    pub wall_seconds: f64,
    pub policies: Vec<PolicyReport>,
}

impl Report {
    pub fn build(scenario: &Scenario, seed: u64, runs: &[PolicyRun], wall_seconds: f64) -> Report {
        let prices: BTreeMap<&str, (f64, f64)> = [&scenario.premium, &scenario.standard]
            .into_iter()
            .map(|d| {
                (
                    d.deployment.as_str(),
                    (d.price_input_per_1m, d.price_output_per_1m),
                )
            })
            .collect();
        Report {
            scenario: ScenarioInfo {
                name: scenario.name.clone(),
                seed,
                start: scenario.start.clone(),
                minutes: scenario.duration_minutes(),
                tpm: [&scenario.premium, &scenario.standard]
                    .into_iter()
                    .map(|d| (d.deployment.clone(), d.tpm))
                    .collect(),
                models: [&scenario.premium, &scenario.standard]
                    .into_iter()
                    .map(|d| (d.deployment.clone(), d.model.clone()))
                    .collect(),
                rpm: [&scenario.premium, &scenario.standard]
                    .into_iter()
                    .map(|d| {
                        (
                            d.deployment.clone(),
                            d.requests_per_minute().unwrap_or_default(),
                        )
                    })
                    .collect(),
                reading: runs.first().map(|run| run.reading).unwrap_or_default(),
            },
            wall_seconds,
            policies: runs.iter().map(|r| policy_report(r, &prices)).collect(),
        }
    }

    pub fn policy(&self, name: &str) -> Option<&PolicyReport> {
        self.policies.iter().find(|p| p.name == name)
    }
}

fn seconds(from: EpochMillis, to: EpochMillis) -> f64 {
    to.since(from).as_secs_f64()
}

fn policy_report(run: &PolicyRun, prices: &BTreeMap<&str, (f64, f64)>) -> PolicyReport {
    let mut summaries = SummaryCounts::default();
    let mut first: BTreeMap<Severity, Vec<f64>> = BTreeMap::new();
    let mut llm: BTreeMap<Severity, Vec<f64>> = BTreeMap::new();
    let mut wait: BTreeMap<Severity, f64> = BTreeMap::new();
    let mut queued_wait: BTreeMap<Severity, f64> = BTreeMap::new();
    let minutes = (run.finished.since(run.started).as_secs() / 60 + 1) as usize;
    let mut latency_by_minute: BTreeMap<Severity, Vec<Vec<f64>>> = BTreeMap::new();
    for t in run.tickets.values() {
        let severity = t.severity.unwrap_or(Severity::P3);
        match (t.llm_tier, t.first_summary) {
            (Some(Tier::Premium), _) => summaries.premium += 1,
            (Some(Tier::Standard), _) => summaries.standard += 1,
            (_, Some(_)) => summaries.extractive += 1,
            _ => summaries.none += 1,
        }
        if let Some(at) = t.first_summary {
            first
                .entry(severity)
                .or_default()
                .push(seconds(t.arrived, at));
        }
        if let Some(at) = t.llm_summary {
            let s = seconds(t.arrived, at);
            llm.entry(severity).or_default().push(s);
            let minute = (t.arrived.since(run.started).as_secs() / 60) as usize;
            let buckets = latency_by_minute
                .entry(severity)
                .or_insert_with(|| vec![Vec::new(); minutes]);
            if let Some(b) = buckets.get_mut(minute) {
                b.push(s);
            }
        }
        // A ticket never settled waited until the end of the run.
        let waited = match t.settled {
            Some(_) => t.max_wait_ms as f64 / 1000.0,
            None => seconds(t.arrived, run.finished),
        };
        let w = wait.entry(severity).or_default();
        *w = w.max(waited);
        if let Some(queued) = t.queued_severity {
            let w = queued_wait.entry(queued).or_default();
            *w = w.max(waited);
        }
    }
    let by_name = |m: BTreeMap<Severity, Vec<f64>>| {
        m.into_iter()
            .filter_map(|(s, v)| Percentiles::of(v).map(|p| (s.as_str().to_owned(), p)))
            .collect::<BTreeMap<_, _>>()
    };
    let mut tokens_by_deployment = BTreeMap::new();
    let mut cost = 0.0;
    let mut calls = 0;
    let mut throttled = 0;
    for (name, d) in &run.deployments {
        tokens_by_deployment.insert(name.clone(), d.prompt_tokens + d.completion_tokens);
        let (p_in, p_out) = prices.get(name.as_str()).copied().unwrap_or((0.0, 0.0));
        cost += d.prompt_tokens as f64 * p_in / 1e6 + d.completion_tokens as f64 * p_out / 1e6;
        calls += d.calls;
        throttled += d.throttled;
    }
    // The meter's exact peak; the samples (every 10 s) only see the window between charges.
    let mut peak: BTreeMap<String, f64> = run
        .deployments
        .iter()
        .map(|(name, d)| {
            (
                name.clone(),
                d.peak_window_tokens as f64 / d.tpm.max(1) as f64,
            )
        })
        .collect();
    let mut tokens_per_minute: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut queue_depth = vec![0u64; minutes];
    for s in &run.samples {
        let minute = (s.at.since(run.started).as_secs() / 60) as usize;
        for (name, tokens) in &s.window_tokens {
            let tpm = run.deployments.get(name).map(|d| d.tpm).unwrap_or(1).max(1);
            let u = *tokens as f64 / tpm as f64;
            let e = peak.entry(name.clone()).or_insert(0.0f64);
            *e = e.max(u);
            let series = tokens_per_minute
                .entry(name.clone())
                .or_insert_with(|| vec![0; minutes]);
            if let Some(v) = series.get_mut(minute) {
                *v = (*v).max(*tokens);
            }
        }
        if let Some(q) = queue_depth.get_mut(minute) {
            *q = (*q).max(s.queue_depth);
        }
    }
    let mut http_429 = vec![0u64; minutes];
    for (m, n) in &run.throttles_per_minute {
        if let Some(v) = http_429.get_mut(*m as usize) {
            *v = *n;
        }
    }
    let llm_latency_p95 = latency_by_minute
        .into_iter()
        .map(|(s, buckets)| {
            (
                s.as_str().to_owned(),
                buckets
                    .into_iter()
                    .map(|b| Percentiles::of(b).map(|p| p.p95))
                    .collect(),
            )
        })
        .collect();
    let has_queues = !queued_wait.is_empty();
    PolicyReport {
        name: run.policy.as_str().to_owned(),
        tickets: run.tickets.len() as u64,
        llm_calls: calls,
        http_429: throttled,
        tokens_by_deployment,
        cost_usd: (cost * 100.0).round() / 100.0,
        summaries,
        first_summary_seconds: by_name(first),
        llm_summary_seconds: by_name(llm),
        max_wait_seconds: wait
            .into_iter()
            .map(|(s, w)| (s.as_str().to_owned(), w))
            .collect(),
        max_wait_by_queued_severity_seconds: queued_wait
            .into_iter()
            .map(|(s, w)| (s.as_str().to_owned(), w))
            .collect(),
        wait_bound_seconds: Severity::ALL
            .iter()
            .filter(|_| has_queues)
            .filter_map(|&s| {
                let bound = DeadlinePolicy::default().wait(s, SummaryKind::Technician)?;
                Some((s.as_str().to_owned(), bound.as_secs_f64()))
            })
            .collect(),
        peak_utilization: peak,
        series: Series {
            http_429,
            tokens_per_minute,
            queue_depth,
            llm_latency_p95,
        },
    }
}

/// The terminal table.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let s = &report.scenario;
    let _ = writeln!(
        out,
        "scenario {} (seed {}, {} min of virtual time); quotas: {}",
        s.name,
        s.seed,
        s.minutes,
        s.tpm
            .iter()
            .map(|(d, t)| format!(
                "{d} {} {t} TPM",
                s.models.get(d).cloned().unwrap_or_default()
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let names: Vec<&str> = report.policies.iter().map(|p| p.name.as_str()).collect();
    let _ = write!(out, "{:<34}", "");
    for n in &names {
        let _ = write!(out, "{n:>18}");
    }
    out.push('\n');
    let mut row = |label: &str, f: &dyn Fn(&PolicyReport) -> String| {
        let _ = write!(out, "{label:<34}");
        for p in &report.policies {
            let _ = write!(out, "{:>18}", f(p));
        }
        out.push('\n');
    };
    row("tickets", &|p| p.tickets.to_string());
    row("LLM calls", &|p| p.llm_calls.to_string());
    row("HTTP 429s", &|p| p.http_429.to_string());
    let deployments: Vec<String> = s.tpm.keys().cloned().collect();
    for d in &deployments {
        row(&format!("tokens {d}"), &|p| {
            p.tokens_by_deployment
                .get(d)
                .copied()
                .unwrap_or(0)
                .to_string()
        });
        row(&format!("peak utilization {d}"), &|p| {
            format!(
                "{:.0}%",
                100.0 * p.peak_utilization.get(d).copied().unwrap_or(0.0)
            )
        });
    }
    row("cost (USD)", &|p| format!("{:.2}", p.cost_usd));
    row("summaries premium", &|p| p.summaries.premium.to_string());
    row("summaries standard", &|p| p.summaries.standard.to_string());
    row("summaries extractive", &|p| {
        p.summaries.extractive.to_string()
    });
    row("summaries none", &|p| p.summaries.none.to_string());
    for sev in Severity::ALL {
        let k = sev.as_str();
        row(&format!("{k} first summary p50/p95 s"), &|p| {
            p.first_summary_seconds
                .get(k)
                .map(|x| format!("{:.0}/{:.0}", x.p50, x.p95))
                .unwrap_or_else(|| "-".into())
        });
        row(&format!("{k} LLM summary p50/p95 s"), &|p| {
            p.llm_summary_seconds
                .get(k)
                .map(|x| format!("{:.0}/{:.0}", x.p50, x.p95))
                .unwrap_or_else(|| "-".into())
        });
        row(&format!("{k} max wait s"), &|p| {
            p.max_wait_seconds
                .get(k)
                .map(|x| format!("{x:.0}"))
                .unwrap_or_else(|| "-".into())
        });
        row(&format!("{k} queued max wait / bound s"), &|p| match (
            p.max_wait_by_queued_severity_seconds.get(k),
            p.wait_bound_seconds.get(k),
        ) {
            (Some(w), Some(b)) => format!("{w:.0}/{b:.0}"),
            _ => "-".into(),
        });
    }
    let _ = writeln!(out, "wall time {:.1} s", report.wall_seconds);
    out
}

const COLORS: [&str; 6] = [
    "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// A line chart as inline SVG. `lines` are (label, points, dashed).
fn svg_chart(title: &str, y_label: &str, lines: &[(String, Vec<Option<f64>>, bool)]) -> String {
    let (w, h, left, bottom) = (900.0, 260.0, 60.0, 30.0);
    let n = lines.iter().map(|l| l.1.len()).max().unwrap_or(1).max(2);
    let y_max = lines
        .iter()
        .flat_map(|l| l.1.iter().flatten().copied())
        .fold(0.0f64, f64::max)
        .max(1.0);
    let x = |i: usize| left + (w - left - 10.0) * i as f64 / (n - 1) as f64;
    let y = |v: f64| (h - bottom) - (h - bottom - 20.0) * v / y_max;
    let mut svg = format!(
        "<h3>{title}</h3><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"{title}\">\
         <rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\
         <line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\
         <line x1=\"{left}\" y1=\"20\" x2=\"{left}\" y2=\"{}\" stroke=\"#333\"/>\
         <text x=\"4\" y=\"14\" font-size=\"11\">{y_label} (max {y_max:.0})</text>\
         <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">minutes: {}</text>",
        h - bottom,
        w - 10.0,
        h - bottom,
        h - bottom,
        w - 10.0,
        h - 4.0,
        n - 1
    );
    for (i, (label, points, dashed)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut d = String::new();
        let mut pen_down = false;
        for (j, p) in points.iter().enumerate() {
            match p {
                Some(v) => {
                    let _ = write!(
                        d,
                        "{}{:.1},{:.1} ",
                        if pen_down { "L" } else { "M" },
                        x(j),
                        y(*v)
                    );
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        let dash = if *dashed {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let _ = write!(
            svg,
            "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"{dash}/>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"{color}\">{label}</text>",
            left + 10.0 + 170.0 * i as f64,
            34.0
        );
    }
    svg.push_str("</svg>");
    svg
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The self-contained HTML report.
pub fn html(report: &Report) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>stormgate storm lab: {}</h1><p>seed {}, {} minutes of virtual time, replayed in {:.1} s.</p><pre>{}</pre>",
        escape(&report.scenario.name),
        report.scenario.seed,
        report.scenario.minutes,
        report.wall_seconds,
        escape(&table(report))
    );
    let as_f = |v: &[u64]| v.iter().map(|x| Some(*x as f64)).collect::<Vec<_>>();
    let policies = &report.policies;
    body.push_str(&svg_chart(
        "HTTP 429s per minute",
        "429s/min",
        &policies
            .iter()
            .map(|p| (p.name.clone(), as_f(&p.series.http_429), false))
            .collect::<Vec<_>>(),
    ));
    for (d, tpm) in &report.scenario.tpm {
        let mut lines: Vec<(String, Vec<Option<f64>>, bool)> = policies
            .iter()
            .map(|p| {
                (
                    format!("{} {d}", p.name),
                    as_f(
                        p.series
                            .tokens_per_minute
                            .get(d)
                            .map(Vec::as_slice)
                            .unwrap_or(&[]),
                    ),
                    false,
                )
            })
            .collect();
        let n = lines.iter().map(|l| l.1.len()).max().unwrap_or(2);
        lines.push((format!("quota {tpm} TPM"), vec![Some(*tpm as f64); n], true));
        body.push_str(&svg_chart(
            &format!("Tokens per minute vs quota: {d}"),
            "tokens in the last minute",
            &lines,
        ));
    }
    body.push_str(&svg_chart(
        "Queue depth (jobs waiting or in flight)",
        "jobs",
        &policies
            .iter()
            .map(|p| (p.name.clone(), as_f(&p.series.queue_depth), false))
            .collect::<Vec<_>>(),
    ));
    for p in policies {
        let lines: Vec<(String, Vec<Option<f64>>, bool)> = p
            .series
            .llm_latency_p95
            .iter()
            .map(|(s, v)| (s.clone(), v.clone(), false))
            .collect();
        body.push_str(&svg_chart(
            &format!(
                "{}: time to LLM summary, p95 by arrival minute, per severity",
                p.name
            ),
            "seconds",
            &lines,
        ));
    }
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>stormgate storm lab</title>\
         <style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:980px}}pre{{background:#f6f6f6;padding:1em;overflow:auto}}svg{{border:1px solid #ddd}}</style>\
         </head><body>{body}</body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_ranks() {
        let p = Percentiles::of((1..=100).map(f64::from).collect()).unwrap();
        assert_eq!(p.max, 100.0);
        assert!((p.p50 - 50.0).abs() <= 1.0);
        assert!((p.p95 - 95.0).abs() <= 1.0);
        assert!(Percentiles::of(Vec::new()).is_none());
    }

    #[test]
    fn chart_is_inline_svg_without_network() {
        let svg = svg_chart(
            "t",
            "y",
            &[("a".into(), vec![Some(1.0), None, Some(3.0)], false)],
        );
        assert!(svg.contains("<svg") && svg.contains("<path"));
        assert!(!svg.contains("http://") || svg.contains("http://www.w3.org/2000/svg"));
    }
}
