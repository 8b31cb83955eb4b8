//! Checks of the Bicep in `infra/` that need no Azure: it parses, it writes exactly the app settings the
//! handler knows, the governor's budgets equal the deployed capacity, the tiers deploy different models, role
//! ids are the documented built-in ones, no secret lives in a default or a parameter file, every setting and
//! queue the function definitions use is deployed, modules get exactly their parameters, and API versions are
//! stable, and every resource has the shape Azure's published type definition gives its type at its API
//! version (`tests/fixtures/platform/arm-resource-types.json`). Every rule is also shown rejecting a broken fixture
//! from `tests/fixtures/infra/`.

use crate::infra_rules;

use anyhow::{Context, anyhow};
use infra_rules::alerts::{NamedQuery, named, property_violations, queries_of, query_violations};
use infra_rules::api_versions::{PREVIEW_EXCEPTIONS, preview_api_versions};
use infra_rules::app_settings::{
    KnownSetting, Needed, SettingsViolation, WrittenSettings, settings_violations, written_settings,
};
use infra_rules::bicep::{BicepFile, bicep_files_under, fixtures_dir, infra_dir, read_all};
use infra_rules::function_bindings::{binding_needs, check_bindings};
use infra_rules::model_deployments::{
    check_distinct_models, check_shared_source, check_tier_settings, tiers,
};
use infra_rules::module_params::check_module_calls;
use infra_rules::resource_types::{TypeIndex, check_resource_types, declared_resource_types};
use infra_rules::roles::check_roles;
use infra_rules::secrets::{check_param_file, check_secret_guards, check_template};
use infra_rules::syntax::syntax_problems;
use stormgate_handlers::config::{ReadBy, Requirement, SETTINGS};

fn infra_file(relative: &str) -> anyhow::Result<BicepFile> {
    BicepFile::read(&infra_dir().join(relative))
}

fn fixture(name: &str) -> anyhow::Result<BicepFile> {
    BicepFile::read(&fixtures_dir().join(name))
}

fn type_index() -> anyhow::Result<TypeIndex> {
    TypeIndex::load(&fixtures_dir().join("../platform/arm-resource-types.json"))
}

fn param_files() -> anyhow::Result<Vec<BicepFile>> {
    ["main.dev.bicepparam", "main.prod.bicepparam"]
        .into_iter()
        .map(infra_file)
        .collect()
}

fn settings_of(file: &BicepFile) -> anyhow::Result<WrittenSettings<'_>> {
    written_settings(file).map_err(|reason| anyhow!(reason))
}

/// The handler's settings table, as the settings rule reads it: what the handler needs at start-up must be
/// written on every path, what the host needs on the plans that take it, the rest when configured.
fn handler_settings() -> Vec<KnownSetting> {
    SETTINGS
        .iter()
        .map(|spec| KnownSetting {
            name: spec.name.to_owned(),
            needed: match (spec.required, spec.read_by) {
                (Requirement::Required, ReadBy::Handler) => Needed::AtStartUp,
                (Requirement::Required, ReadBy::Host) => Needed::ByTheHost,
                (Requirement::Optional | Requirement::RequiredWhen(_), _) => Needed::Optional,
            },
        })
        .collect()
}

/// The tiers the handler reads settings for (`STORMGATE_<TIER>_DEPLOYMENT`).
fn tier_names() -> Vec<String> {
    tiers(SETTINGS.iter().map(|spec| spec.name))
}

/// A small settings table for the fixtures: one required and one optional setting.
fn fixture_settings() -> Vec<KnownSetting> {
    vec![
        KnownSetting {
            name: "STORMGATE_REDIS_URL".into(),
            needed: Needed::AtStartUp,
        },
        KnownSetting {
            name: "RUST_LOG".into(),
            needed: Needed::Optional,
        },
    ]
}

fn messages<T>(violations: &[T], text: impl Fn(&T) -> &str) -> Vec<String> {
    violations.iter().map(|v| text(v).to_owned()).collect()
}

// ---- syntax -----------------------------------------------------------------------------------------------

