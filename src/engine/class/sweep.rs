//! The rare slow path behind the `sweeping` try-token (SPEC F24): the deadline sweep, and the
//! compaction of tenants that wait in the ring. Neither ever runs on a turn, and a caller that
//! finds the token taken skips the work (`ring.sweep_held` is the pause point while it is held).
//!
//! Deadlines: producers `fetch_min` an entry's deadline into `fresh` and then `earliest`; a call
//! that reads the clock past `earliest` sweeps the next [`SWEEP_CHUNK`] slots, and the end of a
//! cycle over every slot sets `earliest` to the earliest deadline kept, folding in the `fresh`
//! ones queued meanwhile. `cursor` and `cycle_min` are touched only under the token.

use super::super::grant::{is_queued, EXPIRED};
use super::after::After;
use super::slot::F_EXPIRED;
use super::RingClass;
use crate::raw::pause;
use crate::sync::Ordering;

/// Slots the deadline sweep looks at per call.
pub(super) const SWEEP_CHUNK: u32 = 256;

impl<T: Send + 'static> RingClass<T> {
    /// Whether a queued entry may have a deadline (`earliest` below `u64::MAX`); if not, the
    /// sweep has nothing to do and the caller need not read the clock for it.
    pub(super) fn deadline_queued(&self) -> bool {
        // Relaxed: a hint, as `maybe_sweep`'s own load; a producer's `fetch_min` racing with
        // this read is seen by the next call (the sweep is never owed to this one).
        self.earliest.load(Ordering::Relaxed) != u64::MAX
    }

    /// A producer notes the deadline of the entry it has just queued (`u64::MAX`: none).
    pub(super) fn note_deadline(&self, deadline: u64) {
        if deadline != u64::MAX {
            // AcqRel: see `maybe_sweep`; `fresh` first.
            self.fresh.fetch_min(deadline, Ordering::AcqRel);
            self.earliest.fetch_min(deadline, Ordering::AcqRel);
        }
    }

    /// The deadline sweep (SPEC F46), behind its own try-token, when the earliest deadline has
    /// passed: ends the expired queued entries among the next [`SWEEP_CHUNK`] slots (a cycle
    /// over every slot takes as many calls as it needs, each bounded), and at the end of a cycle
    /// sets `earliest` to the earliest deadline of the entries left.
    pub(super) fn maybe_sweep(&self, now: u64) {
        // Relaxed: a hint; the token and the scan decide.
        if now < self.earliest.load(Ordering::Relaxed) {
            return;
        }
        if self.with_sweep_token(|| self.sweep_chunk(now)) {
            self.wake_if_handed_back();
        }
    }

    /// The sweep's work under the token: one chunk of slots, and a cycle's end if it reaches
    /// the last slot.
    fn sweep_chunk(&self, now: u64) {
        let n = self.slots.len() as u32;
        // Relaxed: touched only under the token, whose Acquire/Release order it.
        let start = self.cursor.load(Ordering::Relaxed);
        let mut least = if start == 0 {
            // A new cycle. AcqRel: an RMW, so a producer's later `fetch_min` on `fresh` is
            // kept for the cycle's end, and an earlier one's entry (queued before it) is seen
            // by this cycle's scan.
            self.fresh.swap(u64::MAX, Ordering::AcqRel);
            u64::MAX
        } else {
            // Relaxed: as `cursor`.
            self.cycle_min.load(Ordering::Relaxed)
        };
        let end = start.saturating_add(SWEEP_CHUNK).min(n);
        for index in start..end {
            if !is_queued(self.core.state(index)) {
                continue;
            }
            let Some(i) = self.core.try_ref(self.core.handle(index)) else {
                continue;
            };
            // The deadline in effect, or the one a change not yet applied asks for (SPEC F36:
            // a change that won its CAS holds from then on, tighter or relaxed).
            let deadline = self
                .core
                .pending_deadline(i)
                .unwrap_or_else(|| self.core.deadline_of(i));
            let mut after = After::new();
            if deadline <= now {
                if self
                    .core
                    .end(i, EXPIRED, now, &mut |g| self.granted(g, now, &mut after))
                {
                    self.book_end(i, F_EXPIRED, &mut after);
                }
            } else if is_queued(self.core.state(i)) {
                least = least.min(deadline);
            }
            self.core.unref(i);
            self.finish(&mut after, now);
        }
        if end == n {
            // Relaxed: as `cursor`.
            self.cursor.store(0, Ordering::Relaxed);
            // AcqRel: reads from the last producer `fetch_min` on `earliest` before it, so that
            // producer's earlier `fetch_min` on `fresh` is seen by the load below; a later one
            // applies its minimum to the value stored here.
            self.earliest.swap(least, Ordering::AcqRel);
            // Acquire: pairs with the producers' AcqRel `fetch_min`.
            let fresh = self.fresh.load(Ordering::Acquire);
            if fresh < least {
                // AcqRel: as the producers'.
                self.earliest.fetch_min(fresh, Ordering::AcqRel);
            }
        } else {
            // Relaxed: as `cursor`.
            self.cursor.store(end, Ordering::Relaxed);
            self.cycle_min.store(least, Ordering::Relaxed);
        }
    }

    /// Compacts tenants that wait in the ring (their tombstones hold slots until their turn),
    /// behind the sweep token; skipped if another thread holds it.
    pub(super) fn compact(&self) {
        self.with_sweep_token(|| {
            self.core.compact_waiting();
        });
    }

    /// Runs `work` holding the sweep token; `false` (and `work` not run) if another thread
    /// holds it.
    fn with_sweep_token(&self, work: impl FnOnce()) -> bool {
        // Acquire: pairs with the Release store that gave the token up.
        if self.sweeping.swap(true, Ordering::Acquire) {
            return false;
        }
        pause::point("ring.sweep_held");
        work();
        // Release: pairs with the next taker's Acquire swap.
        self.sweeping.store(false, Ordering::Release);
        true
    }
}
