//! Pull mode (SPEC F23): submit with a payload, and executors take the next job.

use super::*;

impl<T: Send + 'static, M: Mechanism> SchedulerOn<T, M> {
    /// Pull mode (SPEC F23): deposits a request with its payload without waiting. An executor
    /// receives it from [`next`](Self::next) with its assignment.
    ///
    /// # Errors
    ///
    /// As [`enqueue`](Self::enqueue); the payload and permit are given back where possible.
    ///
    /// # Cancel safety
    ///
    /// Not async. A submitted request is cancelled by its handle ([`cancel`](Self::cancel));
    /// its host token is not observed while it waits. The payload of a request still queued or
    /// granted but not taken at [`shutdown`](Self::shutdown) is kept for
    /// [`take_undelivered`](Self::take_undelivered).
    ///
    /// # Panics
    ///
    /// Never.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
    /// use fairway::{AdmittedRequest, CancellationToken, ClassId, RequestId, Scheduler, TenantId};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4))?;
    /// let scheduler = Scheduler::builder(ledger.clone()).payload::<String>().class(1, 16).build()?;
    /// let id = RequestId(1);
    /// let permit = ledger.admit(AdmissionRequest::new(id, TenantId(0)))?;
    /// let request = AdmittedRequest::new(permit, CancellationToken::new(id));
    /// let handle = scheduler.submit(request, "resize image 17".to_owned()).map_err(|e| e.error)?;
    /// assert_eq!(handle.class(), ClassId(0));
    /// let job = scheduler.try_next(ClassId(0))?.expect("granted at once: a cell is free");
    /// assert_eq!(job.payload, "resize image 17");
    /// job.assignment.release();
    /// # Ok::<(), fairway::Error>(())
    /// ```
    pub fn submit(
        &self,
        request: AdmittedRequest,
        payload: T,
    ) -> Result<RequestHandle, SubmitError<T>> {
        self.submit_keeping(request, payload)
            .map_err(|(error, back)| SubmitError {
                error,
                returned: back.map(|(r, payload)| (r.permit, payload)),
            })
    }

    /// [`submit`](Self::submit), giving back the whole request (its token too) where it can.
    pub(super) fn submit_keeping(
        &self,
        request: AdmittedRequest,
        payload: T,
    ) -> Result<RequestHandle, (Error, Option<(AdmittedRequest, T)>)> {
        let s = &*self.shared;
        let req = request;
        let (engine, live) = match s.check(&req) {
            Ok(e) => e,
            Err(error) => return Err((error, Some((req, payload)))),
        };
        let class = req.permit.class();
        let ticket = Ticket {
            live: Some(live),
            ..Ticket::from_permit(&req.permit)
        };
        let AdmittedRequest { permit, token } = req;
        let out = engine.enqueue(ticket, Some((permit, payload)), token.as_ref());
        if !matches!(out, Ok(Enqueued::Queued(_))) {
            s.forget_id(live);
        }
        match out {
            Ok(Enqueued::Queued(key)) => Ok(s.handle(class, key)),
            Ok(Enqueued::Granted(lease)) => {
                // Pull-mode requests always queue; give the cell straight back if an engine
                // ever grants one directly.
                engine.release(lease);
                Err((
                    Error::new(Code::Internal, Reason::PullGrantedDirectly),
                    None,
                ))
            }
            Err((error, returned)) => Err((
                error,
                returned.map(|(permit, payload)| (AdmittedRequest { permit, token }, payload)),
            )),
        }
    }

    /// Pull mode: the next request of `class` by the fairness rules, if one can be granted now
    /// (`Ok(None)` otherwise).
    ///
    /// # Errors
    ///
    /// `invalid-argument / class` for a class the scheduler does not have.
    pub fn try_next(&self, class: ClassId) -> Result<Option<Job<T>>, Error> {
        let engine = self.shared.class(class)?;
        loop {
            let Some(p) = engine.try_next() else {
                return Ok(None);
            };
            if let Some(job) = self.accept_pulled(p) {
                return Ok(Some(job));
            }
        }
    }

    /// Pull mode: waits for the next request of `class` by the fairness rules.
    ///
    /// The future resolves to `Ok(None)` once the scheduler is shut down or drained and nothing
    /// is left to deliver in the class. A class whose every cell is quarantined does not end
    /// the wait: a restore reopens it (SPEC F22). An idle executor parks until one of these
    /// happens, however many executors wait.
    ///
    /// # Errors
    ///
    /// `invalid-argument / class` for a class the scheduler does not have.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a job leaves the class only in the poll that returns it, so dropping the
    /// future (in a `select!`, say) loses nothing.
    ///
    /// # Panics
    ///
    /// Never. (The future, like any, must not be polled again after it resolved.)
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
    /// use fairway::{AdmittedRequest, CancellationToken, ClassId, RequestId, Scheduler, TenantId};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4))?;
    /// let scheduler = Scheduler::builder(ledger.clone())
    ///     .payload::<&str>()
    ///     .class(1, 16)
    ///     .build()?;
    /// let id = RequestId(7);
    /// let permit = ledger.admit(AdmissionRequest::new(id, TenantId(0)))?;
    /// scheduler
    ///     .submit(AdmittedRequest::new(permit, CancellationToken::new(id)), "job")
    ///     .map_err(|e| e.error)?;
    /// // An executor thread (`.next(class).await` in async code).
    /// let job = scheduler.next_blocking(ClassId(0))?.expect("one job is queued");
    /// assert_eq!(job.payload, "job");
    /// job.assignment.release();
    /// # Ok::<(), fairway::Error>(())
    /// ```
    #[inline]
    pub fn next(&self, class: ClassId) -> NextOn<'_, T, M> {
        NextOn::new(Holder::Borrowed(self), class)
    }

    /// [`next`](Self::next) with a `'static` future that owns a handle to the scheduler (for
    /// spawning executor tasks). When it resolves to a job, that handle moves into the job's
    /// assignment (no second `Arc` count is taken).
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next).
    ///
    /// # Panics
    ///
    /// The future panics if polled again after it resolved to a job.
    #[inline]
    pub fn next_owned(&self, class: ClassId) -> NextOn<'static, T, M> {
        NextOn::new(Holder::Owned(self.clone()), class)
    }

    /// Pull mode: blocks the calling thread for the next request of `class`; as
    /// [`next`](Self::next).
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next).
    ///
    /// # Panics
    ///
    /// As [`enqueue_blocking`](Self::enqueue_blocking): with the `tokio` feature, inside a
    /// current-thread tokio runtime.
    #[inline]
    pub fn next_blocking(&self, class: ClassId) -> Result<Option<Job<T>>, Error> {
        assert_not_in_current_thread_runtime("Scheduler::next_blocking");
        block_on(self.next(class))
    }

    /// Acceptance check of a pulled request (SPEC F46): expired ones are refunded.
    pub(super) fn accept_pulled(&self, p: crate::engine::Pulled<T>) -> Option<Job<T>> {
        let p = self.check_pulled(p)?;
        Some(job(Arc::clone(&self.shared) as _, p))
    }

    /// [`accept_pulled`](Self::accept_pulled)'s check: the request back if it is accepted,
    /// `None` if it was refused (its cell and quota given back).
    pub(super) fn check_pulled(
        &self,
        p: crate::engine::Pulled<T>,
    ) -> Option<crate::engine::Pulled<T>> {
        let s = &*self.shared;
        let engine = s.class(p.permit.class()).ok()?;
        let expired = p.permit.deadline().is_some_and(|d| s.clock.now() >= d);
        if expired || p.cancelled.is_some() || s.is_shut() {
            // The untouched lease goes back first, then the quota (SPEC F42).
            engine.count_refused_after_grant();
            if !expired && p.cancelled.is_none() {
                // Shut down before an executor took it: the payload goes back to the host
                // (`take_undelivered`); kept before the cell is released, so a drainer that sees
                // the cell back also sees the payload.
                engine.keep_undelivered(p.payload);
            }
            let permit = p.permit;
            engine.release_then(p.lease, || drop(permit));
            if let Some(live) = p.live {
                s.forget_id(live);
            }
            return None;
        }
        Some(p)
    }
}

/// The job of an accepted pulled request; `home` keeps the scheduler alive for its assignment.
#[inline]
pub(super) fn job<T>(home: Arc<dyn CellReturn>, p: crate::engine::Pulled<T>) -> Job<T> {
    Job {
        payload: p.payload,
        assignment: Assignment::new(home, p.lease, p.permit, p.waited, p.live),
    }
}
