//! The tenant-ring engine's grant path (docs/ring-engine.md): the turn protocol ([`Turns`])
//! driving the per-tenant records ([`Tenants`]) over a fixed set of entry slots, with no lock
//! and no dispatch token.
//!
//! * **Enqueue**: take a free slot, stage the entry, publish it to the tenant's inbox, announce
//!   the tenant. If a cell is free the announcement hands the caller a turn, which it runs.
//! * **Grant** = the turn holder offers its tenant's candidate and CASes the entry
//!   `QUEUED → GRANTED`. A failed CAS means the entry was cancelled: a tombstone, unlinked and
//!   its slot freed by the owner, uncharged.
//! * **Release**: the cell's credit goes back into `ctl`; if a tenant is ready the releaser runs
//!   its turn.
//! * **Cancel**: CAS `QUEUED → CANCELLED`, from any thread. The tenant's next turn meets the
//!   tombstone, unlinks it and frees its slot, uncharged; a turn that meets only tombstones hands
//!   its credit on. If the tenant is still idle (its producer published and has not announced
//!   yet) the canceller owns it with a cleanup turn (no credit) and unlinks the tombstone itself.
//!   Tombstones of a tenant that waits in the ring while no cell is free, or whose turn holder
//!   is stopped, hold their slots until its turn; [`Core::with_tenant_cap`] bounds how many
//!   slots one tenant can hold that way.
//! * **DRR (F12)**: a turn grants up to the tenant's weight, taking one more free credit per
//!   grant. A round cut short because no credit is free keeps its deficit and the tenant goes to
//!   the *front* queue, served before the ring, as the policy keeps it at the ring's head with
//!   its credits left; a round that ends sends the tenant to the ring's tail.
//!
//! This is the engine's core, not yet a [`ClassEngine`](crate::engine::ClassEngine): leases,
//! wakers, pull mode, shutdown, drain and the deadline sweep are not built on it yet.

use self::change::Changes;
pub(crate) use self::change::{TooLate, Wanted};
use super::tenant::{Meta, Tenants};
use super::turns::{Turn, Turns};
use crate::raw::pause;
use crate::raw::scq::Scq;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// Entry slot: free (on the free list, or being staged).
pub(crate) const VACANT: u32 = 0;
/// Entry slot: queued in its tenant's inbox or records.
pub(crate) const QUEUED: u32 = 1;
/// Entry slot: queued, with an in-place change (SPEC F36) that its tenant's order does not
/// show yet. A grant's CAS fails on it: the turn holder applies the change first.
pub(crate) const CHANGED: u32 = 2;
/// Entry slot: granted; the grant's taker frees it (`Core::take`).
pub(crate) const GRANTED: u32 = 3;
/// Entry slot: cancelled while queued; a tombstone until its tenant's owner unlinks it.
pub(crate) const CANCELLED: u32 = 4;
/// Entry slot: its deadline passed while queued (the engine's sweep); a tombstone as
/// `CANCELLED`.
pub(crate) const EXPIRED: u32 = 5;
/// Entry slot: ended while queued by shutdown or the death of the class; a tombstone as
/// `CANCELLED`.
pub(crate) const CLOSED: u32 = 6;

/// Whether entry state `s` is a live queued request (`QUEUED`, or `CHANGED`).
#[inline(always)]
pub(crate) fn is_queued(s: u32) -> bool {
    s == QUEUED || s == CHANGED
}

/// Bits of a slot's reference word that count references; the rest is the generation.
const REF_BITS: u32 = 8;
const REF_MASK: u64 = (1 << REF_BITS) - 1;

/// Candidates one turn offers at most (SPEC F19's pass size): grants and dropped tombstones.
pub(crate) const TURN_CANDIDATES: u32 = 64;

/// Tombstones a tenant may hold beyond its live entries before its owner compacts.
const COMPACT_SLACK: u32 = 8;

/// No free entry slot is left, or the tenant holds its cap of them.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Full;

