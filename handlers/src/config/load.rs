//! Loading the typed [`Settings`] from the app settings as a map: Key Vault references
//! resolved first, then each group of settings read and checked against the others.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use stormgate_shared::deployment_name::DeploymentNameError;
use stormgate_shared::ingest::IngestPolicy;
use stormgate_shared::model_quota;
use stormgate_shared::store::{DEFAULT_DEAD_LETTER_CAP, DEFAULT_RETENTION, StoreLimits};
use stormgate_shared::tier_table::TierTable;

use super::error::ConfigError;
use super::readers::*;
use super::settings::*;
use super::table::*;
use super::vault_references::resolve_vault_references;
use crate::secrets::SecretSource;

fn redis_settings(settings: &AppSettings) -> Result<RedisSettings, ConfigError> {
    let url = settings.secret(REDIS_URL, settings.required(REDIS_URL)?)?;
    // The URL may hold a password: say what is wrong without echoing it.
    if !(url.expose().starts_with("redis://") || url.expose().starts_with("rediss://")) {
        return Err(ConfigError::Malformed {
            name: REDIS_URL,
            reason: "must start with redis:// or rediss://".into(),
        });
    }
    let auth = settings.parsed_or_default(REDIS_AUTH, |raw| match raw {
        "url" => Ok(None),
        "entra" => Ok(Some(())),
        other => Err(format!("{other:?} is not `url` or `entra`")),
    })?;
    let auth = match auth {
        None => RedisAuth::Url,
        Some(()) => RedisAuth::Entra {
            user: settings
                .required_because(REDIS_USER, "required when STORMGATE_REDIS_AUTH=entra")?
                .to_owned(),
        },
    };
    Ok(RedisSettings { url, auth })
}

fn openai_settings(settings: &AppSettings) -> Result<OpenAiSettings, ConfigError> {
    let endpoint = service_endpoint(OPENAI_ENDPOINT, settings.required(OPENAI_ENDPOINT)?)?;
    let api_version = settings.parsed_or_default(OPENAI_API_VERSION, |raw| Ok(raw.to_owned()))?;
    let use_api_key = settings.parsed_or_default(OPENAI_AUTH, |raw| match raw {
        "managed_identity" => Ok(false),
        "api_key" => Ok(true),
        other => Err(format!("{other:?} is not `managed_identity` or `api_key`")),
    })?;
    let auth = if use_api_key {
        OpenAiAuth::ApiKey(
            settings.required_secret(OPENAI_API_KEY, "required when AZURE_OPENAI_AUTH=api_key")?,
        )
    } else {
        OpenAiAuth::ManagedIdentity
    };
    Ok(OpenAiSettings {
        endpoint,
        api_version,
        auth,
    })
}

fn tier_settings(settings: &AppSettings, names: &TierNames) -> Result<TierSettings, ConfigError> {
    let model = settings.required(names.model)?.to_owned();
    let tokens_per_minute = settings.parsed_or_default(names.tpm, positive_integer)?;
    let requests_per_minute = match settings.parsed_optional(names.rpm, positive_integer)? {
        Some(rpm) => rpm,
        None => model_quota::default_rpm(&model, tokens_per_minute)
            .filter(|&rpm| rpm > 0)
            .ok_or_else(|| ConfigError::Missing {
                name: names.rpm,
                why: format!(
                    "model {model:?} is not in the quota table the default comes from; give the \
                     deployment's requests per minute"
                ),
            })?,
    };
    Ok(TierSettings {
        deployment: settings.required(names.deployment)?.parse().map_err(
            |e: DeploymentNameError| ConfigError::Malformed {
                name: names.deployment,
                reason: e.to_string(),
            },
        )?,
        model,
        tokens_per_minute,
        requests_per_minute,
        price_input_per_1m: settings.parsed_or_default(names.price_input, non_negative_number)?,
        price_output_per_1m: settings.parsed_or_default(names.price_output, non_negative_number)?,
    })
}

fn servicenow_settings(settings: &AppSettings) -> Result<Option<ServiceNowSettings>, ConfigError> {
    let instance_url = settings
        .get(SERVICENOW_INSTANCE_URL)
        .map(|raw| service_endpoint(SERVICENOW_INSTANCE_URL, raw))
        .transpose()?;
    let Some(instance_url) = instance_url else {
        if settings.get(SERVICENOW_USERNAME).is_some()
            || settings.get(SERVICENOW_PASSWORD).is_some()
        {
            return Err(ConfigError::Missing {
                name: SERVICENOW_INSTANCE_URL,
                why: "ServiceNow credentials are set but the instance is not".into(),
            });
        }
        return Ok(None);
    };
    let why = "required when SERVICENOW_INSTANCE_URL is set";
    Ok(Some(ServiceNowSettings {
        instance_url,
        username: settings
            .required_because(SERVICENOW_USERNAME, why)?
            .to_owned(),
        password: settings.required_secret(SERVICENOW_PASSWORD, why)?,
    }))
}

