//! Harness for the end-to-end tests: local servers speaking the Azure OpenAI, ServiceNow
//! and Azure AI Search REST shapes, and ServiceNow incident fixtures. (The throwaway redis-server lives in
//! `stormgate_shared::testing`.)

pub mod openai_server;
pub mod search_server;
pub mod servicenow_server;
pub mod tickets;
