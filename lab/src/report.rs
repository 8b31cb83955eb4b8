//! The comparison report: figures per policy from [`PolicyRun`]s, as the stable JSON
//! shape (docs/storm-lab.md), a terminal table, and a self-contained HTML page (no
//! network): a verdict line per policy against the SLOs ([`crate::slo`]), HTML
//! tables, and charts drawn by `plotters` as inline SVG with labelled axes, ticks,
//! units, the quota and deadline lines, and one small chart per severity.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::history::HistoryReport;
use crate::replay::{IngestTally, PolicyRun};
use crate::scenario::Scenario;
use crate::slo::{Check, Slo, Verdict};
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::deadline_policy::DeadlinePolicy;
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::routing::RoutingBasis;
use stormgate_shared::severity::Severity;

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
    /// Tickets by their true (ServiceNow) severity.
    #[serde(default)]
    pub tickets_by_severity: BTreeMap<String, u64>,
    /// Tickets that needed a technician summary (a job not all cancelled) and got no
    /// LLM one, by true severity.
    #[serde(default)]
    pub without_llm_summary: BTreeMap<String, u64>,
    /// Share of each true severity's tickets with an LLM technician summary; P4/P5 is
    /// the long tail.
    #[serde(default)]
    pub llm_share: BTreeMap<String, f64>,
    /// Technician jobs cancelled before they left the queue (a newer version or a
    /// resolution replaced them): they count in no wait.
    #[serde(default)]
    pub cancelled_jobs: u64,
    /// What ingest made of the events (policies with an ingest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest: Option<IngestTally>,
    /// Where tickets were routed and where their technician summary came from (policies
    /// with a classifier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<RoutingOutcomes>,
    /// Against the SLOs.
    #[serde(default)]
    pub verdict: Verdict,
}

/// How a ticket's technician summary ended: from premium, from standard, or extractive
/// only (it needed one and got no LLM summary).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierOutcomes {
    pub premium: u64,
    pub standard: u64,
    pub extractive: u64,
}

impl TierOutcomes {
    fn count(&mut self, tier: Option<Tier>, needed: bool) {
        match tier {
            Some(Tier::Premium) => self.premium += 1,
            Some(_) => self.standard += 1,
            None if needed => self.extractive += 1,
            None => {}
        }
    }
}

/// Routing in the replay ([`stormgate_shared::routing`]): the lifted tickets, and the trade the
/// premium deployment makes between them and the tickets ServiceNow rates P1/P2.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutingOutcomes {
    /// By ServiceNow's own priority (of the first version).
    pub by_servicenow_priority: BTreeMap<String, TierOutcomes>,
    /// Tickets routed above ServiceNow's priority (one level on uncertainty, further on
    /// evidence).
    pub lifted: TierOutcomes,
    pub lifted_on_uncertainty: u64,
    /// Lifted tickets whose technician summary came from premium though ServiceNow rates
    /// them P3 or lower and their log shows no outage alarm (dying gasp, loss of light,
    /// mains power).
    pub lifted_on_premium_without_outage_alarms: u64,
}

impl RoutingOutcomes {
    /// Tickets ServiceNow rates P1 or P2 left with the extractive summary only.
    pub fn servicenow_p1_p2_extractive(&self) -> u64 {
        ["P1", "P2"]
            .iter()
            .filter_map(|s| self.by_servicenow_priority.get(*s))
            .map(|o| o.extractive)
            .sum()
    }
}

fn routing_outcomes(run: &PolicyRun) -> Option<RoutingOutcomes> {
    let mut out = RoutingOutcomes::default();
    let mut any = false;
    for t in run.tickets.values() {
        let Some(routing) = t.routing else { continue };
        any = true;
        let needed = t.technician_jobs > t.cancelled_jobs;
        out.by_servicenow_priority
            .entry(routing.servicenow.as_str().to_owned())
            .or_default()
            .count(t.llm_tier, needed);
        if !routing.lifted() {
            continue;
        }
        out.lifted.count(t.llm_tier, needed);
        let alarms = match routing.basis {
            RoutingBasis::Evidence(e) => e.outage_alarms,
            RoutingBasis::Uncertainty => {
                out.lifted_on_uncertainty += 1;
                false
            }
            RoutingBasis::ServiceNow => false,
        };
        if t.llm_tier == Some(Tier::Premium) && !alarms && routing.servicenow > Severity::P2 {
            out.lifted_on_premium_without_outage_alarms += 1;
        }
    }
    any.then_some(out)
}

