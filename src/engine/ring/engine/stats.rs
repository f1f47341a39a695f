//! Samples for snapshots: the pool's counters, the queue depth, the tenants in the ring and the
//! age of the oldest lease out (each cell's lease time is kept in [`LeaseAges`]).
//!
//! [`LeaseAges`]: crate::engine::LeaseAges

use super::RingClass;
use crate::engine::ClassEngine;

impl<T: Send + 'static> RingClass<T> {
    /// [`ClassEngine::samples`]: the pool's counters, the queue
    /// depth, the tenants in the ring and the age of the oldest lease out.
    pub(super) fn sample(&self) -> (crate::pool::PoolCounters, u32, u32, Option<u64>) {
        let pool = self.pool.counters();
        let oldest = self.lease_ages.oldest(self.clock.now());
        (pool, self.queue_depth(), self.core.active_tenants(), oldest)
    }
}
