//! The entry slots beside the core's entries, and the delivery of each entry's end to its
//! owner through the slot's fate word: the grant (a lease from the pool, stored before the fate
//! CAS publishes it), the other ends (cancel, expiry, shutdown, quarantine, failure), and the
//! owner's side (poll, withdraw, cancel).
//!
//! Ownership of a slot's cells: the producer writes them before the core publishes the entry;
//! while the entry is queued they are read-only to whoever holds a reference. The thread whose
//! core CAS moved the entry out of `QUEUED` (the granter or the ender) owns the delivery: it
//! writes the lease or the error, then moves the fate from `PENDING` with a Release CAS or
//! store, and the owner takes them after an Acquire load of the fate. An owner that gives up
//! CASes `PENDING → ABANDONED`; a granter that then fails its CAS returns the lease itself.
//! Every reference taken on an entry (`try_ref`, the grant's) is given back with `unref`.

use core::task::Context;

use super::super::grant::{TooLate, Wanted, CANCELLED, CLOSED, EXPIRED};
use super::after::After;
use super::life::Change;
use super::RingClass;
use crate::admission::ExecutionPermit;
use crate::cancel::CancellationToken;
use crate::engine::{Ended, Polled, Ticket};
use crate::error::{Code, Error, Reason};
use crate::ids::TenantId;
use crate::pool::Lease;
use crate::stats::saturating_add;
use crate::sync::{AtomicU32, AtomicWaker, Ordering, UnsafeCell};

/// Fate: nothing decided yet.
pub(super) const PENDING: u32 = 0;
/// Fate: granted; the lease is in the slot.
pub(super) const F_GRANTED: u32 = 1;
/// Fate: the owner gave up before the grant was delivered; the granter returns the lease.
pub(super) const F_ABANDONED: u32 = 2;
pub(super) const F_CANCELLED: u32 = 3;
pub(super) const F_EXPIRED: u32 = 4;
pub(super) const F_SHUTDOWN: u32 = 5;
pub(super) const F_QUARANTINED: u32 = 6;
/// Fate: failed; the error is in the slot.
pub(super) const F_FAILED: u32 = 7;

/// The name of an end fate, for the `tracing` events.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
const fn fate_name(fate: u32) -> &'static str {
    match fate {
        F_CANCELLED => "cancelled",
        F_EXPIRED => "expired",
        F_SHUTDOWN => "shutdown",
        F_QUARANTINED => "quarantined",
        _ => "failed",
    }
}

/// A slot's `helper`: no waiter slot claimed.
pub(super) const NO_HELPER: u32 = u32::MAX;
/// A slot's `helper`: every waiter slot was claimed; the entry is marked in `unslotted`.
pub(super) const UNSLOTTED: u32 = u32::MAX - 1;

/// Per entry slot: what the core's slot index carries for the scheduler.
pub(super) struct Slot<T> {
    pub(super) fate: AtomicU32,
    pub(super) waker: AtomicWaker,
    /// The waiter slot among `pending` its owner claimed while pending, or `NO_HELPER`;
    /// touched only by the owner.
    pub(super) helper: AtomicU32,
    /// Written by the producer before the entry is queued; read-only while it is held.
    pub(super) ticket: UnsafeCell<Ticket>,
    pub(super) enqueued_at: UnsafeCell<u64>,
    pub(super) pull: UnsafeCell<bool>,
    pub(super) token: UnsafeCell<Option<CancellationToken>>,
    /// Pull mode: the permit and payload, owned by the entry until an executor (or the ender)
    /// takes them.
    pub(super) content: UnsafeCell<Option<(ExecutionPermit, T)>>,
    /// Written by the granter before the fate's Release CAS; taken by the owner after it.
    pub(super) lease: UnsafeCell<Option<Lease>>,
    pub(super) waited: UnsafeCell<u64>,
    pub(super) error: UnsafeCell<Option<Error>>,
}

impl<T> Slot<T> {
    pub(super) fn new() -> Self {
        Slot {
            fate: AtomicU32::new(PENDING),
            waker: AtomicWaker::new(),
            helper: AtomicU32::new(NO_HELPER),
            ticket: UnsafeCell::new(Ticket::BLANK),
            enqueued_at: UnsafeCell::new(0),
            pull: UnsafeCell::new(false),
            token: UnsafeCell::new(None),
            content: UnsafeCell::new(None),
            lease: UnsafeCell::new(None),
            waited: UnsafeCell::new(0),
            error: UnsafeCell::new(None),
        }
    }
}