/// The grant path of one class. See the module docs.
#[derive(Debug)]
pub(crate) struct Core {
    turns: Turns,
    tenants: Tenants,
    /// Per slot: `VACANT`, `QUEUED`, `GRANTED` or `CANCELLED`.
    entry: Box<[AtomicU32]>,
    /// Per slot: its tenant while queued or a tombstone.
    tenant_of: Box<[AtomicU32]>,
    /// Per slot: the generation (above [`REF_BITS`]) and the references holding the slot (the
    /// entry's own, handed to the grant's taker, and any the engine adds). The last reference
    /// dropped frees the slot and moves the generation on, so a stale handle is refused.
    refs: Box<[AtomicU64]>,
    /// Per tenant: requests published (or about to be) and still `QUEUED`. Raised before the
    /// publication, lowered after the CAS that ends the request (grant or cancel), so a tenant
    /// whose count is 0 has nothing live linked or in its inbox, only tombstones.
    live: Box<[AtomicU32]>,
    /// Per tenant: entry slots it holds in its inbox and records, live or tombstones. Raised
    /// before a slot is taken, lowered when its owner grants the entry or frees the tombstone.
    held: Box<[AtomicU32]>,
    /// The most slots one tenant may hold ([`Core::with_tenant_cap`]).
    tenant_cap: u32,
    /// Free entry slots (each at most once, so the SCQ's bound holds).
    free: Scq,
    /// In-place changes of queued entries (SPEC F36, `change.rs`).
    changes: Changes,
    /// Set when a call hands a turn back (SPEC F25), for the engine to wake a waiter.
    handed: AtomicU32,
    /// Candidates one call's pass offers at most ([`TURN_CANDIDATES`]; smaller in models that
    /// need the bound reached after one turn).
    pass: u32,
    /// Free slots, about (for the cap's reserve in `alloc`).
    vacant: AtomicU32,
    /// The turns [`compact_waiting`](Self::compact_waiting) holds, one per tenant at most;
    /// its `try_lock` is that slow path's try-token (never waited for).
    compacting: std::sync::Mutex<Vec<Turn>>,
}

impl Core {
    /// `cells` cells, `slots` entry slots, tenants `0..tenants`.
    pub(crate) fn new(cells: u32, slots: u32, tenants: u32, starvation_after: u64) -> Core {
        let free = Scq::new(slots);
        for i in 0..slots {
            free.push(i);
        }
        Core {
            turns: Turns::new(cells, tenants),
            tenants: Tenants::new(slots, tenants, starvation_after),
            entry: (0..slots).map(|_| AtomicU32::new(VACANT)).collect(),
            tenant_of: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            refs: (0..slots).map(|_| AtomicU64::new(1 << REF_BITS)).collect(),
            live: (0..tenants).map(|_| AtomicU32::new(0)).collect(),
            held: (0..tenants).map(|_| AtomicU32::new(0)).collect(),
            tenant_cap: slots,
            free,
            changes: Changes::new(slots, tenants),
            handed: AtomicU32::new(0),
            pass: TURN_CANDIDATES,
            vacant: AtomicU32::new(slots),
            compacting: std::sync::Mutex::new(Vec::with_capacity(tenants as usize)),
        }
    }

    /// Caps the entry slots one tenant may hold, live requests and tombstones together. With
    /// `slots = 2 * queue_capacity + cells` and the cap at `queue_capacity` (the admission
    /// ledger keeps live requests within it), a tenant whose turn holder is stopped — its new
    /// requests wait in its inbox, and their cancellations leave tombstones there until the
    /// owner runs — holds at most its cap: the other tenants' live requests always find a slot
    /// (SPEC F24).
    pub(crate) fn with_tenant_cap(mut self, cap: u32) -> Core {
        self.tenant_cap = cap;
        self
    }

    /// Bounds one call's pass at `candidates` (at least 1) instead of [`TURN_CANDIDATES`]: for
    /// models that reach the F25 bound after one turn.
    #[cfg(all(test, loom))]
    pub(crate) fn with_pass(mut self, candidates: u32) -> Core {
        self.pass = candidates.clamp(1, TURN_CANDIDATES);
        self
    }

