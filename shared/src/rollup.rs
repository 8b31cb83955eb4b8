//! Executive regional roll-ups from stored ticket summaries.
