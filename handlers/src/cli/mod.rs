//! The `stormgate` command line's subcommands, one module each.

pub mod simulate;