fn search_settings(settings: &AppSettings) -> Result<Option<SearchSettings>, ConfigError> {
    let group = [SEARCH_ENDPOINT, SEARCH_INDEX, SEARCH_API_KEY];
    if group.iter().all(|name| settings.get(name).is_none()) {
        return Ok(None);
    }
    let why = "the three STORMGATE_SEARCH_* settings are all set or none";
    let endpoint = service_endpoint(
        SEARCH_ENDPOINT,
        settings.required_because(SEARCH_ENDPOINT, why)?,
    )?;
    Ok(Some(SearchSettings {
        endpoint,
        index: settings.required_because(SEARCH_INDEX, why)?.to_owned(),
        api_key: settings.required_secret(SEARCH_API_KEY, why)?,
    }))
}

impl Settings {
    /// Parses the settings from app-setting values (secrets already resolved).
    pub fn from_vars<K, V>(vars: impl IntoIterator<Item = (K, V)>) -> Result<Settings, ConfigError>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let settings = AppSettings::new(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        reject_unresolved_references(&settings)?;
        Ok(Settings {
            port: settings.parsed_or_default(PORT, port)?,
            redis: redis_settings(&settings)?,
            azure_client_id: settings.get(AZURE_CLIENT_ID).map(str::to_owned),
            openai: openai_settings(&settings)?,
            premium: tier_settings(&settings, &PREMIUM)?,
            standard: tier_settings(&settings, &STANDARD)?,
            governor_headroom: settings.parsed_or_default(GOVERNOR_HEADROOM, headroom)?,
            key_vault_url: settings.parsed_optional(KEY_VAULT_URL, https_url)?,
            classifier_model_path: settings.get(CLASSIFIER_MODEL_PATH).map(PathBuf::from),
            route_up_threshold: settings.parsed_optional(ROUTE_UP_THRESHOLD, probability)?,
            coalesce_hold: settings
                .parsed_optional(COALESCE_HOLD_SECONDS, seconds)?
                .unwrap_or(IngestPolicy::default().coalesce_hold),
            tier_table: settings
                .parsed_optional(TIER_TABLE, |raw| {
                    raw.parse::<TierTable>().map_err(|e| e.to_string())
                })?
                .unwrap_or_default(),
            store_limits: StoreLimits {
                retention: settings
                    .parsed_optional(RETENTION_DAYS, retention_days)?
                    .unwrap_or(DEFAULT_RETENTION),
                dead_letter_cap: settings
                    .parsed_optional(DEAD_LETTER_MAX, dead_letter_max)?
                    .unwrap_or(DEFAULT_DEAD_LETTER_CAP),
            },
            servicenow: servicenow_settings(&settings)?,
            search: search_settings(&settings)?,
            log_format: settings.parsed_or_default(LOG_FORMAT, log_format)?,
            rust_log: settings.get(RUST_LOG).map(str::to_owned),
        })
    }

    /// Loads the settings at start-up: rejects unresolved Key Vault references, resolves
    /// `keyvault:<name>` secrets through `open_vault` (called only if some secret needs
    /// it, with the vault URL and `AZURE_CLIENT_ID`), then parses.
    pub async fn load<K, V, F>(
        vars: impl IntoIterator<Item = (K, V)>,
        open_vault: F,
    ) -> Result<Settings, ConfigError>
    where
        K: Into<String>,
        V: Into<String>,
        F: FnOnce(&str, Option<&str>) -> Result<Arc<dyn SecretSource>, String>,
    {
        let values: HashMap<String, String> = vars
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        reject_unresolved_references(&AppSettings::new(values.clone()))?;
        let resolved = resolve_vault_references(values, open_vault).await?;
        Settings::from_vars(resolved)
    }

    /// The smallest set of app settings the handler starts with (local services).
    pub fn example_vars() -> Vec<(&'static str, &'static str)> {
        vec![
            (REDIS_URL, "redis://127.0.0.1:6379"),
            (OPENAI_ENDPOINT, "https://example.openai.azure.com/"),
            ("STORMGATE_PREMIUM_DEPLOYMENT", "premium-deployment"),
            ("STORMGATE_PREMIUM_MODEL", "premium-model"),
            ("STORMGATE_PREMIUM_TPM", "10000"),
            ("STORMGATE_PREMIUM_RPM", "60"),
            ("STORMGATE_STANDARD_DEPLOYMENT", "standard-deployment"),
            ("STORMGATE_STANDARD_MODEL", "standard-model"),
            ("STORMGATE_STANDARD_TPM", "10000"),
            ("STORMGATE_STANDARD_RPM", "60"),
        ]
    }
}
