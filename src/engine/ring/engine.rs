//! The tenant-ring engine as a [`ClassEngine`] (docs/ring-engine.md): `grant::Core`'s turns
//! grant, and this module wraps each grant in what the scheduler needs — leases from the pool,
//! one waker per entry, pull mode's ready queue, shutdown, drain, quarantine and the deadline
//! sweep. There is no class-wide token on the grant path.
//!
//! # Words
//!
//! * **`life`** (one per class): the live queued count, the leases out (granted and not yet
//!   back) and the flags `SHUT`, `DRAIN`, `DEAD`. Admission (the capacity check) and the drain
//!   check read it; it holds no cell credit (those are the turn protocol's `ctl`).
//! * **Entry slots** are the core's; each carries a reference word (the generation and the
//!   holders: the entry's own, handed to the grant's taker, and the owner's — the future, or for
//!   pull mode the content). A handle is the generation and the index, so a stale handle is
//!   refused (SPEC F30). Beside the core's entry word (`QUEUED → GRANTED` or an end), each slot
//!   has a **fate** word: what its owner will see (`PENDING`, granted with the lease stored, or
//!   an end). The granter stores the lease, then CASes `PENDING → GRANTED` and wakes the owner's
//!   waker; an owner that gives up CASes `PENDING → ABANDONED`, and a granter that finds that
//!   returns the lease itself.
//!
//! # Rare work (SPEC F24)
//!
//! Deadlines: producers `fetch_min` an entry's deadline into `earliest`; a call that reads the
//! clock past it takes the sweep token (try-only, never on the grant path) and ends the expired
//! entries (`ring.sweep_held` is the pause point inside). Shutdown and the death of the class
//! end every queued entry with the same scan.

use arrayvec::ArrayVec;
use core::task::{Context, Poll, Waker};
use std::sync::Arc;

use super::grant::{Core, Full, CLOSED, EXPIRED, QUEUED};
use super::tenant::Meta;
use crate::admission::{ExecutionPermit, Ledger, Permit};
use crate::cancel::CancellationToken;
use crate::clock::Clock;
use crate::engine::lockfree::exec::ExecWaiters;
use crate::engine::Undelivered;
use crate::engine::{ClassEngine, ClassSetup, Ended, Enqueued, Polled, Pulled, Ticket};
use crate::pool::{ClassPool, Lease};
use crate::raw::idset::IdSet;
use crate::raw::pause;
use crate::raw::scq::Scq;
use crate::stats::{saturating_add, ClassStats};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicWaker, Ordering, UnsafeCell};
use crate::{CellId, ClassId, Code, Error, Reason, TenantId};

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

const _: () = assert!(crate::policy::MAX_QUEUE_CAPACITY as u64 <= QUEUED_MASK);
const _: () = assert!(crate::policy::MAX_CELLS as u64 <= QUEUED_MASK);

/// Fate: nothing decided yet.
const PENDING: u32 = 0;
/// Fate: granted; the lease is in the slot.
const F_GRANTED: u32 = 1;
/// Fate: the owner gave up before the grant was delivered; the granter returns the lease.
const F_ABANDONED: u32 = 2;
const F_CANCELLED: u32 = 3;
const F_EXPIRED: u32 = 4;
const F_SHUTDOWN: u32 = 5;
const F_QUARANTINED: u32 = 6;
/// Fate: failed; the error is in the slot.
const F_FAILED: u32 = 7;

/// Slots the deadline sweep looks at per call.
const SWEEP_CHUNK: u32 = 256;

/// A slot's `helper`: no waiter slot claimed.
const NO_HELPER: u32 = u32::MAX;

/// Per entry slot: what the core's slot index carries for the scheduler.
struct Slot<T> {
    fate: AtomicU32,
    waker: AtomicWaker,
    /// The waiter slot among `pending` its owner claimed while pending, or `NO_HELPER`;
    /// touched only by the owner.
    helper: AtomicU32,
    /// Written by the producer before the entry is queued; read-only while it is held.
    ticket: UnsafeCell<Ticket>,
    enqueued_at: UnsafeCell<u64>,
    pull: UnsafeCell<bool>,
    token: UnsafeCell<Option<CancellationToken>>,
    /// Pull mode: the permit and payload, owned by the entry until an executor (or the ender)
    /// takes them.
    content: UnsafeCell<Option<(ExecutionPermit, T)>>,
    /// Written by the granter before the fate's Release CAS; taken by the owner after it.
    lease: UnsafeCell<Option<Lease>>,
    waited: UnsafeCell<u64>,
    error: UnsafeCell<Option<Error>>,
}

