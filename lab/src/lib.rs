//! The storm lab: scenarios, the virtual-time replay engine, policies and the report.
//!
//! [`simulator`] is the Azure OpenAI simulator's core (also served over HTTP by
//! `stormgate simulate`).

pub mod functions_host;
pub mod history;
pub mod local;
pub mod plan;
pub mod replay;
pub mod report;
pub mod rng;
pub mod routing_eval;
pub mod scenario;
pub mod simulator;
pub mod simulator_http;
pub mod slo;
pub mod soak;
pub mod trace;
pub mod virtual_time;
