//! The lock-free engine: one class, no mutex, no thread ever waits for another.
//!
//! # Shape
//!
//! - **`ctl`**, one packed word per class (table below). Every decision that couples "is a cell
//!   free?" with "is work queued?" is a single RMW on it, so a releaser and a producer cannot
//!   both miss each other (the Dekker race of two separate counters).
//! - **Entry slots**: a fixed [`Arena`] of request entries. Each slot's state word carries the
//!   generation, the stage and two reference bits; every transition is a CAS that includes the
//!   generation, so a stale handle is refused (SPEC F30) and cancel is one CAS (SPEC F31).
//! - **Inbox**: producers publish new entries on an intrusive multi-producer [`Inbox`]; they never
//!   touch the policy.
//! - **Dispatch token** (a bit of `ctl`): whoever takes it owns the sequential [`Policy`] for one
//!   bounded pass: drain the inbox, expire, grant up to the free cells. A thread that finds the
//!   token taken sets `DIRTY` and leaves — the holder re-runs before letting go. No thread ever
//!   spins or parks on the token, so the hot paths take no lock and never wait.
//! - **Cancel** (and a dropped future) is one CAS on the entry's state word (SPEC F31). If the
//!   token happens to be free, the canceller also takes the entry out of the policy at once
//!   (`unqueue_now`, try-only like every use of the token); otherwise the entry stays behind as a
//!   tombstone that the next pass drops.
//!
//! `ctl` layout:
//!
//! | field    | bits | meaning                                                          |
//! |----------|------|------------------------------------------------------------------|
//! | FREE     | 24   | cell credits: cells neither leased nor quarantined                |
//! | QUEUED   | 24   | live queued requests (tombstones excluded), exact `queue_capacity` |
//! | TOKEN    | 1    | a thread is running a dispatch pass                               |
//! | DIRTY    | 1    | something changed while TOKEN was held: run again                  |
//! | SHUT     | 1    | shutdown: admissions stop, queued requests fail                    |
//! | DEAD     | 1    | every cell quarantined: queued and new requests fail               |
//!
//! A producer counts itself in `QUEUED` *before* its entry becomes reachable, and whoever moves an
//! entry out of the queued stage (granter, canceller, expirer, closer) uncounts it exactly once,
//! so `QUEUED` never goes below the number of reachable queued entries and never underflows.
//!
//! Entry state word (the arena's 8-bit state):
//!
//! | bits | meaning                                                                  |
//! |------|--------------------------------------------------------------------------|
//! | 0–3  | stage: QUEUED, GRANTED, CANCELLED, EXPIRED, CLOSED, DEAD, FAILED          |
//! | 4    | `QREF`: the inbox/policy still holds the index                            |
//! | 5    | `HREF`: the owner (enqueue future, or for pull mode the payload) holds it |
//! | 6    | `PULL`: a pull-mode entry (payload and permit stored in the slot)        |
//!
//! The slot is freed by whoever clears the last reference bit.
//!
//! # Locks
//!
//! None. The only exclusive section is the dispatch token, which is try-only.

use super::{ClassEngine, ClassSetup, Ended, Enqueued, Polled, Pulled, Ticket};
use crate::admission::Permit;
use crate::clock::Clock;
use crate::policy::{EntryMeta, Judge, Policy, Verdict};
use crate::pool::{ClassPool, Lease};
use crate::raw::arena::{Arena, Key};
use crate::raw::inbox::Inbox;
use crate::raw::pack::Field;
use crate::raw::ring::Ring;
use crate::scheduler::stats::ClassStats;
use crate::scheduler::ClassSnapshot;
use crate::sync::{AtomicU32, AtomicU64, AtomicWaker, Ordering, UnsafeCell};
use crate::Reason;
use crate::{ClassId, Code, Error};
use arrayvec::ArrayVec;
use core::task::{Context, Poll, Waker};
use crossbeam_utils::CachePadded;
use std::sync::Arc;

#[cfg(all(test, loom))]
#[path = "loom_lockfree.rs"]
mod loom_lockfree;

const FREE: Field = Field::first(24);
const QUEUED: Field = FREE.next(24);
const TOKEN_F: Field = QUEUED.next(1);
const DIRTY_F: Field = TOKEN_F.next(1);
const SHUT_F: Field = DIRTY_F.next(1);
const DEAD_F: Field = SHUT_F.next(1);
const _: () = assert!(DEAD_F.end() <= 64);

const fn unit(f: Field) -> u64 {
    f.mask() & f.mask().wrapping_neg()
}
const FREE_ONE: u64 = unit(FREE);
const QUEUED_ONE: u64 = unit(QUEUED);
const TOKEN: u64 = TOKEN_F.mask();
const DIRTY: u64 = DIRTY_F.mask();
const SHUT: u64 = SHUT_F.mask();
const DEAD: u64 = DEAD_F.mask();

/// Largest cell count and queue capacity `ctl` can hold.
pub const MAX_FIELD: u64 = FREE.max();

const STAGE: u8 = 0x0F;
const QUEUED_S: u8 = 1;
const GRANTED_S: u8 = 2;
const CANCELLED_S: u8 = 3;
const EXPIRED_S: u8 = 4;
const CLOSED_S: u8 = 5;
const DEAD_S: u8 = 6;
const FAILED_S: u8 = 7;
const QREF: u8 = 0x10;
const HREF: u8 = 0x20;
const PULL: u8 = 0x40;

/// Candidates one pass may grant or reject (SPEC F19).
pub const PASS_BUDGET: u32 = 64;

/// Executor waiter slots per class for async/blocking pull (`poll_next`); one bit each in
/// [`ExecWaiters::claimed`]. Shrunk under loom, where every slot is a modelled object.
const EXEC_WAITERS: usize = if cfg!(loom) { 2 } else { 64 };
const _: () = assert!(EXEC_WAITERS >= 1 && EXEC_WAITERS <= 64);
/// The bits of [`ExecWaiters::claimed`] that name a slot.
const EXEC_WAITER_BITS: u64 = u64::MAX >> (64 - EXEC_WAITERS);

fn stage_of(why: Ended) -> u8 {
    match why {
        Ended::Cancelled => CANCELLED_S,
        Ended::Expired => EXPIRED_S,
        Ended::Shutdown => CLOSED_S,
        Ended::Quarantined => DEAD_S,
        Ended::Failed(_) => FAILED_S,
    }
}

