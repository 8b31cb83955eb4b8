//! The severity classifier as the command line loads it from its options: the embedded
//! default model, or a model file, with the route-up threshold. The handler's own
//! classifier is built by the assembly ([`stormgate_shared::assembly`]) from the same
//! settings, so re-submission classifies alike.

use std::path::Path;

use stormgate_shared::assembly::ClassifierSettings;
use stormgate_shared::classifier::Classifier;

/// The embedded default model or the model file at `model_path`, with the route-up
/// threshold (default when `None`): what the handler loads from its settings, and what
/// `stormgate dead-letters` loads from its options so re-submission classifies alike.
pub fn load_classifier(
    model_path: Option<&Path>,
    route_up_threshold: Option<f64>,
) -> Result<Classifier, String> {
    ClassifierSettings::from_options(model_path.map(Path::to_path_buf), route_up_threshold)
        .load()
        .map_err(|e| e.to_string())
}
