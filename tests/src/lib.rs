//! Harness for the end-to-end tests: local servers speaking the Azure OpenAI and ServiceNow
//! REST shapes, ServiceNow incident fixtures, and the fault suite's world (the handler
//! process, the Functions host, a Kafka topic, proxies that break or record the links to
//! Redis and Azure OpenAI). (The throwaway redis-server lives in `stormgate_shared::testing`.)

pub mod black_hole;
pub mod fault_proxy;
pub mod functions_host;
pub mod handler_process;
pub mod in_process;
pub mod kafka;
pub mod openai_server;
pub mod recording_proxy;
pub mod servicenow_server;
pub mod tickets;
