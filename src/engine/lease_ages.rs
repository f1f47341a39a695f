//! When each cell's lease went out, for the snapshot's age of the oldest lease out (SPEC F60).
//!
//! One word per cell: the time its lease was handed out, or [`IN_POOL`] while the cell is in
//! the pool (or out of service). Every access is `Relaxed`: these are observations, and nothing
//! is decided on them.

use crate::sync::{AtomicU64, Ordering};
use crate::CellId;

/// The word of a cell with no lease out.
const IN_POOL: u64 = u64::MAX;

/// The time each cell's lease went out; shared by the engines.
pub(crate) struct LeaseAges(Box<[AtomicU64]>);

impl LeaseAges {
    /// `cells` cells, all in the pool.
    pub(crate) fn new(cells: u32) -> Self {
        Self((0..cells).map(|_| AtomicU64::new(IN_POOL)).collect())
    }

    /// Notes that `cell`'s lease went out at `at`.
    pub(crate) fn leased(&self, cell: CellId, at: u64) {
        if let Some(s) = self.0.get(cell.0 as usize) {
            // Relaxed: an observation for snapshots.
            s.store(at, Ordering::Relaxed);
        }
    }

    /// Notes that `cell` is back in the pool (or lost to it).
    pub(crate) fn returned(&self, cell: CellId) {
        self.leased(cell, IN_POOL);
    }

    /// How long the oldest lease still out has been out at `now`, if any is.
    pub(crate) fn oldest(&self, now: u64) -> Option<u64> {
        self.0
            .iter()
            // Relaxed: observations.
            .map(|s| s.load(Ordering::Relaxed))
            .filter(|&s| s != IN_POOL)
            .min()
            .map(|s| now.saturating_sub(s))
    }
}
