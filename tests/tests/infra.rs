//! Checks of the Bicep in `infra/` that need no Azure: it parses, it writes exactly the app settings the
//! handler knows, the governor's budgets equal the deployed capacity, the tiers deploy different models, role
//! ids are the documented built-in ones, and no secret lives in a default or a parameter file. Every rule is
//! also shown rejecting a broken fixture from `tests/fixtures/infra/`.

mod infra_rules;

use anyhow::{Context, anyhow};
use infra_rules::app_settings::{
    KnownSetting, SettingsViolation, WrittenSettings, settings_violations, written_settings,
};
use infra_rules::bicep::{BicepFile, bicep_files_under, fixtures_dir, infra_dir, read_all};
use infra_rules::model_deployments::{
    check_distinct_models, check_shared_source, check_tier_settings, tiers,
};
use infra_rules::roles::check_roles;
use infra_rules::secrets::{check_param_file, check_template};
use infra_rules::syntax::syntax_problems;

fn infra_file(relative: &str) -> anyhow::Result<BicepFile> {
    BicepFile::read(&infra_dir().join(relative))
}

fn fixture(name: &str) -> anyhow::Result<BicepFile> {
    BicepFile::read(&fixtures_dir().join(name))
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

/// The tiers the function app configures (`STORMGATE_<TIER>_DEPLOYMENT`).
fn tier_names() -> anyhow::Result<Vec<String>> {
    let app = infra_file("modules/functionapp.bicep")?;
    Ok(tiers(settings_of(&app)?.names()))
}

/// A small settings table for the fixtures: one required and one optional setting.
fn fixture_settings() -> Vec<KnownSetting> {
    vec![
        KnownSetting {
            name: "STORMGATE_REDIS_URL".into(),
            required: true,
        },
        KnownSetting {
            name: "RUST_LOG".into(),
            required: false,
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

// ---- app settings -----------------------------------------------------------------------------------------

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
        "FUNCTIONS_WORKER_RUNTIME",
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
    ] {
        assert!(
            written.always.contains_key(always),
            "{always} should always be written"
        );
    }
    Ok(())
}

// ---- model deployments and budgets ------------------------------------------------------------------------

#[test]
fn governor_budgets_equal_deployed_capacity_times_1000_from_one_source() -> anyhow::Result<()> {
    let app = infra_file("modules/functionapp.bicep")?;
    let written = settings_of(&app)?;
    let tiers = tier_names()?;
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
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("STORMGATE_PREMIUM_TPM"), "{found:?}");
    assert!(found[1].contains("STORMGATE_STANDARD_TPM"), "{found:?}");
    Ok(())
}

#[test]
fn tiers_deploy_different_models_by_default_and_in_every_parameter_file() -> anyhow::Result<()> {
    let main = infra_file("main.bicep")?;
    let params = param_files()?;
    let params: Vec<&BicepFile> = params.iter().collect();
    let violations = check_distinct_models(&main, &params, "modelDeployments", &tier_names()?);
    assert_eq!(violations, vec![]);
    Ok(())
}

#[test]
fn model_rule_rejects_tiers_that_default_to_the_same_model() -> anyhow::Result<()> {
    let violations = check_distinct_models(
        &fixture("same_model.bicep")?,
        &[],
        "modelDeployments",
        &tier_names()?,
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
        &tier_names()?,
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