    /// Queues a request of `tenant`; returns its slot. Every grant this call makes (its own
    /// request's, or others' on turns it is handed) is passed to `on_grant` with the time `now`
    /// used for aging (F14).
    #[cfg(any(test, feature = "pause-points"))]
    pub(crate) fn enqueue(
        &self,
        tenant: u32,
        meta: Meta,
        now: u64,
        on_grant: &mut impl FnMut(u32),
    ) -> Result<u32, Full> {
        let index = self.alloc(tenant, 1, u32::MAX)?;
        self.submit(index, tenant, meta, now, on_grant);
        Ok(index)
    }

    /// Takes a free slot for a request of `tenant`, held by `refs` references (the entry's own,
    /// which a grant hands to its taker, and `refs - 1` the caller keeps). The caller fills its
    /// own data for the slot, then queues it with [`submit`](Self::submit).
    ///
    /// A tenant at its cap ([`with_tenant_cap`](Self::with_tenant_cap)) still gets a slot while
    /// more than `reserve` slots are free (the caller's bound on the live requests the other
    /// tenants may still queue), so the cap refuses only when its slots are needed elsewhere.
    pub(crate) fn alloc(&self, tenant: u32, refs: u64, reserve: u32) -> Result<u32, Full> {
        debug_assert!((1..REF_MASK).contains(&refs));
        // Relaxed: counts checked against the cap and the reserve (hints: a race lets one
        // request past either, never a slot be shared); the slot itself comes from the free list.
        if self.held[tenant as usize].fetch_add(1, Ordering::Relaxed) >= self.tenant_cap
            && self.vacant.load(Ordering::Relaxed) <= reserve
        {
            self.held[tenant as usize].fetch_sub(1, Ordering::Relaxed);
            return Err(Full);
        }
        let Some(index) = self.free.pop() else {
            self.held[tenant as usize].fetch_sub(1, Ordering::Relaxed);
            return Err(Full);
        };
        // Relaxed: a count (see above).
        self.vacant.fetch_sub(1, Ordering::Relaxed);
        // Relaxed: the slot is ours (the free list's pop ordered the previous holder's last
        // drop before this); published with the entry by the Release store in `submit`.
        self.refs[index as usize].fetch_add(refs, Ordering::Relaxed);
        Ok(index)
    }

    /// Queues the slot `index` taken by [`alloc`](Self::alloc) for `tenant`. Every grant this
    /// call makes is passed to `on_grant`, with `now` used for aging (F14).
    pub(crate) fn submit(
        &self,
        index: u32,
        tenant: u32,
        meta: Meta,
        now: u64,
        on_grant: &mut impl FnMut(u32),
    ) {
        // Relaxed: ordered before the announcement's Release RMW on the tenant's state word,
        // which the owner's reads follow, and before the entry becomes cancellable below.
        self.live[tenant as usize].fetch_add(1, Ordering::Relaxed);
        // Relaxed: published with the node by the Release CAS of `publish`.
        self.tenant_of[index as usize].store(tenant, Ordering::Relaxed);
        self.changes.reset(index, meta.deadline);
        // Release: a canceller that reads QUEUED (Acquire) sees the slot's tenant and count.
        self.entry[index as usize].store(QUEUED, Ordering::Release);
        // SAFETY: the slot came off the free list: no other thread holds it until `publish`.
        unsafe { self.tenants.stage(index, meta) };
        self.tenants.publish(tenant, index);
        pause::point("ring.announce");
        if let Some(turn) = self.turns.announce(tenant) {
            self.run(turn, now, on_grant);
        }
    }

    /// The handle of slot `index` now: its generation and index.
    pub(crate) fn handle(&self, index: u32) -> u64 {
        // Relaxed: the caller holds a reference, so the generation cannot move.
        let g = self.refs[index as usize].load(Ordering::Relaxed) >> REF_BITS;
        (g << 32) | u64::from(index)
    }

