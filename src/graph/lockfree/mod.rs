//! The lock-free graph engine.
//!
//! Words (all in fixed arenas allocated at build):
//!
//! - node `state`: `gen << 32 | state` (free, waiting, ready, queued, running, ending, done);
//! - node `ctl`: `gen << 32 | FAILED | remaining`, where `remaining` starts at deps + 1 (the
//!   extra one is the submitter's, released once every edge is linked); releases are CAS loops
//!   that do nothing when the generation moved on, so an edge to a refused or collected job is
//!   inert;
//! - node `admit` and `done` heads: `gen << 32 | edge`, push-only stacks of dependent edges,
//!   sealed by one swap to `SEALED_OK` or `SEALED_FAIL` by whoever admits or ends the node;
//! - key `state`: `gen << 32 | node << 8 | K_LIVE` while it names a producer (the producer's
//!   generation), otherwise `slot_gen << 32 | tag` (no producer, waiters, or how its producer
//!   ended) at the key slot's generation, with `K_RESERVED` over "no producer" / "waiters"
//!   while an atomic batch publishes the key. See `index.rs` for the key table.
//!
//! The topology lock (see the module docs of `graph`) guards key waiter lists, the cycle
//! check, atomic batches (`batch.rs`), the shutdown's walk of the key table, removal of keys
//! and the compaction of their index (`index.rs`).

mod batch;
mod demand;
mod dep_buf;
mod engine;
mod index;
mod keys;
mod link;
#[cfg(all(test, loom))]
mod loom_index;
#[cfg(all(test, loom))]
mod loom_publish;
mod store;
mod urgency;

use index::{Found, Index, KeyRef, KeySlot};
use store::{Slot, Store};

use super::rules::{self, CYCLE, DEPENDENCY_FAILED, DUPLICATE_KEY, STALE};
use super::{
    Admission, Bounds, Dependency, Gate, GraphEngine, JobKey, JobOutcome, JobSpec, NodeRef,
    Occupancy, Ready, Version,
};
use crate::error::Error;
use crate::ids::{ClassId, Priority, TenantId};
use crate::sync::{epoch, AtomicBool, AtomicU32, AtomicU64, Ordering, UnsafeCell};
use std::collections::HashSet;
// The topology lock is loom's under `cfg(loom)`, so models that contend for it explore it.
#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};

const NIL: u32 = u32::MAX;
/// The first segment of the node and key-slot stores (the edge store's is four times this):
/// what a graph backs at build (SPEC D51).
pub(super) const FIRST_SEGMENT: u32 = 64;

/// A slot the caller holds was not backed: a broken invariant of the engine, not a user error.
#[cold]
#[inline(never)]
fn unbacked(what: &str, i: u32) -> ! {
    panic!("fairway graph: {what} slot {i} is held but its segment is not backed")
}
const SEALED_OK: u32 = u32::MAX - 1;
const SEALED_FAIL: u32 = u32::MAX - 2;
/// A list sealed by a removed producer (or a superseded one's edges pinned to it): no gate
/// holds (SPEC D20, D24).
const SEALED_RETIRED: u32 = u32::MAX - 3;
/// A list taken by `advance` from the producer it superseded: its edges moved to the key's
/// next generation (SPEC D33), and a late linker follows the key too.
const SEALED_SUPERSEDED: u32 = u32::MAX - 4;
/// A list sealed by a cancelled producer (SPEC D31): `Sequential` holds, a failed gate fails
/// its dependent `dependency-cancelled`.
const SEALED_CANCELLED: u32 = u32::MAX - 5;
/// The smallest list mark: every head value from here up ends a list.
const SEALED_MIN: u32 = SEALED_CANCELLED;

const S_FREE: u32 = 0;
const S_WAITING: u32 = 1;
const S_READY: u32 = 2;
const S_QUEUED: u32 = 3;
const S_RUNNING: u32 = 4;
const S_ENDING: u32 = 5;
const S_DONE: u32 = 6;

