//! Samples for snapshots: the pool's counters, the queue depth, the tenants in the ring and the
//! age of the oldest lease out (each cell's lease time is kept in [`LeaseAges`]).
//!
//! [`LeaseAges`]: crate::engine::LeaseAges

use super::RingClass;
use crate::engine::ClassEngine;

impl<T: Send + 'static> RingClass<T> {
    /// [`ClassEngine::samples`]: the pool's counters, the queue
    /// depth, the tenants in the ring and the age of the oldest lease out.
    pub(super) fn sample(&self) -> crate::stats::Samples {
        crate::stats::Samples {
            pool: self.pool.counters(),
            queue_depth: self.queue_depth(),
            queued_tenants: self.core.active_tenants(),
            oldest_lease_age: self.lease_ages.oldest(self.clock.now()),
            fast_grants: self.lease_ages.fast_grants(),
        }
    }
}