impl<T> Slot<T> {
    fn new() -> Self {
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

/// Work a call collects while it runs a turn, done once the turn has ended.
struct After {
    wakes: ArrayVec<Waker, 64>,
    /// Cell credits to give back (a grant whose owner had left, a pool failure).
    credits: u32,
    /// Pull-mode grants were pushed to the ready queue: wake the executors.
    pulled: bool,
    /// The last usable cell was quarantined: end every queued request.
    died: bool,
    /// Leases counted out in `life` to uncount once the credits above are back (so a drain
    /// never sees every lease back before every credit is).
    outs: u32,
}

impl After {
    fn new() -> Self {
        After {
            wakes: ArrayVec::new(),
            credits: 0,
            pulled: false,
            died: false,
            outs: 0,
        }
    }

    fn wake(&mut self, w: Waker) {
        if let Err(e) = self.wakes.try_push(w) {
            e.element().wake();
        }
    }
}

/// The tenant-ring engine for one class. See the module docs.
pub struct RingClass<T> {
    core: Core,
    slots: Box<[Slot<T>]>,
    life: crossbeam_utils::CachePadded<AtomicU64>,
    class: ClassId,
    ledger: Ledger,
    ids: Arc<IdSet>,
    queue_capacity: u32,
    pool: ClassPool,
    clock: Arc<dyn Clock>,
    /// Cells not quarantined.
    usable: AtomicU32,
    undelivered: Undelivered<T>,
    /// Granted pull-mode entries waiting for an executor (each entry at most once).
    ready: Scq,
    exec: ExecWaiters,
    /// Pending future-mode requests' waiter slots (one claimed per pending owner, given up when
    /// it stops waiting), woken when a call hands a turn back (SPEC F25): any of them takes it.
    pending: ExecWaiters,
    stats: ClassStats,
    /// The sweep's trigger: at or below the earliest deadline of a queued entry (`u64::MAX`:
    /// none known). Stays passed while a sweep cycle is under way.
    earliest: AtomicU64,
    /// Deadlines queued since the current sweep cycle began (producers `fetch_min` them here and
    /// into `earliest`), folded into `earliest` at the cycle's end.
    fresh: AtomicU64,
    /// The next slot the sweep looks at, and the earliest deadline it kept this cycle (touched
    /// only under the sweep token).
    cursor: AtomicU32,
    cycle_min: AtomicU64,
    /// The sweep's try-token.
    sweeping: AtomicBool,
    lease_since: Box<[AtomicU64]>,
}

// SAFETY: the slots' cells are accessed under the ownership protocol of the module docs: the
// producer writes a slot before publishing it (the core's Release store and inbox push); the
// granter, the ender and the owner each read or take what the fate word or the core's entry
// CAS handed them (Acquire/Release pairs); `T` moves between threads only as `Send`.
unsafe impl<T: Send> Sync for RingClass<T> {}
// SAFETY: as above; all fields are owned.
unsafe impl<T: Send> Send for RingClass<T> {}

impl<T: Send + 'static> RingClass<T> {
    /// The scheduler's ledger (the models admit through it).
    #[cfg(all(test, loom))]
    pub(super) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    fn slot(&self, index: u32) -> &Slot<T> {
        &self.slots[index as usize]
    }

    /// The slot index of a handle its caller holds a reference through, if still current.
    fn held(&self, handle: u64) -> Option<u32> {
        self.core
            .is_current(handle)
            .then_some((handle & u64::from(u32::MAX)) as u32)
    }

    fn ticket(&self, index: u32) -> Ticket {
        // SAFETY: written before the entry was queued and read-only while the caller holds a
        // reference (the slot cannot be reused meanwhile).
        self.slot(index).ticket.with(|t| unsafe { *t })
    }

    fn is_pull(&self, index: u32) -> bool {
        // SAFETY: as `ticket`.
        self.slot(index).pull.with(|p| unsafe { *p })
    }

    fn life(&self) -> u64 {
        // Acquire: pairs with the Release RMWs on `life`.
        self.life.load(Ordering::Acquire)
    }

    fn stop_error(l: u64) -> Error {
        if l & (SHUT | DRAIN) != 0 {
            Error::new(Code::Unavailable, Reason::Shutdown)
        } else {
            Error::new(Code::Unavailable, Reason::AllCellsQuarantined)
        }
    }

    /// Applies `delta` (wrapping) to `life`; wakes drainers and executors if admissions have
    /// stopped (the change may be the last one a drain waits for). Returns the old value.
    fn life_add(&self, delta: u64) -> u64 {
        // AcqRel: Release publishes what the caller did before (a refund, a cell back in the
        // pool, a ready push) to a drainer's Acquire load; Acquire orders the flag read.
        let old = self.life.fetch_add(delta, Ordering::AcqRel);
        if old & STOPPED != 0 {
            self.exec.wake_all();
        }
        old
    }

    /// A lease for `ticket` from the pool, its age starting at `now`. A lease that does not
    /// match is quarantined (the credit is lost with the cell).
    fn acquire(&self, ticket: &Ticket, now: u64, after: &mut After) -> Result<Lease, Error> {
        match self
            .pool
            .acquire_checked(&ticket.lease_request(self.class))?
        {
            Ok(lease) => {
                if let Some(s) = self.lease_since.get(lease.cell().0 as usize) {
                    // Relaxed: an observation for snapshots.
                    s.store(now, Ordering::Relaxed);
                }
                Ok(lease)
            }
            Err(lease) => {
                self.lose_cell(lease, Reason::PoolLeaseMismatch.as_str(), after);
                Err(Error::new(Code::Internal, Reason::PoolLeaseMismatch))
            }
        }
    }

    fn clear_lease_since(&self, lease: &Lease) {
        if let Some(s) = self.lease_since.get(lease.cell().0 as usize) {
            // Relaxed: an observation.
            s.store(u64::MAX, Ordering::Relaxed);
        }
    }

    /// Quarantines a cell the class loses; the last usable one kills the class.
    fn lose_cell(&self, lease: Lease, reason: &'static str, after: &mut After) {
        self.clear_lease_since(&lease);
        self.pool.quarantine(lease, reason);
        // AcqRel: as in `restore_cell`, whose increment this orders against.
        if self.usable.fetch_sub(1, Ordering::AcqRel) == 1 {
            after.died = true;
        }
    }

    /// The grant of slot `index`, just made by the core's entry CAS on this thread's turn:
    /// deliver it. The entry's reference is ours until the end.
    fn granted(&self, index: u32, now: u64, after: &mut After) {
        let s = self.slot(index);
        let ticket = self.ticket(index);
        let pull = self.is_pull(index);
        // SAFETY: as `ticket`.
        let cancelled = pull
            && s.token
                .with(|t| unsafe { (*t).as_ref() }.is_some_and(|t| t.is_cancelled()));
        if cancelled {
            // A pull request whose token was cancelled is not handed to an executor (SPEC
            // F32, F46): it ends here and its credit goes back.
            after.credits += 1;
            self.life_add(OUT_ONE);
            after.outs += 1;
            self.book_end(index, F_CANCELLED, after);
            self.core.unref(index);
            return;
        }
        match self.acquire(&ticket, now, after) {
            Ok(lease) => {
                // SAFETY: as `ticket`.
                let at = s.enqueued_at.with(|a| unsafe { *a });
                let waited = now.saturating_sub(at);
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
                self.life_add(OUT_ONE.wrapping_sub(QUEUED_ONE));
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
                            self.clear_lease_since(&l);
                            self.pool.release(l);
                        }
                        after.credits += 1;
                        after.outs += 1;
                    }
                }
            }
            Err(e) => {
                if !matches!(e.reason(), Reason::PoolLeaseMismatch) {
                    after.credits += 1;
                }
                self.life_add(OUT_ONE);
                after.outs += 1;
                // SAFETY: the fate is PENDING: nobody reads the error before it changes.
                unsafe { s.error.with_mut(|x| *x = Some(e)) };
                self.book_end(index, F_FAILED, after);
            }
        }
        self.core.unref(index);
    }

    /// Books the end of slot `index`, which the caller moved out of `QUEUED` (exactly once) and
    /// holds a reference on: the content (pull mode), the refund, the count, the owner's wake.
    fn book_end(&self, index: u32, fate: u32, after: &mut After) {
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
        // Release: publishes the error cell to the owner's Acquire load.
        s.fate.store(fate, Ordering::Release);
        self.life_add(0u64.wrapping_sub(QUEUED_ONE));
        if self.is_pull(index) {
            // Nobody will take the content: its reference goes.
            self.core.unref(index);
        } else if let Some(w) = crate::sync::take_waker(&s.waker) {
            after.wake(w);
        }
    }

    /// Ends the entry of `handle` as `why` (core state) / `fate` if it is still queued.
    fn end_handle(&self, handle: u64, why: u32, fate: u32, now: u64, after: &mut After) -> bool {
        let Some(index) = self.core.try_ref(handle) else {
            return false;
        };
        let ended = self
            .core
            .end(index, why, now, &mut |i| self.granted(i, now, after));
        if ended {
            self.book_end(index, fate, after);
        }
        self.core.unref(index);
        ended
    }

    /// Ends every queued entry (shutdown, death of the class). O(slots); rare.
    fn end_all(&self, fate: u32, now: u64) {
        for index in 0..self.slots.len() as u32 {
            if self.core.state(index) != QUEUED {
                continue;
            }
            let mut after = After::new();
            self.end_handle(self.core.handle(index), CLOSED, fate, now, &mut after);
            self.finish(&mut after, now);
        }
        self.exec.wake_all();
    }

    /// Does what a call collected while running its turn: wakes, returned credits (each runs
    /// at most one turn), the death of the class; then wakes one pending request if a turn was
    /// handed back (SPEC F25).
    ///
    /// Takes the collector by reference: it holds up to 64 wakers (1 KiB), and moving it into
    /// each call cost a copy of that size on every enqueue, poll and release.
    #[inline]
    fn finish(&self, after: &mut After, now: u64) {
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
                // Release: pairs with the Acquire loads of `life`.
                self.life.fetch_or(DEAD, Ordering::Release);
                self.end_all(F_QUARANTINED, now);
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
            self.life_add(0u64.wrapping_sub(u64::from(after.outs) * OUT_ONE));
        }
        if self.core.take_handed_back() {
            self.wake_helper();
        }
    }

    /// Wakes the pending requests and the executors, so a handed-back turn is taken (F25):
    /// any of them takes it with its poll's `help`. Rare: only a turn's end that met both a
    /// free credit and a ready tenant hands back.
    fn wake_helper(&self) {
        self.pending.wake_all();
        self.exec.wake_all();
    }

    /// The owner of slot `index` stops waiting: gives its waiter slot up.
    fn stop_waiting(&self, index: u32) {
        let s = self.slot(index);
        // Relaxed: only the owner touches it.
        let h = s.helper.swap(NO_HELPER, Ordering::Relaxed);
        if h != NO_HELPER {
            self.pending.forget(h as usize);
        }
    }

    /// Runs one handed-back turn if one waits, and the sweep if a deadline has passed: what a
    /// waiting caller does (SPEC F18).
    ///
    /// Reads the clock only if a turn runs or a deadline is queued: a poll that finds neither
    /// needs no time.
    fn help(&self) {
        let mut after = After::new();
        if self.deadline_queued() {
            let now = self.clock.now();
            self.core
                .help(now, &mut |i| self.granted(i, now, &mut after));
            self.finish(&mut after, now);
            self.maybe_sweep(now);
            return;
        }
        let read = core::cell::Cell::new(0);
        let ran = self.core.help_at(
            || {
                let now = self.clock.now();
                read.set(now);
                now
            },
            &mut |i| self.granted(i, read.get(), &mut after),
        );
        // Without a turn nothing was collected that needs the time (credits and a death come
        // only from grants).
        debug_assert!(ran || (after.credits == 0 && !after.died));
        self.finish(&mut after, read.get());
    }

    /// Whether a queued entry may have a deadline (`earliest` below `u64::MAX`); if not, the
    /// sweep has nothing to do and the caller need not read the clock for it.
    fn deadline_queued(&self) -> bool {
        // Relaxed: a hint, as `maybe_sweep`'s own load; a producer's `fetch_min` racing with
        // this read is seen by the next call (the sweep is never owed to this one).
        self.earliest.load(Ordering::Relaxed) != u64::MAX
    }

    /// The deadline sweep (SPEC F46), behind its own try-token, when the earliest deadline has
    /// passed: ends the expired queued entries among the next [`SWEEP_CHUNK`] slots (a cycle
    /// over every slot takes as many calls as it needs, each bounded), and at the end of a cycle
    /// sets `earliest` to the earliest deadline of the entries left.
    fn maybe_sweep(&self, now: u64) {
        // Relaxed: a hint; the token and the scan decide.
        if now < self.earliest.load(Ordering::Relaxed) {
            return;
        }
        // Acquire: pairs with the Release store that gave the token up.
        if self.sweeping.swap(true, Ordering::Acquire) {
            return;
        }
        pause::point("ring.sweep_held");
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
            if self.core.state(index) != QUEUED {
                continue;
            }
            let Some(i) = self.core.try_ref(self.core.handle(index)) else {
                continue;
            };
            let deadline = self.ticket(i).deadline;
            let mut after = After::new();
            if deadline <= now {
                if self
                    .core
                    .end(i, EXPIRED, now, &mut |g| self.granted(g, now, &mut after))
                {
                    self.book_end(i, F_EXPIRED, &mut after);
                }
            } else if self.core.state(i) == QUEUED {
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
        // Release: pairs with the next taker's Acquire swap.
        self.sweeping.store(false, Ordering::Release);
        if self.core.take_handed_back() {
            self.wake_helper();
        }
    }

    /// Compacts tenants that wait in the ring (their tombstones hold slots until their turn),
    /// behind the sweep token; skipped if another thread holds it.
    fn compact(&self) {
        // Acquire: pairs with the Release store that gave the token up.
        if self.sweeping.swap(true, Ordering::Acquire) {
            return;
        }
        pause::point("ring.sweep_held");
        self.core.compact_waiting();
        // Release: pairs with the next taker's Acquire swap.
        self.sweeping.store(false, Ordering::Release);
    }

    /// The enqueue fast path: nothing queued and a credit free (no tenant ready): granted at
    /// once. `Ok(None)`: the request must queue.
    fn try_fast(&self, ticket: &Ticket) -> Result<Option<Lease>, Error> {
        // AcqRel: Acquire reads the flags; Release keeps `life`'s RMWs uniform.
        match self
            .life
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| {
                (l & (STOPPED | QUEUED_MASK) == 0).then_some(l + OUT_ONE)
            }) {
            Ok(_) => self.fast_with_count(ticket),
            Err(l) if l & STOPPED != 0 => Err(Self::stop_error(l)),
            Err(_) => Ok(None),
        }
    }

    /// The fast path after counting a lease out: take the credit and the lease.
    fn fast_with_count(&self, ticket: &Ticket) -> Result<Option<Lease>, Error> {
        if !self.core.take_free_credit() {
            self.life_add(0u64.wrapping_sub(OUT_ONE));
            return Ok(None);
        }
        let now = self.clock.now();
        let mut after = After::new();
        let res = self.acquire(ticket, now, &mut after);
        match &res {
            Ok(_) => self.stats.record_grant(),
            Err(e) => {
                after.outs += 1;
                if !matches!(e.reason(), Reason::PoolLeaseMismatch) {
                    after.credits += 1;
                }
            }
        }
        self.finish(&mut after, now);
        res.map(Some)
    }

    /// Takes one granted pull-mode entry off the ready queue, if any.
    fn pop_ready(&self) -> Option<Pulled<T>> {
        let index = self.ready.pop()?;
        let s = self.slot(index);
        // SAFETY: the entry is granted (pushed after the fate's Release CAS; the pop is
        // Acquire) and popping made us the content's owner; the content reference is ours.
        let (content, lease, waited, cancelled) = unsafe {
            (
                s.content.with_mut(|c| (*c).take()),
                s.lease.with_mut(|l| (*l).take()),
                s.waited.with(|w| *w),
                s.token.with_mut(|t| (*t).take().and_then(|t| t.reason())),
            )
        };
        let live = self.ticket(index).live;
        self.core.unref(index);
        let ((permit, payload), lease) = content
            .zip(lease)
            .expect("granted pull entry holds content and lease");
        Some(Pulled {
            payload,
            permit,
            lease,
            waited,
            cancelled,
            live,
        })
    }

    fn next_now(&self) -> Option<Pulled<T>> {
        if let Some(p) = self.pop_ready() {
            return Some(p);
        }
        self.help();
        self.pop_ready()
    }

    /// Admissions stopped, nothing queued, every lease back.
    fn drained(&self) -> bool {
        let l = self.life();
        l & STOPPED != 0 && l & QUEUED_MASK == 0 && (l >> OUT_SHIFT) & QUEUED_MASK == 0
    }

    fn register_waiter(&self, cx: &Context<'_>, slot: &mut Option<usize>) {
        if slot.is_none() {
            *slot = self.exec.claim();
        }
        match *slot {
            Some(i) => self.exec.register(i, cx),
            // More waiters than slots: poll again soon.
            None => cx.waker().wake_by_ref(),
        }
    }
}

