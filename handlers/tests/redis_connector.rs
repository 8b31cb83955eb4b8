//! The handler's store connection against a real, throwaway `redis-server`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use stormgate_handlers::config::{RedisAuth, RedisSettings};
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::redis_connector::RedisConnector;
use stormgate_handlers::secrets::Secret;
use stormgate_shared::job::Tier;
use stormgate_shared::store::StoreError;
use stormgate_shared::testing::redis_server::RedisServer;

fn connector(url: &str) -> RedisConnector {
    RedisConnector::with_namespace(
        RedisSettings {
            url: Secret::new(url),
            auth: RedisAuth::Url,
        },
        "handler-test",
    )
}

#[tokio::test]
async fn the_store_connects_on_first_use_to_the_configured_redis() {
    let server = RedisServer::start().unwrap();
    let store = LazyStore::new(Arc::new(connector(&server.url())));
    assert!(!store.is_connected());
    let stats = store
        .get()
        .await
        .unwrap()
        .queue_stats(Tier::Premium)
        .await
        .unwrap();
    assert_eq!(stats.pending, 0);
    assert!(store.is_connected());
}

#[tokio::test]
async fn an_unreachable_redis_is_unavailable_not_a_crash() {
    let port = RedisServer::free_port().unwrap();
    let store = LazyStore::new(Arc::new(connector(&format!(
        "redis://:hunter2@127.0.0.1:{port}/"
    ))));
    let err = store
        .get()
        .await
        .unwrap()
        .queue_stats(Tier::Standard)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
}
