//! Not part of the public API; exposed for fairway's own benches, perf harness and allocation
//! tests; no semver guarantees.

pub use crate::raw::ring::Ring;
pub use crate::raw::scq::Scq;

/// Test-only pause points (SPEC F24); present with the `pause-points` feature.
#[cfg(all(feature = "pause-points", not(loom)))]
pub mod pause {
    pub use crate::raw::pause::Gate;
}

/// A thin handle on the crate's slot arena (with unit values), for benches and allocation tests.
#[derive(Debug)]
pub struct Arena(crate::raw::arena::Arena<()>);

impl Arena {
    /// An arena of `capacity` slots.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` for an unusable capacity.
    pub fn new(capacity: usize) -> crate::Result<Self> {
        crate::raw::arena::Arena::new(capacity).map(Self)
    }

    /// Allocates a slot; its key as a `u64`.
    pub fn alloc(&self) -> Option<u64> {
        self.0.alloc(1).map(|k| k.to_u64())
    }

    /// Frees a slot; `false` if the key was stale.
    pub fn free(&self, key: u64) -> bool {
        self.0.free(crate::raw::arena::Key::from_u64(key)).is_ok()
    }
}
