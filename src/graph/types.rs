//! The graph's public vocabulary: keys, jobs, gates, outcomes, handles and bounds.

use super::*;

/// A host-chosen job key (SPEC D01), at most [`WorkKey::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkKey(pub u64);

impl WorkKey {
    /// The largest key the key table holds (56 bits less one).
    pub const MAX: u64 = (1 << 56) - 2;
}

/// A stage tag: one work key may name several jobs, one per stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Stage(pub u8);

/// A job's identity: key and stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobKey {
    /// The work key.
    pub key: WorkKey,
    /// The stage.
    pub stage: Stage,
}

impl JobKey {
    /// Key `key` at stage 0.
    #[inline]
    pub const fn new(key: u64) -> Self {
        Self {
            key: WorkKey(key),
            stage: Stage(0),
        }
    }

    /// Key `key` at stage `stage`.
    #[inline]
    pub const fn staged(key: u64, stage: u8) -> Self {
        Self {
            key: WorkKey(key),
            stage: Stage(stage),
        }
    }
}

/// When a dependency lets its dependent run (SPEC D10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gate {
    /// After the dependency ends, whatever its outcome.
    Sequential,
    /// Only if the dependency succeeded; otherwise the dependent fails `dependency-failed`.
    OnSuccess,
    /// Once the dependency was admitted (took its ledger permit); if it ends without ever being
    /// admitted, the dependent fails `dependency-failed`.
    OnAdmission,
}

/// One dependency: a key, its gate, and whether it follows the key or pins one version.
///
/// A dependency on the key's current producer (`pin: None`, [`Dependency::on`]) follows the
/// key: when [`Graph::advance`] supersedes the producer, the dependent keeps waiting, now for
/// the key's next generation (SPEC D33). A pinned dependency ([`Dependency::pinned`]) names one
/// [`Version`] of the key: once the key is past it, the dependency counts as a producer that
/// ended `superseded` without being admitted, so a `Sequential` gate holds and the dependent
/// of any other gate fails `cancelled / superseded`.
///
/// ```
/// use fairway::graph::{Dependency, Gate, JobKey};
/// let follows = Dependency::on(JobKey::new(7), Gate::OnSuccess);
/// assert_eq!(follows.pin, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dependency {
    /// The key depended on; its producer may not exist yet (SPEC D11).
    pub key: JobKey,
    /// The gate.
    pub gate: Gate,
    /// `Some(version)`: only the job of this version of the key meets the dependency
    /// (see [`Graph::version`]); `None`: the key's current producer, whichever generation.
    pub pin: Option<Version>,
}

impl Dependency {
    /// A dependency on the current producer of `key`: it follows the key across `advance`.
    #[inline]
    pub const fn on(key: JobKey, gate: Gate) -> Self {
        Self {
            key,
            gate,
            pin: None,
        }
    }

    /// A dependency on the job of `version` of `key` only: once the key is past `version`
    /// it counts as superseded. A version the key has not reached is refused at submit
    /// (`invalid-argument / unknown-version`).
    #[inline]
    pub const fn pinned(key: JobKey, gate: Gate, version: Version) -> Self {
        Self {
            key,
            gate,
            pin: Some(version),
        }
    }
}

/// A job to submit. Borrowed dependencies: submitting allocates nothing.
#[derive(Debug, Clone, Copy)]
pub struct JobSpec<'a> {
    /// The job's key (one job per key in this part).
    pub key: JobKey,
    /// Whose quota the job runs under.
    pub tenant: TenantId,
    /// The class of cells it runs on (SPEC D40).
    pub class: ClassId,
    /// Its priority within its tenant. Its effective priority may be higher: the largest of
    /// its own and its demanders' (SPEC D30, see the module docs).
    pub priority: Priority,
    /// Its deadline, relative to the submission: stamped then on the ledger's clock. A job
    /// whose effective deadline (the earliest of its own and its demanders') has passed when
    /// it becomes ready ends `deadline-exceeded` without taking a permit; once queued, its
    /// permit carries the time its own deadline has left, and the scheduler expires it at
    /// its effective deadline (SPEC D30, F46).
    pub deadline: Option<std::time::Duration>,
    /// Its dependencies, at most the graph's `max_deps`.
    pub deps: &'a [Dependency],
}

/// What [`Graph::submit`] did (SPEC D02). Errors (bad input) are the outer `Result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission<H> {
    /// The job was admitted into the graph.
    Admitted(H),
    /// A live job with the same identity exists (or the caller's [`DedupeHook`] named one);
    /// nothing was submitted, and the joiner resolves to that job's outcome.
    DedupeJoined(H),
    /// A fixed store (nodes, edges, keys) is full; nothing was mutated.
    Backpressured,
}

