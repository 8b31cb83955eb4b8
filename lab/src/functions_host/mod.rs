//! A stand-in for the Azure Functions host, built from the app's own definitions
//! (`function-defs/*/function.json` and `host.json`): it invokes a running handler
//! exactly as the host does (`POST /<function>` with `{Data, Metadata}`, forwarded HTTP
//! at `/api/...`) and plays the platform around it: Kafka batches, timers on their
//! NCRONTAB schedules, Storage queues with visibility timeout, dequeue count and poison
//! queue, function-level retry policies, and the Kafka topics the output bindings
//! publish to.
//!
//! Two drivers share the definitions, payloads, queues and output routing:
//! [`step_host::FunctionsHost`], which a test drives one step at a time, and
//! [`runtime::HostRuntime`], which runs the app in real time (`stormgate local`).
//! Where the emulation models a platform behaviour, the platform's values are recorded
//! with their origin in `tests/fixtures/platform/functions_host.json`.

pub mod app_definition;
pub mod invocation_client;
pub mod ncrontab;
pub mod outputs;
pub mod payloads;
pub mod retry_policy;
pub mod runtime;
pub mod step_host;
pub mod storage_queue;

pub use app_definition::AppDefinition;
pub use invocation_client::Answer;
pub use payloads::KafkaRecord;
pub use step_host::{FunctionsHost, timer_invocation};
pub use storage_queue::QueuedMessage;