const FAILED: u64 = 1 << 31;
/// Set from `start`: the node runs, and reaching zero ends it instead of making it ready (its
/// count then holds the body, one, plus the gates discovered while it runs, SPEC D14).
const RUNNING: u64 = 1 << 30;
/// The node was superseded by `advance` (SPEC D20): a waiting or queued node is ended by the
/// advancer, a running one's completion is stale (D21).
const RETIRED_SUPERSEDED: u64 = 1 << 29;
/// The node's key was removed (SPEC D24); as [`RETIRED_SUPERSEDED`].
const RETIRED_REMOVED: u64 = 1 << 28;
const RETIRED: u64 = RETIRED_SUPERSEDED | RETIRED_REMOVED | RETIRED_CANCELLED;
/// With `FAILED`: the failed gate was a removed key's waiter edge (outcome `removed`).
const WAITED_REMOVED: u64 = 1 << 27;
/// A key operation took a queued node before its executor started it, and ends it (SPEC D20);
/// `start` then refuses it.
const TAKEN: u64 = 1 << 26;
/// With `FAILED`: the failed gate was a dependency pinned to a version that `advance`
/// superseded (outcome `superseded`, SPEC D33).
const WAITED_SUPERSEDED: u64 = 1 << 25;
/// Its last demander went (SPEC D31): a waiting or queued node is ended by whoever flagged it,
/// a running one's completion ends it `withdrawn`.
const RETIRED_CANCELLED: u64 = 1 << 24;
/// With `FAILED`: the failed gate was on a cancelled producer (`dependency-cancelled`).
const WAITED_CANCELLED: u64 = 1 << 23;
const REMAINING: u64 = WAITED_CANCELLED - 1;

const K_NONE: u64 = 0;
const K_WAITING: u64 = 1;
const K_LIVE: u64 = 2;
const K_DONE_OK: u64 = 3;
const K_DONE_FAIL_ADMITTED: u64 = 4;
const K_DONE_FAIL_UNADMITTED: u64 = 5;
/// A key slot whose generation is exhausted: retired, never claimed again.
const K_GONE: u64 = 6;
/// Its producer was cancelled (SPEC D31) after, or before, taking its permit. A submission of
/// the identity advances the key and starts a new job.
const K_DONE_CANCELLED_ADMITTED: u64 = 7;
const K_DONE_CANCELLED_UNADMITTED: u64 = 8;

/// Claim word bits (`gen << 32 | bits | count`): the job ended (whoever brings the count of an
/// ended job to zero frees the slot); it was detached (never cancelled for want of demand);
/// it was cancelled for want of demand (no join any more).
const C_ENDED: u64 = 1 << 31;
const C_DETACHED: u64 = 1 << 30;
const C_DOOMED: u64 = 1 << 29;
const C_COUNT: u64 = C_DOOMED - 1;
/// Set over `K_NONE` or `K_WAITING` while an atomic batch that will publish this key holds
/// the topology lock: every path that finds such a key takes the lock, so it sees the batch
/// either committed (the key live) or refused (the bit cleared), never in between.
const K_RESERVED: u64 = 1 << 8;
/// The tag and the reservation bit of a key state word.
const K_TAGS: u64 = 0x1ff;

/// A key state word that names no producer: tag `tag` at key-slot generation `gen`.
#[inline]
fn key_word(gen: u32, tag: u64) -> u64 {
    word(gen, tag as u32)
}

#[inline]
fn word(gen: u32, low: u32) -> u64 {
    u64::from(gen) << 32 | u64::from(low)
}

#[inline]
fn gen_of(w: u64) -> u32 {
    (w >> 32) as u32
}

#[inline]
fn low_of(w: u64) -> u32 {
    w as u32
}

/// The flags a dependent's count takes when a gate `gate` is counted on a producer that was
/// admitted / succeeded (`ok`), or not, and was cancelled (`cancel`, SPEC D31).
#[inline]
fn gate_flags(gate: Gate, ok: bool, cancel: bool) -> u64 {
    if rules::gate_met(gate, ok) {
        0
    } else if cancel {
        FAILED | WAITED_CANCELLED
    } else {
        FAILED
    }
}

/// Whether a key state word says its producer was cancelled for want of demand (SPEC D31).
#[inline]
fn is_cancelled_tag(st: u64) -> bool {
    matches!(
        st & 0xff,
        K_DONE_CANCELLED_ADMITTED | K_DONE_CANCELLED_UNADMITTED
    )
}

#[inline]
fn key_live(node: NodeRef) -> u64 {
    u64::from(node.gen) << 32 | u64::from(node.idx) << 8 | K_LIVE
}