/// A node slot and the generation it had when the job was admitted.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeRef {
    pub(crate) idx: u32,
    pub(crate) gen: u32,
}

impl NodeRef {
    /// The last generation a node slot can have: a slot freed at this generation is retired,
    /// never allocated again, so generations never wrap (a stale handle never aliases a job).
    pub(crate) const MAX_GEN: u32 = u32::MAX;

    /// The generation after `gen`, or `None` if the slot is exhausted and retires.
    #[inline]
    pub(crate) fn next_gen(gen: u32) -> Option<u32> {
        // MAX_GEN is the widest value of the 32-bit field: the checked add is the bound.
        const _: () = assert!(NodeRef::MAX_GEN == u32::MAX);
        gen.checked_add(1)
    }

    #[inline]
    pub(crate) fn packed(self) -> u64 {
        u64::from(self.gen) << 32 | u64::from(self.idx)
    }

    #[inline]
    pub(crate) fn unpack(v: u64) -> Self {
        Self {
            idx: v as u32,
            gen: (v >> 32) as u32,
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    /// Its body succeeded.
    Succeeded,
    /// Its body failed, or it could not run (`dependency-failed`, a ledger refusal).
    Failed(Error),
}

impl JobOutcome {
    /// Whether the job succeeded.
    #[inline]
    pub fn is_success(&self) -> bool {
        matches!(self, JobOutcome::Succeeded)
    }
}

/// Used, backed and maximum capacity of every store, and jobs by state (SPEC D50, D51).
///
/// The stores are bounded by the configured maxima (`*_total`) but back only what is in use
/// (SPEC D51): for each store `*_used <= *_backing <= *_total`. Backing grows at a new
/// high-water mark and is given back by [`Graph::reset`] and
/// [`Graph::shrink_to_fit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Occupancy {
    /// Node slots in use (admitted jobs not yet collected).
    pub nodes_used: u32,
    /// Node slots at most: the configured maximum (SPEC D05); past it, submissions are
    /// refused `Backpressured`.
    pub nodes_total: u32,
    /// Edge slots in use.
    pub edges_used: u32,
    /// Edge slots at most: the configured maximum.
    pub edges_total: u32,
    /// Key-table slots in use.
    pub keys_used: u32,
    /// Key-table slots at most: the configured maximum (rounded up to a power of two).
    pub keys_total: u32,
    /// Jobs waiting for a gate.
    pub waiting: u32,
    /// Jobs ready: admitted to the scheduler, not yet running.
    pub ready: u32,
    /// Jobs running.
    pub running: u32,
    /// Node slots backed by memory now (`nodes_used <= nodes_backing <= nodes_total`).
    pub nodes_backing: u32,
    /// Edge slots backed by memory now (`edges_used <= edges_backing <= edges_total`).
    pub edges_backing: u32,
    /// Key-table slots backed by memory now (`keys_used <= keys_backing <= keys_total`).
    pub keys_backing: u32,
    /// Cells of the key index's array now (0 for an engine without an index array).
    pub index_cells: u32,
    /// The most cells the key index's array may have (0 for an engine without one).
    pub index_cells_max: u32,
}

/// What a job carries through the scheduler. If the scheduler drops it without handing it
/// to an executor (its request expired, SPEC F46), the graph is told and ends the job
/// `deadline-exceeded` at its next operation.
#[derive(Debug)]
pub struct Task {
    pub(super) node: NodeRef,
    pub(super) key: JobKey,
    /// Where a dropped task reports its node; `None` once the graph took the task back.
    pub(super) bin: Option<std::sync::Arc<DropBin>>,
}

impl Task {
    /// Takes the task back (it reports nothing when dropped) and returns its node.
    pub(super) fn take(mut self) -> NodeRef {
        self.bin = None;
        self.node
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(bin) = self.bin.take() {
            bin.push(self.node);
        }
    }
}

/// Nodes whose tasks the scheduler dropped (expired requests): collected by the graph's next
/// operation. Pushed to only on that rare path; one load when empty.
#[derive(Debug)]
pub(super) struct DropBin {
    any: crate::sync::AtomicBool,
    nodes: crate::sync::Mutex<Vec<NodeRef>>,
}

impl Default for DropBin {
    fn default() -> Self {
        Self {
            any: crate::sync::AtomicBool::new(false),
            nodes: crate::sync::Mutex::new(Vec::new()),
        }
    }
}

impl DropBin {
    fn push(&self, node: NodeRef) {
        self.nodes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(node);
        // Release: pairs with the Acquire swap in `take`.
        self.any.store(true, crate::sync::Ordering::Release);
    }

