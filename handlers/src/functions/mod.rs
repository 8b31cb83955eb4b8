//! One module per Azure Function. Each handler decodes its trigger payload, calls
//! `stormgate-shared`, and encodes the answer; the logic itself lives in `shared`.

pub mod classify;
pub mod console;
pub mod controls;
pub mod dead_letters;
pub mod dispatch;
pub mod health;
pub mod region_rollup;
pub mod rollup;
pub mod series;
pub mod status;
pub mod summaries;
pub mod summarize;
