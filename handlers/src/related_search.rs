//! Related context from Azure AI Search: similar past incidents or knowledge articles
//! for a technician prompt, when `STORMGATE_SEARCH_*` are configured.
//!
//! `POST {endpoint}/indexes/{index}/docs/search?api-version=2025-09-01` with the
//! `api-key` header and `{"search": <short description>, "top": 3}`; the answer's
//! `value` holds the matching documents. The index's schema is the operator's, so each
//! document becomes one line from the fields it has, in a fixed order of preference
//! (an identifier or title, then its short description and what resolved it), or from
//! all its text fields when it has none of those. Related context is optional: a search
//! that fails or runs past its short timeout is logged and answered with nothing, and
//! the summary goes on without it.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use stormgate_shared::related_context::RelatedContext;

use crate::secrets::Secret;

/// The Azure AI Search REST API version the client speaks.
pub const SEARCH_API_VERSION: &str = "2025-09-01";
/// Documents asked for per search.
const TOP: u64 = 3;
/// Fields naming a document, first present wins.
const TITLE_FIELDS: &[&str] = &["number", "title", "name"];
/// Fields describing it, in order; the first two present are used.
const TEXT_FIELDS: &[&str] = &[
    "short_description",
    "resolution",
    "close_notes",
    "summary",
    "description",
    "content",
    "text",
];
/// Fields that are never text worth showing.
const SKIPPED_FIELDS: &[&str] = &["id", "key", "sys_id"];

#[derive(Debug, Clone)]
pub struct SearchConfig {
    /// `https://<service>.search.windows.net` (a trailing slash is tolerated).
    pub endpoint: String,
    pub index: String,
    /// Leaves the process only as the `api-key` header.
    pub api_key: Secret,
    /// The whole search, connection to last byte.
    pub timeout: Duration,
}

/// The Azure AI Search client for related context.
#[derive(Debug)]
pub struct AzureSearch {
    http: reqwest::Client,
    config: SearchConfig,
}

impl AzureSearch {
    pub fn new(config: SearchConfig) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .retry(reqwest::retry::never())
            .build()?;
        Ok(AzureSearch { http, config })
    }

    fn url(&self) -> String {
        format!(
            "{}/indexes/{}/docs/search?api-version={SEARCH_API_VERSION}",
            self.config.endpoint.trim_end_matches('/'),
            index_segment(&self.config.index),
        )
    }

    /// One search; the documents' lines, or why there are none.
    async fn search(&self, query: &str) -> Result<Vec<String>, String> {
        let response = self
            .http
            .post(self.url())
            .header("api-key", self.config.api_key.expose())
            .json(&json!({"search": query, "top": TOP}))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("Azure AI Search answered {status}"));
        }
        let body: Value = response.json().await.map_err(|e| e.to_string())?;
        let documents = body["value"]
            .as_array()
            .ok_or("the answer has no `value` array")?;
        Ok(documents.iter().filter_map(document_line).collect())
    }
}

#[async_trait]
impl RelatedContext for AzureSearch {
    async fn related(&self, query: &str) -> Vec<String> {
        match self.search(query).await {
            Ok(lines) => lines,
            Err(error) => {
                tracing::warn!(%error, index = %self.config.index, "related context left out: search failed");
                Vec::new()
            }
        }
    }
}

/// One document as one line: its title, then up to two description fields.
fn document_line(document: &Value) -> Option<String> {
    let fields = document.as_object()?;
    let text = |name: &str| {
        fields
            .get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
    };
    let title = TITLE_FIELDS.iter().find_map(|f| text(f));
    let described: Vec<&str> = TEXT_FIELDS.iter().filter_map(|f| text(f)).take(2).collect();
    let parts: Vec<&str> = if title.is_none() && described.is_empty() {
        fields
            .iter()
            .filter(|(name, _)| !name.starts_with('@') && !SKIPPED_FIELDS.contains(&name.as_str()))
            .filter_map(|(_, value)| value.as_str().map(str::trim))
            .filter(|t| !t.is_empty())
            .collect()
    } else {
        title.into_iter().chain(described).collect()
    };
    (!parts.is_empty()).then(|| parts.join(" — "))
}

/// Index names are lower-case letters, digits and dashes; anything else is escaped so a
/// setting can never reshape the URL.
fn index_segment(index: &str) -> String {
    index
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => char::from(b).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_its_title_and_description_fields() {
        let doc = json!({
            "@search.score": 3.2,
            "id": "k1",
            "number": "INC0001234",
            "short_description": "Fibre cut on the north ring",
            "resolution": "Spliced; traffic restored",
            "content": "long text"
        });
        assert_eq!(
            document_line(&doc).as_deref(),
            Some("INC0001234 — Fibre cut on the north ring — Spliced; traffic restored")
        );
        let bare = json!({"@search.score": 1.0, "id": "k2", "body": "PSU swap fixed it"});
        assert_eq!(document_line(&bare).as_deref(), Some("PSU swap fixed it"));
        assert_eq!(document_line(&json!({"id": "k3"})), None);
        assert_eq!(document_line(&json!("not an object")), None);
    }

    #[test]
    fn the_index_cannot_reshape_the_url() {
        assert_eq!(index_segment("past-incidents"), "past-incidents");
        assert_eq!(index_segment("a/../b?x"), "a%2F%2E%2E%2Fb%3Fx");
    }
}