    /// Whether a report may be waiting: one load, inlined into the hand-off, which then skips
    /// the call to [`take`](Self::take) and the move of its 260-byte answer (Relaxed: a hint,
    /// as in `take`).
    #[inline(always)]
    pub(super) fn maybe_any(&self) -> bool {
        self.any.load(crate::sync::Ordering::Relaxed)
    }

    /// Up to 32 of the nodes reported since the last call (the list keeps its capacity, so a
    /// steady state allocates nothing; a caller takes again until this comes back empty).
    pub(super) fn take(&self) -> arrayvec::ArrayVec<NodeRef, 32> {
        let mut out = arrayvec::ArrayVec::new();
        // The common case, nothing reported: one load, no RMW on the hand-off path. Relaxed
        // (a hint): the swap below decides, and a report this load misses is taken by the
        // next hand-off or by an executor that finds nothing.
        if !self.any.load(crate::sync::Ordering::Relaxed) {
            return out;
        }
        // Acquire: pairs with the Release store in `push`.
        if !self.any.swap(false, crate::sync::Ordering::Acquire) {
            return out;
        }
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        while out.len() < out.capacity() {
            match nodes.pop() {
                Some(n) => out.push(n),
                None => break,
            }
        }
        if !nodes.is_empty() {
            // More than one take's worth: the next take sees them.
            self.any.store(true, crate::sync::Ordering::Release);
        }
        out
    }
}

/// A job an executor pulled: run it, then pass it to [`Graph::complete`].
///
/// Dropping it without `complete` (a panic that unwinds past it, an early return) ends the job
/// `internal / abandoned` (SPEC D33): its dependents see that failure per their gates,
/// [`Graph::wait_batch`] returns it, and its cell goes back per the class's drop policy (the
/// assignment's drop: quarantined by default, see
/// [`DropPolicy`](crate::scheduler::DropPolicy)).
pub struct RunningJob {
    pub(super) id: super::JobId,
    pub(super) key: JobKey,
    /// `None` once `complete` took it.
    pub(super) assignment: Option<Assignment>,
    pub(super) cap: Option<ConcurrencyCap>,
    /// The graph that ends the job if this is dropped; `None` once `complete` took it.
    pub(super) graph: Option<std::sync::Arc<dyn EndAbandoned>>,
}

/// What a [`RunningJob`] asks its graph: whether it is told to stop, and (dropped without
/// `complete`) to end it abandoned.
pub(super) trait EndAbandoned: Send + Sync {
    fn end_abandoned(self: std::sync::Arc<Self>, node: NodeRef);
    /// Whether the started job on `node` is told to stop (SPEC D20, D31).
    fn signalled(&self, node: NodeRef) -> bool;
    /// Registers `waker` for the next signal or end (see [`RunningJob::cancelled`]).
    fn watch(&self, entry: &mut Option<u64>, waker: &std::task::Waker);
    /// Takes a watcher's entry out.
    fn unwatch(&self, entry: &mut Option<u64>);
}

impl core::fmt::Debug for RunningJob {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RunningJob")
            .field("id", &self.id)
            .field("key", &self.key)
            .field("assignment", &self.assignment)
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl Drop for RunningJob {
    fn drop(&mut self) {
        if let Some(graph) = self.graph.take() {
            // The cell first, per the class's drop policy; then the job ends.
            drop(self.assignment.take());
            graph.end_abandoned(self.id.node);
        }
    }
}

impl RunningJob {
    /// The job's identity.
    #[inline]
    pub fn id(&self) -> super::JobId {
        self.id
    }

    /// Whether the job is told to stop (SPEC D31, D20): nothing wants its outcome any more
    /// (every handle dropped, no dependent waiting), or `advance` superseded it, or its key
    /// was removed. One load; a body polls it between steps. Its completion then ends it
    /// `cancelled / withdrawn` (or is refused as stale), whatever it reports.
    #[inline]
    pub fn is_cancelled(&self) -> bool {
        self.graph
            .as_ref()
            .is_some_and(|g| g.signalled(self.id.node))
    }

