//! Evaluation of a model on held-out examples: per-class precision/recall, confusion matrix,
//! calibration, and what route-up does to P1/P2 recall; rendered as Markdown for the report.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::example::TrainingExample;
use super::model::{CLASSES, Model};
use super::{argmax, route_up};
use crate::severity::Severity;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassMetrics {
    pub severity: Severity,
    pub support: usize,
    pub predicted: usize,
    pub precision: f64,
    pub recall: f64,
}

/// One reliability bin: predictions whose confidence fell in `[lower, upper)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationBin {
    pub lower: f64,
    pub upper: f64,
    pub count: usize,
    pub mean_confidence: f64,
    pub accuracy: f64,
}

/// Route-up at one threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteUpMetrics {
    pub threshold: f32,
    /// True P1 routed as P1.
    pub p1_recall: f64,
    /// True P1/P2 routed as P1 or P2 (the premium tier by default).
    pub p1_p2_recall: f64,
    /// Share of all tickets routed as P1 or P2 (what the premium tier must absorb).
    pub routed_p1_p2_share: f64,
    /// Share of tickets routed more severe than their true class.
    pub over_routed_share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceMetrics {
    pub source: String,
    pub examples: usize,
    pub accuracy: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluationReport {
    pub examples: usize,
    pub accuracy: f64,
    pub per_class: Vec<ClassMetrics>,
    /// `confusion[true][predicted]`, P1 first.
    pub confusion: [[usize; CLASSES]; CLASSES],
    pub calibration: Vec<CalibrationBin>,
    pub expected_calibration_error: f64,
    /// Recall of P1/P2 with the argmax alone (no route-up).
    pub argmax_p1_p2_recall: f64,
    pub route_up: RouteUpMetrics,
    /// Route-up at other thresholds, for choosing one.
    pub route_up_sweep: Vec<RouteUpMetrics>,
    /// Accuracy of "the final priority equals the priority on the first event", where known.
    pub baseline_opened_priority_accuracy: Option<f64>,
    pub by_source: Vec<SourceMetrics>,
}

struct Scored<'a> {
    example: &'a TrainingExample,
    probabilities: [f32; CLASSES],
    predicted: Severity,
}

pub fn evaluate(model: &Model, examples: &[&TrainingExample], threshold: f32) -> EvaluationReport {
    let scored: Vec<Scored<'_>> = examples
        .iter()
        .map(|e| {
            let probabilities = model.probabilities(&e.features());
            Scored {
                example: e,
                probabilities,
                predicted: argmax(&probabilities),
            }
        })
        .collect();
    let mut confusion = [[0usize; CLASSES]; CLASSES];
    for s in &scored {
        confusion[s.example.label.index()][s.predicted.index()] += 1;
    }
    let correct: usize = (0..CLASSES).map(|c| confusion[c][c]).sum();
    let (calibration, ece) = calibration(&scored);
    let with_baseline: Vec<_> = scored
        .iter()
        .filter_map(|s| s.example.opened_priority.map(|p| p == s.example.label))
        .collect();
    EvaluationReport {
        examples: scored.len(),
        accuracy: ratio(correct, scored.len()),
        per_class: per_class(&confusion),
        confusion,
        calibration,
        expected_calibration_error: ece,
        argmax_p1_p2_recall: recall_within(&scored, |s| s.predicted),
        route_up: route_up_metrics(&scored, threshold),
        route_up_sweep: [0.1, 0.2, 0.3, 0.4, 0.5]
            .iter()
            .map(|&t| route_up_metrics(&scored, t))
            .collect(),
        baseline_opened_priority_accuracy: (!with_baseline.is_empty()).then(|| {
            ratio(
                with_baseline.iter().filter(|&&ok| ok).count(),
                with_baseline.len(),
            )
        }),
        by_source: by_source(&scored),
    }
}

fn ratio(num: usize, den: usize) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

fn per_class(confusion: &[[usize; CLASSES]; CLASSES]) -> Vec<ClassMetrics> {
    Severity::ALL
        .iter()
        .map(|&sev| {
            let c = sev.index();
            let support: usize = confusion[c].iter().sum();
            let predicted: usize = (0..CLASSES).map(|t| confusion[t][c]).sum();
            ClassMetrics {
                severity: sev,
                support,
                predicted,
                precision: ratio(confusion[c][c], predicted),
                recall: ratio(confusion[c][c], support),
            }
        })
        .collect()
}

