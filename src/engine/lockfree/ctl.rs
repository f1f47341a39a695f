//! The class's control word, typed.
//!
//! [`Ctl`] is a snapshot of the word: named reads and named transitions, each a pure function of
//! the snapshot, so no code outside this file shifts or masks a bit of it. [`CtlCell`] is the
//! atomic that holds it; every read-modify-write the engine does on the word is a method here,
//! and its memory ordering is chosen (and commented) by the caller, which knows what it pairs
//! with.
//!
//! | field    | bits | meaning                                                            |
//! |----------|------|--------------------------------------------------------------------|
//! | FREE     | 24   | cell credits: cells neither leased nor quarantined                  |
//! | QUEUED   | 24   | live queued requests (tombstones excluded), exact `queue_capacity`   |
//! | TOKEN    | 1    | a thread is running a dispatch pass                                 |
//! | DIRTY    | 1    | something changed while TOKEN was held: run again                    |
//! | SHUT     | 1    | shutdown: admissions stop, queued requests fail                      |
//! | DEAD     | 1    | every cell quarantined: queued and new requests fail                 |
//! | LAZY     | 1    | the policy's rotation holds a tenant with no live work (SPEC F11)    |
//! | DRAIN    | 1    | graceful drain: admissions stop, queued requests are still granted   |
//!
//! `LAZY` is written only by the dispatch-token holder. While it is set the fast path is closed:
//! a new request queues, so the grant it gets is the emptied tenant's turn, at which that tenant
//! leaves the rotation — as in the baseline, which consults its rotation on every grant.

use crate::raw::pack::Field;
use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

const FREE: Field = Field::first(24);
const QUEUED: Field = FREE.next(24);
const TOKEN_F: Field = QUEUED.next(1);
const DIRTY_F: Field = TOKEN_F.next(1);
const SHUT_F: Field = DIRTY_F.next(1);
const DEAD_F: Field = SHUT_F.next(1);
const LAZY_F: Field = DEAD_F.next(1);
const DRAIN_F: Field = LAZY_F.next(1);
const _: () = assert!(DRAIN_F.end() <= 64);

const fn unit(f: Field) -> u64 {
    f.mask() & f.mask().wrapping_neg()
}
const FREE_ONE: u64 = unit(FREE);
const QUEUED_ONE: u64 = unit(QUEUED);
const TOKEN: u64 = TOKEN_F.mask();
const DIRTY: u64 = DIRTY_F.mask();
const SHUT: u64 = SHUT_F.mask();
const DEAD: u64 = DEAD_F.mask();
const LAZY: u64 = LAZY_F.mask();
const DRAIN: u64 = DRAIN_F.mask();

/// Largest cell count and queue capacity the word can hold.
pub const MAX_FIELD: u64 = FREE.max();

/// One value of the control word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ctl(u64);

impl Ctl {
    /// A class with `cells` free cells, nothing queued, no flag set.
    pub(super) fn new(cells: u32) -> Self {
        Ctl(FREE.set(0, u64::from(cells)))
    }

    /// Cell credits.
    #[inline]
    pub(super) fn free(self) -> u64 {
        FREE.get(self.0)
    }

    /// Live queued requests.
    #[inline]
    pub(super) fn queued(self) -> u64 {
        QUEUED.get(self.0)
    }

    /// A thread holds the dispatch token.
    #[inline]
    pub(super) fn token(self) -> bool {
        self.0 & TOKEN != 0
    }

    /// The holder has been asked to run again.
    #[inline]
    pub(super) fn dirty(self) -> bool {
        self.0 & DIRTY != 0
    }

    /// The class was shut down.
    #[inline]
    pub(super) fn shut(self) -> bool {
        self.0 & SHUT != 0
    }

    /// Shut down or dead: no new admissions, queued work fails.
    #[inline]
    pub(super) fn closed(self) -> bool {
        self.0 & (SHUT | DEAD) != 0
    }

