//! The Azure Functions host the end-to-end tests drive: the product's own host
//! emulation (`stormgate_handlers::functions_host`), built from `function-defs/` and
//! `host.json`, step by step. `stormgate local` runs the same emulation in real time.
//! It sends invocations to handler instances exactly as the host does, plays the Storage
//! queues between `dispatch` and the tier functions with the host's semantics (a message
//! is only enqueued when `dispatch` answered 2xx; a delivery that fails stays queued and
//! is poisoned after `maxDequeueCount`), and keeps the customer notices the functions
//! publish through their Kafka outputs as the notifications topic.

pub use stormgate_handlers::functions_host::{
    Answer, FunctionsHost, QueuedMessage, timer_invocation,
};
