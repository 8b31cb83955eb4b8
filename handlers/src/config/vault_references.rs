//! `keyvault:<name>` values of handler secret settings, resolved from the vault named by
//! `STORMGATE_KEY_VAULT_URL` before the settings are parsed.

use std::collections::HashMap;
use std::sync::Arc;

use super::error::ConfigError;
use super::table::{AZURE_CLIENT_ID, KEY_VAULT_URL, ReadBy, SETTINGS};
use crate::secrets::{KEY_VAULT_PREFIX, SecretSource};

/// Replaces every handler secret setting of the form `keyvault:<name>` with the secret
/// read from the vault named by `STORMGATE_KEY_VAULT_URL`. `open_vault` is called once,
/// and only when some setting needs it.
pub async fn resolve_vault_references<F>(
    mut values: HashMap<String, String>,
    open_vault: F,
) -> Result<HashMap<String, String>, ConfigError>
where
    F: FnOnce(&str, Option<&str>) -> Result<Arc<dyn SecretSource>, String>,
{
    let references = vault_references(&values)?;
    let Some((first_setting, _)) = references.first() else {
        return Ok(values);
    };
    let vault_url = present(&values, KEY_VAULT_URL).ok_or_else(|| ConfigError::Missing {
        name: KEY_VAULT_URL,
        why: format!("{first_setting} names a Key Vault secret"),
    })?;
    let client_id = present(&values, AZURE_CLIENT_ID);
    let vault =
        open_vault(&vault_url, client_id.as_deref()).map_err(|reason| ConfigError::KeyVault {
            name: first_setting,
            secret_name: references[0].1.clone(),
            reason,
        })?;
    for (name, secret_name) in references {
        let secret = vault
            .fetch(&secret_name)
            .await
            .map_err(|reason| ConfigError::KeyVault {
                name,
                secret_name: secret_name.clone(),
                reason,
            })?;
        values.insert(name.to_owned(), secret.expose().to_owned());
    }
    Ok(values)
}

/// `(setting, secret name)` for each handler secret set to `keyvault:<name>`.
fn vault_references(
    values: &HashMap<String, String>,
) -> Result<Vec<(&'static str, String)>, ConfigError> {
    let mut references = Vec::new();
    for spec in SETTINGS
        .iter()
        .filter(|s| s.secret && s.read_by == ReadBy::Handler)
    {
        let Some(value) = present(values, spec.name) else {
            continue;
        };
        let Some(secret_name) = value.strip_prefix(KEY_VAULT_PREFIX) else {
            continue;
        };
        if !is_vault_secret_name(secret_name) {
            return Err(ConfigError::Malformed {
                name: spec.name,
                reason: "keyvault:<name> needs a secret name of letters, digits and dashes".into(),
            });
        }
        references.push((spec.name, secret_name.to_owned()));
    }
    Ok(references)
}

