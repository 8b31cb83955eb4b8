//! The settings table rendered as the README shows it (`handlers/tests/settings_docs.rs`
//! keeps the two equal).

use super::table::{ReadBy, Requirement, SETTINGS};

/// The settings table as Markdown, as the README shows it (a test keeps them equal).
pub fn settings_markdown_table() -> String {
    let mut table = String::from(
        "| Setting | Required | Secret | Read by | Default | Description |\n|---|---|---|---|---|---|\n",
    );
    for spec in SETTINGS {
        let required = match spec.required {
            Requirement::Required => "yes".to_owned(),
            Requirement::Optional => "no".to_owned(),
            Requirement::RequiredWhen(condition) => format!("when {condition}"),
        };
        let secret = if spec.secret { "yes" } else { "" };
        let read_by = match spec.read_by {
            ReadBy::Handler => "handler",
            ReadBy::Host => "host",
        };
        let default = spec.default.map(|d| format!("`{d}`")).unwrap_or_default();
        table.push_str(&format!(
            "| `{}` | {required} | {secret} | {read_by} | {default} | {} |\n",
            spec.name, spec.description
        ));
    }
    table
}
