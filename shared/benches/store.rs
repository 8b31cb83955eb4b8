//! Store benchmarks (in progress).
fn main() {}
