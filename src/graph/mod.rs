//! The dependency graph (SPEC section D): keyed, versioned jobs with gated edges, run on the
//! fair scheduler.
//!
//! A job names its key, tenant, class and priority and lists dependencies on other keys, each
//! with a [`Gate`]. It becomes ready only when every gate holds (D12); then it takes its ledger
//! permit (D06: waiting jobs hold no quota) and is submitted in pull mode to the graph's
//! [`Scheduler`] under its own tenant, class and priority. Executors pull with
//! [`Graph::try_next`] / [`Graph::next_blocking`], run the body and call [`Graph::complete`],
//! which releases the job's dependents in O(dependents) (D13). A submission returns an owned
//! [`JobHandle`] (D31): the job's demand and a claim on its outcome, which the handle reads
//! ([`JobHandle::outcome`], [`Graph::wait_batch`], or by awaiting it). The job's node slot is
//! freed once the job has ended and its last handle is dropped; a job whose every handle is
//! dropped before it ends, with no dependent waiting on it, is cancelled.
//!
//! # Example
//!
//! ```
//! use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
//! use fairway::graph::{Admission, Dependency, Gate, Graph, JobKey, JobOutcome, JobSpec};
//! use fairway::{ClassId, TenantId};
//!
//! let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
//! let graph = Graph::builder(ledger).class(1).build()?;
//! let job = |key, deps| JobSpec {
//!     key: JobKey::new(key),
//!     tenant: TenantId(0),
//!     class: ClassId(0),
//!     priority: 0,
//!     deadline: None,
//!     deps,
//! };
//! // `link` waits for `compile`, which is submitted second (its key had no producer yet).
//! let after = [Dependency::on(JobKey::new(1), Gate::OnSuccess)];
//! let Admission::Admitted(link) = graph.submit(&job(2, &after))? else { unreachable!() };
//! let Admission::Admitted(compile) = graph.submit(&job(1, &[]))? else { unreachable!() };
//! // An executor of class 0.
//! while let Some(running) = graph.try_next(ClassId(0)) {
//!     // ... run the job's body ...
//!     graph.complete(running, JobOutcome::Succeeded)?;
//! }
//! assert_eq!(compile.outcome(), Some(JobOutcome::Succeeded));
//! assert_eq!(graph.outcome(&link)?, Some(JobOutcome::Succeeded));
//! // Both jobs ended: dropping their handles frees their node slots.
//! drop((compile, link));
//! assert_eq!(graph.occupancy().nodes_used, 0);
//! # Ok::<(), fairway::Error>(())
//! ```
//!
//! # Two engines, one rule core
//!
//! [`LockFreeGraph`] is the product; [`MutexGraph`] keeps the same state behind one
//! `std::sync::Mutex` and serves as the comparison and the differential oracle. Both decide
//! every gate through the shared rule functions (`rules.rs`).
//!
//! # The lock-free engine and its one lock
//!
//! Nodes and edges live in fixed arenas allocated at build; node slots are generation-tagged,
//! and generations are checked: a slot freed at the last one retires (it is never allocated
//! again and stays counted as used), so a stale handle never names a later job. Each node
//! keeps two push-only stacks of dependent edges (released at admission, and at the end) that
//! whoever ends the node seals with one swap; a late linker sees the seal (or a newer
//! generation, after which the key table says how the producer ended) and counts its gate at
//! once. Submit, link to an existing producer, complete and the hand-off take no lock and
//! allocate nothing.
//!
//! One mutex, the **topology lock**, guards what is rare:
//!
//! - registering a waiter on a key that has no producer yet (D11), adopting those waiters when
//!   the producer arrives, the cycle check that such an adoption or a discovery (D14) needs
//!   (D15, a walk of the dependency keys upstream, which allocates its visited set), and
//!   recording a discovered dependency's key. A submit whose key has no waiters and whose
//!   dependencies all have producers never takes it;
//! - an atomic batch ([`Graph::submit_batch_atomic`], D04), from its first check to its
//!   publication: it reserves every key of the batch, and whoever meets a reserved key goes to
//!   the lock, so nobody sees part of a batch. Batches are the host's explicit choice of the
//!   slow path (they also allocate);
//! - [`Graph::shutdown`]'s walk of the key table that fails every parked dependency (once);
//! - the key operations ([`Graph::advance`], [`Graph::remove`], [`Graph::reset`]), freeing
//!   the parked edges of a job they retired, and compacting the index of keys.
//!
//! # The key table (lock-free engine)
//!
//! Keys live in a fixed array of key slots; an index (open addressing, two cells per slot) maps
//! a key to its slot and the generation the slot was claimed at. A new key claims a free slot
//! and an index cell by CAS, without the lock. `remove` and `reset` give the slot back (its
//! generation moves on, so a lock-free user still holding it notices and names the key again,
//! as a new incarnation) and leave a tombstone in the index; when tombstones pass a quarter of
//! the index, the removal compacts it in place under the topology lock (`lockfree/index.rs`).
//! Submit to an existing key reads the index without a lock or a pin; complete and the
//! hand-off do not touch it.
//!
//! No user code, waker or drop of user data runs under it.
//!
//! # Shutdown
//!
//! [`Graph::shutdown`] refuses new work, shuts the scheduler down and gives every job that has
//! not ended exactly one outcome: queued jobs, and jobs that become ready from then on, end
//! `unavailable / shutdown`; jobs waiting for a key without producer, and their dependents
//! per gate, end `dependency-failed`; running jobs complete as usual. Payloads that the
//! scheduler hands back later (a dispatch pass that was running during the shutdown) are
//! collected by every later hand-off and by executors that find nothing.
//!
//! # Keys: versions, supersede, removal (SPEC D01, D20–D24)
//!
//! A key ([`JobKey`]) exists from the first job or dependency that names it until it is
//! removed; it has a [`Version`]: a process-unique incarnation and a generation.
//! [`Graph::advance`] bumps the generation and retires the key's current job in the same step:
//! waiting or queued, it ends `cancelled / superseded`; running, its completion will be refused
//! as stale (the job's witness is no longer current, [`Graph::is_current`]). Its dependents
//! follow the key (SPEC D33): a dependency on the key's current producer ([`Dependency::on`])
//! moves, at the advance, to the key's next generation — the dependent keeps waiting, like jobs
//! that wait on the key with no producer — while one pinned to the superseded version
//! ([`Dependency::pinned`]) counts as on a producer that ended `superseded` unadmitted: a
//! `Sequential` gate holds, any other fails the dependent `cancelled / superseded`. A completion
//! that races the advance and comes first keeps its dependents: they take its outcome.
//! [`Graph::remove`] and [`Graph::reset`] retire the key's job with `removed`: a removed job
//! meets none of its dependents' gates (they fail `dependency-failed`), and the key's waiters
//! fail `unavailable / removed`. A
//! [`Witness`] proves a running job's version; [`Graph::check_witness`] refuses it once the
//! key advanced, was removed, or was re-created. See `keys.rs` and each engine's `keys.rs` for
//! the protocol: on the lock-free engine the key's version word changes under the topology
//! lock, the key's state word is moved off its producer by one CAS (the linearisation point),
//! and the producer is retired by a flag in its count word, which the executor's `start` keeps
//! and `complete` checks.
//!
//! # Deduplication (SPEC D02, D03, D32)
//!
//! ## Identity and liveness
//!
//! A job's identity is its [`JobKey`] (work key and stage) at the key's current [`Version`]
//! (incarnation and generation): a key holds at most one job per generation. A job is **live**
//! from the moment its key names it as producer (publication) until its outcome is published
//! (it ended: completed, failed, superseded or removed). A submission of an identity that has a
//! live job does not create a second job: it returns [`Admission::DedupeJoined`] with a handle
//! of that job. After the job ended, a submission at the same generation is refused
//! `already-exists / duplicate-key` (the generation had its job; [`Graph::advance`] starts a new
//! one), and after `advance` or `remove` it is a new job.
//!
//! ## Handles of one job
//!
//! Every handle that a submission returns, `Admitted` or `DedupeJoined`, is one claim on the
//! job and one demand for it (SPEC D31). Handles of one job compare equal (they name the same
//! [`JobId`]) and each reads the same outcome ([`JobHandle::outcome`], [`Graph::outcome`],
//! [`Graph::wait_batch`], or by awaiting the handle); reading takes nothing away from the
//! others. Dropping a handle gives back its claim and withdraws its demand:
//!
//! - The job's node slot is freed when the job has ended and its last handle is dropped.
//!   From then on its [`JobId`] is refused `not-found / stale-handle`.
//! - A job that has not ended is wanted while it has a handle, while a dependent that has not
//!   ended still waits on it, or once it was detached ([`JobHandle::detach`]). A joiner's
//!   handle is a demand like the submitter's: whichever of them is dropped first, the other
//!   keeps the job.
//! - When the last demand goes, the job is cancelled `cancelled / withdrawn`: a waiting or
//!   queued job ends at once (the graph withdraws a queued job's scheduler request), a
//!   running one is told ([`RunningJob::is_cancelled`]) and ends `withdrawn` when it
//!   completes, whatever its body reported. [`JobHandle::cancel`] withdraws a handle's demand
//!   explicitly and says whether that cancelled the job.
//! - A withdrawn job is never joined. A submission of its identity advances the key one
//!   generation and starts a new job; a hook that names it gets `not-found / stale-handle`.
//!
//! ## The joiner's own job description
//!
//! A joiner's [`JobSpec`] is checked (bad input is refused as for any submission) and
//! otherwise unused: the joined job keeps its tenant, class, priority and dependencies. A
//! graph job carries no payload of its own (the host runs the body for the key), so nothing
//! is dropped: the caller still holds everything it passed in.
//!
//! ## The caller's hook
//!
//! [`Graph::submit_with`] consults a [`DedupeHook`] before admission: the hook can map an
//! identity to a job the caller already knows (its own notion of "the same work", wider than
//! the graph's, for example two keys with one content). `Some(id)` skips submission
//! entirely: the graph adds a claim to that job and returns `DedupeJoined` with a new handle.
//! The hook is passed per submission, not stored in the graph: it may borrow the caller's
//! state, need not be `'static`, `Send` or `Sync`, and [`Graph::submit`] (which is
//! `submit_with` with [`NoDedupeHook`]) pays nothing for it. The hook's notices
//! ([`DedupeHook::admitted`], [`DedupeHook::joined`]) run after the graph's state is
//! consistent, on the submitting thread, with no lock of the graph held (D32).
//!
//! Atomic batches do not dedupe: a job of [`Graph::submit_batch_atomic`] whose key has a
//! live job refuses the batch `duplicate-key`, as before (a batch is all new jobs or none).
//!
//! # Inheritance of urgency (SPEC D30)
//!
//! A job's **effective** urgency is the largest priority and the earliest deadline among its
//! own (raised by every dedupe joiner's, for as long as the job lives), and the effective
//! urgency of every job that waits on it through a **pending** edge: an edge not yet released
//! (an `OnAdmission` edge until the producer is admitted, any other until it ends) whose
//! dependent has not ended. A job's deadline ([`JobSpec::deadline`]) is relative to its
//! submission and stamped then on the ledger's clock; [`Graph::effective`] reads the values.
//!
//! - **Arrival.** A job that links edges (at submit, when its key's waiters are adopted, in a
//!   batch, or through [`Graph::discover`]) and a joiner raise their producers, transitively.
//!   Nothing flows downstream: a job submitted on a raised producer keeps its own values.
//! - **Departure.** A dependent that ends before its producer (superseded by
//!   [`Graph::advance`], removed, or failed) and the admission of a producer (its
//!   admission-gated dependents stop waiting) recompute the producer from its remaining
//!   pending dependents, transitively. A dependent that ends after its producer changes
//!   nothing.
//! - **Scheduler.** A job enters the scheduler with its effective priority; its permit carries
//!   the time its own deadline has left, and a tighter inherited deadline is applied with
//!   [`Scheduler::set_deadline`]. Later changes re-order the queued request in place
//!   ([`Scheduler::set_priority`], SPEC F36) inside its own tenant: the tenant gets no extra
//!   turn (F15). A `too-late` answer (it was granted meanwhile) is ignored. A job whose
//!   effective deadline has passed when it becomes ready ends `deadline-exceeded` without
//!   taking a permit; one whose request expires in the queue (F46) ends `deadline-exceeded` at
//!   the graph's next operation (the scheduler drops its task, which tells the graph).
//!
//! **Representation.** No new arena: a job finds its producers through its dependency keys
//! (the per-node key slots the cycle check already keeps) and the producer each key names,
//! and a producer finds its demanders by walking its own two dependent-edge lists. Each node
//! holds three more words (effective and base priority with an active bit, effective and base
//! deadline).
//!
//! **Cost of one update.** A step that visits a job `x` finds its producers (for each of its
//! at most `k` dependency keys, a walk of that producer's lists, at most `f` pending
//! dependents) and recomputes each affected producer (a walk of `f` edges, done twice, see
//! below): `O(k · f)` per visited job. An update visits the jobs upstream of its origin whose
//! values change, each once per path that reaches it: on a chain or tree of depth `d`,
//! `O(d · k · f)`; in a graph with diamonds a job is visited once per path. A visit whose
//! value does not change stops there.
//!
//! **Locking (lock-free engine).** Every change of an effective or base value happens under
//! the topology lock, which is taken only when a change is possible: a new dependent whose
//! urgency exceeds a producer's, a leaving one that may have lifted a producer above its base,
//! an admitted producer whose effective urgency is above its base, a joiner above the base, or
//! a key whose waiters are adopted (already the slow path). When urgencies are equal — the
//! common submit and complete path — each linking submit and each end costs one SeqCst fence
//! and a load per dependency, no lock and no allocation; a job of the least urgency (priority
//! 0, no deadline) not even that, as it can lift no producer. The propagation itself allocates
//! nothing in a steady state (its buffers are kept across calls). A recomputation stores its result,
//! fences, and walks again until two walks agree, so it cannot miss a dependent that linked
//! or left without the lock (see `lockfree/urgency.rs`). Re-ordering in the scheduler runs
//! after the lock is released. The mutex engine keeps the same values under its one lock.
//!
//! # What holds, and where it is tested
//!
//! On both engines (`tests/graph_rules.rs`, one generic test per rule through one macro): D02
//! (three outcomes, errors apart, unknown and foreign handles, node generations that retire
//! instead of wrapping, shutdown), D04 (one-by-one batches, all-or-none batches with
//! refusals that change nothing, an observer that never sees half a batch, `wait_batch` in
//! input order), D05 (full node, edge and key stores give `Backpressured` and change nothing;
//! the waiting form resumes when room frees, D42), D06 (no quota while waiting; a ledger
//! refusal fails the job, and its dependents per gate), D30 (`tests/graph_inherit.rs`:
//! re-ordering a queued job, a deadline relaxed on departure, a departure with a third tenant's
//! share kept fair, fan-in 1,000 and a chain of 10^4, joiners and the accessor; urgent jobs,
//! advance, remove and time in `tests/graph_differential.rs`; urgency churn with conservation
//! in `tests/graph_churn.rs`; `loom_urgency.rs` models an urgent link racing a departing
//! demander and a departure racing a recomputation), D10 (every gate, transitive
//! `dependency-failed`), D11, D12, D13, D14 (a dependency discovered while a job runs gates
//! its end; union with earlier edges), D15 (self-dependency; a cycle through a waiting key or
//! inside a batch, refused with nothing changed; two threads racing the halves of a cycle in
//! `tests/graph_churn.rs`), D40 (a chain of 16 jobs on one cell), D41 (a batch's cap bounds
//! its bodies on four executors, released on unwind), D50, and D01, D20–D24
//! (`tests/graph_keys.rs`; `tests/graph_keys_differential.rs` adds the key operations to the
//! differential op mix, and key churn past the table; `tests/graph_keys_churn.rs` advances and
//! removes keys under load, and churns a new key per job through a small table;
//! `tests/graph_key_table.rs` slot reuse, removal and re-creation at scale, lookups racing
//! compaction; `loom_keys.rs` models advance against complete, against start and against a
//! publication, remove against link; `loom_key_table.rs` a lookup and an insertion against
//! compaction).
//! `tests/graph_differential.rs` compares the engines after every operation of random
//! sequences; `tests/graph_churn.rs` checks conservation at quiescence on threads and on
//! tokio, and with a shutdown in the middle; the loom models (`loom_link.rs`,
//! `loom_batch.rs`, `loom_shutdown.rs`) cover link against complete, against slot reuse,
//! discovery against the producer completing, an atomic batch against an observer, and the
//! ready hand-off against a shutdown. Dedupe, D02's `DedupeJoined`, D03 and D32's notices:
//! `tests/graph_dedupe.rs` (both engines: joins in every state, racing submits of one
//! identity, submits racing the job's end, 10^4 joined jobs, hooks, notices that re-enter the
//! graph); `loom_dedupe.rs` models a join against the job's end and its last take, and two
//! submits of one identity.
//!
//! # Limits of this part (not built yet)
//!
//! - A key holds one job per generation: a second submission at the same generation joins
//!   the job while it is live and is refused `already-exists / duplicate-key` after it ended,
//!   until the key advances or is removed (a withdrawn job's identity starts a new job at the
//!   next generation, see [Handles of one job](#handles-of-one-job)). Keys are at most
//!   [`WorkKey::MAX`], stage tags 8 bits, generations 24 bits.
//! - A compaction of the lock-free key index holds the topology lock for one pass over the
//!   index (once per a quarter of its cells in removals); a submit that names a new key, or a
//!   lookup that meets the compaction, waits for it. The index's array and the stores' segments
//!   are reclaimed through an epoch collector (SPEC D51, see `lockfree/store.rs`).
//! - A joiner's urgency (D30) stays with the job until the job ends, also after the joiner's
//!   handle was dropped.
//! - The ready depth is the node capacity: the graph's scheduler queues as many jobs per class
//!   as there are nodes, so a job that became ready is never refused for queue space.
//! - A job (or a batch) refused for a cycle or a duplicate key in the rare race where the
//!   conflict appears while it links keeps the edge slots it had linked onto live producers
//!   until those end; the edges are inert (generation-checked).
//! - After [`Graph::shutdown`], jobs must be pulled through the graph, not through
//!   [`Graph::scheduler`] directly: a payload taken out behind the graph's back gets no outcome.

