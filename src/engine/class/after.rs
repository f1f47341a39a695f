//! The work a call collects while it runs a turn, and what it does once the turn has ended:
//! the owners' wakes, credits handed back to the core (each may run one more turn), the death
//! of the class, the leases uncounted from `life`, and the wake of a helper when a turn was
//! handed back (SPEC F25). Also the two callers that run a turn with no entry of their own: a
//! waiting caller's help (SPEC F18) and a lease's release.
//!
//! A turn's grants (`granted`, which runs on the turn) only collect into [`After`]: the wakes,
//! the credits to give back and a death are done here once the turn has ended, so no owner's
//! waker runs on a turn and a call never runs a turn inside another. Credits go back before the
//! leases they stand for are counted back (see `life`).

use arrayvec::ArrayVec;
use core::task::Waker;

use super::life::Change;
use super::RingClass;
use crate::error::{Error, Reason};
use crate::pool::Lease;

/// Work a call collects while it runs a turn, done once the turn has ended.
pub(super) struct After {
    pub(super) wakes: ArrayVec<Waker, 64>,
    /// Cell credits to give back (a grant whose owner had left, a pool failure).
    pub(super) credits: u32,
    /// Pull-mode grants were pushed to the ready queue: wake the executors.
    pub(super) pulled: bool,
    /// The last usable cell was quarantined: end every queued request.
    pub(super) died: bool,
    /// Leases counted out in `life` to uncount once the credits above are back (so a drain
    /// never sees every lease back before every credit is).
    pub(super) outs: u32,
}

impl After {
    pub(super) fn new() -> Self {
        After {
            wakes: ArrayVec::new(),
            credits: 0,
            pulled: false,
            died: false,
            outs: 0,
        }
    }

    /// The pool gave no lease for a grant (`e`): its credit goes back, unless the pool's
    /// mismatch quarantined the cell (the credit is lost with it), and the lease counted out
    /// for it is uncounted.
    pub(super) fn acquire_failed(&mut self, e: &Error) {
        if !matches!(e.reason(), Reason::PoolLeaseMismatch) {
            self.credits += 1;
        }
        self.outs += 1;
    }

    pub(super) fn wake(&mut self, w: Waker) {
        if let Err(e) = self.wakes.try_push(w) {
            e.element().wake();
        }
    }
}

/// The turn a call with no entry of its own offers to run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Offer {
    /// A turn handed back by another call, if one waits (a waiting caller's help).
    Help,
    /// The turn a returned credit may start (a lease's release).
    Credit,
}

impl<T: Send + 'static> RingClass<T> {
    /// Does what a call collected while running its turn: wakes, returned credits (each runs
    /// at most one turn), the death of the class; then wakes one pending request if a turn was
    /// handed back (SPEC F25).
    ///
    /// Takes the collector by reference: it holds up to 64 wakers (1 KiB), and moving it into
    /// each call cost a copy of that size on every enqueue, poll and release.
    #[inline]
    pub(super) fn finish(&self, after: &mut After, now: u64) {
        if after.wakes.is_empty() && !after.pulled && !after.died && after.credits == 0 {
            // Nothing collected but leases to uncount (a fast path, a release that met no
            // turn): the loop below would do nothing else.
            self.finish_counts(after);
            return;
        }
        self.finish_collected(after, now);
    }

    /// [`finish`](Self::finish) when the call collected wakes, credits or a death.
    fn finish_collected(&self, after: &mut After, now: u64) {
        loop {
            // Most calls collect at most one waker, many none: skip the drain's set-up then.
            if !after.wakes.is_empty() {
                for w in after.wakes.drain(..) {
                    w.wake();
                }
            }
            if after.pulled {
                after.pulled = false;
                self.exec.wake_all();
            }
            if after.died {
                after.died = false;
                self.settle_death(now);
            }
            if after.credits == 0 {
                break;
            }
            // The credit's turn collects into the same (now drained) collector; the credits
            // still to return and the leases to uncount carry over.
            let credits = after.credits - 1;
            after.credits = 0;
            self.core.release(now, &mut |i| self.granted(i, now, after));
            after.credits += credits;
        }
        self.finish_counts(after);
    }

    /// The end of [`finish`](Self::finish): uncounts the leases, and wakes a helper if a turn
    /// was handed back.
    fn finish_counts(&self, after: &mut After) {
        if after.outs > 0 {
            self.life_change(Change::back(after.outs));
        }
        self.wake_if_handed_back();
    }

    /// If a turn was handed back, wakes the pending requests (those holding a waiter slot and
    /// those beyond the slots) and the executors, so it is taken (F25): any of them takes it
    /// with its poll's `help`. Rare: only a turn's end that met both
    /// a free credit and a ready tenant hands back.
    pub(super) fn wake_if_handed_back(&self) {
        if !self.core.take_handed_back() {
            return;
        }
        self.pending.wake_all();
        self.unslotted.for_each(|i| self.slot(i).waker.wake());
        self.exec.wake_all();
    }

    /// Runs one handed-back turn if one waits, and the sweep if a deadline has passed: what a
    /// waiting caller does (SPEC F18).
    ///
    /// Reads the clock only if a turn runs or a deadline is queued: a poll that finds neither
    /// needs no time.
    pub(super) fn help(&self) {
        let mut after = After::new();
        self.offer_turn(Offer::Help, &mut after);
    }

    /// [`ClassEngine::release_then`](crate::engine::ClassEngine::release_then): the lease back to the
    /// pool, `then`, and the credit back to the core (which may run a turn).
    pub(super) fn release_lease(&self, lease: Lease, then: impl FnOnce()) {
        self.lease_ages.returned(lease.cell());
        self.pool.release(lease);
        then();
        let mut after = After::new();
        // The credit goes back before the lease is counted back, so a drain that sees every
        // lease back sees every credit free.
        after.outs += 1;
        self.offer_turn(Offer::Credit, &mut after);
    }

    /// Runs the turn `offer` may start, then [`finish`](Self::finish)es `after`. Reads the
    /// clock only if a turn runs or a deadline is queued; in the latter case the due sweep runs
    /// too (after the turn's finish for [`Offer::Help`], before the turn for
    /// [`Offer::Credit`]).
    fn offer_turn(&self, offer: Offer, after: &mut After) {
        if self.deadline_queued() {
            let now = self.clock.now();
            if offer == Offer::Credit {
                self.maybe_sweep(now);
            }
            self.start_turn(offer, || now, &mut |i| self.granted(i, now, after));
            self.finish(after, now);
            if offer == Offer::Help {
                self.maybe_sweep(now);
            }
            return;
        }
        // No deadline queued: the clock is read only if a turn runs.
        let read = core::cell::Cell::new(0);
        let ran = self.start_turn(
            offer,
            || {
                let now = self.clock.now();
                read.set(now);
                now
            },
            &mut |i| self.granted(i, read.get(), after),
        );
        // Without a turn nothing was collected that needs the time (credits and a death come
        // only from grants).
        debug_assert!(ran || (after.credits == 0 && !after.died));
        self.finish(after, read.get());
    }

    /// The core's entry for `offer`, asking `now` for the time only if a turn runs. Returns
    /// whether one ran.
    fn start_turn(
        &self,
        offer: Offer,
        now: impl FnOnce() -> u64,
        on_grant: &mut impl FnMut(u32),
    ) -> bool {
        match offer {
            Offer::Help => self.core.help_at(now, on_grant),
            Offer::Credit => self.core.release_at(now, on_grant),
        }
    }
}
