//! stormgate-handlers: the Azure Functions custom handler around `stormgate-shared`.
//!
//! Only this crate knows HTTP, the Functions invocation payload format, the
//! environment and the system clock.

pub mod cli;
pub mod simulator_http;
