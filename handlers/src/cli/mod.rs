//! Subcommands of the `stormgate` command line, one module each.

pub mod dead_letters;
pub mod loadtest;
pub mod local;
pub mod replay;
pub mod simulate;
pub mod train;