mod builder;
mod cap;
mod dedupe;
mod exec;
mod handle;
mod keys;
mod lockfree;
#[cfg(all(test, loom))]
mod loom_batch;
#[cfg(all(test, loom))]
mod loom_dedupe;
#[cfg(all(test, loom))]
mod loom_demand;
#[cfg(all(test, loom))]
mod loom_key_table;
#[cfg(all(test, loom))]
mod loom_keys;
#[cfg(all(test, loom))]
mod loom_link;
#[cfg(all(test, loom))]
mod loom_shutdown;
#[cfg(all(test, loom))]
mod loom_support;
#[cfg(all(test, loom))]
mod loom_urgency;
#[cfg(all(test, loom))]
mod loom_wait;
mod mutex;
mod reqs;
pub(crate) mod rules;
mod segments;
#[cfg(all(test, not(loom)))]
mod tests;
mod types;

pub use builder::GraphBuilder;
pub use cap::ConcurrencyCap;
pub use dedupe::{DedupeHook, Identity, NoDedupeHook};
pub use handle::{BatchHandle, JobHandle, JobId};
pub use keys::{Version, Witness};
#[doc(hidden)]
pub use lockfree::LockFreeGraph;
#[doc(hidden)]
pub use mutex::MutexGraph;
pub use types::*;

