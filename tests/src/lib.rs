//! Harness for the end-to-end tests: local servers speaking the Azure OpenAI and ServiceNow
//! REST shapes, and ServiceNow incident fixtures. (The throwaway redis-server lives in
//! `stormgate_shared::testing`.)

pub mod openai_server;
pub mod servicenow_server;
pub mod tickets;
