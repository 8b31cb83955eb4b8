//! Harness for the end-to-end tests: local servers speaking the Azure OpenAI, ServiceNow
//! and Azure AI Search REST shapes, ServiceNow incident fixtures, and the fault suite's
//! world (the handler process, the Functions host, a Kafka topic, proxies that break or
//! record the links to Redis and Azure OpenAI), the host's key check in front of the HTTP
//! routes, and headless Chromium over WebDriver. (The throwaway redis-server lives in
//! `stormgate_shared::testing`.)

pub mod fault_proxy;
pub mod functions_host;
pub mod handler_process;
pub mod host_keys;
pub mod kafka;
pub mod openai_server;
pub mod recording_proxy;
pub mod search_server;
pub mod servicenow_server;
pub mod tickets;
pub mod webdriver;
