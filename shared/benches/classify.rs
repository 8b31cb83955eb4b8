//! Classify+enqueue throughput benchmark.

fn main() {}
