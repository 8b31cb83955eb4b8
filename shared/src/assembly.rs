//! The one place the product is put together: from typed settings, a clock and the I/O it
//! runs on, [`assemble`] builds the governor over the ledger, the classifier, the ingest
//! and dispatch policies and the tier workers' runtime (LLM client, deployments,
//! related context).
//!
//! The I/O is injected behind the product's traits, so every runner gets the same
//! product: the handler binary passes the Redis store and the Azure OpenAI clients, the
//! storm lab its memory store and in-process simulator, the end-to-end tests real Redis
//! and the simulator over HTTP. What differs between them is a setting here (the lab
//! switches related context off), never a wiring of their own.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::classifier::model::Model;
use crate::classifier::{Classifier, DEFAULT_MODEL_JSON, DEFAULT_ROUTE_UP_THRESHOLD};
use crate::clock::Clock;
use crate::configured_sinks::Sinks;
use crate::deployment_name::DeploymentName;
use crate::dispatch_policy::DispatchConfig;
use crate::governor::{DeploymentBudget, Governor, GovernorPolicy, Ledger};
use crate::ingest::IngestPolicy;
use crate::job::Tier;
use crate::llm::LlmClient;
use crate::related_context::RelatedContext;
use crate::retry::RetryGate;
use crate::store::Store;
use crate::summarize::{Deployment, SummarizeSettings, TierWorker};

/// One LLM deployment as the product uses it: what calls go to and what the governor
/// budgets for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentSettings {
    pub name: DeploymentName,
    pub model: String,
    pub tokens_per_minute: u64,
    pub requests_per_minute: u64,
}

impl DeploymentSettings {
    fn budget(&self, tier: Tier) -> DeploymentBudget {
        DeploymentBudget {
            tier,
            deployment: self.name.clone(),
            tpm: self.tokens_per_minute,
            rpm: self.requests_per_minute,
        }
    }

    fn deployment(&self, tier: Tier) -> Deployment {
        Deployment {
            tier,
            name: self.name.clone(),
            model: self.model.clone(),
        }
    }
}

/// Which classifier model the product routes with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ClassifierModel {
    /// The model built into the crate.
    #[default]
    Embedded,
    /// A model file (`STORMGATE_CLASSIFIER_MODEL_PATH`).
    File(PathBuf),
}

/// The classifier: its model and the probability from which a ticket routes up.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassifierSettings {
    pub model: ClassifierModel,
    pub route_up_threshold: f32,
}

impl Default for ClassifierSettings {
    fn default() -> Self {
        ClassifierSettings {
            model: ClassifierModel::Embedded,
            route_up_threshold: DEFAULT_ROUTE_UP_THRESHOLD,
        }
    }
}

/// Why the classifier could not be loaded. The messages name the setting to fix, since
/// every invocation that classifies reports them until it is fixed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClassifierLoadError {
    #[error("STORMGATE_CLASSIFIER_MODEL_PATH {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("classifier model: {0}")]
    Model(String),
}

impl ClassifierSettings {
    /// As configured: a model file or the embedded model, a threshold or the default.
    pub fn from_options(model_path: Option<PathBuf>, route_up_threshold: Option<f64>) -> Self {
        ClassifierSettings {
            model: model_path.map_or(ClassifierModel::Embedded, ClassifierModel::File),
            route_up_threshold: route_up_threshold.map_or(DEFAULT_ROUTE_UP_THRESHOLD, |t| t as f32),
        }
    }

    /// Reads and parses the model: the embedded one or the file.
    pub fn load(&self) -> Result<Classifier, ClassifierLoadError> {
        let model = match &self.model {
            ClassifierModel::Embedded => Model::from_json(DEFAULT_MODEL_JSON),
            ClassifierModel::File(path) => {
                let json =
                    std::fs::read_to_string(path).map_err(|e| ClassifierLoadError::Unreadable {
                        path: path.display().to_string(),
                        reason: e.to_string(),
                    })?;
                Model::from_json(&json)
            }
        }
        .map_err(|e| ClassifierLoadError::Model(e.to_string()))?;
        Ok(Classifier::new(model, self.route_up_threshold))
    }
}

