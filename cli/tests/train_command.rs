//! `stormgate train` itself on a CSV in the UCI incident event log format: the command
//! writes a model the handler can load and a report with every section.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::PathBuf;
use std::process::Command;

use stormgate_handlers::classifier_loader::load_classifier;
use stormgate_shared::classifier::features::FeatureInput;

/// A directory of this test's own, removed when dropped.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(name: &str) -> ScratchDir {
        let dir = std::env::temp_dir().join(format!("stormgate-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        ScratchDir(dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn train_on_a_uci_csv_writes_a_loadable_model_and_a_complete_report() {
    let csv = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/tests/fixtures/uci_incident_excerpt.csv");
    let scratch = ScratchDir::new("train");
    let model = scratch.0.join("model.json");
    let report = scratch.0.join("report.md");

    let output = Command::new(env!("CARGO_BIN_EXE_stormgate"))
        .arg("train")
        .arg("--input")
        .arg(&csv)
        .arg("--model-out")
        .arg(&model)
        .arg("--report-out")
        .arg(&report)
        .args(["--synthetic-alarms", "300"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("labelled incidents"), "{stderr}");

    let classifier = load_classifier(Some(&model), None).unwrap();
    let prediction = classifier.predict(&FeatureInput::default());
    assert!(prediction.routing <= prediction.most_likely);
    let report = std::fs::read_to_string(&report).unwrap();
    for section in [
        "### Per class",
        "### Confusion matrix",
        "### Calibration",
        "### Route-up",
    ] {
        assert!(report.contains(section), "missing {section}:\n{report}");
    }
    assert!(report.contains("uci_incident_excerpt.csv"), "{report}");
}
