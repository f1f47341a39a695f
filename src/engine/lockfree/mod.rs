//! The lock-free engine: one class, no mutex, no thread ever waits for another.
//!
//! # Shape
//!
//! - **`ctl`** ([`ctl`]), one packed word per class. Every decision that couples "is a cell
//!   free?" with "is work queued?" is a single RMW on it, so a releaser and a producer cannot
//!   both miss each other (the Dekker race of two separate counters).
//! - **Entry slots** ([`entry`]): a fixed [`Arena`] of request entries. Each slot's state byte
//!   carries the stage and two reference bits beside the arena's generation; every transition is
//!   a CAS that includes the generation, so a stale handle is refused (SPEC F30) and cancel is
//!   one CAS (SPEC F31).
//! - **Inbox**: producers publish new entries on an intrusive multi-producer [`Inbox`]; they never
//!   touch the policy.
//! - **Dispatch token** ([`dispatch`], a bit of `ctl`): whoever takes it owns the sequential
//!   [`Policy`] for one bounded pass: drain the inbox, expire, grant up to the free cells. A
//!   thread that finds the token taken sets `DIRTY` and leaves — the holder re-runs before
//!   letting go. No thread ever spins or parks on the token, so the hot paths take no lock and
//!   never wait.
//! - **Cancel** (and a dropped future) is one CAS on the entry's state word (SPEC F31). If the
//!   token happens to be free, the canceller also takes the entry out of the policy at once
//!   (`unqueue_now`, try-only like every use of the token); otherwise the entry stays behind as a
//!   tombstone that the next pass drops.
//! - **Pull mode** ([`exec`]): granted entries go onto a ready ring that executors pop.
//!
//! A producer counts itself in `QUEUED` *before* its entry becomes reachable, and whoever moves an
//! entry out of the queued stage (granter, canceller, expirer, closer) uncounts it exactly once,
//! so `QUEUED` never goes below the number of reachable queued entries and never underflows.
//!
//! # Locks
//!
//! None on any path a grant, a release or a cancel takes. The only exclusive section is the
//! dispatch token, which is try-only. The one mutex is the bin of payloads that shutdown ended
//! before delivery ([`Undelivered`]), taken only on that end-of-life path.

mod ctl;
mod dispatch;
mod entry;
pub(crate) mod exec;
mod fast;
mod release;

#[cfg(all(test, loom))]
mod loom_drain;
#[cfg(all(test, loom))]
mod loom_lockfree;
#[cfg(all(test, not(loom)))]
mod tests;

pub use ctl::MAX_FIELD;
pub use dispatch::PASS_BUDGET;

use super::{
    ClassEngine, ClassSetup, Ended, Enqueued, LeaseAges, Polled, Pulled, Ticket, Undelivered,
};
use crate::admission::{ExecutionPermit, Ledger, Permit};
use crate::cancel::CancellationToken;
use crate::clock::Clock;
use crate::policy::Policy;
use crate::pool::{ClassPool, Lease};
use crate::raw::arena::{Arena, Key};
use crate::raw::idset::IdSet;
use crate::raw::inbox::Inbox;
use crate::raw::ring::Ring;
use crate::stats::{saturating_add, ClassStats};
use crate::sync::{AtomicU32, AtomicU64, Ordering, UnsafeCell};
use crate::{CellId, ClassId, Code, Error, Reason, TenantId};
use core::convert::Infallible;
use core::task::{Context, Poll};
use ctl::{Ctl, CtlCell};
use dispatch::After;
use entry::{Entry, Stage, State, CREF, HREF, QREF};
use exec::{ExecWaiters, Overflow};
use std::sync::Arc;

