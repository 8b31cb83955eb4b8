//! The share of a deployment's quota the governor leaves unused, checked once where it
//! is read (settings, an operator's override).

use serde::{Deserialize, Deserializer, Serialize};

/// The fraction of a deployment's quota the governor leaves unused, in `[0, 0.9]`.
///
/// Users report 429s a little before the advertised limit, and the service's own
/// prompt estimate (partly from character counts) can exceed ours: headroom absorbs both.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(transparent)]
pub struct Headroom(f64);

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("headroom must be a fraction between 0 and 0.9, got {0}")]
pub struct HeadroomError(pub f64);

impl Headroom {
    pub const DEFAULT: Headroom = Headroom(0.10);

    pub fn new(fraction: f64) -> Result<Headroom, HeadroomError> {
        if (0.0..=0.9).contains(&fraction) {
            Ok(Headroom(fraction))
        } else {
            Err(HeadroomError(fraction))
        }
    }

    pub fn fraction(self) -> f64 {
        self.0
    }

    /// `quantity × (1 − headroom)`, rounded down so the result never exceeds the exact value.
    pub(crate) fn apply(self, quantity: u64) -> u64 {
        (quantity as f64 * (1.0 - self.0)).floor() as u64
    }
}

impl Default for Headroom {
    fn default() -> Self {
        Headroom::DEFAULT
    }
}

impl<'de> Deserialize<'de> for Headroom {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Headroom::new(f64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_parses_or_refuses() {
        assert!(Headroom::new(0.95).is_err());
        assert!(Headroom::new(-0.1).is_err());
        assert!(serde_json::from_str::<Headroom>("0.2").is_ok());
    }
}
