//! Rule: no secret value sits in a Bicep default or a parameter file. Secure parameters have no default,
//! parameter files give them values only from the deploying environment, parameters named like secrets are
//! secure, no literal looks like a key, password or connection string, and no output hands out keys.

use tree_sitter::Node;

use super::app_settings::{call_arguments, call_name};
use super::bicep::{BicepFile, INTERPOLATION, descendants};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretViolation(pub String);

/// Parameter name fragments that mean the value is a credential.
const SECRET_NAME_PARTS: &[&str] = &[
    "password",
    "secret",
    "apikey",
    "accountkey",
    "accesskey",
    "connectionstring",
    "sastoken",
];

/// Checks one `.bicep` file.
pub fn check_template(file: &BicepFile) -> Vec<SecretViolation> {
    let mut violations = Vec::new();
    for param in file.declarations("parameter_declaration") {
        let name = file.declared_name(param).unwrap_or_default();
        let secure = is_secure(file, param);
        let default = file.assigned_value(param);
        if secure && let Some(default) = default {
            violations.push(SecretViolation(format!(
                "{}: secure parameter `{name}` has a default `{}`",
                file.at(default),
                file.text(default)
            )));
        }
        if !secure && looks_like_secret_name(name) {
            violations.push(SecretViolation(format!(
                "{}: parameter `{name}` holds a credential but is not @secure()",
                file.at(param)
            )));
        }
        if let Some(default) = default {
            violations.extend(secret_literals(file, default));
        }
    }
    violations.extend(embedded_credentials(file));
    violations.extend(key_outputs(file));
    violations
}

/// Checks a `.bicepparam` file against the template it is `using`.
pub fn check_param_file(params: &BicepFile, template: &BicepFile) -> Vec<SecretViolation> {
    let mut violations = secret_literals(params, params.root());
    for assignment in params.declarations("variable_declaration") {
        let name = params.declared_name(assignment).unwrap_or_default();
        let is_secure_param = template
            .declaration("parameter_declaration", name)
            .is_some_and(|param| is_secure(template, param));
        let Some(value) = params.assigned_value(assignment) else {
            continue;
        };
        if is_secure_param && !is_read_from_environment(params, value) {
            violations.push(SecretViolation(format!(
                "{}: secure parameter `{name}` must come from readEnvironmentVariable('NAME'[, '']), not `{}`",
                params.at(value),
                params.text(value)
            )));
        }
    }
    violations
}

fn is_secure(file: &BicepFile, param: Node<'_>) -> bool {
    file.decorators(param)
        .iter()
        .any(|(name, _)| name == "secure")
}

fn looks_like_secret_name(name: &str) -> bool {
    let lower = name.to_lowercase();
    SECRET_NAME_PARTS.iter().any(|part| lower.contains(part))
}

/// `readEnvironmentVariable('NAME')`, optionally with an empty fallback: the value never lives in the file.
fn is_read_from_environment(file: &BicepFile, value: Node<'_>) -> bool {
    if value.kind() != "call_expression"
        || call_name(file, value) != Some("readEnvironmentVariable")
    {
        return false;
    }
    match call_arguments(value)[..] {
        [variable] => file.plain_string(variable).is_some(),
        [variable, fallback] => {
            file.plain_string(variable).is_some()
                && file.plain_string(fallback).as_deref() == Some("")
        }
        _ => false,
    }
}

/// String literals below `node` that look like a credential.
fn secret_literals(file: &BicepFile, node: Node<'_>) -> Vec<SecretViolation> {
    descendants(node)
        .into_iter()
        .filter(|node| node.kind() == "string")
        .filter_map(|string| {
            let reason = looks_like_secret(&file.string_literal(string))?;
            Some(SecretViolation(format!(
                "{}: {reason}: `{}`",
                file.at(string),
                file.text(string)
            )))
        })
        .collect()
}

/// Credentials written into any string of a template, e.g. `AccountKey=abc...` (computed `${...}` is fine).
fn embedded_credentials(file: &BicepFile) -> Vec<SecretViolation> {
    descendants(file.root())
        .into_iter()
        .filter(|node| node.kind() == "string")
        .filter_map(|string| {
            let reason = embedded_credential(&file.string_literal(string))?;
            Some(SecretViolation(format!(
                "{}: {reason}: `{}`",
                file.at(string),
                file.text(string)
            )))
        })
        .collect()
}

fn key_outputs(file: &BicepFile) -> Vec<SecretViolation> {
    file.declarations("output_declaration")
        .into_iter()
        .filter(|output| {
            let text = file.text(*output);
            text.contains("listKeys(")
                || text.contains("listSecrets(")
                || text.contains("listConnectionStrings(")
        })
        .map(|output| SecretViolation(format!("{}: output hands out keys", file.at(output))))
        .collect()
}

/// Why a literal looks like a secret, if it does.
pub fn looks_like_secret(literal: &str) -> Option<&'static str> {
    if let Some(reason) = embedded_credential(literal) {
        return Some(reason);
    }
    let trimmed = literal.trim();
    if trimmed.len() == 32 && trimmed.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Some("looks like an API key");
    }
    let base64_body = trimmed.trim_end_matches('=');
    if trimmed.len() >= 40
        && trimmed.ends_with('=')
        && base64_body
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'+' || byte == b'/')
    {
        return Some("looks like a base64 key");
    }
    None
}