#[test]
fn every_infra_bicep_source_parses_without_syntax_errors() -> anyhow::Result<()> {
    let files = bicep_files_under(&infra_dir())?;
    assert!(
        files.len() >= 10,
        "expected main, modules and parameter files, found {files:?}"
    );
    for path in files {
        let file = BicepFile::read(&path)?;
        assert_eq!(syntax_problems(&file), vec![], "{}", path.display());
    }
    Ok(())
}

#[test]
fn syntax_rule_rejects_an_untyped_parameter_and_an_unclosed_resource() -> anyhow::Result<()> {
    let problems = syntax_problems(&fixture("syntax_error.bicep")?);
    assert!(
        problems
            .iter()
            .any(|problem| problem.what.starts_with("unexpected")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|problem| problem.what == "missing }"),
        "{problems:?}"
    );
    Ok(())
}

#[test]
fn every_resource_uses_a_stable_api_version() -> anyhow::Result<()> {
    for file in read_all(&infra_dir())? {
        assert_eq!(preview_api_versions(&file), Vec::<String>::new());
    }
    Ok(())
}

#[test]
fn every_preview_api_version_taken_has_no_newer_stable_version_in_the_type_index()
-> anyhow::Result<()> {
    let index = type_index()?;
    for (declared, reason) in PREVIEW_EXCEPTIONS {
        let (resource_type, preview) = declared.split_once('@').context("type@version")?;
        let stable = index
            .stable_versions(resource_type)
            .with_context(|| format!("{declared}: the type index records no stable versions"))?;
        let preview_date = &preview[..10];
        assert!(
            stable.iter().all(|version| version.as_str() < preview_date),
            "{declared} ({reason}): the index has stable versions {stable:?}"
        );
    }
    Ok(())
}

#[test]
fn api_version_rule_rejects_a_preview_version() -> anyhow::Result<()> {
    let source =
        "resource cache 'Microsoft.Cache/redisEnterprise@2024-09-01-preview' = {\n  name: 'c'\n}\n";
    let file = BicepFile::parse("preview.bicep", source.to_owned())?;
    let found = preview_api_versions(&file);
    assert_eq!(
        found,
        vec!["preview.bicep:1: Microsoft.Cache/redisEnterprise@2024-09-01-preview".to_owned()]
    );
    Ok(())
}

#[test]
fn param_file_assignments_parse_as_declarations_of_their_template_parameters() -> anyhow::Result<()>
{
    let main = infra_file("main.bicep")?;
    for params in param_files()? {
        let assignments = params.declarations("variable_declaration");
        assert!(
            assignments.len() > 20,
            "only {} assignments",
            assignments.len()
        );
        for assignment in assignments {
            let name = params
                .declared_name(assignment)
                .context("unnamed assignment")?;
            assert!(
                main.declaration("parameter_declaration", name).is_some(),
                "{name} in {} is not a parameter of main.bicep",
                params.path().display()
            );
        }
    }
    Ok(())
}

#[test]
fn main_passes_each_module_exactly_the_parameters_it_declares() -> anyhow::Result<()> {
    let main = infra_file("main.bicep")?;
    assert_eq!(main.declarations("module_declaration").len(), 12);
    assert_eq!(check_module_calls(&main)?, vec![]);
    Ok(())
}

#[test]
fn module_rule_rejects_a_misspelt_and_a_missing_parameter() -> anyhow::Result<()> {
    let found = messages(&check_module_calls(&fixture("module_call.bicep")?)?, |v| {
        &v.0
    });
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].contains("no parameter `tag`"), "{found:?}");
    assert!(found[1].contains("needs parameter `tags`"), "{found:?}");
    assert!(found[2].contains("needs parameter `name`"), "{found:?}");
    Ok(())
}

// ---- resource types against Azure's published definitions ------------------------------------------------

#[test]
fn every_resource_has_the_shape_its_published_type_gives_it() -> anyhow::Result<()> {
    let index = type_index()?;
    let mut violations = Vec::new();
    let mut checked = 0;
    for file in read_all(&infra_dir())? {
        checked += declared_resource_types(&file).len();
        violations.extend(check_resource_types(&file, &index));
    }
    assert!(checked >= 25, "only {checked} resources declared");
    let found = messages(&violations, |v| &v.0);
    assert_eq!(found, Vec::<String>::new());
    Ok(())
}

