//! The graph's executor side: handing ready jobs to the ledger and the scheduler, shutdown
//! and the reaping of what it leaves behind, pulling ready jobs for executors, ending running
//! jobs (completion and dynamic discovery of dependencies) and reading outcomes, occupancy and
//! the underlying scheduler and ledger. These are methods of [`Graph`]; the submission side
//! and the builder stay in the parent module.

use super::*;

impl<E: GraphEngine> EndAbandoned for Inner<E> {
    fn end_abandoned(self: Arc<Self>, node: NodeRef) {
        // A job superseded or removed meanwhile refuses the outcome as stale (SPEC D21): nothing
        // is left to end then.
        let _ = GraphOn { inner: self }.end_running(node, JobOutcome::Failed(rules::ABANDONED));
    }

    fn signalled(&self, node: NodeRef) -> bool {
        let _pin = self.engine.pin();
        self.engine.signalled(node)
    }

    fn watch(&self, entry: &mut Option<u64>, waker: &std::task::Waker) {
        self.outcome_waiters.join(entry, waker);
    }

    fn unwatch(&self, entry: &mut Option<u64>) {
        self.outcome_waiters.leave(entry);
    }
}

impl<E: GraphEngine> GraphOn<E> {
    /// Takes ledger permits for the jobs that became ready and submits them to the scheduler
    /// (SPEC D06, D12). A refusal fails the job and its dependents per their gates.
    ///
    /// It also re-orders in the scheduler the queued jobs whose effective urgency changed
    /// (SPEC D30, F36), and ends `deadline-exceeded` the jobs whose requests the scheduler
    /// let expire (F46).
    pub(super) fn hand_off(&self, work: &mut E::Work) {
        // Under the pin of the public call that made `work` (SPEC D51).
        let inner = &*self.inner;
        loop {
            while let Some(Ready {
                node,
                key,
                tenant,
                class,
                priority,
                deadline,
            }) = inner.engine.pop_ready(work)
            {
                self.hand_off_one(node, key, tenant, class, priority, deadline, work);
            }
            while let Some(node) = inner.engine.pop_resync(work) {
                self.resync(node, None);
            }
            // Queued jobs a cancellation ended (SPEC D31): their requests leave the scheduler,
            // which gives their permits back.
            while let Some(node) = inner.engine.pop_withdrawn(work) {
                if let Some(h) = inner.reqs.get(node) {
                    let _ = inner.scheduler.cancel(h);
                }
            }
            if !inner.bin.maybe_any() {
                break;
            }
            let expired = inner.bin.take();
            if expired.is_empty() {
                break;
            }
            for node in expired {
                inner
                    .engine
                    .fail_ready(node, rules::DEADLINE_EXCEEDED, true, work);
            }
        }
        if self.is_shutdown() {
            self.reap(work);
        }
    }

    /// Hands one ready job to the ledger and the scheduler (see [`hand_off`](Self::hand_off)).
    /// Its permit carries its effective priority and the time its own deadline has left; a
    /// job whose effective deadline has passed ends `deadline-exceeded` without a permit.
    #[allow(clippy::too_many_arguments)]
    fn hand_off_one(
        &self,
        node: NodeRef,
        key: JobKey,
        tenant: TenantId,
        class: ClassId,
        priority: Priority,
        deadline: u64,
        work: &mut E::Work,
    ) {
        let inner = &*self.inner;
        if self.is_shutdown() {
            // Shut down: the job never takes a permit; it ends here.
            inner.engine.fail_ready(node, rules::SHUTDOWN, false, work);
            return;
        }
        let effective = inner
            .engine
            .effective(node)
            .map_or(deadline, |u| u.deadline);
        // The clock only for a job with a deadline (its own or inherited): the common hand-off
        // reads no time.
        let now = if effective == rules::NO_DEADLINE && deadline == rules::NO_DEADLINE {
            0
        } else {
            inner.ledger.clock().now()
        };
        if effective != rules::NO_DEADLINE && now >= effective {
            inner
                .engine
                .fail_ready(node, rules::DEADLINE_EXCEEDED, false, work);
            return;
        }
        let mut request = AdmissionRequest::new(RequestId(node.packed()), tenant)
            .class(class)
            .priority(priority);
        if deadline != rules::NO_DEADLINE {
            request = request.deadline(std::time::Duration::from_nanos(deadline - now));
        }
        let permit = match inner.ledger.admit(request) {
            Ok(p) => p,
            Err(e) => {
                inner.engine.fail_ready(node, e, false, work);
                return;
            }
        };
        // Admitted: the admission-gated dependents may go, and an executor may start it as
        // soon as the scheduler has it.
        inner.engine.admitted(node, work);
        let task = Task {
            node,
            key,
            bin: Some(inner.bin.clone()),
        };
        match inner
            .scheduler
            .submit(AdmittedRequest::without_token(permit), task)
        {
            Ok(h) => {
                inner.reqs.set(node, h);
                // What the request carries now; a change since is applied here. SeqCst fence:
                // as in `resync` (the record above, then the value below).
                fence(Ordering::SeqCst);
                self.apply(node, h, Some(rules::Urgency { priority, deadline }));
            }
            Err(e) => {
                if let Some((_, task)) = e.returned {
                    task.take();
                }
                inner.engine.fail_ready(node, e.error, true, work);
            }
        }
    }

