//! Rule: the function app's settings in Bicep and the settings the handler knows are the same set.
//!
//! The settings are read from the one `Microsoft.Web/sites/config` `appsettings` resource by following its
//! `properties` expression through variables, `union(...)` and `cond ? a : b`. A key written on every path is
//! "always" written; a key written on some paths only is "sometimes" written. Any other expression shape is an
//! error, so a setting cannot slip past the check.

use std::collections::BTreeMap;

use tree_sitter::Node;

use super::bicep::{BicepFile, descendants, named_children};

/// One app setting the handler's settings table knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownSetting {
    pub name: String,
    pub needed: Needed,
}

/// When Bicep must write a known setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needed {
    /// The handler refuses to start without it: written on every path.
    AtStartUp,
    /// The Functions host needs it where the plan does not manage it itself (the runtime settings, which Flex
    /// Consumption takes from the site instead): written on at least one path.
    ByTheHost,
    /// Only when its feature is configured.
    Optional,
}

/// The app settings a Bicep file writes, with the expression of each value.
#[derive(Debug, Default)]
pub struct WrittenSettings<'t> {
    pub always: BTreeMap<String, Node<'t>>,
    pub sometimes: BTreeMap<String, Node<'t>>,
}

impl<'t> WrittenSettings<'t> {
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.always
            .keys()
            .chain(self.sometimes.keys())
            .map(String::as_str)
    }

    fn union(mut self, other: WrittenSettings<'t>) -> Self {
        for (name, value) in other.always {
            self.sometimes.remove(&name);
            self.always.entry(name).or_insert(value);
        }
        for (name, value) in other.sometimes {
            if !self.always.contains_key(&name) {
                self.sometimes.entry(name).or_insert(value);
            }
        }
        self
    }

    /// Either branch of a condition: only keys both branches always write stay "always".
    fn either(self, other: WrittenSettings<'t>) -> Self {
        let mut merged = WrittenSettings::default();
        let mut other_always = other.always;
        for (name, value) in self.always {
            if other_always.remove(&name).is_some() {
                merged.always.insert(name, value);
            } else {
                merged.sometimes.insert(name, value);
            }
        }
        for (name, value) in other_always
            .into_iter()
            .chain(self.sometimes)
            .chain(other.sometimes)
        {
            merged.sometimes.entry(name).or_insert(value);
        }
        merged
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingsViolation {
    /// The settings could not be read from the Bicep file.
    Unreadable(String),
    /// Bicep writes a setting the handler does not know.
    Unknown(String),
    /// The handler needs a setting that Bicep does not write (or writes only on some paths).
    Missing(String),
}

/// Reads the settings the file's `appsettings` resource writes.
pub fn written_settings(file: &BicepFile) -> Result<WrittenSettings<'_>, String> {
    if let Some(site_settings) = descendants(file.root()).into_iter().find(|node| {
        node.kind() == "object_property"
            && named_children(*node)
                .first()
                .is_some_and(|key| file.text(*key) == "appSettings")
    }) {
        return Err(format!(
            "{}: settings in siteConfig.appSettings bypass the appsettings resource",
            file.at(site_settings)
        ));
    }
    let resources: Vec<Node<'_>> = file
        .resources_of_type("Microsoft.Web/sites/config@")
        .into_iter()
        .filter(|resource| {
            file.declared_body(*resource)
                .and_then(|body| file.property(body, "name"))
                .and_then(|name| file.plain_string(name))
                .is_some_and(|name| name == "appsettings")
        })
        .collect();
    let [resource] = resources.as_slice() else {
        return Err(format!(
            "{}: expected exactly one appsettings resource, found {}",
            file.path().display(),
            resources.len()
        ));
    };
    let properties = file
        .declared_body(*resource)
        .and_then(|body| file.property(body, "properties"))
        .ok_or_else(|| format!("{}: appsettings without properties", file.at(*resource)))?;
    settings_of(file, properties, 0)
}

fn settings_of<'t>(
    file: &'t BicepFile,
    expr: Node<'t>,
    depth: usize,
) -> Result<WrittenSettings<'t>, String> {
    if depth > 16 {
        return Err(format!(
            "{}: settings expression nests too deeply",
            file.at(expr)
        ));
    }
    match expr.kind() {
        "object" => Ok(WrittenSettings {
            always: file.object_entries(expr).into_iter().collect(),
            sometimes: BTreeMap::new(),
        }),
        "identifier" => {
            let name = file.text(expr);
            let value = file
                .declaration("variable_declaration", name)
                .and_then(|var| file.assigned_value(var))
                .ok_or_else(|| {
                    format!("{}: `{name}` is not a variable of this file", file.at(expr))
                })?;
            settings_of(file, value, depth + 1)
        }
        "call_expression" if call_name(file, expr) == Some("union") => call_arguments(expr)
            .into_iter()
            .try_fold(WrittenSettings::default(), |merged, argument| {
                Ok(merged.union(settings_of(file, argument, depth + 1)?))
            }),
        "ternary_expression" => {
            let branch = |field: &str| {
                expr.child_by_field_name(field)
                    .ok_or_else(|| format!("{}: incomplete condition", file.at(expr)))
                    .and_then(|node| settings_of(file, node, depth + 1))
            };
            Ok(branch("consequence")?.either(branch("alternative")?))
        }
        "parenthesized_expression" => match named_children(expr).as_slice() {
            [inner] => settings_of(file, *inner, depth + 1),
            _ => Err(format!("{}: unexpected parenthesized list", file.at(expr))),
        },
        other => Err(format!(
            "{}: cannot tell which settings a `{other}` writes: `{}`",
            file.at(expr),
            file.text(expr)
        )),
    }
}

pub fn call_name<'t>(file: &'t BicepFile, call: Node<'_>) -> Option<&'t str> {
    call.child_by_field_name("function")
        .map(|function| file.text(function))
}

pub fn call_arguments(call: Node<'_>) -> Vec<Node<'_>> {
    call.child_by_field_name("arguments")
        .map(named_children)
        .unwrap_or_default()
}

/// Every setting Bicep writes is known to the handler, every setting the handler requires is always written,
/// and every setting the host requires is written for the plans that need it.
pub fn check_settings(
    written: &WrittenSettings<'_>,
    known: &[KnownSetting],
) -> Vec<SettingsViolation> {
    let unknown = written
        .names()
        .filter(|name| !known.iter().any(|setting| setting.name == *name))
        .map(|name| SettingsViolation::Unknown(name.to_owned()));
    let missing = known
        .iter()
        .filter(|setting| match setting.needed {
            Needed::AtStartUp => !written.always.contains_key(&setting.name),
            Needed::ByTheHost => !written.names().any(|name| name == setting.name),
            Needed::Optional => false,
        })
        .map(|setting| SettingsViolation::Missing(setting.name.clone()));
    unknown.chain(missing).collect()
}

/// Reads and checks in one step, for tests.
pub fn settings_violations(file: &BicepFile, known: &[KnownSetting]) -> Vec<SettingsViolation> {
    match written_settings(file) {
        Ok(written) => check_settings(&written, known),
        Err(reason) => vec![SettingsViolation::Unreadable(reason)],
    }
}
