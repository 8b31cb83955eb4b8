//! Test support shared with other crates' tests and benches (feature `test-support`):
//! a throwaway `redis-server`, builders for store fixtures and a scripted LLM client; and,
//! for this crate's own unit tests, events taken through ingest (`ingested`).
//!
//! Another crate enables it for its tests only:
//! `[dev-dependencies] stormgate-shared = { workspace = true, features = ["test-support"] }`,
//! then `let server = RedisServer::start()?; let store = server.store("my-test")?;`.

pub mod fixtures;
#[cfg(test)]
pub(crate) mod ingested;
pub mod redis_server;
pub mod scripted_llm;