    /// Brings the scheduler's copy of the queued job on `node` to its effective urgency
    /// (SPEC D30, F36). `applied`: what the request carries, if known. Repeats until the value
    /// it applied is still the job's, so racing re-orderings of one job converge on its last
    /// value. A job not queued yet is left to its hand-off, one granted or ended already
    /// (`too-late`) to nobody.
    fn resync(&self, node: NodeRef, applied: Option<rules::Urgency>) {
        // SeqCst fence: pairs with the hand-off's (its request's record, then this fence, then
        // the value): either this sees the request or the hand-off sees the new value.
        fence(Ordering::SeqCst);
        let Some(h) = self.inner.reqs.get(node) else {
            return;
        };
        self.apply(node, h, applied);
    }

    /// [`resync`](Self::resync) once the job's request `h` is known.
    fn apply(
        &self,
        node: NodeRef,
        h: crate::scheduler::RequestHandle,
        mut applied: Option<rules::Urgency>,
    ) {
        let s = &self.inner.scheduler;
        loop {
            let Some(v) = self.inner.engine.effective(node) else {
                return;
            };
            if applied == Some(v) {
                return;
            }
            if applied.is_none_or(|a| a.priority != v.priority)
                && s.set_priority(h, v.priority).is_err()
            {
                return;
            }
            if applied.is_none_or(|a| a.deadline != v.deadline) {
                let d = (v.deadline != rules::NO_DEADLINE).then_some(v.deadline);
                if s.set_deadline(h, d).is_err() {
                    return;
                }
            }
            applied = Some(v);
        }
    }

    /// Whether [`shutdown`](Self::shutdown) was called. One atomic load.
    #[inline]
    pub fn is_shutdown(&self) -> bool {
        // Acquire: pairs with the Release store in `shutdown`.
        self.inner.shut.load(Ordering::Acquire)
    }

    pub(super) fn check_open(&self) -> Result<(), Error> {
        if self.is_shutdown() {
            Err(rules::SHUTDOWN)
        } else {
            Ok(())
        }
    }

    /// After shutdown: ends the jobs whose payloads the scheduler gave back (queued, or
    /// granted and never taken) with `unavailable / shutdown`, and whatever that releases.
    fn reap(&self, work: &mut E::Work) {
        // Under the caller's pin, as `hand_off`.
        loop {
            let back = self.inner.scheduler.take_undelivered();
            if back.is_empty() {
                return;
            }
            for task in back {
                // They took their permit (the scheduler refunded it): admitted.
                self.inner
                    .engine
                    .fail_ready(task.take(), rules::SHUTDOWN, true, work);
            }
            // Their dependents: refused at once, as the graph is shut.
            while let Some(r) = self.inner.engine.pop_ready(work) {
                self.inner
                    .engine
                    .fail_ready(r.node, rules::SHUTDOWN, false, work);
            }
        }
    }