use crate::admission::{AdmissionRequest, Ledger};
use crate::error::{Code, Error, Reason};
use crate::ids::{ClassId, Priority, RequestId, TenantId};
use crate::scheduler::AdmittedRequest;
use crate::scheduler::{Assignment, ClassConfig, Scheduler};
use crate::sync::{fence, AtomicBool, AtomicU32, Condvar, Mutex, Ordering};
use std::sync::Arc;

mod sealed {
    pub trait Sealed {}
}

/// The store under a graph: [`LockFreeGraph`] (the engine's) or [`MutexGraph`] (the oracle's).
/// Sealed.
#[doc(hidden)]
pub trait GraphEngine: sealed::Sealed + Send + Sync + Sized + 'static {
    #[doc(hidden)]
    type Work: Default;
    #[doc(hidden)]
    fn with_bounds(bounds: Bounds) -> Self;
    #[doc(hidden)]
    /// `deadline`: the job's own absolute deadline, stamped by the caller (SPEC D30).
    fn submit(
        &self,
        spec: &JobSpec<'_>,
        deadline: u64,
        work: &mut Self::Work,
    ) -> Result<Admission<NodeRef>, Error>;
    /// Adds a claim to a held job (SPEC D02, D03): `DedupeJoined`, `Backpressured` when its
    /// claims are at their bound, `stale-handle` once every handle took the outcome. The
    /// joiner's `urgency` raises the job's own for as long as it lives (SPEC D30).
    #[doc(hidden)]
    fn join(
        &self,
        node: NodeRef,
        urgency: rules::Urgency,
        work: &mut Self::Work,
    ) -> Result<Admission<NodeRef>, Error>;
    /// `deadlines`: each job's own absolute deadline, in input order.
    #[doc(hidden)]
    fn submit_batch(
        &self,
        jobs: &[JobSpec<'_>],
        deadlines: &[u64],
        out: &mut Vec<NodeRef>,
        work: &mut Self::Work,
    ) -> Result<Admission<()>, Error>;
    /// The effective urgency of the job on `node` (SPEC D30), `None` for a stale handle.
    #[doc(hidden)]
    fn effective(&self, node: NodeRef) -> Option<rules::Urgency>;
    /// A job whose effective urgency changed in this operation (for the scheduler's copy).
    #[doc(hidden)]
    fn pop_resync(&self, work: &mut Self::Work) -> Option<NodeRef>;
    #[doc(hidden)]
    fn seal_batch(&self, nodes: &[NodeRef], work: &mut Self::Work);
    #[doc(hidden)]
    fn pop_ready(&self, work: &mut Self::Work) -> Option<Ready>;
    #[doc(hidden)]
    fn admitted(&self, node: NodeRef, work: &mut Self::Work);
    #[doc(hidden)]
    fn fail_ready(&self, node: NodeRef, error: Error, admitted: bool, work: &mut Self::Work);
    #[doc(hidden)]
    fn start(&self, node: NodeRef) -> bool;
    #[doc(hidden)]
    fn complete(
        &self,
        node: NodeRef,
        outcome: JobOutcome,
        work: &mut Self::Work,
    ) -> Result<(), Error>;
    #[doc(hidden)]
    fn discover(
        &self,
        node: NodeRef,
        deps: &[Dependency],
        work: &mut Self::Work,
    ) -> Result<Admission<()>, Error>;
    #[doc(hidden)]
    fn outcome(&self, node: NodeRef, take: bool) -> Result<Option<JobOutcome>, Error>;
    /// Handles of the job on `node` that have not taken its outcome yet; `None` once every
    /// one took it (the handle is stale).
    #[doc(hidden)]
    fn claims(&self, node: NodeRef) -> Option<u32>;
    /// Gives back one handle's claim on the job on `node` (SPEC D31). `detach`: the job keeps
    /// running with no handle and is never cancelled for want of demand. A job that ended is
    /// freed with its last claim; one that has not ended is cancelled (`cancelled /
    /// withdrawn`) when this was its last demand, and so, transitively, are the producers it
    /// leaves without demand. `Ok(true)` when this release cancelled the job.
    #[doc(hidden)]
    fn release(&self, node: NodeRef, detach: bool, work: &mut Self::Work) -> Result<bool, Error>;
    /// A queued job that this operation ended before an executor started it: its scheduler
    /// request is withdrawn by the caller (SPEC D31).
    #[doc(hidden)]
    fn pop_withdrawn(&self, work: &mut Self::Work) -> Option<NodeRef>;
    /// Whether the started job on `node` is told to stop: its demand is gone (SPEC D31), or
    /// `advance` or `remove` retired it (D20, D24). One load.
    #[doc(hidden)]
    fn signalled(&self, node: NodeRef) -> bool;
    /// Refuses every reservation from now on (`unavailable / shutdown`): called by
    /// [`Graph::shutdown`] before anything ends, so a submit that takes a slot freed by the
    /// shutdown's ending of a job sees it and gives the slot back (SPEC D02).
    #[doc(hidden)]
    fn close(&self);
    #[doc(hidden)]
    fn shutdown(&self, work: &mut Self::Work);
    #[doc(hidden)]
    fn occupancy(&self) -> Occupancy;
    #[doc(hidden)]
    fn max_deps(&self) -> usize;
    #[doc(hidden)]
    fn advance(&self, key: JobKey, work: &mut Self::Work) -> Result<Version, Error>;
    #[doc(hidden)]
    fn remove(&self, key: JobKey, work: &mut Self::Work) -> Result<(), Error>;
    #[doc(hidden)]
    fn reset(&self, work: &mut Self::Work);
    /// Gives back the backing memory of every store's segments whose slots are all free
    /// (SPEC D51); keeps anything in use. Called by [`Graph::reset`] after its keys are removed
    /// and by [`Graph::shrink_to_fit`]; never on the per-job path.
    #[doc(hidden)]
    fn shrink(&self) {}
    /// Pins what the engine's lock-free readers need while one public call runs (SPEC D51:
    /// the lock-free engine's epoch; nothing for the mutex twin).
    #[doc(hidden)]
    fn pin(&self) -> Pinned {
        Pinned(None)
    }
    #[doc(hidden)]
    fn version(&self, key: JobKey) -> Option<Version>;
    #[doc(hidden)]
    fn node_version(&self, node: NodeRef) -> Option<(JobKey, Version)>;
    #[doc(hidden)]
    fn witness_current(&self, witness: &Witness) -> bool;
    #[doc(hidden)]
    fn stale_completions(&self) -> u64;
    /// Compactions of the key table's index so far (the mutex graph has none).
    #[doc(hidden)]
    fn key_compactions(&self) -> u64 {
        0
    }
}