/// Whether technician prompts are given similar past incidents when a source is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelatedContextMode {
    /// Consulted when the I/O brings a source (the deployed handler, with Azure AI Search).
    Consulted,
    /// Never consulted, whatever the I/O brings: the storm lab measures the LLM path
    /// alone, and a search answer would make a replay depend on an index.
    Off,
}

/// The product's settings, typed: what every runner decides before it starts.
#[derive(Debug, Clone)]
pub struct ProductSettings {
    pub premium: DeploymentSettings,
    pub standard: DeploymentSettings,
    pub governor: GovernorPolicy,
    pub ingest: IngestPolicy,
    pub dispatch: DispatchConfig,
    pub summarize: SummarizeSettings,
    pub classifier: ClassifierSettings,
    pub related_context: RelatedContextMode,
    /// Mixed into every tier worker's jitter seed.
    pub seed: u64,
}

/// What the product runs on, built by the runner: the store handle (`S`: the handler's
/// connects on first use), the governor's ledger next to it, the LLM client (none in
/// tests of the functions that make no call) and a related-context source.
pub struct ProductIo<S> {
    pub store: S,
    pub ledger: Arc<dyn Ledger>,
    pub llm: Option<Arc<dyn LlmClient>>,
    pub related: Option<Arc<dyn RelatedContext>>,
}

/// The assembled product.
#[derive(Debug, Clone)]
pub struct Product<S> {
    pub store: S,
    /// The one governor over the ledger: dispatch and every retry admit through it.
    pub governor: Governor,
    /// Loaded once; an unreadable model is reported by each use rather than stopping
    /// the process, so that the host's health probe still answers.
    pub classifier: Result<Arc<Classifier>, ClassifierLoadError>,
    pub ingest: IngestPolicy,
    pub dispatch: DispatchConfig,
    pub clock: Arc<dyn Clock>,
    /// The tier workers' runtime; `None` when no LLM client was passed.
    pub summarizer: Option<Arc<Summarizer>>,
}

/// What the tier workers (and the roll-up) need beyond the store and the governor.
#[derive(Debug)]
pub struct Summarizer {
    pub client: Arc<dyn LlmClient>,
    pub premium: Deployment,
    pub standard: Deployment,
    pub settings: SummarizeSettings,
    /// Similar past incidents for technician prompts, when consulted and configured.
    pub related: Option<Arc<dyn RelatedContext>>,
    /// Mixed into each invocation's jitter seed.
    pub seed: u64,
}

impl Summarizer {
    /// The deployment a tier's calls go to; the extractive tier has none.
    pub fn deployment(&self, tier: Tier) -> Option<&Deployment> {
        match tier {
            Tier::Premium => Some(&self.premium),
            Tier::Standard => Some(&self.standard),
            Tier::Extractive => None,
        }
    }

    /// A tier worker for one invocation on `deployment`, its jitter seeded by `rng_seed`
    /// and its claims on calls named `holder`.
    #[allow(clippy::too_many_arguments)] // one invocation's own values, each distinct
    pub fn worker<'a>(
        &'a self,
        store: &'a dyn Store,
        gate: &'a dyn RetryGate,
        clock: &'a dyn Clock,
        deployment: Deployment,
        rng_seed: u64,
        sinks: Sinks,
        holder: String,
    ) -> TierWorker<'a> {
        TierWorker {
            store,
            client: self.client.as_ref(),
            gate,
            clock,
            deployment,
            settings: self.settings,
            rng: Mutex::new(SmallRng::seed_from_u64(rng_seed)),
            related: self.related.as_deref(),
            sinks,
            holder,
        }
    }
}