/// The lock-free engine for one class.
pub struct LockFreeClass<T> {
    ctl: CtlCell,
    class: ClassId,
    /// Queued entries refund their queue slot here when they leave the queue (SPEC F45).
    ledger: Ledger,
    /// The scheduler's live request ids (SPEC F34).
    ids: Arc<IdSet>,
    queue_capacity: u32,
    arena: Arena<Entry<T>>,
    inbox: Inbox,
    /// Owned by the holder of the dispatch token.
    policy: UnsafeCell<Policy>,
    /// Owned by the holder of the dispatch token, like `policy`.
    overflow: UnsafeCell<Overflow>,
    /// Entries in `overflow`, for executors deciding whether to force a pass.
    overflowed: AtomicU32,
    pool: ClassPool,
    clock: Arc<dyn Clock>,
    /// Cells not quarantined.
    usable: AtomicU32,
    /// Payloads of pull-mode requests that shutdown (or the death of the class) ended before
    /// delivery, kept for the host (`take_undelivered`). Sized at build for every slot, so a
    /// push never allocates; locked only on that end-of-life path, never on a grant.
    undelivered: Undelivered<T>,
    /// Granted pull-mode entries waiting for an executor.
    ready: Ring<u64>,
    exec: ExecWaiters,
    stats: ClassStats,
    /// The clock as last read by a pass; lease ages on the fast path use it.
    recent_now: AtomicU64,
    queued_tenants: AtomicU32,
    lease_ages: LeaseAges,
    /// How often a kick found the token held and left `DIRTY` (the models prove that path runs).
    #[cfg(all(test, loom))]
    dirty_marks: crate::sync::AtomicUsize,
    /// How often a grant lost its CAS to a canceller and gave the cell back (models only).
    #[cfg(all(test, loom))]
    lost_grants: crate::sync::AtomicUsize,
    /// How many ended entries `unqueue_now` took out of the policy itself, directly or through
    /// its inbox drain (models only).
    #[cfg(all(test, loom))]
    unqueued_now: crate::sync::AtomicUsize,
    /// Passes run with a credit a releaser kept (`pass_with_credit`), and how many of them gave
    /// it back unused (models only).
    #[cfg(all(test, loom))]
    credit_passes: [crate::sync::AtomicUsize; 2],
}

// SAFETY: `policy` and `overflow` are only accessed by the holder of the dispatch token (TOKEN
// bit of `ctl`, taken with Acquire and released with Release), so accesses never overlap and each
// holder sees the previous holder's writes. Entries are `Sync` for `T: Send`.
unsafe impl<T: Send> Sync for LockFreeClass<T> {}
// SAFETY: as above; all fields are owned.
unsafe impl<T: Send> Send for LockFreeClass<T> {}