/// What [`GraphEngine::pin`] holds for one public call: the lock-free engine's epoch pin
/// (SPEC D51), or nothing.
#[doc(hidden)]
pub struct Pinned(pub(crate) Option<crate::sync::epoch::Pin>);

impl core::fmt::Debug for Pinned {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Pinned"
        } else {
            "Pinned(none)"
        })
    }
}

struct Inner<E> {
    id: u64,
    engine: E,
    scheduler: Scheduler<Task>,
    ledger: Ledger,
    /// Threads blocked in [`Graph::wait_batch`]; operations that may end jobs notify only
    /// when it is non-zero.
    sleepers: AtomicU32,
    ended: (Mutex<()>, Condvar),
    /// Submitters waiting for capacity ([`Graph::submit_waiting`]) and their count.
    room_wakers: Mutex<RoomWaiters>,
    room_sleepers: AtomicU32,
    /// Set by [`Graph::shutdown`].
    shut: AtomicBool,
    /// Whether any batch was submitted with a cap: until then no executor looks at `caps`.
    capped: AtomicBool,
    /// Per node slot: the cap of the capped batch whose job holds it.
    caps: cap::CapSlots,
    /// Per node slot: the scheduler request of its queued job (SPEC D30's re-ordering).
    reqs: reqs::ReqSlots,
    /// Nodes whose tasks the scheduler dropped (expired requests).
    bin: Arc<DropBin>,
    /// Futures waiting for an outcome or a running job's signal (SPEC D31).
    outcome_waiters: handle::OutcomeWaiters,
}