/// Builds the product. Nothing here touches the network: the I/O passed connects on
/// first use if it must; only a classifier model file is read.
pub fn assemble<S>(
    settings: ProductSettings,
    io: ProductIo<S>,
    clock: Arc<dyn Clock>,
) -> Product<S> {
    let governor = Governor::new(
        io.ledger,
        settings.governor,
        [
            settings.premium.budget(Tier::Premium),
            settings.standard.budget(Tier::Standard),
        ],
    );
    let related = match settings.related_context {
        RelatedContextMode::Consulted => io.related,
        RelatedContextMode::Off => None,
    };
    let summarizer = io.llm.map(|client| {
        Arc::new(Summarizer {
            client,
            premium: settings.premium.deployment(Tier::Premium),
            standard: settings.standard.deployment(Tier::Standard),
            settings: settings.summarize,
            related,
            seed: settings.seed,
        })
    });
    Product {
        store: io.store,
        governor,
        classifier: settings.classifier.load().map(Arc::new),
        ingest: settings.ingest,
        dispatch: settings.dispatch,
        clock,
        summarizer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::governor::MemoryLedger;
    use crate::testing::scripted_llm::ScriptedLlm;

    fn settings(related_context: RelatedContextMode) -> ProductSettings {
        let deployment = |name: &str| DeploymentSettings {
            name: name
                .parse()
                .unwrap_or_else(|_| unreachable!("a valid name")),
            model: "gpt-4o".into(),
            tokens_per_minute: 10_000,
            requests_per_minute: 60,
        };
        ProductSettings {
            premium: deployment("premium"),
            standard: deployment("standard"),
            governor: GovernorPolicy::default(),
            ingest: IngestPolicy::default(),
            dispatch: DispatchConfig::default(),
            summarize: SummarizeSettings::default(),
            classifier: ClassifierSettings::default(),
            related_context,
            seed: 9,
        }
    }

    fn io(with_related: bool) -> ProductIo<()> {
        // An empty script: a call would fail, and assembling makes none.
        let llm: Arc<dyn LlmClient> = Arc::new(ScriptedLlm::new([]));
        let related: Option<Arc<dyn RelatedContext>> =
            with_related.then(|| Arc::new(NoMatches) as Arc<dyn RelatedContext>);
        ProductIo {
            store: (),
            ledger: Arc::new(MemoryLedger::new()),
            llm: Some(llm),
            related,
        }
    }

    /// A related-context source that knows no incidents.
    #[derive(Debug)]
    struct NoMatches;

    #[async_trait::async_trait]
    impl RelatedContext for NoMatches {
        async fn related(&self, _query: &str) -> Vec<String> {
            Vec::new()
        }
    }

    #[test]
    fn the_governor_budgets_both_deployments_of_the_settings() {
        let product = assemble(
            settings(RelatedContextMode::Consulted),
            io(false),
            Arc::new(ManualClock::default()),
        );
        let name = |tier| product.governor.deployment_for(tier).map(|d| d.to_string());
        assert_eq!(name(Tier::Premium).as_deref(), Some("premium"));
        assert_eq!(name(Tier::Standard).as_deref(), Some("standard"));
    }

    #[test]
    fn related_context_switched_off_is_not_consulted_even_when_passed() {
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::default());
        let on = assemble(
            settings(RelatedContextMode::Consulted),
            io(true),
            clock.clone(),
        );
        let off = assemble(settings(RelatedContextMode::Off), io(true), clock);
        assert!(on.summarizer.as_ref().is_some_and(|s| s.related.is_some()));
        assert!(off.summarizer.as_ref().is_some_and(|s| s.related.is_none()));
    }

    #[test]
    fn an_unreadable_model_file_is_reported_naming_its_setting() {
        let mut s = settings(RelatedContextMode::Off);
        s.classifier.model = ClassifierModel::File("/nonexistent/model.json".into());
        let product = assemble(s, io(false), Arc::new(ManualClock::default()));
        let error = product
            .classifier
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.starts_with("STORMGATE_CLASSIFIER_MODEL_PATH /nonexistent/model.json: "),
            "{error}"
        );
    }

    #[test]
    fn without_an_llm_client_there_is_no_summarizer() {
        let mut io = io(false);
        io.llm = None;
        let product = assemble(
            settings(RelatedContextMode::Consulted),
            io,
            Arc::new(ManualClock::default()),
        );
        assert!(product.summarizer.is_none());
        assert!(product.classifier.is_ok());
    }
}
