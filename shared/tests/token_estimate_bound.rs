//! Measures the fast token bound against the exact tokenizers on a varied corpus:
//! the bound must be at least the exact count on every sample, in both encodings.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::support;

use stormgate_shared::token_estimate::{Encoding, count_exact, upper_bound};
use support::token_corpus::corpus;

#[test]
fn fast_bound_is_never_below_the_exact_count_on_the_corpus() {
    let mut worst: f64 = 0.0;
    let mut samples = 0;
    for seed in [1u64, 2, 3, 4] {
        for sample in corpus(seed) {
            let bound = upper_bound(&sample.text).get();
            for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
                let exact = count_exact(encoding, &sample.text).unwrap().get();
                assert!(
                    bound >= exact,
                    "{} sample of {} bytes: bound {bound} < exact {exact} ({encoding:?})",
                    sample.kind,
                    sample.text.len()
                );
                worst = worst.max(exact as f64 / bound as f64);
                samples += 1;
            }
        }
    }
    println!("{samples} counts, worst exact/bound ratio {worst:.3}");
    // The module docs quote this figure: keep them in step if the formula changes.
    assert!(
        worst <= 0.94,
        "worst ratio {worst:.3} drifted from the documented 0.93"
    );
}
