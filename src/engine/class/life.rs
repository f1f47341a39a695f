//! The class's `life` word and the lifecycle that reads and writes it: admission stops
//! (shutdown, close for a drain, the death of the class), the drain check, the loss and the
//! restoring of cells.
//!
//! `life` packs the live queued count (bits 0..24), the leases out (bits 24..48) and the flags
//! `SHUT`, `DRAIN`, `DEAD`; this module alone reads or writes its bits: the rest of the engine
//! sees a [`Life`] snapshot and moves the counts with a named [`Change`] or one of the
//! transitions below (`try_count_queued`, `try_count_fast_out`, `life_sync`). Every change is an RMW, so a flag set after a count change is
//! ordered against it; a `life_add` that finds a flag set wakes the executors and drainers, whose
//! re-check after registering pairs with that wake. A counted lease is counted out before it is
//! published and counted back only after its credit is back, so a drain that sees every lease
//! back sees every credit free. `usable` counts the cells not quarantined; the one that takes it
//! to zero kills the class.

use core::task::{Context, Poll};

use super::super::grant::{is_queued, CLOSED};
use super::after::After;
use super::slot::{F_QUARANTINED, F_SHUTDOWN};
use super::RingClass;
use crate::error::{Code, Error, Reason};
use crate::ids::CellId;
use crate::pool::Lease;
use crate::sync::Ordering;

/// `life`: live queued requests (bits 0..24).
const QUEUED_ONE: u64 = 1;
const QUEUED_MASK: u64 = (1 << 24) - 1;
/// `life`: leases granted and not yet back (bits 24..48).
const OUT_ONE: u64 = 1 << 24;
const OUT_SHIFT: u32 = 24;
/// `life`: shut down (admissions stop, queued requests end).
const SHUT: u64 = 1 << 48;
/// `life`: closed for a drain (admissions stop, queued requests are still granted).
const DRAIN: u64 = 1 << 49;
/// `life`: every cell quarantined (queued requests end).
const DEAD: u64 = 1 << 50;
const STOPPED: u64 = SHUT | DRAIN | DEAD;

/// A snapshot of `life`: what one load or RMW of it saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Life(u64);

impl Life {
    /// Live queued requests.
    #[inline]
    pub(super) fn queued(self) -> u32 {
        (self.0 & QUEUED_MASK) as u32
    }

    /// Leases granted and not yet back.
    #[inline]
    fn out(self) -> u32 {
        ((self.0 >> OUT_SHIFT) & QUEUED_MASK) as u32
    }

    /// Admissions have stopped: shutdown, a drain or the death of the class.
    #[inline]
    pub(super) fn stopped(self) -> bool {
        self.0 & STOPPED != 0
    }

    /// The error an admission meets once [`stopped`](Self::stopped).
    pub(super) fn stop_error(self) -> Error {
        if self.0 & (SHUT | DRAIN) != 0 {
            Error::new(Code::Unavailable, Reason::Shutdown)
        } else {
            Error::new(Code::Unavailable, Reason::AllCellsQuarantined)
        }
    }

    /// The fate queued requests end with now (shutdown, then death), if they end: a drain
    /// still grants them.
    #[inline]
    pub(super) fn ending_fate(self) -> Option<u32> {
        if self.0 & SHUT != 0 {
            Some(F_SHUTDOWN)
        } else if self.0 & DEAD != 0 {
            Some(F_QUARANTINED)
        } else {
            None
        }
    }

    /// A pull stream's end: shut down or closed for a drain, and nothing left queued (a dead
    /// class is not the end: a restore reopens it, SPEC F22).
    #[inline]
    pub(super) fn stream_over(self) -> bool {
        self.0 & (SHUT | DRAIN) != 0 && self.queued() == 0
    }

    /// Admissions stopped, nothing queued, every lease back.
    fn drained(self) -> bool {
        self.stopped() && self.queued() == 0 && self.out() == 0
    }
}

/// A named change to `life`'s counts, applied by [`RingClass::life_change`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Change(u64);

