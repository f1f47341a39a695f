//! In-place changes of queued requests (SPEC F36): a new priority or deadline for a request
//! that is already queued, without a lock and without waiting for the thread that holds its
//! tenant's turn.
//!
//! # Protocol
//!
//! A request's node is owned by whoever holds its tenant's turn (`tenant.rs`), so a changer
//! never touches it. Instead:
//!
//! 1. The changer writes what it wants into the slot's *wanted* words (a priority with a flag,
//!    a deadline with a flag), then moves the entry word `QUEUED → CHANGED` by CAS. That CAS
//!    is the change's linearisation point: if the entry is no longer queued (granted, or
//!    ended) the change is refused as too late and its wanted words are cleared.
//! 2. It posts a *notice*: the slot's index on its tenant's notice stack (a Treiber stack with
//!    per-slot links, like the inbox). A slot is on the stack at most once: its link word is
//!    `IDLE` when it is not, and the changer that claims it (`IDLE →` a link) pushes. The
//!    notice holds a reference on the slot, so the slot is never freed and reused while it is
//!    on the stack.
//! 3. The holder of the tenant's turn, at every absorb, takes the whole stack and for each
//!    notice moves the entry `CHANGED → QUEUED`, takes the wanted words (one swap) and
//!    re-orders the node in its tenant's heap: one removal and one insertion, the order
//!    structure's insert cost. The FIFO place and the sequence number stay.
//! 4. A grant's CAS expects `QUEUED`, so it fails on `CHANGED`: the turn holder applies the
//!    change to the node it had just unlinked, links it back and picks again. A change that
//!    won its CAS is therefore always in the order before the request can be granted; one that
//!    lost it was reported too late. Neither is lost, and no change reaches an ended request.
//!
//! 5. After the push the changer *touches* the tenant's state word (`Turns::touch`): an owner
//!    is marked dirty, so its closing re-check looks at the stack again; an idle tenant (its
//!    request was granted just after the change, and it had nothing else) is owned with a
//!    cleanup turn that takes the notice. Without it a notice could keep its slot for as long
//!    as the tenant stays idle.
//!
//! Nobody waits: a changer does one CAS on the entry, one on the link, a push and one RMW on
//! the tenant's state word; a turn holder that meets a change applies it itself. A change
//! never puts the tenant in the ring and a cleanup turn has no credit, so it never gives the
//! tenant a turn it would not have had (F15): it re-orders work inside its tenant at that
//! tenant's next turn.
//!
//! # Memory orderings
//!
//! The wanted words are written before the entry CAS (Release) and read after the applier's
//! `CHANGED → QUEUED` CAS (Acquire), which reads from it or from a later change's CAS. The
//! notice link and the entry word form a Dekker pair: a changer stores the entry (`CHANGED`)
//! and then reads the link (`IDLE`?); the applier stores the link (`IDLE`) and then reads the
//! entry. With all four `SeqCst`, at least one of them sees the other: either the changer
//! finds the link `IDLE` and posts a new notice, or the applier sees `CHANGED` and applies.
//! Both are on the change path only; the grant path's one extra load is the notice stack's
//! head, read `Relaxed` at each absorb (a notice pushed after it is applied by a later absorb,
//! or by the grant CAS failing on `CHANGED`).
//!
//! # Deadlines
//!
//! The slot's *cut* is the deadline in effect: the request's own at enqueue, then whatever an
//! applied change set (never later than the request's own: the class layer clamps, because
//! the permit carries the admitted deadline). The deadline sweep reads the cut, and for an
//! entry still `CHANGED` the wanted deadline too, so a tightened deadline expires on time even
//! while its tenant has no turn; the delivery of a grant checks the cut.

use super::{is_queued, Core, CHANGED, QUEUED};
use crate::engine::tenant::Owner;
use crate::policy::heap::NONE;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// A notice link: the slot is on no notice stack.
const IDLE: u32 = NONE - 1;

