//! The class's `life` word and the lifecycle that reads and writes it: admission stops
//! (shutdown, close for a drain, the death of the class), the drain check, the loss and the
//! restoring of cells.
//!
//! `life` packs the live queued count (bits 0..24), the leases out (bits 24..48) and the flags
//! `SHUT`, `DRAIN`, `DEAD`. Every change is an RMW, so a flag set after a count change is
//! ordered against it; a `life_add` that finds a flag set wakes the executors and drainers, whose
//! re-check after registering pairs with that wake. A counted lease is counted out before it is
//! published and counted back only after its credit is back, so a drain that sees every lease
//! back sees every credit free. `usable` counts the cells not quarantined; the one that takes it
//! to zero kills the class.

use core::task::{Context, Poll};

use super::super::grant::{CLOSED, QUEUED};
use super::after::After;
use super::slot::{F_QUARANTINED, F_SHUTDOWN};
use super::RingClass;
use crate::error::{Code, Error, Reason};
use crate::ids::CellId;
use crate::pool::Lease;
use crate::sync::Ordering;

/// `life`: live queued requests (bits 0..24).
pub(super) const QUEUED_ONE: u64 = 1;
pub(super) const QUEUED_MASK: u64 = (1 << 24) - 1;
/// `life`: leases granted and not yet back (bits 24..48).
pub(super) const OUT_ONE: u64 = 1 << 24;
pub(super) const OUT_SHIFT: u32 = 24;
/// `life`: shut down (admissions stop, queued requests end).
pub(super) const SHUT: u64 = 1 << 48;
/// `life`: closed for a drain (admissions stop, queued requests are still granted).
pub(super) const DRAIN: u64 = 1 << 49;
/// `life`: every cell quarantined (queued requests end).
pub(super) const DEAD: u64 = 1 << 50;
pub(super) const STOPPED: u64 = SHUT | DRAIN | DEAD;

const _: () = assert!(crate::policy::MAX_QUEUE_CAPACITY as u64 <= QUEUED_MASK);
const _: () = assert!(crate::policy::MAX_CELLS as u64 <= QUEUED_MASK);

impl<T: Send + 'static> RingClass<T> {
    pub(super) fn life(&self) -> u64 {
        // Acquire: pairs with the Release RMWs on `life`.
        self.life.load(Ordering::Acquire)
    }

    pub(super) fn stop_error(l: u64) -> Error {
        if l & (SHUT | DRAIN) != 0 {
            Error::new(Code::Unavailable, Reason::Shutdown)
        } else {
            Error::new(Code::Unavailable, Reason::AllCellsQuarantined)
        }
    }

    /// [`life_add`](Self::life_add) of `-delta`.
    pub(super) fn life_sub(&self, delta: u64) -> u64 {
        self.life_add(0u64.wrapping_sub(delta))
    }

    /// Applies `delta` (wrapping) to `life`; wakes drainers and executors if admissions have
    /// stopped (the change may be the last one a drain waits for). Returns the old value.
    pub(super) fn life_add(&self, delta: u64) -> u64 {
        // AcqRel: Release publishes what the caller did before (a refund, a cell back in the
        // pool, a ready push) to a drainer's Acquire load; Acquire orders the flag read.
        let old = self.life.fetch_add(delta, Ordering::AcqRel);
        if old & STOPPED != 0 {
            self.exec.wake_all();
        }
        old
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
            if self.core.state(index) != QUEUED {
                continue;
            }
            self.end_handle(self.core.handle(index), CLOSED, fate, now);
        }
        self.exec.wake_all();
        self.rooms.wake_all();
    }

    /// Admissions stopped, nothing queued, every lease back.
    fn drained(&self) -> bool {
        let l = self.life();
        l & STOPPED != 0 && l & QUEUED_MASK == 0 && (l >> OUT_SHIFT) & QUEUED_MASK == 0
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
        self.life_sub(OUT_ONE);
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