/// One request slot.
///
/// Ownership of the cells (each an `UnsafeCell`):
/// - `ticket`, `enqueued_at`: written by the producer between `alloc` and the inbox push;
///   read-only afterwards (the dispatcher reads them after the inbox's Acquire `take_all`).
/// - `lease`, `waited`: written by the dispatcher before its `QUEUED → GRANTED` CAS; after that
///   CAS only the `HREF` holder reads them (after an Acquire load that sees `GRANTED`). If the CAS
///   fails, the dispatcher takes the lease back; nobody else touches it outside `GRANTED`.
/// - `content` (pull mode): written before publication; taken by whoever moves the entry out of
///   `QUEUED` into an ended stage, or by the executor after `GRANTED`.
/// - `error`: written by the dispatcher before a `QUEUED → FAILED` CAS, read by the owner after.
///
/// `repr(C)` with the waker first: a cancel touches the slot's state word and the waker, which
/// then share the slot's first cache line (see the arena's `Slot`), one miss at any queue depth.
#[repr(C)]
struct Entry<T> {
    waker: AtomicWaker,
    ticket: UnsafeCell<Ticket>,
    enqueued_at: UnsafeCell<u64>,
    lease: UnsafeCell<Option<Lease>>,
    waited: UnsafeCell<u64>,
    content: UnsafeCell<Option<(Permit, T)>>,
    error: UnsafeCell<Option<Error>>,
}

impl<T> Default for Entry<T> {
    fn default() -> Self {
        Self {
            ticket: UnsafeCell::new(Ticket::BLANK),
            enqueued_at: UnsafeCell::new(0),
            lease: UnsafeCell::new(None),
            waited: UnsafeCell::new(0),
            content: UnsafeCell::new(None),
            error: UnsafeCell::new(None),
            waker: AtomicWaker::new(),
        }
    }
}

// SAFETY: every `UnsafeCell` of an entry is accessed by one party at a time, as given by the
// ownership rules on `Entry`, and hand-offs go through AcqRel CASes on the slot's state word or
// the inbox. `T` and `Permit` move between threads, hence `T: Send`.
unsafe impl<T: Send> Sync for Entry<T> {}

/// Waker slots for executors waiting in pull mode.
struct ExecWaiters {
    claimed: AtomicU64,
    slots: Box<[AtomicWaker]>,
}

impl ExecWaiters {
    fn new() -> Self {
        Self {
            claimed: AtomicU64::new(0),
            slots: (0..EXEC_WAITERS).map(|_| AtomicWaker::new()).collect(),
        }
    }

    fn claim(&self) -> Option<usize> {
        // Relaxed first read; the CAS below orders.
        let mut cur = self.claimed.load(Ordering::Relaxed);
        loop {
            let free = !cur & EXEC_WAITER_BITS;
            if free == 0 {
                return None;
            }
            let i = free.trailing_zeros() as usize;
            // Acquire: if this CAS comes after a `wake_all` in `claimed`'s modification order,
            // it reads from that `wake_all`'s Release RMW, so the ready-ring pushes before it are
            // visible to the re-check that follows the registration (see `wake_all`).
            match self.claimed.compare_exchange_weak(
                cur,
                cur | (1 << i),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(i),
                Err(a) => cur = a,
            }
        }
    }

    fn forget(&self, i: usize) {
        // Relaxed: giving a slot up publishes nothing.
        self.claimed.fetch_and(!(1 << i), Ordering::Relaxed);
    }

    /// Wakes every registered executor. Called after pushing to the ready ring.
    fn wake_all(&self) {
        // An RMW, not a load. The executor claims a slot, registers, then re-checks the ready
        // ring; we push to the ring, then read `claimed`. With a plain load both reads could be
        // stale (store buffering): we miss the new claim and it misses our push, and the
        // executor sleeps with work ready. As an RMW this read is ordered against the claim's
        // CAS: either we see the bit and wake the slot, or the claim reads from us (Acquire in
        // `claim`) and its re-check sees the push.
        // Release: publishes the ready-ring pushes before this call to a later claim.
        let mut bits = self.claimed.fetch_or(0, Ordering::Release);
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.slots[i].wake();
        }
    }
}

/// Granted pull-mode entries the ready ring refused, in grant order; owned by the token holder.
///
/// The ring never makes a pusher wait: a push that meets a slot whose previous value is still
/// being popped (a stalled executor) reports the ring full. Such grants wait here, and the next
/// pass moves them into the ring. Capacity: one per arena slot, so it cannot fill.
struct Overflow {
    keys: Box<[u64]>,
    head: usize,
    len: usize,
}

