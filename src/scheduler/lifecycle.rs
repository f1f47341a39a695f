//! Stopping (shutdown, close, drain) and observing a scheduler.

use super::*;

impl<T: Send + 'static, M: Mechanism> SchedulerOn<T, M> {
    /// Stops new admissions, fails every queued request (`unavailable / shutdown`) and makes
    /// grants not yet accepted fail at acceptance. Accepted assignments keep their cell and quota
    /// until released (SPEC F47).
    ///
    /// Pull-mode payloads that were queued, or granted but not yet taken by an executor, are not
    /// dropped: their permits are refunded and the payloads kept for
    /// [`take_undelivered`](Self::take_undelivered). For a graceful stop that runs what is
    /// queued instead of failing it, use [`drain`](Self::drain).
    ///
    /// The [`Ledger`] is not closed by this: it may serve other schedulers, and
    /// [`Ledger::admit`] keeps handing out permits, which this scheduler then refuses at
    /// [`enqueue`](Self::enqueue) / [`submit`](Self::submit) (`unavailable / shutdown`), refunding
    /// them. A host that wants admission itself to stop checks
    /// [`is_shutdown`](Self::is_shutdown) before admitting.
    #[inline]
    pub fn shutdown(&self) {
        // Release: pairs with the Acquire load in `is_shut`.
        self.shared.shut.store(true, Ordering::Release);
        for c in self.shared.classes.iter() {
            c.shutdown();
        }
    }

    /// Whether the scheduler has stopped admitting: [`shutdown`](Self::shutdown) or
    /// [`drain`](Self::drain) (or [`close`](Self::close)) has been called. One atomic load;
    /// never allocates.
    #[inline]
    pub fn is_shutdown(&self) -> bool {
        // Acquire: pairs with the Release stores in `shutdown` and `close`.
        self.shared.is_shut() || self.shared.closed.load(Ordering::Acquire)
    }

    /// Stops admitting new requests in every class (`unavailable / shutdown`, the request
    /// refunded), and keeps granting what is already queued; accepted assignments run on.
    /// [`drain`](Self::drain) does this and then waits until everything has finished.
    ///
    /// The [`Ledger`] stays open, as after [`shutdown`](Self::shutdown).
    pub fn close(&self) {
        // Release: pairs with the Acquire load in `is_shutdown`.
        self.shared.closed.store(true, Ordering::Release);
        for c in self.shared.classes.iter() {
            c.close();
        }
    }

    /// Graceful drain: [`close`](Self::close)s the scheduler, then resolves once every class is
    /// empty — every queued request granted (or cancelled, or expired), every granted pull-mode
    /// job taken by an executor, and every cell back in its pool or quarantined. Pull-mode
    /// executors' [`next`](Self::next) returns `Ok(None)` once their class is drained.
    ///
    /// Work finishes only as the host releases its assignments: a drain waits for them all,
    /// so put a timeout around it if a job can hang; [`shutdown`](Self::shutdown) then fails
    /// whatever is left. Several drains may wait at once.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops waiting; the scheduler stays closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
    /// use fairway::{AdmittedRequest, CancellationToken, ClassId, RequestId, Scheduler, TenantId};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4))?;
    /// let scheduler = Scheduler::builder(ledger.clone()).payload::<u32>().class(1, 16).build()?;
    /// for n in 1..=3 {
    ///     let permit = ledger.admit(AdmissionRequest::new(RequestId(n), TenantId(0)))?;
    ///     let request = AdmittedRequest::new(permit, CancellationToken::new(RequestId(n)));
    ///     scheduler.submit(request, n as u32).map_err(|e| e.error)?;
    /// }
    /// let executor = {
    ///     let scheduler = scheduler.clone();
    ///     std::thread::spawn(move || {
    ///         let mut ran = Vec::new();
    ///         while let Some(job) = scheduler.next_blocking(ClassId(0))? {
    ///             ran.push(job.payload);
    ///             job.assignment.release();
    ///         }
    ///         Ok::<_, fairway::Error>(ran)
    ///     })
    /// };
    /// scheduler.drain_blocking(); // `.drain().await` in async code
    /// assert_eq!(executor.join().unwrap()?, [1, 2, 3]);
    /// assert!(ledger.usage().is_zero());
    /// # Ok::<(), fairway::Error>(())
    /// ```
    #[inline]
    pub fn drain(&self) -> DrainOn<'_, T, M> {
        self.close();
        DrainOn::new(self)
    }

    /// [`drain`](Self::drain), blocking the calling thread until the scheduler is drained.
    ///
    /// # Panics
    ///
    /// As [`enqueue_blocking`](Self::enqueue_blocking): with the `tokio` feature, inside a
    /// current-thread tokio runtime.
    pub fn drain_blocking(&self) {
        assert_not_in_current_thread_runtime("Scheduler::drain_blocking");
        block_on(self.drain());
    }

    /// Takes the payloads of pull-mode requests that [`shutdown`](Self::shutdown) ended before
    /// an executor took them (queued ones, and granted ones no executor had taken; their
    /// permits and cells are already settled), in no particular order. Each payload is handed
    /// out once; before shutdown this is empty.
    ///
    /// Payloads of requests that were cancelled or whose deadline passed are dropped, as before.
    ///
    /// `shutdown` ends the queued requests of a class itself, unless another thread is running
    /// a dispatch pass of that class at that moment, which then ends them a moment later; to be
    /// sure of every payload under concurrency, take them after [`drain`](Self::drain) has
    /// resolved (after a shutdown it resolves once every class is empty).
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
    /// use fairway::{AdmittedRequest, CancellationToken, RequestId, Scheduler, TenantId};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4))?;
    /// let scheduler = Scheduler::builder(ledger.clone()).payload::<&str>().class(1, 16).build()?;
    /// for (n, payload) in [(1, "a"), (2, "b")] {
    ///     let permit = ledger.admit(AdmissionRequest::new(RequestId(n), TenantId(0)))?;
    ///     let request = AdmittedRequest::new(permit, CancellationToken::new(RequestId(n)));
    ///     scheduler.submit(request, payload).map_err(|e| e.error)?;
    /// }
    /// scheduler.shutdown();
    /// let mut back = scheduler.take_undelivered();
    /// back.sort();
    /// assert_eq!(back, ["a", "b"]);
    /// assert!(ledger.usage().is_zero());
    /// # Ok::<(), fairway::Error>(())
    /// ```
    pub fn take_undelivered(&self) -> Vec<T> {
        let mut out = Vec::new();
        if !self.shared.is_shut() {
            return out;
        }
        for engine in self.shared.classes.iter() {
            self.refuse_ready(engine);
            engine.take_undelivered(&mut out);
        }
        out
    }

    /// After shutdown: refuses the granted jobs of `engine` still waiting for an executor, as
    /// an executor's acceptance would, which keeps their payloads for `take_undelivered`.
    pub(super) fn refuse_ready(&self, engine: &M::Class<T>) {
        while let Some(p) = engine.try_next() {
            if let Some(job) = self.accept_pulled(p) {
                // Only if the scheduler was not shut down after all: keep it the same way.
                engine.keep_undelivered(job.payload);
                job.assignment.release();
            }
        }
    }

    /// Live queued requests of `class` (SPEC F60), from one atomic load (the engine) or one
    /// short lock (the oracle's twins); never allocates.
    ///
    /// # Errors
    ///
    /// `invalid-argument / class` for an unknown class.
    #[inline]
    pub fn queue_depth(&self, class: ClassId) -> Result<u32, Error> {
        Ok(self.shared.class(class)?.queue_depth())
    }

    /// Cells of `class` free now (neither leased nor quarantined); never allocates.
    ///
    /// # Errors
    ///
    /// `invalid-argument / class` for an unknown class.
    #[inline]
    pub fn available_cells(&self, class: ClassId) -> Result<u32, Error> {
        Ok(self.shared.class(class)?.available_cells())
    }

    /// Which cells of `class` are quarantined now (SPEC F22), in id order: the ones a host
    /// cleans and hands to [`restore_cell`](Self::restore_cell). Allocation-free: the iterator
    /// reads one bit per cell as it goes, so a cell quarantined or restored meanwhile may or may
    /// not be seen. For a host's pool, the cells the scheduler quarantined and did not restore.
    ///
    /// # Errors
    ///
    /// `invalid-argument / class` for an unknown class.
    pub fn quarantined_cells(&self, class: ClassId) -> Result<QuarantinedCells<'_>, Error> {
        let pool = self.shared.class(class)?.pool();
        Ok(QuarantinedCells {
            pool,
            next: 0,
            end: pool.capacity(),
        })
    }

    /// Returns a quarantined cell of `class` to service once the host has cleaned it
    /// (issuer-owned cleanup, SPEC F44): its pool makes it available again and a waiting
    /// request may be granted it at once. Restoring a cell of a class whose every cell was
    /// quarantined reopens it: its requests failed `all-cells-quarantined` meanwhile, and the
    /// next one is granted (SPEC F22). The scheduler never restores a cell by itself, and
    /// never grows a class beyond its configured cells.
    ///
    /// # Errors
    ///
    /// - `invalid-argument / class` for an unknown class;
    /// - `invalid-argument / cell-range` for a cell id at or past the class's cell count;
    /// - `invalid-argument / cell-not-quarantined` for a cell that is not quarantined (free,
    ///   leased, or restored already);
    /// - the pool's own error for a host pool that cannot restore cells (the default of
    ///   [`CellPool::restore`]).
    pub fn restore_cell(&self, class: ClassId, cell: crate::ids::CellId) -> Result<(), Error> {
        self.shared.class(class)?.restore_cell(cell)?;
        crate::observe::restored(class, cell);
        Ok(())
    }

    /// [`snapshot`](Self::snapshot) into a snapshot the caller owns, reusing its histogram's
    /// storage: it allocates nothing unless the waits have outgrown the range of
    /// `out.wait_histogram` (take the first one with [`snapshot`](Self::snapshot)).
    ///
    /// # Errors
    ///
    /// `invalid-argument / class` for an unknown class (`out` is left as it was).
    #[inline]
    pub fn snapshot_into(&self, class: ClassId, out: &mut ClassSnapshot) -> Result<(), Error> {
        self.shared.class(class)?.snapshot_into(out);
        Ok(())
    }

    /// Counters and pool view of `class` (SPEC F60).
    ///
    /// Builds an [`hdrhistogram::Histogram`] of the waits, which allocates: for a monitoring
    /// loop use the allocation-free observers ([`queue_depth`](Self::queue_depth),
    /// [`available_cells`](Self::available_cells)) or
    /// [`snapshot_into`](Self::snapshot_into), which reuses a caller-owned histogram.
    ///
    /// # Errors
    ///
    /// `invalid-argument / class` for an unknown class.
    ///
    /// # Panics
    ///
    /// Never.
    ///
    /// # Cancel safety
    ///
    /// Not async; it takes no lock a grant waits for.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
    /// use fairway::{ClassId, Scheduler};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4))?;
    /// let scheduler = Scheduler::builder(ledger).class(2, 16).build()?;
    /// let s = scheduler.snapshot(ClassId(0))?;
    /// assert_eq!((s.cells_total, s.cells_available, s.queue_depth), (2, 2, 0));
    /// assert_eq!(s.wait_histogram.len(), 0);
    /// # Ok::<(), fairway::Error>(())
    /// ```
    #[inline]
    pub fn snapshot(&self, class: ClassId) -> Result<ClassSnapshot, Error> {
        Ok(self.shared.class(class)?.snapshot())
    }
}

/// The quarantined cells of a class, from [`Scheduler::quarantined_cells`].
pub struct QuarantinedCells<'a> {
    pool: &'a crate::pool::ClassPool,
    next: u32,
    end: u32,
}

impl Iterator for QuarantinedCells<'_> {
    type Item = crate::ids::CellId;

    fn next(&mut self) -> Option<crate::ids::CellId> {
        while self.next < self.end {
            let cell = crate::ids::CellId(self.next);
            self.next += 1;
            if self.pool.is_quarantined(cell) {
                return Some(cell);
            }
        }
        None
    }
}

impl core::fmt::Debug for QuarantinedCells<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("QuarantinedCells")
            .field("next", &self.next)
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}
