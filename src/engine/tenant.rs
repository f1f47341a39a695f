//! Per-tenant records of the tenant-ring engine (docs/ring-engine.md): each tenant's own inbox,
//! order heap, FIFO and DRR deficit, touched only by the thread that holds the tenant's turn.
//!
//! # Ownership
//!
//! An entry slot's [`Node`] passes through three owners, never shared between two:
//!
//! 1. the producer that allocated the slot writes the entry's metadata ([`Tenants::stage`]);
//! 2. it pushes the slot onto its tenant's *inbox* ([`Tenants::publish`]), a Treiber stack whose
//!    head is per tenant and whose links are per slot (so the inboxes of 10^4 tenants cost one
//!    word per tenant and one per slot, not a slot array each);
//! 3. the owner of the tenant's turn detaches the whole inbox ([`Owner::absorb`]) and links the
//!    slots into the tenant's pairing heap (SPEC F13: higher priority, earlier deadline, earlier
//!    sequence) and FIFO (F14, aging). From then on only owners of that tenant touch the node,
//!    until one of them unlinks it.
//!
//! A node is only ever linked with nodes of its own tenant, so two owners of different tenants
//! never touch the same node, and an owner never borrows the node array as a whole (the heap
//! reaches nodes through [`View`], one node per access).
//!
//! # Order within a tenant
//!
//! The same rules as the sequential [`Policy`](crate::policy::Policy) for one tenant: the
//! candidate is the FIFO head if it has waited at least `starvation_after` (F14), else the heap
//! top (F13). Sequence numbers are per tenant, assigned in inbox order when the owner absorbs
//! (the push order, which is the order the enqueues linearised in); they only break ties inside
//! one tenant, so per-tenant counters give the same order as the policy's class-wide one.
//!
//! # DRR (F12)
//!
//! The deficit lives in the record: a turn's credits are fixed at its first grant (the weight of
//! the tenant's most recent absorbed insert), as in the policy. [`Owner::charge`] spends one and
//! says whether the turn may grant again.

use core::ops::{Index, IndexMut};

use crate::policy::heap::{self, Links, Order, NONE};
use crate::policy::rank::{self, Rank};
use crate::policy::NO_DEADLINE;
use crate::sync::{AtomicU32, Ordering, UnsafeCell};

/// What a producer knows about a request when it queues it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    /// Higher is served first within the tenant.
    pub(crate) priority: u8,
    /// Absolute deadline in clock nanoseconds; [`NO_DEADLINE`] if none.
    pub(crate) deadline: u64,
    /// When the request was queued, on the clock `now` comes from.
    pub(crate) enqueued_at: u64,
    /// The tenant's DRR weight (grants per turn), `>= 1`; the latest insert's weight wins.
    pub(crate) weight: u32,
}

/// Ordering metadata and links of one entry slot.
#[derive(Clone, Copy, Debug)]
struct Node {
    /// Per-tenant sequence number, assigned at absorb.
    seq: u64,
    deadline: u64,
    enqueued_at: u64,
    order: Links,
    fifo_prev: u32,
    fifo_next: u32,
    weight: u32,
    /// Whether the node is linked into its tenant's heap and FIFO.
    linked: bool,
    priority: u8,
}

impl Node {
    const VACANT: Node = Node {
        seq: 0,
        deadline: NO_DEADLINE,
        enqueued_at: 0,
        order: Links::DETACHED,
        fifo_prev: NONE,
        fifo_next: NONE,
        weight: 1,
        linked: false,
        priority: 0,
    };
}

impl Node {
    #[inline(always)]
    fn rank(&self) -> Rank {
        Rank {
            priority: self.priority,
            deadline: self.deadline,
            seq: self.seq,
        }
    }
}

/// The within-tenant order (F13): the policy's [`Rank`].
struct ByRank;

impl Order<Node> for ByRank {
    #[inline(always)]
    fn links(node: &Node) -> &Links {
        &node.order
    }
    #[inline(always)]
    fn links_mut(node: &mut Node) -> &mut Links {
        &mut node.order
    }
    #[inline(always)]
    fn before(a: &Node, b: &Node) -> bool {
        a.rank().before(b.rank())
    }
}

/// One tenant's record, touched only by the holder of its turn.
#[derive(Clone, Copy, Debug)]
struct Record {
    root: u32,
    fifo_head: u32,
    fifo_tail: u32,
    count: u32,
    /// Weight of the most recent absorbed insert.
    weight: u32,
    /// Credits left in the current turn; 0: no turn has started.
    deficit: u32,
    next_seq: u64,
}

