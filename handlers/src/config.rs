//! Settings: the one table of every app setting stormgate knows ([`SETTINGS`]), and the
//! typed [`Settings`] the handler loads from them once at start-up.
//!
//! The table drives loading, the README's configuration table, `local.settings.json.example`
//! and the infrastructure checks, so a setting cannot exist in one place and not another.
//! Loading takes the variables as a map (never reads the process environment itself), so
//! tests need not mutate global state.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use stormgate_shared::governor::budget::DeploymentNameError;
use stormgate_shared::governor::{DeploymentBudget, DeploymentName, GovernorPolicy, Headroom};
use stormgate_shared::ingest::IngestPolicy;
use stormgate_shared::job::Tier;
use stormgate_shared::model_quota;
use stormgate_shared::store::{DEFAULT_DEAD_LETTER_CAP, DEFAULT_RETENTION, StoreLimits};
use stormgate_shared::tier_table::{DEFAULT_TIER_TABLE, TierTable};

use crate::secrets::{self, Secret, SecretSource};

/// Whether a setting must be present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    Required,
    Optional,
    /// Required only under the stated condition (e.g. another setting's value).
    RequiredWhen(&'static str),
}

/// Who reads a setting: the handler process, or the Functions host and its bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadBy {
    Handler,
    Host,
}

/// One app setting as the table describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingSpec {
    pub name: &'static str,
    pub required: Requirement,
    /// A secret's value never appears in logs or errors; for the handler it may be
    /// `keyvault:<secret-name>`.
    pub secret: bool,
    pub read_by: ReadBy,
    pub default: Option<&'static str>,
    pub description: &'static str,
}

const fn setting(
    name: &'static str,
    required: Requirement,
    read_by: ReadBy,
    default: Option<&'static str>,
    description: &'static str,
) -> SettingSpec {
    SettingSpec {
        name,
        required,
        secret: false,
        read_by,
        default,
        description,
    }
}

const fn secret(
    name: &'static str,
    required: Requirement,
    read_by: ReadBy,
    description: &'static str,
) -> SettingSpec {
    SettingSpec {
        name,
        required,
        secret: true,
        read_by,
        default: None,
        description,
    }
}

use ReadBy::{Handler, Host};
use Requirement::{Optional, Required, RequiredWhen};

pub const PORT: &str = "FUNCTIONS_CUSTOMHANDLER_PORT";
pub const REDIS_URL: &str = "STORMGATE_REDIS_URL";
pub const REDIS_AUTH: &str = "STORMGATE_REDIS_AUTH";
pub const REDIS_USER: &str = "STORMGATE_REDIS_USER";
pub const AZURE_CLIENT_ID: &str = "AZURE_CLIENT_ID";
pub const OPENAI_ENDPOINT: &str = "AZURE_OPENAI_ENDPOINT";
pub const OPENAI_API_VERSION: &str = "AZURE_OPENAI_API_VERSION";
pub const OPENAI_AUTH: &str = "AZURE_OPENAI_AUTH";
pub const OPENAI_API_KEY: &str = "AZURE_OPENAI_API_KEY";
pub const GOVERNOR_HEADROOM: &str = "STORMGATE_GOVERNOR_HEADROOM";
pub const KEY_VAULT_URL: &str = "STORMGATE_KEY_VAULT_URL";
pub const CLASSIFIER_MODEL_PATH: &str = "STORMGATE_CLASSIFIER_MODEL_PATH";
pub const ROUTE_UP_THRESHOLD: &str = "STORMGATE_ROUTE_UP_THRESHOLD";
pub const COALESCE_HOLD_SECONDS: &str = "STORMGATE_COALESCE_HOLD_SECONDS";
pub const TIER_TABLE: &str = "STORMGATE_TIER_TABLE";
pub const RETENTION_DAYS: &str = "STORMGATE_RETENTION_DAYS";
pub const DEAD_LETTER_MAX: &str = "STORMGATE_DEAD_LETTER_MAX";
pub const SERVICENOW_INSTANCE_URL: &str = "SERVICENOW_INSTANCE_URL";
pub const SERVICENOW_USERNAME: &str = "SERVICENOW_USERNAME";
pub const SERVICENOW_PASSWORD: &str = "SERVICENOW_PASSWORD";
pub const SEARCH_ENDPOINT: &str = "STORMGATE_SEARCH_ENDPOINT";
pub const SEARCH_INDEX: &str = "STORMGATE_SEARCH_INDEX";
pub const SEARCH_API_KEY: &str = "STORMGATE_SEARCH_API_KEY";
pub const LOG_FORMAT: &str = "STORMGATE_LOG_FORMAT";
pub const RUST_LOG: &str = "RUST_LOG";