    /// Takes one more reference on the slot a handle names, if the handle is still current
    /// (its generation, and the slot still held). Returns the slot's index.
    pub(crate) fn try_ref(&self, handle: u64) -> Option<u32> {
        let index = (handle & u64::from(u32::MAX)) as u32;
        let word = self.refs.get(index as usize)?;
        let g = handle >> 32;
        // Acquire: pairs with the Release of the holder's `alloc`/`submit` (the slot's data is
        // visible to the new holder).
        word.fetch_update(Ordering::Acquire, Ordering::Relaxed, |w| {
            (w >> REF_BITS == g && w & REF_MASK > 0 && w & REF_MASK < REF_MASK).then_some(w + 1)
        })
        .ok()
        .map(|_| index)
    }

    /// Whether `handle` names a slot still held under its generation (a hint for a holder that
    /// knows it holds a reference).
    pub(crate) fn is_current(&self, handle: u64) -> bool {
        let index = (handle & u64::from(u32::MAX)) as usize;
        self.refs.get(index).is_some_and(|w| {
            // Acquire: as in `try_ref`.
            let w = w.load(Ordering::Acquire);
            w >> REF_BITS == handle >> 32 && w & REF_MASK > 0
        })
    }

    /// Drops one reference on slot `index`; the last one frees the slot and moves its
    /// generation on (SPEC F30: a stale handle is refused).
    pub(crate) fn unref(&self, index: u32) {
        let word = &self.refs[index as usize];
        // AcqRel: Release orders this holder's uses of the slot before its reuse; Acquire, for
        // the last holder, sees every other holder's.
        let old = word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(if w & REF_MASK == 1 {
                    // The generation wraps within a handle's 32 bits; a handle would have to
                    // stay stale for 2^32 reuses of one slot to be mistaken for a new one.
                    ((w >> REF_BITS).wrapping_add(1) & u64::from(u32::MAX)) << REF_BITS
                } else {
                    w - 1
                })
            })
            .unwrap_or_else(|w| w);
        debug_assert!(old & REF_MASK > 0, "reference dropped on a free slot");
        if old & REF_MASK == 1 {
            // Relaxed: published by the free list's push.
            self.entry[index as usize].store(VACANT, Ordering::Relaxed);
            // Relaxed: a count (see `alloc`).
            self.vacant.fetch_add(1, Ordering::Relaxed);
            self.free.push(index);
        }
    }

    /// Takes one free credit for a grant outside the ring (the enqueue fast path): only when
    /// no tenant is ready (a ready tenant is owed the credit).
    pub(crate) fn take_free_credit(&self) -> bool {
        self.turns.take_credit()
    }

    /// Whether a call handed a turn back since the last time this said so (the caller then
    /// wakes one waiter, who takes it through `help`).
    pub(crate) fn take_handed_back(&self) -> bool {
        // Acquire / AcqRel: pair with the Release stores in `run` and `compact_waiting`, so the
        // caller's wakes happen after the hand-back's `ctl` RMW, and a woken poller's help (its
        // `ctl` read) sees the handed-back turn. Relaxed let a poller woken through another
        // thread's take read a `ctl` from before the hand-back (loom
        // `loom_grant_hand_back_hint_reaches_a_poller`). The load keeps the common case free of
        // an RMW.
        self.handed.load(Ordering::Acquire) != 0 && self.handed.swap(0, Ordering::AcqRel) != 0
    }

    /// Tenants not idle now (in the ring, owned, or being cleaned up).
    pub(crate) fn active_tenants(&self) -> u32 {
        self.turns.active()
    }

    /// A granted cell comes back. Runs the turn it may meet.
    pub(crate) fn release(&self, now: u64, on_grant: &mut impl FnMut(u32)) {
        self.release_at(|| now, on_grant);
    }

    /// [`release`](Self::release), asking `now` for the time only if a turn runs (a release
    /// that meets no ready tenant needs no clock read). Returns whether one ran.
    pub(crate) fn release_at(
        &self,
        now: impl FnOnce() -> u64,
        on_grant: &mut impl FnMut(u32),
    ) -> bool {
        self.run_some(self.turns.give_credit(), now, on_grant)
    }

    /// Runs `turn` if the caller got one, asking `now` for the time only then. Returns whether
    /// it ran. Always inlined: most calls get no turn, and the call itself cost the fast path
    /// more than the check.
    #[inline(always)]
    fn run_some(
        &self,
        turn: Option<Turn>,
        now: impl FnOnce() -> u64,
        on_grant: &mut impl FnMut(u32),
    ) -> bool {
        match turn {
            Some(turn) => {
                self.run(turn, now(), on_grant);
                true
            }
            None => false,
        }
    }

    /// Cancels a queued request (SPEC F33): `false` unless it was still queued. A tombstone on
    /// an idle tenant is unlinked at once.
    #[cfg(test)]
    pub(crate) fn cancel(&self, index: u32, now: u64, on_grant: &mut impl FnMut(u32)) -> bool {
        self.end(index, CANCELLED, now, on_grant)
    }

    /// Ends a queued request as `why` (`CANCELLED`, `EXPIRED` or `CLOSED`): `false` unless it
    /// was still queued. The caller holds a reference on the slot. A tombstone on an idle
    /// tenant is unlinked at once.
    pub(crate) fn end(
        &self,
        index: u32,
        why: u32,
        now: u64,
        on_grant: &mut impl FnMut(u32),
    ) -> bool {
        debug_assert!(why >= CANCELLED);
        // AcqRel: Acquire pairs with the enqueue's Release store (the slot's tenant); Release
        // publishes the end to the owner whose grant CAS fails on it. A request with a change
        // pending (`CHANGED`) ends the same way; its notice, applied later, finds it ended.
        let mut s = QUEUED;
        while let Err(actual) =
            self.entry[index as usize].compare_exchange(s, why, Ordering::AcqRel, Ordering::Acquire)
        {
            if !is_queued(actual) {
                return false;
            }
            s = actual;
        }
        let tenant = self.tenant_of[index as usize].load(Ordering::Relaxed);
        pause::point("ring.cancel_marked");
        // Release: pairs with the owner's Acquire load in `has_live`.
        self.live[tenant as usize].fetch_sub(1, Ordering::Release);
        if let Some(turn) = self.turns.own_idle(tenant) {
            self.run(turn, now, on_grant);
        }
        true
    }

    /// The taker of a grant frees its slot. `false` if `index` is not granted.
    #[cfg(any(test, feature = "pause-points"))]
    pub(crate) fn take(&self, index: u32) -> bool {
        // Acquire: pairs with the grant CAS (Release); Relaxed would do for the slot's reuse,
        // which the free list's own ordering publishes.
        if self.entry[index as usize]
            .compare_exchange(GRANTED, VACANT, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        self.unref(index);
        true
    }

    /// The state of slot `index` now.
    pub(crate) fn state(&self, index: u32) -> u32 {
        // Acquire: pairs with the Release RMWs on the entry word.
        self.entry[index as usize].load(Ordering::Acquire)
    }

    /// `(free credits, ready tenants)` in `ctl`.
    pub(crate) fn counters(&self) -> (u64, u64) {
        self.turns.counters()
    }

    /// Runs `turn`, and the turns its end hands on, within one F19-sized pass: at most
    /// [`TURN_CANDIDATES`] candidates offered (grants and dropped tombstones) across them, each
    /// turn counting at least one (SPEC F25). A turn handed on once the pass is spent is handed
    /// back at once, for the next call on `ctl` or a poller's `help` to run.
    fn run(&self, turn: Turn, now: u64, on_grant: &mut impl FnMut(u32)) {
        let mut pass = self.pass;
        let mut turn = turn;
        loop {
            let before = pass;
            let next = self.run_one(turn, now, on_grant, &mut pass);
            if pass == before {
                pass = pass.saturating_sub(1);
            }
            match next {
                Some(next) if pass > 0 => turn = next,
                Some(next) => {
                    self.turns.hand_back(next);
                    // Release: pairs with `take_handed_back`'s Acquire; orders the hand-back's
                    // `ctl` RMW before the wakes the taker sends.
                    self.handed.store(1, Ordering::Release);
                    return;
                }
                None => return,
            }
        }
    }

    /// Runs one turn handed back by another call, if one waits (a free credit beside a ready
    /// tenant). What a waiting request's poll does (SPEC F18). Returns whether it ran one.
    #[cfg(any(test, feature = "pause-points"))]
    pub(crate) fn help(&self, now: u64, on_grant: &mut impl FnMut(u32)) -> bool {
        self.help_at(|| now, on_grant)
    }

    /// `help`, asking `now` for the time only if a turn runs.
    pub(crate) fn help_at(
        &self,
        now: impl FnOnce() -> u64,
        on_grant: &mut impl FnMut(u32),
    ) -> bool {
        self.run_some(self.turns.help(), now, on_grant)
    }

    /// One turn: grants up to the tenant's DRR round, taking a free credit per extra grant.
    fn run_one(
        &self,
        turn: Turn,
        now: u64,
        on_grant: &mut impl FnMut(u32),
        pass: &mut u32,
    ) -> Option<Turn> {
        let tenant = turn.tenant();
        // SAFETY: `turn` is this tenant's turn, held by this thread until `end_turn` below;
        // the handle is not used after it.
        let mut own = unsafe { self.tenants.owner(tenant) };
        self.absorb(&mut own, tenant);
        // Compaction, amortised: when tombstones outnumber the live entries (plus a slack),
        // one pass over the tenant's FIFO unlinks them all, so each cancel costs O(1) amortised
        // and a tenant with a turn never holds more tombstones than about its live entries.
        // Relaxed: a stale count only moves when the pass runs.
        let live = self.live[tenant as usize].load(Ordering::Relaxed);
        if own.len() > live.saturating_mul(2).saturating_add(COMPACT_SLACK) {
            self.purge(&mut own);
        }
        // Candidates this turn may offer (SPEC F19, F25): grants and tombstones alike. A
        // cleanup turn (no credit) grants nothing: it only unlinks tombstones.
        let mut budget = if turn.has_credit() {
            *pass
        } else {
            self.purge(&mut own);
            0
        };
        // Whether the credit held now has become a grant.
        let mut spent = false;
        // Whether the round was cut short by a busy cell or the candidate bound (credits left,
        // work left): the tenant keeps its place at the head.
        let mut front = false;
        // Whether the DRR round's credits are used up: the tenant goes to the tail.
        let mut round_over = false;
        while let Some(index) = self.grant_one(&mut own, now, &mut budget) {
            spent = true;
            on_grant(index);
            if !own.charge() {
                round_over = true;
                break;
            }
            self.absorb(&mut own, tenant);
            if own.len() == 0 || !self.has_live(tenant) {
                break;
            }
            if budget == 0 || !self.turns.take_credit() {
                front = true;
                break;
            }
            spent = false;
        }
        if budget == 0 && own.len() > 0 && turn.has_credit() && !round_over {
            // The turn's candidates are used up with entries left, mid-round: the tenant keeps
            // its place at the head.
            front = true;
        }
        if !front {
            own.end_round();
        }
        if turn.has_credit() {
            *pass = budget;
        }
        self.turns.end_turn_at(turn, spent, front, || {
            self.absorb(&mut own, tenant);
            // Nothing linked: nothing to do, whatever the live count says (a canceller stopped
            // between its CAS and its decrement must not keep this thread requeuing the tenant
            // for turns that find nothing). A tenant with nothing live leaves with no tombstone
            // linked (their slots are freed now, not at a turn that may never come); entries a
            // producer published since the count was read are `QUEUED` and stay.
            let more = own.len() > 0 && (self.has_live(tenant) || self.purge(&mut own) > 0);
            if !more {
                // Leaving: the next round starts afresh, as the policy resets a tenant that
                // leaves the ring.
                own.end_round();
            }
            more
        })
    }

    /// Compaction of tenants that wait in the ring (the rare slow path: the caller found no
    /// free slot). Takes every ready tenant's turn without a credit (up to the ready count),
    /// unlinks their tombstones and frees their slots, then requeues them at the ring's tail in
    /// the order they were popped (front queue first): with the queues emptied, that is the
    /// order in which they would have been served, and a round cut short later still goes
    /// ahead of them through the front queue. Behind a try-token of its own (the buffer's `try_lock`): a
    /// second caller returns 0 at once. Returns the slots freed.
    pub(crate) fn compact_waiting(&self) -> u32 {
        let Ok(mut held) = self.compacting.try_lock() else {
            return 0;
        };
        let (_, ready) = self.turns.counters();
        for _ in 0..ready {
            match self.turns.claim_cleanup() {
                // The buffer holds one turn per tenant at most: no allocation.
                Some(turn) if held.len() < held.capacity() => held.push(turn),
                Some(turn) => {
                    let _ = self.turns.end_turn_at(turn, false, false, || true);
                    break;
                }
                None => break,
            }
        }
        let mut freed = 0;
        for turn in held.drain(..) {
            let tenant = turn.tenant();
            // SAFETY: `turn` is this tenant's turn, held by this thread until `end_turn_at`
            // below; the handle is not used after it.
            let mut own = unsafe { self.tenants.owner(tenant) };
            self.absorb(&mut own, tenant);
            let before = own.len();
            let left = self.purge(&mut own);
            freed += before - left;
            // The tenant keeps its place even with nothing live left (the policy keeps an
            // emptied tenant in its rotation until its turn): its next turn, stale, lets it go.
            let next = self.turns.end_turn_at(turn, false, false, || true);
            if let Some(next) = next {
                self.turns.hand_back(next);
                // Release: as in `run`.
                self.handed.store(1, Ordering::Release);
            }
        }
        freed
    }

    /// Whether `tenant` has requests still `QUEUED`.
    fn has_live(&self, tenant: u32) -> bool {
        // Acquire: pairs with the Release decrements (a cancel's end is seen with its count).
        self.live[tenant as usize].load(Ordering::Acquire) > 0
    }

    /// Unlinks and frees every tombstone linked in the owned tenant. Returns the entries left.
    fn purge(&self, own: &mut super::tenant::Owner<'_>) -> u32 {
        own.purge(|i| self.state(i) >= CANCELLED, |i| self.free_tombstone(i))
    }

    /// Frees the slot of a tombstone its tenant's owner unlinked.
    fn free_tombstone(&self, index: u32) {
        let tenant = self.tenant_of[index as usize].load(Ordering::Relaxed);
        // Relaxed: a cap count; the slot is published by the free list.
        self.held[tenant as usize].fetch_sub(1, Ordering::Relaxed);
        self.unref(index);
    }

    /// Offers candidates until one is granted (`QUEUED → GRANTED`), unlinking tombstones on the
    /// way and freeing their slots. `None` when the tenant has nothing live linked.
    fn grant_one(
        &self,
        own: &mut super::tenant::Owner<'_>,
        now: u64,
        budget: &mut u32,
    ) -> Option<u32> {
        while *budget > 0 {
            let index = own.candidate(now)?;
            *budget -= 1;
            own.unlink(index);
            // AcqRel: Release publishes the grant to its taker (pairs with `take`'s Acquire);
            // Acquire pairs with a canceller's Release on failure.
            match self.entry[index as usize].compare_exchange(
                QUEUED,
                GRANTED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // Release: pairs with the Acquire load in `has_live`.
                    let tenant = self.tenant_of[index as usize].load(Ordering::Relaxed);
                    self.live[tenant as usize].fetch_sub(1, Ordering::Release);
                    // Relaxed: a cap count; the slot now belongs to the grant's taker.
                    self.held[tenant as usize].fetch_sub(1, Ordering::Relaxed);
                    return Some(index);
                }
                Err(CHANGED) => {
                    // A change (SPEC F36) won the race: it goes into the order first, then the
                    // tenant's candidate is picked again.
                    self.relink_changed(own, index);
                }
                Err(s) => {
                    debug_assert!(s >= CANCELLED);
                    self.free_tombstone(index);
                }
            }
        }
        None
    }
}

#[path = "change.rs"]
mod change;

#[cfg(all(test, not(loom)))]
#[path = "grant_tests.rs"]
mod tests;

#[cfg(all(test, loom))]
#[path = "loom_grant.rs"]
mod loom_grant;
