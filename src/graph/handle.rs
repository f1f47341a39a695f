//! Owned handles of graph jobs (SPEC D31): one demand on the job and one claim on its outcome.
//!
//! A [`JobHandle`] is what a submission returns. While it lives, the job is wanted: dropping
//! it withdraws that demand, and a job that nobody wants any more (no handle, no dependent
//! still waiting on it, not detached) is cancelled `cancelled / withdrawn`, its producers in
//! turn when it was their last demander. [`JobHandle::detach`] lets the job run with no
//! handle; [`JobHandle::cancel`] withdraws the demand explicitly. The handle is also a
//! future of the job's outcome: awaiting it holds the demand, and dropping the future (a
//! timeout, a `select!` that took another branch) withdraws it, like any drop.
//!
//! A [`JobId`] names a job without holding it: what executors, hooks and observers pass
//! around. It reads the outcome while some handle keeps the job.
//!
//! Waiting: a future registers its waker in the graph's list of outcome waiters; every
//! operation that may end or signal a job wakes the whole list (after its own state is
//! consistent, with no lock of the graph held, SPEC D32), and each woken future looks again.

use super::*;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

/// The identity of a job in a graph: its node slot and the slot's generation, so an id whose
/// job was freed is refused (`not-found / stale-handle`). Copyable; holds no claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobId {
    pub(super) graph: u64,
    pub(super) node: NodeRef,
}

impl<E: GraphEngine> From<&JobHandle<E>> for JobId {
    fn from(h: &JobHandle<E>) -> Self {
        h.id()
    }
}

/// An owned handle of a graph job (SPEC D31): one demand on the job and one claim on its
/// outcome. Not `Copy` and not `Clone`: every handle is one demander.
///
/// - Dropping it withdraws its demand. The job is cancelled (`cancelled / withdrawn`) once its
///   last demander goes: every handle dropped, no dependent waiting on it, never detached. A
///   running job is not stopped but told ([`RunningJob::is_cancelled`]).
/// - [`detach`](Self::detach) keeps the job running with no handle (fire and forget).
/// - [`cancel`](Self::cancel) withdraws the demand explicitly and says whether that
///   cancelled the job.
/// - Awaiting it gives the job's outcome (`Send`, `Unpin`, cancel-safe: dropping the future
///   is dropping the handle).
///
/// Handles of one job (the submitter's and each [`DedupeJoined`](Admission::DedupeJoined)
/// one) compare equal. A job that ended is freed when its last handle goes.
///
/// # Examples
///
/// ```
/// use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
/// use fairway::graph::{Admission, Graph, JobKey, JobOutcome, JobSpec};
/// use fairway::{ClassId, TenantId};
///
/// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
/// let graph = Graph::builder(ledger).class(1).build()?;
/// let job = |key| JobSpec {
///     key: JobKey::new(key),
///     tenant: TenantId(0),
///     class: ClassId(0),
///     priority: 0,
///     deadline: None,
///     deps: &[],
/// };
/// let Admission::Admitted(wanted) = graph.submit(&job(1))? else { unreachable!() };
/// let Admission::Admitted(stale) = graph.submit(&job(2))? else { unreachable!() };
/// assert!(stale.cancel()); // nobody else wanted it
/// let running = graph.try_next(ClassId(0)).expect("the wanted job");
/// assert_eq!(running.key(), JobKey::new(1));
/// graph.complete(running, JobOutcome::Succeeded)?;
/// assert_eq!(wanted.outcome(), Some(JobOutcome::Succeeded));
/// # Ok::<(), fairway::Error>(())
/// ```
#[must_use = "dropping a JobHandle withdraws its demand: the job is cancelled if nothing else wants it (`detach` lets it run)"]
pub struct JobHandle<E: GraphEngine = LockFreeGraph> {
    pub(super) graph: GraphOn<E>,
    pub(super) node: NodeRef,
    /// This handle's entry in the graph's outcome waiters while it is awaited.
    pub(super) waiter: Option<u64>,
    /// Set once the claim was given back (`detach`, `cancel`): the drop does nothing then.
    pub(super) spent: bool,
}

impl<E: GraphEngine> core::fmt::Debug for JobHandle<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("JobHandle")
            .field("graph", &self.graph.inner.id)
            .field("node", &self.node)
            .finish()
    }
}

impl<E: GraphEngine> PartialEq for JobHandle<E> {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id()
    }
}

impl<E: GraphEngine> Eq for JobHandle<E> {}

impl<E: GraphEngine> JobHandle<E> {
    /// The job's identity.
    #[inline]
    pub fn id(&self) -> JobId {
        JobId {
            graph: self.graph.inner.id,
            node: self.node,
        }
    }

    /// The job's outcome if it has ended (the handle keeps the job: never stale).
    pub fn outcome(&self) -> Option<JobOutcome> {
        let _pin = self.graph.inner.engine.pin();
        self.graph
            .inner
            .engine
            .outcome(self.node, false)
            .ok()
            .flatten()
    }

    /// The job's effective priority and deadline (SPEC D30), as
    /// [`Graph::effective`](GraphOn::effective).
    pub fn effective(&self) -> (Priority, Option<u64>) {
        self.graph.effective(self.id()).unwrap_or((0, None))
    }

    /// Lets the job run with no handle (fire and forget): it is never cancelled for want of
    /// demand, and its node is freed when it ends.
    pub fn detach(mut self) {
        self.spent = true;
        self.unregister();
        let _ = self.graph.release_claim(self.node, true);
    }

