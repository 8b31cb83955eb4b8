//! Test support shared with other crates' tests and benches (feature `test-support`):
//! a throwaway `redis-server` and builders for store fixtures.
//!
//! Another crate enables it for its tests only:
//! `[dev-dependencies] stormgate-shared = { workspace = true, features = ["test-support"] }`,
//! then `let server = RedisServer::start()?; let store = server.store("my-test")?;`.

pub mod fixtures;
pub mod redis_server;
