//! The sequential scheduling policy of one class: who is granted next.
//!
//! The oracle's mutex twin drives this plain, single-threaded code under its lock. The engine
//! keeps the same order in its per-tenant records (`engine/tenant.rs`), which are tested against
//! this policy (`tenant_tests.rs`, `grant_tests.rs`) and, through the scheduler, by the
//! differential test, so a single-threaded history gives the same grant order on both (SPEC
//! Q02). Everything here is
//! deterministic: the outputs depend only on the sequence of calls and their arguments.
//!
//! # Model
//!
//! The engine owns the entries; the policy knows them only by their arena slot index
//! (`0..capacity`) and keeps its ordering metadata in arrays allocated once by [`Policy::new`].
//! No operation allocates afterwards.
//!
//! * **Rotation (F11).** A fixed ring of tenant ids holds a tenant iff it is *in rotation*. A
//!   tenant joins the tail when it gets an entry while out of the ring. When its turn ends it
//!   rotates to the tail if it still has entries, else it leaves and keeps no state. A tenant
//!   whose entries were all removed (cancelled, expired, dropped) keeps its ring position until
//!   its turn comes and is skipped then (lazy removal).
//! * **Deficit round robin (F12).** A turn grants up to `weight` entries, the weight of the
//!   tenant's most recent insert. The credits of a turn are fixed at its first grant, so a pass
//!   that stops early ([`Verdict::Keep`]) changes nothing.
//! * **Order within a tenant (F13, F14).** Each tenant keeps its entries in an intrusive pairing
//!   heap ordered by (higher priority, earlier deadline, earlier sequence) and in a FIFO by
//!   sequence. If the FIFO head has waited at least `starvation_after` it is the candidate (the
//!   oldest aged request); otherwise the heap top is. Both structures are per tenant, so neither
//!   priority (F15) nor aging (F14) crosses tenants.
//! * **Deadlines (F46).** Entries with a finite deadline also sit in one class-wide pairing heap
//!   ordered by (deadline, sequence); [`Policy::expire`] pops expired entries from it in O(log n)
//!   each.
//! * **Bounds (F19, F20).** Every candidate shown to the [`Judge`] costs one unit of the caller's
//!   budget. Selection only touches ring tenants and their live entries.
//!
//! Aging compares `now - enqueued_at` of the FIFO head only: callers pass `enqueued_at` values
//! that never decrease in insertion order (they read one monotonic clock), so the FIFO head is
//! the oldest entry by time as well as by sequence.
//!
//! # Layout
//!
//! The brief for this module suggested a struct of arrays; each entry's metadata is instead one
//! 64-byte [`Node`] (array of structs), because every heap comparison reads priority, deadline
//! and sequence together and every unlink touches all of an entry's links: one cache line per
//! entry instead of up to six.

pub(crate) mod heap;
pub(crate) mod rank;

/// The most cells a class may have (SPEC F01): 2^20. Checked before anything is allocated.
pub(crate) const MAX_CELLS: u32 = 1 << 20;
/// The largest `queue_capacity` of a class (SPEC F01): 2^22. A class has `2 * queue_capacity +
/// cells` entry slots, so with [`MAX_CELLS`] at most 9,437,184, which the twin's 24-bit slot
/// index holds.
pub(crate) const MAX_QUEUE_CAPACITY: u32 = 1 << 22;
/// The most tenants a ledger (and each class's policy) may be built for (SPEC F01): 2^24.
pub(crate) const MAX_TENANTS: u32 = 1 << 24;

use crate::error::Reason;
use crate::error::{Code, Error};
use heap::{Links, Order, NONE};

/// Sizes and limits of one class's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PolicyConfig {
    /// Number of entry slots; entry indices are `0..capacity`. Must be below `u32::MAX`.
    pub capacity: u32,
    /// Number of tenant ids; tenant ids are `0..max_tenants`. Must be in `1..u32::MAX`.
    pub max_tenants: u32,
    /// Waiting time in nanoseconds after which an entry precedes every newer entry of its
    /// tenant (F14). Must be positive.
    pub starvation_after: u64,
}