/// Wanted word: the priority in the low 8 bits is wanted.
const WANT_PRIORITY: u32 = 1 << 8;
/// Wanted word: the wanted deadline word holds a deadline.
const WANT_DEADLINE: u32 = 1 << 9;

/// What a change asks for, as the applier takes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// A new priority.
    pub(crate) priority: Option<u8>,
    /// A new deadline (clock nanoseconds; `u64::MAX`: none).
    pub(crate) deadline: Option<u64>,
}

impl Wanted {
    fn is_empty(self) -> bool {
        self.priority.is_none() && self.deadline.is_none()
    }
}

/// The change is refused: the request is no longer queued.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TooLate;

/// The per-slot and per-tenant words of the protocol. See the module docs.
#[derive(Debug)]
pub(crate) struct Changes {
    /// Per slot: `WANT_PRIORITY | WANT_DEADLINE | priority`.
    wanted: Box<[AtomicU32]>,
    /// Per slot: the wanted deadline, valid under `WANT_DEADLINE`.
    wanted_deadline: Box<[AtomicU64]>,
    /// Per slot: the deadline in effect (see the module docs).
    cut: Box<[AtomicU64]>,
    /// Per slot: the next notice on its tenant's stack (`NONE`: the last), or `IDLE`.
    next: Box<[AtomicU32]>,
    /// Per tenant: the most recent notice, or `NONE`.
    heads: Box<[AtomicU32]>,
}

impl Changes {
    pub(crate) fn new(slots: u32, tenants: u32) -> Changes {
        debug_assert!(slots < IDLE);
        Changes {
            wanted: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            wanted_deadline: (0..slots).map(|_| AtomicU64::new(u64::MAX)).collect(),
            cut: (0..slots).map(|_| AtomicU64::new(u64::MAX)).collect(),
            next: (0..slots).map(|_| AtomicU32::new(IDLE)).collect(),
            heads: (0..tenants).map(|_| AtomicU32::new(NONE)).collect(),
        }
    }

    /// A new request in slot `index`, with its own `deadline`: the cut starts there.
    #[inline(always)]
    pub(crate) fn reset(&self, index: u32, deadline: u64) {
        // Relaxed: published with the entry by the enqueue's Release store.
        self.cut[index as usize].store(deadline, Ordering::Relaxed);
    }

    /// Takes what is wanted of slot `index` (the applier, after its `CHANGED → QUEUED` CAS).
    fn take(&self, index: u32) -> Wanted {
        // Acquire: pairs with the changers' Release RMWs on the word.
        let w = self.wanted[index as usize].swap(0, Ordering::Acquire);
        Wanted {
            priority: (w & WANT_PRIORITY != 0).then_some(w as u8),
            deadline: (w & WANT_DEADLINE != 0)
                // Relaxed: ordered by the swap above (the changer's store precedes its RMW).
                .then(|| self.wanted_deadline[index as usize].load(Ordering::Relaxed)),
        }
    }
}

impl Core {
    /// The deadline in effect for slot `index` (see the module docs).
    pub(crate) fn deadline_of(&self, index: u32) -> u64 {
        // Relaxed: a value written by the slot's enqueue or a turn holder's apply; readers
        // hold a reference and either own the grant (ordered by the grant's CAS) or are the
        // sweep, for which a late value only delays an expiry to its next cycle.
        self.changes.cut[index as usize].load(Ordering::Relaxed)
    }

    /// The deadline slot `index` is wanted to have by a change not applied yet, if any (for
    /// the sweep: an entry still `CHANGED` may have been tightened).
    pub(crate) fn pending_deadline(&self, index: u32) -> Option<u64> {
        // Acquire: pairs with the changers' Release RMWs on the word.
        let w = self.changes.wanted[index as usize].load(Ordering::Acquire);
        // Relaxed: ordered by the load above.
        (w & WANT_DEADLINE != 0)
            .then(|| self.changes.wanted_deadline[index as usize].load(Ordering::Relaxed))
    }

