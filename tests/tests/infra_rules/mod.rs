//! Rules the Bicep in `infra/` must keep, checked on its syntax tree without reaching Azure.
//!
//! Each rule is a function from parsed files (and, where the handler is involved, its settings table) to a list
//! of violations, so a test can run it on the real templates and on small broken fixtures alike.

pub mod alerts;
pub mod api_versions;
pub mod app_settings;
pub mod bicep;
pub mod function_bindings;
pub mod model_deployments;
pub mod module_params;
pub mod resource_types;
pub mod roles;
pub mod secrets;
pub mod syntax;
