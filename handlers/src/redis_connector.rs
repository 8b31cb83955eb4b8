//! The production [`ConnectStore`]: the Redis store named by the settings, and the
//! governor's [`RedisLedger`] on its own connection to the same Redis with the same
//! credentials (connected on first use; a failed attempt is retried by the next call).
//!
//! With `STORMGATE_REDIS_AUTH=url` the URL carries the credentials (or none, locally).
//! With `entra` the app's managed identity authenticates: Azure Managed Redis takes the
//! identity's object id as the user name and a Microsoft Entra token as the password.
//! Tokens live about an hour, so the connection subscribes to a stream of credentials
//! that fetches a fresh token shortly before the current one expires and re-authenticates
//! the live connection, rather than failing an hour after start-up.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use azure_core::credentials::TokenCredential;
use azure_identity::{ManagedIdentityCredential, ManagedIdentityCredentialOptions, UserAssignedId};
use futures_util::Stream;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::auth::{BasicAuth, StreamingCredentialsProvider};
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::controls::ControlStore;
use stormgate_shared::controls::redis::RedisControls;
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::governor::{
    Admission, ExternalUsage, Ledger, LedgerError, LedgerSnapshot, Reconciliation, RedisLedger,
    ReportedRemaining, Reservation, ThrottleKind, WindowLimits,
};
use stormgate_shared::redis_link::RedisLink;
use stormgate_shared::signals::SignalStore;
use stormgate_shared::signals::redis::RedisSignals;
use stormgate_shared::store::redis::{Namespace, RedisStore};
use stormgate_shared::store::{Store, StoreError, StoreLimits};
use stormgate_shared::tokens::Tokens;
use tokio::sync::OnceCell;

use crate::config::{RedisAuth, RedisSettings};
use crate::lazy_store::ConnectStore;

/// The Entra scope Azure Managed Redis accepts tokens for.
pub const REDIS_TOKEN_SCOPE: &str = "https://redis.azure.com/.default";

/// Every key the handler writes lives under this namespace.
pub const NAMESPACE: &str = "stormgate";

/// How long before expiry a token is replaced.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// Wait after a failed token request before asking again.
const TOKEN_RETRY_DELAY: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct RedisConnector {
    settings: RedisSettings,
    client_id: Option<String>,
    namespace: String,
    limits: StoreLimits,
}

impl RedisConnector {
    /// `client_id` is the user-assigned identity (`AZURE_CLIENT_ID`), used with Entra auth.
    pub fn new(settings: RedisSettings, client_id: Option<String>) -> Self {
        RedisConnector {
            settings,
            client_id,
            namespace: NAMESPACE.to_owned(),
            limits: StoreLimits::default(),
        }
    }

    /// The same connector, its store keeping within `limits` (the settings' retention
    /// and dead-letter cap).
    pub fn with_limits(mut self, limits: StoreLimits) -> Self {
        self.limits = limits;
        self
    }

    /// A connector whose keys live under `namespace` (tests sharing one Redis).
    pub fn with_namespace(settings: RedisSettings, namespace: &str) -> Self {
        RedisConnector {
            namespace: namespace.to_owned(),
            ..RedisConnector::new(settings, None)
        }
    }

    fn client(&self) -> Result<redis::Client, StoreError> {
        redis::Client::open(self.settings.url.expose())
            .map_err(|e| StoreError::Unavailable(format!("STORMGATE_REDIS_URL: {e}")))
    }

    /// stormgate's connection defaults, plus Entra credentials when configured.
    fn connection_config(&self) -> Result<ConnectionManagerConfig, StoreError> {
        let config = RedisStore::connection_defaults();
        match &self.settings.auth {
            RedisAuth::Url => Ok(config),
            RedisAuth::Entra { user } => {
                let credential = managed_identity(self.client_id.as_deref())?;
                let provider = EntraCredentials {
                    user: user.clone(),
                    credential,
                };
                Ok(config.set_credentials_provider(provider))
            }
        }
    }

    fn namespace(&self) -> Result<Namespace, StoreError> {
        self.namespace
            .parse()
            .map_err(|e| StoreError::Unavailable(format!("namespace: {e}")))
    }