    /// Shuts the graph down: no job is admitted any more (`unavailable / shutdown`), the
    /// scheduler is shut down, and every job that has not ended gets exactly one outcome —
    /// queued jobs and jobs that become ready from now on end `unavailable / shutdown`, jobs
    /// waiting for a key without producer (or for jobs that end so) end `dependency-failed`.
    /// Running jobs run on: their [`complete`](Self::complete) still records their outcome
    /// and ends their dependents the same way. Every permit goes back to the ledger and every
    /// node and edge slot is freed as outcomes are collected. Idempotent.
    ///
    /// Executors' [`next`](Self::next) and [`next_blocking`](Self::next_blocking) return
    /// `None` from now on. The scheduler's own methods (from [`scheduler`](Self::scheduler))
    /// should not be used to pull graph jobs after this: what they took out would have no
    /// outcome.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
    /// use fairway::graph::{Admission, Dependency, Gate, Graph, JobKey, JobSpec};
    /// use fairway::{ClassId, Reason, TenantId};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
    /// let graph = Graph::builder(ledger.clone()).class(1).build()?;
    /// let job = |key, deps| JobSpec {
    ///     key: JobKey::new(key),
    ///     tenant: TenantId(0),
    ///     class: ClassId(0),
    ///     priority: 0,
    ///     deadline: None,
    ///     deps,
    /// };
    /// let Admission::Admitted(queued) = graph.submit(&job(1, &[]))? else { unreachable!() };
    /// let on_9 = [Dependency::on(JobKey::new(9), Gate::Sequential)];
    /// let Admission::Admitted(waiting) = graph.submit(&job(2, &on_9))? else { unreachable!() };
    /// graph.shutdown();
    /// let handles = [queued, waiting];
    /// let ended = graph.wait_batch(&handles)?;
    /// assert!(ended.iter().all(|o| !o.is_success()));
    /// assert!(ledger.usage().is_zero());
    /// // Every job ended: dropping the handles frees the nodes.
    /// drop(handles);
    /// assert_eq!(graph.occupancy().nodes_used, 0);
    /// assert_eq!(graph.submit(&job(3, &[])).unwrap_err().reason(), Reason::Shutdown);
    /// # Ok::<(), fairway::Error>(())
    /// ```
    pub fn shutdown(&self) {
        let _pin = self.inner.engine.pin();
        // Release: pairs with the Acquire load in `is_shutdown`.
        self.inner.shut.store(true, Ordering::Release);
        // Before anything ends: a slot freed by what the shutdown ends is taken only by a submit
        // that sees the engine closed, and gives it back (SPEC D02).
        self.inner.engine.close();
        self.inner.scheduler.shutdown();
        let mut work = E::Work::default();
        self.inner.engine.shutdown(&mut work);
        self.hand_off(&mut work);
        self.wake_waiters();
    }

    fn accept(&self, job: crate::scheduler::Job<Task>) -> Option<RunningJob> {
        let _pin = self.inner.engine.pin();
        let crate::scheduler::Job {
            payload,
            assignment,
        } = job;
        let key = payload.key;
        let node = payload.take();
        if self.inner.engine.start(node) {
            let graph: Arc<dyn EndAbandoned> = self.inner.clone();
            Some(RunningJob {
                id: self.id_of(node),
                key,
                assignment: Some(assignment),
                cap: self.cap_of(node),
                graph: Some(graph),
            })
        } else {
            assignment.release();
            None
        }
    }

    /// The next ready job of `class`, if one can be granted now.
    pub fn try_next(&self, class: ClassId) -> Option<RunningJob> {
        loop {
            let Some(job) = self.inner.scheduler.try_next(class).ok().flatten() else {
                return self.none_left();
            };
            if let Some(r) = self.accept(job) {
                return Some(r);
            }
        }
    }

    /// An executor found nothing: end the jobs whose requests expired (SPEC F46) and, after a
    /// shutdown, what the scheduler gave back.
    fn none_left(&self) -> Option<RunningJob> {
        let expired = if self.inner.bin.maybe_any() {
            self.inner.bin.take()
        } else {
            arrayvec::ArrayVec::new()
        };
        if !expired.is_empty() {
            let _pin = self.inner.engine.pin();
            let mut work = E::Work::default();
            for node in expired {
                self.inner
                    .engine
                    .fail_ready(node, rules::DEADLINE_EXCEEDED, true, &mut work);
            }
            self.hand_off(&mut work);
            self.wake_waiters();
        }
        if self.is_shutdown() {
            let _pin = self.inner.engine.pin();
            let mut work = E::Work::default();
            self.reap(&mut work);
            self.wake_waiters();
        }
        None
    }

    /// Waits (asynchronously) for the next ready job of `class`; `None` once the scheduler is
    /// shut down.
    pub async fn next(&self, class: ClassId) -> Option<RunningJob> {
        loop {
            let Some(job) = self.inner.scheduler.next(class).await.ok().flatten() else {
                return self.none_left();
            };
            if let Some(r) = self.accept(job) {
                return Some(r);
            }
        }
    }

