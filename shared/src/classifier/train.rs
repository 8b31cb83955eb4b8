//! Training: labelled history (UCI-format CSV or JSONL) to a [`Model`], with a held-out evaluation.
//!
//! Label leakage is avoided by construction: for each incident the *features* come from its
//! first event (what `classify` sees when the ticket arrives) and the *label* is the priority
//! of its last event (what the ticket turned out to be). The priority column itself, its
//! close-time inputs and `u_priority_confirmation` are never features. The first event's
//! priority is kept only as a baseline to compare against in the report.

use std::collections::HashMap;
use std::io::{BufRead, Read};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use super::evaluate::{EvaluationReport, evaluate};
use super::example::TrainingExample;
use super::features::SparseFeatures;
use super::model::{CLASSES, Model, softmax};
use crate::severity::Severity;

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("CSV: {0}")]
    Csv(#[from] csv::Error),
    #[error("CSV is missing required column `{0}`")]
    MissingColumn(&'static str),
    #[error("JSONL line {line}: {error}")]
    Jsonl {
        line: usize,
        error: serde_json::Error,
    },
    #[error("reading input: {0}")]
    Io(#[from] std::io::Error),
    #[error("no labelled examples to train on")]
    Empty,
}

/// Reads a CSV in the UCI "Incident management process enriched event log" format
/// (one row per event; several rows per incident) and returns one example per incident.
pub fn load_uci_csv(input: impl Read) -> Result<Vec<TrainingExample>, TrainError> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(input);
    let headers = reader.headers()?.clone();
    let col = |name: &'static str| headers.iter().position(|h| h.trim() == name);
    let number = col("number").ok_or(TrainError::MissingColumn("number"))?;
    let priority = col("priority").ok_or(TrainError::MissingColumn("priority"))?;
    let mod_count = col("sys_mod_count");
    let feature_cols = UciColumns {
        impact: col("impact"),
        urgency: col("urgency"),
        category: col("category"),
        subcategory: col("subcategory"),
        symptom: col("u_symptom"),
        contact_type: col("contact_type"),
        location: col("location"),
        assignment_group: col("assignment_group"),
    };

    struct Incident {
        first_version: u64,
        first: TrainingExample,
        last_version: u64,
        last_priority: Option<Severity>,
    }
    let mut order: Vec<String> = Vec::new();
    let mut incidents: HashMap<String, Incident> = HashMap::new();
    for record in reader.records() {
        let record = record?;
        let Some(id) = record.get(number).map(str::trim).filter(|s| !s.is_empty()) else {
            continue;
        };
        let version = mod_count
            .and_then(|c| record.get(c))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let row_priority = record
            .get(priority)
            .and_then(|p| p.parse::<Severity>().ok());
        match incidents.get_mut(id) {
            Some(inc) => {
                if version < inc.first_version {
                    inc.first = feature_cols.example(id, &record, row_priority);
                    inc.first_version = version;
                }
                if version >= inc.last_version {
                    inc.last_version = version;
                    inc.last_priority = row_priority.or(inc.last_priority);
                }
            }
            None => {
                order.push(id.to_owned());
                let first = feature_cols.example(id, &record, row_priority);
                incidents.insert(
                    id.to_owned(),
                    Incident {
                        first_version: version,
                        first,
                        last_version: version,
                        last_priority: row_priority,
                    },
                );
            }
        }
    }
    Ok(order
        .into_iter()
        .filter_map(|id| incidents.remove(&id))
        .filter_map(|inc| {
            inc.last_priority
                .map(|label| TrainingExample { label, ..inc.first })
        })
        .collect())
}

struct UciColumns {
    impact: Option<usize>,
    urgency: Option<usize>,
    category: Option<usize>,
    subcategory: Option<usize>,
    symptom: Option<usize>,
    contact_type: Option<usize>,
    location: Option<usize>,
    assignment_group: Option<usize>,
}

impl UciColumns {
    fn example(
        &self,
        id: &str,
        record: &csv::StringRecord,
        opened_priority: Option<Severity>,
    ) -> TrainingExample {
        // UCI writes "?" for unknown values.
        let get = |c: Option<usize>| {
            c.and_then(|c| record.get(c))
                .map(str::trim)
                .filter(|v| !v.is_empty() && *v != "?")
                .map(str::to_owned)
        };
        TrainingExample {
            id: id.to_owned(),
            source: "uci".to_owned(),
            label: opened_priority.unwrap_or(Severity::P5),
            opened_priority,
            impact: get(self.impact),
            urgency: get(self.urgency),
            category: get(self.category),
            subcategory: get(self.subcategory),
            symptom: get(self.symptom),
            contact_type: get(self.contact_type),
            location: get(self.location),
            assignment_group: get(self.assignment_group),
            customers_affected: None,
            short_description: String::new(),
            description: String::new(),
            log: Vec::new(),
        }
    }
}

/// Reads JSONL: one [`TrainingExample`] per non-empty line.
pub fn load_jsonl(input: impl BufRead) -> Result<Vec<TrainingExample>, TrainError> {
    let mut out = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let mut example: TrainingExample = serde_json::from_str(&line)
            .map_err(|error| TrainError::Jsonl { line: i + 1, error })?;
        if example.source.is_empty() {
            example.source = "jsonl".to_owned();
        }
        out.push(example);
    }
    Ok(out)
}