/// What a job needs once it is ready; written by its submitter before the node is published.
#[derive(Clone, Copy)]
struct Info {
    job: JobKey,
    tenant: TenantId,
    class: ClassId,
    priority: Priority,
    /// Its own absolute deadline (SPEC D30; `NO_DEADLINE`: none).
    deadline: u64,
    /// The key slot the node is published on.
    key: KeyRef,
}

struct Node {
    state: AtomicU64,
    ctl: AtomicU64,
    admit: AtomicU64,
    done: AtomicU64,
    /// Free-list link, and the intrusive work-list link of its current owner.
    next: AtomicU32,
    /// Key identities of its dependencies, for the cycle walk (read under the topology lock,
    /// validated by the generation).
    dep_count: AtomicU32,
    /// The key version the node was published at (SPEC D01, D23).
    ver: AtomicU64,
    info: UnsafeCell<Info>,
    outcome: UnsafeCell<Option<JobOutcome>>,
    /// `gen << 32 | claims`: handles of the job that have not taken its outcome yet (the
    /// submitter's, one per joiner, SPEC D02, D03). Set to one before publication; whoever
    /// takes the last claim frees the slot, and a join needs a non-zero count at the node's
    /// generation, so nobody joins a job whose slot is on its way to the free list.
    claims: AtomicU64,
    /// `gen << 32 | ACTIVE | base priority << 8 | effective priority` (SPEC D30, see
    /// `urgency.rs`).
    urg: AtomicU64,
    /// The effective deadline (absolute; `NO_DEADLINE`: none).
    eff_deadline: AtomicU64,
    /// The base deadline: its own, raised by joiners.
    base_deadline: AtomicU64,
}

/// What [`LockFreeGraph::join_node`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Join {
    /// One more handle holds the job.
    Joined,
    /// Every handle took the outcome (or the generation moved on): nothing to join.
    Gone,
    /// The claim count is at its bound.
    Full,
    /// Its last demander went: it is cancelled (SPEC D31), a submission starts a new job.
    Doomed,
}

struct Edge {
    next: AtomicU32,
    target: AtomicU64,
    gate: AtomicU32,
}

impl Slot for Node {
    fn fresh(next: u32, gen: u32) -> Self {
        Node {
            state: AtomicU64::new(word(gen, S_FREE)),
            ctl: AtomicU64::new(word(gen, 0)),
            admit: AtomicU64::new(word(gen, NIL)),
            done: AtomicU64::new(word(gen, NIL)),
            next: AtomicU32::new(next),
            dep_count: AtomicU32::new(0),
            ver: AtomicU64::new(0),
            info: UnsafeCell::new(Info {
                job: JobKey::new(0),
                tenant: TenantId(0),
                class: ClassId(0),
                priority: 0,
                deadline: rules::NO_DEADLINE,
                key: KeyRef { slot: 0, gen: 0 },
            }),
            outcome: UnsafeCell::new(None),
            claims: AtomicU64::new(word(gen, 0)),
            urg: AtomicU64::new(word(gen, 0)),
            eff_deadline: AtomicU64::new(rules::NO_DEADLINE),
            base_deadline: AtomicU64::new(rules::NO_DEADLINE),
        }
    }

    fn free_gen(&self) -> u32 {
        // Relaxed: called by a shrink on slots it took off the free list (their last writes
        // came with the free list's Acquire pop).
        gen_of(self.state.load(Ordering::Relaxed))
    }

    fn next(&self) -> &AtomicU32 {
        &self.next
    }

    fn gone() -> Self {
        Self::fresh(NIL, NodeRef::MAX_GEN)
    }
}

impl Slot for Edge {
    fn fresh(next: u32, _gen: u32) -> Self {
        Edge {
            next: AtomicU32::new(next),
            target: AtomicU64::new(0),
            gate: AtomicU32::new(0),
        }
    }

    fn free_gen(&self) -> u32 {
        0
    }

    fn next(&self) -> &AtomicU32 {
        &self.next
    }

    fn gone() -> Self {
        // Never read: an edge is reached only through a list that holds it.
        Self::fresh(NIL, 0)
    }
}

impl Slot for KeySlot {
    fn fresh(next: u32, gen: u32) -> Self {
        KeySlot::new(next, gen)
    }

