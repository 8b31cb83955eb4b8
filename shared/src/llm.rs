//! The LLM client interface the tier workers call, and its typed outcomes.
