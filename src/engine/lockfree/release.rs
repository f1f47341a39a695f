//! The release and drain side of the lock-free class engine: handing a released cell's
//! credit straight to the dispatch pass when work is queued (or giving it back to the pool),
//! reusing a kept cell's lease, waking drainers when admissions stop, the "drained" test, and
//! the sample a snapshot takes of the pool and queue. These are methods of
//! [`LockFreeClass`]; the class engine's entry points stay in the parent module.

use super::*;

impl<T: Send + 'static> LockFreeClass<T> {
    /// Whether a releaser seeing `cur` may take the token with its cell's credit.
    #[inline]
    pub(super) fn may_hand_credit(cur: Ctl) -> bool {
        !cur.token() && cur.queued() > 0 && !cur.closed()
    }

    /// A released cell's credit when work is queued (a host's pool), in one RMW: if the token is
    /// still free, take it and keep the credit for the pass run here, which grants that credit
    /// first (the credit is never published only to be taken back, and the token costs no RMW
    /// of its own); otherwise give the credit back and kick as `release_then` does. Returns
    /// `ctl` as the RMW found it.
    fn hand_credit_to_pass(&self) -> Ctl {
        // AcqRel. Release: the pool holds the cell again before a given-back credit is visible
        // (pairs with the Acquire CAS that takes a credit: fast path, `reserve_cell`). Acquire:
        // taking the token pairs with the Release that gave it up; and this RMW is the ordering
        // point `kick_from` needs (see there).
        let Ok((old, took)) = self
            .ctl
            .update(Ordering::AcqRel, |cur| -> Result<_, Infallible> {
                Ok(if Self::may_hand_credit(cur) {
                    (cur.take_token(), (cur, true))
                } else {
                    (cur.give_credit(), (cur, false))
                })
            });
        if took {
            self.pass_kept(dispatch::Kept::Credit);
        } else if old.queued() > 0 {
            self.kick_from(false, Some(old.give_credit()));
        }
        old
    }

    /// A release that saw work queued and the token free. With the built-in pool, the released
    /// cell itself goes to a pass run here, which grants it first (no pool release and acquire,
    /// no credit published and taken back); the pool is settled (the cell is the next
    /// request's) before `then` refunds the quota (SPEC F44). With a host's pool the cell goes
    /// back to the pool and only its credit to the pass (`hand_credit_to_pass`). If the token
    /// was taken meanwhile, as any release. Out of line: the release without queued work stays
    /// small.
    #[inline(never)]
    pub(super) fn release_to_pass(&self, lease: Lease, then: impl FnOnce()) {
        if self.pool.is_fixed() {
            if let Ok(old) = self.take_token_keeping_credit() {
                then();
                self.pass_kept(dispatch::Kept::Cell(lease));
                self.wake_drainers(old);
                return;
            }
            self.pool.release(lease);
            then();
            self.give_credit_back();
            return;
        }
        self.pool.release(lease);
        then();
        let old = self.hand_credit_to_pass();
        self.wake_drainers(old);
    }

    /// Returns a released cell's credit (the pool has the cell again) and kicks if work is
    /// queued.
    #[inline]
    pub(super) fn give_credit_back(&self) {
        // Release: the pool holds the cell again before the credit is visible; pairs with the
        // Acquire CAS that takes a credit (fast path, `reserve_cell`). Acquire: this RMW is also
        // the ordering point `kick_from` needs (see there), so the kick starts from its value
        // instead of reading `ctl` again.
        let old = self.ctl.give_credit(Ordering::AcqRel);
        if old.queued() > 0 {
            self.kick_from(false, Some(old.give_credit()));
        }
        self.wake_drainers(old);
    }

    /// Takes the token and keeps a released cell's credit, in one CAS, if the word still says
    /// work is queued, the token is free and the class open; else returns the word as found.
    /// Returns `ctl` as the CAS found it.
    fn take_token_keeping_credit(&self) -> Result<Ctl, Ctl> {
        // Relaxed: only a guess; the CAS decides.
        let mut cur = self.ctl.load(Ordering::Relaxed);
        loop {
            if !Self::may_hand_credit(cur) {
                return Err(cur);
            }
            // AcqRel. Acquire: taking the token pairs with the Release that gave it up.
            // Release: as every RMW of a releaser on `ctl` (see `kick_from`).
            match self.ctl.compare_exchange_weak(
                cur,
                cur.take_token(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(cur),
                Err(actual) => cur = actual,
            }
        }
    }

    /// A lease of `kept`'s cell for `ticket` (the built-in pool's lease is built from the
    /// request, as its acquire builds it), its lease age starting at `now`.
    pub(super) fn reuse(&self, kept: Lease, ticket: &Ticket, now: u64) -> Lease {
        let lease = Lease::new(&ticket.lease_request(self.class), kept.cell());
        self.lease_ages.leased(lease.cell(), now);
        lease
    }

    /// Wakes drainers (and executors, who share the waiter slots) if `old`, the value of `ctl`
    /// that an RMW of the caller's replaced, says admissions have stopped: the change may be the
    /// last one a drain waits for. The RMW orders the change before `wake_all`.
    #[inline]
    pub(super) fn wake_drainers(&self, old: Ctl) {
        if old.stopped() {
            self.exec.wake_all();
        }
    }

    /// Whether the class has stopped admitting and everything it admitted has finished:
    /// nothing queued, no granted job waiting for an executor, every usable cell back.
    pub(super) fn drained(&self) -> bool {
        // Acquire: pairs with the Release RMWs of granters, releasers and cancellers.
        let cur = self.ctl.load(Ordering::Acquire);
        // Acquire: pairs with the AcqRel updates in `quarantine` / `restore_cell`.
        let usable = self.usable.load(Ordering::Acquire);
        // Acquire: pairs with the Release stores in `flush_overflow` / `publish_ready`.
        let overflowed = self.overflowed.load(Ordering::Acquire);
        cur.stopped()
            && cur.queued() == 0
            && cur.free() >= u64::from(usable)
            && overflowed == 0
            && self.ready.is_empty()
    }

    /// Samples for a snapshot: the pool's split, the queue depth, the tenants in rotation and
    /// the oldest lease's age.
    pub(super) fn sample(&self) -> crate::stats::Samples {
        let pool = self.pool.counters();
        // Acquire: pairs with the RMWs of producers, granters and releasers.
        let cur = self.ctl.load(Ordering::Acquire);
        let now = self.clock.now();
        let oldest = self.lease_ages.oldest(now);
        crate::stats::Samples {
            pool,
            queue_depth: cur.queued() as u32,
            // Relaxed: an observation.
            queued_tenants: self.queued_tenants.load(Ordering::Relaxed),
            oldest_lease_age: oldest,
            fast_grants: self.lease_ages.fast_grants(),
        }
    }
}
