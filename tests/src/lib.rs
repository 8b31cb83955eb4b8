//! Harness for the end-to-end tests: a throwaway redis-server, the handler process, the simulator.

pub mod openai_server;
pub mod redis_server;
pub mod servicenow_server;
