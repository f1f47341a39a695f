//! The fuzz targets' checks, one module per target (`fuzz_targets/<name>.rs` hands each libFuzzer
//! input to `<name>::check`), and what they share: readers of the input bytes and the version
//! directory's sequential model. `tests/fuzz_seeds.rs` includes this file to replay the seed
//! corpora under `cargo test` on stable.
#![allow(missing_docs)]

pub mod config;
pub mod graph;
pub mod scheduler;
pub mod versions;
pub mod versions_model;

use arbitrary::Unstructured;

/// Reads a value from `u`, `0`/`false`/the first choice once the input is used up (so every
/// input decodes to something, and a shorter input to a shorter sequence).
pub fn int(u: &mut Unstructured<'_>, range: std::ops::RangeInclusive<u64>) -> u64 {
    u.int_in_range(range.clone()).unwrap_or(*range.start())
}

/// Picks one of `choices` (weighted by repeating an entry), or the first once the input is used
/// up.
pub fn pick<T: Copy>(u: &mut Unstructured<'_>, choices: &[T]) -> T {
    u.choose(choices).copied().unwrap_or(choices[0])
}

/// A `u32` that is mostly small, sometimes one of `edges` (a limit, or one past it), so the
/// checks at the limits are reached without allocating at them.
pub fn size(u: &mut Unstructured<'_>, small: u32, edges: &[u32]) -> u32 {
    if edges.is_empty() || int(u, 0..=3) != 0 {
        int(u, 0..=u64::from(small)) as u32
    } else {
        pick(u, edges)
    }
}
