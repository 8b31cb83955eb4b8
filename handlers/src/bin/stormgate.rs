//! The `stormgate` command line: train, simulate, replay, dead letters.

fn main() {}
