//! `TicketNumber`: a ServiceNow record number (`INC0012345`), the name technicians use.
//!
//! Parsed once at the edge: trimmed and upper-cased, 3 to 40 ASCII letters and digits,
//! starting with a letter and holding a digit, so that it can sit in a Redis key and never
//! be mistaken for a `sys_id` (32 hexadecimal characters, which may start with a digit).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TicketNumber(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not a ticket number (3-40 letters and digits, starting with a letter, e.g. INC0012345): {0:?}"
)]
pub struct TicketNumberParseError(pub String);

impl TicketNumber {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for TicketNumber {
    type Err = TicketNumberParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let ok = (3..=40).contains(&t.len())
            && t.bytes().all(|b| b.is_ascii_alphanumeric())
            && t.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && t.bytes().any(|b| b.is_ascii_digit());
        if ok {
            Ok(TicketNumber(t.to_ascii_uppercase()))
        } else {
            Err(TicketNumberParseError(s.chars().take(64).collect()))
        }
    }
}

impl TryFrom<String> for TicketNumber {
    type Error = TicketNumberParseError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<TicketNumber> for String {
    fn from(n: TicketNumber) -> String {
        n.0
    }
}

impl fmt::Display for TicketNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parse_upper_cased_and_keys_stay_safe() {
        assert_eq!(
            " inc0012345 ".parse::<TicketNumber>().unwrap().as_str(),
            "INC0012345"
        );
        for bad in [
            "",
            "IN",
            "0012345",
            "INC",
            "INC 1",
            "INC-1",
            "INC{1}",
            &format!("INC{}", "1".repeat(40)),
        ] {
            assert!(bad.parse::<TicketNumber>().is_err(), "{bad:?}");
        }
    }
}