    /// Every cell quarantined: no new admissions, queued work fails, until a restore.
    #[inline]
    pub(super) fn dead(self) -> bool {
        self.0 & DEAD != 0
    }

    /// Shut down or being drained: admissions have stopped for good.
    #[inline]
    pub(super) fn ended(self) -> bool {
        self.0 & (SHUT | DRAIN) != 0
    }

    /// Being drained: no new admissions, queued work is still granted.
    #[inline]
    pub(super) fn draining(self) -> bool {
        self.0 & DRAIN != 0
    }

    /// Admissions have stopped: shut down, dead or being drained.
    #[inline]
    pub(super) fn stopped(self) -> bool {
        self.0 & (SHUT | DEAD | DRAIN) != 0
    }

    /// The rotation holds a tenant with no live work: the fast path is closed.
    #[inline]
    pub(super) fn lazy(self) -> bool {
        self.0 & LAZY != 0
    }

    /// Whether a pass has anything to do: queued work and a free cell, or queued work to fail.
    #[inline]
    pub(super) fn wants_pass(self) -> bool {
        self.queued() > 0 && (self.free() > 0 || self.closed())
    }

    /// Whether a new request may take a free cell without queueing.
    #[inline]
    pub(super) fn fast_path_open(self) -> bool {
        self.queued() == 0 && self.free() > 0 && !self.lazy()
    }

    /// One cell credit fewer. The caller checked `free() > 0`.
    #[inline]
    pub(super) fn take_credit(self) -> Self {
        debug_assert!(self.free() > 0);
        Ctl(self.0 - FREE_ONE)
    }

    /// One cell credit more (the value a credit-returning RMW leaves).
    #[inline]
    pub(super) fn give_credit(self) -> Self {
        Ctl(self.0 + FREE_ONE)
    }

    /// One live queued request more. The caller checked the capacity.
    #[inline]
    pub(super) fn count_in(self) -> Self {
        Ctl(self.0 + QUEUED_ONE)
    }

    /// The dispatch token taken.
    #[inline]
    pub(super) fn take_token(self) -> Self {
        debug_assert!(!self.token());
        Ctl(self.0 | TOKEN)
    }

    /// The holder asked to run again.
    #[inline]
    pub(super) fn mark_dirty(self) -> Self {
        Ctl(self.0 | DIRTY)
    }
}

/// The atomic holding a [`Ctl`], on a cache line of its own.
pub(super) struct CtlCell(CachePadded<AtomicU64>);

impl CtlCell {
    pub(super) fn new(init: Ctl) -> Self {
        Self(CachePadded::new(AtomicU64::new(init.0)))
    }

    #[inline]
    pub(super) fn load(&self, order: Ordering) -> Ctl {
        Ctl(self.0.load(order))
    }

