//! Loading the settings end to end: table defaults, each reader's errors, Key Vault.

use super::*;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use stormgate_shared::store::StoreLimits;
use stormgate_shared::tier_table::{DEFAULT_TIER_TABLE, TierTable};

use crate::secrets::{Secret, SecretSource};

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
    let reference = "@Microsoft.KeyVault(SecretUri=https://v.vault.azure.net/secrets/openai-key/)";
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