/// What the policy needs to know about one entry when it is queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EntryMeta {
    /// The owning tenant, `< max_tenants`.
    pub tenant: u32,
    /// Higher is served first within the tenant.
    pub priority: u8,
    /// Absolute deadline in nanoseconds; [`NO_DEADLINE`] sorts after every finite deadline.
    pub deadline: u64,
    /// When the entry was queued, in nanoseconds on the clock `now` comes from.
    pub enqueued_at: u64,
    /// The tenant's DRR weight (grants per turn), `>= 1`. The latest insert's weight wins.
    pub weight: u32,
}

/// The deadline of an entry that has none.
pub(crate) const NO_DEADLINE: u64 = u64::MAX;

/// The engine's decision on a candidate the policy offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The engine granted the entry: the policy removes it and charges the tenant's turn.
    Take,
    /// The entry is dead (cancelled, expired, lost a race): the policy removes it without
    /// charging the turn and moves on.
    Drop,
    /// Stop now and leave the entry queued (for example, no cell to grant with).
    Keep,
}

/// The engine's side of a selection pass.
pub(crate) trait Judge {
    /// Decides the fate of `index`, the entry the policy would pick next.
    fn judge(&mut self, index: u32) -> Verdict;
}

impl<F: FnMut(u32) -> Verdict> Judge for F {
    #[inline]
    fn judge(&mut self, index: u32) -> Verdict {
        self(index)
    }
}

/// Ordering metadata and links of one entry slot; exactly one cache line.
///
/// `tenant == NONE` iff the slot is not queued; then every link is `NONE`.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Node {
    /// Enqueue sequence number (unique among queued entries; the final tie-breaker).
    seq: u64,
    /// Absolute deadline, [`NO_DEADLINE`] if none.
    deadline: u64,
    /// Enqueue time, for aging.
    enqueued_at: u64,
    /// Links in the tenant's order heap.
    order: Links,
    /// Links in the class-wide deadline heap (detached when `deadline == NO_DEADLINE`).
    by_deadline: Links,
    /// Previous entry of the tenant's FIFO, or `NONE`.
    fifo_prev: u32,
    /// Next entry of the tenant's FIFO, or `NONE`.
    fifo_next: u32,
    /// Owning tenant, or `NONE` when the slot is not queued.
    tenant: u32,
    /// Priority, higher first.
    priority: u8,
}

const _: () = assert!(core::mem::size_of::<Node>() == 64);

impl Node {
    /// A slot that is not queued.
    const VACANT: Node = Node {
        seq: 0,
        deadline: NO_DEADLINE,
        enqueued_at: 0,
        order: Links::DETACHED,
        by_deadline: Links::DETACHED,
        fifo_prev: NONE,
        fifo_next: NONE,
        tenant: NONE,
        priority: 0,
    };
}

impl Node {
    #[inline(always)]
    fn rank(&self) -> rank::Rank {
        rank::Rank {
            priority: self.priority,
            deadline: self.deadline,
            seq: self.seq,
        }
    }
}

/// The within-tenant order (F13, [`rank`]).
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

/// The class-wide expiry order: earlier deadline, then earlier sequence.
struct ByDeadline;

impl Order<Node> for ByDeadline {
    #[inline(always)]
    fn links(node: &Node) -> &Links {
        &node.by_deadline
    }
    #[inline(always)]
    fn links_mut(node: &mut Node) -> &mut Links {
        &mut node.by_deadline
    }
    #[inline(always)]
    fn before(a: &Node, b: &Node) -> bool {
        (a.deadline, a.seq) < (b.deadline, b.seq)
    }
}

/// Per-tenant state.
///
/// A tenant out of the ring has `count == 0`, `credits == 0` and empty structures (it keeps no
/// state). A tenant in the ring may have `count == 0` (its entries were removed; it is skipped
/// and reset at its turn).
#[derive(Clone, Copy, Debug)]
struct Tenant {
    /// Root of the order heap, or `NONE`.
    root: u32,
    /// Oldest queued entry, or `NONE`.
    fifo_head: u32,
    /// Newest queued entry, or `NONE`.
    fifo_tail: u32,
    /// Number of queued entries.
    count: u32,
    /// Weight of the most recent insert (credits granted at the start of a turn).
    weight: u32,
    /// Credits left in the current turn; 0 means no turn has started.
    credits: u32,
    /// Whether the tenant is in the ring.
    in_ring: bool,
}