/// Credentials inside a longer string; a `${...}` right after the marker is computed, not written.
fn embedded_credential(literal: &str) -> Option<&'static str> {
    let lower = literal.to_lowercase();
    const MARKERS: &[(&str, &str)] = &[
        ("accountkey=", "connection string with an account key"),
        (
            "sharedaccesskey=",
            "connection string with a shared access key",
        ),
        ("password=", "connection string with a password"),
        ("pwd=", "connection string with a password"),
        ("sig=", "SAS token signature"),
    ];
    for (marker, reason) in MARKERS {
        for (position, _) in lower.match_indices(marker) {
            let value = &literal[position + marker.len()..];
            if value
                .chars()
                .next()
                .is_some_and(|c| c != INTERPOLATION && c != ';')
            {
                return Some(reason);
            }
        }
    }
    if lower.contains("-----begin") && lower.contains("private key") {
        return Some("private key");
    }
    if has_url_credentials(literal) {
        return Some("URL with a password");
    }
    None
}

/// `scheme://user:password@host`, with a literal password.
fn has_url_credentials(literal: &str) -> bool {
    let Some((_, rest)) = literal.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let Some((user_info, _host)) = authority.rsplit_once('@') else {
        return false;
    };
    user_info
        .split_once(':')
        .is_some_and(|(_, password)| !password.is_empty() && !password.contains(INTERPOLATION))
}

/// Checks every secure parameter of a template that deploys modules is guarded: a secret missing at deploy time
/// must fail the deployment, not a handler that then cannot start. A secure parameter is guarded when it has
/// `@minLength(n)` with n ≥ 1, or when every module parameter it reaches goes through a variable
/// `condition ? fail('...') : <parameter>` (or the branches swapped) whose condition names the parameter.
pub fn check_secret_guards(main: &BicepFile) -> Vec<SecretViolation> {
    let mut violations = Vec::new();
    for param in main.declarations("parameter_declaration") {
        if !is_secure(main, param) {
            continue;
        }
        let name = main.declared_name(param).unwrap_or_default();
        let min_length = main.decorators(param).into_iter().any(|(decorator, call)| {
            decorator == "minLength"
                && call_arguments(call)
                    .first()
                    .and_then(|arg| main.text(*arg).parse::<u64>().ok())
                    .is_some_and(|n| n >= 1)
        });
        if min_length {
            continue;
        }
        let guards: Vec<&str> = main
            .declarations("variable_declaration")
            .into_iter()
            .filter(|var| {
                main.assigned_value(*var)
                    .is_some_and(|value| is_fail_guard(main, value, name))
            })
            .filter_map(|var| main.declared_name(var))
            .collect();
        let mut passed = 0;
        for module in main.declarations("module_declaration") {
            for (_, value) in main.module_params(module) {
                let mentions = descendants(value)
                    .into_iter()
                    .any(|node| is_reference(main, node, name));
                if mentions {
                    passed += 1;
                    violations.push(SecretViolation(format!(
                        "{}: secure parameter `{name}` reaches a module without a fail() guard or @minLength(1)",
                        main.at(value)
                    )));
                }
                let guarded = descendants(value)
                    .into_iter()
                    .any(|node| guards.iter().any(|guard| is_reference(main, node, guard)));
                passed += usize::from(guarded);
            }
        }
        if passed == 0 {
            violations.push(SecretViolation(format!(
                "{}: secure parameter `{name}` is never passed on, guarded or not",
                main.at(param)
            )));
        }
    }
    violations
}

/// `cond ? fail(...) : name` or `cond ? name : fail(...)`, with `name` in `cond`.
fn is_fail_guard(file: &BicepFile, value: Node<'_>, name: &str) -> bool {
    if value.kind() != "ternary_expression" {
        return false;
    }
    let (Some(condition), Some(yes), Some(no)) = (
        value.child_by_field_name("condition"),
        value.child_by_field_name("consequence"),
        value.child_by_field_name("alternative"),
    ) else {
        return false;
    };
    let fails = |branch: Node<'_>| {
        branch.kind() == "call_expression" && call_name(file, branch) == Some("fail")
    };
    let is_name = |branch: Node<'_>| file.text(branch) == name;
    let named_in_condition = descendants(condition)
        .into_iter()
        .any(|node| is_reference(file, node, name));
    named_in_condition && ((fails(yes) && is_name(no)) || (is_name(yes) && fails(no)))
}

/// Whether `node` refers to the declaration `name` (an identifier that is not an object key).
fn is_reference(file: &BicepFile, node: Node<'_>, name: &str) -> bool {
    let is_key = node.parent().is_some_and(|parent| {
        parent.kind() == "object_property"
            && parent
                .named_child(0)
                .is_some_and(|key| key.id() == node.id())
    });
    node.kind() == "identifier" && !is_key && file.text(node) == name
}