/// Submitters waiting for room: one entry per waiting future (several futures of one task
/// share a waker, so entries are told apart by id, not by waker).
#[derive(Default)]
struct RoomWaiters {
    next: u64,
    list: Vec<(u64, std::task::Waker)>,
}

impl RoomWaiters {
    /// Registers (or refreshes) the entry `id` with `waker`.
    fn register(&mut self, id: &mut Option<u64>, waker: &std::task::Waker) {
        if let Some(i) = *id {
            if let Some((_, w)) = self.list.iter_mut().find(|(x, _)| *x == i) {
                if !w.will_wake(waker) {
                    w.clone_from(waker);
                }
                return;
            }
        }
        let i = self.next;
        self.next += 1;
        self.list.push((i, waker.clone()));
        *id = Some(i);
    }

    /// Takes the entry `id` out, if it is still there (a wake takes every entry).
    fn unregister(&mut self, id: &mut Option<u64>) {
        if let Some(i) = id.take() {
            self.list.retain(|(x, _)| *x != i);
        }
    }
}

/// A waiting submit's entry in [`RoomWaiters`]: dropping the future takes it out (cancel-safe:
/// no dead task's waker stays behind).
struct RoomEntry<'a> {
    graph: &'a Mutex<RoomWaiters>,
    sleepers: &'a AtomicU32,
    id: Option<u64>,
}

impl Drop for RoomEntry<'_> {
    fn drop(&mut self) {
        if self.id.is_some() {
            let mut w = self.graph.lock().unwrap_or_else(|e| e.into_inner());
            w.unregister(&mut self.id);
            // Relaxed: written only under the lock; a waker that misses this store wakes nobody
            // it should not (the entry is gone).
            self.sleepers.store(w.list.len() as u32, Ordering::Relaxed);
        }
    }
}

/// A dependency graph on the fair scheduler. Cheap to clone (one `Arc`).
pub type Graph = GraphOn<LockFreeGraph>;

/// [`Graph`] over either graph store: the engine's lock-free one or the oracle's mutex twin.
#[doc(hidden)]
pub struct GraphOn<E: GraphEngine> {
    inner: Arc<Inner<E>>,
}

impl<E: GraphEngine> Clone for GraphOn<E> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<E: GraphEngine> core::fmt::Debug for GraphOn<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Graph")
            .field("id", &self.inner.id)
            .field("occupancy", &self.occupancy())
            .finish_non_exhaustive()
    }
}

impl Graph {
    /// Starts building a graph whose jobs are admitted by `ledger`.
    pub fn builder(ledger: Ledger) -> GraphBuilder {
        GraphBuilder {
            ledger,
            cells: Vec::new(),
            bounds: Bounds {
                nodes: 1024,
                edges: 4096,
                keys: 4096,
                max_deps: 16,
                max_gen: Version::MAX_GENERATION,
                first_gen: 0,
                first_key_gen: 0,
                reserve: (0, 0, 0),
            },
        }
    }
}