impl Tenant {
    /// A tenant with no entries, out of rotation.
    const IDLE: Tenant = Tenant {
        root: NONE,
        fifo_head: NONE,
        fifo_tail: NONE,
        count: 0,
        weight: 1,
        credits: 0,
        in_ring: false,
    };
}

/// The sequential policy of one class. See the module docs for the rules.
#[derive(Debug)]
pub(crate) struct Policy {
    /// One node per entry slot.
    nodes: Box<[Node]>,
    /// One record per tenant id.
    tenants: Box<[Tenant]>,
    /// Ring of tenant ids in rotation; `ring_len` of them starting at `ring_head`, wrapping.
    ring: Box<[u32]>,
    /// Position of the ring's head in `ring`.
    ring_head: u32,
    /// Number of tenants in the ring.
    ring_len: u32,
    /// Root of the class-wide deadline heap, or `NONE`.
    deadline_root: u32,
    /// Number of queued entries.
    len: u32,
    /// The sequence number the next insert gets.
    next_seq: u64,
    /// Aging threshold in nanoseconds.
    starvation_after: u64,
}

impl Policy {
    /// Builds an empty policy, allocating all its storage.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` naming `capacity` (`u32::MAX` is reserved),
    /// `max_tenants` (0 or above 2^24) or `starvation_after` (0). Nothing is allocated before
    ///  the checks.
    pub(crate) fn new(cfg: PolicyConfig) -> Result<Self, Error> {
        Self::with_first_sequence(cfg, 0)
    }

    /// Like [`Policy::new`], but the first insert gets sequence number `first`. Lets tests reach
    /// sequence exhaustion (F21).
    pub(crate) fn with_first_sequence(cfg: PolicyConfig, first: u64) -> Result<Self, Error> {
        if cfg.capacity == u32::MAX {
            return Err(Error::configuration("capacity"));
        }
        if cfg.max_tenants == 0 || cfg.max_tenants > MAX_TENANTS {
            return Err(Error::configuration("max_tenants"));
        }
        if cfg.starvation_after == 0 {
            return Err(Error::configuration("starvation_after"));
        }
        Ok(Self {
            nodes: vec![Node::VACANT; cfg.capacity as usize].into_boxed_slice(),
            tenants: vec![Tenant::IDLE; cfg.max_tenants as usize].into_boxed_slice(),
            ring: vec![NONE; cfg.max_tenants as usize].into_boxed_slice(),
            ring_head: 0,
            ring_len: 0,
            deadline_root: NONE,
            len: 0,
            next_seq: first,
            starvation_after: cfg.starvation_after,
        })
    }

    /// Number of queued entries.
    #[inline]
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether no entry is queued. (The ring may still hold tenants awaiting lazy removal.)
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of tenants in the ring, including ones whose entries were all removed and that
    /// have not reached their turn yet.
    #[inline]
    pub(crate) fn queued_tenants(&self) -> usize {
        self.ring_len as usize
    }

    /// Whether the ring holds tenants although no entry is queued: tenants whose work was all
    /// removed and whose turn has not come yet (lazy removal, F11). A grant made without a
    /// selection (the engines' fast path) must not pass them by: the engines close their fast
    /// path while this holds, so the next grant is a selection that lets them leave.
    #[inline]
    pub(crate) fn holds_emptied_tenants(&self) -> bool {
        self.len == 0 && self.ring_len > 0
    }

    /// Lets every tenant whose work was all removed leave the ring, at once: a grant made
    /// without a selection (the engines' fast path, which runs only when nothing is queued) was
    /// their turn (F11).
    pub(crate) fn retire_emptied_tenants(&mut self) {
        debug_assert!(self.len == 0, "only emptied tenants may be retired");
        while self.ring_len > 0 {
            let t = self.ring[self.ring_head as usize];
            self.ring_pop();
            self.tenants[t as usize] = Tenant::IDLE;
        }
    }

    /// Whether `index` is queued.
    #[inline]
    pub(crate) fn contains(&self, index: u32) -> bool {
        self.nodes
            .get(index as usize)
            .is_some_and(|n| n.tenant != NONE)
    }

    /// The tenant at the ring's head (whose turn it is), if any.
    #[inline]
    #[cfg(test)]
    pub(crate) fn peek_tenant(&self) -> Option<u32> {
        (self.ring_len != 0).then(|| self.ring[self.ring_head as usize])
    }

