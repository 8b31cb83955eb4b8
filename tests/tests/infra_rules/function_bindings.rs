//! Rule: what the function definitions need from the deployment exists. Every `%SETTING%` a binding reads is
//! an app setting Bicep always writes (the host refuses to index a function whose setting is missing), and
//! every storage queue a binding names is a queue Bicep creates.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use anyhow::Context;
use serde_json::Value;

use super::app_settings::WrittenSettings;
use super::bicep::BicepFile;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingViolation(pub String);

/// What the `function.json` files below a directory refer to.
#[derive(Debug, Default)]
pub struct BindingNeeds {
    /// `NAME` of every `%NAME%` in a binding.
    pub settings: BTreeSet<String>,
    /// Every `queueName` of a queue trigger or output.
    pub queues: BTreeSet<String>,
}

/// Reads every `<function>/function.json` directly below `defs`.
pub fn binding_needs(defs: &Path) -> anyhow::Result<BindingNeeds> {
    let mut needs = BindingNeeds::default();
    for entry in fs::read_dir(defs).with_context(|| format!("listing {}", defs.display()))? {
        let path = entry?.path().join("function.json");
        if !path.is_file() {
            continue;
        }
        let text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let definition: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        collect(&definition, None, &mut needs);
    }
    Ok(needs)
}

fn collect(value: &Value, key: Option<&str>, needs: &mut BindingNeeds) {
    match value {
        Value::String(text) => {
            needs.settings.extend(percent_references(text));
            if key == Some("queueName") && !text.contains('%') {
                needs.queues.insert(text.clone());
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect(item, None, needs)),
        Value::Object(fields) => fields
            .iter()
            .for_each(|(name, field)| collect(field, Some(name), needs)),
        _ => {}
    }
}

/// `NAME` for every `%NAME%` in a binding value.
fn percent_references(text: &str) -> Vec<String> {
    text.split('%')
        .skip(1)
        .step_by(2)
        .filter(|name| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

/// Every referenced setting is always written, and every queue is created by `main`'s storage module.
pub fn check_bindings(
    needs: &BindingNeeds,
    written: &WrittenSettings<'_>,
    main: &BicepFile,
) -> Vec<BindingViolation> {
    let created = created_queues(main);
    let missing_settings = needs
        .settings
        .iter()
        .filter(|name| !written.always.contains_key(*name))
        .map(|name| {
            BindingViolation(format!(
                "binding reads %{name}%, which the app settings do not always set"
            ))
        });
    let missing_queues = needs
        .queues
        .iter()
        .filter(|queue| !created.contains(*queue))
        .map(|queue| {
            BindingViolation(format!(
                "binding uses queue `{queue}`, which the storage module does not create"
            ))
        });
    missing_settings.chain(missing_queues).collect()
}

/// The literal queue names `main` passes to the storage module as `workQueueNames`.
fn created_queues(main: &BicepFile) -> BTreeSet<String> {
    main.module("modules/storage.bicep")
        .map(|module| main.module_params(module))
        .and_then(|params| {
            params
                .into_iter()
                .find(|(name, _)| name == "workQueueNames")
        })
        .map(|(_, queues)| {
            super::bicep::named_children(queues)
                .into_iter()
                .filter_map(|queue| main.plain_string(queue))
                .collect()
        })
        .unwrap_or_default()
}
