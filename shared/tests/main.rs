//! Integration tests of the domain and scheduling crate against a real redis-server.
//!
//! One test binary for the crate: every file beside this one is a module of it, so the
//! dependencies are linked and their generics compiled once, not once per file. Run one
//! file's tests with `cargo test -p <crate> --test integration <file>::`.

mod console_store;
mod controls_conformance;
mod dead_letter_resubmission;
mod dispatch_controls;
mod dispatcher;
mod dispatcher_props;
mod governor_conformance;
mod governor_fleet;
mod governor_props;
mod ingest_batch;
mod outbox_conformance;
mod redis_store;
mod scrubber_corpus;
mod scrubber_props;
mod signals_conformance;
mod status_collect;
mod store_conformance;
mod store_properties;
mod support;
mod token_estimate_bound;
mod train_uci_excerpt;