    /// The sequence number of queued entry `index`.
    #[cfg(test)]
    pub(crate) fn sequence(&self, index: u32) -> Option<u64> {
        self.contains(index).then(|| self.nodes[index as usize].seq)
    }

    /// The priority of queued entry `index`.
    #[cfg(test)]
    pub(crate) fn priority(&self, index: u32) -> Option<u8> {
        self.contains(index)
            .then(|| self.nodes[index as usize].priority)
    }

    /// Number of queued entries of `tenant` (0 for an unknown tenant).
    #[cfg(test)]
    pub(crate) fn tenant_len(&self, tenant: u32) -> usize {
        self.tenants
            .get(tenant as usize)
            .map_or(0, |t| t.count as usize)
    }

    /// The entry [`select`](Policy::select) would offer first at `now`, without changing
    /// anything: the candidate of the first ring tenant that still has entries.
    #[cfg(test)]
    pub(crate) fn peek(&self, now: u64) -> Option<u32> {
        (0..self.ring_len)
            .map(|i| self.ring[self.ring_slot(i)])
            .find(|&t| self.tenants[t as usize].count != 0)
            .map(|t| self.candidate(t, now))
    }

    /// Queues entry `index` and returns its sequence number. A tenant out of rotation joins the
    /// ring's tail (F11); the tenant's weight becomes `meta.weight` (F12).
    ///
    /// # Errors
    ///
    /// Nothing is changed on error.
    /// * `internal / policy-slot`: `index` is out of range or already queued.
    /// * `invalid-argument / tenant-out-of-range`: `meta.tenant >= max_tenants`.
    /// * `invalid-argument / zero-weight`: `meta.weight == 0`.
    /// * `unavailable / sequence-exhausted`: no sequence number is left (F21).
    pub(crate) fn insert(&mut self, index: u32, meta: EntryMeta) -> Result<u64, Error> {
        if self.contains(index) || index as usize >= self.nodes.len() {
            return Err(Error::new(Code::Internal, Reason::PolicySlot));
        }
        if meta.tenant as usize >= self.tenants.len() {
            return Err(Error::new(Code::InvalidArgument, Reason::TenantOutOfRange));
        }
        if meta.weight == 0 {
            return Err(Error::new(Code::InvalidArgument, Reason::ZeroWeight));
        }
        let seq = self.next_seq;
        self.next_seq = seq
            .checked_add(1)
            .ok_or(Error::new(Code::Unavailable, Reason::SequenceExhausted))?;

        let t = meta.tenant;
        let tail = self.tenants[t as usize].fifo_tail;
        self.nodes[index as usize] = Node {
            seq,
            deadline: meta.deadline,
            enqueued_at: meta.enqueued_at,
            order: Links::DETACHED,
            by_deadline: Links::DETACHED,
            fifo_prev: tail,
            fifo_next: NONE,
            tenant: t,
            priority: meta.priority,
        };
        if tail != NONE {
            self.nodes[tail as usize].fifo_next = index;
        }
        if meta.deadline != NO_DEADLINE {
            self.deadline_root =
                heap::push::<Node, ByDeadline, _>(&mut self.nodes[..], self.deadline_root, index);
        }
        let ten = &mut self.tenants[t as usize];
        ten.root = heap::push::<Node, ByRank, _>(&mut self.nodes[..], ten.root, index);
        if ten.fifo_head == NONE {
            ten.fifo_head = index;
        }
        ten.fifo_tail = index;
        ten.count += 1;
        ten.weight = meta.weight;
        let join = !ten.in_ring;
        ten.in_ring = true;
        if join {
            self.ring_push(t);
        }
        self.len += 1;
        Ok(seq)
    }

