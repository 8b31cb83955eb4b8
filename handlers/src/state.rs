//! [`AppState`]: what every function gets from the process that serves it: the product
//! as the one assembly ([`stormgate_shared::assembly`]) builds it (the store and the
//! governor over its ledger, both connected on first use, the classifier, the ingest and
//! dispatch policies, the clock, the tier functions' runtime) and the handler's own edge
//! (settings, ServiceNow sink, series, controls).
//!
//! Its own module so that the router ([`crate::app`]), the functions and the edge
//! modules they share (deliveries, signals) all depend on it and it on none of them.

use std::sync::Arc;

use stormgate_shared::assembly::{self, ClassifierLoadError, ProductIo, Summarizer};
use stormgate_shared::classifier::Classifier;
use stormgate_shared::clock::Clock;
use stormgate_shared::controls::ControlStore;
use stormgate_shared::dispatch_policy::DispatchConfig;
use stormgate_shared::governor::Governor;
use stormgate_shared::ingest::IngestPolicy;
use stormgate_shared::job::Tier;
use stormgate_shared::signals::{DeploymentConfig, FleetConfig, SignalStore};
use stormgate_shared::store::Store;

use crate::config::Settings;
use crate::error::ApiError;
use crate::lazy_store::LazyStore;
use crate::redis_connector::RedisConnector;
use crate::servicenow::WorkNoteSink;
use crate::tier_runtime::{self, EdgeClients, RuntimeSetupError};

/// What every function gets: the product as the one assembly
/// ([`stormgate_shared::assembly`]) built it over the store (connected on first use), and
/// the handler's own edge: the settings, the ServiceNow sink, the series and controls.
#[derive(Clone, Debug)]
pub struct AppState {
    pub store: Arc<LazyStore>,
    /// Built from the settings' deployments and headroom; cheap to clone. The tier
    /// functions must admit and reconcile through this same governor.
    pub governor: Governor,
    /// The severity classifier, loaded once; a model that cannot be loaded is reported by
    /// every invocation that classifies.
    pub classifier: Result<Arc<Classifier>, ClassifierLoadError>,
    /// What `classify` and dead-letter re-submission apply; its deadlines are stamped on
    /// every job, and `dispatch` spills by them.
    pub ingest: IngestPolicy,
    pub dispatch: DispatchConfig,
    pub clock: Arc<dyn Clock>,
    pub settings: Arc<Settings>,
    /// The tier functions' LLM client, deployments and related context; `None` when the
    /// process was assembled without an LLM client.
    pub summarization: Option<Arc<Summarizer>>,
    /// ServiceNow write-back, when configured.
    pub work_notes: Option<Arc<WorkNoteSink>>,
    /// The signal series next to the store (connected on first use).
    pub signals: Arc<dyn SignalStore>,
    /// The operators' controls and their audit next to the store (connected on first use).
    pub controls: Arc<dyn ControlStore>,
}

impl AppState {
    /// The handler as its binary runs it: the product assembled from `settings` over the
    /// Redis store they name and the clients they configure. Touches no network.
    pub fn from_settings(
        settings: Settings,
        clock: Arc<dyn Clock>,
        seed: u64,
    ) -> Result<Self, RuntimeSetupError> {
        let connector =
            RedisConnector::new(settings.redis.clone(), settings.azure_client_id.clone())
                .with_limits(settings.store_limits);
        let clients = tier_runtime::build(&settings, clock.clone(), &connector)?;
        let store = LazyStore::new(Arc::new(connector));
        Ok(Self::assemble(settings, store, clock, clients, seed))
    }

    /// The product assembled from `settings` over `store` and `clients`; `seed` is mixed
    /// into every tier worker's jitter. Touches no network: the store, its ledger and the
    /// clients connect on first use.
    pub fn assemble(
        settings: Settings,
        store: LazyStore,
        clock: Arc<dyn Clock>,
        clients: EdgeClients,
        seed: u64,
    ) -> Self {
        let store = Arc::new(store);
        let io = ProductIo {
            store: store.clone(),
            ledger: store.ledger(),
            llm: clients.llm,
            related: clients.related,
        };
        let product = assembly::assemble(settings.product(seed), io, clock);
        AppState {
            signals: store.signals(),
            controls: store.controls(),
            store: product.store,
            governor: product.governor,
            classifier: product.classifier,
            ingest: product.ingest,
            dispatch: product.dispatch,
            clock: product.clock,
            settings: Arc::new(settings),
            summarization: product.summarizer,
            work_notes: clients.work_notes.map(Arc::new),
        }
    }

    /// The product without an LLM client or sinks: the functions that make no call.
    pub fn new(settings: Settings, store: LazyStore, clock: Arc<dyn Clock>) -> Self {
        Self::assemble(settings, store, clock, EdgeClients::default(), 0)
    }

    /// The classifier; a model file that cannot be read or parsed is an internal error
    /// naming the setting.
    pub fn classifier(&self) -> Result<&Classifier, ApiError> {
        self.classifier
            .as_deref()
            .map_err(|e| ApiError::Internal(e.to_string()))
    }

    /// The store, connecting on first use; an unreachable store is a 503.
    pub async fn store(&self) -> Result<Arc<dyn Store>, ApiError> {
        Ok(self.store.get().await?)
    }

    /// What readers without these settings need (published with every `dispatch` tick):
    /// the deployments with their prices, the governor's policy, the deadlines.
    pub fn fleet_config(&self) -> FleetConfig {
        let tiers = [
            (Tier::Premium, &self.settings.premium),
            (Tier::Standard, &self.settings.standard),
        ];
        FleetConfig {
            deployments: tiers
                .into_iter()
                .map(|(tier, t)| DeploymentConfig {
                    tier,
                    deployment: t.deployment.clone(),
                    model: t.model.clone(),
                    tpm: t.tokens_per_minute,
                    rpm: t.requests_per_minute,
                    price_input_per_1m: t.price_input_per_1m,
                    price_output_per_1m: t.price_output_per_1m,
                })
                .collect(),
            policy: *self.governor.policy(),
            deadlines: self.ingest.deadlines,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use stormgate_shared::clock::ManualClock;
    use stormgate_shared::store::memory::MemoryStore;

    use super::*;

    #[test]
    fn the_ingest_policy_takes_the_coalescing_hold_from_the_settings() {
        let mut settings = Settings::example();
        settings.coalesce_hold = Duration::from_secs(42);
        let state = AppState::new(
            settings,
            LazyStore::ready(Arc::new(MemoryStore::new())),
            Arc::new(ManualClock::default()),
        );
        assert_eq!(state.ingest.coalesce_hold, Duration::from_secs(42));
        assert_eq!(state.ingest.deadlines, IngestPolicy::default().deadlines);
    }
}
