//! P12: the version directory's `capture()` (and the drop of the root it returns) at 250, 3,000
//! and 10^5 keys. The three arms run interleaved in one job, so the targets read same-run
//! ratios against the 250-key arm.

use fairway::versions::{Transition, VersionDirectory};
use fairway_bench_support::{OpUser, SingleOp};

/// The rows' backend label.
pub const BACKEND: &str = "version directory";

/// Key counts of the arms; the first is the comparator.
pub const KEYS: [u64; 3] = [250, 3_000, 100_000];

/// The workload label of the arm with `keys` keys.
pub fn workload(keys: u64) -> String {
    format!("versions capture, {keys} keys")
}

/// A directory with every key published and a few advanced (so it holds retired records too,
/// kept by a root taken before the advances), and the capture measured on it.
pub struct Capture {
    dir: VersionDirectory,
}

impl Capture {
    /// Builds the directory with `keys` keys, all published.
    pub fn new(keys: u64) -> Self {
        let dir = VersionDirectory::builder()
            .keys(keys as usize)
            .versions(keys as usize + 64)
            .build()
            .expect("sizes in range");
        let all: Vec<Transition> = (0..keys)
            .map(|key| Transition::Publish { key, hash: key })
            .collect();
        dir.apply(&all).expect("room for every key");
        for key in 0..16 {
            dir.advance(key).expect("room for the advances");
        }
        Self { dir }
    }
}

impl SingleOp for Capture {
    fn run(&mut self, iters: u64) {
        for _ in 0..iters {
            drop(std::hint::black_box(self.dir.capture()));
        }
    }
}

/// Hands a fresh [`Capture`] of `keys` keys to `u`.
pub fn with_capture(keys: u64, u: OpUser<'_>) {
    u(&mut Capture::new(keys));
}