#[allow(private_interfaces)]
impl<T: Send + 'static> ClassEngine<T> for RingClass<T> {
    fn new(s: ClassSetup) -> Result<Self, Error> {
        // Validates the sizes and gives the slot count (the policy itself is not used).
        let (_, slots) = s.policy()?;
        let core = Core::new(s.cells, slots as u32, s.max_tenants, s.starvation_after)
            .with_tenant_cap(s.queue_capacity.max(1));
        Ok(Self {
            core,
            slots: (0..slots).map(|_| Slot::new()).collect(),
            life: crossbeam_utils::CachePadded::new(AtomicU64::new(0)),
            class: s.class,
            ledger: s.ledger,
            ids: s.ids,
            queue_capacity: s.queue_capacity,
            pool: s.pool,
            clock: s.clock,
            usable: AtomicU32::new(s.cells),
            undelivered: Undelivered::new(slots),
            ready: Scq::new(slots as u32),
            exec: ExecWaiters::new(ExecWaiters::slots_for(s.cells)),
            pending: ExecWaiters::new(ExecWaiters::slots_for(s.cells)),
            stats: ClassStats::new(),
            earliest: AtomicU64::new(u64::MAX),
            fresh: AtomicU64::new(u64::MAX),
            cursor: AtomicU32::new(0),
            cycle_min: AtomicU64::new(u64::MAX),
            sweeping: AtomicBool::new(false),
            lease_since: (0..s.cells).map(|_| AtomicU64::new(u64::MAX)).collect(),
        })
    }

    fn enqueue(
        &self,
        ticket: Ticket,
        pull: Option<(Permit, T)>,
        token: Option<&CancellationToken>,
    ) -> Result<Enqueued, (Error, Option<(Permit, T)>)> {
        let refused = |e: Error, pull| {
            self.stats
                .count_refused_at_enqueue(e.code() == Code::DeadlineExceeded);
            Err((e, pull))
        };
        if self.queue_capacity == 0 {
            return refused(Error::new(Code::ResourceExhausted, Reason::QueueFull), pull);
        }
        if pull.is_none() {
            match self.try_fast(&ticket) {
                Ok(Some(lease)) => return Ok(Enqueued::Granted(lease)),
                Ok(None) => {}
                Err(e) if crate::engine::is_refusal(&e) => return refused(e, pull),
                Err(e) => return Err((e, pull)),
            }
        }
        // AcqRel: Acquire reads the flags; Release keeps `life`'s RMWs uniform.
        let cap = u64::from(self.queue_capacity);
        let counted = self
            .life
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| {
                (l & STOPPED == 0 && l & QUEUED_MASK < cap).then_some(l + QUEUED_ONE)
            });
        let queued = match counted {
            Ok(l) => (l & QUEUED_MASK) as u32 + 1,
            Err(_) => 0,
        };
        if let Err(l) = counted {
            let e = if l & STOPPED != 0 {
                Self::stop_error(l)
            } else {
                Error::new(Code::ResourceExhausted, Reason::QueueFull)
            };
            return refused(e, pull);
        }
        // The other tenants may still queue `queue_capacity - queued` live requests: a tenant at
        // its cap of slots gets one only while more than that are free.
        let reserve = self.queue_capacity.saturating_sub(queued);
        let index = match self.core.alloc(ticket.tenant, 2, reserve).or_else(|Full| {
            // No slot: tombstones of tenants waiting for a turn hold them. Compact them
            // (the rare slow path, behind the sweep token) and try once more.
            self.compact();
            self.core.alloc(ticket.tenant, 2, reserve)
        }) {
            Ok(i) => i,
            Err(Full) => {
                self.life_add(0u64.wrapping_sub(QUEUED_ONE));
                return refused(Error::new(Code::ResourceExhausted, Reason::QueueFull), pull);
            }
        };
        let now = self.clock.now();
        self.maybe_sweep(now);
        let s = self.slot(index);
        let is_pull = pull.is_some();
        let token = if is_pull { token.cloned() } else { None };
        // From here on the entry owns the queue slot's refund.
        let content = pull.map(|(permit, payload)| (permit.detach_queue_slot(), payload));
        // Relaxed: published by the core's Release store in `submit`.
        s.fate.store(PENDING, Ordering::Relaxed);
        drop(crate::sync::take_waker(&s.waker));
        // SAFETY: the slot was just allocated to us and is not reachable by anyone else until
        // `submit` publishes it.
        unsafe {
            s.ticket.with_mut(|t| *t = ticket);
            s.enqueued_at.with_mut(|a| *a = now);
            s.pull.with_mut(|p| *p = is_pull);
            s.token.with_mut(|t| *t = token);
            s.content.with_mut(|c| *c = content);
            s.lease.with_mut(|l| *l = None);
            s.error.with_mut(|x| *x = None);
        }
        let handle = self.core.handle(index);
        let meta = Meta {
            priority: ticket.priority,
            deadline: ticket.deadline,
            enqueued_at: now,
            weight: ticket.weight.max(1),
        };
        let mut after = After::new();
        self.core.submit(index, ticket.tenant, meta, now, &mut |i| {
            self.granted(i, now, &mut after)
        });
        self.finish(&mut after, now);
        if ticket.deadline != u64::MAX {
            // AcqRel: see `maybe_sweep`; `fresh` first.
            self.fresh.fetch_min(ticket.deadline, Ordering::AcqRel);
            self.earliest.fetch_min(ticket.deadline, Ordering::AcqRel);
        }
        // An RMW, not a load: ordered against the RMW that set SHUT/DEAD, after which the
        // closer's scan sees this entry queued; otherwise this call ends it itself.
        // AcqRel: as above.
        let l = self.life.fetch_add(0, Ordering::AcqRel);
        if l & (SHUT | DEAD) != 0 {
            let fate = if l & SHUT != 0 {
                F_SHUTDOWN
            } else {
                F_QUARANTINED
            };
            let mut after = After::new();
            self.end_handle(handle, CLOSED, fate, now, &mut after);
            self.finish(&mut after, now);
        }
        Ok(Enqueued::Queued(handle))
    }

    fn try_grant_now(&self, ticket: &Ticket) -> Result<Option<Lease>, Error> {
        if self.queue_capacity == 0 {
            return Err(Error::new(Code::ResourceExhausted, Reason::QueueFull));
        }
        self.try_fast(ticket)
    }

    fn poll(&self, handle: u64, cx: &mut Context<'_>) -> Polled {
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
                if let Some(i) = self.pending.claim() {
                    h = i as u32;
                    s.helper.store(h, Ordering::Relaxed);
                }
            }
            if h != NO_HELPER {
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

    fn withdraw_refunding(
        &self,
        handle: u64,
        why: Ended,
        permit: &mut Option<ExecutionPermit>,
    ) -> Option<Lease> {
        let index = self.held(handle)?;
        let s = self.slot(index);
        let now = self.clock.now();
        let (state, fate) = match why {
            Ended::Cancelled => (super::grant::CANCELLED, F_CANCELLED),
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

    fn cancel(&self, handle: u64) -> Result<(), Error> {
        let now = self.clock.now();
        let mut after = After::new();
        let ended = self.end_handle(
            handle,
            super::grant::CANCELLED,
            F_CANCELLED,
            now,
            &mut after,
        );
        self.finish(&mut after, now);
        if ended {
            Ok(())
        } else {
            Err(Error::new(Code::NotFound, Reason::UnknownRequest))
        }
    }

    fn release_then(&self, lease: Lease, then: impl FnOnce()) {
        self.clear_lease_since(&lease);
        self.pool.release(lease);
        then();
        let mut after = After::new();
        // The credit goes back before the lease is counted back, so a drain that sees every
        // lease back sees every credit free.
        after.outs += 1;
        if self.deadline_queued() {
            let now = self.clock.now();
            self.maybe_sweep(now);
            self.core
                .release(now, &mut |i| self.granted(i, now, &mut after));
            self.finish(&mut after, now);
            return;
        }
        // No deadline queued: the clock is read only if the credit meets a turn to run.
        let read = core::cell::Cell::new(0);
        let ran = self.core.release_at(
            || {
                let now = self.clock.now();
                read.set(now);
                now
            },
            &mut |i| self.granted(i, read.get(), &mut after),
        );
        // As in `help`: without a turn, `finish` needs no time.
        debug_assert!(ran || (after.credits == 0 && !after.died));
        self.finish(&mut after, read.get());
    }

    fn quarantine_then(&self, lease: Lease, reason: &'static str, then: impl FnOnce()) {
        let mut after = After::new();
        self.lose_cell(lease, reason, &mut after);
        then();
        self.life_add(0u64.wrapping_sub(OUT_ONE));
        self.finish(&mut after, self.clock.now());
        // Executors waiting for a dead class to empty, and drainers waiting for the cell, must
        // look again.
        self.exec.wake_all();
    }

    fn try_next(&self) -> Option<Pulled<T>> {
        self.next_now()
    }

    fn poll_next(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<Option<Pulled<T>>> {
        if let Some(p) = self.next_now() {
            return Poll::Ready(Some(p));
        }
        self.register_waiter(cx, slot);
        // Read before the re-check: a grant pushes to the ready queue before it counts its
        // entry out of `life`, so a count of 0 seen here means the pop below sees every push.
        let l = self.life();
        if let Some(p) = self.next_now() {
            return Poll::Ready(Some(p));
        }
        if l & STOPPED != 0 && l & QUEUED_MASK == 0 {
            return Poll::Ready(None);
        }
        Poll::Pending
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
        // Release: pairs with the Acquire loads of `life`.
        self.life.fetch_or(SHUT, Ordering::AcqRel);
        self.end_all(F_SHUTDOWN, self.clock.now());
    }

    fn close(&self) {
        // AcqRel: pairs with the Acquire loads of `life`.
        self.life.fetch_or(DRAIN, Ordering::AcqRel);
        self.exec.wake_all();
    }

    fn poll_drained(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<()> {
        if self.drained() {
            return Poll::Ready(());
        }
        self.register_waiter(cx, slot);
        // Re-check after registering: pairs with the RMW-then-`wake_all` of `life_add`.
        if self.drained() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    fn queue_depth(&self) -> u32 {
        (self.life() & QUEUED_MASK) as u32
    }

    fn available_cells(&self) -> u32 {
        self.core.counters().0 as u32
    }

    fn restore_cell(&self, cell: CellId) -> Result<(), Error> {
        // Count the cell as usable first, refusing a class that has died (SPEC F22).
        // AcqRel: orders against the decrement in `lose_cell`.
        self.usable
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n > 0).then_some(n + 1)
            })
            .map_err(|_| Error::new(Code::Unavailable, Reason::AllCellsQuarantined))?;
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
        let mut after = After::new();
        self.core
            .release(now, &mut |i| self.granted(i, now, &mut after));
        self.finish(&mut after, now);
        self.exec.wake_all();
        Ok(())
    }

    fn undelivered(&self) -> &Undelivered<T> {
        &self.undelivered
    }

    fn stats(&self) -> &ClassStats {
        &self.stats
    }

    fn samples(&self) -> (crate::pool::PoolCounters, u32, u32, Option<u64>) {
        let pool = self.pool.counters();
        let now = self.clock.now();
        // Relaxed: observations.
        let oldest = self
            .lease_since
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .filter(|&s| s != u64::MAX)
            .min()
            .map(|s| now.saturating_sub(s));
        (pool, self.queue_depth(), self.core.active_tenants(), oldest)
    }

    fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
}

impl<T> Drop for RingClass<T> {
    fn drop(&mut self) {
        // Leases of granted-but-untaken pull entries go back to the pool.
        while let Some(index) = self.ready.pop() {
            let lease = self.slots[index as usize].lease.with_mut(|l| {
                // SAFETY: `&mut self`: no other user exists.
                unsafe { (*l).take() }
            });
            if let Some(l) = lease {
                self.pool.release(l);
            }
        }
    }
}
