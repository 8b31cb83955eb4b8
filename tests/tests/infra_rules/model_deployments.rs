//! Rule: the tier settings the handler reads (deployment name, model, tokens and requests per minute, prices)
//! come from the same object the Azure OpenAI module deploys, with TPM = capacity x 1000 and RPM = capacity x the
//! tier's requests per unit, the deployment type is the tier's own, and the two tiers use different models.

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

/// How a tier setting must be derived from `<source>.<tier>`.
#[derive(Debug, Clone, Copy)]
enum Derived {
    /// The field itself.
    Field(&'static str),
    /// `string(<field> * 1000)`.
    Thousands(&'static str),
    /// `string(<field> * <field>)`, either order.
    Product(&'static str, &'static str),
}

/// The settings of one tier and what each is derived from.
const TIER_SETTINGS: [(&str, Derived); 6] = [
    ("DEPLOYMENT", Derived::Field("name")),
    ("MODEL", Derived::Field("model")),
    ("TPM", Derived::Thousands("capacity")),
    ("RPM", Derived::Product("capacity", "rpmPerUnit")),
    ("PRICE_INPUT_PER_1M", Derived::Field("priceInputPer1M")),
    ("PRICE_OUTPUT_PER_1M", Derived::Field("priceOutputPer1M")),
];

/// Checks each tier's settings read `<source>.<tier>.{name, model, capacity, rpmPerUnit, prices}` of one
/// module parameter: the TPM as `string(<source>.<tier>.capacity * 1000)`, the RPM as
/// `string(<source>.<tier>.capacity * <source>.<tier>.rpmPerUnit)`. Returns that parameter's name.
pub fn check_tier_settings(
    file: &BicepFile,
    written: &WrittenSettings<'_>,
    tiers: &[String],
) -> Result<String, Vec<DeploymentViolation>> {
    let mut violations = Vec::new();
    let mut sources = Vec::new();
    for tier in tiers {
        let key = tier.to_lowercase();
        for (suffix, derived) in TIER_SETTINGS {
            let setting = format!("STORMGATE_{tier}_{suffix}");
            let Some(value) = written.always.get(&setting) else {
                violations.push(DeploymentViolation(format!(
                    "{setting} is not always written"
                )));
                continue;
            };
            let reads_path = |path: Option<Vec<String>>, field: &str| match path.as_deref() {
                Some([source, tier_key, read_field]) if tier_key == &key && read_field == field => {
                    Some(source.clone())
                }
                _ => None,
            };
            let reads = |expr: Node<'_>, field: &str| reads_path(member_path(file, expr), field);
            let (found, wanted) = match derived {
                Derived::Field(field) => (
                    reads(*value, field).into_iter().collect::<Vec<_>>(),
                    format!("<deployments>.{key}.{field}"),
                ),
                Derived::Thousands(field) => (
                    tpm_capacity(file, *value)
                        .and_then(|capacity| reads(capacity, field))
                        .into_iter()
                        .collect(),
                    format!("string(<deployments>.{key}.{field} * 1000)"),
                ),
                Derived::Product(a, b) => (
                    product_paths(file, *value)
                        .and_then(|(left, right)| {
                            let both = |x: &str, y: &str| {
                                Some(vec![
                                    reads_path(Some(left.clone()), x)?,
                                    reads_path(Some(right.clone()), y)?,
                                ])
                            };
                            both(a, b).or_else(|| both(b, a))
                        })
                        .unwrap_or_default(),
                    format!("string(<deployments>.{key}.{a} * <deployments>.{key}.{b})"),
                ),
            };
            if found.is_empty() {
                violations.push(DeploymentViolation(format!(
                    "{}: {setting} must be {wanted}, found `{}`",
                    file.at(*value),
                    file.text(*value)
                )));
            }
            sources.extend(found);
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

/// `string(A * B)` gives (A, B).
fn product_of<'t>(file: &BicepFile, value: Node<'t>) -> Option<(Node<'t>, Node<'t>)> {
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
    Some((
        product.child_by_field_name("left")?,
        product.child_by_field_name("right")?,
    ))
}

/// `string(a.b.c * d.e.f)` gives the member paths of both factors.
///
/// tree-sitter-bicep 1.1 binds a member access after `*` to the whole product (`a.b * c.d` parses as
/// `(a.b * c).d`), where Bicep binds it to its own operand: the trailing members are moved back to the right factor.
fn product_paths(file: &BicepFile, value: Node<'_>) -> Option<(Vec<String>, Vec<String>)> {
    if value.kind() != "call_expression" || call_name(file, value) != Some("string") {
        return None;
    }
    let [mut argument] = call_arguments(value)[..] else {
        return None;
    };
    let mut trailing = Vec::new();
    while argument.kind() == "member_expression" {
        trailing.push(
            file.text(argument.child_by_field_name("property")?)
                .to_owned(),
        );
        argument = argument.child_by_field_name("object")?;
    }
    if argument.kind() != "binary_expression"
        || file.text(argument.child_by_field_name("operator")?) != "*"
    {
        return None;
    }
    let left = member_path(file, argument.child_by_field_name("left")?)?;
    let mut right = member_path(file, argument.child_by_field_name("right")?)?;
    right.extend(trailing.into_iter().rev());
    Some((left, right))
}

/// `string(X * 1000)` or `string(1000 * X)` gives X.
fn tpm_capacity<'t>(file: &BicepFile, value: Node<'t>) -> Option<Node<'t>> {
    let (left, right) = product_of(file, value)?;
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
/// module's `deployments`, and that the Azure OpenAI module deploys those entries one at a time, each with its
/// own name, model, deployment type (sku) and capacity. Returns the expression `main` passes.
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
            expect(&["sku", "name"], format!("{variable}.value.sku")),
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

/// Checks the tiers' models differ in `main`'s defaults and under every parameter file. The models sit in the
/// object `source` (a parameter's default or a variable) as `<tier>.model`: a literal, or a parameter of `main`
/// (resolved in each parameter file, else by its default). A parameter file may also assign the whole object.
pub fn check_distinct_models(
    main: &BicepFile,
    param_files: &[&BicepFile],
    source: &str,
    tiers: &[String],
) -> Vec<DeploymentViolation> {
    let Some(object) = ["variable_declaration", "parameter_declaration"]
        .into_iter()
        .find_map(|kind| main.declaration(kind, source))
        .and_then(|decl| main.assigned_value(decl))
        .filter(|value| value.kind() == "object")
    else {
        return vec![DeploymentViolation(format!(
            "{}: `{source}` is not an object variable or parameter default",
            main.path().display()
        ))];
    };
    if tiers.len() < 2
        || tiers.iter().any(|tier| {
            main.property_path(object, &[&tier.to_lowercase(), "model"])
                .is_none()
        })
    {
        return vec![DeploymentViolation(format!(
            "{}: `{source}` must give a model for each of the tiers {tiers:?}",
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
        // A parameter file that assigns the whole object replaces the defaults.
        let assigned = param_file.and_then(|file| {
            file.declaration("variable_declaration", source)
                .and_then(|assignment| file.assigned_value(assignment))
                .filter(|value| value.kind() == "object")
                .map(|value| (file, value))
        });
        let resolved: Vec<(String, Option<String>)> = tiers
            .iter()
            .map(|tier| {
                let path = [tier.to_lowercase(), "model".to_owned()];
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                let value = match assigned {
                    Some((file, object)) => file
                        .property_path(object, &path)
                        .and_then(|model| file.plain_string(model)),
                    None => main
                        .property_path(object, &path)
                        .and_then(|model| model_value(main, model, param_file)),
                };
                (tier.clone(), value)
            })
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
