//! Test support shared by the integration tests of this crate.
#![allow(dead_code)]

pub mod token_corpus;
