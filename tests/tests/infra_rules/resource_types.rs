//! Rule: every resource declared in `infra/` has the shape Azure's published type definition gives its type at
//! its API version: no property the type does not have (or only reads), every required property present, and
//! every literal value inside its enum and bounds.
//!
//! The definitions are `tests/fixtures/platform/arm-resource-types.json`, extracted from the Bicep type index
//! (github.com/Azure/bicep-types-az, MIT) by `scripts/platform/extract_arm_types.py`. The Bicep compiler, which
//! checks the same thing, cannot be installed here: this rule stands in for `bicep build`'s type check.
//!
//! Values are followed through variables, parenthesized expressions and both branches of `cond ? a : b`; a
//! parameter's value is known only through its `@allowed` list. Anything else (a call, a member access, an
//! interpolated string) is a value the rule cannot know and leaves alone. A required property is checked in every
//! object literal the rule reaches.

use std::fs;
use std::path::Path;

use anyhow::Context;
use serde_json::Value;
use tree_sitter::Node;

use super::bicep::{BicepFile, descendants, named_children};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeViolation(pub String);

/// The extracted type definitions.
pub struct TypeIndex {
    data: Value,
}

/// Bicep's own keywords inside a resource body, which are not ARM properties.
const BICEP_RESOURCE_KEYWORDS: [&str; 3] = ["parent", "scope", "dependsOn"];

/// How deep variables and nested objects are followed before the rule gives up on a value.
const MAX_DEPTH: usize = 32;

