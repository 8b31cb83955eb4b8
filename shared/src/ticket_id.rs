//! `TicketId`: a ServiceNow `sys_id`, parsed once at the edge.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A ServiceNow record `sys_id`: 32 lowercase hexadecimal characters.
///
/// Parsing lower-cases, so `ABC…` and `abc…` are the same ticket, and rejects
/// anything else, so a key built from a `TicketId` never contains Redis-special text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TicketId(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a ServiceNow sys_id (32 hexadecimal characters): {0:?}")]
pub struct TicketIdParseError(pub String);

impl TicketId {
    /// The id spelling these 16 bytes in hex: for keys derived by hashing (a region's
    /// roll-up is stored under one).
    pub fn from_bytes(bytes: [u8; 16]) -> TicketId {
        TicketId(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for TicketId {
    type Err = TicketIdParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(TicketId(t.to_ascii_lowercase()))
        } else {
            Err(TicketIdParseError(s.chars().take(64).collect()))
        }
    }
}

impl fmt::Display for TicketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for TicketId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for TicketId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_sys_ids_in_any_case_and_normalises() {
        let id: TicketId = "9D385017C611228701D22104CC95C371".parse().unwrap();
        assert_eq!(id.as_str(), "9d385017c611228701d22104cc95c371");
    }

    #[test]
    fn rejects_what_is_not_a_sys_id() {
        for bad in [
            "",
            "INC0010001",
            "9d385017c611228701d22104cc95c37",
            "9d385017c611228701d22104cc95c37z",
            "9d385017c611228701d22104cc95c371:x",
        ] {
            assert!(bad.parse::<TicketId>().is_err(), "{bad}");
        }
    }
}
