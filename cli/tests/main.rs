//! Tests of the `stormgate` command line: the real binary's subcommands (train, replay
//! with a history, soak, dead letters, `local`).
//!
//! One test binary for the crate: every file beside this one is a module of it, so the
//! dependencies are linked and their generics compiled once, not once per file. Run one
//! file's tests with `cargo test -p <crate> --test integration <file>::`.

mod dead_letters;
mod local_stack;
mod replay_history_command;
mod soak_command;
// The handler tests' host-shaped invocations, shared rather than copied.
#[path = "../../handlers/tests/support/mod.rs"]
mod support;
mod train_command;
