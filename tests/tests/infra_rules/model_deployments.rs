//! Rule: the tier settings the handler reads (deployment name, model, tokens per minute) come from the same
//! object the Azure OpenAI module deploys, with TPM = capacity x 1000, and the two tiers use different models.

use tree_sitter::Node;

use super::app_settings::{WrittenSettings, call_arguments, call_name};
use super::bicep::{BicepFile, named_children};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentViolation(pub String);

/// Tiers named by settings of the form `STORMGATE_<TIER>_DEPLOYMENT`, sorted.
pub fn tiers<'n>(setting_names: impl IntoIterator<Item = &'n str>) -> Vec<String> {
    let mut tiers: Vec<String> = setting_names
        .into_iter()
        .filter_map(|name| {
            name.strip_prefix("STORMGATE_")?
                .strip_suffix("_DEPLOYMENT")
                .map(str::to_owned)
        })
        .collect();
    tiers.sort();
    tiers.dedup();
    tiers
}

/// Checks each tier's settings read `<source>.<tier>.{name, model, capacity}` of one module parameter, the
/// TPM as `string(<source>.<tier>.capacity * 1000)`. Returns that parameter's name.
pub fn check_tier_settings(
    file: &BicepFile,
    written: &WrittenSettings<'_>,
    tiers: &[String],
) -> Result<String, Vec<DeploymentViolation>> {
    let mut violations = Vec::new();
    let mut sources = Vec::new();
    for tier in tiers {
        let key = tier.to_lowercase();
        let expectations = [
            ("DEPLOYMENT", "name", false),
            ("MODEL", "model", false),
            ("TPM", "capacity", true),
        ];
        for (suffix, field, is_tpm) in expectations {
            let setting = format!("STORMGATE_{tier}_{suffix}");
            let Some(value) = written.always.get(&setting) else {
                violations.push(DeploymentViolation(format!(
                    "{setting} is not always written"
                )));
                continue;
            };
            let read = if is_tpm {
                tpm_capacity(file, *value)
            } else {
                Some(*value)
            };
            match read.and_then(|expr| member_path(file, expr)).as_deref() {
                Some([source, tier_key, read_field]) if tier_key == &key && read_field == field => {
                    sources.push(source.clone());
                }
                _ => violations.push(DeploymentViolation(format!(
                    "{}: {setting} must be {} of <deployments>.{key}.{field}, found `{}`",
                    file.at(*value),
                    if is_tpm {
                        "string(... * 1000)"
                    } else {
                        "the value"
                    },
                    file.text(*value)
                ))),
            }
        }
    }
    sources.sort();
    sources.dedup();
    match (violations.is_empty(), sources.as_slice()) {
        (true, [source]) => Ok(source.clone()),
        (true, _) => Err(vec![DeploymentViolation(format!(
            "tier settings read from several sources: {sources:?}"
        ))]),
        (false, _) => Err(violations),
    }
}

/// `string(X * 1000)` or `string(1000 * X)` gives X.
fn tpm_capacity<'t>(file: &BicepFile, value: Node<'t>) -> Option<Node<'t>> {
    if value.kind() != "call_expression" || call_name(file, value) != Some("string") {
        return None;
    }
    let [product] = call_arguments(value)[..] else {
        return None;
    };
    if product.kind() != "binary_expression"
        || file.text(product.child_by_field_name("operator")?) != "*"
    {
        return None;
    }
    let left = product.child_by_field_name("left")?;
    let right = product.child_by_field_name("right")?;
    match (file.text(left), file.text(right)) {
        (_, "1000") => Some(left),
        ("1000", _) => Some(right),
        _ => None,
    }
}

/// `a.b.c` as `["a", "b", "c"]`; None for anything that is not a plain member chain.
fn member_path(file: &BicepFile, expr: Node<'_>) -> Option<Vec<String>> {
    match expr.kind() {
        "identifier" => Some(vec![file.text(expr).to_owned()]),
        "member_expression" => {
            let mut path = member_path(file, expr.child_by_field_name("object")?)?;
            path.push(file.text(expr.child_by_field_name("property")?).to_owned());
            Some(path)
        }
        _ => None,
    }
}

/// Checks `main` passes one and the same value to the function app's `source_param` and to the Azure OpenAI
/// module's `deployments`, and that the Azure OpenAI module deploys those entries one at a time as Standard
/// deployments with their own name, model and capacity. Returns the expression `main` passes.
pub fn check_shared_source(
    main: &BicepFile,
    openai: &BicepFile,
    source_param: &str,
) -> Result<String, Vec<DeploymentViolation>> {
    let passed = |module_path: &str, param: &str| {
        main.module(module_path)
            .map(|module| main.module_params(module))
            .and_then(|params| params.into_iter().find(|(name, _)| name == param))
            .map(|(_, value)| main.text(value).to_owned())
    };
    let to_app = passed("modules/functionapp.bicep", source_param);
    let to_openai = passed("modules/openai.bicep", "deployments");
    let mut violations = Vec::new();
    if to_app.is_none() || to_app != to_openai {
        violations.push(DeploymentViolation(format!(
            "main.bicep passes `{}` to the function app's {source_param} but `{}` to the Azure OpenAI deployments",
            to_app.as_deref().unwrap_or("nothing"),
            to_openai.as_deref().unwrap_or("nothing")
        )));
    }
    violations.extend(check_openai_deployments(openai));
    match (violations.is_empty(), to_app) {
        (true, Some(shared)) => Ok(shared),
        _ => Err(violations),
    }
}

