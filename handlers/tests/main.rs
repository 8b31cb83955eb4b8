//! Tests of the handler edge: the router, the functions as the host drives them, the handler process.
//!
//! One test binary for the crate: every file beside this one is a module of it, so the
//! dependencies are linked and their generics compiled once, not once per file. Run one
//! file's tests with `cargo test -p <crate> --test integration <file>::`.

mod classify_function;
mod console_api;
mod dispatch_function;
mod doc_links;
mod function_defs;
mod fuzz_corpus;
mod handler_process;
mod pipeline;
mod read_api;
mod redis_connector;
mod redis_tls;
mod routes;
mod secrets_never_leak;
mod settings_docs;
mod support;