impl<E: GraphEngine> GraphOn<E> {
    /// Admits a job (SPEC D02). It waits until every gate holds, then takes its ledger permit
    /// and enters the scheduler.
    ///
    /// If the key's current generation has a live job (published, not ended), nothing is
    /// submitted: the result is [`Admission::DedupeJoined`] with a handle of that job, which
    /// sees its one outcome (see [Deduplication](crate::graph#deduplication-spec-d02-d03-d32)
    /// for what "live" and "the same identity" mean, and for several handles' claims). Same as
    /// [`submit_with`](Self::submit_with) with [`NoDedupeHook`].
    ///
    /// # Errors
    ///
    /// `invalid-argument / cycle` for a self-dependency or a cycle (D15), `invalid-argument /
    /// key-range` or `too-many-dependencies`, `invalid-argument / class` for a class the graph
    /// was not built with, `invalid-argument / tenant` for a tenant beyond the ledger's, `already-exists / duplicate-key` when the job of
    /// the key's current generation has ended, `unavailable / shutdown` after
    /// [`shutdown`](Self::shutdown). A full store is not an error but
    /// [`Admission::Backpressured`]. On any of these nothing was mutated.
    pub fn submit(&self, spec: &JobSpec<'_>) -> Result<Admission<JobHandle<E>>, Error> {
        self.validate(spec)?;
        self.check_open()?;
        self.submit_checked(spec)
    }

    /// Every check of [`submit`](Self::submit) on the job alone, before anything is reserved:
    /// keys, the dependency bound, the class and the tenant.
    fn validate(&self, spec: &JobSpec<'_>) -> Result<(), Error> {
        rules::validate(spec, self.inner.engine.max_deps())?;
        self.check_job(spec)
    }

    /// The job's class and tenant are the graph's: refused as the ledger and the scheduler
    /// refuse them (`invalid-argument / class`, `invalid-argument / tenant`), at the call
    /// rather than when the job becomes ready.
    fn check_job(&self, spec: &JobSpec<'_>) -> Result<(), Error> {
        let class = usize::from(spec.class.0);
        if class >= self.inner.scheduler.class_count() || class >= self.inner.ledger.class_count() {
            return Err(Error::new(Code::InvalidArgument, Reason::Class));
        }
        if spec.tenant.0 >= self.inner.ledger.max_tenants() {
            return Err(Error::new(Code::InvalidArgument, Reason::Tenant));
        }
        self.check_pins(spec.deps)
    }

    /// Refuses a dependency pinned to a version its key has not reached (SPEC D33): a key's
    /// version only grows (a re-created key draws a larger incarnation), so a pin that is not
    /// ahead now never will be; one older than the key's version is resolved when it links.
    fn check_pins(&self, deps: &[Dependency]) -> Result<(), Error> {
        for d in deps {
            let Some(pin) = d.pin else { continue };
            let _pin = self.inner.engine.pin();
            let ahead = match self.inner.engine.version(d.key) {
                Some(cur) => pin > cur,
                None => false,
            };
            if ahead {
                return Err(Error::new(Code::InvalidArgument, Reason::UnknownVersion));
            }
        }
        Ok(())
    }

    /// [`submit`](Self::submit) after its input checks.
    fn submit_checked(&self, spec: &JobSpec<'_>) -> Result<Admission<JobHandle<E>>, Error> {
        let out = self.attempt(spec);
        if !matches!(out, Ok(Admission::Admitted(_) | Admission::DedupeJoined(_))) {
            // A refusal may have taken a node, edges or key slots and given them back, while a
            // waiting submitter looked and found them taken: wake it to look again.
            self.wake_submitters();
        }
        out
    }

    /// One try of [`submit`](Self::submit) after its input checks. It wakes the threads in
    /// [`wait_batch`](Self::wait_batch) and the waiting submitters only when it admitted the
    /// job (its hand-off may have ended jobs); whoever calls it wakes waiting submitters after
    /// a refusal, if it may have overlapped one's look.
    fn attempt(&self, spec: &JobSpec<'_>) -> Result<Admission<JobHandle<E>>, Error> {
        let _pin = self.inner.engine.pin();
        let mut work = E::Work::default();
        let out = self.inner.engine.submit(spec, self.stamp(spec), &mut work);
        self.hand_off(&mut work);
        Ok(match out? {
            Admission::Admitted(node) => {
                self.wake_waiters();
                Admission::Admitted(self.handle(node))
            }
            Admission::DedupeJoined(node) => {
                self.wake_waiters();
                Admission::DedupeJoined(self.handle(node))
            }
            Admission::Backpressured => Admission::Backpressured,
        })
    }

    /// Wakes threads in [`wait_batch`](Self::wait_batch) and submitters waiting for room
    /// after an operation that may have ended jobs or freed edges. One fence and two loads
    /// when nobody waits.
    fn wake_waiters(&self) {
        // SeqCst fence: pairs with the one in `wait_batch` between registering as a sleeper
        // and checking outcomes, so either this sees the sleeper or it sees the ends.
        fence(Ordering::SeqCst);
        if self.inner.sleepers.load(Ordering::Relaxed) > 0 {
            let (lock, cond) = &self.inner.ended;
            drop(lock.lock().unwrap_or_else(|e| e.into_inner()));
            cond.notify_all();
        }
        if self.inner.room_sleepers.load(Ordering::Relaxed) > 0 {
            self.wake_submitters();
        }
        self.inner.outcome_waiters.wake();
    }

    /// Wakes submitters waiting for capacity after an operation that may have freed node or
    /// edge slots. One fence and one load when nobody waits; wakers run outside the lock.
    fn wake_submitters(&self) {
        // SeqCst fence: pairs with the one in `submit_waiting` between registering a waker and
        // trying, so either this sees the waker or that try sees the room.
        fence(Ordering::SeqCst);
        if self.inner.room_sleepers.load(Ordering::Relaxed) > 0 {
            let wakers = {
                let mut w = self
                    .inner
                    .room_wakers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                self.inner.room_sleepers.store(0, Ordering::Relaxed);
                RoomWaiters {
                    next: w.next,
                    list: std::mem::take(&mut w.list),
                }
            };
            for (_, w) in wakers.list {
                w.wake();
            }
        }
    }

