//! The key a region's executive roll-up is stored under, derived from the region's name.
//!
//! Roll-ups are not tickets: they have their own key type so that no ticket path can be
//! handed one. The key renders as 32 lower-case hex digits (the first 16 bytes of
//! SHA-256 over `region:<trimmed, lower-cased name>`), the spelling roll-ups have always
//! been stored under, so stored roll-ups stay readable and never collide with a ticket's
//! `sys_id` in practice.

use std::fmt;

use sha2::{Digest, Sha256};

/// A region, named as it was asked for, with the key its roll-up is stored under. Two
/// names that differ only in case or surrounding spaces are the same region.
#[derive(Debug, Clone)]
pub struct RegionKey {
    name: String,
    key: String,
}

impl RegionKey {
    /// The key of the region named `name`. Every name has one: the names come from the
    /// tickets' own region field, which the store keeps as it was sent.
    pub fn of(name: &str) -> RegionKey {
        let digest = Sha256::digest(format!("region:{}", name.trim().to_lowercase()));
        let key = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        RegionKey {
            name: name.to_owned(),
            key,
        }
    }

    /// The region's name as it was given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key the region's roll-up is stored under.
    pub fn as_str(&self) -> &str {
        &self.key
    }
}

impl PartialEq for RegionKey {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for RegionKey {}

impl fmt::Display for RegionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_keys_are_stable_and_ignore_case_and_spacing() {
        assert_eq!(RegionKey::of("North"), RegionKey::of(" north "));
        assert_ne!(RegionKey::of("north"), RegionKey::of("south"));
        assert_eq!(RegionKey::of("north").as_str().len(), 32);
        assert_eq!(RegionKey::of(" North ").name(), " North ");
    }

    #[test]
    fn a_region_key_renders_the_key_roll_ups_were_always_stored_under() {
        // The first 16 bytes of SHA-256("region:north"): the deployed layout's key.
        assert_eq!(
            RegionKey::of("North").as_str(),
            "642a9f4e3ef8bd6689c62e008bee52d0"
        );
    }
}
