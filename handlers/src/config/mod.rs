//! Settings: the one table of every app setting stormgate knows ([`SETTINGS`]), and the
//! typed [`Settings`] the handler loads from them once at start-up.
//!
//! The table drives loading, the README's configuration table, `local.settings.json.example`
//! and the infrastructure checks, so a setting cannot exist in one place and not another.
//! Loading takes the variables as a map (never reads the process environment itself), so
//! tests need not mutate global state.
//!
//! One concern per file: the table as data (`table`), its Markdown rendering
//! (`markdown`), the typed settings (`settings`), the readers and validators of single
//! values (`readers`), Key Vault references (`vault_references`) and loading the one from
//! the others (`load`).

mod error;
mod load;
mod markdown;
mod readers;
mod settings;
mod table;
mod vault_references;

pub use error::ConfigError;
pub use markdown::settings_markdown_table;
pub use settings::{
    LogFormat, OpenAiAuth, OpenAiSettings, RedisAuth, RedisSettings, SearchSettings,
    ServiceNowSettings, Settings, TierSettings,
};
pub use table::*;

#[cfg(test)]
mod tests;
