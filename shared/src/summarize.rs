//! The tier worker step: leased job to stored summary, LLM when admitted, extractive otherwise.