    /// A connection of its own to the same Redis, made on first use, for the stores next
    /// to the main one (signals, controls, the work-note outbox); one that can never connect when the URL or the
    /// credentials cannot even be read (the store reports why).
    pub fn link(&self) -> Arc<RedisLink> {
        match (self.client(), self.connection_config()) {
            (Ok(client), Ok(config)) => Arc::new(RedisLink::new(client, config)),
            _ => Arc::new(RedisLink::unconnectable()),
        }
    }

    fn store(&self) -> Result<RedisStore, StoreError> {
        let namespace = self.namespace()?;
        Ok(
            RedisStore::with_config(self.client()?, namespace, self.connection_config()?)
                .with_limits(self.limits),
        )
    }

    /// Where the governor's keys live: next to the store's namespace, hash-tagged per
    /// deployment by the ledger itself.
    fn ledger_prefix(&self) -> String {
        format!("{}:gov", self.namespace)
    }

    /// A key of this connector's namespace (`<namespace>:<suffix>`).
    pub fn key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.namespace)
    }

    /// A new connection to the configured Redis, with its credentials.
    async fn connection_manager(&self) -> Result<ConnectionManager, StoreError> {
        let client = self.client()?;
        let config = self.connection_config()?;
        ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))
    }
}

#[async_trait]
impl ConnectStore for RedisConnector {
    async fn connect(&self) -> Result<Arc<dyn Store>, StoreError> {
        // The store itself connects on first use; building it only checks the URL.
        Ok(Arc::new(self.store()?))
    }

    fn ledger(&self) -> Arc<dyn Ledger> {
        Arc::new(LazyRedisLedger {
            connector: self.clone(),
            ledger: OnceCell::new(),
        })
    }

    fn signals(&self) -> Arc<dyn SignalStore> {
        match self.namespace() {
            Ok(namespace) => Arc::new(RedisSignals::new(self.link(), &namespace)),
            Err(_) => Arc::new(RedisSignals::new(
                Arc::new(RedisLink::unconnectable()),
                &fallback_namespace(),
            )),
        }
    }

    fn controls(&self) -> Arc<dyn ControlStore> {
        match self.namespace() {
            Ok(namespace) => Arc::new(RedisControls::new(self.link(), &namespace)),
            Err(_) => Arc::new(RedisControls::new(
                Arc::new(RedisLink::unconnectable()),
                &fallback_namespace(),
            )),
        }
    }
}

/// The namespace a connector whose own is invalid names its unconnectable side stores with
/// (they never reach Redis; its store reports the invalid namespace).
fn fallback_namespace() -> Namespace {
    NAMESPACE
        .parse()
        .unwrap_or_else(|_| unreachable!("the default namespace is valid"))
}

/// The governor's [`RedisLedger`], connected by the first admission (or any other call)
/// that needs it; a failed connection is retried by the next call.
struct LazyRedisLedger {
    connector: RedisConnector,
    ledger: OnceCell<RedisLedger>,
}

impl std::fmt::Debug for LazyRedisLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyRedisLedger")
            .field("prefix", &self.connector.ledger_prefix())
            .field("connected", &self.ledger.initialized())
            .finish()
    }
}

impl LazyRedisLedger {
    async fn get(&self) -> Result<&RedisLedger, LedgerError> {
        self.ledger
            .get_or_try_init(|| async {
                let connection = self
                    .connector
                    .connection_manager()
                    .await
                    .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
                let ledger = RedisLedger::new(connection, self.connector.ledger_prefix());
                ledger.preload().await?;
                Ok(ledger)
            })
            .await
    }
}

#[async_trait]
impl Ledger for LazyRedisLedger {
    async fn admit(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        cost: Tokens,
        now: EpochMillis,
    ) -> Result<Admission, LedgerError> {
        self.get().await?.admit(deployment, limits, cost, now).await
    }

    async fn admit_send(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        cost: Tokens,
        replacing: Option<stormgate_shared::governor::ReservationId>,
        now: EpochMillis,
    ) -> Result<Admission, LedgerError> {
        self.get()
            .await?
            .admit_send(deployment, limits, cost, replacing, now)
            .await
    }

    async fn reconcile(
        &self,
        reservation: &Reservation,
        used: Tokens,
    ) -> Result<Reconciliation, LedgerError> {
        self.get().await?.reconcile(reservation, used).await
    }

    async fn throttle(
        &self,
        deployment: &DeploymentName,
        kind: ThrottleKind,
        until: EpochMillis,
    ) -> Result<EpochMillis, LedgerError> {
        self.get().await?.throttle(deployment, kind, until).await
    }

