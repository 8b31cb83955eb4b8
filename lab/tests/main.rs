//! Tests of the storm lab: the replay and its report, the capacity plan's points, the
//! history reader, routing evaluation, the soak, the Azure OpenAI simulator over HTTP and
//! the Functions host emulation.
//!
//! One test binary for the crate: every file beside this one is a module of it, so the
//! dependencies are linked and their generics compiled once, not once per file. Run one
//! file's tests with `cargo test -p <crate> --test integration <file>::`.

mod functions_host_runtime;
mod fuzz_corpus;
mod history_reader;
mod host_emulation_facts;
mod routing_acceptance;
mod routing_evaluation;
mod simulator_http;
mod soak;
mod storm_lab;
mod strict_metering;