impl<T: Send + 'static> RingClass<T> {
    /// The grant of slot `index`, just made by the core's entry CAS on this thread's turn:
    /// deliver it. The entry's reference is ours until the end.
    pub(super) fn granted(&self, index: u32, now: u64, after: &mut After) {
        let s = self.slot(index);
        let ticket = self.ticket(index);
        let pull = self.is_pull(index);
        // SAFETY: as `ticket`.
        let cancelled = pull
            && s.token
                .with(|t| unsafe { (*t).as_ref() }.is_some_and(|t| t.is_cancelled()));
        // A deadline tightened in place (SPEC F36) that passed before the sweep saw it: the
        // grant is refused as the facade refuses one past the permit's own deadline (F46).
        let cut = self.core.deadline_of(index);
        let expired = cut < ticket.deadline && now >= cut;
        if cancelled || expired {
            // A pull request whose token was cancelled is not handed to an executor (SPEC
            // F32, F46): it ends here and its credit goes back.
            after.credits += 1;
            self.life_change(Change::OUT);
            after.outs += 1;
            self.book_end(
                index,
                if cancelled { F_CANCELLED } else { F_EXPIRED },
                after,
            );
            self.core.unref(index);
            return;
        }
        match self.acquire(&ticket, now, after) {
            Ok(lease) => {
                // SAFETY: as `ticket`.
                let at = s.enqueued_at.with(|a| unsafe { *a });
                let waited = now.saturating_sub(at);
                crate::observe::granted(self.class, ticket.tenant, lease.cell(), waited);
                // SAFETY: the fate is PENDING: nobody reads the lease cell until the CAS below
                // publishes it, and the owner never writes it.
                unsafe {
                    s.lease.with_mut(|l| *l = Some(lease));
                    s.waited.with_mut(|w| *w = waited);
                }
                // Counted out (and no longer queued) before the lease is published: once the
                // fate CAS succeeds the owner may release the lease at once, and its release
                // uncounts it; counting after the CAS let `life`'s lease count go below zero
                // for a moment (borrowing from the flags above it).
                self.life_change(Change::GRANT);
                self.rooms.freed(ticket.tenant);
                // AcqRel: Release publishes the lease to the owner's Acquire load of the fate;
                // Acquire, on failure, pairs with the owner's ABANDONED CAS.
                match s.fate.compare_exchange(
                    PENDING,
                    F_GRANTED,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        self.stats.record_grant_waited(waited);
                        if pull {
                            self.ready.push(index);
                            after.pulled = true;
                        } else if let Some(w) = crate::sync::take_waker(&s.waker) {
                            after.wake(w);
                        }
                        self.ledger
                            .refund_queue_slot(TenantId(ticket.tenant), self.class);
                    }
                    Err(_) => {
                        // The owner left after the grant CAS and before this delivery: the
                        // request was granted (counted as a grant, as the other engines count
                        // a granted request whose owner withdraws before taking it), and the
                        // lease goes back, and the credit with it.
                        self.stats.record_grant_waited(waited);
                        // SAFETY: the CAS failed, so the lease was never published.
                        let lease = s.lease.with_mut(|l| unsafe { (*l).take() });
                        self.ledger
                            .refund_queue_slot(TenantId(ticket.tenant), self.class);
                        if let Some(l) = lease {
                            self.lease_ages.returned(l.cell());
                            self.pool.release(l);
                        }
                        after.credits += 1;
                        after.outs += 1;
                    }
                }
            }
            Err(e) => {
                self.life_change(Change::OUT);
                after.acquire_failed(&e);
                // SAFETY: the fate is PENDING: nobody reads the error before it changes.
                unsafe { s.error.with_mut(|x| *x = Some(e)) };
                self.book_end(index, F_FAILED, after);
            }
        }
        self.core.unref(index);
    }

    /// Books the end of slot `index`, which the caller moved out of `QUEUED` (exactly once) and
    /// holds a reference on: the content (pull mode), the refund, the count, the owner's wake.
    pub(super) fn book_end(&self, index: u32, fate: u32, after: &mut After) {
        let s = self.slot(index);
        let ticket = self.ticket(index);
        if self.is_pull(index) {
            // SAFETY: moving the entry out of QUEUED made us the content's owner.
            let content = s.content.with_mut(|c| unsafe { (*c).take() });
            if let Some((permit, payload)) = content {
                drop(permit);
                if matches!(fate, F_SHUTDOWN | F_QUARANTINED) {
                    self.undelivered.keep(payload);
                } else {
                    drop(payload);
                }
            }
            if let Some(live) = ticket.live {
                self.ids.remove(live);
            }
        }
        self.ledger
            .refund_queue_slot(TenantId(ticket.tenant), self.class);
        match fate {
            F_CANCELLED => saturating_add(&self.stats.cancellations, 1),
            F_EXPIRED => saturating_add(&self.stats.expirations, 1),
            F_FAILED => {}
            _ => saturating_add(&self.stats.rejections, 1),
        }
        crate::observe::ended(self.class, ticket.tenant, fate_name(fate));
        // Release: publishes the error cell to the owner's Acquire load.
        s.fate.store(fate, Ordering::Release);
        self.life_change(Change::UNQUEUE);
        self.rooms.freed(ticket.tenant);
        if self.is_pull(index) {
            // Nobody will take the content: its reference goes.
            self.core.unref(index);
        } else if let Some(w) = crate::sync::take_waker(&s.waker) {
            after.wake(w);
        }
    }

    /// Ends the entry of `handle` as `why` (core state) / `fate` if it is still queued, then
    /// [`finish`](Self::finish)es what that collected.
    pub(super) fn end_handle(&self, handle: u64, why: u32, fate: u32, now: u64) -> bool {
        let mut after = After::new();
        let ended = match self.core.try_ref(handle) {
            Some(index) => {
                let ended = self
                    .core
                    .end(index, why, now, &mut |i| self.granted(i, now, &mut after));
                if ended {
                    self.book_end(index, fate, &mut after);
                }
                self.core.unref(index);
                ended
            }
            None => false,
        };
        self.finish(&mut after, now);
        ended
    }

    /// A lease for `ticket` from the pool, its age starting at `now`. A lease that does not
    /// match is quarantined (the credit is lost with the cell).
    pub(super) fn acquire(
        &self,
        ticket: &Ticket,
        now: u64,
        after: &mut After,
    ) -> Result<Lease, Error> {
        match self
            .pool
            .acquire_checked(&ticket.lease_request(self.class))?
        {
            Ok(lease) => {
                self.lease_ages.leased(lease.cell(), now);
                Ok(lease)
            }
            Err(lease) => {
                self.lose_cell(lease, Reason::PoolLeaseMismatch.as_str(), after);
                Err(Error::new(Code::Internal, Reason::PoolLeaseMismatch))
            }
        }
    }

    /// [`ClassEngine::poll`](crate::engine::ClassEngine::poll): the owner reads its fate, and while
    /// it is pending registers its waker and helps (SPEC F18).
    pub(super) fn poll_entry(&self, handle: u64, cx: &mut Context<'_>) -> Polled {
        let Some(index) = self.held(handle) else {
            return Polled::Ended(Ended::Failed(Error::new(
                Code::Internal,
                Reason::StaleHandle,
            )));
        };
        let s = self.slot(index);
        // Acquire: pairs with the Release of the fate's writer (lease or error visible).
        let mut fate = s.fate.load(Ordering::Acquire);
        if fate == PENDING {
            crate::sync::register_waker(&s.waker, cx.waker());
            // Relaxed: only the owner touches it.
            let mut h = s.helper.load(Ordering::Relaxed);
            if h == NO_HELPER {
                h = match self.pending.claim() {
                    Some(i) => i as u32,
                    None => {
                        // Every waiter slot is claimed: a hand-back wakes this entry through
                        // its own waker, registered above (SPEC F25: the slots are a fast path,
                        // never the limit). The help below re-checks after the mark.
                        self.unslotted.mark(index);
                        UNSLOTTED
                    }
                };
                s.helper.store(h, Ordering::Relaxed);
            }
            if h != UNSLOTTED {
                self.pending.register(h as usize, cx);
            }
            // Cooperative progress (F18): a handed-back turn, a due sweep.
            self.help();
            // Acquire: as above.
            fate = s.fate.load(Ordering::Acquire);
            if fate == PENDING {
                return Polled::Pending;
            }
        }
        let out = match fate {
            F_GRANTED => {
                // SAFETY: the fate's Acquire load saw GRANTED: the lease is the owner's.
                let (lease, waited) =
                    unsafe { (s.lease.with_mut(|l| (*l).take()), s.waited.with(|w| *w)) };
                match lease {
                    Some(l) => Polled::Granted(l, waited),
                    None => Polled::Ended(Ended::Failed(Error::new(
                        Code::Internal,
                        Reason::LeaseMissing,
                    ))),
                }
            }
            F_CANCELLED => Polled::Ended(Ended::Cancelled),
            F_EXPIRED => Polled::Ended(Ended::Expired),
            F_SHUTDOWN => Polled::Ended(Ended::Shutdown),
            F_QUARANTINED => Polled::Ended(Ended::Quarantined),
            _ => {
                // SAFETY: written before the FAILED fate's Release store; no other writer.
                let e = s.error.with_mut(|x| unsafe { (*x).take() });
                Polled::Ended(Ended::Failed(
                    e.unwrap_or(Error::new(Code::Internal, Reason::Failed)),
                ))
            }
        };
        self.stop_waiting(index);
        self.core.unref(index);
        out
    }

    /// [`ClassEngine::withdraw_refunding`](crate::engine::ClassEngine::withdraw_refunding): the
    /// owner gives up its entry; a lease already delivered is returned to it.
    pub(super) fn withdraw(
        &self,
        handle: u64,
        why: Ended,
        permit: &mut Option<ExecutionPermit>,
    ) -> Option<Lease> {
        let index = self.held(handle)?;
        let s = self.slot(index);
        let now = self.clock.now();
        let (state, fate) = match why {
            Ended::Cancelled => (CANCELLED, F_CANCELLED),
            Ended::Expired => (EXPIRED, F_EXPIRED),
            Ended::Quarantined => (CLOSED, F_QUARANTINED),
            _ => (CLOSED, F_SHUTDOWN),
        };
        let mut after = After::new();
        let ended = self
            .core
            .end(index, state, now, &mut |i| self.granted(i, now, &mut after));
        let lease = if ended {
            // Ended while queued: the quota goes back before the count (a drain that sees the
            // queue empty sees it refunded).
            drop(permit.take());
            self.book_end(index, fate, &mut after);
            None
        } else {
            // AcqRel: Acquire pairs with the granter's Release CAS (the lease); Release, on
            // success, tells the granter to return the lease.
            match s
                .fate
                .compare_exchange(PENDING, F_ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => None,
                // SAFETY: GRANTED seen with Acquire: the lease is the owner's.
                Err(F_GRANTED) => s.lease.with_mut(|l| unsafe { (*l).take() }),
                Err(_) => None,
            }
        };
        drop(crate::sync::take_waker(&s.waker));
        self.stop_waiting(index);
        self.finish(&mut after, now);
        self.core.unref(index);
        lease
    }

    /// [`ClassEngine::cancel`](crate::engine::ClassEngine::cancel): ends the entry if still queued.
    pub(super) fn cancel_entry(&self, handle: u64) -> Result<(), Error> {
        let now = self.clock.now();
        if self.end_handle(handle, CANCELLED, F_CANCELLED, now) {
            Ok(())
        } else {
            Err(Error::new(Code::NotFound, Reason::UnknownRequest))
        }
    }

    /// [`ClassEngine::change`](crate::engine::ClassEngine::change): changes the entry in place
    /// if it is still queued (SPEC F36). A deadline is never set later than the request's own
    /// (the permit's); `Some(None)` restores that one.
    pub(super) fn change_entry(
        &self,
        handle: u64,
        priority: Option<u8>,
        deadline: Option<Option<u64>>,
    ) -> Result<(), Error> {
        // A handle whose slot moved on names a request that ended: too late as well (the
        // engines free ended slots at different moments, so the answer must not depend on it).
        let Some(index) = self.core.try_ref(handle) else {
            return Err(Error::new(Code::NotFound, Reason::TooLate));
        };
        let own = self.ticket(index).deadline;
        let deadline = deadline.map(|d| d.map_or(own, |d| d.min(own)));
        let now = self.clock.now();
        let mut after = After::new();
        let changed = self
            .core
            .change(index, Wanted { priority, deadline }, now, &mut |i| {
                self.granted(i, now, &mut after)
            });
        self.core.unref(index);
        self.finish(&mut after, now);
        changed.map_err(|TooLate| Error::new(Code::NotFound, Reason::TooLate))?;
        if let Some(d) = deadline {
            self.note_deadline(d);
            if d <= now {
                // Tightened into the past: the request expires now (SPEC F46), not when the
                // sweep's cycle reaches its slot. Refused only if it left the queue meanwhile,
                // which ended it some other way.
                self.end_handle(handle, EXPIRED, F_EXPIRED, now);
            }
        }
        Ok(())
    }

    /// The owner of slot `index` stops waiting: gives its waiter slot up.
    fn stop_waiting(&self, index: u32) {
        let s = self.slot(index);
        // Relaxed: only the owner touches it.
        let h = s.helper.swap(NO_HELPER, Ordering::Relaxed);
        if h == UNSLOTTED {
            self.unslotted.unmark(index);
        } else if h != NO_HELPER {
            self.pending.forget(h as usize);
        }
    }
}
