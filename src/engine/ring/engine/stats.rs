//! Observations for stats and samples: the time each cell's lease went out (`lease_since`,
//! `u64::MAX` while the cell is in the pool), read for the age of the oldest lease. All Relaxed:
//! nothing is decided on them.

use super::RingClass;
use crate::engine::ClassEngine;
use crate::pool::Lease;
use crate::sync::Ordering;
use crate::CellId;

impl<T: Send + 'static> RingClass<T> {
    /// Notes when `cell`'s lease went out (`u64::MAX`: the cell is back in the pool).
    pub(super) fn set_lease_since(&self, cell: CellId, at: u64) {
        if let Some(s) = self.lease_since.get(cell.0 as usize) {
            // Relaxed: an observation for snapshots.
            s.store(at, Ordering::Relaxed);
        }
    }

    /// Notes that `lease`'s cell is back in the pool (or lost to it).
    pub(super) fn clear_lease_since(&self, lease: &Lease) {
        self.set_lease_since(lease.cell(), u64::MAX);
    }

    /// [`ClassEngine::samples`]: the pool's counters, the queue
    /// depth, the tenants in the ring and the age of the oldest lease out.
    pub(super) fn sample(&self) -> (crate::pool::PoolCounters, u32, u32, Option<u64>) {
        let pool = self.pool.counters();
        let now = self.clock.now();
        // Relaxed: observations.
        let oldest = self
            .lease_since
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .filter(|&s| s != u64::MAX)
            .min()
            .map(|s| now.saturating_sub(s));
        (pool, self.queue_depth(), self.core.active_tenants(), oldest)
    }
}