/// Every app setting stormgate knows, in documentation order.
pub const SETTINGS: &[SettingSpec] = &[
    setting(
        PORT,
        Optional,
        Handler,
        Some("3000"),
        "Port the handler listens on (127.0.0.1); set by the Functions host.",
    ),
    secret(
        REDIS_URL,
        Required,
        Handler,
        "Redis endpoint, `redis://` or `rediss://` (TLS); may carry credentials.",
    ),
    setting(
        REDIS_AUTH,
        Optional,
        Handler,
        Some("url"),
        "`url` (credentials in the URL, or none) or `entra` (managed-identity token).",
    ),
    setting(
        REDIS_USER,
        RequiredWhen("STORMGATE_REDIS_AUTH=entra"),
        Handler,
        None,
        "Object (principal) id of the identity Redis knows, for `entra` auth.",
    ),
    setting(
        AZURE_CLIENT_ID,
        Optional,
        Handler,
        None,
        "Client id of the user-assigned managed identity; system-assigned when unset.",
    ),
    setting(
        OPENAI_ENDPOINT,
        Required,
        Handler,
        None,
        "Azure OpenAI account endpoint, an `https://` URL (`http://` only to a loopback host, e.g. `stormgate simulate`).",
    ),
    setting(
        OPENAI_API_VERSION,
        Optional,
        Handler,
        Some("2024-10-21"),
        "Azure OpenAI REST API version.",
    ),
    setting(
        OPENAI_AUTH,
        Optional,
        Handler,
        Some("managed_identity"),
        "`managed_identity` or `api_key`.",
    ),
    secret(
        OPENAI_API_KEY,
        RequiredWhen("AZURE_OPENAI_AUTH=api_key"),
        Handler,
        "Azure OpenAI API key.",
    ),
    setting(
        PREMIUM.deployment,
        Required,
        Handler,
        None,
        "Azure OpenAI deployment serving the premium tier.",
    ),
    setting(
        PREMIUM.model,
        Required,
        Handler,
        None,
        "Model behind the premium deployment (its own quota pool).",
    ),
    setting(
        PREMIUM.tpm,
        Required,
        Handler,
        None,
        "Premium deployment's tokens per minute (Bicep capacity x 1000).",
    ),
    setting(
        PREMIUM.rpm,
        Optional,
        Handler,
        None,
        "Premium deployment's requests per minute (Bicep capacity x the tier's RPM per unit); when unset, the model's ratio in Azure's quota tables (gpt-4.1 family 1 per 1,000 TPM, gpt-4o family 6), and start-up fails for a model the table does not know.",
    ),
    setting(
        PREMIUM.price_input,
        Optional,
        Handler,
        Some("2.00"),
        "USD per million input tokens, premium model (default: gpt-4.1, Global).",
    ),
    setting(
        PREMIUM.price_output,
        Optional,
        Handler,
        Some("8.00"),
        "USD per million output tokens, premium model (default: gpt-4.1, Global).",
    ),
    setting(
        STANDARD.deployment,
        Required,
        Handler,
        None,
        "Azure OpenAI deployment serving the standard tier.",
    ),
    setting(
        STANDARD.model,
        Required,
        Handler,
        None,
        "Model behind the standard deployment (a different model: its own quota pool).",
    ),
    setting(
        STANDARD.tpm,
        Required,
        Handler,
        None,
        "Standard deployment's tokens per minute (Bicep capacity x 1000).",
    ),
    setting(
        STANDARD.rpm,
        Optional,
        Handler,
        None,
        "Standard deployment's requests per minute; when unset, the model's ratio, as for the premium tier.",
    ),
    setting(
        STANDARD.price_input,
        Optional,
        Handler,
        Some("0.40"),
        "USD per million input tokens, standard model (default: gpt-4.1-mini, Global).",
    ),
    setting(
        STANDARD.price_output,
        Optional,
        Handler,
        Some("1.60"),
        "USD per million output tokens, standard model (default: gpt-4.1-mini, Global).",
    ),
    setting(
        GOVERNOR_HEADROOM,
        Optional,
        Handler,
        Some("0.10"),
        "Fraction of each deployment's budget the governor keeps unused (0 to 0.9).",
    ),
    setting(
        KEY_VAULT_URL,
        RequiredWhen("a secret setting is `keyvault:<name>`"),
        Handler,
        None,
        "Key Vault URL for `keyvault:<secret-name>` setting values.",
    ),
    setting(
        CLASSIFIER_MODEL_PATH,
        Optional,
        Handler,
        None,
        "Classifier model file; the embedded default model when unset.",
    ),
    setting(
        ROUTE_UP_THRESHOLD,
        Optional,
        Handler,
        None,
        "Cumulative probability (0 to 1] a severity needs to be routed to; the model's own when unset.",
    ),
    setting(
        COALESCE_HOLD_SECONDS,
        Optional,
        Handler,
        Some("300"),
        "Longest a job that may share its outage's LLM call waits for it (a quarter of its deadline at most; 0 = never).",
    ),
    setting(
        TIER_TABLE,
        Optional,
        Handler,
        Some(DEFAULT_TIER_TABLE),
        "Tier of each summary at each routing severity, P1 to P5, in three rows: `technician` (tickets at ServiceNow's priority), `lifted` (technician summaries of tickets the classifier routed above it), `customer` (notices). Entries: `premium`, `standard`, `premium-when-calm` / `standard-when-calm` (that deployment while its last minute holds under half its budget; while contested, one tier down: premium to standard, standard to extractive), `extractive` (never the LLM). See docs/storm-lab.md, *The tier table*.",
    ),
    setting(
        RETENTION_DAYS,
        Optional,
        Handler,
        Some("14"),
        "Days a ticket's snapshot and summaries are kept after its last update (the one that resolved or closed it, for a finished ticket); 1 to 3650.",
    ),
    setting(
        DEAD_LETTER_MAX,
        Optional,
        Handler,
        Some("5000"),
        "Most dead letters kept; each one more trims the oldest, counted in the `retention` gauge (`dead_letters_trimmed_total`); 100 to 1000000.",
    ),
    setting(
        SERVICENOW_INSTANCE_URL,
        Optional,
        Handler,
        None,
        "ServiceNow instance `https://` URL (`http://` only to a loopback host); enables work-note write-back.",
    ),
    setting(
        SERVICENOW_USERNAME,
        RequiredWhen("SERVICENOW_INSTANCE_URL is set"),
        Handler,
        None,
        "ServiceNow user for work-note write-back.",
    ),
    secret(
        SERVICENOW_PASSWORD,
        RequiredWhen("SERVICENOW_INSTANCE_URL is set"),
        Handler,
        "ServiceNow password for work-note write-back.",
    ),
    setting(
        SEARCH_ENDPOINT,
        Optional,
        Handler,
        None,
        "Azure AI Search endpoint, `https://` (`http://` only to a loopback host); the three search settings: all or none.",
    ),
    setting(
        SEARCH_INDEX,
        RequiredWhen("STORMGATE_SEARCH_ENDPOINT is set"),
        Handler,
        None,
        "Azure AI Search index of related knowledge.",
    ),
    secret(
        SEARCH_API_KEY,
        RequiredWhen("STORMGATE_SEARCH_ENDPOINT is set"),
        Handler,
        "Azure AI Search API key.",
    ),
    setting(
        LOG_FORMAT,
        Optional,
        Handler,
        Some("json"),
        "`json` (one object per line, for Application Insights) or `pretty`.",
    ),
    setting(
        RUST_LOG,
        Optional,
        Handler,
        Some("info"),
        "Log filter (tracing-subscriber `EnvFilter` syntax).",
    ),
    setting(
        "FUNCTIONS_WORKER_RUNTIME",
        RequiredWhen(
            "running locally (Flex Consumption takes the runtime from the site and refuses the setting)",
        ),
        Host,
        Some("custom"),
        "Must be `custom` for a custom handler.",
    ),
    setting(
        "FUNCTIONS_EXTENSION_VERSION",
        RequiredWhen(
            "running locally (Flex Consumption takes the runtime from the site and refuses the setting)",
        ),
        Host,
        Some("~4"),
        "Functions runtime version.",
    ),
    secret(
        "AzureWebJobsStorage",
        Optional,
        Host,
        "Storage connection string; local runs use `UseDevelopmentStorage=true` (Azurite). In Azure use the identity-based settings below.",
    ),
    setting(
        "AzureWebJobsStorage__accountName",
        RequiredWhen("running in Azure"),
        Host,
        None,
        "Storage account of the host and the hand-off queues (identity-based connection).",
    ),
    setting(
        "AzureWebJobsStorage__credential",
        Optional,
        Host,
        Some("managedidentity"),
        "`managedidentity` for an identity-based storage connection.",
    ),
    setting(
        "AzureWebJobsStorage__clientId",
        Optional,
        Host,
        None,
        "User-assigned identity's client id for the storage connection.",
    ),
    setting(
        "APPLICATIONINSIGHTS_CONNECTION_STRING",
        Optional,
        Host,
        None,
        "Application Insights resource receiving logs and traces.",
    ),
    setting(
        "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
        Optional,
        Host,
        None,
        "`ClientId=<identity client id>;Authorization=AAD` when Application Insights accepts Entra ID only.",
    ),
    setting(
        "KAFKA_BROKERS",
        Required,
        Host,
        None,
        "Kafka bootstrap servers, `host:port[,host:port]`.",
    ),
    setting(
        "KAFKA_TOPIC",
        Required,
        Host,
        None,
        "Topic of ServiceNow incident events.",
    ),
    setting(
        "KAFKA_CONSUMER_GROUP",
        Required,
        Host,
        None,
        "Consumer group of the classify trigger.",
    ),
    setting("KAFKA_USERNAME", Required, Host, None, "SASL user name."),
    secret(
        "KAFKA_PASSWORD",
        Required,
        Host,
        "SASL password (a Key Vault reference in Azure).",
    ),
    setting(
        "KAFKA_NOTIFICATIONS_TOPIC",
        Required,
        Host,
        None,
        "Topic customer status notifications are published to.",
    ),
];