fn check_openai_deployments(openai: &BicepFile) -> Vec<DeploymentViolation> {
    let resources = openai.resources_of_type("Microsoft.CognitiveServices/accounts/deployments@");
    let [resource] = resources[..] else {
        return vec![DeploymentViolation(format!(
            "{}: expected one looped deployments resource, found {}",
            openai.path().display(),
            resources.len()
        ))];
    };
    let mut violations = Vec::new();
    let one_at_a_time = openai.decorators(resource).iter().any(|(name, call)| {
        name == "batchSize"
            && call_arguments(*call)
                .first()
                .is_some_and(|arg| openai.text(*arg) == "1")
    });
    if !one_at_a_time {
        violations.push(DeploymentViolation(format!(
            "{}: model deployments must be created one at a time (@batchSize(1))",
            openai.at(resource)
        )));
    }
    let Some(loop_node) = named_children(resource)
        .into_iter()
        .find(|node| node.kind() == "for_statement")
    else {
        violations.push(DeploymentViolation(format!(
            "{}: deployments are not a loop",
            openai.at(resource)
        )));
        return violations;
    };
    let variable = loop_node
        .child_by_field_name("initializer")
        .map(|node| openai.text(node).to_owned())
        .unwrap_or_default();
    let body = loop_node.child_by_field_name("body");
    let expect = |path: &[&str], wanted: String| {
        let found = body.and_then(|body| openai.property_path(body, path));
        match found {
            Some(node) if openai.text(node) == wanted => None,
            _ => Some(DeploymentViolation(format!(
                "{}: {} must be `{wanted}`, found `{}`",
                openai.at(resource),
                path.join("."),
                found.map(|node| openai.text(node)).unwrap_or("nothing")
            ))),
        }
    };
    violations.extend(
        [
            expect(&["name"], format!("{variable}.value.name")),
            expect(&["sku", "name"], "'Standard'".to_owned()),
            expect(&["sku", "capacity"], format!("{variable}.value.capacity")),
            expect(
                &["properties", "model", "name"],
                format!("{variable}.value.model"),
            ),
        ]
        .into_iter()
        .flatten(),
    );
    violations
}

/// Checks the tiers' models differ in `main`'s defaults and under every parameter file.
pub fn check_distinct_models(
    main: &BicepFile,
    param_files: &[&BicepFile],
    source_var: &str,
    tiers: &[String],
) -> Vec<DeploymentViolation> {
    let Some(source) = main
        .declaration("variable_declaration", source_var)
        .and_then(|var| main.assigned_value(var))
        .filter(|value| value.kind() == "object")
    else {
        return vec![DeploymentViolation(format!(
            "{}: `{source_var}` is not an object variable",
            main.path().display()
        ))];
    };
    let models: Vec<(String, Node<'_>)> = tiers
        .iter()
        .filter_map(|tier| {
            let model = main.property_path(source, &[&tier.to_lowercase(), "model"])?;
            Some((tier.clone(), model))
        })
        .collect();
    if models.len() != tiers.len() || models.len() < 2 {
        return vec![DeploymentViolation(format!(
            "{}: `{source_var}` must give a model for each of the tiers {tiers:?}",
            main.path().display()
        ))];
    }
    let configurations = std::iter::once(("defaults".to_owned(), None)).chain(
        param_files
            .iter()
            .map(|file| (file.path().display().to_string(), Some(*file))),
    );
    let mut violations = Vec::new();
    for (configuration, param_file) in configurations {
        let resolved: Vec<(String, Option<String>)> = models
            .iter()
            .map(|(tier, model)| (tier.clone(), model_value(main, *model, param_file)))
            .collect();
        for (index, (tier, value)) in resolved.iter().enumerate() {
            let Some(value) = value else {
                violations.push(DeploymentViolation(format!(
                    "{configuration}: cannot tell which model the {tier} tier deploys"
                )));
                continue;
            };
            for (other_tier, other_value) in &resolved[index + 1..] {
                if other_value.as_deref() == Some(value.as_str()) {
                    violations.push(DeploymentViolation(format!(
                        "{configuration}: tiers {tier} and {other_tier} both deploy model `{value}` and would share quota"
                    )));
                }
            }
        }
    }
    violations
}

/// A model expression's value: a literal, or a `main` parameter's value in the parameter file (or its default).
fn model_value(
    main: &BicepFile,
    model: Node<'_>,
    param_file: Option<&BicepFile>,
) -> Option<String> {
    if let Some(literal) = main.plain_string(model) {
        return Some(literal);
    }
    if model.kind() != "identifier" {
        return None;
    }
    let name = main.text(model);
    let assigned = param_file.and_then(|file| {
        file.declaration("variable_declaration", name)
            .and_then(|assignment| file.assigned_value(assignment))
            .and_then(|value| file.plain_string(value))
    });
    assigned.or_else(|| {
        main.declaration("parameter_declaration", name)
            .and_then(|param| main.assigned_value(param))
            .and_then(|default| main.plain_string(default))
    })
}