impl Record {
    const IDLE: Record = Record {
        root: NONE,
        fifo_head: NONE,
        fifo_tail: NONE,
        count: 0,
        weight: 1,
        deficit: 0,
        next_seq: 0,
    };
}

/// The per-tenant records and inboxes of one class. See the module docs.
pub(crate) struct Tenants {
    nodes: Box<[UnsafeCell<Node>]>,
    records: Box<[UnsafeCell<Record>]>,
    /// Per tenant: the most recently published slot of its inbox, or `NONE`.
    heads: Box<[AtomicU32]>,
    /// Per slot: the slot published before it in the same inbox (reversed by the absorbing
    /// owner once detached).
    next: Box<[AtomicU32]>,
    starvation_after: u64,
}

// SAFETY: the cells are only accessed under the ownership protocol of the module docs (a slot's
// node by its producer before publication, then by the holder of its tenant's turn; a record by
// the holder of its tenant's turn); the turn protocol hands each turn to one thread at a time
// with acquire/release edges between consecutive holders.
unsafe impl Sync for Tenants {}
// SAFETY: plain data; see `Sync`.
unsafe impl Send for Tenants {}

impl core::fmt::Debug for Tenants {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tenants")
            .field("slots", &self.nodes.len())
            .field("tenants", &self.records.len())
            .finish()
    }
}

impl Tenants {
    /// Records for tenants `0..tenants` and entry slots `0..slots` (both below `u32::MAX`).
    pub(crate) fn new(slots: u32, tenants: u32, starvation_after: u64) -> Tenants {
        debug_assert!(slots < NONE && tenants < NONE);
        Tenants {
            nodes: (0..slots).map(|_| UnsafeCell::new(Node::VACANT)).collect(),
            records: (0..tenants)
                .map(|_| UnsafeCell::new(Record::IDLE))
                .collect(),
            heads: (0..tenants).map(|_| AtomicU32::new(NONE)).collect(),
            next: (0..slots).map(|_| AtomicU32::new(NONE)).collect(),
            starvation_after,
        }
    }

    /// Writes the metadata of slot `index` before it is published.
    ///
    /// # Safety
    ///
    /// The caller owns slot `index` exclusively: it is in no inbox and linked in no tenant's
    /// structures, and no other thread accesses its node until [`publish`](Self::publish).
    pub(crate) unsafe fn stage(&self, index: u32, meta: Meta) {
        debug_assert!(meta.weight >= 1);
        self.nodes[index as usize].with_mut(|p| {
            // SAFETY: the caller owns the slot (contract above).
            let n = unsafe { &mut *p };
            debug_assert!(!n.linked, "staging a linked slot");
            *n = Node {
                deadline: meta.deadline,
                enqueued_at: meta.enqueued_at,
                weight: meta.weight,
                priority: meta.priority,
                ..Node::VACANT
            };
        });
    }

    /// Pushes staged slot `index` onto `tenant`'s inbox. Returns whether the inbox was empty.
    /// The caller gives up the slot's node to the tenant's next owner.
    pub(crate) fn publish(&self, tenant: u32, index: u32) -> bool {
        let head = &self.heads[tenant as usize];
        let link = &self.next[index as usize];
        let mut h = head.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release CAS below.
            link.store(h, Ordering::Relaxed);
            // Release: publishes the link and the staged node; pairs with the Acquire swap in
            // `absorb`. Relaxed on failure: the link is rewritten before the retry.
            match head.compare_exchange_weak(h, index, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return h == NONE,
                Err(actual) => h = actual,
            }
        }
    }

    /// Whether `tenant`'s inbox holds published slots now (a hint; see the turn protocol's
    /// dirty re-check for how a late publication is not lost).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn inbox_nonempty(&self, tenant: u32) -> bool {
        // Acquire: pairs with the Release CAS of `publish`.
        self.heads[tenant as usize].load(Ordering::Acquire) != NONE
    }

    /// The owner's handle on `tenant`'s record.
    ///
    /// # Safety
    ///
    /// The caller holds `tenant`'s turn (or otherwise has exclusive access to its record and its
    /// linked nodes) for the handle's whole life, and creates no second handle for the tenant
    /// meanwhile.
    pub(crate) unsafe fn owner(&self, tenant: u32) -> Owner<'_> {
        Owner {
            tenants: self,
            tenant,
            // SAFETY: exclusive per the contract; the cell lives as long as `self`.
            rec: unsafe { &mut *self.records[tenant as usize].with_mut(|p| p) },
            view: View { cells: &self.nodes },
        }
    }
}

