//! Secret values: a [`Secret`] never prints, and [`KeyVaultSecrets`] reads a secret from
//! Azure Key Vault through managed identity. Which settings may name a vault secret, and
//! when they are resolved, is the settings' business (`config::vault_references`).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use azure_core::credentials::TokenCredential;
use azure_core::http::{ClientOptions, RetryOptions, Transport};
use azure_identity::{ManagedIdentityCredential, ManagedIdentityCredentialOptions, UserAssignedId};
use azure_security_keyvault_secrets::{SecretClient, SecretClientOptions};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret}"), "[redacted]");
        assert_eq!(format!("{secret:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some([redacted])");
        assert_eq!(secret.expose(), "hunter2");
    }
}