fn present(values: &HashMap<String, String>, name: &str) -> Option<String> {
    values
        .get(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// Key Vault secret names: 1-127 ASCII letters, digits and dashes.
fn is_vault_secret_name(name: &str) -> bool {
    (1..=127).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{OPENAI_API_KEY, REDIS_URL, SERVICENOW_PASSWORD};
    use crate::secrets::KeyVaultSecrets;
    use async_trait::async_trait;
    use azure_core::credentials::TokenCredential;
    use azure_core::http::Transport;
    use std::sync::Mutex;

    use azure_core::credentials::{AccessToken, TokenRequestOptions};
    use azure_core::http::headers::Headers;
    use azure_core::http::{AsyncRawResponse, HttpClient, Request, StatusCode};
    use azure_core::time::{Duration, OffsetDateTime};

    const VAULT: &str = "https://stormgate-test.vault.azure.net/";

    #[derive(Debug)]
    struct FakeManagedIdentity;

    #[async_trait]
    impl TokenCredential for FakeManagedIdentity {
        async fn get_token(
            &self,
            scopes: &[&str],
            _options: Option<TokenRequestOptions<'_>>,
        ) -> azure_core::Result<AccessToken> {
            assert_eq!(scopes, ["https://vault.azure.net/.default"]);
            Ok(AccessToken::new(
                "fake-token",
                OffsetDateTime::now_utc() + Duration::hours(1),
            ))
        }
    }

    /// Key Vault as the SDK sees it: a bearer challenge first, then secrets by name.
    #[derive(Debug, Default)]
    struct FakeVault {
        paths: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl HttpClient for FakeVault {
        async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
            let authorization = request
                .headers()
                .get_optional_str(&"authorization".into())
                .map(str::to_owned);
            let Some(authorization) = authorization else {
                let mut headers = Headers::new();
                headers.insert(
                    "www-authenticate",
                    r#"Bearer authorization="https://login.microsoftonline.com/tenant", resource="https://vault.azure.net""#,
                );
                return Ok(AsyncRawResponse::from_bytes(
                    StatusCode::Unauthorized,
                    headers,
                    Vec::new(),
                ));
            };
            assert_eq!(authorization, "Bearer fake-token");
            // The SDK asks for the latest version as `/secrets/<name>/`.
            let path = request.url().path().trim_end_matches('/').to_owned();
            self.paths.lock().unwrap().push(path.clone());
            let (status, body) = match path.as_str() {
                "/secrets/openai-key" => (
                    StatusCode::Ok,
                    r#"{"value": "sk-from-vault", "id": "https://stormgate-test.vault.azure.net/secrets/openai-key/1"}"#,
                ),
                _ => (
                    StatusCode::NotFound,
                    r#"{"error": {"code": "SecretNotFound", "message": "not found"}}"#,
                ),
            };
            let mut headers = Headers::new();
            headers.insert("content-type", "application/json");
            Ok(AsyncRawResponse::from_bytes(
                status,
                headers,
                body.as_bytes().to_vec(),
            ))
        }
    }

    fn fake_vault_source(vault: Arc<FakeVault>) -> Arc<dyn SecretSource> {
        let transport = Transport::new(vault);
        Arc::new(
            KeyVaultSecrets::new(VAULT, Arc::new(FakeManagedIdentity), Some(transport)).unwrap(),
        )
    }

    fn values(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[tokio::test]
    async fn keyvault_references_are_read_from_the_vault_with_the_managed_identity() {
        let vault = Arc::new(FakeVault::default());
        let source = fake_vault_source(vault.clone());
        let resolved = resolve_vault_references(
            values(&[
                (OPENAI_API_KEY, "keyvault:openai-key"),
                (KEY_VAULT_URL, VAULT),
            ]),
            |url, client_id| {
                assert_eq!((url, client_id), (VAULT, None));
                Ok(source)
            },
        )
        .await
        .unwrap();
        assert_eq!(resolved[OPENAI_API_KEY], "sk-from-vault");
        assert_eq!(
            *vault.paths.lock().unwrap(),
            vec!["/secrets/openai-key".to_owned()]
        );
    }

    #[tokio::test]
    async fn a_secret_the_vault_does_not_have_stops_start_up_naming_the_setting() {
        let source = fake_vault_source(Arc::new(FakeVault::default()));
        let err = resolve_vault_references(
            values(&[
                (SERVICENOW_PASSWORD, "keyvault:no-such-secret"),
                (KEY_VAULT_URL, VAULT),
            ]),
            |_, _| Ok(source),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, ConfigError::KeyVault { name, secret_name, .. }
                if *name == SERVICENOW_PASSWORD && secret_name == "no-such-secret"),
            "{err:?}"
        );
        assert!(err.to_string().contains(SERVICENOW_PASSWORD));
    }

    #[tokio::test]
    async fn a_keyvault_reference_without_a_vault_url_names_the_missing_setting() {
        let err = resolve_vault_references(values(&[(REDIS_URL, "keyvault:redis-url")]), |_, _| {
            Err("must not be called".to_owned())
        })
        .await
        .unwrap_err();
        assert_eq!(
            err,
            ConfigError::Missing {
                name: KEY_VAULT_URL,
                why: "STORMGATE_REDIS_URL names a Key Vault secret".into()
            }
        );
    }

    #[tokio::test]
    async fn the_vault_is_not_opened_when_no_setting_needs_it() {
        let plain = values(&[
            (OPENAI_API_KEY, "sk-plain"),
            ("KAFKA_PASSWORD", "keyvault:host-reads-this"),
        ]);
        let resolved =
            resolve_vault_references(plain.clone(), |_, _| Err("must not be called".to_owned()))
                .await;
        assert_eq!(resolved.unwrap(), plain);
    }

    #[tokio::test]
    async fn a_malformed_secret_name_is_rejected_naming_the_setting() {
        let err =
            resolve_vault_references(values(&[(OPENAI_API_KEY, "keyvault:bad/name")]), |_, _| {
                Err("must not be called".to_owned())
            })
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Malformed {
                    name: OPENAI_API_KEY,
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