/// Optimiser settings. Defaults are what the committed model was trained with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrainOptions {
    pub epochs: usize,
    /// Adagrad step size.
    pub learning_rate: f32,
    /// L2 penalty per touched weight per step.
    pub l2: f32,
    /// Class weight = (n / (classes × n_class))^power; 0 = unweighted, 1 = fully balanced.
    pub class_weight_power: f32,
    pub holdout_percent: u8,
    pub seed: u64,
    pub route_up_threshold: f32,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            epochs: 12,
            learning_rate: 0.2,
            l2: 1e-6,
            class_weight_power: 0.5,
            holdout_percent: 20,
            seed: 498,
            route_up_threshold: super::DEFAULT_ROUTE_UP_THRESHOLD,
        }
    }
}

/// A trained model and its held-out evaluation.
#[derive(Debug, Clone)]
pub struct TrainingRun {
    pub model: Model,
    pub report: EvaluationReport,
    pub train_examples: usize,
}

/// Fits on the training split and evaluates on the held-out split. The shipped model is the
/// one evaluated (not refitted on everything), so the report describes exactly what runs.
pub fn train_and_evaluate(
    examples: &[TrainingExample],
    options: &TrainOptions,
) -> Result<TrainingRun, TrainError> {
    let (holdout, train): (Vec<&TrainingExample>, Vec<&TrainingExample>) = examples
        .iter()
        .partition(|e| e.is_holdout(options.holdout_percent));
    if train.is_empty() {
        return Err(TrainError::Empty);
    }
    let model = fit(&train, options);
    let report = evaluate(&model, &holdout, options.route_up_threshold);
    Ok(TrainingRun {
        model,
        report,
        train_examples: train.len(),
    })
}

/// Multinomial logistic regression by Adagrad SGD with class weights; deterministic for a seed.
pub fn fit(examples: &[&TrainingExample], options: &TrainOptions) -> Model {
    let data: Vec<(SparseFeatures, usize)> = examples
        .iter()
        .map(|e| (e.features(), e.label.index()))
        .collect();
    let class_weights = class_weights(&data, options.class_weight_power);
    let mut model = Model::zeros();
    let dims = model.weights[0].len();
    let mut accum = vec![vec![1e-8f32; dims]; CLASSES];
    let mut order: Vec<usize> = (0..data.len()).collect();
    let mut rng = SmallRng::seed_from_u64(options.seed);
    for _ in 0..options.epochs {
        order.shuffle(&mut rng);
        for &k in &order {
            let (features, label) = &data[k];
            let p = softmax(model.logits(features));
            let w = class_weights[*label];
            for class in 0..CLASSES {
                let target = if class == *label { 1.0 } else { 0.0 };
                let g = w * (p[class] - target);
                let row = &mut model.weights[class];
                let acc = &mut accum[class];
                for &(i, v) in features {
                    let i = i as usize;
                    let grad = g * v + options.l2 * row[i];
                    acc[i] += grad * grad;
                    row[i] -= options.learning_rate * grad / acc[i].sqrt();
                }
            }
        }
    }
    model
}

fn class_weights(data: &[(SparseFeatures, usize)], power: f32) -> [f32; CLASSES] {
    let mut counts = [0usize; CLASSES];
    for (_, label) in data {
        counts[*label] += 1;
    }
    let n = data.len() as f32;
    let present = counts.iter().filter(|&&c| c > 0).count().max(1) as f32;
    counts.map(|c| {
        if c == 0 {
            1.0
        } else {
            (n / (present * c as f32)).powf(power)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "number,incident_state,sys_mod_count,opened_at,contact_type,location,category,subcategory,u_symptom,impact,urgency,priority,assignment_group,u_priority_confirmation\n\
INC1,New,0,1/1/2016 10:00,Phone,Location 1,Category 1,Sub 1,Symptom 1,2 - Medium,2 - Medium,3 - Moderate,Group 1,false\n\
INC1,Active,3,1/1/2016 10:00,Phone,Location 1,Category 1,Sub 1,Symptom 1,1 - High,2 - Medium,2 - High,Group 1,true\n\
INC2,New,0,1/1/2016 11:00,Email,?,Category 2,?,?,3 - Low,3 - Low,4 - Low,Group 2,false\n";

    #[test]
    fn uci_features_come_from_the_first_event_and_label_from_the_last() {
        let ex = load_uci_csv(CSV.as_bytes()).unwrap();
        assert_eq!(ex.len(), 2);
        assert_eq!(ex[0].id, "INC1");
        assert_eq!(ex[0].label, Severity::P2);
        assert_eq!(ex[0].opened_priority, Some(Severity::P3));
        assert_eq!(ex[0].impact.as_deref(), Some("2 - Medium"));
        assert_eq!(ex[1].location, None);
    }

    #[test]
    fn csv_without_priority_is_refused_by_name() {
        let err = load_uci_csv("number,impact\nINC1,1\n".as_bytes()).unwrap_err();
        assert!(matches!(err, TrainError::MissingColumn("priority")));
    }

    #[test]
    fn fitting_learns_a_separable_rule_deterministically() {
        let ex: Vec<TrainingExample> = (0..200)
            .map(|i| {
                let high = i % 2 == 0;
                TrainingExample {
                    id: format!("INC{i}"),
                    source: "test".into(),
                    label: if high { Severity::P1 } else { Severity::P4 },
                    opened_priority: None,
                    impact: None,
                    urgency: None,
                    category: Some(if high { "Core".into() } else { "Desk".into() }),
                    subcategory: None,
                    symptom: None,
                    contact_type: None,
                    location: None,
                    assignment_group: None,
                    customers_affected: None,
                    short_description: String::new(),
                    description: String::new(),
                    log: Vec::new(),
                }
            })
            .collect();
        let opts = TrainOptions::default();
        let a = train_and_evaluate(&ex, &opts).unwrap();
        let b = train_and_evaluate(&ex, &opts).unwrap();
        assert_eq!(a.model, b.model);
        assert!(a.report.accuracy > 0.99, "{}", a.report.accuracy);
    }
}