    /// One selection step at time `now` (F11–F15, F19).
    ///
    /// Offers the candidate of the tenant at the ring's head to `judge`:
    /// * [`Verdict::Take`]: the entry is removed and charged to the tenant's turn; when the
    ///   turn's credits are used up the tenant rotates to the tail (or leaves if it has no
    ///   entries left; it also leaves at once when its last entry is taken). Returns the index.
    /// * [`Verdict::Drop`]: the entry is removed uncharged and the next candidate is offered —
    ///   from the same tenant while it has entries, else from the next tenant.
    /// * [`Verdict::Keep`]: returns `None`, leaving the entry and the turn as they were.
    ///
    /// A ring-head tenant with no entries left is skipped and leaves (lazy removal); that costs
    /// no budget. Every candidate offered costs one unit of `*budget`; at 0 the step returns
    /// `None` before offering anything.
    pub(crate) fn select(
        &mut self,
        now: u64,
        judge: &mut impl Judge,
        budget: &mut u32,
    ) -> Option<u32> {
        loop {
            if self.ring_len == 0 {
                return None;
            }
            let t = self.ring[self.ring_head as usize];
            if self.tenants[t as usize].count == 0 {
                self.ring_pop();
                self.tenants[t as usize] = Tenant::IDLE;
                continue;
            }
            if *budget == 0 {
                return None;
            }
            let index = self.candidate(t, now);
            *budget -= 1;
            match judge.judge(index) {
                Verdict::Keep => return None,
                Verdict::Drop => self.unlink(index),
                Verdict::Take => {
                    self.unlink(index);
                    let ten = &mut self.tenants[t as usize];
                    if ten.credits == 0 {
                        ten.credits = ten.weight;
                    }
                    ten.credits -= 1;
                    if ten.count == 0 {
                        self.ring_pop();
                        self.tenants[t as usize] = Tenant::IDLE;
                    } else if ten.credits == 0 {
                        self.ring_pop();
                        self.ring_push(t);
                    }
                    return Some(index);
                }
            }
        }
    }

    /// Deadline sweep over every tenant of the class (F46): while the queued entry with the
    /// earliest finite deadline has `deadline <= now`, offers it to `judge` and removes it on
    /// [`Verdict::Drop`] (or `Take`, treated alike); stops on [`Verdict::Keep`] or when
    /// `*budget` reaches 0 (each offer costs one unit). Returns the number removed.
    ///
    /// Each removal is O(log n); tenants keep their ring positions (lazy removal).
    pub(crate) fn expire(&mut self, now: u64, judge: &mut impl Judge, budget: &mut u32) -> usize {
        let mut removed = 0;
        while *budget != 0 {
            let index = self.deadline_root;
            if index == NONE || self.nodes[index as usize].deadline > now {
                break;
            }
            *budget -= 1;
            match judge.judge(index) {
                Verdict::Keep => break,
                Verdict::Drop | Verdict::Take => {
                    self.unlink(index);
                    removed += 1;
                }
            }
        }
        removed
    }

