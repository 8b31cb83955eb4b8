//! Rule: every module call passes parameters the module declares, and every module parameter without a
//! default. There is no Bicep compiler in the test run, so this catches a misspelt or forgotten parameter.

use std::path::Path;

use super::bicep::{BicepFile, named_children};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleViolation(pub String);

/// Checks each `module ... 'path'` of `caller` against the module file it names.
pub fn check_module_calls(caller: &BicepFile) -> anyhow::Result<Vec<ModuleViolation>> {
    let base = caller.path().parent().unwrap_or(Path::new("."));
    let mut violations = Vec::new();
    for module in caller.declarations("module_declaration") {
        let Some(source) = named_children(module)
            .into_iter()
            .find(|child| child.kind() == "string")
            .and_then(|source| caller.plain_string(source))
        else {
            continue;
        };
        let callee = BicepFile::read(&base.join(&source))?;
        let declared: Vec<(&str, bool)> = callee
            .declarations("parameter_declaration")
            .into_iter()
            .filter_map(|param| {
                let name = callee.declared_name(param)?;
                Some((name, callee.assigned_value(param).is_some()))
            })
            .collect();
        let passed: Vec<String> = caller
            .module_params(module)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        violations.extend(
            passed
                .iter()
                .filter(|name| !declared.iter().any(|(declared, _)| declared == name))
                .map(|name| {
                    ModuleViolation(format!(
                        "{}: `{source}` has no parameter `{name}`",
                        caller.at(module)
                    ))
                }),
        );
        violations.extend(
            declared
                .iter()
                .filter(|(name, has_default)| {
                    !has_default && !passed.iter().any(|passed| passed == name)
                })
                .map(|(name, _)| {
                    ModuleViolation(format!(
                        "{}: `{source}` needs parameter `{name}`",
                        caller.at(module)
                    ))
                }),
        );
    }
    Ok(violations)
}
