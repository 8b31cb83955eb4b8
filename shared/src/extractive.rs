//! The zero-token summarizer: all three summary kinds from the bounded log, no LLM.
