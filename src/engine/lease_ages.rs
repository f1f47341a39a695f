//! Per cell: when its lease went out (for the snapshot's age of the oldest lease out, SPEC F60),
//! and how many grants that did not wait it has carried (the snapshot's fast-path grants).
//!
//! Two words per cell. The lease time is the time the lease was handed out, or [`IN_POOL`] while
//! the cell is in the pool (or out of service). The fast-grant count is written only by the
//! thread that holds the cell's lease, so it is a plain load and store, not a read-modify-write:
//! the pool hands a cell from one holder to the next with a Release / Acquire pair (its release
//! `fetch_add` and its acquiring CAS), so each holder's increment happens after the previous
//! holder's and none is lost. A snapshot sums the counts of every cell. Every access here is
//! `Relaxed`: these are observations, and nothing is decided on them.

use crate::ids::CellId;
use crate::sync::{AtomicU64, Ordering};

/// The word of a cell with no lease out.
const IN_POOL: u64 = u64::MAX;

/// One cell's words.
struct CellWords {
    /// When its lease went out, or [`IN_POOL`].
    at: AtomicU64,
    /// Grants that did not wait made with this cell (saturating); written by the lease's holder.
    fast_grants: AtomicU64,
}

/// The time each cell's lease went out and the fast grants made with it; shared by the engines.
pub(crate) struct LeaseAges(Box<[CellWords]>);

impl LeaseAges {
    /// `cells` cells, all in the pool.
    pub(crate) fn new(cells: u32) -> Self {
        Self(
            (0..cells)
                .map(|_| CellWords {
                    at: AtomicU64::new(IN_POOL),
                    fast_grants: AtomicU64::new(0),
                })
                .collect(),
        )
    }

    /// Notes that `cell`'s lease went out at `at`.
    pub(crate) fn leased(&self, cell: CellId, at: u64) {
        if let Some(s) = self.0.get(cell.0 as usize) {
            // Relaxed: an observation for snapshots.
            s.at.store(at, Ordering::Relaxed);
        }
    }

    /// Counts a grant that did not wait (the fast path) made with `cell`. Only the holder of
    /// `cell`'s lease may call it (see the module docs): no read-modify-write is needed.
    pub(crate) fn count_fast_grant(&self, cell: CellId) {
        if let Some(s) = self.0.get(cell.0 as usize) {
            // Relaxed (both): single writer at a time; the pool's hand-over of the cell (Release
            // fetch_add on release, Acquire CAS on acquire) orders successive holders' writes.
            let n = s.fast_grants.load(Ordering::Relaxed);
            s.fast_grants.store(n.saturating_add(1), Ordering::Relaxed);
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
            .map(|s| s.at.load(Ordering::Relaxed))
            .filter(|&s| s != IN_POOL)
            .min()
            .map(|s| now.saturating_sub(s))
    }

    /// The fast grants made with every cell (saturating). An observation: a count a holder is
    /// writing now may be read before or after its increment.
    pub(crate) fn fast_grants(&self) -> u64 {
        self.0
            .iter()
            // Relaxed: observations.
            .fold(0u64, |n, s| {
                n.saturating_add(s.fast_grants.load(Ordering::Relaxed))
            })
    }
}
