//! Token estimates for prompts: the exact tokenizer and the measured fast upper bound.
