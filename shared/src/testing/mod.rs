//! Test support shared with other crates' tests and benches (feature `test-support`):
//! a throwaway `redis-server` and builders for store fixtures.

pub mod fixtures;
pub mod redis_server;