    fn free_gen(&self) -> u32 {
        // Relaxed: as for a node.
        self.sgen.load(Ordering::Relaxed)
    }

    fn next(&self) -> &AtomicU32 {
        &self.next
    }

    fn gone() -> Self {
        // Exhausted: every user of a key that meets it looks the key up again.
        let k = KeySlot::new(NIL, u32::MAX);
        k.state.store(key_word(u32::MAX, K_GONE), Ordering::Relaxed);
        k
    }
}

/// Jobs gauges (Relaxed counters: observations only).
#[derive(Default)]
struct Gauges {
    nodes: AtomicU32,
    edges: AtomicU32,
    keys: AtomicU32,
    waiting: AtomicU32,
    /// Ready jobs in the low half, running ones in the high half: a job that starts moves
    /// from one to the other with one RMW.
    ready_running: AtomicU64,
}

/// One ready job in `Gauges::ready_running`.
const READY_ONE: u64 = 1;
/// One running job in `Gauges::ready_running`.
const RUNNING_ONE: u64 = 1 << 32;

/// The graph's lock-free store (what [`Graph`](super::Graph) runs on).
#[doc(hidden)]
pub struct LockFreeGraph {
    /// Node slots, each with `max_deps` words of its dependencies' key identities, for the
    /// cycle walk (read under the topology lock, validated by the generation).
    nodes: Store<Node>,
    edges: Store<Edge>,
    keys: Store<KeySlot>,
    index: Index,
    topology: Mutex<()>,
    /// The urgency propagation's buffers (SPEC D30, `urgency.rs`): taken under the topology
    /// lock (never the other way round), and alone by `pop_resync`.
    scratch: Mutex<urgency::Scratch>,
    /// Jobs in `scratch`'s re-order list (a hint, so an empty list costs one load).
    resync_len: AtomicU32,
    /// Set (under the topology lock) by `shutdown`: no dependency parks on a key any more.
    shut: AtomicBool,
    /// Set by `close`, before the shutdown ends anything: no reservation is kept any more.
    closed: AtomicBool,
    gauges: Gauges,
    bounds: Bounds,
    /// Completions refused as stale (SPEC D21).
    stale: AtomicU64,
}

// SAFETY: the `UnsafeCell`s of a node are written only by the thread that owns the node's
// current transition (the submitter before publication, the one that moves it to `ending`) and
// read after an Acquire of the word that transition published; see each access.
unsafe impl Sync for LockFreeGraph {}
// SAFETY: as above; nothing in the engine is tied to a thread.
unsafe impl Send for LockFreeGraph {}

impl core::fmt::Debug for LockFreeGraph {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LockFreeGraph")
            .field("occupancy", &self.occupancy())
            .finish_non_exhaustive()
    }
}

/// Ready jobs found by one operation, as an intrusive list through the nodes' `next`.
#[derive(Debug)]
pub struct Work {
    ready: u32,
    /// Jobs made ready whose gauges have not moved yet (see `flush`).
    readied: u32,
    /// Jobs cancelled for want of demand that this operation ends (SPEC D31), waiting and
    /// queued ones, as intrusive lists through their `next`.
    doomed: u32,
    doomed_queued: u32,
    /// Queued jobs this operation ended: the graph withdraws their scheduler requests.
    withdrawn: demand::Withdrawn,
}

impl Default for Work {
    fn default() -> Self {
        Self {
            ready: NIL,
            readied: 0,
            doomed: NIL,
            doomed_queued: NIL,
            withdrawn: demand::Withdrawn::default(),
        }
    }
}

fn dec(g: &AtomicU32) {
    g.fetch_sub(1, Ordering::Relaxed);
}

fn inc(g: &AtomicU32) {
    g.fetch_add(1, Ordering::Relaxed);
}

impl super::sealed::Sealed for LockFreeGraph {}