    /// Resolves once [`is_cancelled`](Self::is_cancelled) holds: a body can `select!` on it.
    /// Cancel-safe.
    pub fn cancelled(&self) -> impl core::future::Future<Output = ()> + Send + '_ {
        struct Watch<'a> {
            job: &'a RunningJob,
            entry: Option<u64>,
        }
        impl core::future::Future for Watch<'_> {
            type Output = ();
            fn poll(
                self: core::pin::Pin<&mut Self>,
                cx: &mut core::task::Context<'_>,
            ) -> core::task::Poll<()> {
                let this = self.get_mut();
                let Some(g) = this.job.graph.as_ref() else {
                    return core::task::Poll::Pending;
                };
                if g.signalled(this.job.id.node) {
                    g.unwatch(&mut this.entry);
                    return core::task::Poll::Ready(());
                }
                g.watch(&mut this.entry, cx.waker());
                if g.signalled(this.job.id.node) {
                    g.unwatch(&mut this.entry);
                    return core::task::Poll::Ready(());
                }
                core::task::Poll::Pending
            }
        }
        impl Drop for Watch<'_> {
            fn drop(&mut self) {
                if self.entry.is_some() {
                    if let Some(g) = self.job.graph.as_ref() {
                        g.unwatch(&mut self.entry);
                    }
                }
            }
        }
        Watch {
            job: self,
            entry: None,
        }
    }

    /// The job's key.
    #[inline]
    pub fn key(&self) -> JobKey {
        self.key
    }

    /// The cell and execution permit.
    #[inline]
    pub fn assignment(&self) -> &Assignment {
        self.assignment
            .as_ref()
            .expect("held until `complete` or the drop")
    }

    /// The concurrency cap of the batch the job came in, if it was submitted with one
    /// ([`Graph::submit_batch_atomic`], SPEC D41).
    #[inline]
    pub fn cap(&self) -> Option<&ConcurrencyCap> {
        self.cap.as_ref()
    }

    /// Runs the job's body: under its batch's cap if it has one (a permit taken right before
    /// `body` and given back when it returns or unwinds, SPEC D41), else at once.
    pub fn run<R>(&self, body: impl FnOnce() -> R) -> R {
        match &self.cap {
            Some(cap) => cap.run(body),
            None => body(),
        }
    }
}

/// A job that became ready, with what its hand-off needs.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Ready {
    pub(crate) node: NodeRef,
    pub(crate) key: JobKey,
    pub(crate) tenant: TenantId,
    pub(crate) class: ClassId,
    /// Its effective priority when it became ready (SPEC D30).
    pub(crate) priority: Priority,
    /// Its own absolute deadline ([`rules::NO_DEADLINE`]: none).
    pub(crate) deadline: u64,
}

/// Fixed bounds chosen at build (SPEC D05).
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub(crate) nodes: u32,
    pub(crate) edges: u32,
    pub(crate) keys: u32,
    pub(crate) max_deps: u32,
    pub(crate) max_gen: u32,
    /// The generation every node slot starts at (0; near [`NodeRef::MAX_GEN`] in tests).
    pub(crate) first_gen: u32,
    /// The generation every key slot of the lock-free graph's key table starts at (0; near
    /// `u32::MAX` in tests).
    pub(crate) first_key_gen: u32,
    /// Nodes, edges and keys backed at build and kept through every shrink (SPEC D51; 0: the
    /// first segment only).
    pub(crate) reserve: (u32, u32, u32),
}

/// A job's urgency (SPEC D30): a priority (higher is more urgent) and an absolute deadline in
/// nanoseconds on the ledger's clock ([`NO_DEADLINE`]: none; earlier is more urgent).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Urgency {
    pub(crate) priority: crate::ids::Priority,
    pub(crate) deadline: u64,
}

impl Urgency {
    /// The more urgent of the two in each component: the larger priority, the earlier
    /// deadline.
    #[inline]
    pub(crate) fn max(self, o: Urgency) -> Urgency {
        Urgency {
            priority: self.priority.max(o.priority),
            deadline: self.deadline.min(o.deadline),
        }
    }

    /// Whether `self` would raise `o` in either component.
    #[inline]
    pub(crate) fn exceeds(self, o: Urgency) -> bool {
        self.priority > o.priority || self.deadline < o.deadline
    }

    /// Whether this is the least urgency (priority 0, no deadline): a demander of it neither
    /// [`exceeds`](Self::exceeds) nor [`may_lift`](Self::may_lift) any producer, so its arrival
    /// and departure change nothing.
    #[inline]
    pub(crate) fn is_least(self) -> bool {
        self.priority == 0 && self.deadline == super::rules::NO_DEADLINE
    }

    /// Whether a demander of urgency `self` may be what lifts a producer's effective urgency
    /// `eff` above its base `base` in some component: only then can its departure lower the
    /// producer (SPEC D30). A necessary condition, checked before any recomputation.
    #[inline]
    pub(crate) fn may_lift(self, eff: Urgency, base: Urgency) -> bool {
        (self.priority >= eff.priority && eff.priority > base.priority)
            || (self.deadline <= eff.deadline && eff.deadline < base.deadline)
    }
}
