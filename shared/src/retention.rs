//! Retention: what keeps the store bounded, run on a timer.
//!
//! Each run deletes the tickets whose retention ended ([`Store::purge_expired`], at most
//! [`PURGE_PER_RUN`] of them) and reads the dead-letter stream's size against its cap,
//! and reports both as one gauge event (`event="retention"`, target
//! `stormgate::gauges`): `tickets_purged`, `more_due`, `dead_letters`,
//! `dead_letter_cap` and `dead_letters_trimmed_total`. The `rollup` timer runs it every
//! minute; the soak (`stormgate soak`) runs it on a virtual clock.

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;
use crate::gauges::TARGET;
use crate::store::{DeadLetterStats, PurgeReport, Store, StoreError};

/// Tickets one run purges at most: far above any day's intake per minute, small enough
/// that one script never holds Redis for long.
pub const PURGE_PER_RUN: usize = 1_000;

/// What one run did and saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionReport {
    pub purged: PurgeReport,
    pub dead_letters: DeadLetterStats,
}

impl RetentionReport {
    /// Logs the `retention` gauge event.
    pub fn emit(&self) {
        tracing::info!(
            target: TARGET,
            event = "retention",
            tickets_purged = self.purged.tickets,
            more_due = self.purged.more_due,
            dead_letters = self.dead_letters.entries,
            dead_letter_cap = self.dead_letters.cap,
            dead_letters_trimmed_total = self.dead_letters.trimmed_total,
        );
    }
}

/// Purges the tickets due at `now` (up to `limit`) and reads the dead-letter stats.
pub async fn keep_within_limits(
    store: &dyn Store,
    now: EpochMillis,
    limit: usize,
) -> Result<RetentionReport, StoreError> {
    Ok(RetentionReport {
        purged: store.purge_expired(now, limit).await?,
        dead_letters: store.dead_letter_stats().await?,
    })
}