    /// Blocks for the next ready job of `class`; `None` once the scheduler is shut down.
    pub fn next_blocking(&self, class: ClassId) -> Option<RunningJob> {
        loop {
            let Some(job) = self.inner.scheduler.next_blocking(class).ok().flatten() else {
                return self.none_left();
            };
            if let Some(r) = self.accept(job) {
                return Some(r);
            }
        }
    }

    /// Ends a running job: gives its cell back, records the outcome and releases its
    /// dependents in O(dependents) (SPEC D13).
    ///
    /// # Errors
    ///
    /// `permission-denied / foreign-handle` for a job of another graph.
    pub fn complete(&self, mut job: RunningJob, outcome: JobOutcome) -> Result<(), Error> {
        let node = self.node_of(job.id)?;
        // Taken out: the job's drop then abandons nothing.
        job.graph = None;
        if let Some(a) = job.assignment.take() {
            a.release();
        }
        self.end_running(node, outcome)
    }

    /// Ends a running job with `outcome` (its cell already given back): records it and releases
    /// its dependents.
    pub(super) fn end_running(&self, node: NodeRef, outcome: JobOutcome) -> Result<(), Error> {
        let _pin = self.inner.engine.pin();
        let mut work = E::Work::default();
        let r = self.inner.engine.complete(node, outcome, &mut work);
        self.hand_off(&mut work);
        self.wake_waiters();
        r
    }

    /// Adds dependencies discovered while `job` runs (SPEC D14). They gate the job's end: after
    /// [`complete`](Self::complete) the job ends — and releases its dependents — only once
    /// every discovered gate holds, with its body's outcome, or `dependency-failed` if one of
    /// them fails. Discovery unions with earlier edges: a key the job already depends on keeps
    /// its first edge and gate.
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit) for the new dependencies (`cycle` if one closes a cycle
    /// through this job, `too-many-dependencies` beyond `max_deps` in all, `key-range`);
    /// `not-found / stale-handle` if the job is no longer running. `Backpressured` when the
    /// edge or key store is full; on any refusal nothing changed.
    pub fn discover(&self, job: &RunningJob, deps: &[Dependency]) -> Result<Admission<()>, Error> {
        let _pin = self.inner.engine.pin();
        let node = self.node_of(job.id)?;
        self.check_open()?;
        for d in deps {
            if d.key.key.0 > WorkKey::MAX {
                return Err(Error::new(Code::InvalidArgument, Reason::KeyRange));
            }
            if d.key == job.key {
                return Err(rules::CYCLE);
            }
        }
        self.check_pins(deps)?;
        let mut work = E::Work::default();
        let r = self.inner.engine.discover(node, deps, &mut work);
        self.hand_off(&mut work);
        self.wake_waiters();
        r
    }

    /// The job's outcome if it has ended. `job` is a [`JobId`] or a `&`[`JobHandle`].
    ///
    /// # Errors
    ///
    /// `not-found / stale-handle` once the job was freed (it ended and its last handle went);
    /// `permission-denied / foreign-handle` for another graph's job.
    pub fn outcome(&self, job: impl Into<JobId>) -> Result<Option<JobOutcome>, Error> {
        let _pin = self.inner.engine.pin();
        self.inner.engine.outcome(self.node_of(job.into())?, false)
    }

    /// Gives back one handle's claim (SPEC D31): what a handle's drop, `detach` and `cancel`
    /// do. `true` when that cancelled the job.
    pub(super) fn release_claim(&self, node: NodeRef, detach: bool) -> bool {
        let _pin = self.inner.engine.pin();
        let mut work = E::Work::default();
        let r = self.inner.engine.release(node, detach, &mut work);
        self.hand_off(&mut work);
        self.wake_waiters();
        matches!(r, Ok(true))
    }

    /// Used and total capacity of every store (SPEC D50).
    pub fn occupancy(&self) -> Occupancy {
        self.inner.engine.occupancy()
    }

    /// The scheduler the graph's ready jobs run on.
    pub fn scheduler(&self) -> &Scheduler<Task> {
        &self.inner.scheduler
    }

    /// The ledger that admits the graph's jobs.
    pub fn ledger(&self) -> &Ledger {
        &self.inner.ledger
    }
}
