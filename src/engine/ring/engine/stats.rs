//! Observations for stats and samples: the time each cell's lease went out (`lease_since`,
//! `u64::MAX` while the cell is in the pool), read for the age of the oldest lease. All Relaxed:
//! nothing is decided on them.

use super::RingClass;
use crate::engine::ClassEngine;
use crate::pool::Lease;
use crate::sync::Ordering;

impl<T: Send + 'static> RingClass<T> {
    pub(super) fn clear_lease_since(&self, lease: &Lease) {
        if let Some(s) = self.lease_since.get(lease.cell().0 as usize) {
            // Relaxed: an observation.
            s.store(u64::MAX, Ordering::Relaxed);
        }
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
