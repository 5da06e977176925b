//! The client's randomness, drawn from a seed: a SplitMix64 generator,
//! the reconnect schedule (capped exponential backoff with jitter) and
//! idempotency keys.

/// SplitMix64: small, fast, and simple to reproduce in other languages
/// (the JavaScript client draws the same numbers from the same seed).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The generator that starts from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next draw.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A draw below `n` (`n` > 0), by remainder.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// How long to wait before retry number `attempt` (0 for the first):
/// `min(cap, base * 2^attempt)`, of which the upper half is jitter.
pub(crate) fn delay(rng: &mut SplitMix64, base_ms: u64, cap_ms: u64, attempt: u32) -> u64 {
    let ceiling = base_ms
        .saturating_mul(1 << attempt.min(32))
        .min(cap_ms)
        .max(1);
    let half = ceiling / 2;
    half + rng.next_u64() % (ceiling - half + 1)
}

/// The idempotency key of the client's `n`th append: the client's nonce
/// (its first draw) and the counter, e.g. `3f9c0a1b2c3d4e5f-7`.
pub(crate) fn idempotency_key(nonce: u64, n: u64) -> String {
    format!("{nonce:016x}-{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // The published SplitMix64 sequence for seed 0 begins so.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn delays_grow_stay_within_their_window_and_are_capped() {
        let mut rng = SplitMix64::new(9);
        for attempt in 0..40 {
            let ceiling = (500u64 << attempt.min(20)).min(30_000);
            let d = delay(&mut rng, 500, 30_000, attempt);
            assert!(d >= ceiling / 2 && d <= ceiling, "attempt {attempt}: {d}");
        }
    }

    #[test]
    fn keys_are_printable_and_distinct() {
        assert_eq!(idempotency_key(0xab, 3), "00000000000000ab-3");
        assert_ne!(idempotency_key(1, 1), idempotency_key(1, 2));
    }
}
