//! Test support shared with other crates' tests and benches (feature `test-support`):
//! a throwaway `redis-server`, builders for store fixtures, and a scripted LLM client.
//!
//! Another crate enables it for its tests only:
//! `[dev-dependencies] stormgate-shared = { workspace = true, features = ["test-support"] }`,
//! then `let server = RedisServer::start()?; let store = server.store("my-test")?;`.

pub mod fixtures;
pub mod redis_server;
pub mod scripted_llm;
