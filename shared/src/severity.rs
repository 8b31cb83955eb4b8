//! Severity P1 (most severe) to P5, parsed from whatever spelling arrives.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Ticket severity. `P1` is the most severe; ordering follows urgency, so `P1 < P5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    P1,
    P2,
    P3,
    P4,
    P5,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a severity (expected 1-5 or P1-P5): {0:?}")]
pub struct SeverityParseError(pub String);

impl Severity {
    pub const ALL: [Severity; 5] = [
        Severity::P1,
        Severity::P2,
        Severity::P3,
        Severity::P4,
        Severity::P5,
    ];

    /// 1 for P1 through 5 for P5.
    pub fn rank(self) -> u8 {
        match self {
            Severity::P1 => 1,
            Severity::P2 => 2,
            Severity::P3 => 3,
            Severity::P4 => 4,
            Severity::P5 => 5,
        }
    }

    /// Zero-based index into per-severity arrays (P1 = 0).
    pub fn index(self) -> usize {
        usize::from(self.rank() - 1)
    }

    pub fn from_rank(rank: u8) -> Option<Severity> {
        match rank {
            1 => Some(Severity::P1),
            2 => Some(Severity::P2),
            3 => Some(Severity::P3),
            4 => Some(Severity::P4),
            5 => Some(Severity::P5),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::P1 => "P1",
            Severity::P2 => "P2",
            Severity::P3 => "P3",
            Severity::P4 => "P4",
            Severity::P5 => "P5",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Severity {
    type Err = SeverityParseError;

    /// Accepts `P1`, `p1`, `1`, and ServiceNow display values such as `1 - Critical`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let digits = t.strip_prefix(['P', 'p']).unwrap_or(t);
        let first = digits
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap_or("");
        first
            .parse::<u8>()
            .ok()
            .and_then(Severity::from_rank)
            .ok_or_else(|| SeverityParseError(s.to_owned()))
    }
}

impl Serialize for Severity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Severity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_servicenow_spellings() {
        assert_eq!("1 - Critical".parse(), Ok(Severity::P1));
        assert_eq!("p4".parse(), Ok(Severity::P4));
        assert_eq!(" 5 ".parse(), Ok(Severity::P5));
        assert!("6".parse::<Severity>().is_err());
        assert!("".parse::<Severity>().is_err());
        assert!("P".parse::<Severity>().is_err());
    }

    #[test]
    fn p1_sorts_first() {
        let mut v = vec![Severity::P3, Severity::P1, Severity::P5];
        v.sort();
        assert_eq!(v, vec![Severity::P1, Severity::P3, Severity::P5]);
    }
}
