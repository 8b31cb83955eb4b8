//! The embedded in-memory store: same semantics as Redis, no server needed.