    async fn observe_remaining(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        reported: ReportedRemaining,
        now: EpochMillis,
    ) -> Result<ExternalUsage, LedgerError> {
        self.get()
            .await?
            .observe_remaining(deployment, limits, reported, now)
            .await
    }

    async fn snapshot(
        &self,
        deployment: &DeploymentName,
        limits: &WindowLimits,
        now: EpochMillis,
    ) -> Result<LedgerSnapshot, LedgerError> {
        self.get().await?.snapshot(deployment, limits, now).await
    }

    async fn clear_throttle(&self, deployment: &DeploymentName) -> Result<(), LedgerError> {
        self.get().await?.clear_throttle(deployment).await
    }
}

fn managed_identity(client_id: Option<&str>) -> Result<Arc<dyn TokenCredential>, StoreError> {
    let options = ManagedIdentityCredentialOptions {
        user_assigned_id: client_id.map(|id| UserAssignedId::ClientId(id.to_owned())),
        ..Default::default()
    };
    let credential = ManagedIdentityCredential::new(Some(options))
        .map_err(|e| StoreError::Unavailable(format!("managed identity: {e}")))?;
    Ok(credential)
}

/// Redis credentials from the managed identity, renewed before each token expires.
struct EntraCredentials {
    user: String,
    credential: Arc<dyn TokenCredential>,
}

impl StreamingCredentialsProvider for EntraCredentials {
    fn subscribe(
        &self,
    ) -> Pin<Box<dyn Stream<Item = redis::RedisResult<BasicAuth>> + Send + 'static>> {
        let user = self.user.clone();
        let credential = self.credential.clone();
        let stream = futures_util::stream::unfold(Duration::ZERO, move |wait| {
            let user = user.clone();
            let credential = credential.clone();
            async move {
                tokio::time::sleep(wait).await;
                match credential.get_token(&[REDIS_TOKEN_SCOPE], None).await {
                    Ok(token) => {
                        let next = refresh_delay(token.expires_on);
                        let auth = BasicAuth::new(user, token.token.secret().to_owned());
                        Some((Ok(auth), next))
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not get an Entra token for Redis");
                        let error = redis::RedisError::from((
                            redis::ErrorKind::AuthenticationFailed,
                            "Entra token for Redis unavailable",
                        ));
                        Some((Err(error), TOKEN_RETRY_DELAY))
                    }
                }
            }
        });
        Box::pin(stream)
    }
}

/// How long to keep a token that expires at `expires_on`.
fn refresh_delay(expires_on: azure_core::time::OffsetDateTime) -> Duration {
    let left = expires_on - azure_core::time::OffsetDateTime::now_utc();
    let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
    left.saturating_sub(REFRESH_BEFORE_EXPIRY)
        .max(TOKEN_RETRY_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_renewed_five_minutes_before_they_expire() {
        let in_an_hour =
            azure_core::time::OffsetDateTime::now_utc() + azure_core::time::Duration::hours(1);
        let delay = refresh_delay(in_an_hour);
        assert!(delay <= Duration::from_secs(55 * 60));
        assert!(delay > Duration::from_secs(54 * 60));
    }

    #[test]
    fn an_expired_token_is_renewed_after_a_short_pause_not_in_a_loop() {
        let past =
            azure_core::time::OffsetDateTime::now_utc() - azure_core::time::Duration::minutes(1);
        assert_eq!(refresh_delay(past), TOKEN_RETRY_DELAY);
    }

    #[tokio::test]
    async fn a_url_store_is_built_without_contacting_redis() {
        let settings = RedisSettings {
            url: crate::secrets::Secret::new("redis://127.0.0.1:1/"),
            auth: RedisAuth::Url,
        };
        let store = RedisConnector::new(settings, None).connect().await;
        assert!(store.is_ok(), "building the store must not connect");
    }

    #[tokio::test]
    async fn a_malformed_url_is_reported_without_its_value() {
        let settings = RedisSettings {
            url: crate::secrets::Secret::new("not a url with password hunter2"),
            auth: RedisAuth::Url,
        };
        let error = RedisConnector::new(settings, None)
            .connect()
            .await
            .expect_err("malformed URL");
        let text = error.to_string();
        assert!(text.contains("STORMGATE_REDIS_URL"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
