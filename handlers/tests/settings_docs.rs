//! The settings table in `config/table.rs` is the source every other description of the
//! settings is checked against.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use serde_json::Value;
use stormgate_handlers::config::{SETTINGS, Settings};

fn repo_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn local_settings_example_lists_every_setting() {
    let example: Value = serde_json::from_str(&repo_file("local.settings.json.example")).unwrap();
    let values = example["Values"].as_object().unwrap();
    let listed: Vec<&str> = values.keys().map(String::as_str).collect();
    let table: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
    let mut listed_sorted = listed.clone();
    listed_sorted.sort_unstable();
    let mut table_sorted = table.clone();
    table_sorted.sort_unstable();
    assert_eq!(
        listed_sorted, table_sorted,
        "local.settings.json.example versus config::SETTINGS"
    );
    assert_eq!(values["FUNCTIONS_WORKER_RUNTIME"], "custom");
}

#[test]
fn local_settings_example_starts_the_handler() {
    let example: Value = serde_json::from_str(&repo_file("local.settings.json.example")).unwrap();
    let vars = example["Values"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()));
    let settings = Settings::from_vars(vars).unwrap();
    assert_eq!(settings.port, 3000);
}

const TABLE_START: &str = "<!-- settings-table:start -->\n";
const TABLE_END: &str = "<!-- settings-table:end -->";

#[test]
fn readme_configuration_table_matches_the_settings_table() {
    let readme = repo_file("README.md");
    let start = readme
        .find(TABLE_START)
        .expect("README.md has the settings-table:start marker")
        + TABLE_START.len();
    let end = readme
        .find(TABLE_END)
        .expect("README.md has the settings-table:end marker");
    let expected = stormgate_handlers::config::settings_markdown_table();
    assert!(
        readme[start..end] == expected,
        "README.md's configuration table differs from config::SETTINGS; replace it with:\n{expected}"
    );
}
