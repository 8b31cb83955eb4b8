//! The Redis store: production state, every multi-key change one atomic Lua script.