    /// Changes queued request `index` in place (SPEC F36); the caller holds a reference on the
    /// slot. `Err(TooLate)` if the request is no longer queued: nothing is changed then.
    ///
    /// The notice may need the tenant's records looked at by a cleanup turn (an idle tenant
    /// whose request was granted just after the change): grants that turn hands on are passed
    /// to `on_grant`, with `now` for aging.
    pub(crate) fn change(
        &self,
        index: u32,
        wanted: Wanted,
        now: u64,
        on_grant: &mut impl FnMut(u32),
    ) -> Result<(), TooLate> {
        self.mark_changed(index, wanted)?;
        crate::raw::pause::point("ring.change_marked");
        if let Some(tenant) = self.post_notice(index) {
            // The tenant's owner must look at the notice: if the request was granted since
            // and the tenant went idle, nobody else would, and the notice would keep the slot.
            if let Some(turn) = self.turns.touch(tenant) {
                self.run(turn, now, on_grant);
            }
        }
        Ok(())
    }

    /// The change's first half: the wanted words, then the entry `QUEUED | CHANGED → CHANGED`
    /// (the linearisation point). `Err(TooLate)` if the request is no longer queued.
    fn mark_changed(&self, index: u32, wanted: Wanted) -> Result<(), TooLate> {
        let c = &self.changes;
        let i = index as usize;
        if wanted.is_empty() {
            return if is_queued(self.state(index)) {
                Ok(())
            } else {
                Err(TooLate)
            };
        }
        if let Some(d) = wanted.deadline {
            // Relaxed: published by the Release RMW below.
            c.wanted_deadline[i].store(d, Ordering::Relaxed);
        }
        let mut bits = 0;
        if wanted.deadline.is_some() {
            bits |= WANT_DEADLINE;
        }
        let set = |w: u32| match wanted.priority {
            Some(p) => Some((w & !0xff) | WANT_PRIORITY | bits | u32::from(p)),
            None => Some(w | bits),
        };
        // Release: the wanted deadline above is seen by the applier's Acquire swap.
        let _ = c.wanted[i].fetch_update(Ordering::Release, Ordering::Relaxed, set);
        // The linearisation point: QUEUED or CHANGED → CHANGED. SeqCst: one side of the
        // Dekker pair with the applier (module docs).
        let mut s = self.state(index);
        loop {
            if !is_queued(s) {
                // Not queued, for good (the slot cannot be reused while we hold it): what
                // anyone wanted of it is moot.
                // Relaxed: nobody applies it any more.
                c.wanted[i].store(0, Ordering::Relaxed);
                return Err(TooLate);
            }
            match self.entry[i].compare_exchange(s, CHANGED, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return Ok(()),
                Err(actual) => s = actual,
            }
        }
    }

