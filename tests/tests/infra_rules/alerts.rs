//! Rules for the alert rules and the workbook: their queries name only signals the product
//! really logs (events, messages and fields of `stormgate_shared::signals::catalog`) or a
//! platform line whose text the platform facts record; each alert's measure and dimensions
//! are columns its query makes; and every property the two resource types are given is one
//! Azure's type definitions list (tests/fixtures/platform/azure-monitor-types.json).

use std::collections::BTreeSet;

use serde_json::Value;
use stormgate_shared::signals::catalog;
use tree_sitter::Node;

use super::bicep::{BicepFile, named_children};

/// One query of a template: where it is declared and its text.
#[derive(Debug, Clone)]
pub struct NamedQuery {
    pub name: String,
    pub query: String,
    /// The alert's `measure` and `dimensions` (none for a workbook chart).
    pub measure: Option<String>,
    pub dimensions: Vec<String>,
    pub aggregation: Option<String>,
}

/// What a query names: events, messages, targets, fields (`s.x`, `s.span.x`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Named {
    pub events: BTreeSet<String>,
    pub messages: BTreeSet<String>,
    pub targets: BTreeSet<String>,
    pub fields: BTreeSet<String>,
}

/// The quoted values compared with `s.<what>)` (`tostring(s.event) == "severity"`).
fn compared(query: &str, what: &str) -> BTreeSet<String> {
    let needle = format!("s.{what}) == \"");
    let mut out = BTreeSet::new();
    let mut rest = query;
    while let Some(i) = rest.find(&needle) {
        rest = &rest[i + needle.len()..];
        if let Some(end) = rest.find('"') {
            out.insert(rest[..end].to_owned());
        }
    }
    out
}

