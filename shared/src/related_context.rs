//! Related context for technician prompts: similar past incidents or knowledge
//! articles, from a search service when one is configured (`stormgate-handlers` queries
//! Azure AI Search).
//!
//! Optional by nature: an implementation answers an empty list when it has nothing or
//! when the search failed (it logs why), and bounds its own wait. The tier worker puts
//! what it gets, cut by [`crate::prompts::related_excerpt`], inside the delimited user
//! content of the technician prompt, and counts it in the call's token estimate.

use async_trait::async_trait;

#[async_trait]
pub trait RelatedContext: Send + Sync + std::fmt::Debug {
    /// Past incidents or articles similar to `query` (a ticket's short description),
    /// most relevant first, one plain-text entry each; empty when there are none or the
    /// search could not be made. Entries are untrusted text.
    async fn related(&self, query: &str) -> Vec<String>;
}