    /// Puts slot `index` on its tenant's notice stack unless it is there already; returns
    /// the tenant if it pushed.
    fn post_notice(&self, index: u32) -> Option<u32> {
        let c = &self.changes;
        let link = &c.next[index as usize];
        // SeqCst: the other side of the Dekker pair (module docs). Claiming stores `NONE`;
        // the push below writes the real link before publishing it.
        if link
            .compare_exchange(IDLE, NONE, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return None;
        }
        // The notice's own reference: the slot stays ours (no reuse) while it is on the
        // stack. Relaxed: the caller holds a reference, so the count is not zero.
        self.refs[index as usize].fetch_add(1, Ordering::Relaxed);
        // Relaxed: the slot's tenant cannot change while we hold a reference.
        let tenant = self.tenant_of[index as usize].load(Ordering::Relaxed);
        let head = &c.heads[tenant as usize];
        let mut h = head.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release CAS below.
            link.store(h, Ordering::Relaxed);
            // Release: publishes the link (and the wanted words, and the entry CAS before
            // it) to the applier's Acquire swap.
            match head.compare_exchange_weak(h, index, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return Some(tenant),
                Err(actual) => h = actual,
            }
        }
    }

    /// Absorbs the owned tenant's inbox, then applies the notices on its stack.
    #[inline(always)]
    pub(crate) fn absorb(&self, own: &mut Owner<'_>, tenant: u32) {
        own.absorb();
        // Relaxed: a hint; a notice pushed after this load is applied by a later absorb, or
        // by a grant CAS that fails on `CHANGED`.
        if self.changes.heads[tenant as usize].load(Ordering::Relaxed) != NONE {
            self.apply_notices(own, tenant);
        }
    }

    #[cold]
    fn apply_notices(&self, own: &mut Owner<'_>, tenant: u32) {
        let c = &self.changes;
        // Acquire: pairs with the Release CAS of every push in the chain.
        let mut cur = c.heads[tenant as usize].swap(NONE, Ordering::Acquire);
        while cur != NONE {
            let index = cur;
            // Relaxed: the chain is ours since the swap.
            cur = c.next[index as usize].load(Ordering::Relaxed);
            // SeqCst: the Dekker pair (module docs): from here a changer posts anew.
            c.next[index as usize].store(IDLE, Ordering::SeqCst);
            let s = self.entry[index as usize].load(Ordering::SeqCst);
            if !is_queued(s) {
                // Ended with a change pending: what was wanted is moot, and the slot is
                // cleared of it before the notice's reference lets it be reused.
                // Relaxed: published by the free list when the slot is freed.
                c.wanted[index as usize].store(0, Ordering::Relaxed);
            } else if s == CHANGED {
                if !own.is_linked(index) {
                    // Published to the inbox after this turn's absorb, and changed since.
                    own.absorb();
                }
                if own.is_linked(index) {
                    if let Some(w) = self.take_change(index) {
                        own.reorder(index, w.priority, w.deadline);
                        self.note_cut(index, w);
                    }
                }
            }
            self.unref(index);
        }
    }

    /// `CHANGED → QUEUED`, taking what is wanted; `None` if the entry is not `CHANGED` (another
    /// applier took it, or it ended).
    fn take_change(&self, index: u32) -> Option<Wanted> {
        // SeqCst: as the changers' CAS; Acquire for the wanted words.
        self.entry[index as usize]
            .compare_exchange(CHANGED, QUEUED, Ordering::SeqCst, Ordering::SeqCst)
            .ok()
            .map(|_| self.changes.take(index))
    }

    /// The grant of `index` failed on `CHANGED` after the turn holder unlinked it: applies the
    /// change to what it held and links it back.
    pub(crate) fn relink_changed(&self, own: &mut Owner<'_>, index: u32) {
        let w = self.take_change(index).unwrap_or_default();
        own.relink(index, w.priority, w.deadline);
        self.note_cut(index, w);
    }

    fn note_cut(&self, index: u32, w: Wanted) {
        if let Some(d) = w.deadline {
            // Relaxed: see `deadline_of`.
            self.changes.cut[index as usize].store(d, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
impl Core {
    /// Whether slot `index` is on no notice stack, wants nothing, and holds no reference
    /// (free).
    pub(crate) fn change_quiet(&self, index: u32, tenant: u32) -> bool {
        let c = &self.changes;
        // SeqCst loads: an observation after the threads joined.
        c.next[index as usize].load(Ordering::SeqCst) == IDLE
            && c.wanted[index as usize].load(Ordering::SeqCst) == 0
            && c.heads[tenant as usize].load(Ordering::SeqCst) == NONE
            && self.refs[index as usize].load(Ordering::SeqCst) & super::REF_MASK == 0
    }
}

#[cfg(all(test, loom))]
#[path = "loom_change.rs"]
mod loom_change;

#[cfg(all(test, not(loom)))]
#[path = "change_tests.rs"]
mod tests;
