//! The enqueue fast path of the lock-free class engine: taking a free cell's credit at once
//! when nothing is queued, settling lazily returned credit, finishing a fast grant, and
//! counting a request into the queue when it must wait. These are methods of
//! [`LockFreeClass`]; the class engine's entry points stay in the parent module.

use super::*;

impl<T: Send + 'static> LockFreeClass<T> {
    /// The fast path: nothing queued and a cell free → take the credit. Returns Ok(None) when
    /// the request must queue; the caller then counts itself in (`count_in`).
    pub(super) fn try_fast(&self, ticket: &Ticket) -> Result<Option<Lease>, Error> {
        self.settle_lazy();
        // Acquire: pairs with the Release `fetch_add` in `release`.
        let took = self.ctl.update(Ordering::Acquire, |cur| {
            if cur.stopped() {
                return Err(Self::ctl_error(cur));
            }
            Ok(if cur.fast_path_open() {
                (cur.take_credit(), true)
            } else {
                (cur, false)
            })
        })?;
        if !took {
            return Ok(None);
        }
        self.finish_fast(ticket).map(Some)
    }

    /// If the fast path is closed only by `LAZY`, tries to retire the emptied tenants so that
    /// this grant can be their turn; if another thread holds the token, the request takes the
    /// queued path (whose pass does the same).
    #[inline]
    fn settle_lazy(&self) {
        // Relaxed: a hint; the fast path's own RMW decides.
        let cur = self.ctl.load(Ordering::Relaxed);
        if cur.lazy() && cur.queued() == 0 && cur.free() > 0 {
            self.retire_lazy();
        }
    }

    /// Turns a fast-path cell credit into a lease; gives the credit back on failure.
    pub(super) fn finish_fast(&self, ticket: &Ticket) -> Result<Lease, Error> {
        // Relaxed: an observation.
        let now = self.recent_now.load(Ordering::Relaxed);
        match self.acquire(ticket, now) {
            Ok(lease) => {
                // We hold the cell's lease: its count is ours to write (no RMW).
                self.lease_ages.count_fast_grant(lease.cell());
                Ok(lease)
            }
            Err(e) => {
                if !matches!(e.reason(), Reason::PoolLeaseMismatch) {
                    self.unreserve_cell();
                }
                self.kick();
                Err(e)
            }
        }
    }

    /// Counts a new request into QUEUED, enforcing the exact capacity. Also decides the fast
    /// path in the same RMW when `fast` is set. Returns `Ok(true)` if the fast path took a
    /// credit instead.
    pub(super) fn count_in(&self, fast: bool) -> Result<bool, Error> {
        if fast {
            self.settle_lazy();
        }
        // AcqRel: Acquire pairs with `release` (cell credit); Release orders nothing yet (the
        // entry is published later by the inbox push) but keeps `ctl` RMWs uniform.
        self.ctl.update(Ordering::AcqRel, |cur| {
            if cur.stopped() {
                return Err(Self::ctl_error(cur));
            }
            if fast && cur.fast_path_open() {
                Ok((cur.take_credit(), true))
            } else if cur.queued() >= u64::from(self.queue_capacity) {
                Err(Error::new(Code::ResourceExhausted, Reason::QueueFull))
            } else {
                Ok((cur.count_in(), false))
            }
        })
    }
}