    /// The earliest finite deadline among queued entries, if any.
    #[inline]
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        (self.deadline_root != NONE).then(|| self.nodes[self.deadline_root as usize].deadline)
    }

    /// Removes queued entry `index` from every structure in O(log n), touching no other entry's
    /// position (F31). Its tenant keeps its ring position (lazy removal, F11). Returns whether
    /// `index` was queued.
    #[inline]
    pub(crate) fn remove(&mut self, index: u32) -> bool {
        if !self.contains(index) {
            return false;
        }
        self.unlink(index);
        true
    }

    /// Raises the priority of queued entry `index` to `priority` and re-orders it in its
    /// tenant's heap (D30). Never lowers. Returns whether the priority changed.
    #[inline]
    pub(crate) fn raise_priority(&mut self, index: u32, priority: u8) -> bool {
        if !self.contains(index) || self.nodes[index as usize].priority >= priority {
            return false;
        }
        let t = self.nodes[index as usize].tenant as usize;
        self.nodes[index as usize].priority = priority;
        self.tenants[t].root =
            heap::decrease::<Node, ByRank, _>(&mut self.nodes[..], self.tenants[t].root, index);
        true
    }

    /// Sets the priority of queued entry `index`, raising or lowering it (an inherited priority
    /// dropping back, D30), and re-orders it (SPEC F36: one removal and one insertion in its
    /// tenant's heap). Returns whether the priority changed.
    pub(crate) fn set_priority(&mut self, index: u32, priority: u8) -> bool {
        if !self.contains(index) {
            return false;
        }
        let Node {
            priority: old,
            tenant,
            ..
        } = self.nodes[index as usize];
        if priority > old {
            return self.raise_priority(index, priority);
        }
        if priority == old {
            return false;
        }
        let t = tenant as usize;
        let root =
            heap::remove::<Node, ByRank, _>(&mut self.nodes[..], self.tenants[t].root, index);
        self.nodes[index as usize].priority = priority;
        self.tenants[t].root = heap::push::<Node, ByRank, _>(&mut self.nodes[..], root, index);
        true
    }

    /// Sets the deadline of queued entry `index` ([`NO_DEADLINE`]: none) and re-orders it in
    /// its tenant's heap and in the deadline heap (SPEC F36): a removal and an insertion in
    /// each, O(log n). Its sequence number and FIFO place stay. Returns whether it changed.
    pub(crate) fn set_deadline(&mut self, index: u32, deadline: u64) -> bool {
        if !self.contains(index) {
            return false;
        }
        let Node {
            deadline: old,
            tenant,
            ..
        } = self.nodes[index as usize];
        if deadline == old {
            return false;
        }
        let t = tenant as usize;
        if old != NO_DEADLINE {
            self.deadline_root =
                heap::remove::<Node, ByDeadline, _>(&mut self.nodes[..], self.deadline_root, index);
        }
        let root =
            heap::remove::<Node, ByRank, _>(&mut self.nodes[..], self.tenants[t].root, index);
        self.nodes[index as usize].deadline = deadline;
        self.tenants[t].root = heap::push::<Node, ByRank, _>(&mut self.nodes[..], root, index);
        if deadline != NO_DEADLINE {
            self.deadline_root =
                heap::push::<Node, ByDeadline, _>(&mut self.nodes[..], self.deadline_root, index);
        }
        true
    }

    /// The candidate of tenant `t` (which has entries) at `now`: its oldest entry if that has
    /// waited at least `starvation_after` (F14), else its best by rank (F13).
    #[inline]
    fn candidate(&self, t: u32, now: u64) -> u32 {
        let ten = &self.tenants[t as usize];
        debug_assert!(ten.count != 0);
        let oldest = ten.fifo_head;
        let at = self.nodes[oldest as usize].enqueued_at;
        rank::pick(ten.root, oldest, at, now, self.starvation_after)
    }

    /// Removes queued entry `index` from its tenant's heap and FIFO and from the deadline heap.
    /// Leaves the ring and the tenant's turn alone.
    #[inline]
    fn unlink(&mut self, index: u32) {
        let node = self.nodes[index as usize];
        debug_assert!(node.tenant != NONE);
        let t = node.tenant as usize;
        if node.deadline != NO_DEADLINE {
            self.deadline_root =
                heap::remove::<Node, ByDeadline, _>(&mut self.nodes[..], self.deadline_root, index);
        }
        let root =
            heap::remove::<Node, ByRank, _>(&mut self.nodes[..], self.tenants[t].root, index);
        let ten = &mut self.tenants[t];
        ten.root = root;
        if node.fifo_prev == NONE {
            ten.fifo_head = node.fifo_next;
        } else {
            self.nodes[node.fifo_prev as usize].fifo_next = node.fifo_next;
        }
        if node.fifo_next == NONE {
            ten.fifo_tail = node.fifo_prev;
        } else {
            self.nodes[node.fifo_next as usize].fifo_prev = node.fifo_prev;
        }
        ten.count -= 1;
        self.len -= 1;
        self.nodes[index as usize] = Node::VACANT;
    }

    /// The `ring` position of the `i`-th tenant from the head.
    #[inline]
    #[cfg(test)]
    fn ring_slot(&self, i: u32) -> usize {
        let cap = self.ring.len() as u64;
        ((u64::from(self.ring_head) + u64::from(i)) % cap) as usize
    }

    /// Appends `t` at the ring's tail. The ring cannot overflow: it has a slot per tenant id and
    /// holds each tenant at most once (`in_ring`).
    #[inline]
    fn ring_push(&mut self, t: u32) {
        debug_assert!((self.ring_len as usize) < self.ring.len());
        let mut pos = self.ring_head as usize + self.ring_len as usize;
        if pos >= self.ring.len() {
            pos -= self.ring.len();
        }
        self.ring[pos] = t;
        self.ring_len += 1;
    }

    /// Removes the ring's head.
    #[inline]
    fn ring_pop(&mut self) {
        debug_assert!(self.ring_len != 0);
        self.ring_head += 1;
        if self.ring_head as usize == self.ring.len() {
            self.ring_head = 0;
        }
        self.ring_len -= 1;
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
