//! The lab's random numbers: SplitMix64, tiny, portable and seedable, so a seed means
//! the same run on every platform and with every version of every dependency.

/// SplitMix64 (Steele, Lea, Flood 2014).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// An independent stream for `label` under `seed` (a ticket, a deployment...).
    pub fn derive(seed: u64, label: u64) -> Self {
        let mut mixer = SplitMix64(seed ^ label.wrapping_mul(0xA24B_AED4_963E_E407));
        SplitMix64(mixer.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`; draws nothing when `p` is zero, so adding a fault
    /// kind does not shift the random stream of runs that do not use it.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_f64() < p
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(usize::try_from(self.below(items.len() as u64)).unwrap_or(0))
    }

    /// Exponentially distributed with the given mean (inter-arrival times).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }

    /// Index chosen with probability proportional to `weights`.
    pub fn weighted(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut x = self.next_f64() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len().saturating_sub(1)
    }
}

/// FNV-1a, for deriving per-name seeds.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_derived_streams_differ() {
        let a: Vec<u64> = (0..4).map(|_| SplitMix64::new(9).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut x = SplitMix64::derive(9, 1);
        let mut y = SplitMix64::derive(9, 2);
        assert_ne!(x.next_u64(), y.next_u64());
    }

    #[test]
    fn weighted_choice_follows_weights() {
        let mut rng = SplitMix64::new(1);
        let mut counts = [0u32; 3];
        for _ in 0..10_000 {
            counts[rng.weighted(&[0.1, 0.0, 0.9])] += 1;
        }
        assert_eq!(counts[1], 0);
        assert!(counts[2] > 8_500 && counts[0] > 700);
    }
}