#[test]
fn type_index_holds_exactly_the_resource_types_infra_declares() -> anyhow::Result<()> {
    let index = type_index()?;
    let mut declared: Vec<String> = read_all(&infra_dir())?
        .iter()
        .flat_map(declared_resource_types)
        .collect();
    declared.sort();
    declared.dedup();
    let mut indexed = index.resource_types();
    indexed.sort();
    assert_eq!(
        indexed, declared,
        "re-run scripts/platform/extract_arm_types.py against github.com/Azure/bicep-types-az"
    );
    assert!(index.source_commit().is_some_and(|c| c.len() == 40));
    Ok(())
}

#[test]
fn resource_type_rule_rejects_missing_unknown_read_only_and_mistyped_properties()
-> anyhow::Result<()> {
    let found = messages(
        &check_resource_types(&fixture("resource_types.bicep")?, &type_index()?),
        |v| &v.0,
    );
    let expected = [
        "redisEnterprise@2025-07-01 properties: required property `publicNetworkAccess` is missing",
        "properties.sku.name: 'Standard' is none of [\"premium\", \"standard\"]",
        "`enableRbacAuthorisation` is not a property of the type",
        "properties.customerId: is read-only",
        "properties.value: an object where the type wants string",
        "Microsoft.Web/staticSites@2024-04-01 is not in the type index",
    ];
    for part in expected {
        assert!(found.iter().any(|m| m.contains(part)), "{part}: {found:#?}");
    }
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    Ok(())
}

// ---- app settings -----------------------------------------------------------------------------------------

#[test]
fn function_app_writes_every_setting_the_handler_needs_and_none_it_does_not_know()
-> anyhow::Result<()> {
    let app = infra_file("modules/functionapp.bicep")?;
    assert_eq!(settings_violations(&app, &handler_settings()), vec![]);
    Ok(())
}

#[test]
fn handler_settings_table_marks_start_up_settings_the_rule_enforces() {
    let needed = handler_settings();
    let at_start_up: Vec<&str> = needed
        .iter()
        .filter(|setting| setting.needed == Needed::AtStartUp)
        .map(|setting| setting.name.as_str())
        .collect();
    for name in [
        "STORMGATE_REDIS_URL",
        "AZURE_OPENAI_ENDPOINT",
        "STORMGATE_PREMIUM_TPM",
    ] {
        assert!(at_start_up.contains(&name), "{name}: {at_start_up:?}");
    }
}

#[test]
fn settings_rule_rejects_a_setting_the_handler_does_not_know() -> anyhow::Result<()> {
    let violations = settings_violations(&fixture("settings_unknown.bicep")?, &fixture_settings());
    assert_eq!(
        violations,
        vec![SettingsViolation::Unknown("STORMGATE_REDIS_URI".into())]
    );
    Ok(())
}

#[test]
fn settings_rule_rejects_a_missing_required_setting() -> anyhow::Result<()> {
    let violations = settings_violations(&fixture("settings_missing.bicep")?, &fixture_settings());
    assert_eq!(
        violations,
        vec![SettingsViolation::Missing("STORMGATE_REDIS_URL".into())]
    );
    Ok(())
}

#[test]
fn settings_rule_rejects_a_required_setting_written_on_one_branch_only() -> anyhow::Result<()> {
    let violations =
        settings_violations(&fixture("settings_conditional.bicep")?, &fixture_settings());
    assert_eq!(
        violations,
        vec![SettingsViolation::Missing("STORMGATE_REDIS_URL".into())]
    );
    Ok(())
}

#[test]
fn optional_settings_depend_on_their_feature_and_core_settings_are_always_written()
-> anyhow::Result<()> {
    let app = infra_file("modules/functionapp.bicep")?;
    let written = settings_of(&app)?;
    for optional in [
        "SERVICENOW_INSTANCE_URL",
        "STORMGATE_SEARCH_ENDPOINT",
        "STORMGATE_REDIS_USER",
    ] {
        assert!(
            written.sometimes.contains_key(optional),
            "{optional} should depend on configuration"
        );
    }
    for always in [
        "STORMGATE_REDIS_URL",
        "STORMGATE_REDIS_AUTH",
        "KAFKA_PASSWORD",
        "AzureWebJobsStorage__accountName",
        "STORMGATE_PREMIUM_RPM",
        "STORMGATE_STANDARD_PRICE_OUTPUT_PER_1M",
    ] {
        assert!(
            written.always.contains_key(always),
            "{always} should always be written"
        );
    }
    // Flex Consumption takes the runtime from the site and refuses these as app settings.
    for refused in ["FUNCTIONS_WORKER_RUNTIME", "FUNCTIONS_EXTENSION_VERSION"] {
        assert!(
            !written.names().any(|name| name == refused),
            "{refused} must not be written on Flex Consumption"
        );
    }
    Ok(())
}

