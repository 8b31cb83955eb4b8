//! The production [`ConnectStore`]: the Redis store named by the settings.
//!
//! `RedisStore` itself connects on its first command, so "connecting" here only builds
//! the client; an unreachable Redis shows up as `StoreError::Unavailable` on first use.

use std::sync::Arc;

use async_trait::async_trait;
use stormgate_shared::store::redis::{Namespace, RedisStore};
use stormgate_shared::store::{Store, StoreError};

use crate::config::{RedisAuth, RedisSettings};
use crate::lazy_store::ConnectStore;

/// The key namespace of the production store (every key sits in this hash tag).
pub const STORE_NAMESPACE: &str = "stormgate";

#[derive(Debug, Clone)]
pub struct RedisConnector {
    settings: RedisSettings,
    namespace: String,
}

impl RedisConnector {
    pub fn new(settings: RedisSettings) -> Self {
        RedisConnector::with_namespace(settings, STORE_NAMESPACE)
    }

    /// A connector into another namespace (tests sharing one server).
    pub fn with_namespace(settings: RedisSettings, namespace: &str) -> Self {
        RedisConnector {
            settings,
            namespace: namespace.to_owned(),
        }
    }
}

#[async_trait]
impl ConnectStore for RedisConnector {
    async fn connect(&self) -> Result<Arc<dyn Store>, StoreError> {
        if let RedisAuth::Entra { .. } = self.settings.auth {
            return Err(StoreError::Unavailable(
                "Entra ID authentication to Redis is not implemented yet (STORMGATE_REDIS_AUTH=entra)".into(),
            ));
        }
        let namespace: Namespace = self
            .namespace
            .parse()
            .map_err(|e| StoreError::Unavailable(format!("store namespace: {e}")))?;
        // The URL may carry a password: the error names the setting, not the value.
        let client = redis::Client::open(self.settings.url.expose()).map_err(|_| {
            StoreError::Unavailable("STORMGATE_REDIS_URL is not a usable Redis URL".into())
        })?;
        Ok(Arc::new(RedisStore::new(client, namespace)))
    }
}