fn calibration(scored: &[Scored<'_>]) -> (Vec<CalibrationBin>, f64) {
    const BINS: usize = 10;
    let mut sums = [(0usize, 0f64, 0usize); BINS];
    for s in scored {
        let conf = f64::from(s.probabilities[s.predicted.index()]);
        let bin = ((conf * BINS as f64) as usize).min(BINS - 1);
        sums[bin].0 += 1;
        sums[bin].1 += conf;
        sums[bin].2 += usize::from(s.predicted == s.example.label);
    }
    let mut ece = 0.0;
    let bins = sums
        .iter()
        .enumerate()
        .filter(|(_, (n, _, _))| *n > 0)
        .map(|(i, &(n, conf, ok))| {
            let bin = CalibrationBin {
                lower: i as f64 / BINS as f64,
                upper: (i + 1) as f64 / BINS as f64,
                count: n,
                mean_confidence: conf / n as f64,
                accuracy: ratio(ok, n),
            };
            ece += (bin.mean_confidence - bin.accuracy).abs() * ratio(n, scored.len());
            bin
        })
        .collect();
    (bins, ece)
}

fn recall_within(scored: &[Scored<'_>], routed: impl Fn(&Scored<'_>) -> Severity) -> f64 {
    let severe: Vec<_> = scored
        .iter()
        .filter(|s| s.example.label <= Severity::P2)
        .collect();
    ratio(
        severe.iter().filter(|s| routed(s) <= Severity::P2).count(),
        severe.len(),
    )
}

fn route_up_metrics(scored: &[Scored<'_>], threshold: f32) -> RouteUpMetrics {
    let routed = |s: &Scored<'_>| route_up(&s.probabilities, threshold);
    let p1: Vec<_> = scored
        .iter()
        .filter(|s| s.example.label == Severity::P1)
        .collect();
    RouteUpMetrics {
        threshold,
        p1_recall: ratio(
            p1.iter().filter(|s| routed(s) == Severity::P1).count(),
            p1.len(),
        ),
        p1_p2_recall: recall_within(scored, routed),
        routed_p1_p2_share: ratio(
            scored.iter().filter(|s| routed(s) <= Severity::P2).count(),
            scored.len(),
        ),
        over_routed_share: ratio(
            scored
                .iter()
                .filter(|s| routed(s) < s.example.label)
                .count(),
            scored.len(),
        ),
    }
}

fn by_source(scored: &[Scored<'_>]) -> Vec<SourceMetrics> {
    let mut sources: Vec<&str> = scored.iter().map(|s| s.example.source.as_str()).collect();
    sources.sort_unstable();
    sources.dedup();
    sources
        .into_iter()
        .map(|src| {
            let of: Vec<_> = scored.iter().filter(|s| s.example.source == src).collect();
            SourceMetrics {
                source: src.to_owned(),
                examples: of.len(),
                accuracy: ratio(
                    of.iter().filter(|s| s.predicted == s.example.label).count(),
                    of.len(),
                ),
            }
        })
        .collect()
}

impl EvaluationReport {
    /// The evaluation as Markdown sections (the caller adds the data description).
    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(
            md,
            "Held-out examples: {}; accuracy (argmax): {:.3}.\n",
            self.examples, self.accuracy
        );
        if let Some(b) = self.baseline_opened_priority_accuracy {
            let _ = writeln!(
                md,
                "Baseline \"final priority = priority at opening\" on the held-out incidents whose opening priority is known (the history file's, not the synthetic ones): {b:.3}.\n"
            );
        }
        md.push_str("### Per class\n\n| class | support | predicted | precision | recall |\n|---|---:|---:|---:|---:|\n");
        for c in &self.per_class {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.3} | {:.3} |",
                c.severity, c.support, c.predicted, c.precision, c.recall
            );
        }
        md.push_str("\n### Confusion matrix (rows: true, columns: predicted)\n\n| | P1 | P2 | P3 | P4 | P5 |\n|---|---:|---:|---:|---:|---:|\n");
        for (t, row) in self.confusion.iter().enumerate() {
            let cells: Vec<String> = row.iter().map(usize::to_string).collect();
            let _ = writeln!(md, "| **P{}** | {} |", t + 1, cells.join(" | "));
        }
        let _ = writeln!(
            md,
            "\n### Calibration (confidence of the predicted class)\n\nExpected calibration error: {:.3}.\n\n| confidence | n | mean confidence | accuracy |\n|---|---:|---:|---:|",
            self.expected_calibration_error
        );
        for b in &self.calibration {
            let _ = writeln!(
                md,
                "| {:.1}–{:.1} | {} | {:.3} | {:.3} |",
                b.lower, b.upper, b.count, b.mean_confidence, b.accuracy
            );
        }
        let _ = writeln!(
            md,
            "\n### Route-up\n\nP1/P2 recall (routed P1 or P2) with the argmax alone: {:.3}; with route-up at threshold {}: {:.3} (P1 routed as P1: {:.3}).\n",
            self.argmax_p1_p2_recall,
            self.route_up.threshold,
            self.route_up.p1_p2_recall,
            self.route_up.p1_recall
        );
        md.push_str("| threshold | P1 recall | P1/P2 recall | routed P1/P2 share | over-routed share |\n|---:|---:|---:|---:|---:|\n");
        for r in &self.route_up_sweep {
            let _ = writeln!(
                md,
                "| {} | {:.3} | {:.3} | {:.3} | {:.3} |",
                r.threshold, r.p1_recall, r.p1_p2_recall, r.routed_p1_p2_share, r.over_routed_share
            );
        }
        md.push_str("\n### By source\n\n| source | examples | accuracy |\n|---|---:|---:|\n");
        for s in &self.by_source {
            let _ = writeln!(md, "| {} | {} | {:.3} |", s.source, s.examples, s.accuracy);
        }
        md
    }
}