/// Every `s.<field>` (and `s.span.<field>` as `span.<field>`) the query reads.
fn fields(query: &str) -> BTreeSet<String> {
    let bytes = query.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i + 2 < bytes.len() {
        if bytes[i] == b's' && bytes[i + 1] == b'.' && (i == 0 || !ident(bytes[i - 1])) {
            let start = i + 2;
            let mut end = start;
            while end < bytes.len() && ident(bytes[end]) {
                end += 1;
            }
            let mut name = query[start..end].to_owned();
            if name == "span" && bytes.get(end) == Some(&b'.') {
                let mut inner = end + 1;
                while inner < bytes.len() && ident(bytes[inner]) {
                    inner += 1;
                }
                name = format!("span.{}", &query[end + 1..inner]);
                end = inner;
            }
            if !name.is_empty() {
                out.insert(name);
            }
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

pub fn named(query: &str) -> Named {
    Named {
        events: compared(query, "event"),
        messages: compared(query, "message"),
        targets: compared(query, "target"),
        fields: fields(query),
    }
}

/// What is wrong with one query: each problem a message.
pub fn query_violations(query: &NamedQuery, facts: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let at = &query.name;
    let text = &query.query;
    if !text.contains("parse_json(message)") {
        // A platform line: its text must be one the platform facts record.
        let poison = facts["poison_queue"]["message_prefix"]
            .as_str()
            .unwrap_or("\u{0}");
        if !text.contains(poison) {
            problems.push(format!(
                "{at}: reads neither the product's signal lines nor a platform line the facts record"
            ));
        }
        return problems;
    }
    let n = named(text);
    if n.events.is_empty() && n.messages.is_empty() {
        problems.push(format!(
            "{at}: names no event and no message of the catalog"
        ));
    }
    for event in &n.events {
        match catalog::event(event) {
            None => problems.push(format!("{at}: event {event:?} is not one the product logs")),
            Some(spec) if !n.targets.is_empty() && !n.targets.contains(spec.target) => problems
                .push(format!(
                    "{at}: event {event:?} is logged under {}, not {:?}",
                    spec.target, n.targets
                )),
            Some(_) => {}
        }
    }
    for message in &n.messages {
        match catalog::message(message) {
            None => problems.push(format!(
                "{at}: message {message:?} is not one the product logs"
            )),
            Some(spec) if !n.targets.is_empty() && !n.targets.contains(spec.target) => problems
                .push(format!(
                    "{at}: message {message:?} is logged under {}, not {:?}",
                    spec.target, n.targets
                )),
            Some(_) => {}
        }
    }
    for field in &n.fields {
        let known = match field.strip_prefix("span.") {
            Some(inner) => catalog::SPAN_FIELDS.contains(&inner),
            None => {
                catalog::COMMON_FIELDS.contains(&field.as_str())
                    || n.events.iter().any(|e| catalog::has_field(e, field))
                    || n.messages.iter().any(|m| {
                        catalog::message(m)
                            .is_some_and(|spec| spec.fields.contains(&field.as_str()))
                    })
            }
        };
        if !known {
            problems.push(format!(
                "{at}: field {field:?} is not one of {:?} {:?} in the catalog",
                n.events, n.messages
            ));
        }
    }
    if let Some(measure) = &query.measure
        && !text.contains(&format!("{measure} ="))
    {
        problems.push(format!(
            "{at}: its query makes no column {measure:?} to measure"
        ));
    }
    for dimension in &query.dimensions {
        if !text.contains(&format!("{dimension} =")) {
            problems.push(format!(
                "{at}: its query makes no column {dimension:?} to split by"
            ));
        }
    }
    problems
}

/// The text of an expression built from strings and `var`s holding strings (`concat(signals,
/// '''...''')`, or a string): the strings in order, variables resolved.
fn expression_text(file: &BicepFile, node: Node<'_>) -> String {
    if node.kind() == "string" {
        return file.string_literal(node);
    }
    if node.kind() == "identifier" {
        return file
            .declaration("variable_declaration", file.text(node))
            .and_then(|decl| file.assigned_value(decl))
            .map(|value| expression_text(file, value))
            .unwrap_or_default();
    }
    named_children(node)
        .into_iter()
        .map(|child| expression_text(file, child))
        .collect()
}

fn plain(file: &BicepFile, object: Node<'_>, key: &str) -> Option<String> {
    file.property(object, key)
        .and_then(|v| file.plain_string(v))
}

/// The queries of the objects of array variable `var` (each with `name` or `title`, and
/// `query`; alerts also `measure`, `dimensions`, `aggregation`).
pub fn queries_of(file: &BicepFile, var: &str) -> Vec<NamedQuery> {
    let Some(array) = file
        .declaration("variable_declaration", var)
        .and_then(|decl| file.assigned_value(decl))
    else {
        return Vec::new();
    };
    named_children(array)
        .into_iter()
        .filter(|item| item.kind() == "object")
        .filter_map(|object| {
            let name = plain(file, object, "name").or_else(|| plain(file, object, "title"))?;
            let query = expression_text(file, file.property(object, "query")?);
            let dimensions = file
                .property(object, "dimensions")
                .map(|array| {
                    named_children(array)
                        .into_iter()
                        .filter_map(|d| file.plain_string(d))
                        .collect()
                })
                .unwrap_or_default();
            Some(NamedQuery {
                name,
                query,
                measure: plain(file, object, "measure"),
                dimensions,
                aggregation: plain(file, object, "aggregation"),
            })
        })
        .collect()
}

/// Properties set on resources of `resource_type` (`Type@version`) that the type facts do
/// not list, and required ones missing, as messages.
pub fn property_violations(file: &BicepFile, resource_type: &str, facts: &Value) -> Vec<String> {
    let spec = &facts["types"][resource_type];
    let mut problems = Vec::new();
    let listed = |path: &str| -> BTreeSet<String> {
        spec["objects"][path]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    for resource in file.resources_of_type(resource_type) {
        let Some(body) = file.declared_body(resource) else {
            continue;
        };
        let keys: BTreeSet<String> = file
            .object_entries(body)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let allowed: BTreeSet<String> = spec["resource"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        for key in keys.difference(&allowed) {
            problems.push(format!(
                "{}: {resource_type} has no property {key}",
                file.at(resource)
            ));
        }
        for required in spec["required"].as_array().into_iter().flatten() {
            let required = required.as_str().unwrap_or_default();
            if !keys.contains(required) {
                problems.push(format!(
                    "{}: {resource_type} needs {required}",
                    file.at(resource)
                ));
            }
        }
        if let Some(properties) = file.property(body, "properties") {
            check_object(file, properties, "properties", &listed, &mut problems);
            for required in spec["required_properties"].as_array().into_iter().flatten() {
                let required = required.as_str().unwrap_or_default();
                if file.property(properties, required).is_none() {
                    problems.push(format!(
                        "{}: {resource_type} properties need {required}",
                        file.at(properties)
                    ));
                }
            }
        }
    }
    problems
}

/// Checks the keys of an object (or of each object a ternary, an array or a `for` yields,
/// or of a variable's value) at `path` against the facts, and its nested objects.
fn check_object(
    file: &BicepFile,
    node: Node<'_>,
    path: &str,
    listed: &dyn Fn(&str) -> BTreeSet<String>,
    problems: &mut Vec<String>,
) {
    match node.kind() {
        "object" => {
            let allowed = listed(path);
            for (key, value) in file.object_entries(node) {
                if !allowed.contains(&key) {
                    problems.push(format!("{}: {path} has no property {key}", file.at(node)));
                    continue;
                }
                let child = format!("{path}.{key}");
                let element = format!("{child}[]");
                if !listed(&child).is_empty() {
                    check_object(file, value, &child, listed, problems);
                } else if !listed(&element).is_empty() {
                    check_object(file, value, &element, listed, problems);
                }
            }
        }
        "identifier" => {
            if let Some(value) = file
                .declaration("variable_declaration", file.text(node))
                .and_then(|decl| file.assigned_value(decl))
            {
                check_object(file, value, path, listed, problems);
            }
        }
        "for_statement" => {
            // Only what each iteration yields; the loop variable and its source are not objects.
            if let Some(body) = node.child_by_field_name("body") {
                check_object(file, body, path, listed, problems);
            }
        }
        _ => {
            // Arrays, ternaries, parentheses, calls: the objects inside.
            for child in named_children(node) {
                check_object(file, child, path, listed, problems);
            }
        }
    }
}
