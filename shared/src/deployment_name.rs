//! An Azure OpenAI deployment's name, checked once where it is read: the governor keys
//! its ledger by it, the operators' controls and the signals name deployments with it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An Azure OpenAI deployment name: 1–64 of `[A-Za-z0-9._-]`, so it can sit inside a
/// Redis key (and its hash tag) without escaping.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeploymentName(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a deployment name (1-64 of A-Z a-z 0-9 . _ -): {0:?}")]
pub struct DeploymentNameError(pub String);

impl DeploymentName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for DeploymentName {
    type Err = DeploymentNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = (1..=64).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if ok {
            Ok(DeploymentName(s.to_owned()))
        } else {
            Err(DeploymentNameError(s.chars().take(80).collect()))
        }
    }
}

impl fmt::Display for DeploymentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for DeploymentName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for DeploymentName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_or_refuse() {
        assert!("gpt-4o-mini_2024.07".parse::<DeploymentName>().is_ok());
        assert!("bad name".parse::<DeploymentName>().is_err());
        assert!("a}b".parse::<DeploymentName>().is_err());
        assert!("".parse::<DeploymentName>().is_err());
    }
}
