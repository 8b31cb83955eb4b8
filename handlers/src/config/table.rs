//! The settings table as data: every app setting stormgate knows ([`SETTINGS`]), with
//! whether it is required or secret, who reads it (the handler or the host), its default
//! and its description. Loading, the README's table, `local.settings.json.example` and the
//! infrastructure checks all read it, so a setting cannot exist in one and not another.

use stormgate_shared::tier_table::DEFAULT_TIER_TABLE;

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

/// The six settings of one tier.
pub(super) struct TierNames {
    pub(super) deployment: &'static str,
    pub(super) model: &'static str,
    pub(super) tpm: &'static str,
    pub(super) rpm: &'static str,
    pub(super) price_input: &'static str,
    pub(super) price_output: &'static str,
}

pub(super) const PREMIUM: TierNames = TierNames {
    deployment: "STORMGATE_PREMIUM_DEPLOYMENT",
    model: "STORMGATE_PREMIUM_MODEL",
    tpm: "STORMGATE_PREMIUM_TPM",
    rpm: "STORMGATE_PREMIUM_RPM",
    price_input: "STORMGATE_PREMIUM_PRICE_INPUT_PER_1M",
    price_output: "STORMGATE_PREMIUM_PRICE_OUTPUT_PER_1M",
};

pub(super) const STANDARD: TierNames = TierNames {
    deployment: "STORMGATE_STANDARD_DEPLOYMENT",
    model: "STORMGATE_STANDARD_MODEL",
    tpm: "STORMGATE_STANDARD_TPM",
    rpm: "STORMGATE_STANDARD_RPM",
    price_input: "STORMGATE_STANDARD_PRICE_INPUT_PER_1M",
    price_output: "STORMGATE_STANDARD_PRICE_OUTPUT_PER_1M",
};
