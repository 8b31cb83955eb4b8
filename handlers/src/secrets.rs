//! Secret values: a [`Secret`] never prints, and `keyvault:<name>` setting values are
//! resolved from Azure Key Vault through managed identity at start-up.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use azure_core::credentials::TokenCredential;
use azure_core::http::{ClientOptions, RetryOptions, Transport};
use azure_identity::{ManagedIdentityCredential, ManagedIdentityCredentialOptions, UserAssignedId};
use azure_security_keyvault_secrets::{SecretClient, SecretClientOptions};

use crate::config::{self, ConfigError, ReadBy, SETTINGS};

/// A secret setting whose value starts with this names a Key Vault secret instead.
pub const KEY_VAULT_PREFIX: &str = "keyvault:";

/// A secret value. Debug and Display print `[redacted]`; read it with [`Secret::expose`]
/// only where it leaves the process (an HTTP header, a connection string).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Where `keyvault:<name>` references are looked up.
#[async_trait]
pub trait SecretSource: Send + Sync {
    /// The secret's current value, or why it could not be read (never the value).
    async fn fetch(&self, name: &str) -> Result<Secret, String>;
}

/// Azure Key Vault through the Azure SDK.
pub struct KeyVaultSecrets {
    client: SecretClient,
}

impl KeyVaultSecrets {
    /// A client authenticating as the app's managed identity: user-assigned when
    /// `client_id` is given (`AZURE_CLIENT_ID`), system-assigned otherwise.
    pub fn managed_identity(vault_url: &str, client_id: Option<&str>) -> Result<Self, String> {
        let options = ManagedIdentityCredentialOptions {
            user_assigned_id: client_id.map(|id| UserAssignedId::ClientId(id.to_owned())),
            ..Default::default()
        };
        let credential =
            ManagedIdentityCredential::new(Some(options)).map_err(|e| e.to_string())?;
        KeyVaultSecrets::new(vault_url, credential, None)
    }

    /// A client with the given credential and, for tests, HTTP transport. SDK retries are
    /// off: start-up fails fast and the host restarts the process, rather than two retry
    /// layers multiplying each other.
    pub fn new(
        vault_url: &str,
        credential: Arc<dyn TokenCredential>,
        transport: Option<Transport>,
    ) -> Result<Self, String> {
        let client_options = ClientOptions {
            retry: RetryOptions::none(),
            transport,
            ..Default::default()
        };
        let options = SecretClientOptions {
            client_options,
            ..Default::default()
        };
        let client =
            SecretClient::new(vault_url, credential, Some(options)).map_err(|e| e.to_string())?;
        Ok(KeyVaultSecrets { client })
    }
}

#[async_trait]
impl SecretSource for KeyVaultSecrets {
    async fn fetch(&self, name: &str) -> Result<Secret, String> {
        let response = self
            .client
            .get_secret(name, None)
            .await
            .map_err(|e| e.to_string())?;
        let secret = response.into_model().map_err(|e| e.to_string())?;
        secret
            .value
            .map(Secret::new)
            .ok_or_else(|| "the secret has no value".to_owned())
    }
}

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
    let vault_url =
        present(&values, config::KEY_VAULT_URL).ok_or_else(|| ConfigError::Missing {
            name: config::KEY_VAULT_URL,
            why: format!("{first_setting} names a Key Vault secret"),
        })?;
    let client_id = present(&values, config::AZURE_CLIENT_ID);
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
    use std::sync::Mutex;

    use azure_core::credentials::{AccessToken, TokenRequestOptions};
    use azure_core::http::headers::Headers;
    use azure_core::http::{AsyncRawResponse, HttpClient, Request, StatusCode};
    use azure_core::time::{Duration, OffsetDateTime};

    const VAULT: &str = "https://stormgate-test.vault.azure.net/";

    #[test]
    fn secrets_never_print() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret}"), "[redacted]");
        assert_eq!(format!("{secret:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some([redacted])");
        assert_eq!(secret.expose(), "hunter2");
    }

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
                (config::OPENAI_API_KEY, "keyvault:openai-key"),
                (config::KEY_VAULT_URL, VAULT),
            ]),
            |url, client_id| {
                assert_eq!((url, client_id), (VAULT, None));
                Ok(source)
            },
        )
        .await
        .unwrap();
        assert_eq!(resolved[config::OPENAI_API_KEY], "sk-from-vault");
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
                (config::SERVICENOW_PASSWORD, "keyvault:no-such-secret"),
                (config::KEY_VAULT_URL, VAULT),
            ]),
            |_, _| Ok(source),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, ConfigError::KeyVault { name, secret_name, .. }
                if *name == config::SERVICENOW_PASSWORD && secret_name == "no-such-secret"),
            "{err:?}"
        );
        assert!(err.to_string().contains(config::SERVICENOW_PASSWORD));
    }

    #[tokio::test]
    async fn a_keyvault_reference_without_a_vault_url_names_the_missing_setting() {
        let err = resolve_vault_references(
            values(&[(config::REDIS_URL, "keyvault:redis-url")]),
            |_, _| Err("must not be called".to_owned()),
        )
        .await
        .unwrap_err();
        assert_eq!(
            err,
            ConfigError::Missing {
                name: config::KEY_VAULT_URL,
                why: "STORMGATE_REDIS_URL names a Key Vault secret".into()
            }
        );
    }

    #[tokio::test]
    async fn the_vault_is_not_opened_when_no_setting_needs_it() {
        let plain = values(&[
            (config::OPENAI_API_KEY, "sk-plain"),
            ("KAFKA_PASSWORD", "keyvault:host-reads-this"),
        ]);
        let resolved =
            resolve_vault_references(plain.clone(), |_, _| Err("must not be called".to_owned()))
                .await;
        assert_eq!(resolved.unwrap(), plain);
    }

    #[tokio::test]
    async fn a_malformed_secret_name_is_rejected_naming_the_setting() {
        let err = resolve_vault_references(
            values(&[(config::OPENAI_API_KEY, "keyvault:bad/name")]),
            |_, _| Err("must not be called".to_owned()),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Malformed {
                    name: config::OPENAI_API_KEY,
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
