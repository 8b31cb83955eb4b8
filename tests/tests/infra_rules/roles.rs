//! Rule: role assignments use the documented built-in role definition ids, each under its documented name.

use super::bicep::{BicepFile, descendants, named_children};

/// Built-in roles the app's identity needs, with the ids the Azure built-in roles reference documents
/// (learn.microsoft.com/azure/role-based-access-control/built-in-roles: ai-machine-learning, security, storage,
/// monitor).
pub const DOCUMENTED_ROLES: &[(&str, &str)] = &[
    (
        "Cognitive Services OpenAI User",
        "5e0bd9bd-7b93-4f28-af87-19fc36ad61bd",
    ),
    (
        "Key Vault Secrets User",
        "4633458b-17de-408a-b874-0445c86b69e6",
    ),
    (
        "Storage Blob Data Owner",
        "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
    ),
    (
        "Storage Queue Data Contributor",
        "974c5e8b-45b9-4653-ba55-5f855dd0fb88",
    ),
    (
        "Storage Table Data Contributor",
        "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
    ),
    (
        "Monitoring Metrics Publisher",
        "3913510d-42f4-4e42-8a64-420c390055eb",
    ),
];

/// Roles every deployment must grant: Azure OpenAI, Key Vault references, identity-based host storage,
/// Entra-only telemetry.
pub const REQUIRED_ROLES: &[&str] = &[
    "Cognitive Services OpenAI User",
    "Key Vault Secrets User",
    "Storage Blob Data Owner",
    "Storage Queue Data Contributor",
    "Storage Table Data Contributor",
    "Monitoring Metrics Publisher",
];

/// The variable that maps role names to ids; assignments must go through it.
pub const ROLE_TABLE: &str = "builtInRoles";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleViolation(pub String);

pub fn check_roles(files: &[&BicepFile]) -> Vec<RoleViolation> {
    let tables: Vec<(&BicepFile, tree_sitter::Node<'_>)> = files
        .iter()
        .filter_map(|file| {
            let value = file
                .declaration("variable_declaration", ROLE_TABLE)
                .and_then(|var| file.assigned_value(var))?;
            Some((*file, value))
        })
        .collect();
    let mut violations = Vec::new();
    match tables.as_slice() {
        [(file, table)] => violations.extend(check_role_table(file, *table)),
        _ => violations.push(RoleViolation(format!(
            "expected one `{ROLE_TABLE}` variable, found {}",
            tables.len()
        ))),
    }
    for file in files {
        violations.extend(stray_role_ids(file));
        violations.extend(assignments_outside_table(file));
    }
    violations
}

fn check_role_table(file: &BicepFile, table: tree_sitter::Node<'_>) -> Vec<RoleViolation> {
    if table.kind() != "object" {
        return vec![RoleViolation(format!(
            "{}: `{ROLE_TABLE}` must be an object",
            file.at(table)
        ))];
    }
    let entries = file.object_entries(table);
    let mut violations: Vec<RoleViolation> = entries
        .iter()
        .filter_map(|(name, value)| {
            let id = file.plain_string(*value).unwrap_or_default();
            match DOCUMENTED_ROLES
                .iter()
                .find(|(documented, _)| documented == name)
            {
                Some((_, documented_id)) if id.eq_ignore_ascii_case(documented_id) => None,
                Some((_, documented_id)) => Some(RoleViolation(format!(
                    "{}: `{name}` is {documented_id}, not `{id}`",
                    file.at(*value)
                ))),
                None => Some(RoleViolation(format!(
                    "{}: `{name}` is not a documented built-in role this app needs",
                    file.at(*value)
                ))),
            }
        })
        .collect();
    violations.extend(
        REQUIRED_ROLES
            .iter()
            .filter(|required| !entries.iter().any(|(name, _)| name == *required))
            .map(|required| {
                RoleViolation(format!(
                    "`{ROLE_TABLE}` lacks the required role `{required}`"
                ))
            }),
    );
    violations
}

/// A GUID written anywhere but the role table could be a role id that escaped the check.
fn stray_role_ids(file: &BicepFile) -> Vec<RoleViolation> {
    let table = file
        .declaration("variable_declaration", ROLE_TABLE)
        .map(|var| var.byte_range());
    descendants(file.root())
        .into_iter()
        .filter(|node| node.kind() == "string")
        .filter(|node| {
            !table
                .as_ref()
                .is_some_and(|range| range.contains(&node.start_byte()))
        })
        .filter(|node| contains_guid(&file.string_literal(*node)))
        .map(|node| {
            RoleViolation(format!(
                "{}: id `{}` outside `{ROLE_TABLE}`",
                file.at(node),
                file.text(node)
            ))
        })
        .collect()
}

fn assignments_outside_table(file: &BicepFile) -> Vec<RoleViolation> {
    descendants(file.root())
        .into_iter()
        .filter(|node| node.kind() == "object_property")
        .filter_map(|property| {
            let parts = named_children(property);
            let key = parts.first()?;
            let value = parts.get(1)?;
            (file.text(*key) == "roleDefinitionId"
                && !file.text(*value).contains(&format!("{ROLE_TABLE}[")))
            .then(|| {
                RoleViolation(format!(
                    "{}: roleDefinitionId must come from `{ROLE_TABLE}`, found `{}`",
                    file.at(*value),
                    file.text(*value)
                ))
            })
        })
        .collect()
}

fn contains_guid(text: &str) -> bool {
    let bytes = text.as_bytes();
    (0..bytes.len()).any(|start| is_guid_like(&bytes[start..]))
}

/// 8-4-4-4 hex digits and a last group of 8 to 16: a role id, or a mistyped one.
fn is_guid_like(bytes: &[u8]) -> bool {
    let mut position = 0;
    for length in [8, 4, 4, 4] {
        let Some(group) = bytes.get(position..position + length) else {
            return false;
        };
        if !group.iter().all(u8::is_ascii_hexdigit) || bytes.get(position + length) != Some(&b'-') {
            return false;
        }
        position += length + 1;
    }
    let last_group = bytes[position..]
        .iter()
        .take_while(|byte| byte.is_ascii_hexdigit())
        .count();
    (8..=16).contains(&last_group)
}