#[test]
fn every_setting_and_queue_the_function_definitions_use_is_deployed() -> anyhow::Result<()> {
    let needs = binding_needs(&infra_dir().join("../function-defs"))?;
    assert!(
        needs.settings.contains("KAFKA_PASSWORD"),
        "{:?}",
        needs.settings
    );
    assert!(
        needs.queues.contains("summarize-premium"),
        "{:?}",
        needs.queues
    );
    let app = infra_file("modules/functionapp.bicep")?;
    let violations = check_bindings(&needs, &settings_of(&app)?, &infra_file("main.bicep")?);
    assert_eq!(violations, vec![]);
    Ok(())
}

#[test]
fn binding_rule_rejects_a_setting_never_written_and_a_queue_never_created() -> anyhow::Result<()> {
    let needs = binding_needs(&fixtures_dir().join("function-defs"))?;
    let app = infra_file("modules/functionapp.bicep")?;
    let found = messages(
        &check_bindings(&needs, &settings_of(&app)?, &infra_file("main.bicep")?),
        |v| &v.0,
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("%KAFKA_ENRICHED_TOPIC%"), "{found:?}");
    assert!(found[1].contains("`enrich-jobs`"), "{found:?}");
    Ok(())
}

// ---- model deployments and budgets ------------------------------------------------------------------------

#[test]
fn governor_budgets_equal_deployed_capacity_times_1000_from_one_source() -> anyhow::Result<()> {
    let app = infra_file("modules/functionapp.bicep")?;
    let written = settings_of(&app)?;
    let tiers = tier_names();
    assert_eq!(tiers, vec!["PREMIUM".to_owned(), "STANDARD".to_owned()]);
    let source_param = check_tier_settings(&app, &written, &tiers)
        .map_err(|violations| anyhow!("{violations:?}"))?;
    let shared = check_shared_source(
        &infra_file("main.bicep")?,
        &infra_file("modules/openai.bicep")?,
        &source_param,
    )
    .map_err(|violations| anyhow!("{violations:?}"))?;
    assert_eq!(shared, "modelDeployments");
    Ok(())
}

#[test]
fn tpm_rule_rejects_a_budget_that_is_not_the_tiers_capacity_times_1000() -> anyhow::Result<()> {
    let file = fixture("tpm_mismatch.bicep")?;
    let written = settings_of(&file)?;
    let Err(violations) =
        check_tier_settings(&file, &written, &["PREMIUM".into(), "STANDARD".into()])
    else {
        return Err(anyhow!("mismatched budgets were accepted"));
    };
    let found = messages(&violations, |v| &v.0);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].contains("STORMGATE_PREMIUM_TPM"), "{found:?}");
    assert!(
        found[1].contains("STORMGATE_PREMIUM_RPM")
            && found[1].contains("premium.capacity * <deployments>.premium.rpmPerUnit"),
        "{found:?}"
    );
    assert!(found[2].contains("STORMGATE_STANDARD_TPM"), "{found:?}");
    Ok(())
}

#[test]
fn tiers_deploy_different_models_by_default_and_in_every_parameter_file() -> anyhow::Result<()> {
    let main = infra_file("main.bicep")?;
    let params = param_files()?;
    let params: Vec<&BicepFile> = params.iter().collect();
    let violations = check_distinct_models(&main, &params, "modelDeployments", &tier_names());
    assert_eq!(violations, vec![]);
    Ok(())
}

#[test]
fn model_rule_rejects_tiers_that_default_to_the_same_model() -> anyhow::Result<()> {
    let violations = check_distinct_models(
        &fixture("same_model.bicep")?,
        &[],
        "modelDeployments",
        &tier_names(),
    );
    let found = messages(&violations, |v| &v.0);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("`gpt-4.1`"), "{found:?}");
    Ok(())
}

