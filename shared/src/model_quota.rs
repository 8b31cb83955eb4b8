//! How many requests per minute Azure OpenAI grants a deployment for its tokens per minute, by model: the
//! table a deployment's RPM defaults to when it is not configured.
//!
//! Quota is allocated in units of capacity, and what a unit is worth in requests depends on the model.
//! Microsoft Learn, "Manage Azure OpenAI quota" (MicrosoftDocs/azure-ai-docs,
//! `articles/ai-foundry/openai/how-to/quota.md`, commit 014f5ff0e14f2143b26e81442ef609a4fd674d50):
//! "The ratio of Requests Per Minute (RPM) to Tokens Per Minute (TPM) for quota can vary by model ...
//! Older chat models: 1 Unit = 6 RPM, 1,000 TPM; o1 & o1-preview: 1 RPM, 6,000 TPM; o3: 1 RPM, 1,000 TPM;
//! o4-mini: 1 RPM, 1,000 TPM; o3-mini, o1-mini, o3-pro: 1 RPM, 10,000 TPM". The per-model quota tables
//! (`articles/ai-foundry/openai/quotas-limits.md`, commit 005fa2f16dd28f91c58f75f2a8023630f1fa4aca) give
//! the gpt-4.1 family 1 RPM per 1,000 TPM ("`gpt-4.1` (2025-04-14) | Enterprise & MCA-E | 5 M | 5 K";
//! gpt-4.1-mini and -nano "150 M | 150 K"; data zone "2 M | 2 K"), gpt-4.5 "200 K | 200", and the gpt-4o
//! family 6 ("`gpt-4o` | 30 M | 180 K", "`gpt-4o-mini` | 50 M | 300 K"; standard "150 K | 900").
//!
//! A model not in the table has no default: its deployment's RPM must be configured.

use serde::{Deserialize, Serialize};

/// `requests` per minute for every `per_tpm` tokens per minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRatio {
    pub requests: u64,
    pub per_tpm: u64,
}

impl RequestRatio {
    /// The requests per minute of a deployment of `tpm` tokens per minute, rounded down.
    pub fn rpm(self, tpm: u64) -> u64 {
        tpm.saturating_mul(self.requests) / self.per_tpm.max(1)
    }
}

/// Model name prefixes and their ratio; the longest matching prefix wins.
const TABLE: &[(&str, RequestRatio)] = &[
    ("gpt-4.1", ratio(1, 1_000)),
    ("gpt-4.5", ratio(1, 1_000)),
    ("gpt-4o", ratio(6, 1_000)),
    ("gpt-4", ratio(6, 1_000)),
    ("gpt-35", ratio(6, 1_000)),
    ("gpt-3.5", ratio(6, 1_000)),
    ("o1-mini", ratio(1, 10_000)),
    ("o1", ratio(1, 6_000)),
    ("o3-mini", ratio(1, 10_000)),
    ("o3-pro", ratio(1, 10_000)),
    ("o3", ratio(1, 1_000)),
    ("o4-mini", ratio(1, 1_000)),
];

const fn ratio(requests: u64, per_tpm: u64) -> RequestRatio {
    RequestRatio { requests, per_tpm }
}

/// The ratio Azure's quota tables give `model` (an Azure model name such as `gpt-4.1-mini`), if the table
/// knows its family.
pub fn request_ratio(model: &str) -> Option<RequestRatio> {
    let model = model.trim().to_ascii_lowercase();
    TABLE
        .iter()
        .filter(|(prefix, _)| model.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, ratio)| *ratio)
}

/// The requests per minute Azure grants a deployment of `model` with `tpm` tokens per minute.
pub fn default_rpm(model: &str, tpm: u64) -> Option<u64> {
    request_ratio(model).map(|ratio| ratio.rpm(tpm))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt_4_1_family_gets_one_request_per_thousand_tokens_and_gpt_4o_six() {
        assert_eq!(default_rpm("gpt-4.1", 5_000_000), Some(5_000));
        assert_eq!(default_rpm("gpt-4.1-mini", 150_000_000), Some(150_000));
        assert_eq!(default_rpm("gpt-4.1-nano", 2_000_000), Some(2_000));
        assert_eq!(default_rpm("gpt-4o", 30_000_000), Some(180_000));
        assert_eq!(default_rpm("gpt-4o-mini", 50_000_000), Some(300_000));
        assert_eq!(default_rpm("GPT-4o", 150_000), Some(900));
        assert_eq!(default_rpm("gpt-4", 2_000_000), Some(12_000));
    }

    #[test]
    fn o_series_units_are_worth_fewer_requests() {
        assert_eq!(default_rpm("o1", 3_000_000), Some(500));
        assert_eq!(default_rpm("o1-mini", 5_000_000), Some(500));
        assert_eq!(default_rpm("o3-mini", 5_000_000), Some(500));
        assert_eq!(default_rpm("o3", 1_000_000), Some(1_000));
        assert_eq!(default_rpm("o4-mini", 1_000_000), Some(1_000));
    }

    #[test]
    fn a_model_the_table_does_not_know_has_no_default() {
        assert_eq!(default_rpm("gpt-5", 1_000_000), None);
        assert_eq!(default_rpm("premium-model", 10_000), None);
    }
}