impl<T: Send + 'static> LockFreeClass<T> {
    #[inline]
    fn entry(&self, key: Key) -> &Entry<T> {
        self.arena.get(key.index)
    }

    /// The state of the slot `key` names, if `key` is still current.
    #[inline]
    fn state(&self, key: Key) -> Option<State> {
        self.arena.state(key).map(State)
    }

    /// Parses and range-checks a host-visible handle.
    fn key(&self, raw: u64) -> Option<Key> {
        let key = Key::from_u64(raw);
        ((key.index as usize) < self.arena.capacity()).then_some(key)
    }

    /// Leaves the owner's waker in the slot of the queued entry `key` and sets `WAITING`, so
    /// that whoever moves the entry out of `QUEUED` takes it and wakes it (see [`entry`]): one
    /// CAS, or two when a waker left by an earlier poll must be replaced. `Err` with the state
    /// found when the entry has moved on (its mover took any waker we had left). The caller
    /// holds `HREF`.
    fn wait_for_move(&self, key: Key, cx: &Context<'_>) -> Result<(), State> {
        let e = self.entry(key);
        let refused = |r: crate::raw::arena::Refused| match r {
            crate::raw::arena::Refused::Rejected(s) => State(s),
            crate::raw::arena::Refused::Stale => State(Stage::Failed as u8),
        };
        let s = self.state(key).unwrap_or(State(Stage::Failed as u8));
        if !s.is_queued() {
            return Err(s);
        }
        // Queued without WAITING (as read here; only we set it, so a later mover finds it clear
        // too and leaves the cell alone), or with it: then ours, from an earlier poll.
        if s.waiting() {
            // An earlier poll's waker: take the cell back (clearing WAITING) to replace it.
            self.arena
                .update(key, |s| State(s).unwait())
                .map_err(refused)?;
            // SAFETY: WAITING is clear and the entry queued: the cell is ours (see `Entry`).
            drop(e.waker.with_mut(|w| unsafe { (*w).take() }));
        }
        // SAFETY: WAITING is clear (nobody else sets it) and was clear in the last queued state
        // we read, so no mover takes the cell: it is the owner's.
        e.waker
            .with_mut(|w| unsafe { *w = Some(cx.waker().clone()) });
        // AcqRel (inside `update`): Release publishes the waker to the mover, whose CAS from
        // this state is Acquire.
        self.arena
            .update(key, |s| State(s).wait())
            .map(drop)
            .map_err(|r| {
                // Moved on before we set WAITING: nobody took the waker; it is still ours.
                // SAFETY: WAITING was never set for this write, so the cell is ours.
                drop(e.waker.with_mut(|w| unsafe { (*w).take() }));
                refused(r)
            })
    }

    /// The owner's waker, for whoever just moved `key` out of `QUEUED` from state `old`: present
    /// only if `old` had `WAITING`.
    #[inline]
    fn take_waker(&self, key: Key, old: State) -> Option<core::task::Waker> {
        if !old.waiting() {
            return None;
        }
        // SAFETY: our CAS moved the entry out of QUEUED|WAITING, which makes the waker ours
        // (see `Entry`); its Acquire saw the owner's write.
        self.entry(key).waker.with_mut(|w| unsafe { (*w).take() })
    }

    /// Clears reference bit `bit`; frees the slot if it was the last one.
    fn drop_ref(&self, key: Key, bit: u8) {
        // One CAS: clearing the last reference bit frees the slot in the same RMW.
        let dropped = self.arena.drop_bits(key, bit, QREF | HREF | CREF);
        debug_assert!(dropped.is_ok(), "reference dropped on a stale key");
    }

    /// Whether `key` is a pull entry whose token has been cancelled. Callable in any stage.
    fn pull_token_cancelled(&self, key: Key) -> bool {
        // SAFETY: `token` is read-only from publication until the slot's next owner writes it,
        // and the caller holds a reference bit (QREF or HREF), so the slot is not reused.
        self.entry(key)
            .token
            .with(|t| unsafe { (*t).as_ref().is_some_and(CancellationToken::is_cancelled) })
    }

    /// Takes a cell from the pool and checks it (SPEC F08). On success the cell's lease age
    /// starts at `now`.
    fn acquire(&self, ticket: &Ticket, now: u64) -> Result<Lease, Error> {
        let req = ticket.lease_request(self.class);
        match self.pool.acquire_checked(&req)? {
            Ok(lease) => {
                self.lease_ages.leased(lease.cell(), now);
                Ok(lease)
            }
            Err(lease) => {
                // Never marked reusable: the cell leaves service.
                self.quarantine(lease, Reason::PoolLeaseMismatch.as_str());
                Err(Error::new(Code::Internal, Reason::PoolLeaseMismatch))
            }
        }
    }

    /// Books an entry's leaving the queue, by whoever moved it out of `QUEUED` (exactly once):
    /// refunds its queue slot (SPEC F45: at grant only the queue slot goes back), then uncounts
    /// it in `ctl` — in that order, so a drain that sees the queue empty sees the slot refunded.
    /// Returns `ctl` as it was before the uncount. `tenant` is the entry's, read by the caller
    /// while it still held a reference to the slot: once the entry has left the queue its owner
    /// may free the slot and a new request reuse it.
    fn left_queue(&self, tenant: u32) -> Ctl {
        self.ledger.refund_queue_slot(TenantId(tenant), self.class);
        // Release: pairs with the Acquire loads of `ctl` (the count is only arithmetic, but
        // keeping every `ctl` RMW at least Release keeps reasoning uniform).
        self.ctl.count_out(Ordering::Release)
    }

    /// The tenant of the entry `key` names. The caller holds a reference bit of the slot.
    fn tenant_of(&self, key: Key) -> u32 {
        // SAFETY: `ticket` is read-only from publication until the slot is freed, and the
        // caller's reference bit keeps it from being freed.
        self.entry(key).ticket.with(|t| unsafe { (*t).tenant })
    }

    fn ctl_error(cur: Ctl) -> Error {
        if cur.shut() || cur.draining() {
            Error::new(Code::Unavailable, Reason::Shutdown)
        } else {
            Error::new(Code::Unavailable, Reason::AllCellsQuarantined)
        }
    }

    /// Allocates a slot, compacting tombstones once if the arena is full.
    fn alloc(&self, state: u8) -> Option<Key> {
        if let Some(k) = self.arena.alloc(state) {
            return Some(k);
        }
        self.kick_with(true);
        self.arena.alloc(state)
    }

    /// Counts a request refused at enqueue in the snapshot (SPEC F60).
    fn refused(&self, e: Error) -> Error {
        self.stats
            .count_refused_at_enqueue(e.code() == Code::DeadlineExceeded);
        e
    }
}