    /// One CAS from `current` to `new`; on failure returns the value found.
    #[inline]
    pub(super) fn compare_exchange_weak(
        &self,
        current: Ctl,
        new: Ctl,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Ctl, Ctl> {
        self.0
            .compare_exchange_weak(current.0, new.0, success, failure)
            .map(Ctl)
            .map_err(Ctl)
    }

    /// Runs `f` on the current value until its CAS succeeds or `f` declines (`Err`). Returns
    /// what `f` returned for the value it was applied to.
    #[inline]
    pub(super) fn update<R, E>(
        &self,
        success: Ordering,
        mut f: impl FnMut(Ctl) -> Result<(Ctl, R), E>,
    ) -> Result<R, E> {
        // Relaxed first read and failure ordering: the successful CAS carries `success`.
        let mut cur = self.load(Ordering::Relaxed);
        loop {
            let (next, out) = f(cur)?;
            match self.compare_exchange_weak(cur, next, success, Ordering::Relaxed) {
                Ok(_) => return Ok(out),
                Err(actual) => cur = actual,
            }
        }
    }

    /// An RMW that changes nothing: a read that takes a place in the word's modification order.
    #[inline]
    pub(super) fn touch(&self, order: Ordering) -> Ctl {
        Ctl(self.0.fetch_add(0, order))
    }

    /// Returns one cell credit. Returns the previous value.
    #[inline]
    pub(super) fn give_credit(&self, order: Ordering) -> Ctl {
        Ctl(self.0.fetch_add(FREE_ONE, order))
    }

    /// Uncounts one live queued request (it was granted, cancelled, expired or closed). Returns
    /// the previous value.
    #[inline]
    pub(super) fn count_out(&self, order: Ordering) -> Ctl {
        Ctl(self.0.fetch_sub(QUEUED_ONE, order))
    }

    /// Releases the dispatch token, consuming `DIRTY`, and sets `LAZY` to `lazy`. Returns the
    /// previous value.
    #[inline]
    pub(super) fn release_token(&self, lazy: bool, order: Ordering) -> Ctl {
        // One RMW either way: a `fetch_and` when LAZY is to be clear, else a CAS loop (only while
        // the rotation holds an emptied tenant, which is rare).
        if !lazy {
            return Ctl(self.0.fetch_and(!(TOKEN | DIRTY | LAZY), order));
        }
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            let next = (cur & !(TOKEN | DIRTY)) | LAZY;
            match self
                .0
                .compare_exchange_weak(cur, next, order, Ordering::Relaxed)
            {
                Ok(prev) => return Ctl(prev),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Sets `SHUT`. Returns the previous value.
    #[inline]
    pub(super) fn set_shut(&self, order: Ordering) -> Ctl {
        Ctl(self.0.fetch_or(SHUT, order))
    }

    /// Sets `DRAIN`. Returns the previous value.
    #[inline]
    pub(super) fn set_drain(&self, order: Ordering) -> Ctl {
        Ctl(self.0.fetch_or(DRAIN, order))
    }

    /// Sets `DEAD`. Returns the previous value.
    #[inline]
    pub(super) fn set_dead(&self, order: Ordering) -> Ctl {
        Ctl(self.0.fetch_or(DEAD, order))
    }

    /// Clears `DEAD` (a restore reopened the class). Returns the previous value.
    #[inline]
    pub(super) fn clear_dead(&self, order: Ordering) -> Ctl {
        Ctl(self.0.fetch_and(!DEAD, order))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn transitions_touch_only_their_field() {
        let c = Ctl::new(MAX_FIELD as u32);
        assert_eq!(c.free(), MAX_FIELD);
        let c = c.count_in().take_token().mark_dirty();
        assert_eq!((c.free(), c.queued()), (MAX_FIELD, 1));
        assert!(c.token() && c.dirty() && !c.closed() && !c.lazy());
        let c = c.take_credit();
        assert_eq!(c.free(), MAX_FIELD - 1);
        assert!(c.wants_pass());
        assert!(!c.fast_path_open());
        let cell = CtlCell::new(Ctl::new(1));
        assert!(cell.load(Ordering::Relaxed).fast_path_open());
        cell.give_credit(Ordering::Relaxed);
        let prev = cell.release_token(true, Ordering::Relaxed);
        assert_eq!(prev.free(), 2);
        let now = cell.load(Ordering::Relaxed);
        assert!(now.lazy() && !now.fast_path_open());
        cell.release_token(false, Ordering::Relaxed);
        assert!(cell.load(Ordering::Relaxed).fast_path_open());
        cell.set_shut(Ordering::Relaxed);
        assert!(cell.load(Ordering::Relaxed).shut());
        let cell = CtlCell::new(Ctl::new(1));
        cell.set_dead(Ordering::Relaxed);
        let dead = cell.load(Ordering::Relaxed);
        assert!(dead.closed() && !dead.shut() && dead.stopped());
        let cell = CtlCell::new(Ctl::new(1));
        assert!(!cell.load(Ordering::Relaxed).stopped());
        cell.set_drain(Ordering::Relaxed);
        let draining = cell.load(Ordering::Relaxed);
        assert!(draining.draining() && draining.stopped() && !draining.closed());
    }
}
