//! stormgate-shared: the domain and scheduling logic of stormgate.
//!
//! Tickets are parsed ([`event`]), bounded ([`log_bounding`]), classified locally
//! ([`classifier`]) and given an instant extractive summary ([`extractive`]) by
//! [`ingest`]; LLM work waits in per-tier priority queues ([`store`]); [`dispatcher`]
//! admits it through the token [`governor`]; [`summarize`] turns admitted jobs into
//! stored summaries with exactly one [`retry`] layer, falling back to extraction;
//! [`sinks`] takes what a settled job owes to the notifications topic and ServiceNow.
//!
//! This crate knows neither HTTP nor the Azure Functions payload format, never reads
//! the environment, and never reads the system clock: time comes from a [`clock::Clock`].

pub mod assembly;
pub mod classifier;
pub mod clock;
pub mod configured_sinks;
pub mod control_actions;
pub mod controls;
pub mod dead_letters;
pub mod deadline_policy;
pub mod deployment_name;
pub mod dispatch_policy;
pub mod dispatcher;
pub mod duration_secs;
pub mod event;
mod event_fields;
pub mod extractive;
pub mod extractive_settlement;
pub mod fault_switches;
pub mod gauges;
pub mod governor;
pub mod headroom;
pub mod ingest;
pub mod job;
pub mod llm;
pub mod log_bounding;
pub mod metering;
pub mod model_quota;
pub mod prompts;
pub mod redis_link;
pub mod region_key;
pub mod region_rollup;
pub mod related_context;
pub mod resummarize;
pub mod retention;
pub mod retry;
pub mod rollup;
pub mod routing;
pub mod routing_explanation;
pub mod sample_events;
pub mod scrubber;
pub mod severity;
pub mod signals;
pub mod sinks;
pub mod snapshot;
pub mod store;
pub mod summarize;
pub mod summary;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod ticket;
pub mod ticket_id;
pub mod ticket_number;
pub mod tier_table;
pub mod token_estimate;
pub mod tokens;