#[test]
fn model_rule_rejects_a_parameter_file_that_gives_both_tiers_one_model() -> anyhow::Result<()> {
    let overrides = fixture("same_model.bicepparam")?;
    let violations = check_distinct_models(
        &infra_file("main.bicep")?,
        &[&overrides],
        "modelDeployments",
        &tier_names(),
    );
    let found = messages(&violations, |v| &v.0);
    assert!(
        found
            .iter()
            .any(|m| m.contains("same_model.bicepparam") && m.contains("`gpt-4.1`")),
        "{found:?}"
    );
    Ok(())
}

// ---- role definitions -------------------------------------------------------------------------------------

#[test]
fn role_assignments_use_documented_built_in_role_ids() -> anyhow::Result<()> {
    let files = read_all(&infra_dir())?;
    let files: Vec<&BicepFile> = files.iter().collect();
    assert_eq!(check_roles(&files), vec![]);
    Ok(())
}

#[test]
fn role_rule_rejects_a_mistyped_id_and_an_id_outside_the_role_table() -> anyhow::Result<()> {
    let file = fixture("wrong_role_id.bicep")?;
    let found = messages(&check_roles(&[&file]), |v| &v.0);
    let expected = [
        "`Storage Queue Data Contributor` is 974c5e8b-45b9-4653-ba55-5f855dd0fb88",
        "outside `builtInRoles`",
        "roleDefinitionId must come from",
        "lacks the required role `Cognitive Services OpenAI User`",
    ];
    for part in expected {
        assert!(found.iter().any(|m| m.contains(part)), "{part}: {found:?}");
    }
    Ok(())
}

// ---- secrets ----------------------------------------------------------------------------------------------

#[test]
fn no_secret_sits_in_a_template_default_or_a_parameter_file() -> anyhow::Result<()> {
    let main = infra_file("main.bicep")?;
    for path in bicep_files_under(&infra_dir())? {
        let file = BicepFile::read(&path)?;
        let violations = if file.is_param_file() {
            check_param_file(&file, &main)
        } else {
            check_template(&file)
        };
        assert_eq!(violations, vec![], "{}", path.display());
    }
    Ok(())
}

#[test]
fn secret_rule_rejects_defaults_that_hold_credentials() -> anyhow::Result<()> {
    let found = messages(&check_template(&fixture("secret_default.bicep")?), |v| &v.0);
    let expected = [
        "secure parameter `kafkaPassword` has a default",
        "`storageConnectionString` holds a credential but is not @secure()",
        "connection string with an account key",
    ];
    for part in expected {
        assert!(found.iter().any(|m| m.contains(part)), "{part}: {found:?}");
    }
    Ok(())
}

#[test]
fn a_secret_missing_at_deploy_time_fails_the_deployment() -> anyhow::Result<()> {
    let main = infra_file("main.bicep")?;
    assert_eq!(
        messages(&check_secret_guards(&main), |v| &v.0),
        Vec::<String>::new()
    );
    let fails = main
        .declarations("variable_declaration")
        .into_iter()
        .filter(|var| {
            main.assigned_value(*var)
                .is_some_and(|value| main.text(value).contains("fail("))
        })
        .count();
    assert_eq!(fails, 3, "ServiceNow, search and the existing Redis URL");
    Ok(())
}

#[test]
fn guard_rule_rejects_a_secret_passed_on_without_a_guard() -> anyhow::Result<()> {
    let found = messages(
        &check_secret_guards(&fixture("secret_unguarded.bicep")?),
        |v| &v.0,
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].contains("`serviceNowPassword` reaches a module"),
        "{found:?}"
    );
    assert!(
        found[1].contains("`searchApiKey` reaches a module"),
        "{found:?}"
    );
    Ok(())
}

#[test]
fn secret_rule_rejects_a_parameter_file_that_assigns_a_secure_value() -> anyhow::Result<()> {
    let found = messages(
        &check_param_file(
            &fixture("secret_value.bicepparam")?,
            &infra_file("main.bicep")?,
        ),
        |v| &v.0,
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("`kafkaPassword`"), "{found:?}");
    assert!(found[1].contains("`serviceNowPassword`"), "{found:?}");
    Ok(())
}

