//! The classify step: a batch of raw events to accepted tickets, instant summaries and queued jobs.
