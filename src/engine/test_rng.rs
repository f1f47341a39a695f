//! A deterministic, seedable generator for the ring's unit tests (xorshift64*, no dependency).

/// xorshift64*: the state must not start at 0.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough below `n` (which must not be 0) for test histories.
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