#[test]
fn every_secure_parameter_is_read_from_the_environment_in_each_parameter_file() -> anyhow::Result<()>
{
    let main = infra_file("main.bicep")?;
    let secure: Vec<&str> = main
        .declarations("parameter_declaration")
        .into_iter()
        .filter(|param| {
            main.decorators(*param)
                .iter()
                .any(|(name, _)| name == "secure")
        })
        .filter_map(|param| main.declared_name(param))
        .collect();
    assert_eq!(
        secure,
        vec![
            "existingRedisUrl",
            "kafkaPassword",
            "serviceNowPassword",
            "searchApiKey"
        ]
    );
    for params in param_files()? {
        for name in &secure {
            let value = params
                .declaration("variable_declaration", name)
                .and_then(|assignment| params.assigned_value(assignment))
                .with_context(|| format!("{} does not supply {name}", params.path().display()))?;
            assert!(
                params.text(value).starts_with("readEnvironmentVariable("),
                "{name}"
            );
        }
    }
    Ok(())
}

// ---- alerts and the workbook -------------------------------------------------------------------------------

fn platform_facts(name: &str) -> anyhow::Result<serde_json::Value> {
    let path = stormgate_e2e::functions_host::repo_path(&format!("tests/fixtures/platform/{name}"));
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

fn alert_queries() -> anyhow::Result<Vec<NamedQuery>> {
    Ok(queries_of(&infra_file("modules/alerts.bicep")?, "rules"))
}

#[test]
fn every_alert_and_workbook_query_names_only_signals_the_product_logs() -> anyhow::Result<()> {
    let facts = platform_facts("host-http-and-logs.json")?;
    let alerts = alert_queries()?;
    let charts = queries_of(&infra_file("modules/workbook.bicep")?, "charts");
    assert_eq!(alerts.len(), 8, "{alerts:?}");
    assert!(charts.len() >= 10, "{charts:?}");
    for query in alerts.iter().chain(&charts) {
        assert_eq!(
            query_violations(query, &facts),
            Vec::<String>::new(),
            "{}",
            query.query
        );
    }
    Ok(())
}

#[test]
fn the_alerts_cover_what_the_noc_must_hear_about() -> anyhow::Result<()> {
    let alerts = alert_queries()?;
    let covers = |event: &str, field: &str| {
        alerts.iter().any(|a| {
            let n = named(&a.query);
            (n.events.contains(event) || n.messages.contains(event)) && n.fields.contains(field)
        })
    };
    for (event, field) in [
        ("severity", "behind_ms"),
        ("consumer_lag", "lag_max_ms"),
        ("deployment_status", "throttles_per_minute"),
        ("deployment_status", "down"),
        ("ingest", "dead_lettered"),
        ("redis", "used_memory_percent"),
        ("invocation failed", "span.path"),
    ] {
        assert!(covers(event, field), "no alert on {event}.{field}");
    }
    let facts = platform_facts("host-http-and-logs.json")?;
    let poison = facts["poison_queue"]["message_prefix"].as_str().unwrap();
    assert!(
        alerts.iter().any(|a| a.query.contains(poison)),
        "no alert on poisoned hand-off messages"
    );
    let p1 = alerts
        .iter()
        .find(|a| named(&a.query).events.contains("severity"))
        .unwrap();
    assert!(p1.query.contains("\"P1\", \"P2\""), "{}", p1.query);
    Ok(())
}

#[test]
fn alert_rule_rejects_a_query_of_a_signal_the_product_does_not_log() -> anyhow::Result<()> {
    let facts = platform_facts("host-http-and-logs.json")?;
    let query = |text: &str, measure: &str| NamedQuery {
        name: "fixture".into(),
        query: text.into(),
        measure: Some(measure.into()),
        dimensions: vec!["deployment".into()],
        aggregation: Some("Maximum".into()),
    };
    let base = "traces | extend s = parse_json(message) | where tostring(s.target) == \"stormgate::gauges\"";
    let cases = [
        (
            format!(
                "{base} | where tostring(s.event) == \"deployment_status\" | summarize x = max(tolong(s.throttles)) by deployment = tostring(s.deployment)"
            ),
            "x",
            "field \"throttles\"",
        ),
        (
            format!(
                "{base} | where tostring(s.event) == \"deployments\" | summarize x = count() by deployment = tostring(s.deployment)"
            ),
            "x",
            "event \"deployments\"",
        ),
        (
            format!(
                "{base} | where tostring(s.event) == \"redis\" | summarize x = max(tolong(s.used_memory_percent))"
            ),
            "y",
            "no column \"y\"",
        ),
        (
            "traces | where message has \"poison\" | summarize x = count() by deployment = 1"
                .to_owned(),
            "x",
            "neither",
        ),
        (
            format!("{base} | summarize x = count() by deployment = 1"),
            "x",
            "names no event",
        ),
    ];
    for (text, measure, expected) in cases {
        let problems = query_violations(&query(&text, measure), &facts);
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{expected}: {problems:?}"
        );
    }
    Ok(())
}

