//! The model file: a multinomial logistic regression over the sparse feature layout, as JSON.

use serde::{Deserialize, Serialize};

use super::features::{DIMENSIONS, SparseFeatures};

/// Number of severity classes (P1..P5).
pub const CLASSES: usize = 5;

/// Bump when the feature layout changes: an old model file must then be refused, not misread.
pub const FEATURE_LAYOUT: u32 = 1;

/// A trained model: one weight row per class over [`DIMENSIONS`] features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub feature_layout: u32,
    /// Free-form description of the training run (data, command, date), for the report.
    #[serde(default)]
    pub trained_on: String,
    /// `weights[class][feature]`, class 0 = P1.
    pub weights: Vec<Vec<f32>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model file is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("model was built for feature layout {found}, this build uses {expected}")]
    Layout { found: u32, expected: u32 },
    #[error("model has the wrong shape: expected {CLASSES} rows of {DIMENSIONS} weights")]
    Shape,
    #[error("model contains a non-finite weight")]
    NonFinite,
}

impl Model {
    /// An all-zero model (uniform probabilities): the starting point of training.
    pub fn zeros() -> Model {
        Model {
            feature_layout: FEATURE_LAYOUT,
            trained_on: String::new(),
            weights: vec![vec![0.0; DIMENSIONS]; CLASSES],
        }
    }

    pub fn from_json(json: &str) -> Result<Model, ModelError> {
        let model: Model = serde_json::from_str(json)?;
        if model.feature_layout != FEATURE_LAYOUT {
            return Err(ModelError::Layout {
                found: model.feature_layout,
                expected: FEATURE_LAYOUT,
            });
        }
        if model.weights.len() != CLASSES || model.weights.iter().any(|row| row.len() != DIMENSIONS)
        {
            return Err(ModelError::Shape);
        }
        if model.weights.iter().flatten().any(|w| !w.is_finite()) {
            return Err(ModelError::NonFinite);
        }
        Ok(model)
    }

    /// JSON with weights rounded to 4 decimals, which keeps the embedded default model small.
    pub fn to_json(&self) -> Result<String, ModelError> {
        let rounded = Model {
            feature_layout: self.feature_layout,
            trained_on: self.trained_on.clone(),
            weights: self
                .weights
                .iter()
                .map(|row| {
                    row.iter()
                        .map(|w| (w * 10_000.0).round() / 10_000.0)
                        .collect()
                })
                .collect(),
        };
        Ok(serde_json::to_string(&rounded)?)
    }

    /// Class scores (logits) for a feature vector.
    pub fn logits(&self, features: &SparseFeatures) -> [f32; CLASSES] {
        let mut z = [0.0f32; CLASSES];
        for (class, row) in self.weights.iter().enumerate().take(CLASSES) {
            z[class] = features
                .iter()
                .map(|&(i, v)| row.get(i as usize).copied().unwrap_or(0.0) * v)
                .sum();
        }
        z
    }

    /// Softmax probabilities, P1 first; always finite and summing to 1.
    pub fn probabilities(&self, features: &SparseFeatures) -> [f32; CLASSES] {
        softmax(self.logits(features))
    }
}

/// Numerically stable softmax.
pub fn softmax(z: [f32; CLASSES]) -> [f32; CLASSES] {
    let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut e = z.map(|v| (v - max).exp());
    let sum: f32 = e.iter().sum();
    if !(sum.is_finite() && sum > 0.0) {
        return [1.0 / CLASSES as f32; CLASSES];
    }
    for v in &mut e {
        *v /= sum;
    }
    e
}
