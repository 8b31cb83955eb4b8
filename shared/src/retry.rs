//! The one retry layer: bounded attempts, full jitter, Retry-After honoured, every retry re-admitted.