#[test]
fn alert_and_workbook_properties_are_those_azure_defines() -> anyhow::Result<()> {
    let types = platform_facts("azure-monitor-types.json")?;
    let alerts = infra_file("modules/alerts.bicep")?;
    let workbook = infra_file("modules/workbook.bicep")?;
    assert_eq!(
        property_violations(
            &alerts,
            "Microsoft.Insights/scheduledQueryRules@2023-12-01",
            &types
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        property_violations(&workbook, "Microsoft.Insights/workbooks@2023-06-01", &types),
        Vec::<String>::new()
    );
    assert_eq!(
        alerts
            .resources_of_type("Microsoft.Insights/scheduledQueryRules@")
            .len(),
        1
    );
    assert_eq!(
        workbook
            .resources_of_type("Microsoft.Insights/workbooks@")
            .len(),
        1
    );
    let aggregations = &types["types"]["Microsoft.Insights/scheduledQueryRules@2023-12-01"]["values"]
        ["properties.criteria.allOf[].timeAggregation"];
    for alert in alert_queries()? {
        let aggregation = alert.aggregation.clone().unwrap_or_default();
        assert!(
            aggregations
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v == &aggregation),
            "{}: {aggregation}",
            alert.name
        );
    }
    Ok(())
}

#[test]
fn property_rule_rejects_a_misspelt_alert_property() -> anyhow::Result<()> {
    let types = platform_facts("azure-monitor-types.json")?;
    let source = "resource a 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {\n  name: 'a'\n  location: 'x'\n  properties: {\n    severty: 1\n    criteria: {\n      allOf: [\n        {\n          query: 'q'\n          treshold: 0\n        }\n      ]\n    }\n  }\n}\n";
    let file = BicepFile::parse("fixture.bicep", source.to_owned())?;
    let found = property_violations(
        &file,
        "Microsoft.Insights/scheduledQueryRules@2023-12-01",
        &types,
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("no property severty"), "{found:?}");
    assert!(found[1].contains("no property treshold"), "{found:?}");
    Ok(())
}

#[test]
fn host_json_keeps_every_signal_line_out_of_sampling_and_logs_them() -> anyhow::Result<()> {
    let facts = platform_facts("host-http-and-logs.json")?;
    let host: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        stormgate_e2e::functions_host::repo_path("host.json"),
    )?)?;
    let sampling = &host["logging"]["applicationInsights"]["samplingSettings"];
    let names: Vec<&str> = facts["sampling"]["type_names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    if sampling["isEnabled"] != false {
        let excluded: Vec<&str> = sampling["excludedTypes"]
            .as_str()
            .unwrap_or_default()
            .split(';')
            .map(str::trim)
            .collect();
        for name in &excluded {
            assert!(
                names.contains(name),
                "{name} is not a telemetry type the SDK knows"
            );
        }
        let traces = facts["sampling"]["console_lines_are"].as_str().unwrap();
        assert!(
            excluded.contains(&traces),
            "the handler's lines are {traces} telemetry: sampling would drop signal lines ({excluded:?})"
        );
    }
    // The console lines' category logs at Information (its own level, or the default's).
    let category = facts["console_lines"]["category"].as_str().unwrap();
    let levels = &host["logging"]["logLevel"];
    let level = levels[category]
        .as_str()
        .or(levels["default"].as_str())
        .unwrap_or("Information");
    assert!(
        matches!(level, "Trace" | "Debug" | "Information"),
        "{category} logs at {level}: the signal lines (Information) would be dropped"
    );
    Ok(())
}