#[allow(private_interfaces)]
impl<T: Send + 'static> ClassEngine<T> for LockFreeClass<T> {
    fn new(s: ClassSetup) -> Result<Self, Error> {
        let (policy, slots) = s.policy()?;
        Ok(Self {
            ctl: CtlCell::new(Ctl::new(s.cells)),
            class: s.class,
            ledger: s.ledger,
            ids: s.ids,
            queue_capacity: s.queue_capacity,
            arena: Arena::new(slots)?,
            inbox: Inbox::new(slots)?,
            policy: UnsafeCell::new(policy),
            overflow: UnsafeCell::new(Overflow::new(slots)),
            overflowed: AtomicU32::new(0),
            usable: AtomicU32::new(s.cells),
            undelivered: Undelivered::new(slots),
            ready: Ring::new((s.cells as usize).max(2)),
            exec: ExecWaiters::new(ExecWaiters::slots_for(s.cells)),
            stats: ClassStats::new(),
            recent_now: AtomicU64::new(s.clock.now()),
            queued_tenants: AtomicU32::new(0),
            lease_ages: LeaseAges::new(s.cells),
            #[cfg(all(test, loom))]
            dirty_marks: crate::sync::AtomicUsize::new(0),
            #[cfg(all(test, loom))]
            lost_grants: crate::sync::AtomicUsize::new(0),
            #[cfg(all(test, loom))]
            unqueued_now: crate::sync::AtomicUsize::new(0),
            #[cfg(all(test, loom))]
            credit_passes: [
                crate::sync::AtomicUsize::new(0),
                crate::sync::AtomicUsize::new(0),
            ],
            pool: s.pool,
            clock: s.clock,
        })
    }

    fn enqueue(
        &self,
        ticket: Ticket,
        pull: Option<(Permit, T)>,
        token: Option<&CancellationToken>,
    ) -> Result<Enqueued, (Error, Option<(Permit, T)>)> {
        if self.queue_capacity == 0 {
            let e = Error::new(Code::ResourceExhausted, Reason::QueueFull);
            return Err((self.refused(e), pull));
        }
        // Pull-mode requests always go through a slot (the executor takes them from there).
        match self.count_in(pull.is_none()) {
            Err(e) => return Err((self.refused(e), pull)),
            Ok(true) => {
                return self
                    .finish_fast(&ticket)
                    .map(Enqueued::Granted)
                    .map_err(|e| (e, pull))
            }
            Ok(false) => {}
        }
        let Some(key) = self.alloc(State::new_queued(pull.is_some())) else {
            // Release: see `end_queued`.
            let old = self.ctl.count_out(Ordering::Release);
            self.wake_drainers(old);
            let e = Error::new(Code::ResourceExhausted, Reason::QueueFull);
            return Err((self.refused(e), pull));
        };
        let e = self.entry(key);
        let now = self.clock.now();
        let token = if pull.is_some() { token.cloned() } else { None };
        // From here on the entry owns the queue slot's refund (`left_queue`).
        let pull = pull.map(|(permit, payload)| (permit.detach_queue_slot(), payload));
        // SAFETY: the slot was just allocated to us and is not yet reachable by anyone else.
        unsafe {
            e.ticket.with_mut(|t| *t = ticket);
            e.enqueued_at.with_mut(|a| *a = now);
            e.content.with_mut(|c| *c = pull);
            e.token.with_mut(|t| *t = token);
        }
        self.inbox.push(key.index);
        self.kick();
        Ok(Enqueued::Queued(key.to_u64()))
    }

    fn try_grant_now(&self, ticket: &Ticket) -> Result<Option<Lease>, Error> {
        if self.queue_capacity == 0 {
            return Err(Error::new(Code::ResourceExhausted, Reason::QueueFull));
        }
        self.try_fast(ticket)
    }

    fn poll(&self, raw: u64, cx: &mut Context<'_>) -> Polled {
        let stale = || {
            Polled::Ended(Ended::Failed(Error::new(
                Code::Internal,
                Reason::StaleHandle,
            )))
        };
        let Some(key) = self.key(raw) else {
            return stale();
        };
        let e = self.entry(key);
        // A handle whose owner reference is gone was consumed (its grant or end was taken),
        // even if another reference still keeps the slot for a moment.
        let Some(mut s) = self.state(key).filter(|s| s.owner_holds()) else {
            return stale();
        };
        if s.is_queued() {
            match self.wait_for_move(key, cx) {
                Ok(()) => {
                    // Cooperative progress (F18): run a pass if one is due and nobody runs one.
                    // A load, not the RMW of `kick`: that RMW orders a caller's fresh
                    // publication against releasers, and a poller has published nothing a pass
                    // must see (a grant racing the registration finds WAITING, or made our
                    // WAITING CAS fail). Saves one RMW on `ctl` per pending poll.
                    // Relaxed: a hint; `kick` re-reads `ctl` with an RMW before acting on it.
                    let cur = self.ctl.load(Ordering::Relaxed);
                    if !cur.token() && cur.wants_pass() {
                        self.kick();
                    }
                    // A pass that moved the entry took the waker (and wakes it: a spurious wake
                    // of this task, harmless).
                    s = self.state(key).unwrap_or(State(Stage::Failed as u8));
                    if s.is_queued() {
                        return Polled::Pending;
                    }
                }
                Err(moved) => s = moved,
            }
        }
        let out = match s.stage() {
            Stage::Granted => {
                // SAFETY: we hold HREF and observed GRANTED with Acquire (inside `state`), so the
                // dispatcher's writes are visible and nobody else touches the lease now.
                let (lease, waited) = e
                    .lease
                    .with_mut(|l| unsafe { ((*l).take(), e.waited.with(|w| *w)) });
                match lease {
                    Some(l) => Polled::Granted(l, waited),
                    None => Polled::Ended(Ended::Failed(Error::new(
                        Code::Internal,
                        Reason::LeaseMissing,
                    ))),
                }
            }
            Stage::Cancelled => Polled::Ended(Ended::Cancelled),
            Stage::Expired => Polled::Ended(Ended::Expired),
            Stage::Closed => Polled::Ended(Ended::Shutdown),
            Stage::Dead => Polled::Ended(Ended::Quarantined),
            Stage::Failed | Stage::Queued => {
                // SAFETY: written before the FAILED CAS, read after observing it; no other
                // writer.
                let error = e.error.with(|x| unsafe { *x });
                Polled::Ended(Ended::Failed(dispatch::failure(error)))
            }
        };
        self.drop_ref(key, HREF);
        out
    }

    fn withdraw_refunding(
        &self,
        raw: u64,
        why: Ended,
        permit: &mut Option<ExecutionPermit>,
    ) -> Option<Lease> {
        let key = self.key(raw)?;
        let res = self
            .arena
            .update(key, |s| State(s).end_by_owner(Stage::ended(why)));
        let lease = match res {
            Ok((old, _)) => {
                // Our own waker, if we left one: we are its mover.
                drop(self.take_waker(key, State(old)));
                // Ended while queued: no cell is involved, so the quota goes back now, before
                // the count below (a drain that sees the queue empty sees it refunded).
                drop(permit.take());
                // The owner's HREF holds the slot until the end of this call.
                let tenant = self.tenant_of(key);
                let old = self.left_queue(tenant);
                self.wake_drainers(old);
                saturating_add(
                    match why {
                        Ended::Expired => &self.stats.expirations,
                        Ended::Cancelled => &self.stats.cancellations,
                        _ => &self.stats.rejections,
                    },
                    1,
                );
                self.unqueue_now(key);
                None
            }
            Err(_) if self.state(key).is_some_and(|s| s.stage() == Stage::Granted) => {
                self.entry(key).lease.with_mut(|l| {
                    // SAFETY: GRANTED and we hold HREF: the lease is ours (see `poll`).
                    unsafe { (*l).take() }
                })
            }
            Err(_) => None,
        };
        // A waker we left while queued went to whoever moved the entry on (or back to us
        // above): none stays in the slot for its next owner.
        self.drop_ref(key, HREF);
        lease
    }

    fn cancel(&self, raw: u64) -> Result<(), Error> {
        let not_found = Error::new(Code::NotFound, Reason::UnknownRequest);
        let key = self.key(raw).ok_or(not_found)?;
        let (old, _) = self
            .arena
            .update(key, |s| State(s).cancel_by_handle())
            .map_err(|_| not_found)?;
        // `CREF` (taken by the CAS) keeps the slot ours until the end of this call: the owner and
        // the policy may drop their references as soon as they see the entry cancelled.
        let tenant = self.tenant_of(key);
        // Take the content (pull mode: refund the permit, drop the payload) before the count
        // below, so a drain that sees the queue empty sees the quota refunded.
        let mut after = After::new();
        self.collect_ended(key, Stage::Cancelled, State(old), &mut after);
        after.contents.clear();
        let old = self.left_queue(tenant);
        saturating_add(&self.stats.cancellations, 1);
        for w in after.wakes.drain(..) {
            w.wake();
        }
        drop(after);
        self.wake_drainers(old);
        self.unqueue_now(key);
        self.drop_ref(key, CREF);
        Ok(())
    }

    fn release_then(&self, lease: Lease, then: impl FnOnce()) {
        self.lease_ages.returned(lease.cell());
        // Relaxed: a hint; the RMWs decide.
        if Self::may_hand_credit(self.ctl.load(Ordering::Relaxed)) {
            // Work queued and the token free: the cell (or its credit) goes to a pass run here.
            return self.release_to_pass(lease, then);
        }
        self.pool.release(lease);
        then();
        self.give_credit_back();
    }

    fn quarantine_then(&self, lease: Lease, reason: &'static str, then: impl FnOnce()) {
        self.lease_ages.returned(lease.cell());
        self.pool.quarantine(lease, reason);
        then();
        // AcqRel: `usable` decides when DEAD is set (DEAD itself is set with an RMW on ctl); a
        // drainer reads it (Acquire in `drained`) to tell whether every usable cell is back, and
        // the Release here orders this decrement before the `wake_all` below.
        if self.usable.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.settle_death();
        }
        // Drainers waiting for the cell must look again (a rare path: every quarantine wakes
        // them).
        self.exec.wake_all();
    }

    fn try_next(&self) -> Option<Pulled<T>> {
        self.next_now()
    }

    fn poll_next(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<Option<Pulled<T>>> {
        self.poll_next_job(cx, slot)
    }

    fn forget_waiter(&self, slot: usize) {
        self.exec.forget(slot);
    }

    fn count_refused(&self, expired: bool) {
        self.stats.count_refused_at_enqueue(expired);
    }

    fn count_refused_after_grant(&self) {
        self.stats.count_refused_at_acceptance();
    }

    fn shutdown(&self) {
        // Release: pairs with the Acquire loads of `ctl` in passes and producers.
        self.ctl.set_shut(Ordering::Release);
        self.kick();
        self.exec.wake_all();
    }

    fn close(&self) {
        // Release: pairs with the Acquire loads of `ctl` in producers (`count_in`, `try_fast`).
        self.ctl.set_drain(Ordering::Release);
        // What is queued keeps being granted; make sure a pass runs if one is due.
        self.kick();
        self.exec.wake_all();
    }

    fn poll_drained(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<()> {
        if self.drained() {
            return Poll::Ready(());
        }
        self.exec.register_in(slot, cx);
        // No pass is run here: whoever makes one due runs it (a release, an enqueue before the
        // close, an owner's poll), and a drainer that ran passes could wake itself through them
        // without end while a canceller between its CAS and its count holds `wants_pass` up.
        // Re-check after registering: pairs with the RMW-then-`wake_all` of whoever made the
        // last change (`wake_drainers`, `quarantine`, a pass ending in `with_token`).
        if self.drained() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    fn queue_depth(&self) -> u32 {
        // Relaxed: an observation.
        self.ctl.load(Ordering::Relaxed).queued() as u32
    }

    fn available_cells(&self) -> u32 {
        // Relaxed: an observation (credits reserved by a running pass count as taken).
        self.ctl.load(Ordering::Relaxed).free() as u32
    }

    fn pool(&self) -> &ClassPool {
        &self.pool
    }

    fn restore_cell(&self, cell: CellId) -> Result<(), Error> {
        // Count the cell as usable first: holding this increment keeps a concurrent quarantine
        // of the other cells from killing the class under us. From zero, it reopens a class
        // that died (SPEC F22).
        // AcqRel: orders against the `fetch_sub` in `quarantine`.
        let before = self.usable.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = self.pool.restore(cell) {
            // AcqRel: as in `quarantine`, whose role this undo takes if it is the last one.
            if self.usable.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.settle_death();
            }
            return Err(e);
        }
        if before == 0 {
            self.settle_death();
        }
        // The cell's credit, as `release` gives it (the pool holds the cell again).
        // AcqRel: as in `release`.
        let old = self.ctl.give_credit(Ordering::AcqRel);
        if old.queued() > 0 {
            self.kick_from(false, Some(old.give_credit()));
        }
        self.exec.wake_all();
        Ok(())
    }

    fn undelivered(&self) -> &Undelivered<T> {
        &self.undelivered
    }

    fn stats(&self) -> &ClassStats {
        &self.stats
    }

    fn samples(&self) -> crate::stats::Samples {
        self.sample()
    }

    fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
}

impl<T> Drop for LockFreeClass<T> {
    fn drop(&mut self) {
        // Entries still holding content (pull mode, never taken) drop it here with the arena;
        // leases of granted-but-untaken pull entries go back to the pool.
        let mut untaken = Vec::new();
        self.overflow.with_mut(|o| {
            // SAFETY: `&mut self`: no other user exists.
            let o = unsafe { &mut *o };
            while let Some(k) = o.front() {
                o.pop();
                untaken.push(k);
            }
        });
        while let Some(raw) = self.ready.pop().or_else(|| untaken.pop()) {
            let key = Key::from_u64(raw);
            let lease = self.arena.get(key.index).lease.with_mut(|l| {
                // SAFETY: `&mut self`: no other user exists.
                unsafe { (*l).take() }
            });
            if let Some(l) = lease {
                self.pool.release(l);
            }
        }
    }
}

impl<T: Send + 'static> LockFreeClass<T> {
    /// Makes `DEAD` say whether every cell is quarantined (SPEC F22), after `usable` crossed
    /// zero. The decrement to zero and the increment from it (a restore) each call this, and
    /// each flip is followed by a fresh read: whoever flips last reads the count after its
    /// flip and flips again if the count moved meanwhile, so once the calls return, `DEAD`
    /// matches `usable`. A class that dies fails its queued and new requests; one that a
    /// restore reopens admits again.
    fn settle_death(&self) {
        loop {
            // Acquire: pairs with the AcqRel RMWs on `usable`.
            let dead = self.usable.load(Ordering::Acquire) == 0;
            if dead {
                // Release: pairs with the Acquire loads of `ctl` in passes and producers.
                if !self.ctl.set_dead(Ordering::AcqRel).dead() {
                    self.kick();
                }
            } else {
                // AcqRel: as above; producers that read the cleared flag admit again.
                if self.ctl.clear_dead(Ordering::AcqRel).dead() {
                    self.kick();
                }
            }
            self.exec.wake_all();
            // Acquire: as above.
            if (self.usable.load(Ordering::Acquire) == 0) == dead {
                return;
            }
        }
    }
}
