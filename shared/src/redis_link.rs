//! A Redis connection made by its first use, for the stores that sit next to the main
//! one (signals, controls): building one touches nothing, a failed attempt is retried by
//! the next call instead of being remembered, and once made it is shared by clones (a
//! [`ConnectionManager`] reconnects by itself).

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

/// A connection to one Redis, made on first use.
pub struct RedisLink {
    source: Option<(redis::Client, ConnectionManagerConfig)>,
    connection: OnceCell<ConnectionManager>,
}

impl RedisLink {
    /// A link that connects with `client` and `config` when first used.
    pub fn new(client: redis::Client, config: ConnectionManagerConfig) -> RedisLink {
        RedisLink {
            source: Some((client, config)),
            connection: OnceCell::new(),
        }
    }

    /// A link that never connects: every use is an error (a connector whose URL or
    /// credentials could not even be read; its store says why).
    pub fn unconnectable() -> RedisLink {
        RedisLink {
            source: None,
            connection: OnceCell::new(),
        }
    }

    /// Around a connection that is already made (tests, tools).
    pub fn ready(connection: ConnectionManager) -> RedisLink {
        RedisLink {
            source: None,
            connection: OnceCell::new_with(Some(connection)),
        }
    }

    /// The connection, connecting now if this is the first use.
    pub async fn get(&self) -> Result<ConnectionManager, redis::RedisError> {
        self.connection
            .get_or_try_init(|| async {
                match &self.source {
                    Some((client, config)) => {
                        ConnectionManager::new_with_config(client.clone(), config.clone()).await
                    }
                    None => Err(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "no connection to make",
                    ))),
                }
            })
            .await
            .cloned()
    }

    pub fn is_connected(&self) -> bool {
        self.connection.initialized()
    }
}

impl std::fmt::Debug for RedisLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client's connection info may hold credentials.
        f.debug_struct("RedisLink")
            .field("connected", &self.is_connected())
            .finish_non_exhaustive()
    }
}
