//! Token estimation cost: the exact tokenizer versus the fast upper bound, on network
//! alarm logs of 2 KB, 20 KB and 200 KB (the ingest path's prompt sizes and beyond).
//!
//! Run: `cargo bench -p stormgate-shared --bench token_estimate`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

#[path = "../tests/support/token_corpus.rs"]
#[allow(dead_code)]
mod token_corpus;

use divan::Bencher;
use divan::counter::BytesCount;
use stormgate_shared::token_estimate::{Encoding, count_exact, upper_bound, warm};

const SIZES: [usize; 3] = [2_000, 20_000, 200_000];

fn main() {
    warm(Encoding::O200kBase).unwrap();
    divan::main();
}

/// An alarm-log text of about `bytes` bytes (whole lines).
fn alarm_log(bytes: usize) -> String {
    let mut text = String::new();
    let mut seed = 1;
    while text.len() < bytes {
        for sample in token_corpus::corpus(seed) {
            if sample.kind == "alarm_log" {
                for line in sample.text.lines() {
                    if text.len() >= bytes {
                        return text;
                    }
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
        seed += 1;
    }
    text
}

#[divan::bench(args = SIZES)]
fn exact_o200k(bencher: Bencher, bytes: usize) {
    let text = alarm_log(bytes);
    bencher
        .counter(BytesCount::of_str(&text))
        .bench(|| count_exact(Encoding::O200kBase, divan::black_box(&text)).unwrap());
}

#[divan::bench(args = SIZES)]
fn fast_upper_bound(bencher: Bencher, bytes: usize) {
    let text = alarm_log(bytes);
    bencher
        .counter(BytesCount::of_str(&text))
        .bench(|| upper_bound(divan::black_box(&text)));
}
