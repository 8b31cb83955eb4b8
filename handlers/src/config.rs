//! Typed settings, loaded once at start-up from the app settings (environment).

use std::path::PathBuf;

use crate::secrets::Secret;

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
    pub governor_headroom: f64,
    pub key_vault_url: Option<String>,
    pub classifier_model_path: Option<PathBuf>,
    pub route_up_threshold: Option<f64>,
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
    pub deployment: String,
    pub model: String,
    pub tokens_per_minute: u64,
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
    /// Settings pointing at local services, for tests and local runs.
    pub fn example() -> Settings {
        let tier = |name: &str| TierSettings {
            deployment: format!("{name}-deployment"),
            model: format!("{name}-model"),
            tokens_per_minute: 10_000,
            price_input_per_1m: 1.0,
            price_output_per_1m: 4.0,
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
            premium: tier("premium"),
            standard: tier("standard"),
            governor_headroom: 0.10,
            key_vault_url: None,
            classifier_model_path: None,
            route_up_threshold: None,
            servicenow: None,
            search: None,
            log_format: LogFormat::Json,
            rust_log: None,
        }
    }
}
