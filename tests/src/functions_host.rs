//! The Azure Functions host the end-to-end tests drive: the product's own host
//! emulation (`stormgate_lab::functions_host`), built from `function-defs/` and
//! `host.json`, step by step. `stormgate local` runs the same emulation in real time.
//! It sends invocations to handler instances exactly as the host does, plays the Storage
//! queues between `dispatch` and the tier functions with the host's semantics (a message
//! is only enqueued when `dispatch` answered 2xx; a delivery that fails stays queued and
//! is poisoned after `maxDequeueCount`), and keeps the customer notices the functions
//! publish through their Kafka outputs as the notifications topic. A function's retry
//! policy is the one the emulation reads from its `function.json`.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test harness: a failure is a failed test

use serde_json::Value;
pub use stormgate_lab::functions_host::retry_policy::RetryPolicy;
pub use stormgate_lab::functions_host::{
    Answer, AppDefinition, FunctionsHost, QueuedMessage, timer_invocation,
};

/// The retry policy of `function-defs/<function>/function.json` as the emulation reads
/// it; `None` when it has none.
pub fn retry_policy_of(function: &str) -> Option<RetryPolicy> {
    let app = AppDefinition::built_in().expect("function-defs/ and host.json load");
    app.function(function)
        .unwrap_or_else(|| panic!("no function {function} in function-defs/"))
        .retry
}

/// When the Kafka trigger commits a batch's offsets
/// (`tests/fixtures/platform/retry-and-offsets.json`, written from the Kafka
/// extension's sources).
#[derive(Debug, Clone)]
pub struct PlatformFacts {
    /// The Kafka trigger commits a batch's offsets once the retry loop ends, failed or not.
    pub commits_when_retries_end_in_failure: bool,
}

impl PlatformFacts {
    pub fn load() -> PlatformFacts {
        let path = repo_path("tests/fixtures/platform/retry-and-offsets.json");
        let facts: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        PlatformFacts {
            commits_when_retries_end_in_failure:
                facts["kafka_trigger"]["offsets_committed_when_retries_end_in_failure"]
                    .as_bool()
                    .unwrap(),
        }
    }
}

/// A path in the repository.
pub fn repo_path(relative: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}