/// The table row of setting `name`.
pub fn spec(name: &str) -> Option<&'static SettingSpec> {
    SETTINGS.iter().find(|s| s.name == name)
}

/// The settings table as Markdown, as the README shows it (a test keeps them equal).
pub fn settings_markdown_table() -> String {
    let mut table = String::from(
        "| Setting | Required | Secret | Read by | Default | Description |\n|---|---|---|---|---|---|\n",
    );
    for spec in SETTINGS {
        let required = match spec.required {
            Requirement::Required => "yes".to_owned(),
            Requirement::Optional => "no".to_owned(),
            Requirement::RequiredWhen(condition) => format!("when {condition}"),
        };
        let secret = if spec.secret { "yes" } else { "" };
        let read_by = match spec.read_by {
            ReadBy::Handler => "handler",
            ReadBy::Host => "host",
        };
        let default = spec.default.map(|d| format!("`{d}`")).unwrap_or_default();
        table.push_str(&format!(
            "| `{}` | {required} | {secret} | {read_by} | {default} | {} |\n",
            spec.name, spec.description
        ));
    }
    table
}

/// Why start-up cannot continue. Every variant names the setting; none prints a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("setting {name} is missing: {why}")]
    Missing { name: &'static str, why: String },
    #[error("setting {name} is malformed: {reason}")]
    Malformed { name: &'static str, reason: String },
    #[error(
        "setting {name} is still a literal @Microsoft.KeyVault(...) reference: the platform could not resolve it \
         (check that the app's identity may read the secret and the reference is right)"
    )]
    UnresolvedKeyVaultReference { name: &'static str },
    /// A service endpoint that would send credentials in clear text over the network.
    #[error(
        "setting {name} must be an https:// URL ({url:?} is not; plain http is accepted only for a \
         loopback host: 127.0.0.0/8, ::1 or localhost)"
    )]
    NotHttps { name: &'static str, url: String },
    #[error("setting {name}: Key Vault secret {secret_name:?} could not be read: {reason}")]
    KeyVault {
        name: &'static str,
        secret_name: String,
        reason: String,
    },
}

