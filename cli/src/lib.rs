//! Subcommands of the `stormgate` command line, one module each.

pub mod control;
pub mod dead_letters;
pub mod lab_input;
pub mod lab_progress;
pub mod loadtest;
pub mod local;
pub mod plan;
pub mod replay;
pub mod simulate;
pub mod soak;
pub mod status;
pub mod train;
