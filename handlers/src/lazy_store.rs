//! The store, connected on first use, and the governor ledger that lives next to it.
//!
//! The Functions host polls `GET /` and gives up after 60 s, so start-up must not wait
//! for Redis: the connection is made by the first invocation that needs it, and a failed
//! attempt is retried by the next one instead of being remembered. The ledger comes from
//! the same connector, built without I/O and connecting on first use as well, so the
//! governor can be built at start-up and a fleet always shares one budget per deployment.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use stormgate_shared::controls::ControlStore;
use stormgate_shared::controls::memory::MemoryControls;
use stormgate_shared::governor::{Ledger, MemoryLedger};
use stormgate_shared::signals::SignalStore;
use stormgate_shared::signals::memory::MemorySignals;
use stormgate_shared::store::{Store, StoreError};
use tokio::sync::OnceCell;

/// Makes the store's connection. Production connects to Redis; tests pass a ready store.
#[async_trait]
pub trait ConnectStore: Send + Sync {
    async fn connect(&self) -> Result<Arc<dyn Store>, StoreError>;

    /// The governor ledger shared by every instance using this store. Must not block
    /// or touch the network: it connects on first use.
    fn ledger(&self) -> Arc<dyn Ledger>;

    /// The signal series next to the store (connects on first use, as the ledger).
    fn signals(&self) -> Arc<dyn SignalStore>;

    /// The operators' controls and their audit next to the store (connects on first use).
    fn controls(&self) -> Arc<dyn ControlStore>;
}

/// A store handle that connects when first asked for the store.
pub struct LazyStore {
    connector: Arc<dyn ConnectStore>,
    store: OnceCell<Arc<dyn Store>>,
}

impl LazyStore {
    pub fn new(connector: Arc<dyn ConnectStore>) -> Self {
        LazyStore {
            connector,
            store: OnceCell::new(),
        }
    }

    /// A handle around a store that is already connected, with a process-local ledger,
    /// series and controls (tests and single-process runs).
    pub fn ready(store: Arc<dyn Store>) -> Self {
        Self::ready_with_ledger(store, Arc::new(MemoryLedger::new()))
    }

    /// A handle around a store that is already connected and the ledger next to it, with
    /// a process-local series and controls.
    pub fn ready_with_ledger(store: Arc<dyn Store>, ledger: Arc<dyn Ledger>) -> Self {
        LazyStore {
            connector: Arc::new(AlreadyConnected {
                store: store.clone(),
                ledger,
                signals: Arc::new(MemorySignals::new()),
                controls: Arc::new(MemoryControls::new()),
            }),
            store: OnceCell::new_with(Some(store)),
        }
    }

    /// The signal series next to the store (built without connecting).
    pub fn signals(&self) -> Arc<dyn SignalStore> {
        self.connector.signals()
    }

    /// The controls next to the store (built without connecting).
    pub fn controls(&self) -> Arc<dyn ControlStore> {
        self.connector.controls()
    }

    /// The governor ledger next to the store (built without connecting).
    pub fn ledger(&self) -> Arc<dyn Ledger> {
        self.connector.ledger()
    }

    /// The store, connecting now if this is the first use (or the last attempt failed).
    pub async fn get(&self) -> Result<Arc<dyn Store>, StoreError> {
        self.store
            .get_or_try_init(|| self.connector.connect())
            .await
            .cloned()
    }

    pub fn is_connected(&self) -> bool {
        self.store.initialized()
    }
}

impl fmt::Debug for LazyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyStore")
            .field("connected", &self.is_connected())
            .finish()
    }
}

struct AlreadyConnected {
    store: Arc<dyn Store>,
    ledger: Arc<dyn Ledger>,
    signals: Arc<dyn SignalStore>,
    controls: Arc<dyn ControlStore>,
}

#[async_trait]
impl ConnectStore for AlreadyConnected {
    async fn connect(&self) -> Result<Arc<dyn Store>, StoreError> {
        Ok(self.store.clone())
    }

    fn ledger(&self) -> Arc<dyn Ledger> {
        self.ledger.clone()
    }

    fn signals(&self) -> Arc<dyn SignalStore> {
        self.signals.clone()
    }

    fn controls(&self) -> Arc<dyn ControlStore> {
        self.controls.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct CountingUnreachable(AtomicUsize);

    #[async_trait]
    impl ConnectStore for CountingUnreachable {
        async fn connect(&self) -> Result<Arc<dyn Store>, StoreError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Err(StoreError::Unavailable("connection refused".into()))
        }

        fn ledger(&self) -> Arc<dyn Ledger> {
            Arc::new(MemoryLedger::new())
        }

        fn signals(&self) -> Arc<dyn SignalStore> {
            Arc::new(MemorySignals::new())
        }

        fn controls(&self) -> Arc<dyn ControlStore> {
            Arc::new(MemoryControls::new())
        }
    }

    #[tokio::test]
    async fn nothing_connects_until_the_store_is_asked_for_and_failures_are_retried() {
        let connector = Arc::new(CountingUnreachable::default());
        let lazy = LazyStore::new(connector.clone());
        assert_eq!(connector.0.load(Ordering::SeqCst), 0);
        assert!(lazy.get().await.is_err());
        assert!(lazy.get().await.is_err());
        assert_eq!(
            connector.0.load(Ordering::SeqCst),
            2,
            "a failed connection is not cached"
        );
        assert!(!lazy.is_connected());
    }
}
