//! Test-only switches, each turning one reliability mechanism off, so that the fault
//! suite (`tests/tests/faults_*.rs`) can show that each of its tests fails without the
//! mechanism it covers (docs/operations.md, "How the fault suite is proven").
//!
//! A switch can only be thrown with the `fault-injection` feature, which only the
//! end-to-end tests' builds enable. In every other build, shipped ones included,
//! [`is_off`] is a constant `false` and the branches that ask it compile to nothing:
//! there is no setting, variable or input that weakens the product.

use std::fmt;
use std::str::FromStr;

/// A mechanism the fault suite proves. Each names where it lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// `dispatch_once` returns expired leases to their queues (a worker died).
    LeaseReclaim,
    /// Ingest ignores a ticket version it already stored, or an older one.
    IngestDedup,
    /// `classify` fails the invocation when its batch could not be stored.
    ClassifyFailure,
    /// Retry waits are random: full jitter, and a spread added to throttle hints.
    RetryJitter,
    /// At most `max_attempts` calls per request.
    RetryBound,
    /// A 429 is reported to the governor: a fleet-wide cooldown, or a down mark.
    FleetCooldown,
    /// A job whose LLM call could not be had gets its extractive summary, degraded.
    ExtractiveFallback,
    /// A work note ServiceNow did not take waits in the Redis outbox.
    WorkNoteOutbox,
    /// A stored summary owes its customer notice or work note, whichever path stored it.
    DeliveryLedger,
    /// A job's LLM call is claimed: a second delivery of its hand-off makes no call.
    CallClaims,
}

impl Mechanism {
    pub const ALL: [Mechanism; 10] = [
        Mechanism::LeaseReclaim,
        Mechanism::IngestDedup,
        Mechanism::ClassifyFailure,
        Mechanism::RetryJitter,
        Mechanism::RetryBound,
        Mechanism::FleetCooldown,
        Mechanism::ExtractiveFallback,
        Mechanism::WorkNoteOutbox,
        Mechanism::DeliveryLedger,
        Mechanism::CallClaims,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::LeaseReclaim => "lease_reclaim",
            Mechanism::IngestDedup => "ingest_dedup",
            Mechanism::ClassifyFailure => "classify_failure",
            Mechanism::RetryJitter => "retry_jitter",
            Mechanism::RetryBound => "retry_bound",
            Mechanism::FleetCooldown => "fleet_cooldown",
            Mechanism::ExtractiveFallback => "extractive_fallback",
            Mechanism::WorkNoteOutbox => "work_note_outbox",
            Mechanism::DeliveryLedger => "delivery_ledger",
            Mechanism::CallClaims => "call_claims",
        }
    }

    #[cfg(feature = "fault-injection")]
    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no such mechanism: {0:?} (known: lease_reclaim, ingest_dedup, classify_failure, retry_jitter, retry_bound, fleet_cooldown, extractive_fallback, work_note_outbox, delivery_ledger, call_claims)"
)]
pub struct UnknownMechanism(pub String);

impl FromStr for Mechanism {
    type Err = UnknownMechanism;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mechanism::ALL
            .into_iter()
            .find(|m| m.as_str() == s.trim())
            .ok_or_else(|| UnknownMechanism(s.to_owned()))
    }
}

/// Whether `mechanism` was switched off. Always `false` without `fault-injection`.
#[inline]
pub fn is_off(mechanism: Mechanism) -> bool {
    #[cfg(feature = "fault-injection")]
    {
        switched::DISABLED.load(std::sync::atomic::Ordering::Relaxed) & mechanism.bit() != 0
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = mechanism;
        false
    }
}

#[cfg(feature = "fault-injection")]
pub use switched::{disable, disable_listed};

#[cfg(feature = "fault-injection")]
mod switched {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::{Mechanism, UnknownMechanism};

    /// One bit per mechanism; process-wide, like the mechanisms themselves.
    pub(super) static DISABLED: AtomicU32 = AtomicU32::new(0);

    /// Turns `mechanism` off for the rest of the process.
    pub fn disable(mechanism: Mechanism) {
        tracing::warn!(%mechanism, "fault injection: mechanism switched off");
        DISABLED.fetch_or(mechanism.bit(), Ordering::Relaxed);
    }

    /// Turns off every mechanism of a comma-separated list (empty: none).
    pub fn disable_listed(list: &str) -> Result<Vec<Mechanism>, UnknownMechanism> {
        let mechanisms = list
            .split(',')
            .filter(|name| !name.trim().is_empty())
            .map(str::parse)
            .collect::<Result<Vec<Mechanism>, _>>()?;
        for mechanism in &mechanisms {
            disable(*mechanism);
        }
        Ok(mechanisms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mechanism_is_named_and_parsed_back() {
        for mechanism in Mechanism::ALL {
            assert_eq!(mechanism.as_str().parse::<Mechanism>(), Ok(mechanism));
        }
        assert!("lease-reclaim".parse::<Mechanism>().is_err());
    }

    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn without_the_feature_nothing_is_ever_off() {
        assert!(Mechanism::ALL.into_iter().all(|m| !is_off(m)));
    }
}