impl TypeIndex {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let data: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        anyhow::ensure!(
            data["resources"].is_object() && data["types"].is_object(),
            "{}: no resources or types",
            path.display()
        );
        Ok(Self { data })
    }

    /// Every `type@version` the index describes.
    pub fn resource_types(&self) -> Vec<String> {
        self.data["resources"]
            .as_object()
            .map(|resources| resources.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The stable API versions the index holds for `resource_type` (recorded for types taken at a preview
    /// version), if recorded.
    pub fn stable_versions(&self, resource_type: &str) -> Option<Vec<String>> {
        self.data["stable_versions_of_preview_types"][resource_type]
            .as_array()
            .map(|versions| {
                versions
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
    }

    /// The commit of the type index the facts were taken from.
    pub fn source_commit(&self) -> Option<&str> {
        self.data["source"]["commit"].as_str()
    }

    fn body(&self, declared: &str) -> Option<&str> {
        self.data["resources"]
            .as_object()?
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(declared))
            .and_then(|(_, resource)| resource["body"].as_str())
    }

    fn ty(&self, id: &str) -> &Value {
        &self.data["types"][id]
    }
}

/// `type@version` of every resource declared anywhere in `file` (nested declarations included).
pub fn declared_resource_types(file: &BicepFile) -> Vec<String> {
    resource_declarations(file)
        .into_iter()
        .filter_map(|resource| resource_type(file, resource))
        .collect()
}

fn resource_declarations<'t>(file: &'t BicepFile) -> Vec<Node<'t>> {
    descendants(file.root())
        .into_iter()
        .filter(|node| node.kind() == "resource_declaration")
        .collect()
}

fn resource_type(file: &BicepFile, resource: Node<'_>) -> Option<String> {
    named_children(resource)
        .into_iter()
        .find(|child| child.kind() == "string")
        .and_then(|ty| file.plain_string(ty))
}

fn is_existing(resource: Node<'_>) -> bool {
    let mut cursor = resource.walk();
    resource
        .children(&mut cursor)
        .any(|child| child.kind() == "existing")
}

/// Checks every resource declared in `file` against `index`.
pub fn check_resource_types(file: &BicepFile, index: &TypeIndex) -> Vec<TypeViolation> {
    let mut out = Vec::new();
    for resource in resource_declarations(file) {
        let Some(declared) = resource_type(file, resource) else {
            out.push(TypeViolation(format!(
                "{}: resource type is not a plain string",
                file.at(resource)
            )));
            continue;
        };
        let Some(body_type) = index.body(&declared) else {
            out.push(TypeViolation(format!(
                "{}: {declared} is not in the type index (re-run scripts/platform/extract_arm_types.py)",
                file.at(resource)
            )));
            continue;
        };
        let Some(body) = file.declared_body(resource) else {
            out.push(TypeViolation(format!(
                "{}: {declared}: cannot find the resource body",
                file.at(resource)
            )));
            continue;
        };
        let mut checker = Checker {
            file,
            index,
            declared: &declared,
            out: &mut out,
        };
        if is_existing(resource) {
            // A reference to an existing resource sets nothing: only its name (and scope) are given.
            checker.check_existing(body);
        } else {
            checker.check(body, body_type, "", 0, true);
        }
    }
    out
}

struct Checker<'a, 't> {
    file: &'t BicepFile,
    index: &'a TypeIndex,
    declared: &'a str,
    out: &'a mut Vec<TypeViolation>,
}

impl<'t> Checker<'_, 't> {
    fn report(&mut self, node: Node<'_>, path: &str, what: String) {
        let at = if path.is_empty() {
            String::new()
        } else {
            format!(" {path}:")
        };
        self.out.push(TypeViolation(format!(
            "{}: {}{at} {what}",
            self.file.at(node),
            self.declared
        )));
    }

    fn check_existing(&mut self, body: Node<'t>) {
        for (key, value) in self.file.object_entries(body) {
            if key != "name" && key != "scope" {
                self.report(
                    value,
                    "",
                    format!("an existing resource sets `{key}`, which it cannot"),
                );
            }
        }
    }

    /// Checks the expression `node` against type `id`. `top` marks a resource body, where Bicep's keywords
    /// (`parent`, `scope`, `dependsOn`) may appear.
    fn check(&mut self, node: Node<'t>, id: &str, path: &str, depth: usize, top: bool) {
        if depth > MAX_DEPTH {
            return;
        }
        let ty = self.index.ty(id).clone();
        let kind = ty["kind"].as_str().unwrap_or("any");
        if kind == "any" {
            return;
        }
        if kind == "union" {
            self.check_union(node, &ty, path, depth);
            return;
        }
        match node.kind() {
            "parenthesized_expression" => {
                if let [inner] = named_children(node)[..] {
                    self.check(inner, id, path, depth + 1, top);
                }
            }
            "ternary_expression" => {
                for branch in ["consequence", "alternative"] {
                    if let Some(value) = node.child_by_field_name(branch) {
                        self.check(value, id, path, depth + 1, top);
                    }
                }
            }
            "identifier" => self.check_identifier(node, id, path, depth),
            "null" => {}
            "object" => match kind {
                "object" | "discriminated" => self.check_object(node, &ty, path, depth, top),
                other => self.report(
                    node,
                    path,
                    format!("an object where the type wants {other}"),
                ),
            },
            "array" => match kind {
                "array" => {
                    let items = ty["items"].as_str().unwrap_or_default().to_owned();
                    for (index, item) in named_children(node)
                        .into_iter()
                        .filter(|item| item.kind() != "decorators")
                        .enumerate()
                    {
                        self.check(item, &items, &format!("{path}[{index}]"), depth + 1, false);
                    }
                }
                other => self.report(node, path, format!("an array where the type wants {other}")),
            },
            "for_statement" => match kind {
                "array" => {
                    let items = ty["items"].as_str().unwrap_or_default().to_owned();
                    if let Some(body) = node.child_by_field_name("body") {
                        self.check(body, &items, &format!("{path}[for]"), depth + 1, false);
                    }
                }
                other => self.report(node, path, format!("a loop where the type wants {other}")),
            },
            "string" => {
                if let Some(text) = self.file.plain_string(node) {
                    self.check_string(node, &ty, &text, path);
                } else if kind != "string" {
                    self.report(node, path, format!("a string where the type wants {kind}"));
                }
            }
            "number" => self.check_number(node, &ty, path),
            "unary_expression" if self.file.text(node).trim_start().starts_with('-') => {
                self.check_number(node, &ty, path);
            }
            "boolean" if kind != "bool" => {
                self.report(node, path, format!("a bool where the type wants {kind}"));
            }
            // Calls, member accesses, interpolations, operators: values the rule cannot know.
            _ => {}
        }
    }

    fn check_union(&mut self, node: Node<'t>, ty: &Value, path: &str, depth: usize) {
        let alternatives: Vec<String> = ty["of"]
            .as_array()
            .map(|of| {
                of.iter()
                    .filter_map(|id| id.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let mut best: Option<Vec<TypeViolation>> = None;
        for alternative in alternatives {
            let mut found = Vec::new();
            let mut checker = Checker {
                file: self.file,
                index: self.index,
                declared: self.declared,
                out: &mut found,
            };
            checker.check(node, &alternative, path, depth + 1, false);
            if best.as_ref().is_none_or(|b| found.len() < b.len()) {
                best = Some(found);
            }
        }
        self.out.extend(best.unwrap_or_default());
    }

    fn check_identifier(&mut self, node: Node<'t>, id: &str, path: &str, depth: usize) {
        let name = self.file.text(node);
        if let Some(value) = self
            .file
            .declaration("variable_declaration", name)
            .and_then(|var| self.file.assigned_value(var))
        {
            self.check(value, id, path, depth + 1, false);
            return;
        }
        let Some(param) = self.file.declaration("parameter_declaration", name) else {
            return;
        };
        let allowed = self
            .file
            .decorators(param)
            .into_iter()
            .find(|(decorator, _)| decorator == "allowed")
            .and_then(|(_, call)| {
                call.child_by_field_name("arguments")
                    .map(named_children)
                    .and_then(|arguments| arguments.first().copied())
            });
        if let Some(list) = allowed.filter(|list| list.kind() == "array") {
            for value in named_children(list) {
                self.check(
                    value,
                    id,
                    &format!("{path} (@allowed of `{name}`)"),
                    depth + 1,
                    false,
                );
            }
        }
    }

    fn check_object(&mut self, node: Node<'t>, ty: &Value, path: &str, depth: usize, top: bool) {
        let entries = self.file.object_entries(node);
        let (properties, additional) = match ty["kind"].as_str() {
            Some("discriminated") => {
                let discriminator = ty["discriminator"].as_str().unwrap_or_default();
                let chosen = entries
                    .iter()
                    .find(|(key, _)| key == discriminator)
                    .and_then(|(_, value)| self.file.plain_string(*value));
                let mut properties = ty["base"].as_object().cloned().unwrap_or_default();
                let Some(chosen) = chosen else {
                    // The variant is not known from the source: check only what every variant shares.
                    self.check_entries(node, &entries, &properties, None, path, depth, top, false);
                    return;
                };
                let Some(variant) = ty["variants"][chosen.as_str()].as_str() else {
                    let known: Vec<&String> = ty["variants"]
                        .as_object()
                        .map(|v| v.keys().collect())
                        .unwrap_or_default();
                    self.report(
                        node,
                        path,
                        format!("`{discriminator}` = '{chosen}' is none of {known:?}"),
                    );
                    return;
                };
                let variant = self.index.ty(variant).clone();
                if let Some(own) = variant["properties"].as_object() {
                    properties.extend(own.clone());
                }
                (
                    properties,
                    variant["additional"].as_str().map(str::to_owned),
                )
            }
            _ => (
                ty["properties"].as_object().cloned().unwrap_or_default(),
                ty["additional"].as_str().map(str::to_owned),
            ),
        };
        self.check_entries(
            node,
            &entries,
            &properties,
            additional,
            path,
            depth,
            top,
            true,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn check_entries(
        &mut self,
        object: Node<'t>,
        entries: &[(String, Node<'t>)],
        properties: &serde_json::Map<String, Value>,
        additional: Option<String>,
        path: &str,
        depth: usize,
        top: bool,
        complete: bool,
    ) {
        let child_path = |key: &str| {
            if path.is_empty() {
                key.to_owned()
            } else {
                format!("{path}.{key}")
            }
        };
        for (key, value) in entries {
            if top && BICEP_RESOURCE_KEYWORDS.contains(&key.as_str()) {
                continue;
            }
            let spec = properties.get(key).or_else(|| {
                properties
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case(key))
                    .map(|(_, spec)| spec)
            });
            match spec {
                Some(spec) if spec["readonly"] == true => self.report(
                    *value,
                    &child_path(key),
                    "is read-only: ARM ignores or refuses it".to_owned(),
                ),
                Some(spec) => {
                    if value.kind() == "null" && spec["required"] == true {
                        self.report(*value, &child_path(key), "is required but null".to_owned());
                    }
                    if let Some(id) = spec["type"].as_str() {
                        self.check(*value, id, &child_path(key), depth + 1, false);
                    }
                }
                None => match &additional {
                    Some(id) => {
                        let id = id.clone();
                        self.check(*value, &id, &child_path(key), depth + 1, false);
                    }
                    None if complete => self.report(
                        *value,
                        path,
                        format!(
                            "`{key}` is not a property of the type (it has {:?})",
                            properties.keys().collect::<Vec<_>>()
                        ),
                    ),
                    None => {}
                },
            }
        }
        for (name, spec) in properties {
            if spec["required"] == true && !entries.iter().any(|(key, _)| key == name) {
                self.report(
                    object,
                    path,
                    format!("required property `{name}` is missing"),
                );
            }
        }
    }

    fn check_string(&mut self, node: Node<'t>, ty: &Value, text: &str, path: &str) {
        if ty["kind"] != "string" {
            self.report(
                node,
                path,
                format!("'{text}' is a string where the type wants {}", ty["kind"]),
            );
            return;
        }
        if let Some(values) = ty["enum"].as_array().filter(|values| !values.is_empty()) {
            let listed = values.iter().any(|value| value.as_str() == Some(text));
            if !listed {
                let open = if ty["open"] == true {
                    " (the type also takes other strings, but none is documented; check before adding an exception)"
                } else {
                    ""
                };
                let names: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
                self.report(node, path, format!("'{text}' is none of {names:?}{open}"));
            }
        }
        let length = text.chars().count() as u64;
        if ty["minLength"].as_u64().is_some_and(|min| length < min)
            || ty["maxLength"].as_u64().is_some_and(|max| length > max)
        {
            self.report(
                node,
                path,
                format!(
                    "'{text}' is outside the length bounds {}..{}",
                    ty["minLength"], ty["maxLength"]
                ),
            );
        }
    }

    fn check_number(&mut self, node: Node<'t>, ty: &Value, path: &str) {
        if ty["kind"] != "int" {
            self.report(
                node,
                path,
                format!("a number where the type wants {}", ty["kind"]),
            );
            return;
        }
        let Ok(value) = self.file.text(node).replace(' ', "").parse::<i64>() else {
            return;
        };
        if ty["minValue"].as_i64().is_some_and(|min| value < min)
            || ty["maxValue"].as_i64().is_some_and(|max| value > max)
        {
            self.report(
                node,
                path,
                format!("{value} is outside {}..{}", ty["minValue"], ty["maxValue"]),
            );
        }
    }
}