/// The node array as one owner sees it: every access touches one node, which must be linked in
/// (or being linked into) the owner's tenant.
struct View<'a> {
    cells: &'a [UnsafeCell<Node>],
}

impl Index<usize> for View<'_> {
    type Output = Node;
    #[inline(always)]
    fn index(&self, i: usize) -> &Node {
        // SAFETY: a View exists only inside an `Owner`, whose creator holds the tenant's turn;
        // the heap and FIFO links it follows lead only to nodes of that tenant, which no other
        // thread accesses meanwhile.
        unsafe { &*self.cells[i].with(|p| p) }
    }
}

impl IndexMut<usize> for View<'_> {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut Node {
        // SAFETY: as `index`; `&mut self` keeps this the only live reference from this view.
        unsafe { &mut *self.cells[i].with_mut(|p| p) }
    }
}

/// The holder of a tenant's turn, with its record. See [`Tenants::owner`].
pub(crate) struct Owner<'a> {
    tenants: &'a Tenants,
    tenant: u32,
    rec: &'a mut Record,
    view: View<'a>,
}

impl Owner<'_> {
    /// Links every slot published to the tenant's inbox so far into its heap and FIFO, in
    /// publication order. Returns how many.
    pub(crate) fn absorb(&mut self) -> u32 {
        // Acquire: pairs with the Release CAS of every `publish` in the detached chain.
        let mut cur = self.tenants.heads[self.tenant as usize].swap(NONE, Ordering::Acquire);
        let mut reversed = NONE;
        while cur != NONE {
            let link = &self.tenants.next[cur as usize];
            // Relaxed: the chain is ours since the Acquire swap.
            let older = link.load(Ordering::Relaxed);
            link.store(reversed, Ordering::Relaxed);
            reversed = cur;
            cur = older;
        }
        let mut n = 0;
        while reversed != NONE {
            let index = reversed;
            // Relaxed: as above.
            reversed = self.tenants.next[index as usize].load(Ordering::Relaxed);
            self.link(index);
            n += 1;
        }
        n
    }

    fn link(&mut self, index: u32) {
        let rec = &mut *self.rec;
        let tail = rec.fifo_tail;
        let seq = rec.next_seq;
        rec.next_seq += 1;
        let node = &mut self.view[index as usize];
        debug_assert!(!node.linked);
        node.seq = seq;
        node.order = Links::DETACHED;
        node.fifo_prev = tail;
        node.fifo_next = NONE;
        node.linked = true;
        rec.weight = node.weight;
        if tail != NONE {
            self.view[tail as usize].fifo_next = index;
        }
        rec.root = heap::push::<Node, ByRank, _>(&mut self.view, rec.root, index);
        if rec.fifo_head == NONE {
            rec.fifo_head = index;
        }
        rec.fifo_tail = index;
        rec.count += 1;
    }

    /// Linked entries (not counting unabsorbed inbox slots).
    pub(crate) fn len(&self) -> u32 {
        self.rec.count
    }

    /// The entry to offer next at `now`, if any is linked: the FIFO head if it has waited at
    /// least `starvation_after` (F14), else the heap top (F13).
    pub(crate) fn candidate(&self, now: u64) -> Option<u32> {
        if self.rec.count == 0 {
            return None;
        }
        let oldest = self.rec.fifo_head;
        let at = self.view[oldest as usize].enqueued_at;
        Some(rank::pick(
            self.rec.root,
            oldest,
            at,
            now,
            self.tenants.starvation_after,
        ))
    }

    /// Whether `index` is linked in this tenant's order (absorbed and not unlinked since).
    ///
    /// The caller knows the slot belongs to this tenant: it is linked here, or published to
    /// the tenant's inbox (with a happens-before edge from its publication), or out of every
    /// order and untouched by anyone else.
    pub(crate) fn is_linked(&self, index: u32) -> bool {
        self.view[index as usize].linked
    }

    /// Changes the priority and/or deadline of linked entry `index` in place (SPEC F36) and
    /// re-orders it: one heap removal and one insertion, O(log n); its sequence number and its
    /// FIFO place (F14) stay.
    pub(crate) fn reorder(&mut self, index: u32, priority: Option<u8>, deadline: Option<u64>) {
        debug_assert!(self.is_linked(index), "reorder of a slot not linked");
        let rec = &mut *self.rec;
        let root = heap::remove::<Node, ByRank, _>(&mut self.view, rec.root, index);
        let node = &mut self.view[index as usize];
        if let Some(p) = priority {
            node.priority = p;
        }
        if let Some(d) = deadline {
            node.deadline = d;
        }
        rec.root = heap::push::<Node, ByRank, _>(&mut self.view, root, index);
    }

    /// Links back entry `index`, which [`unlink`](Self::unlink) just took out (with nothing
    /// linked or unlinked in this tenant since), with its priority and/or deadline changed:
    /// the FIFO place, sequence number and enqueue time it had, a new place in the heap.
    pub(crate) fn relink(&mut self, index: u32, priority: Option<u8>, deadline: Option<u64>) {
        let mut node = self.view[index as usize];
        debug_assert!(!node.linked, "relink of a linked slot");
        node.linked = true;
        if let Some(p) = priority {
            node.priority = p;
        }
        if let Some(d) = deadline {
            node.deadline = d;
        }
        node.order = Links::DETACHED;
        let (prev, next) = (node.fifo_prev, node.fifo_next);
        self.view[index as usize] = node;
        let rec = &mut *self.rec;
        if prev == NONE {
            rec.fifo_head = index;
        } else {
            self.view[prev as usize].fifo_next = index;
        }
        if next == NONE {
            rec.fifo_tail = index;
        } else {
            self.view[next as usize].fifo_prev = index;
        }
        rec.count += 1;
        rec.root = heap::push::<Node, ByRank, _>(&mut self.view, rec.root, index);
    }

    /// Unlinks `index`, which must be linked in this tenant, from its heap and FIFO in
    /// O(log n). The slot's node is the caller's again; it keeps what it held until the slot is
    /// staged again, for a [`relink`](Self::relink).
    pub(crate) fn unlink(&mut self, index: u32) {
        let node = self.view[index as usize];
        debug_assert!(node.linked, "unlink of a slot not linked");
        let rec = &mut *self.rec;
        rec.root = heap::remove::<Node, ByRank, _>(&mut self.view, rec.root, index);
        if node.fifo_prev == NONE {
            rec.fifo_head = node.fifo_next;
        } else {
            self.view[node.fifo_prev as usize].fifo_next = node.fifo_next;
        }
        if node.fifo_next == NONE {
            rec.fifo_tail = node.fifo_prev;
        } else {
            self.view[node.fifo_next as usize].fifo_prev = node.fifo_prev;
        }
        rec.count -= 1;
        // Only the flag: the rest stays as it was (the next `stage` rewrites the node), so a
        // `relink` right after finds the FIFO place, sequence and enqueue time still there.
        self.view[index as usize].linked = false;
    }

    /// Unlinks every linked entry for which `dead` holds, walking the FIFO once, and passes each
    /// to `freed`. Returns how many linked entries are left. O(linked entries).
    pub(crate) fn purge(&mut self, dead: impl Fn(u32) -> bool, mut freed: impl FnMut(u32)) -> u32 {
        let mut cur = self.rec.fifo_head;
        while cur != NONE {
            let next = self.view[cur as usize].fifo_next;
            if dead(cur) {
                self.unlink(cur);
                freed(cur);
            }
            cur = next;
        }
        self.rec.count
    }

    /// Charges one grant to the current DRR turn (F12): the turn's credits are fixed at its
    /// first grant to the tenant's weight. Returns whether credits are left, i.e. whether the
    /// turn may grant again before the tenant goes back to the ring's tail.
    pub(crate) fn charge(&mut self) -> bool {
        let rec = &mut *self.rec;
        if rec.deficit == 0 {
            rec.deficit = rec.weight;
        }
        rec.deficit -= 1;
        rec.deficit > 0
    }

    /// Ends the DRR turn: the next grant starts a fresh one. Called when the tenant goes back
    /// to the ring's tail or to idle.
    pub(crate) fn end_round(&mut self) {
        self.rec.deficit = 0;
    }

    /// Whether a DRR turn is under way (granted at least once, credits left).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn mid_round(&self) -> bool {
        self.rec.deficit > 0
    }
}

#[cfg(all(test, not(loom)))]
#[path = "tenant_tests.rs"]
mod tests;