    /// The waiting form of [`submit`](Self::submit) (SPEC D05, D42): while a store is full it
    /// waits (asynchronously) until completions or collected outcomes free room, instead of
    /// returning `Backpressured`. A waiting submitter sleeps: it is polled again only after an
    /// operation that may have freed room (a completion, a collected outcome, a refused submit
    /// that gave back what it had taken, a shutdown), never by its own tries.
    ///
    /// Waiting submitters try one at a time (under the lock of the waiter list), so one's try
    /// never hides room from another's; a plain `submit` that took and gave back room wakes them.
    /// Cancel-safe: dropping the future admits nothing.
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit).
    pub async fn submit_waiting(&self, spec: &JobSpec<'_>) -> Result<JobHandle<E>, Error> {
        use std::task::Poll;
        self.validate(spec)?;
        // This future's entry in the waiter list, taken out when it completes or is dropped.
        let mut entry = RoomEntry {
            graph: &self.inner.room_wakers,
            sleepers: &self.inner.room_sleepers,
            id: None,
        };
        std::future::poll_fn(|cx| {
            let mut w = self
                .inner
                .room_wakers
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            w.register(&mut entry.id, cx.waker());
            // Relaxed: ordered by the fence below (and written only under the lock).
            self.inner
                .room_sleepers
                .store(w.list.len() as u32, Ordering::Relaxed);
            // SeqCst fence: pairs with the one in `wake_submitters`: either that sees this
            // waker registered, or the try below sees the room it freed.
            fence(Ordering::SeqCst);
            // Only the engine's submit under the lock: it runs no waker and no host code. The
            // hand-off (ledger, scheduler, their wakers) runs after the lock is dropped (D32).
            let mut work = E::Work::default();
            // Pinned for this try and its hand-off only: the pin is dropped when this poll
            // returns, so the future holds none across an await.
            let _pin = self.inner.engine.pin();
            let out = self
                .check_open()
                .and_then(|()| self.inner.engine.submit(spec, self.stamp(spec), &mut work));
            let pending = matches!(out, Ok(Admission::Backpressured));
            if !pending {
                // Done: this entry leaves the list, so nothing wakes a finished future.
                w.unregister(&mut entry.id);
                self.inner
                    .room_sleepers
                    .store(w.list.len() as u32, Ordering::Relaxed);
            }
            drop(w);
            self.hand_off(&mut work);
            if pending {
                return Poll::Pending;
            }
            Poll::Ready(out.map(|a| match a {
                Admission::Admitted(node) | Admission::DedupeJoined(node) => {
                    // Its hand-off may have ended jobs: wake their waiters (not this one).
                    self.wake_waiters();
                    self.handle(node)
                }
                Admission::Backpressured => unreachable!("returned pending above"),
            }))
        })
        .await
    }

    /// Submits jobs one by one (SPEC D04): an observer may see part of the batch. One result
    /// per job, in input order.
    pub fn submit_batch(
        &self,
        jobs: &[JobSpec<'_>],
    ) -> Vec<Result<Admission<JobHandle<E>>, Error>> {
        jobs.iter().map(|j| self.submit(j)).collect()
    }

    /// Admits every job of `jobs` or none (SPEC D04): capacity for the whole batch is taken
    /// first, and no other operation sees part of the batch — it becomes visible at once, and
    /// only then do its jobs' counts drop, so the first of them becomes ready only after every
    /// one is in the graph. Jobs of the batch may depend on each other in any order. If `cap`
    /// is given, every job of the batch runs its body under it (SPEC D41, see
    /// [`RunningJob::run`]).
    ///
    /// Handles come back in input order; pass them to [`wait_batch`](Self::wait_batch).
    /// Unlike [`submit`](Self::submit) this takes the graph's topology lock (see the module
    /// docs) and allocates.
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit) for any job of the batch, and `already-exists /
    /// duplicate-key` for two jobs of the batch with one key; a cycle may run through several
    /// jobs of the batch. A full store gives [`Admission::Backpressured`]. On any of these no
    /// job of the batch was admitted and nothing was mutated.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
    /// use fairway::graph::{Admission, ConcurrencyCap, Dependency, Gate, Graph, JobKey, JobOutcome, JobSpec};
    /// use fairway::{ClassId, TenantId};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
    /// let graph = Graph::builder(ledger).class(2).build()?;
    /// let job = |key, deps| JobSpec {
    ///     key: JobKey::new(key),
    ///     tenant: TenantId(0),
    ///     class: ClassId(0),
    ///     priority: 0,
    ///     deadline: None,
    ///     deps,
    /// };
    /// let after_1 = [Dependency::on(JobKey::new(1), Gate::OnSuccess)];
    /// let cap = ConcurrencyCap::new(1)?;
    /// let batch = [job(2, &after_1), job(1, &[])];
    /// let Admission::Admitted(handle) = graph.submit_batch_atomic(&batch, Some(&cap))? else {
    ///     unreachable!("room for both")
    /// };
    /// while let Some(running) = graph.try_next(ClassId(0)) {
    ///     running.run(|| { /* the body, one of the batch at a time */ });
    ///     graph.complete(running, JobOutcome::Succeeded)?;
    /// }
    /// // The batch's one handle reads as its jobs' handles, in input order.
    /// assert_eq!(graph.wait_batch(&handle)?, [JobOutcome::Succeeded; 2]);
    /// // Both jobs ended: dropping the handle frees their nodes.
    /// drop(handle);
    /// assert_eq!(graph.occupancy().nodes_used, 0);
    /// # Ok::<(), fairway::Error>(())
    /// ```
    pub fn submit_batch_atomic(
        &self,
        jobs: &[JobSpec<'_>],
        cap: Option<&ConcurrencyCap>,
    ) -> Result<Admission<BatchHandle<E>>, Error> {
        let _pin = self.inner.engine.pin();
        let max = self.inner.engine.max_deps();
        let mut keys = std::collections::HashSet::with_capacity(jobs.len());
        for j in jobs {
            rules::validate(j, max)?;
            self.check_job(j)?;
            if !keys.insert(j.key) {
                return Err(rules::DUPLICATE_KEY);
            }
        }
        self.check_open()?;
        let mut nodes = Vec::with_capacity(jobs.len());
        let mut work = E::Work::default();
        let deadlines: Vec<u64> = jobs.iter().map(|j| self.stamp(j)).collect();
        if let Admission::Backpressured = self
            .inner
            .engine
            .submit_batch(jobs, &deadlines, &mut nodes, &mut work)?
        {
            return Ok(Admission::Backpressured);
        }
        if let Some(cap) = cap {
            // Before the seal: no job of the batch can reach an executor yet.
            self.inner.capped.store(true, Ordering::Release);
            for &n in &nodes {
                // SAFETY: `n` is admitted and not sealed yet (`CapSlots::set`).
                unsafe { self.inner.caps.set(n, cap) };
            }
        }
        self.inner.engine.seal_batch(&nodes, &mut work);
        self.hand_off(&mut work);
        self.wake_waiters();
        Ok(Admission::Admitted(BatchHandle {
            handles: nodes.into_iter().map(|n| self.handle(n)).collect(),
        }))
    }

    /// The batch cap of the job on `node`, which this thread has just started, if it was
    /// submitted in a capped batch.
    fn cap_of(&self, node: NodeRef) -> Option<ConcurrencyCap> {
        // Acquire: pairs with the Release store in `submit_batch_atomic`.
        if !self.inner.capped.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: called from `accept` right after `start` succeeded (`CapSlots::get`).
        unsafe { self.inner.caps.get(node) }
    }

    /// Blocks until every job of `handles` has ended, then returns their outcomes in input
    /// order (SPEC D04): never a partial set. The handles keep their jobs (and demand them
    /// while this waits); a job is freed when its last handle is dropped.
    ///
    /// # Errors
    ///
    /// `permission-denied / foreign-handle` if a handle is another graph's, checked before
    /// waiting.
    pub fn wait_batch(&self, handles: &[JobHandle<E>]) -> Result<Vec<JobOutcome>, Error> {
        self.check_own(handles)?;
        let all_ended = || handles.iter().all(|h| h.outcome().is_some());
        if !all_ended() {
            let (lock, cond) = &self.inner.ended;
            let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
            self.inner.sleepers.fetch_add(1, Ordering::Relaxed);
            // SeqCst fence: pairs with the one in `wake_waiters`.
            fence(Ordering::SeqCst);
            while !all_ended() {
                guard = cond.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            self.inner.sleepers.fetch_sub(1, Ordering::Relaxed);
            drop(guard);
        }
        Ok(handles
            .iter()
            .map(|h| h.outcome().expect("ended"))
            .collect())
    }

    /// The asynchronous form of [`wait_batch`](Self::wait_batch) (SPEC D31): resolves once
    /// every job of `handles` has ended, with their outcomes in input order. Cancel-safe
    /// (dropping the future leaves the handles as they were); the task is woken by the
    /// operations that end jobs, never by polling.
    ///
    /// # Errors
    ///
    /// As [`wait_batch`](Self::wait_batch).
    pub async fn wait_batch_async(
        &self,
        handles: &[JobHandle<E>],
    ) -> Result<Vec<JobOutcome>, Error> {
        self.check_own(handles)?;
        struct Entry<'a, E: GraphEngine> {
            graph: &'a GraphOn<E>,
            id: Option<u64>,
        }
        impl<E: GraphEngine> Drop for Entry<'_, E> {
            fn drop(&mut self) {
                if self.id.is_some() {
                    self.graph.inner.outcome_waiters.leave(&mut self.id);
                }
            }
        }
        let mut entry = Entry {
            graph: self,
            id: None,
        };
        std::future::poll_fn(|cx| {
            let all = |hs: &[JobHandle<E>]| hs.iter().all(|h| h.outcome().is_some());
            if !all(handles) {
                self.inner.outcome_waiters.join(&mut entry.id, cx.waker());
                if !all(handles) {
                    return std::task::Poll::Pending;
                }
            }
            std::task::Poll::Ready(())
        })
        .await;
        drop(entry);
        Ok(handles
            .iter()
            .map(|h| h.outcome().expect("ended"))
            .collect())
    }

    /// Refuses a handle of another graph.
    fn check_own(&self, handles: &[JobHandle<E>]) -> Result<(), Error> {
        if handles
            .iter()
            .any(|h| !Arc::ptr_eq(&h.graph.inner, &self.inner))
        {
            return Err(Error::new(Code::PermissionDenied, Reason::ForeignHandle));
        }
        Ok(())
    }

    /// The job's own absolute deadline: its relative one stamped now on the ledger's clock
    /// (SPEC D30); [`rules::NO_DEADLINE`] for none.
    fn stamp(&self, spec: &JobSpec<'_>) -> u64 {
        spec.deadline.map_or(rules::NO_DEADLINE, |d| {
            let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            self.inner
                .ledger
                .clock()
                .now()
                .saturating_add(nanos)
                .min(rules::NO_DEADLINE - 1)
        })
    }

    /// The job's urgency as a joiner of another job (SPEC D30).
    fn urgency_of(&self, spec: &JobSpec<'_>) -> rules::Urgency {
        rules::Urgency {
            priority: spec.priority,
            deadline: self.stamp(spec),
        }
    }

    /// The effective priority and deadline of the job (SPEC D30): the largest priority and
    /// the earliest deadline (absolute, in nanoseconds on the ledger's clock, as
    /// [`Permit::deadline`](crate::admission::Permit::deadline)) of its own, its joiners' and
    /// those of every job that waits on it, transitively, and has not ended. Frozen once the
    /// job ends.
    ///
    /// # Errors
    ///
    /// `not-found / stale-handle` once the outcome was taken; `permission-denied /
    /// foreign-handle`.
    pub fn effective(&self, job: impl Into<JobId>) -> Result<(Priority, Option<u64>), Error> {
        let _pin = self.inner.engine.pin();
        let u = self
            .inner
            .engine
            .effective(self.node_of(job.into())?)
            .ok_or(rules::STALE)?;
        Ok((
            u.priority,
            (u.deadline != rules::NO_DEADLINE).then_some(u.deadline),
        ))
    }

    /// A new owned handle of the job on `node`, for a claim the engine has just added.
    fn handle(&self, node: NodeRef) -> JobHandle<E> {
        JobHandle {
            graph: self.clone(),
            node,
            waiter: None,
            spent: false,
        }
    }

    fn id_of(&self, node: NodeRef) -> JobId {
        JobId {
            graph: self.inner.id,
            node,
        }
    }

    fn node_of(&self, handle: JobId) -> Result<NodeRef, Error> {
        if handle.graph != self.inner.id {
            return Err(Error::new(Code::PermissionDenied, Reason::ForeignHandle));
        }
        Ok(handle.node)
    }
}