impl Overflow {
    fn new(capacity: usize) -> Self {
        Self {
            keys: vec![0; capacity].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    fn push(&mut self, key: u64) {
        assert!(
            self.len < self.keys.len(),
            "a granted entry is in the overflow at most once"
        );
        let i = (self.head + self.len) % self.keys.len();
        self.keys[i] = key;
        self.len += 1;
    }

    fn front(&self) -> Option<u64> {
        (self.len > 0).then(|| self.keys[self.head])
    }

    fn pop(&mut self) {
        self.head = (self.head + 1) % self.keys.len();
        self.len -= 1;
    }
}

/// Work collected during a pass and finished after the token is released (SPEC F35).
struct After<T> {
    wakes: ArrayVec<Waker, { PASS_BUDGET as usize + 1 }>,
    contents: ArrayVec<(Permit, T), { PASS_BUDGET as usize + 1 }>,
    pulled: bool,
}

impl<T> After<T> {
    fn new() -> Self {
        Self {
            wakes: ArrayVec::new(),
            contents: ArrayVec::new(),
            pulled: false,
        }
    }
}

/// The lock-free engine for one class.
pub struct LockFreeClass<T> {
    ctl: CachePadded<AtomicU64>,
    class: ClassId,
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
    /// Granted pull-mode entries waiting for an executor.
    ready: Ring<u64>,
    exec: ExecWaiters,
    stats: ClassStats,
    /// The clock as last read by a pass; lease ages on the fast path use it.
    recent_now: AtomicU64,
    queued_tenants: AtomicU32,
    lease_since: Box<[AtomicU64]>,
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
}

// SAFETY: `policy` is only accessed by the holder of the dispatch token (TOKEN bit of `ctl`,
// taken with Acquire and released with Release), so accesses never overlap and each holder sees
// the previous holder's writes. Entries are `Sync` for `T: Send`.
unsafe impl<T: Send> Sync for LockFreeClass<T> {}
// SAFETY: as above; all fields are owned.
unsafe impl<T: Send> Send for LockFreeClass<T> {}

impl<T: Send + 'static> LockFreeClass<T> {
    #[inline]
    fn entry(&self, key: Key) -> &Entry<T> {
        self.arena.get(key.index)
    }

    /// Parses and range-checks a host-visible handle.
    fn key(&self, raw: u64) -> Option<Key> {
        let key = Key::from_u64(raw);
        ((key.index as usize) < self.arena.capacity()).then_some(key)
    }

    /// Clears reference bit `bit`; frees the slot if it was the last one.
    fn drop_ref(&self, key: Key, bit: u8) {
        // One CAS: clearing the last reference bit frees the slot in the same RMW.
        let dropped = self.arena.drop_bits(key, bit, QREF | HREF);
        debug_assert!(dropped.is_ok(), "reference dropped on a stale key");
    }

    /// Takes a cell from the pool and checks it (SPEC F08). On success the cell's lease age
    /// starts at `now`.
    fn acquire(&self, ticket: &Ticket, now: u64) -> Result<Lease, Error> {
        let req = ticket.lease_request(self.class);
        match self.pool.acquire_checked(&req)? {
            Ok(lease) => {
                if let Some(s) = self.lease_since.get(lease.cell().0 as usize) {
                    // Relaxed: an observation for snapshots.
                    s.store(now, Ordering::Relaxed);
                }
                Ok(lease)
            }
            Err(lease) => {
                // Never marked reusable: the cell leaves service.
                self.quarantine(lease, "pool-lease-mismatch");
                Err(Error::new(Code::Internal, Reason::PoolLeaseMismatch))
            }
        }
    }

    /// Whether a pass has anything to do in state `cur`.
    #[inline]
    fn wants_pass(cur: u64) -> bool {
        QUEUED.get(cur) > 0 && (FREE.get(cur) > 0 || cur & (SHUT | DEAD) != 0)
    }

    /// Makes sure a pass runs if one is needed: runs it here, or, if another thread holds the
    /// token, marks `DIRTY` so that thread runs again. Never waits.
    fn kick(&self) {
        self.kick_with(false);
    }

    fn kick_with(&self, force: bool) {
        self.kick_from(force, None);
    }

    /// `kick_with`, starting from `seen`: the value the caller's own read-modify-write of `ctl`
    /// just left there (which orders the caller exactly as the read-modify-write below would).
    fn kick_from(&self, mut force: bool, mut seen: Option<u64>) {
        loop {
            // An RMW, not a load: a caller that has just published work outside `ctl` (a
            // producer's inbox push) must not conclude "no pass needed" from a stale `ctl`.
            // Being an RMW, this read takes a place in `ctl`'s modification order relative to a
            // releaser's `fetch_add`: either it sees the returned credit, or the releaser's later
            // Acquire reads of `ctl` (its token CAS) read from our release sequence, so its pass
            // drains our push. A plain load allows the store-buffering outcome where the
            // producer reads the old `FREE == 0` while the releaser's pass finds the inbox
            // empty, stranding the request with a free cell.
            // AcqRel: Release for the above; Acquire pairs with the Release token release in
            // `pass`, so a new holder sees the previous holder's policy writes.
            let mut cur = match seen.take() {
                Some(v) => v,
                None => self.ctl.fetch_add(0, Ordering::AcqRel),
            };
            loop {
                if cur & TOKEN != 0 {
                    if cur & DIRTY != 0 {
                        return;
                    }
                    // Release: our inbox push / count change happens-before the holder's re-run;
                    // pairs with the Acquire of the holder's token-release CAS.
                    match self.ctl.compare_exchange_weak(
                        cur,
                        cur | DIRTY,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => {
                            // Relaxed: read by the models after joining the threads.
                            #[cfg(all(test, loom))]
                            self.dirty_marks.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                        Err(actual) => cur = actual,
                    }
                } else if !force && !Self::wants_pass(cur) {
                    return;
                } else {
                    // Acquire: taking the token; pairs with the Release that gave it up.
                    match self.ctl.compare_exchange_weak(
                        cur,
                        cur | TOKEN,
                        Ordering::Acquire,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => break,
                        Err(actual) => cur = actual,
                    }
                }
            }
            let again = self.pass(force);
            force = false;
            if !again {
                return;
            }
        }
    }

    /// One bounded pass. The caller holds the token; it is released before returning. Returns
    /// whether another pass may be needed.
    fn pass(&self, compact: bool) -> bool {
        let mut budget = PASS_BUDGET;
        let prev = self.with_token(|policy, after| {
            self.run_pass(policy, &mut budget, compact, after);
        });
        prev & DIRTY != 0 || budget == 0
    }

    /// Runs `f` on the policy, then releases the dispatch token (consuming `DIRTY`) and only then
    /// wakes and drops what `f` collected. The caller holds the token. Returns `ctl` as it was
    /// just before the release.
    fn with_token(&self, f: impl FnOnce(&mut Policy, &mut After<T>)) -> u64 {
        let mut after = After::new();
        self.policy.with_mut(|p| {
            // SAFETY: we hold the dispatch token, which makes us the only user of the policy.
            let policy = unsafe { &mut *p };
            f(policy, &mut after);
            // Relaxed: an observation for snapshots.
            self.queued_tenants
                .store(policy.queued_tenants() as u32, Ordering::Relaxed);
        });
        // Release the token, consuming DIRTY. Release: publishes our policy writes to the next
        // holder (pairs with the Acquire token take in `kick_with` / `unqueue_now`); Acquire:
        // sees what the threads that set DIRTY published.
        let prev = self.ctl.fetch_and(!(TOKEN | DIRTY), Ordering::AcqRel);
        // `drain` and `clear` work in place: moving the vectors out by value would copy their
        // whole inline storage (kilobytes with the contents) on every pass.
        for w in after.wakes.drain(..) {
            w.wake();
        }
        after.contents.clear();
        if after.pulled {
            self.exec.wake_all();
        }
        prev
    }

    fn run_pass(&self, policy: &mut Policy, budget: &mut u32, compact: bool, after: &mut After<T>) {
        self.flush_overflow(after);
        self.drain_inbox(policy, after);
        // Acquire: pairs with the Release RMWs of releasers and producers.
        let cur = self.ctl.load(Ordering::Acquire);
        if cur & (SHUT | DEAD) != 0 {
            let why = if cur & SHUT != 0 {
                Ended::Shutdown
            } else {
                Ended::Quarantined
            };
            // Executors waiting for the class to drain must hear when it has (`poll_next`).
            after.pulled = true;
            let mut judge = EndJudge {
                class: self,
                why,
                after,
            };
            while policy.select(0, &mut judge, budget).is_some() {}
            return;
        }
        if compact {
            // A compaction pass only removes tombstones; expiry and grants are left to the
            // passes that run when there is work (as in the baseline, which compacts in place).
            self.compact(policy);
            return;
        }
        if policy.is_empty() {
            return;
        }
        let now = self.clock.now();
        // Relaxed: an observation for lease ages.
        self.recent_now.store(now, Ordering::Relaxed);
        policy.expire(
            now,
            &mut EndJudge {
                class: self,
                why: Ended::Expired,
                after,
            },
            budget,
        );
        while *budget > 0 && self.reserve_cell() {
            let mut judge = GrantJudge {
                class: self,
                now,
                after,
                stop: false,
                keep_credit: false,
            };
            let granted = policy.select(now, &mut judge, budget);
            if granted.is_none() {
                if !judge.keep_credit {
                    self.unreserve_cell();
                }
                break;
            }
        }
    }

    /// Moves refused ready-ring pushes into the ring, oldest first. Token held.
    fn flush_overflow(&self, after: &mut After<T>) {
        // Relaxed: only the token holder writes it; the token's Acquire ordered the last write.
        if self.overflowed.load(Ordering::Relaxed) == 0 {
            return;
        }
        self.overflow.with_mut(|o| {
            // SAFETY: we hold the dispatch token, which makes us the only user of `overflow`.
            let o = unsafe { &mut *o };
            while let Some(key) = o.front() {
                if self.ready.push(key).is_err() {
                    break;
                }
                o.pop();
                after.pulled = true;
            }
            // Release: pairs with the Acquire load in `try_next`.
            self.overflowed.store(o.len as u32, Ordering::Release);
        });
    }

    /// Hands a granted pull-mode entry to the executors. Token held.
    fn publish_ready(&self, key: u64, after: &mut After<T>) {
        after.pulled = true;
        // Relaxed: see `flush_overflow`; keeps grant order when older grants are waiting.
        let waiting = self.overflowed.load(Ordering::Relaxed) > 0;
        if let Err(key) = if waiting {
            Err(key)
        } else {
            self.ready.push(key)
        } {
            self.overflow.with_mut(|o| {
                // SAFETY: we hold the dispatch token, which makes us the only user of `overflow`.
                let o = unsafe { &mut *o };
                o.push(key);
                // Release: pairs with the Acquire load in `try_next`.
                self.overflowed.store(o.len as u32, Ordering::Release);
            });
        }
    }

    /// Moves newly published entries into the policy, in publication order. Returns how many it
    /// found already ended (cancelled or withdrawn while in the inbox) and took straight out
    /// again.
    fn drain_inbox(&self, policy: &mut Policy, after: &mut After<T>) -> usize {
        let mut ended = 0;
        for index in self.inbox.take_all() {
            let key = self.arena.key_at(index);
            let e = self.entry(key);
            // SAFETY: the producer wrote `ticket`/`enqueued_at` before its Release inbox push;
            // `take_all` is Acquire; they are read-only from then on.
            let (t, at) = unsafe { (e.ticket.with(|t| *t), e.enqueued_at.with(|a| *a)) };
            let meta = EntryMeta {
                tenant: t.tenant,
                priority: t.priority,
                deadline: t.deadline,
                enqueued_at: at,
                weight: t.weight,
            };
            if let Err(err) = policy.insert(index, meta) {
                // SAFETY: only the winner of the QUEUED → FAILED CAS below lets anyone read it,
                // and nobody else writes `error`.
                e.error.with_mut(|x| unsafe { *x = Some(err) });
                self.end_queued(key, FAILED_S, after);
            } else if self.arena.state(key).is_some_and(|s| s & STAGE != QUEUED_S) {
                // Cancelled or withdrawn while in the inbox: out again at once, as `unqueue_now`
                // does for an entry already in the policy. Inserting first keeps what the insert
                // decides (the sequence number, the tenant's place in the ring) the same as in
                // the baseline, which inserts at enqueue and removes at cancel.
                if policy.remove(index) {
                    self.drop_ref(key, QREF);
                    ended += 1;
                }
            }
        }
        ended
    }

    /// Moves a queued entry that the policy no longer holds into an ended stage and drops the
    /// queue's reference. Returns whether this call ended it.
    fn end_queued(&self, key: Key, stage: u8, after: &mut After<T>) -> bool {
        let won = self
            .arena
            .update(key, |s| {
                (s & STAGE == QUEUED_S).then_some((s & !(STAGE | QREF)) | stage)
            })
            .is_ok();
        if won {
            // Release: pairs with the Acquire loads of `ctl` (the count is only arithmetic, but
            // keeping every `ctl` RMW at least Release keeps reasoning uniform).
            self.ctl.fetch_sub(QUEUED_ONE, Ordering::Release);
            match stage {
                EXPIRED_S => crate::scheduler::stats::saturating_add(&self.stats.expirations, 1),
                _ => crate::scheduler::stats::saturating_add(&self.stats.rejections, 1),
            }
            self.collect_ended(key, after);
            // The owner still holds HREF (pull: we took the content and drop HREF for it).
        } else {
            self.drop_ref(key, QREF);
        }
        won
    }

    /// After an entry was ended by us: wake its owner, or for pull mode take the content (to be
    /// dropped after the pass) and drop the content's reference.
    fn collect_ended(&self, key: Key, after: &mut After<T>) {
        let e = self.entry(key);
        if self.arena.state(key).is_some_and(|s| s & PULL != 0) {
            // SAFETY: we moved the entry out of QUEUED, which makes us the content's owner.
            let content = e.content.with_mut(|c| unsafe { (*c).take() });
            if let Some(c) = content {
                if let Err(c) = after.contents.try_push(c) {
                    drop(c);
                }
            }
            self.drop_ref(key, HREF);
        } else if let Some(w) = crate::sync::take_waker(&e.waker) {
            if let Err(e) = after.wakes.try_push(w) {
                e.element().wake();
            }
        }
    }

    /// Takes an entry that just left the queued stage (cancelled, withdrawn) out of the policy
    /// at once if the dispatch token is free — try-only, like every use of the token — and drops
    /// the policy's reference (draining the inbox first, so an entry not yet in the policy is
    /// handled too). The slot is then reused while its lines are still in cache, and
    /// no tombstone waits for a pass or a compaction (PERF P7). With the token busy the entry
    /// stays a tombstone and a pass removes it later (F11's lazy removal), as before.
    fn unqueue_now(&self, key: Key) {
        // Relaxed: the CAS below orders.
        let mut cur = self.ctl.load(Ordering::Relaxed);
        loop {
            if cur & TOKEN != 0 {
                return;
            }
            // Acquire: taking the token; pairs with the Release that gave it up, so we see the
            // previous holder's policy writes.
            match self.ctl.compare_exchange_weak(
                cur,
                cur | TOKEN,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        // Whatever the threads that set `DIRTY` asked for (or a pass that became due meanwhile)
        // runs after the release, as the holder's re-run would.
        let prev = self.with_token(|policy, after| {
            // The entry may still be in the inbox (no pass ran since it was pushed, as while
            // every cell is held): drain it first, which takes ended entries straight out again.
            // Each entry is drained once, so this is amortised O(1) per enqueue.
            let drained_ended = self.drain_inbox(policy, after);
            // Relaxed: read by the models after joining the threads.
            #[cfg(all(test, loom))]
            self.unqueued_now
                .fetch_add(drained_ended, Ordering::Relaxed);
            #[cfg(not(all(test, loom)))]
            let _ = drained_ended;
            // Under the token nobody else drops `QREF`, so while the key is live with `QREF` set
            // the slot cannot be freed and reused: if its index is in the policy, it is this
            // entry. (A stale key — the entry was dropped and the slot reused — reads `None`.)
            if self.arena.state(key).is_some_and(|s| s & QREF != 0) && policy.remove(key.index) {
                self.drop_ref(key, QREF);
                // Relaxed: read by the models after joining the threads.
                #[cfg(all(test, loom))]
                self.unqueued_now.fetch_add(1, Ordering::Relaxed);
            }
        });
        if prev & DIRTY != 0 || Self::wants_pass(prev) {
            self.kick();
        }
    }

    /// Takes one cell credit if a cell is free and work is queued.
    fn reserve_cell(&self) -> bool {
        // Relaxed first read; the CAS below orders.
        let mut cur = self.ctl.load(Ordering::Relaxed);
        loop {
            if FREE.get(cur) == 0 || QUEUED.get(cur) == 0 {
                return false;
            }
            // Acquire: pairs with the Release `fetch_add` in `release`, so the returned cell's
            // pool state is visible before we acquire it from the pool.
            match self.ctl.compare_exchange_weak(
                cur,
                cur - FREE_ONE,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    fn unreserve_cell(&self) {
        // Release: pairs with the Acquire in `reserve_cell` / the fast path.
        self.ctl.fetch_add(FREE_ONE, Ordering::Release);
    }

    /// Removes every tombstone from the policy and frees its slot (rare: the arena ran out
    /// of slots because tombstones outnumber live entries).
    fn compact(&self, policy: &mut Policy) {
        for index in 0..self.arena.capacity() as u32 {
            let key = self.arena.key_at(index);
            let Some(s) = self.arena.state(key) else {
                continue;
            };
            if s & QREF != 0 && s & STAGE != QUEUED_S && policy.remove(index) {
                self.drop_ref(key, QREF);
            }
        }
    }

    fn ctl_error(cur: u64) -> Error {
        if cur & SHUT != 0 {
            Error::new(Code::Unavailable, Reason::Shutdown)
        } else {
            Error::new(Code::Unavailable, Reason::AllCellsQuarantined)
        }
    }

    /// The fast path: nothing queued and a cell free → take the credit. Returns Ok(None) when
    /// the request must queue; the caller then counts itself in (`count_in`).
    fn try_fast(&self, ticket: &Ticket) -> Result<Option<Lease>, Error> {
        // Relaxed: the CAS below orders.
        let mut cur = self.ctl.load(Ordering::Relaxed);
        loop {
            if cur & (SHUT | DEAD) != 0 {
                return Err(Self::ctl_error(cur));
            }
            if QUEUED.get(cur) != 0 || FREE.get(cur) == 0 {
                return Ok(None);
            }
            // Acquire: pairs with the Release `fetch_add` in `release`.
            match self.ctl.compare_exchange_weak(
                cur,
                cur - FREE_ONE,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        self.finish_fast(ticket).map(Some)
    }

    /// Turns a fast-path cell credit into a lease; gives the credit back on failure.
    fn finish_fast(&self, ticket: &Ticket) -> Result<Lease, Error> {
        // Relaxed: an observation.
        let now = self.recent_now.load(Ordering::Relaxed);
        match self.acquire(ticket, now) {
            Ok(lease) => {
                self.stats.record_grant(0);
                Ok(lease)
            }
            Err(e) => {
                if e.reason() != "pool-lease-mismatch" {
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
    fn count_in(&self, fast: bool) -> Result<bool, Error> {
        // Relaxed: the CAS below orders.
        let mut cur = self.ctl.load(Ordering::Relaxed);
        loop {
            if cur & (SHUT | DEAD) != 0 {
                return Err(Self::ctl_error(cur));
            }
            let queued = QUEUED.get(cur);
            let (next, took_cell) = if fast && queued == 0 && FREE.get(cur) > 0 {
                (cur - FREE_ONE, true)
            } else if queued >= u64::from(self.queue_capacity) {
                return Err(Error::new(Code::ResourceExhausted, Reason::QueueFull));
            } else {
                (cur + QUEUED_ONE, false)
            };
            // AcqRel: Acquire pairs with `release` (cell credit); Release orders nothing yet
            // (the entry is published later by the inbox push) but keeps `ctl` RMWs uniform.
            match self
                .ctl
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(took_cell),
                Err(actual) => cur = actual,
            }
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
}

/// Grants candidates; the pass holds one reserved cell credit per call of `select`.
struct GrantJudge<'a, T> {
    class: &'a LockFreeClass<T>,
    now: u64,
    after: &'a mut After<T>,
    stop: bool,
    /// The credit was consumed by a cell that left service; do not give it back.
    keep_credit: bool,
}

impl<T: Send + 'static> Judge for GrantJudge<'_, T> {
    fn judge(&mut self, index: u32) -> Verdict {
        let c = self.class;
        if self.stop {
            return Verdict::Keep;
        }
        let key = c.arena.key_at(index);
        match c.arena.state(key) {
            Some(s) if s & STAGE == QUEUED_S => {}
            _ => {
                c.drop_ref(key, QREF);
                return Verdict::Drop;
            }
        }
        let e = c.entry(key);
        // SAFETY: read-only after publication (see `Entry`).
        let (ticket, at) = unsafe { (e.ticket.with(|t| *t), e.enqueued_at.with(|a| *a)) };
        let lease = match c.acquire(&ticket, self.now) {
            Ok(l) => l,
            Err(err) => {
                self.stop = true;
                self.keep_credit = matches!(err.reason(), Reason::PoolLeaseMismatch);
                return Verdict::Keep;
            }
        };
        let waited = self.now.saturating_sub(at);
        // SAFETY: outside GRANTED only the dispatcher (token holder) touches `lease`/`waited`.
        e.lease.with_mut(|l| unsafe { *l = Some(lease) });
        // SAFETY: as above.
        e.waited.with_mut(|w| unsafe { *w = waited });
        // AcqRel inside `update`: Release publishes `lease`/`waited` to the owner, which reads
        // them after an Acquire load that sees GRANTED.
        match c.arena.update(key, |s| {
            (s & STAGE == QUEUED_S).then_some((s & !(STAGE | QREF)) | GRANTED_S)
        }) {
            Ok((old, _)) => {
                // Release: see `end_queued`.
                c.ctl.fetch_sub(QUEUED_ONE, Ordering::Release);
                c.stats.record_grant(waited);
                if old & PULL != 0 {
                    c.publish_ready(key.to_u64(), self.after);
                } else if let Some(w) = crate::sync::take_waker(&e.waker) {
                    if let Err(e) = self.after.wakes.try_push(w) {
                        e.element().wake();
                    }
                }
                Verdict::Take
            }
            Err(_) => {
                // Lost to a canceller: take the lease back, keep the credit for the next one.
                // Relaxed: read by the models after joining the threads.
                #[cfg(all(test, loom))]
                c.lost_grants.fetch_add(1, Ordering::Relaxed);
                // SAFETY: the entry is not GRANTED, so the lease is still ours.
                if let Some(l) = e.lease.with_mut(|l| unsafe { (*l).take() }) {
                    // The lease age `acquire` started ends with the lease (Relaxed: an observation).
                    if let Some(s) = c.lease_since.get(l.cell().0 as usize) {
                        s.store(u64::MAX, Ordering::Relaxed);
                    }
                    c.pool.release(l);
                }
                c.drop_ref(key, QREF);
                Verdict::Drop
            }
        }
    }
}

/// Ends every candidate it is shown with `why` (expiry, shutdown, quarantine).
struct EndJudge<'a, 'b, T> {
    class: &'a LockFreeClass<T>,
    why: Ended,
    after: &'b mut After<T>,
}

impl<T: Send + 'static> Judge for EndJudge<'_, '_, T> {
    fn judge(&mut self, index: u32) -> Verdict {
        if self.after.wakes.is_full() || self.after.contents.is_full() {
            return Verdict::Keep;
        }
        let key = self.class.arena.key_at(index);
        self.class.end_queued(key, stage_of(self.why), self.after);
        Verdict::Drop
    }
}

impl<T: Send + 'static> ClassEngine<T> for LockFreeClass<T> {
    fn new(s: ClassSetup) -> Result<Self, Error> {
        let (policy, slots) = s.policy()?;
        Ok(Self {
            ctl: CachePadded::new(AtomicU64::new(FREE.set(0, u64::from(s.cells)))),
            class: s.class,
            queue_capacity: s.queue_capacity,
            arena: Arena::new(slots)?,
            inbox: Inbox::new(slots)?,
            policy: UnsafeCell::new(policy),
            overflow: UnsafeCell::new(Overflow::new(slots)),
            overflowed: AtomicU32::new(0),
            usable: AtomicU32::new(s.cells),
            ready: Ring::new((s.cells as usize).max(2)),
            exec: ExecWaiters::new(),
            stats: ClassStats::new(),
            recent_now: AtomicU64::new(s.clock.now()),
            queued_tenants: AtomicU32::new(0),
            lease_since: (0..s.cells).map(|_| AtomicU64::new(u64::MAX)).collect(),
            #[cfg(all(test, loom))]
            dirty_marks: crate::sync::AtomicUsize::new(0),
            #[cfg(all(test, loom))]
            lost_grants: crate::sync::AtomicUsize::new(0),
            #[cfg(all(test, loom))]
            unqueued_now: crate::sync::AtomicUsize::new(0),
            pool: s.pool,
            clock: s.clock,
        })
    }

    fn enqueue(
        &self,
        ticket: Ticket,
        pull: Option<(Permit, T)>,
    ) -> Result<Enqueued, (Error, Option<(Permit, T)>)> {
        if self.queue_capacity == 0 {
            return Err((Error::new(Code::ResourceExhausted, Reason::QueueFull), pull));
        }
        // Pull-mode requests always go through a slot (the executor takes them from there).
        match self.count_in(pull.is_none()) {
            Err(e) => return Err((e, pull)),
            Ok(true) => {
                return self
                    .finish_fast(&ticket)
                    .map(Enqueued::Granted)
                    .map_err(|e| (e, pull))
            }
            Ok(false) => {}
        }
        let state = QUEUED_S | QREF | HREF | if pull.is_some() { PULL } else { 0 };
        let Some(key) = self.alloc(state) else {
            // Release: see `end_queued`.
            self.ctl.fetch_sub(QUEUED_ONE, Ordering::Release);
            return Err((Error::new(Code::ResourceExhausted, Reason::QueueFull), pull));
        };
        let e = self.entry(key);
        let now = self.clock.now();
        // SAFETY: the slot was just allocated to us and is not yet reachable by anyone else.
        unsafe {
            e.ticket.with_mut(|t| *t = ticket);
            e.enqueued_at.with_mut(|a| *a = now);
            e.content.with_mut(|c| *c = pull);
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
        let Some(key) = self.key(raw) else {
            return Polled::Ended(Ended::Failed(Error::new(
                Code::Internal,
                Reason::StaleHandle,
            )));
        };
        let e = self.entry(key);
        let Some(mut s) = self.arena.state(key) else {
            return Polled::Ended(Ended::Failed(Error::new(
                Code::Internal,
                Reason::StaleHandle,
            )));
        };
        if s & STAGE == QUEUED_S {
            crate::sync::register_waker(&e.waker, cx.waker());
            // Re-check after registering: a grant between the first load and the registration
            // would otherwise be missed (its waker `take` could have run before `register`).
            s = self.arena.state(key).unwrap_or(FAILED_S);
            if s & STAGE == QUEUED_S {
                // Cooperative progress (F18): run a pass if one is due and nobody runs one.
                // A load, not the RMW of `kick`: that RMW orders a caller's fresh publication
                // against releasers, and a poller has published nothing a pass must see (a
                // grant racing the registration is caught by the re-check above). Saves one
                // RMW on `ctl` per pending poll.
                // Relaxed: a hint; `kick` re-reads `ctl` with an RMW before acting on it.
                let cur = self.ctl.load(Ordering::Relaxed);
                if cur & TOKEN == 0 && Self::wants_pass(cur) {
                    self.kick();
                    s = self.arena.state(key).unwrap_or(FAILED_S);
                }
                if s & STAGE == QUEUED_S {
                    return Polled::Pending;
                }
            }
        }
        let out = match s & STAGE {
            GRANTED_S => {
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
            CANCELLED_S => Polled::Ended(Ended::Cancelled),
            EXPIRED_S => Polled::Ended(Ended::Expired),
            CLOSED_S => Polled::Ended(Ended::Shutdown),
            DEAD_S => Polled::Ended(Ended::Quarantined),
            // SAFETY: written before the FAILED CAS, read after observing it; no other writer.
            _ => Polled::Ended(Ended::Failed(
                e.error
                    .with(|x| unsafe { *x })
                    .unwrap_or(Error::new(Code::Internal, Reason::Failed)),
            )),
        };
        self.drop_ref(key, HREF);
        out
    }

    fn withdraw(&self, raw: u64, why: Ended) -> Option<Lease> {
        let key = self.key(raw)?;
        let stage = stage_of(why);
        let res = self.arena.update(key, |s| {
            (s & STAGE == QUEUED_S).then_some((s & !STAGE) | stage)
        });
        let lease = match res {
            Ok(_) => {
                // Release: see `end_queued`.
                self.ctl.fetch_sub(QUEUED_ONE, Ordering::Release);
                let counter = if why == Ended::Expired {
                    &self.stats.expirations
                } else {
                    &self.stats.cancellations
                };
                crate::scheduler::stats::saturating_add(counter, 1);
                self.unqueue_now(key);
                None
            }
            Err(_)
                if self
                    .arena
                    .state(key)
                    .is_some_and(|s| s & STAGE == GRANTED_S) =>
            {
                self.entry(key).lease.with_mut(|l| {
                    // SAFETY: GRANTED and we hold HREF: the lease is ours (see `poll`).
                    unsafe { (*l).take() }
                })
            }
            Err(_) => None,
        };
        self.drop_ref(key, HREF);
        lease
    }

    fn cancel(&self, raw: u64) -> Result<(), Error> {
        let not_found = Error::new(Code::NotFound, Reason::UnknownRequest);
        let key = self.key(raw).ok_or(not_found)?;
        self.arena
            .update(key, |s| {
                (s & STAGE == QUEUED_S).then_some((s & !STAGE) | CANCELLED_S)
            })
            .map_err(|_| not_found)?;
        // Release: see `end_queued`.
        self.ctl.fetch_sub(QUEUED_ONE, Ordering::Release);
        crate::scheduler::stats::saturating_add(&self.stats.cancellations, 1);
        let mut after = After::new();
        self.collect_ended(key, &mut after);
        for w in after.wakes.drain(..) {
            w.wake();
        }
        self.unqueue_now(key);
        Ok(())
    }

    fn release(&self, lease: Lease) {
        if let Some(s) = self.lease_since.get(lease.cell().0 as usize) {
            // Relaxed: an observation.
            s.store(u64::MAX, Ordering::Relaxed);
        }
        self.pool.release(lease);
        // Release: the pool holds the cell again before the credit is visible; pairs with the
        // Acquire CAS that takes a credit (fast path, `reserve_cell`). Acquire: this RMW is also
        // the ordering point `kick_with` needs (see there), so the kick starts from its value
        // instead of reading `ctl` again.
        let old = self.ctl.fetch_add(FREE_ONE, Ordering::AcqRel);
        if QUEUED.get(old) > 0 {
            self.kick_from(false, Some(old + FREE_ONE));
        }
    }

    fn quarantine(&self, lease: Lease, reason: &'static str) {
        if let Some(s) = self.lease_since.get(lease.cell().0 as usize) {
            // Relaxed: an observation.
            s.store(u64::MAX, Ordering::Relaxed);
        }
        self.pool.quarantine(lease, reason);
        // Relaxed: `usable` only decides when DEAD is set; DEAD itself is set with an RMW on ctl.
        if self.usable.fetch_sub(1, Ordering::Relaxed) == 1 {
            // Release: pairs with the Acquire loads of `ctl` in passes and producers.
            self.ctl.fetch_or(DEAD, Ordering::Release);
            self.kick();
            self.exec.wake_all();
        }
    }

    fn try_next(&self) -> Option<Pulled<T>> {
        loop {
            if let Some(raw) = self.ready.pop() {
                let key = Key::from_u64(raw);
                let e = self.entry(key);
                // SAFETY: the entry is GRANTED (it was pushed after the GRANTED CAS, and the
                // ring's pop is Acquire), and popping made us the content owner.
                let (content, lease, waited) = unsafe {
                    (
                        e.content.with_mut(|c| (*c).take()),
                        e.lease.with_mut(|l| (*l).take()),
                        e.waited.with(|w| *w),
                    )
                };
                self.drop_ref(key, HREF);
                let ((permit, payload), lease) = content
                    .zip(lease)
                    .expect("granted pull entry holds content and lease");
                return Some(Pulled {
                    payload,
                    permit,
                    lease,
                    waited,
                });
            }
            // Acquire: pairs with the Release stores in `flush_overflow` / `publish_ready`.
            if self.overflowed.load(Ordering::Acquire) > 0 {
                // Grants the ring refused wait for a pass to move them in.
                self.kick_with(true);
                if self.ready.is_empty() {
                    return None;
                }
                continue;
            }
            // Acquire: pairs with producers' and releasers' RMWs.
            if !Self::wants_pass(self.ctl.load(Ordering::Acquire)) {
                return None;
            }
            self.kick();
            if self.ready.is_empty() {
                return None;
            }
        }
    }

    fn poll_next(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<Option<Pulled<T>>> {
        if let Some(p) = self.try_next() {
            return Poll::Ready(Some(p));
        }
        if slot.is_none() {
            *slot = self.exec.claim();
        }
        match *slot {
            Some(i) => crate::sync::register_waker(&self.exec.slots[i], cx.waker()),
            // More concurrent executors than waiter slots: poll again soon.
            None => cx.waker().wake_by_ref(),
        }
        // Re-check after registering (pairs with the push-then-wake in the pass).
        if let Some(p) = self.try_next() {
            return Poll::Ready(Some(p));
        }
        // Acquire: pairs with the Release RMW that set SHUT/DEAD.
        let cur = self.ctl.load(Ordering::Acquire);
        // Acquire: pairs with the Release stores in `flush_overflow` / `publish_ready`.
        let overflowed = self.overflowed.load(Ordering::Acquire);
        if cur & (SHUT | DEAD) != 0
            && QUEUED.get(cur) == 0
            && self.ready.is_empty()
            && overflowed == 0
        {
            return Poll::Ready(None);
        }
        Poll::Pending
    }

    fn forget_waiter(&self, slot: usize) {
        self.exec.forget(slot);
    }

    fn count_refused(&self, expired: bool) {
        self.stats.count_refused(expired);
    }

    fn shutdown(&self) {
        // Release: pairs with the Acquire loads of `ctl` in passes and producers.
        self.ctl.fetch_or(SHUT, Ordering::Release);
        self.kick();
        self.exec.wake_all();
    }

    fn snapshot(&self) -> ClassSnapshot {
        let pool = self.pool.counters();
        // Acquire: pairs with the RMWs of producers, granters and releasers.
        let cur = self.ctl.load(Ordering::Acquire);
        let now = self.clock.now();
        // Relaxed: observations.
        let oldest = self
            .lease_since
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .filter(|&s| s != u64::MAX)
            .min()
            .map(|s| now.saturating_sub(s));
        self.stats.snapshot(
            pool,
            QUEUED.get(cur) as u32,
            // Relaxed: an observation.
            self.queued_tenants.load(Ordering::Relaxed),
            oldest,
        )
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
    use crate::pool::FixedCellPool;
    use crate::{ManualClock, RequestId, TenantId};

    fn class(cells: u32) -> (LockFreeClass<u32>, Ledger) {
        let clock = Arc::new(ManualClock::new());
        let ledger = Ledger::with_clock(
            LedgerConfig {
                classes: vec![ClassSpec::new("c")],
                max_tenants: 2,
                tenant_limits: Limits::UNLIMITED,
            },
            clock.clone(),
        )
        .unwrap();
        let engine = LockFreeClass::new(ClassSetup {
            class: ClassId(0),
            cells,
            queue_capacity: 4,
            max_tenants: 2,
            starvation_after: u64::MAX,
            pool: crate::pool::ClassPool::Fixed(FixedCellPool::new(ClassId(0), cells).unwrap()),
            clock,
        })
        .unwrap();
        (engine, ledger)
    }

    /// A future-mode ticket of tenant 0 (the engine never looks at the permit in future mode).
    fn ticket(id: u64) -> Ticket {
        Ticket {
            id: RequestId(id),
            ..Ticket::BLANK
        }
    }

    #[test]
    fn f31_cancel_frees_the_slot_at_once_when_the_token_is_free() {
        let (engine, _ledger) = class(1);
        let held = match engine.enqueue(ticket(1), None) {
            Ok(Enqueued::Granted(lease)) => lease,
            other => panic!("expected a fast grant, got {:?}", other.map_err(|e| e.0)),
        };
        let queued = |id| match engine.enqueue(ticket(id), None) {
            Ok(Enqueued::Queued(key)) => key,
            other => panic!("expected to queue, got {:?}", other.map_err(|e| e.0)),
        };
        let (a, b) = (queued(2), queued(3));
        let free_before = engine.arena.available();
        // No pass has run (no free cell): both entries are still in the inbox. The cancel drains
        // it under the token and takes A straight out of the policy.
        engine.cancel(a).unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(matches!(
            engine.poll(a, &mut cx),
            Polled::Ended(Ended::Cancelled)
        ));
        // The owner's poll dropped the last reference: A's slot is free again, no tombstone left
        // for a pass or a compaction.
        assert_eq!(engine.arena.available(), free_before + 1);
        engine.policy.with(|p| {
            // SAFETY: no other thread exists; nobody holds the token.
            let policy = unsafe { &*p };
            assert_eq!(policy.len(), 1, "only B is queued in the policy");
        });
        // B is granted when the cell comes back.
        engine.release(held);
        match engine.poll(b, &mut cx) {
            Polled::Granted(lease, _) => engine.release(lease),
            other => panic!("expected B's grant, got {other:?}"),
        }
        assert_eq!(engine.arena.available(), engine.arena.capacity());
    }

    #[test]
    fn f23_grant_refused_by_the_ready_ring_waits_in_order_and_is_delivered() {
        let (engine, ledger) = class(2);
        // Stand-ins for grants whose slots a stalled executor is still popping: the ring is full.
        while engine.ready.push(u64::MAX).is_ok() {}
        for payload in [7, 8] {
            let id = RequestId(payload);
            let permit = ledger
                .admit(AdmissionRequest::new(id, TenantId(0)))
                .unwrap();
            let ticket = Ticket::from_permit(&permit);
            assert!(matches!(
                engine.enqueue(ticket, Some((permit, payload as u32))),
                Ok(Enqueued::Queued(_))
            ));
        }
        // Both were granted (two free cells) but went to the overflow, in grant order.
        assert_eq!(engine.overflowed.load(Ordering::Relaxed), 2);
        // The stalled pops finish.
        while engine.ready.pop().is_some() {}
        // An executor finds the ring empty, forces a pass that moves the grants in, and gets them
        // in grant order.
        let first = engine
            .try_next()
            .expect("the overflowed grant is delivered");
        let second = engine.try_next().expect("and the next one");
        assert_eq!((first.payload, second.payload), (7, 8));
        assert_eq!(engine.overflowed.load(Ordering::Relaxed), 0);
        engine.release(first.lease);
        engine.release(second.lease);
        drop((first.permit, second.permit));
        assert!(ledger.usage().is_zero());
    }
}
