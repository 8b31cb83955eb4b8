//! End-to-end tests: the real handler process, a real redis-server, the Azure OpenAI simulator over HTTP.
//!
//! One test binary for the crate: every file beside this one is a module of it, so the
//! dependencies are linked and their generics compiled once, not once per file. Run one
//! file's tests with `cargo test -p <crate> --test e2e <file>::`.

mod console_browser;
mod console_controls;
mod console_storm;
mod fault_rig;
mod faults_crash;
mod faults_degraded;
mod faults_duplicate_handoff;
mod faults_kafka;
mod faults_llm;
mod faults_outage;
mod faults_redis;
mod faults_servicenow;
mod infra;
mod infra_rules;
mod openai_client;
mod prompt_injection;
mod related_context;
mod remaining_budget_feedback;
mod report_render;
mod servicenow_writeback;
mod summarize_e2e;
mod test_app;
mod tidy;
mod tier_function;
mod work_note_writeback;