    /// Withdraws this handle's demand now. `true` when that cancelled the job: it had not
    /// ended and nothing else wanted it (its producers that nothing else wants are cancelled
    /// with it). Dropping the handle does the same.
    pub fn cancel(mut self) -> bool {
        self.spent = true;
        self.unregister();
        self.graph.release_claim(self.node, false)
    }

    /// Blocks until the job has ended and returns its outcome.
    pub fn wait(&self) -> JobOutcome {
        match self.graph.wait_batch(core::slice::from_ref(self)) {
            Ok(mut v) => v.pop().expect("one handle, one outcome"),
            Err(e) => JobOutcome::Failed(e),
        }
    }

    fn unregister(&mut self) {
        if self.waiter.is_some() {
            self.graph.inner.outcome_waiters.leave(&mut self.waiter);
        }
    }
}

impl<E: GraphEngine> Drop for JobHandle<E> {
    fn drop(&mut self) {
        if !self.spent {
            self.unregister();
            let _ = self.graph.release_claim(self.node, false);
        }
    }
}

impl<E: GraphEngine> Future for JobHandle<E> {
    type Output = JobOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<JobOutcome> {
        let this = self.get_mut();
        if let Some(o) = this.outcome() {
            this.unregister();
            return Poll::Ready(o);
        }
        this.graph
            .inner
            .outcome_waiters
            .join(&mut this.waiter, cx.waker());
        // After the registration (whose SeqCst fence pairs with the waker's): either the
        // waker sees this entry, or this sees the end.
        match this.outcome() {
            Some(o) => {
                this.unregister();
                Poll::Ready(o)
            }
            None => Poll::Pending,
        }
    }
}

/// The one handle of an atomic batch (SPEC D31, D04): one demand on every job of the batch.
/// Dropping it withdraws them all; [`detach`](Self::detach) lets them all run. It reads as
/// the slice of the batch's job handles, in input order (pass it to
/// [`Graph::wait_batch`](GraphOn::wait_batch)).
#[must_use = "dropping a BatchHandle withdraws the batch's demand: its jobs are cancelled if nothing else wants them"]
pub struct BatchHandle<E: GraphEngine = LockFreeGraph> {
    pub(super) handles: Vec<JobHandle<E>>,
}

impl<E: GraphEngine> core::fmt::Debug for BatchHandle<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.handles.iter()).finish()
    }
}

impl<E: GraphEngine> core::ops::Deref for BatchHandle<E> {
    type Target = [JobHandle<E>];

    fn deref(&self) -> &[JobHandle<E>] {
        &self.handles
    }
}

impl<E: GraphEngine> BatchHandle<E> {
    /// The batch's job ids, in input order.
    pub fn ids(&self) -> Vec<JobId> {
        self.handles.iter().map(JobHandle::id).collect()
    }

    /// Lets every job of the batch run with no handle.
    pub fn detach(self) {
        self.handles.into_iter().for_each(JobHandle::detach);
    }

    /// Withdraws the batch's demand now; the number of jobs that this cancelled.
    pub fn cancel(self) -> usize {
        self.handles
            .into_iter()
            .map(JobHandle::cancel)
            .filter(|&c| c)
            .count()
    }

    /// The batch's job handles, to hold separately (each keeps its own demand).
    pub fn into_handles(self) -> Vec<JobHandle<E>> {
        self.handles
    }

    /// Waits (asynchronously) until every job of the batch has ended: their outcomes in input
    /// order (SPEC D04). Cancel-safe.
    pub async fn outcomes(&self) -> Vec<JobOutcome> {
        match self.handles.first() {
            Some(h) => h
                .graph
                .wait_batch_async(&self.handles)
                .await
                .unwrap_or_default(),
            None => Vec::new(),
        }
    }
}

/// The graph's outcome waiters: one entry per waiting future (several futures of one task
/// share a waker, so entries are told apart by id). Every operation that may end or signal a
/// job wakes them all, outside the list's lock; each woken future looks again.
#[derive(Default)]
pub(super) struct OutcomeWaiters {
    list: Mutex<RoomWaiters>,
    /// Entries in `list` (written under its lock): the wake path reads it after its fence.
    count: AtomicU32,
}

impl OutcomeWaiters {
    /// Registers (or refreshes) the entry `id` with `waker`, then fences.
    pub(super) fn join(&self, id: &mut Option<u64>, waker: &std::task::Waker) {
        {
            let mut w = self.list.lock().unwrap_or_else(|e| e.into_inner());
            w.register(id, waker);
            // Relaxed: ordered by the fence below; written only under the lock.
            self.count.store(w.list.len() as u32, Ordering::Relaxed);
        }
        // SeqCst fence: pairs with the one in `wake`: either that sees this entry, or the
        // caller's look after this sees what the waker's operation did.
        fence(Ordering::SeqCst);
    }

    /// Takes the entry `id` out, if a wake has not taken it already.
    pub(super) fn leave(&self, id: &mut Option<u64>) {
        let mut w = self.list.lock().unwrap_or_else(|e| e.into_inner());
        w.unregister(id);
        self.count.store(w.list.len() as u32, Ordering::Relaxed);
    }

    /// Wakes every entry (the caller fenced after its operation). One load when nobody waits.
    pub(super) fn wake(&self) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let taken = {
            let mut w = self.list.lock().unwrap_or_else(|e| e.into_inner());
            self.count.store(0, Ordering::Relaxed);
            std::mem::take(&mut w.list)
        };
        // Outside the lock (SPEC D32).
        for (_, w) in taken {
            w.wake();
        }
    }
}
