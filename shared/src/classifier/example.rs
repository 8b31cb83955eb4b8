//! [`TrainingExample`]: one labelled incident, the JSONL training format, and what
//! training and evaluation both read from it (its features, its side of the split).

use serde::{Deserialize, Serialize};

use super::features::{AlarmCounts, FeatureInput, SparseFeatures, extract, fnv1a};
use crate::severity::Severity;
use crate::ticket::Level;

/// One labelled incident. This is also the JSONL training format (one object per line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingExample {
    /// Incident number; the train/holdout split hashes it.
    pub id: String,
    /// Where the example came from (`uci`, `synthetic`, or the JSONL file's own value).
    #[serde(default)]
    pub source: String,
    /// The final priority: what the model learns to predict.
    #[serde(alias = "priority")]
    pub label: Severity,
    /// The priority on the first event: a baseline for the report, never a feature.
    #[serde(default)]
    pub opened_priority: Option<Severity>,
    #[serde(default)]
    pub impact: Option<String>,
    #[serde(default)]
    pub urgency: Option<String>,
    #[serde(default)]
    pub category: Option<String>,
    #[serde(default)]
    pub subcategory: Option<String>,
    #[serde(default)]
    pub symptom: Option<String>,
    #[serde(default)]
    pub contact_type: Option<String>,
    #[serde(default)]
    pub location: Option<String>,
    #[serde(default)]
    pub assignment_group: Option<String>,
    #[serde(default)]
    pub customers_affected: Option<u64>,
    #[serde(default)]
    pub short_description: String,
    #[serde(default)]
    pub description: String,
    /// Alarm/log lines.
    #[serde(default)]
    pub log: Vec<String>,
}

impl TrainingExample {
    pub fn features(&self) -> SparseFeatures {
        extract(&FeatureInput {
            impact: self.impact.as_deref().and_then(Level::parse),
            urgency: self.urgency.as_deref().and_then(Level::parse),
            category: self.category.as_deref(),
            subcategory: self.subcategory.as_deref(),
            symptom: self.symptom.as_deref(),
            contact_type: self.contact_type.as_deref(),
            location: self.location.as_deref(),
            assignment_group: self.assignment_group.as_deref(),
            customers_affected: self.customers_affected,
            text: [&self.short_description, &self.description],
            alarms: AlarmCounts::from_lines(self.log.iter().map(String::as_str)),
        })
    }

    /// Held out for evaluation (a stable function of the id, so re-runs split identically).
    pub fn is_holdout(&self, holdout_percent: u8) -> bool {
        fnv1a(&[self.id.as_bytes()]) % 100 < u64::from(holdout_percent)
    }
}
