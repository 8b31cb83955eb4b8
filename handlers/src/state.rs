//! [`AppState`]: what every function gets from the process that serves it: the store
//! and the governor over its ledger (both connected on first use), the ingest and
//! dispatch policies, the clock, the settings and the tier functions' runtime.
//!
//! Its own module so that the router ([`crate::app`]), the functions and the edge
//! modules they share (deliveries, signals) all depend on it and it on none of them.

use std::sync::Arc;

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
use crate::tier_runtime::SummarizeRuntime;

/// What every function gets: the store (connected on first use), the token governor
/// over the ledger next to it (also connected on first use), the ingest policy (with the
/// one deadline table), the dispatch policy, the clock and the settings.
#[derive(Clone, Debug)]
pub struct AppState {
    pub store: Arc<LazyStore>,
    /// Built from the settings' deployments and headroom; cheap to clone. The tier
    /// functions must admit and reconcile through this same governor.
    pub governor: Governor,
    /// What `classify` and dead-letter re-submission apply; its deadlines are stamped on
    /// every job, and `dispatch` spills by them.
    pub ingest: IngestPolicy,
    pub dispatch: DispatchConfig,
    pub clock: Arc<dyn Clock>,
    pub settings: Arc<Settings>,
    /// The tier functions' LLM client, governor and sinks; `None` until configured.
    pub summarization: Option<Arc<SummarizeRuntime>>,
    /// The signal series next to the store (connected on first use).
    pub signals: Arc<dyn SignalStore>,
    /// The operators' controls and their audit next to the store (connected on first use).
    pub controls: Arc<dyn ControlStore>,
}

impl AppState {
    /// Builds the governor without touching Redis: its ledger connects on first use.
    pub fn new(settings: Settings, store: LazyStore, clock: Arc<dyn Clock>) -> Self {
        let governor = Governor::new(
            store.ledger(),
            settings.governor_policy(),
            settings.deployment_budgets(),
        );
        AppState {
            signals: store.signals(),
            controls: store.controls(),
            store: Arc::new(store),
            governor,
            ingest: IngestPolicy {
                coalesce_hold: settings.coalesce_hold,
                tiers: settings.tier_table,
                ..IngestPolicy::default()
            },
            dispatch: DispatchConfig::default(),
            clock,
            settings: Arc::new(settings),
            summarization: None,
        }
    }

    /// Equips the tier functions with their LLM client, governor and sinks.
    pub fn with_summarization(mut self, runtime: SummarizeRuntime) -> Self {
        self.summarization = Some(Arc::new(runtime));
        self
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