/// The routing table's rows: tickets by ServiceNow priority, then the lifted ones.
fn routing_rows(r: &RoutingOutcomes) -> Vec<(String, TierOutcomes)> {
    let mut rows: Vec<(String, TierOutcomes)> = r
        .by_servicenow_priority
        .iter()
        .map(|(s, o)| (format!("ServiceNow {s}"), *o))
        .collect();
    rows.push(("lifted above ServiceNow's priority".to_owned(), r.lifted));
    rows
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
    pub reading: stormgate_shared::metering::MeterReading,
    /// For a replayed export: what reading it did. `minutes` is then the replay's
    /// virtual time, not the scenario's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryReport>,
    /// The governor's headroom the stormgate policy ran with, when not the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<f64>,
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
                history: None,
                headroom: None,
            },
            wall_seconds,
            policies: runs.iter().map(|r| policy_report(r, &prices)).collect(),
        }
    }

    pub fn policy(&self, name: &str) -> Option<&PolicyReport> {
        self.policies.iter().find(|p| p.name == name)
    }

    /// The report of a replayed export: its reading, and its own length of virtual time.
    pub fn with_history(mut self, history: HistoryReport) -> Report {
        self.scenario.minutes = history.replay_minutes.ceil() as u64;
        self.scenario.history = Some(history);
        self
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
    let mut tickets_by_severity: BTreeMap<Severity, u64> = BTreeMap::new();
    let mut with_llm: BTreeMap<Severity, u64> = BTreeMap::new();
    let mut without_llm: BTreeMap<Severity, u64> = BTreeMap::new();
    let mut cancelled_jobs = 0u64;
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
        *tickets_by_severity.entry(severity).or_default() += 1;
        cancelled_jobs += u64::from(t.cancelled_jobs);
        if t.llm_summary.is_some() {
            *with_llm.entry(severity).or_default() += 1;
        } else if t.technician_jobs > t.cancelled_jobs {
            *without_llm.entry(severity).or_default() += 1;
        }
        // Jobs that left the queue waited until they left; a job still queued at the
        // end waited until then; a cancelled job waited for nothing.
        let settled_wait = t.settled.map(|_| t.max_wait_ms as f64 / 1000.0);
        let queued_wait_now = t
            .still_queued
            .map(|(since, s)| (seconds(since, run.finished), s));
        let waited = settled_wait
            .unwrap_or(0.0)
            .max(queued_wait_now.map(|(w, _)| w).unwrap_or(0.0));
        let w = wait.entry(severity).or_default();
        *w = w.max(waited);
        let routed = match (queued_wait_now, t.queued_severity) {
            (Some((w, s)), _) if w >= settled_wait.unwrap_or(0.0) => Some(s),
            (_, Some(s)) => Some(s),
            (Some((_, s)), None) => Some(s),
            (None, None) => None,
        };
        if let Some(queued) = routed {
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
    let named = |m: &BTreeMap<Severity, u64>| {
        m.iter()
            .map(|(s, n)| (s.as_str().to_owned(), *n))
            .collect::<BTreeMap<_, _>>()
    };
    let llm_share = tickets_by_severity
        .iter()
        .map(|(s, n)| {
            let with = with_llm.get(s).copied().unwrap_or(0);
            (s.as_str().to_owned(), with as f64 / (*n).max(1) as f64)
        })
        .collect();
    let mut report = PolicyReport {
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
            .map(|&s| {
                let bound = DeadlinePolicy::default().wait(s, SummaryKind::Technician);
                (s.as_str().to_owned(), bound.as_secs_f64())
            })
            .collect(),
        peak_utilization: peak,
        series: Series {
            http_429,
            tokens_per_minute,
            queue_depth,
            llm_latency_p95,
        },
        tickets_by_severity: named(&tickets_by_severity),
        without_llm_summary: named(&without_llm),
        llm_share,
        cancelled_jobs,
        ingest: run.ingest.clone(),
        routing: routing_outcomes(run),
        verdict: Verdict::default(),
    };
    report.verdict = verdict(&report, &Slo::default());
    report
}

/// Rows of figures, one value per policy: the terminal table and the HTML tables.
type Rows = Vec<(String, Vec<String>)>;

/// `1068730` as `1,068,730`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Judges one policy's figures against the service levels.
pub fn verdict(p: &PolicyReport, slo: &Slo) -> Verdict {
    let mut checks = vec![Check {
        name: "tickets without a summary".into(),
        measured: thousands(p.summaries.none),
        bound: "0".into(),
        met: p.summaries.none == 0,
    }];
    for (severity, bound) in [
        (Severity::P1, slo.p1_seconds),
        (Severity::P2, slo.p2_seconds),
    ] {
        let tickets = p.tickets_by_severity.get(severity.as_str()).copied();
        let p95 = p.llm_summary_seconds.get(severity.as_str()).map(|x| x.p95);
        let (measured, met) = match (p95, tickets) {
            (Some(v), _) => (format!("{} s", thousands(v.round() as u64)), v <= bound),
            // No ticket of this severity: nothing to be late.
            (None, Some(0) | None) => ("no tickets".to_owned(), true),
            (None, Some(_)) => ("none summarized".to_owned(), false),
        };
        checks.push(Check {
            name: format!("{severity} LLM summary p95"),
            measured,
            bound: format!("≤ {bound:.0} s"),
            met,
        });
    }
    let missing: u64 = Severity::ALL
        .iter()
        .filter(|s| **s <= slo.llm_up_to)
        .filter_map(|s| p.without_llm_summary.get(s.as_str()))
        .sum();
    checks.push(Check {
        name: format!("P1–{} tickets without an LLM summary", slo.llm_up_to),
        measured: thousands(missing),
        bound: "0".into(),
        met: missing == 0,
    });
    checks.push(Check {
        name: "HTTP 429s".into(),
        measured: thousands(p.http_429),
        bound: "0".into(),
        met: p.http_429 == 0,
    });
    Verdict {
        met: checks.iter().all(|c| c.met),
        checks,
    }
}

/// The headline figures.
fn summary_rows(report: &Report) -> Rows {
    let mut rows: Rows = Vec::new();
    let mut row = |label: String, f: &dyn Fn(&PolicyReport) -> String| {
        rows.push((label, report.policies.iter().map(f).collect()));
    };
    row("tickets".into(), &|p| thousands(p.tickets));
    row("LLM calls".into(), &|p| thousands(p.llm_calls));
    row("HTTP 429s".into(), &|p| thousands(p.http_429));
    for d in report.scenario.tpm.keys() {
        row(format!("tokens billed, {d}"), &|p| {
            thousands(p.tokens_by_deployment.get(d).copied().unwrap_or(0))
        });
        row(format!("peak use of {d}'s TPM"), &|p| {
            format!(
                "{:.0} %",
                100.0 * p.peak_utilization.get(d).copied().unwrap_or(0.0)
            )
        });
    }
    row("cost (USD)".into(), &|p| format!("{:.2}", p.cost_usd));
    row("summaries premium".into(), &|p| {
        thousands(p.summaries.premium)
    });
    row("summaries standard".into(), &|p| {
        thousands(p.summaries.standard)
    });
    row("summaries extractive only".into(), &|p| {
        thousands(p.summaries.extractive)
    });
    row("tickets without a summary".into(), &|p| {
        thousands(p.summaries.none)
    });
    row(
        "technician jobs cancelled (resolved or replaced)".into(),
        &|p| thousands(p.cancelled_jobs),
    );
    rows
}

/// The figures by severity: `label` then one value per policy.
fn severity_rows(report: &Report, sev: Severity) -> Rows {
    let k = sev.as_str();
    let mut rows: Rows = Vec::new();
    let mut row = |label: &str, f: &dyn Fn(&PolicyReport) -> String| {
        rows.push((label.to_owned(), report.policies.iter().map(f).collect()));
    };
    let dash = || "–".to_owned();
    row("tickets", &|p| {
        thousands(p.tickets_by_severity.get(k).copied().unwrap_or(0))
    });
    row("first summary p50 / p95 (s)", &|p| {
        p.first_summary_seconds
            .get(k)
            .map(|x| format!("{:.0} / {:.0}", x.p50, x.p95))
            .unwrap_or_else(dash)
    });
    row("LLM summary p50 / p95 (s)", &|p| {
        p.llm_summary_seconds
            .get(k)
            .map(|x| format!("{:.0} / {:.0}", x.p50, x.p95))
            .unwrap_or_else(dash)
    });
    row("LLM-summarized", &|p| {
        p.llm_share
            .get(k)
            .map(|x| format!("{:.1} %", 100.0 * x))
            .unwrap_or_else(dash)
    });
    row("without an LLM summary", &|p| {
        thousands(p.without_llm_summary.get(k).copied().unwrap_or(0))
    });
    row("max wait in queue (s)", &|p| {
        p.max_wait_seconds
            .get(k)
            .map(|x| format!("{x:.0}"))
            .unwrap_or_else(dash)
    });
    row("max wait as queued / bound (s)", &|p| match (
        p.max_wait_by_queued_severity_seconds.get(k),
        p.wait_bound_seconds.get(k),
    ) {
        (Some(w), Some(b)) => format!("{w:.0} / {b:.0}"),
        _ => dash(),
    });
    rows
}

/// What was replayed, in one line.
fn header(report: &Report) -> String {
    let s = &report.scenario;
    let quotas = s
        .tpm
        .iter()
        .map(|(d, t)| {
            format!(
                "{d} ({}) {} TPM",
                s.models.get(d).cloned().unwrap_or_default(),
                thousands(*t)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let headroom = s
        .headroom
        .map(|h| format!(", governor headroom {:.0} %", h * 100.0))
        .unwrap_or_default();
    match &s.history {
        Some(h) => format!(
            "history {} ({} events of {} tickets recorded {} to {}, replayed at {}x: {:.0} min of virtual time; seed {}); quotas from scenario {}: {quotas}{headroom}",
            h.file,
            thousands(h.events),
            thousands(h.tickets),
            h.recorded_from,
            h.recorded_to,
            h.time_scale,
            h.replay_minutes,
            s.seed,
            s.name
        ),
        None => format!(
            "scenario {} (seed {}, {} min of virtual time); quotas: {quotas}{headroom}",
            s.name, s.seed, s.minutes
        ),
    }
}

/// The terminal table: the verdicts first, then the figures.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    for p in &report.policies {
        let _ = writeln!(out, "{}", p.verdict.line(&p.name));
    }
    let _ = writeln!(out, "{}", header(report));
    let _ = write!(out, "{:<48}", "");
    for p in &report.policies {
        let _ = write!(out, "{:>18}", p.name);
    }
    out.push('\n');
    let mut print = |rows: Rows, prefix: &str| {
        for (label, values) in rows {
            let _ = write!(out, "{:<48}", format!("{prefix}{label}"));
            for v in values {
                let _ = write!(out, "{v:>18}");
            }
            out.push('\n');
        }
    };
    print(summary_rows(report), "");
    for sev in Severity::ALL {
        print(severity_rows(report, sev), &format!("{sev} "));
    }
    for p in &report.policies {
        if let Some(i) = &p.ingest {
            let _ = writeln!(
                out,
                "{} ingest: {} accepted, {} duplicate or stale, {} rejected{}",
                p.name,
                thousands(i.accepted),
                thousands(i.duplicate_or_stale),
                thousands(i.rejected),
                i.rejected_by_reason
                    .iter()
                    .map(|(r, n)| format!("\n  {n} × {r}"))
                    .collect::<String>()
            );
        }
        if let Some(r) = &p.routing {
            let _ = writeln!(
                out,
                "{} technician summary, premium / standard / extractive only:",
                p.name
            );
            for (label, o) in routing_rows(r) {
                let _ = writeln!(
                    out,
                    "  {label:<44}{:>10} /{:>8} /{:>8}",
                    thousands(o.premium),
                    thousands(o.standard),
                    thousands(o.extractive)
                );
            }
            let _ = writeln!(
                out,
                "  lifted on uncertainty alone: {}; lifted to premium without outage alarms: {}",
                thousands(r.lifted_on_uncertainty),
                thousands(r.lifted_on_premium_without_outage_alarms)
            );
        }
    }
    let _ = writeln!(out, "wall time {:.1} s", report.wall_seconds);
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An HTML table: a header row, then label + values.
fn html_table(caption: &str, head: &[String], rows: &Rows) -> String {
    let mut t = format!("<table><caption>{}</caption><thead><tr>", escape(caption));
    for h in head {
        let _ = write!(t, "<th scope=\"col\">{}</th>", escape(h));
    }
    t.push_str("</tr></thead><tbody>");
    for (label, values) in rows {
        let _ = write!(t, "<tr><th scope=\"row\">{}</th>", escape(label));
        for v in values {
            let _ = write!(t, "<td>{}</td>", escape(v));
        }
        t.push_str("</tr>");
    }
    t.push_str("</tbody></table>");
    t
}

const COLORS: [RGBColor; 6] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// A tick label: thousands grouped, one decimal below 10.
fn tick(v: f64) -> String {
    if v.abs() >= 10.0 || v.fract() == 0.0 {
        let r = v.round();
        if r < 0.0 {
            format!("-{}", thousands((-r) as u64))
        } else {
            thousands(r as u64)
        }
    } else {
        format!("{v:.1}")
    }
}

/// One series of a chart: a value per minute, gaps where there is none.
#[derive(Debug, Clone)]
struct ChartLine {
    label: String,
    points: Vec<Option<f64>>,
}

/// A line chart against minutes, with dashed horizontal reference lines (a quota, a
/// deadline), drawn by `plotters` into inline SVG.
#[derive(Debug, Clone)]
struct Chart {
    title: String,
    x_label: String,
    y_label: String,
    lines: Vec<ChartLine>,
    references: Vec<(String, f64)>,
    size: (u32, u32),
}

impl Chart {
    fn svg(&self) -> String {
        let mut svg = String::new();
        // A drawing error leaves the chart out, said in its place rather than panicking.
        if let Err(e) = self.draw(&mut svg) {
            return format!("<p>chart not drawn: {}</p>", escape(&e));
        }
        svg
    }

    fn draw(&self, out: &mut String) -> Result<(), String> {
        let n = self.lines.iter().map(|l| l.points.len()).max().unwrap_or(0);
        let x_max = (n.max(2) - 1) as f64;
        let data_max = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().flatten().copied())
            .chain(self.references.iter().map(|r| r.1))
            .fold(0.0f64, f64::max);
        let y_max = if data_max > 0.0 { data_max * 1.08 } else { 1.0 };
        let root = SVGBackend::with_string(out, self.size).into_drawing_area();
        let err = |e: &dyn std::fmt::Display| e.to_string();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let small = self.size.0 < 500;
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", if small { 14 } else { 17 }))
            .margin(8)
            .x_label_area_size(38)
            .y_label_area_size(if small { 58 } else { 72 })
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(|e| err(&e))?;
        let x_fmt = |v: &f64| tick(*v);
        let y_fmt = |v: &f64| tick(*v);
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_labels(if small { 5 } else { 10 })
            .y_labels(6)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .axis_desc_style(("sans-serif", 13))
            .label_style(("sans-serif", 11))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .draw()
            .map_err(|e| err(&e))?;
        for (i, line) in self.lines.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let mut first = true;
            let mut segment: Vec<(f64, f64)> = Vec::new();
            let mut segments = Vec::new();
            for (x, p) in line.points.iter().enumerate() {
                match p {
                    Some(v) => segment.push((x as f64, *v)),
                    None if !segment.is_empty() => segments.push(std::mem::take(&mut segment)),
                    None => {}
                }
            }
            if !segment.is_empty() {
                segments.push(segment);
            }
            for seg in segments {
                let series = if seg.len() == 1 {
                    // A lone point would draw nothing as a line.
                    let (x, y) = seg[0];
                    chart.draw_series(LineSeries::new(
                        vec![(x - 0.3, y), (x + 0.3, y)],
                        color.stroke_width(2),
                    ))
                } else {
                    chart.draw_series(LineSeries::new(seg, color.stroke_width(2)))
                }
                .map_err(|e| err(&e))?;
                if first {
                    series.label(line.label.clone()).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
                    first = false;
                }
            }
        }
        for (i, (label, y)) in self.references.iter().enumerate() {
            let color = if i == 0 {
                RGBColor(0x44, 0x44, 0x44)
            } else {
                RGBColor(0x99, 0x99, 0x99)
            };
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(0.0, *y), (x_max, *y)],
                    6,
                    4,
                    color.stroke_width(2),
                ))
                .map_err(|e| err(&e))?
                .label(label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
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

    /// The chart as a figure that names its axes (what the report test reads back).
    fn figure(&self, class: &str) -> String {
        format!(
            "<figure class=\"chart {class}\" data-x-label=\"{}\" data-y-label=\"{}\">{}</figure>",
            escape(&self.x_label),
            escape(&self.y_label),
            self.svg()
        )
    }
}

const MINUTES: &str = "minutes since the start (virtual time)";

/// The self-contained HTML report.
pub fn html(report: &Report) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>stormgate storm lab: {}</h1><section class=\"verdicts\">",
        escape(
            &report
                .scenario
                .history
                .as_ref()
                .map(|h| h.file.clone())
                .unwrap_or_else(|| report.scenario.name.clone())
        )
    );
    for p in &report.policies {
        let _ = write!(
            body,
            "<p class=\"verdict {}\">{}</p>",
            if p.verdict.met { "met" } else { "missed" },
            escape(&p.verdict.line(&p.name))
        );
    }
    let _ = write!(
        body,
        "</section><p class=\"header\">{}; replayed in {:.1} s of wall time.</p>",
        escape(&header(report)),
        report.wall_seconds
    );
    let mut head = vec![String::new()];
    head.extend(report.policies.iter().map(|p| p.name.clone()));
    body.push_str(&html_table("Figures", &head, &summary_rows(report)));
    // The SLO checks, one row per level.
    let checks: Rows = report
        .policies
        .first()
        .map(|first| {
            first
                .verdict
                .checks
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    (
                        format!("{} (needs {})", c.name, c.bound),
                        report
                            .policies
                            .iter()
                            .map(|p| {
                                p.verdict
                                    .checks
                                    .get(i)
                                    .map(|c| {
                                        format!("{} {}", if c.met { "✔" } else { "✘" }, c.measured)
                                    })
                                    .unwrap_or_default()
                            })
                            .collect(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    body.push_str(&html_table("SLO checks", &head, &checks));
    let mut sev_head = vec!["severity".to_owned(), String::new()];
    sev_head.extend(report.policies.iter().map(|p| p.name.clone()));
    let mut sev_rows: Rows = Vec::new();
    for sev in Severity::ALL {
        for (label, values) in severity_rows(report, sev) {
            sev_rows.push((format!("{sev} {label}"), values));
        }
    }
    body.push_str(&html_table(
        "By severity (ServiceNow's priority)",
        &head,
        &sev_rows,
    ));
    for p in &report.policies {
        if let Some(i) = &p.ingest {
            let mut rows: Rows = vec![
                ("accepted".into(), vec![thousands(i.accepted)]),
                (
                    "duplicate or stale".into(),
                    vec![thousands(i.duplicate_or_stale)],
                ),
                (
                    "rejected (dead-lettered)".into(),
                    vec![thousands(i.rejected)],
                ),
            ];
            rows.extend(
                i.rejected_by_reason
                    .iter()
                    .map(|(r, n)| (format!("rejected: {r}"), vec![thousands(*n)])),
            );
            body.push_str(&html_table(
                &format!("{}: ingest of the events", p.name),
                &[String::new(), "events".into()],
                &rows,
            ));
        }
        if let Some(r) = &p.routing {
            let rows: Rows = routing_rows(r)
                .into_iter()
                .map(|(label, o)| {
                    (
                        label,
                        vec![
                            thousands(o.premium),
                            thousands(o.standard),
                            thousands(o.extractive),
                        ],
                    )
                })
                .collect();
            body.push_str(&html_table(
                &format!(
                    "{}: where technician summaries came from (lifted on uncertainty alone: {}; lifted to premium without outage alarms: {})",
                    p.name,
                    thousands(r.lifted_on_uncertainty),
                    thousands(r.lifted_on_premium_without_outage_alarms)
                ),
                &[
                    String::new(),
                    "premium".into(),
                    "standard".into(),
                    "extractive only".into(),
                ],
                &rows,
            ));
        }
    }
    if let Some(h) = &report.scenario.history {
        let mut rows: Rows = vec![
            ("rows read".into(), vec![thousands(h.rows)]),
            ("events".into(), vec![thousands(h.events)]),
        ];
        for (title, map) in [("skipped", &h.skipped), ("field dropped", &h.dropped)] {
            rows.extend(map.iter().map(|(r, s)| {
                (
                    format!("{title}: {r} ({})", s.examples.join("; ")),
                    vec![thousands(s.rows)],
                )
            }));
        }
        rows.extend(h.notes.iter().map(|n| ("note".to_owned(), vec![n.clone()])));
        body.push_str(&html_table(
            &format!("History {}", h.file),
            &[String::new(), "rows".into()],
            &rows,
        ));
    }

    let as_f = |v: &[u64]| v.iter().map(|x| Some(*x as f64)).collect::<Vec<_>>();
    let policies = &report.policies;
    body.push_str("<h2>Charts</h2>");
    body.push_str(
        &Chart {
            title: "HTTP 429s per minute".into(),
            x_label: MINUTES.into(),
            y_label: "HTTP 429s per minute".into(),
            lines: policies
                .iter()
                .map(|p| ChartLine {
                    label: p.name.clone(),
                    points: as_f(&p.series.http_429),
                })
                .collect(),
            references: Vec::new(),
            size: (940, 300),
        }
        .figure("wide"),
    );
    for (d, tpm) in &report.scenario.tpm {
        let mut references = vec![(format!("quota {} TPM", thousands(*tpm)), *tpm as f64)];
        if let Some(h) = report.scenario.headroom.or(Some(
            stormgate_shared::governor::GovernorPolicy::default()
                .headroom
                .fraction(),
        )) && h > 0.0
        {
            references.push((
                format!("governor's ceiling ({:.0} % headroom)", h * 100.0),
                (*tpm as f64 * (1.0 - h)).floor(),
            ));
        }
        body.push_str(
            &Chart {
                title: format!("Tokens per minute vs quota: {d}"),
                x_label: MINUTES.into(),
                y_label: "tokens in the sliding minute".into(),
                lines: policies
                    .iter()
                    .map(|p| ChartLine {
                        label: p.name.clone(),
                        points: as_f(
                            p.series
                                .tokens_per_minute
                                .get(d)
                                .map(Vec::as_slice)
                                .unwrap_or(&[]),
                        ),
                    })
                    .collect(),
                references,
                size: (940, 300),
            }
            .figure("wide"),
        );
    }
    body.push_str(
        &Chart {
            title: "Queue depth (jobs waiting or in flight)".into(),
            x_label: MINUTES.into(),
            y_label: "jobs".into(),
            lines: policies
                .iter()
                .map(|p| ChartLine {
                    label: p.name.clone(),
                    points: as_f(&p.series.queue_depth),
                })
                .collect(),
            references: Vec::new(),
            size: (940, 300),
        }
        .figure("wide"),
    );
    body.push_str(
        "<h3>Time to LLM summary, p95 of the tickets arriving in each minute, by severity</h3><div class=\"multiples\">",
    );
    let deadlines = DeadlinePolicy::default();
    for sev in Severity::ALL {
        let k = sev.as_str();
        let wait = deadlines.wait(sev, SummaryKind::Technician);
        let references = vec![(
            format!("deadline {} s", thousands(wait.as_secs())),
            wait.as_secs_f64(),
        )];
        body.push_str(
            &Chart {
                title: format!("{k}: time to LLM summary, p95"),
                x_label: "arrival minute".into(),
                y_label: "seconds".into(),
                lines: policies
                    .iter()
                    .map(|p| ChartLine {
                        label: p.name.clone(),
                        points: p.series.llm_latency_p95.get(k).cloned().unwrap_or_default(),
                    })
                    .collect(),
                references,
                size: (460, 260),
            }
            .figure("small"),
        );
    }
    body.push_str("</div>");
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>stormgate storm lab</title>\
         <style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:980px;color:#222}}\
         .verdict{{font-size:1.15em;font-weight:600;padding:.4em .6em;border-radius:4px}}\
         .verdict.met{{background:#e6f4ea;color:#1e5e2f}}.verdict.missed{{background:#fce8e6;color:#8a1c12}}\
         table{{border-collapse:collapse;margin:1em 0;font-size:.92em}}caption{{text-align:left;font-weight:600;padding:.3em 0}}\
         th,td{{border:1px solid #ddd;padding:.25em .6em}}td{{text-align:right;font-variant-numeric:tabular-nums}}\
         th[scope=row]{{text-align:left;font-weight:normal}}thead th{{background:#f4f4f4}}\
         figure{{margin:1em 0}}figure svg{{border:1px solid #ddd}}.multiples{{display:grid;grid-template-columns:repeat(2,470px);gap:8px}}\
         .multiples figure{{margin:0}}</style>\
         </head><body>{body}</body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_068_730), "1,068,730");
    }

    #[test]
    fn percentiles_pick_ranks() {
        let p = Percentiles::of((1..=100).map(f64::from).collect()).unwrap();
        assert_eq!(p.max, 100.0);
        assert!((p.p50 - 50.0).abs() <= 1.0);
        assert!((p.p95 - 95.0).abs() <= 1.0);
        assert!(Percentiles::of(Vec::new()).is_none());
    }

    #[test]
    fn a_chart_is_inline_svg_with_its_axis_labels_and_reference_line() {
        let chart = Chart {
            title: "t".into(),
            x_label: "minutes since start".into(),
            y_label: "HTTP 429s per minute".into(),
            lines: vec![ChartLine {
                label: "a".into(),
                points: vec![Some(1.0), None, Some(3.0), Some(2.0)],
            }],
            references: vec![("quota 5".into(), 5.0)],
            size: (600, 260),
        };
        let svg = chart.svg();
        assert!(svg.contains("<svg") && svg.contains("<polyline"), "{svg}");
        assert!(svg.contains("minutes since start"));
        assert!(svg.contains("HTTP 429s per minute"));
        assert!(svg.contains("quota 5"));
        assert!(!svg.contains("http://") || svg.contains("http://www.w3.org/2000/svg"));
    }

    #[test]
    fn big_numbers_are_grouped_and_small_ones_keep_a_decimal() {
        assert_eq!(tick(120_000.0), "120,000");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(30.0), "30");
    }
}