/// Everything the handler reads from its app settings, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub port: u16,
    pub redis: RedisSettings,
    /// The user-assigned managed identity's client id; system-assigned when absent.
    pub azure_client_id: Option<String>,
    pub openai: OpenAiSettings,
    pub premium: TierSettings,
    pub standard: TierSettings,
    /// Fraction of each deployment's budget the governor leaves unused.
    pub governor_headroom: Headroom,
    pub key_vault_url: Option<String>,
    pub classifier_model_path: Option<PathBuf>,
    pub route_up_threshold: Option<f64>,
    /// The ingest policy's `coalesce_hold`.
    pub coalesce_hold: Duration,
    /// The ingest policy's tier table.
    pub tier_table: TierTable,
    /// What the store keeps: ticket retention and the dead-letter cap.
    pub store_limits: StoreLimits,
    pub servicenow: Option<ServiceNowSettings>,
    pub search: Option<SearchSettings>,
    pub log_format: LogFormat,
    pub rust_log: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RedisSettings {
    /// `redis://` or `rediss://`; may carry credentials, hence secret.
    pub url: Secret,
    pub auth: RedisAuth,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisAuth {
    /// Credentials in the URL, or none.
    Url,
    /// An Entra token from the managed identity; `user` is the identity's object id.
    Entra { user: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiSettings {
    /// `https://<account>.openai.azure.com/`
    pub endpoint: String,
    pub api_version: String,
    pub auth: OpenAiAuth,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenAiAuth {
    ManagedIdentity,
    ApiKey(Secret),
}

/// One Azure OpenAI deployment (a separate quota pool).
#[derive(Debug, Clone, PartialEq)]
pub struct TierSettings {
    /// Parsed so that it can name the governor's ledger keys.
    pub deployment: DeploymentName,
    pub model: String,
    pub tokens_per_minute: u64,
    /// As configured, else the model's ratio to the TPM ([`stormgate_shared::model_quota`]).
    pub requests_per_minute: u64,
    pub price_input_per_1m: f64,
    pub price_output_per_1m: f64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceNowSettings {
    pub instance_url: String,
    pub username: String,
    pub password: Secret,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchSettings {
    pub endpoint: String,
    pub index: String,
    pub api_key: Secret,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Json,
    Pretty,
}

impl Settings {
    /// What [`Settings::example_vars`] loads to: local services, table defaults.
    pub fn example() -> Settings {
        let tier = |name: &str, input: f64, output: f64| TierSettings {
            deployment: format!("{name}-deployment")
                .parse()
                .unwrap_or_else(|_| unreachable!("a valid deployment name")),
            model: format!("{name}-model"),
            tokens_per_minute: 10_000,
            requests_per_minute: 60,
            price_input_per_1m: input,
            price_output_per_1m: output,
        };
        Settings {
            port: 3000,
            redis: RedisSettings {
                url: Secret::new("redis://127.0.0.1:6379"),
                auth: RedisAuth::Url,
            },
            azure_client_id: None,
            openai: OpenAiSettings {
                endpoint: "https://example.openai.azure.com/".into(),
                api_version: "2024-10-21".into(),
                auth: OpenAiAuth::ManagedIdentity,
            },
            premium: tier("premium", 2.00, 8.00),
            standard: tier("standard", 0.40, 1.60),
            governor_headroom: Headroom::DEFAULT,
            key_vault_url: None,
            classifier_model_path: None,
            route_up_threshold: None,
            coalesce_hold: IngestPolicy::default().coalesce_hold,
            tier_table: TierTable::default(),
            store_limits: StoreLimits::default(),
            servicenow: None,
            search: None,
            log_format: LogFormat::Json,
            rust_log: None,
        }
    }
}

impl Settings {
    /// The two deployments' quotas, as the governor enforces them.
    pub fn deployment_budgets(&self) -> [DeploymentBudget; 2] {
        let budget = |tier, t: &TierSettings| DeploymentBudget {
            tier,
            deployment: t.deployment.clone(),
            tpm: t.tokens_per_minute,
            rpm: t.requests_per_minute,
        };
        [
            budget(Tier::Premium, &self.premium),
            budget(Tier::Standard, &self.standard),
        ]
    }

    /// The governor's policy: the configured headroom; the window and the "down" threshold
    /// at their defaults (the latter shared with the retry layer, see
    /// [`stormgate_shared::governor::DOWN_AFTER`]).
    pub fn governor_policy(&self) -> GovernorPolicy {
        GovernorPolicy {
            headroom: self.governor_headroom,
            ..GovernorPolicy::default()
        }
    }
}

/// The app settings as given, with empty values treated as unset (Bicep writes `''` for
/// optional settings it does not use).
struct AppSettings {
    values: HashMap<String, String>,
}

impl AppSettings {
    fn new(values: HashMap<String, String>) -> Self {
        AppSettings { values }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    fn required(&self, name: &'static str) -> Result<&str, ConfigError> {
        self.get(name).ok_or_else(|| ConfigError::Missing {
            name,
            why: spec(name).map_or("required", |s| s.description).to_owned(),
        })
    }

    fn required_because(&self, name: &'static str, why: &str) -> Result<&str, ConfigError> {
        self.get(name).ok_or_else(|| ConfigError::Missing {
            name,
            why: why.to_owned(),
        })
    }

    fn secret(&self, name: &'static str, value: &str) -> Result<Secret, ConfigError> {
        if value.starts_with(secrets::KEY_VAULT_PREFIX) {
            return Err(ConfigError::Malformed {
                name,
                reason: "the keyvault: reference was not resolved".into(),
            });
        }
        Ok(Secret::new(value))
    }

    fn required_secret(&self, name: &'static str, why: &str) -> Result<Secret, ConfigError> {
        self.secret(name, self.required_because(name, why)?)
    }

    /// Parses `name` with `parse`, or the table's default when unset.
    fn parsed_or_default<T>(
        &self,
        name: &'static str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let default = spec(name).and_then(|s| s.default);
        let Some(raw) = self.get(name).or(default) else {
            return Err(ConfigError::Missing {
                name,
                why: "required".into(),
            });
        };
        parse(raw).map_err(|reason| ConfigError::Malformed { name, reason })
    }

    fn parsed_optional<T>(
        &self,
        name: &'static str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, ConfigError> {
        self.get(name)
            .map(|raw| parse(raw).map_err(|reason| ConfigError::Malformed { name, reason }))
            .transpose()
    }
}

/// Values of handler settings that are literal Key Vault references reach us only when
/// App Service failed to resolve them: stop, naming the first such setting.
fn reject_unresolved_references(settings: &AppSettings) -> Result<(), ConfigError> {
    for spec in SETTINGS.iter().filter(|s| s.read_by == ReadBy::Handler) {
        if settings
            .get(spec.name)
            .is_some_and(|v| v.starts_with("@Microsoft.KeyVault("))
        {
            return Err(ConfigError::UnresolvedKeyVaultReference { name: spec.name });
        }
    }
    Ok(())
}

/// A service endpoint: `https://` with a host, or plain `http://` to a loopback host (a
/// local simulator or test server on this machine; nothing leaves it in clear text).
fn service_endpoint(name: &'static str, raw: &str) -> Result<String, ConfigError> {
    let url = Url::parse(raw).map_err(|e| ConfigError::Malformed {
        name,
        reason: format!("{:?} is not a URL: {e}", without_credentials(raw)),
    })?;
    let accepted = match (url.scheme(), url.host_str()) {
        ("https", Some(_)) => true,
        ("http", Some(host)) => is_loopback(host),
        _ => false,
    };
    if accepted {
        Ok(raw.to_owned())
    } else {
        Err(ConfigError::NotHttps {
            name,
            url: without_credentials(raw),
        })
    }
}

/// 127.0.0.0/8, ::1 and `localhost`: hosts whose traffic never leaves the machine.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

fn https_url(raw: &str) -> Result<String, String> {
    let shown = without_credentials(raw);
    let url = Url::parse(raw).map_err(|e| format!("{shown:?} is not a URL: {e}"))?;
    if url.scheme() != "https" || url.host_str().is_none() {
        return Err(format!("{shown:?} must be an https:// URL with a host"));
    }
    Ok(raw.to_owned())
}

/// A URL as it may be quoted in an error: a user or password in it is replaced, because a
/// start-up error is printed where anyone reading the host's logs can see it.
fn without_credentials(raw: &str) -> String {
    match Url::parse(raw) {
        Ok(mut url) if !url.username().is_empty() || url.password().is_some() => {
            // Only fails for URLs that cannot have credentials, which these have.
            let _ = url.set_username("redacted");
            let _ = url.set_password(None);
            url.to_string()
        }
        Ok(_) => raw.to_owned(),
        Err(_) => match raw.rsplit_once('@') {
            Some((_, host)) => format!("<redacted>@{host}"),
            None => raw.to_owned(),
        },
    }
}

fn positive_integer(raw: &str) -> Result<u64, String> {
    match raw.parse::<u64>() {
        Ok(0) => Err("must be greater than zero".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{raw:?} is not a whole number")),
    }
}

fn non_negative_number(raw: &str) -> Result<f64, String> {
    match raw.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{raw:?} is not a non-negative number")),
    }
}

fn headroom(raw: &str) -> Result<Headroom, String> {
    let fraction = raw
        .parse::<f64>()
        .map_err(|_| format!("{raw:?} is not a fraction"))?;
    Headroom::new(fraction).map_err(|e| e.to_string())
}

fn probability(raw: &str) -> Result<f64, String> {
    match raw.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err(format!(
            "{raw:?} is not a probability above 0 and at most 1"
        )),
    }
}

fn retention_days(raw: &str) -> Result<Duration, String> {
    match raw.trim().parse::<u64>() {
        Ok(days) if (1..=3650).contains(&days) => Ok(Duration::from_secs(days * 24 * 3600)),
        _ => Err(format!(
            "{raw:?} is not a whole number of days from 1 to 3650"
        )),
    }
}

fn dead_letter_max(raw: &str) -> Result<u64, String> {
    match raw.trim().parse::<u64>() {
        Ok(n) if (100..=1_000_000).contains(&n) => Ok(n),
        _ => Err(format!("{raw:?} is not a count from 100 to 1000000")),
    }
}

fn seconds(raw: &str) -> Result<Duration, String> {
    raw.trim()
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| format!("{raw:?} is not a whole number of seconds"))
}

fn port(raw: &str) -> Result<u16, String> {
    raw.parse::<u16>()
        .map_err(|_| format!("{raw:?} is not a TCP port"))
}

fn log_format(raw: &str) -> Result<LogFormat, String> {
    match raw {
        "json" => Ok(LogFormat::Json),
        "pretty" => Ok(LogFormat::Pretty),
        other => Err(format!("{other:?} is not `json` or `pretty`")),
    }
}

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

/// The six settings of one tier.
struct TierNames {
    deployment: &'static str,
    model: &'static str,
    tpm: &'static str,
    rpm: &'static str,
    price_input: &'static str,
    price_output: &'static str,
}

const PREMIUM: TierNames = TierNames {
    deployment: "STORMGATE_PREMIUM_DEPLOYMENT",
    model: "STORMGATE_PREMIUM_MODEL",
    tpm: "STORMGATE_PREMIUM_TPM",
    rpm: "STORMGATE_PREMIUM_RPM",
    price_input: "STORMGATE_PREMIUM_PRICE_INPUT_PER_1M",
    price_output: "STORMGATE_PREMIUM_PRICE_OUTPUT_PER_1M",
};

const STANDARD: TierNames = TierNames {
    deployment: "STORMGATE_STANDARD_DEPLOYMENT",
    model: "STORMGATE_STANDARD_MODEL",
    tpm: "STORMGATE_STANDARD_TPM",
    rpm: "STORMGATE_STANDARD_RPM",
    price_input: "STORMGATE_STANDARD_PRICE_INPUT_PER_1M",
    price_output: "STORMGATE_STANDARD_PRICE_OUTPUT_PER_1M",
};

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
        let resolved = secrets::resolve_vault_references(values, open_vault).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn vars_with(changes: &[(&'static str, &'static str)]) -> HashMap<String, String> {
        let mut vars: HashMap<String, String> = Settings::example_vars()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        for (name, value) in changes {
            vars.insert(name.to_string(), value.to_string());
        }
        vars
    }

    fn vars_without(name: &str) -> HashMap<String, String> {
        let mut vars = vars_with(&[]);
        vars.remove(name);
        vars
    }

    #[test]
    fn the_example_settings_load_with_table_defaults() {
        assert_eq!(
            Settings::from_vars(vars_with(&[])).unwrap(),
            Settings::example()
        );
    }

    #[test]
    fn retention_and_the_dead_letter_cap_are_read_and_default_to_the_stores() {
        let default = Settings::from_vars(vars_with(&[])).unwrap();
        assert_eq!(default.store_limits, StoreLimits::default());
        let set = Settings::from_vars(vars_with(&[
            (RETENTION_DAYS, "30"),
            (DEAD_LETTER_MAX, " 2000 "),
        ]))
        .unwrap();
        assert_eq!(
            set.store_limits.retention,
            Duration::from_secs(30 * 24 * 3600)
        );
        assert_eq!(set.store_limits.dead_letter_cap, 2000);
    }

    #[test]
    fn the_coalescing_hold_is_read_in_seconds_and_defaults_to_the_ingest_policys() {
        let default = Settings::from_vars(vars_with(&[])).unwrap();
        assert_eq!(default.coalesce_hold, Duration::from_secs(300));
        let none = Settings::from_vars(vars_with(&[(COALESCE_HOLD_SECONDS, "0")])).unwrap();
        assert_eq!(none.coalesce_hold, Duration::ZERO);
        let two = Settings::from_vars(vars_with(&[(COALESCE_HOLD_SECONDS, " 120 ")])).unwrap();
        assert_eq!(two.coalesce_hold, Duration::from_secs(120));
    }

    #[test]
    fn the_tier_table_is_parsed_and_defaults_to_the_seeds() {
        let default = Settings::from_vars(vars_with(&[])).unwrap();
        assert_eq!(default.tier_table, TierTable::default());
        assert_eq!(default.tier_table.to_string(), DEFAULT_TIER_TABLE);
        let table = "technician=premium,standard,standard,extractive,extractive;lifted=standard,standard,standard,extractive,extractive;customer=standard,standard,standard,standard,extractive";
        let tiers = Settings::from_vars(vars_with(&[(TIER_TABLE, table)])).unwrap();
        assert_eq!(tiers.tier_table.to_string(), table);
    }

    #[test]
    fn every_missing_required_handler_setting_is_named() {
        let required = SETTINGS
            .iter()
            .filter(|s| s.read_by == ReadBy::Handler && s.required == Requirement::Required);
        let mut checked = 0;
        for spec in required {
            let err = Settings::from_vars(vars_without(spec.name)).unwrap_err();
            assert!(
                matches!(err, ConfigError::Missing { name, .. } if name == spec.name),
                "{}: {err}",
                spec.name
            );
            assert!(err.to_string().contains(spec.name));
            checked += 1;
        }
        assert_eq!(
            checked, 8,
            "the example holds exactly the required handler settings"
        );
    }

    #[test]
    fn an_empty_value_counts_as_missing() {
        let err = Settings::from_vars(vars_with(&[(OPENAI_ENDPOINT, "  ")])).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Missing {
                    name: OPENAI_ENDPOINT,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_literal_key_vault_reference_stops_loading_naming_the_setting() {
        let reference =
            "@Microsoft.KeyVault(SecretUri=https://v.vault.azure.net/secrets/openai-key/)";
        let err = Settings::from_vars(vars_with(&[
            (OPENAI_API_KEY, reference),
            (OPENAI_AUTH, "api_key"),
        ]))
        .unwrap_err();
        assert_eq!(
            err,
            ConfigError::UnresolvedKeyVaultReference {
                name: OPENAI_API_KEY
            }
        );
        assert!(err.to_string().contains(OPENAI_API_KEY));
        assert!(
            !err.to_string().contains("openai-key/"),
            "the reference itself is not repeated"
        );
    }

    #[tokio::test]
    async fn load_rejects_a_literal_reference_before_opening_any_vault() {
        let vars = vars_with(&[(
            REDIS_URL,
            "@Microsoft.KeyVault(VaultName=v;SecretName=redis)",
        )]);
        let err = Settings::load(vars, |_, _| Err("must not be called".to_owned()))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ConfigError::UnresolvedKeyVaultReference { name: REDIS_URL }
        );
    }

    #[test]
    fn malformed_values_are_named_with_the_reason() {
        for (name, value, reason) in [
            ("STORMGATE_PREMIUM_TPM", "ten thousand", "whole number"),
            ("STORMGATE_STANDARD_TPM", "0", "greater than zero"),
            (GOVERNOR_HEADROOM, "1.5", "fraction"),
            (GOVERNOR_HEADROOM, "0.95", "0.9"),
            (
                "STORMGATE_PREMIUM_DEPLOYMENT",
                "premium deployment",
                "deployment name",
            ),
            (PORT, "70000", "port"),
            (LOG_FORMAT, "xml", "pretty"),
            (REDIS_AUTH, "password", "entra"),
            (ROUTE_UP_THRESHOLD, "0", "probability"),
            (COALESCE_HOLD_SECONDS, "5m", "seconds"),
            (
                TIER_TABLE,
                "technician=premium,premium,standard,standard,standard;lifted=standard,standard,standard,standard,standard",
                "the customer row is missing",
            ),
            (
                TIER_TABLE,
                "technician=premium,premium,gold,standard,standard;lifted=standard,standard,standard,standard,standard;customer=standard,standard,standard,standard,standard",
                "technician entry of P3",
            ),
            (RETENTION_DAYS, "0", "days"),
            (RETENTION_DAYS, "2w", "days"),
            (DEAD_LETTER_MAX, "10", "count"),
            (
                "STORMGATE_STANDARD_PRICE_INPUT_PER_1M",
                "-1",
                "non-negative",
            ),
        ] {
            let err = Settings::from_vars(vars_with(&[(name, value)])).unwrap_err();
            assert!(
                matches!(&err, ConfigError::Malformed { name: n, .. } if *n == name),
                "{name}: {err}"
            );
            assert!(err.to_string().contains(reason), "{name}: {err}");
        }
    }

    #[test]
    fn plain_http_endpoints_are_refused_unless_loopback_naming_the_setting() {
        for (name, url) in [
            (OPENAI_ENDPOINT, "http://example.openai.azure.com/"),
            (OPENAI_ENDPOINT, "http://10.0.0.5:8089"),
            (OPENAI_ENDPOINT, "http://127.0.0.1.example.com/"),
            (OPENAI_ENDPOINT, "ftp://127.0.0.1/"),
            (SERVICENOW_INSTANCE_URL, "http://x.service-now.com"),
            (SEARCH_ENDPOINT, "http://s.search.windows.net"),
        ] {
            let vars = vars_with(&[
                (name, url),
                (SERVICENOW_USERNAME, "u"),
                (SERVICENOW_PASSWORD, "p"),
                (SEARCH_INDEX, "kb"),
                (SEARCH_API_KEY, "k"),
                (SERVICENOW_INSTANCE_URL, "https://x.service-now.com"),
                (SEARCH_ENDPOINT, "https://s.search.windows.net"),
            ]);
            let mut vars = vars;
            vars.insert(name.to_owned(), url.to_owned());
            let err = Settings::from_vars(vars).unwrap_err();
            assert!(
                matches!(&err, ConfigError::NotHttps { name: n, .. } if *n == name),
                "{name}={url}: {err}"
            );
            let text = err.to_string();
            assert!(text.contains(name) && text.contains("https://"), "{text}");
        }
        let err = Settings::from_vars(vars_with(&[(
            OPENAI_ENDPOINT,
            "http://user:planted-secret-4f1c@openai.example/",
        )]))
        .unwrap_err();
        assert!(!err.to_string().contains("planted-secret-4f1c"), "{err}");
    }

    #[test]
    fn plain_http_is_accepted_for_loopback_hosts_only() {
        for url in [
            "http://127.0.0.1:8089",
            "http://127.3.2.1:8089/",
            "http://[::1]:8089",
            "http://localhost:8089",
            "http://LOCALHOST/",
            "https://example.openai.azure.com/",
        ] {
            let settings = Settings::from_vars(vars_with(&[(OPENAI_ENDPOINT, url)]))
                .unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(settings.openai.endpoint, url);
        }
        let settings = Settings::from_vars(vars_with(&[
            (SERVICENOW_INSTANCE_URL, "http://127.0.0.1:9000"),
            (SERVICENOW_USERNAME, "u"),
            (SERVICENOW_PASSWORD, "p"),
            (SEARCH_ENDPOINT, "http://localhost:9001"),
            (SEARCH_INDEX, "kb"),
            (SEARCH_API_KEY, "k"),
        ]))
        .unwrap();
        assert_eq!(
            settings.servicenow.map(|s| s.instance_url),
            Some("http://127.0.0.1:9000".to_owned())
        );
        assert_eq!(
            settings.search.map(|s| s.endpoint),
            Some("http://localhost:9001".to_owned())
        );
        // Key Vault is only ever https: its SDK refuses anything else.
        let err =
            Settings::from_vars(vars_with(&[(KEY_VAULT_URL, "http://127.0.0.1:1/")])).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Malformed {
                    name: KEY_VAULT_URL,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn secrets_are_redacted_in_settings_and_never_echoed_in_errors() {
        let planted = "planted-secret-4f1c";
        let vars = vars_with(&[
            (OPENAI_AUTH, "api_key"),
            (OPENAI_API_KEY, planted),
            (
                REDIS_URL,
                "rediss://:planted-secret-4f1c@cache.example:10000",
            ),
        ]);
        let settings = Settings::from_vars(vars).unwrap();
        assert!(!format!("{settings:?}").contains(planted));
        assert_eq!(
            settings.openai.auth,
            OpenAiAuth::ApiKey(Secret::new(planted))
        );

        let err = Settings::from_vars(vars_with(&[(
            REDIS_URL,
            "http://:planted-secret-4f1c@cache",
        )]))
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Malformed {
                name: REDIS_URL,
                ..
            }
        ));
        assert!(
            !err.to_string().contains(planted) && !format!("{err:?}").contains(planted),
            "{err}"
        );
    }

    #[test]
    fn conditional_settings_are_required_under_their_condition() {
        let err = Settings::from_vars(vars_with(&[(REDIS_AUTH, "entra")])).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Missing {
                    name: REDIS_USER,
                    ..
                }
            ),
            "{err}"
        );
        let entra =
            Settings::from_vars(vars_with(&[(REDIS_AUTH, "entra"), (REDIS_USER, "oid")])).unwrap();
        assert_eq!(entra.redis.auth, RedisAuth::Entra { user: "oid".into() });

        let err = Settings::from_vars(vars_with(&[(OPENAI_AUTH, "api_key")])).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Missing {
                    name: OPENAI_API_KEY,
                    ..
                }
            ),
            "{err}"
        );

        let err = Settings::from_vars(vars_with(&[(
            SERVICENOW_INSTANCE_URL,
            "https://x.service-now.com",
        )]))
        .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Missing {
                    name: SERVICENOW_USERNAME,
                    ..
                }
            ),
            "{err}"
        );
        let err = Settings::from_vars(vars_with(&[(SERVICENOW_PASSWORD, "p")])).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Missing {
                    name: SERVICENOW_INSTANCE_URL,
                    ..
                }
            ),
            "{err}"
        );

        let err = Settings::from_vars(vars_with(&[(SEARCH_INDEX, "kb")])).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Missing {
                    name: SEARCH_ENDPOINT,
                    ..
                }
            ),
            "{err}"
        );
        let search = Settings::from_vars(vars_with(&[
            (SEARCH_ENDPOINT, "https://s.search.windows.net"),
            (SEARCH_INDEX, "kb"),
            (SEARCH_API_KEY, "k"),
        ]))
        .unwrap();
        assert_eq!(search.search.map(|s| s.index), Some("kb".into()));
    }

    /// Secrets by name, as a vault would answer them.
    struct NamedSecrets(HashMap<&'static str, &'static str>);

    #[async_trait::async_trait]
    impl SecretSource for NamedSecrets {
        async fn fetch(&self, name: &str) -> Result<Secret, String> {
            self.0
                .get(name)
                .map(|v| Secret::new(*v))
                .ok_or_else(|| format!("no secret {name}"))
        }
    }

    #[tokio::test]
    async fn the_servicenow_password_and_search_key_may_come_from_key_vault() {
        let vars = vars_with(&[
            (KEY_VAULT_URL, "https://v.vault.azure.net/"),
            (SERVICENOW_INSTANCE_URL, "https://x.service-now.com"),
            (SERVICENOW_USERNAME, "stormgate.integration"),
            (SERVICENOW_PASSWORD, "keyvault:servicenow-password"),
            (SEARCH_ENDPOINT, "https://s.search.windows.net"),
            (SEARCH_INDEX, "past-incidents"),
            (SEARCH_API_KEY, "keyvault:search-key"),
        ]);
        let settings = Settings::load(vars, |_, _| {
            Ok(Arc::new(NamedSecrets(HashMap::from([
                ("servicenow-password", "sn-from-vault"),
                ("search-key", "search-from-vault"),
            ]))) as Arc<dyn SecretSource>)
        })
        .await
        .unwrap();
        let servicenow = settings.servicenow.unwrap();
        assert_eq!(servicenow.password, Secret::new("sn-from-vault"));
        assert_eq!(servicenow.username, "stormgate.integration");
        assert_eq!(
            settings.search.unwrap().api_key,
            Secret::new("search-from-vault")
        );
    }

    #[test]
    fn an_unresolved_keyvault_prefix_is_not_taken_as_the_secret() {
        let err = Settings::from_vars(vars_with(&[
            (OPENAI_AUTH, "api_key"),
            (OPENAI_API_KEY, "keyvault:openai-key"),
        ]))
        .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Malformed {
                    name: OPENAI_API_KEY,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn the_table_names_each_setting_once_and_defaults_parse() {
        let names: BTreeSet<&str> = SETTINGS.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), SETTINGS.len());
        assert!(
            SETTINGS.iter().all(|s| !(s.secret && s.default.is_some())),
            "secrets have no defaults"
        );
        assert!(
            SETTINGS
                .iter()
                .all(|s| !(s.required == Requirement::Required
                    && s.read_by == ReadBy::Handler
                    && s.default.is_some()))
        );
    }
}
