//! stormgate-handlers: the Azure Functions custom handler around `stormgate-shared`.
//!
//! Only this crate knows HTTP, the Functions invocation payload format, the
//! environment and the system clock.

pub mod app;
pub mod classifier_loader;
pub mod config;
pub mod deliveries;
pub mod error;
pub mod fault_injection;
pub mod functions;
pub mod invocation;
pub mod lazy_store;
pub mod openai;
pub mod redis_connector;
pub mod related_search;
pub mod secrets;
pub mod servicenow;
pub mod signals;
pub mod state;
pub mod system_clock;
pub mod telemetry;
pub mod tier_runtime;
