//! The typed [`Settings`] the handler runs on, and what the governor reads from them.

use std::path::PathBuf;
use std::time::Duration;

use stormgate_shared::assembly::{
    ClassifierSettings, DeploymentSettings, ProductSettings, RelatedContextMode,
};
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::dispatch_policy::DispatchConfig;
use stormgate_shared::governor::{DeploymentBudget, GovernorPolicy};
use stormgate_shared::headroom::Headroom;
use stormgate_shared::ingest::IngestPolicy;
use stormgate_shared::job::Tier;
use stormgate_shared::store::StoreLimits;
use stormgate_shared::summarize::SummarizeSettings;
use stormgate_shared::tier_table::TierTable;

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

    /// What the one assembly builds the deployed product from: these settings' deployments,
    /// headroom, coalescing hold, tier table and classifier; related context consulted when
    /// search is configured; `seed` mixed into every tier worker's jitter.
    pub fn product(&self, seed: u64) -> ProductSettings {
        let deployment = |t: &TierSettings| DeploymentSettings {
            name: t.deployment.clone(),
            model: t.model.clone(),
            tokens_per_minute: t.tokens_per_minute,
            requests_per_minute: t.requests_per_minute,
        };
        ProductSettings {
            premium: deployment(&self.premium),
            standard: deployment(&self.standard),
            governor: self.governor_policy(),
            ingest: IngestPolicy {
                coalesce_hold: self.coalesce_hold,
                tiers: self.tier_table,
                ..IngestPolicy::default()
            },
            dispatch: DispatchConfig::default(),
            summarize: SummarizeSettings::default(),
            classifier: ClassifierSettings::from_options(
                self.classifier_model_path.clone(),
                self.route_up_threshold,
            ),
            related_context: RelatedContextMode::Consulted,
            seed,
        }
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
