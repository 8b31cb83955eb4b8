//! [`ConfigError`]: why start-up cannot continue, naming the setting, never its value.

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
