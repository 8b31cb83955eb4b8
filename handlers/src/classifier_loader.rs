//! The severity classifier the handler uses: the embedded default model, or the model file
//! named by `STORMGATE_CLASSIFIER_MODEL_PATH`, with `STORMGATE_ROUTE_UP_THRESHOLD`. Loaded
//! once per process, on first use.

use std::path::Path;
use std::sync::OnceLock;

use stormgate_shared::classifier::model::Model;
use stormgate_shared::classifier::{Classifier, DEFAULT_ROUTE_UP_THRESHOLD};

use crate::config::Settings;
use crate::error::ApiError;

static CLASSIFIER: OnceLock<Result<Classifier, String>> = OnceLock::new();

/// The process's classifier; a model file that cannot be read or parsed is an internal error
/// naming the setting (every invocation reports it until the setting is fixed).
pub fn classifier(settings: &Settings) -> Result<&'static Classifier, ApiError> {
    CLASSIFIER
        .get_or_init(|| load(settings))
        .as_ref()
        .map_err(|e| ApiError::Internal(e.clone()))
}

fn load(settings: &Settings) -> Result<Classifier, String> {
    load_classifier(
        settings.classifier_model_path.as_deref(),
        settings.route_up_threshold,
    )
}

/// The embedded default model or the model file at `model_path`, with the route-up
/// threshold (default when `None`): what the handler loads from its settings, and what
/// `stormgate dead-letters` loads from its options so re-submission classifies alike.
pub fn load_classifier(
    model_path: Option<&Path>,
    route_up_threshold: Option<f64>,
) -> Result<Classifier, String> {
    let threshold = route_up_threshold.map_or(DEFAULT_ROUTE_UP_THRESHOLD, |t| t as f32);
    let model = match model_path {
        None => Model::from_json(stormgate_shared::classifier::DEFAULT_MODEL_JSON),
        Some(path) => {
            let json = std::fs::read_to_string(path)
                .map_err(|e| format!("STORMGATE_CLASSIFIER_MODEL_PATH {}: {e}", path.display()))?;
            Model::from_json(&json)
        }
    }
    .map_err(|e| format!("classifier model: {e}"))?;
    Ok(Classifier::new(model, threshold))
}