impl Change {
    /// A queued request left the queue without a lease (ended, or its slot never came).
    pub(super) const UNQUEUE: Change = Change(0u64.wrapping_sub(QUEUED_ONE));
    /// A queued request was granted: out of the queue, its lease out.
    pub(super) const GRANT: Change = Change(OUT_ONE.wrapping_sub(QUEUED_ONE));
    /// A lease counted out (before it is published, or before its credit is spent).
    pub(super) const OUT: Change = Change(OUT_ONE);
    /// A lease counted out came back (after its credit is back).
    pub(super) const BACK: Change = Change(0u64.wrapping_sub(OUT_ONE));

    /// `n` leases came back at once.
    #[inline]
    pub(super) fn back(n: u32) -> Change {
        Change(0u64.wrapping_sub(u64::from(n) * OUT_ONE))
    }
}

const _: () = assert!(crate::policy::MAX_QUEUE_CAPACITY as u64 <= QUEUED_MASK);
const _: () = assert!(crate::policy::MAX_CELLS as u64 <= QUEUED_MASK);

impl<T: Send + 'static> RingClass<T> {
    #[inline]
    pub(super) fn life(&self) -> Life {
        // Acquire: pairs with the Release RMWs on `life`.
        Life(self.life.load(Ordering::Acquire))
    }

    /// Applies `change` to `life`; wakes drainers and executors if admissions have stopped
    /// (the change may be the last one a drain waits for).
    #[inline]
    pub(super) fn life_change(&self, change: Change) {
        // AcqRel: Release publishes what the caller did before (a refund, a cell back in the
        // pool, a ready push) to a drainer's Acquire load; Acquire orders the flag read.
        let old = Life(self.life.fetch_add(change.0, Ordering::AcqRel));
        if old.stopped() {
            self.exec.wake_all();
        }
    }

    /// Counts one more queued request unless admissions have stopped or `cap` are queued.
    /// Returns the queued count with this one, or what was seen instead.
    #[inline]
    pub(super) fn try_count_queued(&self, cap: u32) -> Result<u32, Life> {
        let cap = u64::from(cap);
        // AcqRel: Acquire reads the flags; Release keeps `life`'s RMWs uniform.
        self.life
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| {
                (l & STOPPED == 0 && l & QUEUED_MASK < cap).then_some(l + QUEUED_ONE)
            })
            .map(|l| Life(l).queued() + 1)
            .map_err(Life)
    }

    /// The enqueue fast path's count: one lease out, only while admissions run and nothing is
    /// queued (a queued request is owed the cell). Returns what was seen otherwise.
    #[inline]
    pub(super) fn try_count_fast_out(&self) -> Result<(), Life> {
        // AcqRel: Acquire reads the flags; Release keeps `life`'s RMWs uniform.
        self.life
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| {
                (l & (STOPPED | QUEUED_MASK) == 0).then_some(l + OUT_ONE)
            })
            .map(drop)
            .map_err(Life)
    }

    /// Reads `life` with an RMW that changes nothing: ordered against every other RMW on it
    /// (the one that set a flag, the one that counted a departure), where a load is not.
    #[inline]
    pub(super) fn life_sync(&self) -> Life {
        // AcqRel: both halves of the ordering the callers rely on (see each).
        Life(self.life.fetch_add(0, Ordering::AcqRel))
    }

    /// Quarantines a cell the class loses; the last usable one kills the class.
    pub(super) fn lose_cell(&self, lease: Lease, reason: &'static str, after: &mut After) {
        self.lease_ages.returned(lease.cell());
        self.pool.quarantine(lease, reason);
        // AcqRel: as in `restore_cell`, whose increment this orders against.
        if self.usable.fetch_sub(1, Ordering::AcqRel) == 1 {
            after.died = true;
        }
    }

    /// Ends every queued entry (shutdown, death of the class). O(slots); rare.
    pub(super) fn end_all(&self, fate: u32, now: u64) {
        for index in 0..self.slots.len() as u32 {
            if !is_queued(self.core.state(index)) {
                continue;
            }
            self.end_handle(self.core.handle(index), CLOSED, fate, now);
        }
        self.exec.wake_all();
        self.rooms.wake_all();
    }

    /// Admissions stopped, nothing queued, every lease back.
    fn drained(&self) -> bool {
        self.life().drained()
    }

    /// [`ClassEngine::shutdown`](crate::engine::ClassEngine::shutdown): admissions stop and every
    /// queued entry ends.
    pub(super) fn shut_down(&self) {
        // Release: pairs with the Acquire loads of `life`.
        self.life.fetch_or(SHUT, Ordering::AcqRel);
        self.end_all(F_SHUTDOWN, self.clock.now());
    }

    /// [`ClassEngine::close`](crate::engine::ClassEngine::close): admissions stop; queued entries are
    /// still granted.
    pub(super) fn close_for_drain(&self) {
        // AcqRel: pairs with the Acquire loads of `life`.
        self.life.fetch_or(DRAIN, Ordering::AcqRel);
        self.exec.wake_all();
        self.rooms.wake_all();
    }

    /// [`ClassEngine::poll_drained`](crate::engine::ClassEngine::poll_drained).
    pub(super) fn poll_drain(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<()> {
        if self.drained() {
            return Poll::Ready(());
        }
        self.exec.register_in(slot, cx);
        // Re-check after registering: pairs with the RMW-then-`wake_all` of `life_add`.
        if self.drained() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// [`ClassEngine::quarantine_then`](crate::engine::ClassEngine::quarantine_then): the lease's
    /// cell is lost to the class.
    pub(super) fn quarantine_lease(&self, lease: Lease, reason: &'static str, then: impl FnOnce()) {
        let mut after = After::new();
        self.lose_cell(lease, reason, &mut after);
        then();
        self.life_change(Change::BACK);
        self.finish(&mut after, self.clock.now());
        // Executors waiting for a dead class to empty, and drainers waiting for the cell, must
        // look again.
        self.exec.wake_all();
    }

    /// Makes `DEAD` say whether every cell is quarantined (SPEC F22), after `usable` crossed
    /// zero: the decrement to zero (through `After::died`) and a restore's increment from it
    /// each call this, and each flip is followed by a fresh read, so whoever flips last flips
    /// again if the count moved meanwhile; once the calls return, `DEAD` matches `usable`. A
    /// class that dies ends its queued entries; one a restore reopens admits again.
    pub(super) fn settle_death(&self, now: u64) {
        loop {
            // Acquire: pairs with the AcqRel RMWs on `usable`.
            let dead = self.usable.load(Ordering::Acquire) == 0;
            if dead {
                // AcqRel: pairs with the Acquire loads of `life`.
                if self.life.fetch_or(DEAD, Ordering::AcqRel) & DEAD == 0 {
                    self.end_all(F_QUARANTINED, now);
                }
            } else {
                // AcqRel: as above; an enqueue that reads the cleared flag queues again.
                self.life.fetch_and(!DEAD, Ordering::AcqRel);
                self.exec.wake_all();
            }
            // Acquire: as above.
            if (self.usable.load(Ordering::Acquire) == 0) == dead {
                return;
            }
        }
    }

    /// [`ClassEngine::restore_cell`](crate::engine::ClassEngine::restore_cell).
    pub(super) fn restore(&self, cell: CellId) -> Result<(), Error> {
        // Count the cell as usable first: holding the increment keeps a concurrent quarantine
        // of the other cells from killing the class under us. From zero, it reopens a class
        // that died (SPEC F22).
        // AcqRel: orders against the decrement in `lose_cell`.
        let before = self.usable.fetch_add(1, Ordering::AcqRel);
        let now = self.clock.now();
        if let Err(e) = self.pool.restore(cell) {
            // AcqRel: as in `lose_cell`, whose role this undo takes if it is the last one.
            if self.usable.fetch_sub(1, Ordering::AcqRel) == 1 {
                let mut after = After::new();
                after.died = true;
                self.finish(&mut after, now);
            }
            return Err(e);
        }
        if before == 0 {
            self.settle_death(now);
        }
        let mut after = After::new();
        self.core
            .release(now, &mut |i| self.granted(i, now, &mut after));
        self.finish(&mut after, now);
        self.exec.wake_all();
        Ok(())
    }
}