impl LockFreeGraph {
    pub(crate) fn new(bounds: Bounds) -> Self {
        Self {
            nodes: Store::new(
                bounds.nodes,
                FIRST_SEGMENT.max(bounds.reserve.0),
                bounds.max_deps as usize,
                bounds.first_gen,
                bounds.reserve.0,
            ),
            edges: Store::new(
                bounds.edges,
                (4 * FIRST_SEGMENT).max(bounds.reserve.1),
                0,
                0,
                bounds.reserve.1,
            ),
            keys: Store::new(
                bounds.keys,
                FIRST_SEGMENT.max(bounds.reserve.2),
                0,
                bounds.first_key_gen,
                bounds.reserve.2,
            ),
            index: Index::new(bounds.keys, bounds.reserve.2),
            topology: Mutex::new(()),
            scratch: Mutex::new(urgency::Scratch::default()),
            resync_len: AtomicU32::new(0),
            shut: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            gauges: Gauges::default(),
            bounds,
            stale: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        self.topology.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `close` ran. Checked right after a node is taken: a node freed because the
    /// shutdown ended its job was pushed after the `closed` store, and the free list's
    /// Release push / Acquire pop carry that store to this load (SPEC D02).
    fn is_closed(&self) -> bool {
        // Acquire: pairs with the Release store in `close`.
        self.closed.load(Ordering::Acquire)
    }

    pub(super) fn close(&self) {
        // Release: pairs with the Acquire load in `is_closed`.
        self.closed.store(true, Ordering::Release);
    }

    /// Node slot `i`. A slot the caller holds is backed; a stale slot number (an edge's
    /// refused dependent, a copied job identity) whose segment was retired reads as the
    /// store's inert slot, whose generation matches no holder's (SPEC D51).
    #[inline(always)]
    fn node(&self, i: u32) -> &Node {
        self.nodes.at(i)
    }

    /// Edge slot `i`, which the caller holds (see [`node`](Self::node)).
    #[inline(always)]
    fn edge(&self, i: u32) -> &Edge {
        match self.edges.get(i) {
            Some(e) => e,
            None => unbacked("edge", i),
        }
    }

    /// The dependency identities of node slot `i`, which the caller holds.
    #[inline(always)]
    fn dep_keys(&self, i: u32) -> &[AtomicU64] {
        match self.nodes.extra(i) {
            Some(d) => d,
            None => unbacked("node", i),
        }
    }

    fn pop_node(&self) -> Option<u32> {
        let i = self.nodes.alloc()?;
        inc(&self.gauges.nodes);
        Some(i)
    }

    fn push_node(&self, i: u32) {
        self.nodes.free(i);
        dec(&self.gauges.nodes);
    }

    fn pop_edge(&self) -> Option<u32> {
        let i = self.edges.alloc()?;
        inc(&self.gauges.edges);
        Some(i)
    }

    fn push_edge(&self, i: u32) {
        self.edges.free(i);
        dec(&self.gauges.edges);
    }

    /// Gives every segment whose slots are all free back (SPEC D51): nodes, edges, key slots
    /// and the key index.
    pub(super) fn shrink_stores(&self) {
        let _pin = epoch::pin();
        self.nodes.shrink();
        self.edges.shrink();
        self.keys.shrink();
        let _g = self.lock();
        self.shrink_index();
    }

    /// Counts one gate of `target` as met or failed; a node whose count reaches zero fires
    /// (onto `work` if ready, onto `failed` if a gate failed).
    fn release(&self, target: NodeRef, met: bool, work: &mut Work, failed: &mut u32) {
        self.release_with(target, if met { 0 } else { FAILED }, work, failed);
    }

    /// As [`release`](Self::release), setting `flags` (`FAILED`, `WAITED_REMOVED`) on the node.
    fn release_with(&self, target: NodeRef, flags: u64, work: &mut Work, failed: &mut u32) {
        let node = self.node(target.idx);
        // Acquire/AcqRel: the RMWs on `ctl` form one release sequence from the submitter's
        // initial Release store, so the one that reaches zero sees the node's info.
        let mut c = node.ctl.load(Ordering::Acquire);
        loop {
            if gen_of(c) != target.gen || c & REMAINING == 0 {
                return;
            }
            let new = (c - 1) | flags;
            match node
                .ctl
                .compare_exchange_weak(c, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if new & REMAINING == 0 {
                        if new & (FAILED | RUNNING) != 0 {
                            node.next.store(*failed, Ordering::Relaxed);
                            *failed = target.idx;
                        } else {
                            node.state
                                .store(word(target.gen, S_READY), Ordering::Relaxed);
                            // The waiting and ready gauges move once per operation, in
                            // `pop_ready` (`flush`), not once per job.
                            work.readied += 1;
                            node.next.store(work.ready, Ordering::Relaxed);
                            work.ready = target.idx;
                        }
                    }
                    return;
                }
                Err(cur) => c = cur,
            }
        }
    }

    /// Releases every edge of a sealed list, freeing the edges.
    ///
    /// The list is already a chain of edges ending in `NIL`: it goes back to the free list
    /// whole, with one CAS and one gauge update, not one per edge.
    fn release_list(&self, mut e: u32, ok: bool, cancel: bool, work: &mut Work, failed: &mut u32) {
        let first = e;
        let mut last = NIL;
        let mut count = 0;
        while e < SEALED_MIN {
            let edge = self.edge(e);
            // Relaxed: these were published by the Release push and acquired by the seal swap.
            let next = edge.next.load(Ordering::Relaxed);
            let target = NodeRef::unpack(edge.target.load(Ordering::Relaxed));
            let gate = rules::gate_from(edge.gate.load(Ordering::Relaxed));
            self.release_with(target, gate_flags(gate, ok, cancel), work, failed);
            last = e;
            count += 1;
            e = next;
        }
        if count > 0 {
            self.edges.free_chain(first, last);
            self.gauges.edges.fetch_sub(count, Ordering::Relaxed);
        }
    }

    /// Moves the gauges of the jobs that `work` made ready (waiting to ready) in one update.
    #[inline]
    pub(super) fn flush(&self, work: &mut Work) {
        if work.readied != 0 {
            self.gauges
                .waiting
                .fetch_sub(work.readied, Ordering::Relaxed);
            self.gauges
                .ready_running
                .fetch_add(u64::from(work.readied) * READY_ONE, Ordering::Relaxed);
            work.readied = 0;
        }
    }

    /// Seals one of a node's lists and releases it.
    fn seal(&self, head: &AtomicU64, gen: u32, ok: bool, work: &mut Work, failed: &mut u32) {
        self.seal_as(head, gen, ok, false, work, failed);
    }

    /// [`seal`](Self::seal); `cancel`: the producer was cancelled (SPEC D31), so a failed gate
    /// fails its dependent `dependency-cancelled`.
    fn seal_as(
        &self,
        head: &AtomicU64,
        gen: u32,
        ok: bool,
        cancel: bool,
        work: &mut Work,
        failed: &mut u32,
    ) {
        let mark = if ok {
            SEALED_OK
        } else if cancel {
            SEALED_CANCELLED
        } else {
            SEALED_FAIL
        };
        // AcqRel: Acquire pairs with the linkers' Release pushes (their edge fields); Release
        // pairs with a late linker's Acquire load that then sees the key's end state.
        let old = head.swap(word(gen, mark), Ordering::AcqRel);
        debug_assert_eq!(gen_of(old), gen);
        let first = low_of(old);
        // Empty, or taken already by an `advance` that superseded the node (its edges
        // followed the key, SPEC D33).
        if first >= SEALED_MIN {
            return;
        }
        self.release_list(first, ok, cancel, work, failed);
    }

    /// Ends a node the caller owns (state `ending`): records the outcome, publishes the end in
    /// its key, seals its lists and fails, transitively, what can no longer run.
    fn end(&self, node: NodeRef, outcome: JobOutcome, admitted: bool, work: &mut Work) {
        let mut failed = NIL;
        self.end_one(node, outcome, admitted, work, &mut failed);
        self.end_failed(failed, work);
    }

    /// Ends every node of the intrusive list `failed`: a waiting node fired with a failed gate
    /// ends `dependency-failed`; a completed node whose discovered gates are all counted ends
    /// with its body's outcome, or `dependency-failed` if one of them failed.
    fn end_failed(&self, mut failed: u32, work: &mut Work) {
        while failed != NIL {
            let idx = failed;
            let n = self.node(idx);
            failed = n.next.load(Ordering::Relaxed);
            let c = n.ctl.load(Ordering::Relaxed);
            let gen = gen_of(c);
            dec(&self.gauges.waiting);
            n.state.store(word(gen, S_ENDING), Ordering::Relaxed);
            let ran = c & RUNNING != 0;
            if ran && c & RETIRED != 0 {
                // A completed job held by gates it discovered, whose key moved on meanwhile
                // (`advance`, `remove` flagged it): its result is stale (SPEC D21) — nothing is
                // published, its dependents see no success, and it is counted. One whose
                // demand went ends `withdrawn` (SPEC D31), not counted.
                if c & RETIRED_CANCELLED == 0 {
                    self.stale.fetch_add(1, Ordering::Relaxed);
                }
                self.retire_end(NodeRef { idx, gen }, c, true, work, &mut failed);
                continue;
            }
            let outcome = if c & WAITED_REMOVED != 0 {
                JobOutcome::Failed(crate::graph::keys::REMOVED)
            } else if c & WAITED_SUPERSEDED != 0 {
                JobOutcome::Failed(rules::PIN_SUPERSEDED)
            } else if c & WAITED_CANCELLED != 0 {
                JobOutcome::Failed(rules::DEPENDENCY_CANCELLED)
            } else if c & FAILED != 0 {
                JobOutcome::Failed(DEPENDENCY_FAILED)
            } else {
                // SAFETY: the completer wrote the body's outcome before giving up its hold
                // (AcqRel on `ctl`), which this thread's zero-reaching RMW acquired.
                n.outcome
                    .with(|p| unsafe { *p })
                    .unwrap_or(JobOutcome::Failed(DEPENDENCY_FAILED))
            };
            self.end_one(NodeRef { idx, gen }, outcome, ran, work, &mut failed);
        }
    }

    fn end_one(
        &self,
        node: NodeRef,
        outcome: JobOutcome,
        admitted: bool,
        work: &mut Work,
        failed: &mut u32,
    ) {
        // It demands nothing any more (SPEC D30, D31).
        self.depart(node);
        let n = self.node(node.idx);
        // SAFETY: the caller owns the node's `ending` transition; nobody else writes the
        // outcome, and readers wait for `done` (Release below).
        n.outcome.with_mut(|p| unsafe { *p = Some(outcome) });
        // SAFETY: written before publication by the submitter; read-only since.
        let info = n.info.with(|p| unsafe { *p });
        let cancel = rules::is_cancellation(&outcome);
        let tag = match (outcome.is_success(), admitted, cancel) {
            (true, _, _) => K_DONE_OK,
            (false, true, true) => K_DONE_CANCELLED_ADMITTED,
            (false, false, true) => K_DONE_CANCELLED_UNADMITTED,
            (false, true, false) => K_DONE_FAIL_ADMITTED,
            (false, false, false) => K_DONE_FAIL_UNADMITTED,
        };
        // Release: pairs with a linker's Acquire load of the key after it saw this node's
        // generation move on. Only while the key still names this node: after `advance` or
        // `remove` it names the next generation (SPEC D20).
        let _ = self.key(info.key).state.compare_exchange(
            key_live(node),
            key_word(info.key.gen, tag),
            Ordering::Release,
            Ordering::Relaxed,
        );
        if !admitted {
            self.seal_as(&n.admit, node.gen, false, cancel, work, failed);
        }
        self.seal_as(
            &n.done,
            node.gen,
            outcome.is_success(),
            cancel,
            work,
            failed,
        );
        // Release: pairs with the Acquire load in `outcome`.
        n.state.store(word(node.gen, S_DONE), Ordering::Release);
        self.ended(node);
        // The producers it leaves without demand are cancelled (SPEC D31).
        self.demand_departs(node, work);
    }

    /// Shuts the graph down (SPEC D02's `shutdown`): under the topology lock, marks it shut
    /// (later dependencies on a key without producer fail at once) and fails every parked
    /// dependency, so a job that waits for a producer that will never come ends
    /// `dependency-failed`. A walk of the key table: the rare path.
    pub(super) fn shut_down(&self, work: &mut Work) {
        let guard = self.lock();
        self.shut.store(true, Ordering::Relaxed);
        let mut failed = NIL;
        for key in (0..self.bounds.keys).filter_map(|i| self.keys.get(i)) {
            // Relaxed: waiter lists and `K_WAITING` change only under this lock.
            let st = key.state.load(Ordering::Relaxed);
            if st & K_TAGS != K_WAITING {
                continue;
            }
            let mut w = key.waiters.swap(NIL, Ordering::Relaxed);
            key.state
                .store(key_word(gen_of(st), K_NONE), Ordering::Relaxed);
            while w != NIL {
                let edge = self.edge(w);
                let next = edge.next.load(Ordering::Relaxed);
                let target = NodeRef::unpack(edge.target.load(Ordering::Relaxed));
                self.push_edge(w);
                self.release(target, false, work, &mut failed);
                w = next;
            }
        }
        drop(guard);
        self.end_failed(failed, work);
    }

    /// Adds a claim to the job on `node` (SPEC D02, D03, D31) unless it is gone (ended with
    /// no handle left) or cancelled. One CAS on the claim word while another handle holds the
    /// job; a job that no handle holds (kept by dependents or detached) is joined under the
    /// topology lock, where a cancellation decides, so a joiner never joins a job that its
    /// last demander's departure is cancelling.
    pub(super) fn join_node(&self, node: NodeRef) -> Join {
        let Some(n) = self.nodes.get(node.idx) else {
            return Join::Gone;
        };
        let mut guard = None;
        // Acquire: pairs with the last releaser's AcqRel RMW (or `recycle`'s Release store)
        // that emptied the count, so a joiner that finds the job gone then sees its end in the
        // key.
        let mut c = n.claims.load(Ordering::Acquire);
        loop {
            if gen_of(c) != node.gen {
                return Join::Gone;
            }
            if c & C_DOOMED != 0 {
                return Join::Doomed;
            }
            let count = c & C_COUNT;
            if count == 0 {
                if c & C_ENDED != 0 {
                    return Join::Gone;
                }
                if guard.is_none() {
                    guard = Some(self.lock());
                    c = n.claims.load(Ordering::Acquire);
                    continue;
                }
            }
            if count == C_COUNT {
                return Join::Full;
            }
            // Relaxed on success: the count only decides who frees the slot. Acquire on
            // failure: as the load.
            match n
                .claims
                .compare_exchange_weak(c, c + 1, Ordering::Relaxed, Ordering::Acquire)
            {
                Ok(_) => return Join::Joined,
                Err(cur) => c = cur,
            }
        }
    }

    /// Marks the job on `node` ended in its claim word (after its `done` state is stored);
    /// frees the slot if no handle holds it (SPEC D31: detached, or kept by dependents only).
    fn ended(&self, node: NodeRef) {
        let n = self.node(node.idx);
        // AcqRel: the claims' RMWs form one release sequence (see `release_claim`).
        let c = n.claims.fetch_or(C_ENDED, Ordering::AcqRel);
        if gen_of(c) == node.gen && c & C_COUNT == 0 && c & C_ENDED == 0 {
            self.free_slot(node);
        }
    }

    fn give_back_edges(&self, mut e: u32) {
        while e != NIL {
            let next = self.edge(e).next.load(Ordering::Relaxed);
            self.push_edge(e);
            e = next;
        }
    }

    fn free_slot(&self, me: NodeRef) {
        let n = self.node(me.idx);
        let g = NodeRef::next_gen(me.gen);
        // Release: pairs with a later `outcome`'s Acquire load, which then sees the slot free.
        n.state
            .store(word(g.unwrap_or(me.gen), S_FREE), Ordering::Release);
        self.recycle(me, g);
    }

    /// Gives a node slot whose state word is already free at generation `next` back to the free
    /// list, or retires it when its generation is exhausted (`next` is `None`): a retired slot
    /// keeps its last generation, free, with a zero count (edges still naming it are inert),
    /// and is never allocated again, so generations never wrap. It stays counted as used.
    pub(super) fn recycle(&self, me: NodeRef, next: Option<u32>) {
        let n = self.node(me.idx);
        let Some(g) = next else {
            n.ctl.store(word(me.gen, 0), Ordering::Relaxed);
            // Release: pairs with a joiner's Acquire load (`join_node`), which then sees the
            // job's end in its key.
            n.claims.store(word(me.gen, 0), Ordering::Release);
            return;
        };
        n.ctl.store(word(g, 0), Ordering::Relaxed);
        // Release: as above, for a joiner that reads the next generation's empty count.
        n.claims.store(word(g, 0), Ordering::Release);
        // Release: a late linker that loads the new generation (Acquire) then sees the key's
        // end state.
        n.admit.store(word(g, NIL), Ordering::Release);
        n.done.store(word(g, NIL), Ordering::Release);
        self.push_node(me.idx);
    }
}
