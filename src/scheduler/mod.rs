//! The public scheduler: build it, enqueue admitted requests, receive affine assignments.
//!
//! See the crate documentation for an overview and an example.

mod assignment;
mod footprint;
mod future;

pub(crate) use crate::block::block_on;
pub use crate::stats::ClassSnapshot;
pub use assignment::Assignment;
pub use footprint::Footprint;
pub use future::{Enqueue, Next};

use crate::admission::{Ledger, Permit};
use crate::cancel::CancellationToken;
use crate::clock::Clock;
use crate::engine::baseline::{BaselineClass, BaselineLock, StdMutex};
use crate::engine::lockfree::LockFreeClass;
use crate::engine::{ClassEngine, ClassSetup, Ended, Enqueued, Ticket};
use crate::pool::{validate_pools, CellPool, ClassPool, FixedCellPool, Lease};
use crate::raw::idset::{IdSet, InsertError, Slot};
use crate::sync::{AtomicBool, Ordering};
use crate::Reason;
use crate::{ClassId, Code, Error};
use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;
use std::sync::Arc;

mod sealed {
    pub trait Sealed {}
}

/// Which mechanism drives the scheduler: [`LockFree`] (the product) or [`Baseline`] (one mutex
/// per class, for comparison). Sealed.
pub trait Mechanism: sealed::Sealed + Send + Sync + 'static {
    /// The per-class engine.
    #[doc(hidden)]
    type Class<T: Send + 'static>: ClassEngine<T>;
    /// Bytes per entry slot of this mechanism, besides the payload (see [`Footprint`]).
    const BYTES_PER_SLOT: u64;
}

/// The lock-free engine: no mutex on any hot path; no thread ever waits for another.
#[derive(Debug, Clone, Copy, Default)]
pub struct LockFree;

impl sealed::Sealed for LockFree {}
impl Mechanism for LockFree {
    type Class<T: Send + 'static> = LockFreeClass<T>;
    const BYTES_PER_SLOT: u64 = 400;
}

/// The mutex baseline: the same policy under one lock per class. `L` picks the mutex
/// ([`StdMutex`] or [`ParkingLotMutex`](crate::ParkingLotMutex)).
#[derive(Debug, Clone, Copy, Default)]
pub struct Baseline<L = StdMutex>(PhantomData<L>);

impl<L: BaselineLock> sealed::Sealed for Baseline<L> {}
impl<L: BaselineLock> Mechanism for Baseline<L> {
    type Class<T: Send + 'static> = BaselineClass<T, L>;
    const BYTES_PER_SLOT: u64 = 352;
}

/// One class of cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassConfig {
    /// Number of cells (`1..=`[`ClassConfig::MAX_CELLS`]).
    pub cells: u32,
    /// Exact bound on queued requests (at most [`ClassConfig::MAX_QUEUE_CAPACITY`]); `0` denies
    /// every request (SPEC F06).
    pub queue_capacity: u32,
}

/// A request that passed admission: its permit and, optionally, the host's cancellation token
/// for it.
///
/// A request without a token is cancelled through its [`RequestHandle`] only; it costs no
/// allocation at all on its way through the scheduler (a token is one `Arc`).
#[derive(Debug)]
pub struct AdmittedRequest {
    permit: Permit,
    token: Option<CancellationToken>,
}

impl AdmittedRequest {
    /// Pairs a permit with the host's token. The token's id must be the permit's request id
    /// (checked at enqueue, SPEC F34).
    #[inline]
    pub fn new(permit: Permit, token: CancellationToken) -> Self {
        Self {
            permit,
            token: Some(token),
        }
    }

    /// A request with no cancellation token: cancellable by [`Scheduler::cancel`] while queued,
    /// by dropping its enqueue future, or by its deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
    /// use fairway::{AdmittedRequest, RequestId, Scheduler, TenantId};
    ///
    /// let ledger = Ledger::new(LedgerConfig {
    ///     classes: vec![ClassSpec::new("cpu")],
    ///     max_tenants: 1,
    ///     tenant_limits: Limits::UNLIMITED,
    /// })?;
    /// let scheduler = Scheduler::<()>::builder(ledger.clone()).class(1, 8).build()?;
    /// let permit = ledger.admit(AdmissionRequest::new(RequestId(1), TenantId(0)))?;
    /// let assignment = scheduler.enqueue_blocking(AdmittedRequest::without_token(permit))?;
    /// assignment.release();
    /// # Ok::<(), fairway::Error>(())
    /// ```
    #[inline]
    pub fn without_token(permit: Permit) -> Self {
        Self {
            permit,
            token: None,
        }
    }

    /// The permit.
    #[inline]
    pub fn permit(&self) -> &Permit {
        &self.permit
    }

    /// The token, if the request has one.
    #[inline]
    pub fn token(&self) -> Option<&CancellationToken> {
        self.token.as_ref()
    }

    /// Splits the request back into its parts.
    #[inline]
    pub fn into_parts(self) -> (Permit, Option<CancellationToken>) {
        (self.permit, self.token)
    }
}

impl From<Permit> for AdmittedRequest {
    /// A request without a token ([`AdmittedRequest::without_token`]).
    #[inline]
    fn from(permit: Permit) -> Self {
        Self::without_token(permit)
    }
}

/// A handle to a queued request, for [`Scheduler::cancel`]. Copyable; generation-tagged, so a
/// handle whose request has ended is refused, never acted on (SPEC F30, F33); it also names the
/// scheduler that minted it, which refuses it everywhere else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestHandle {
    scheduler: u64,
    class: ClassId,
    key: u64,
}

impl RequestHandle {
    /// The class the request was queued in.
    #[inline]
    pub fn class(&self) -> ClassId {
        self.class
    }
}

/// A request [`Scheduler::try_enqueue`] could not grant at once, given back with the reason.
#[derive(Debug)]
pub struct TryEnqueueError {
    /// Why (`unavailable / no-capacity` when the request would have had to wait).
    pub error: Error,
    /// The request, untouched, or `None` if it was refused outright and its permit refunded.
    pub request: Option<AdmittedRequest>,
}

impl fmt::Display for TryEnqueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for TryEnqueueError {}

/// A pull-mode request refused at submission; the payload and permit are given back.
pub struct SubmitError<T> {
    /// Why.
    pub error: Error,
    /// The permit and payload, when they could be given back.
    pub returned: Option<(Permit, T)>,
}

impl<T> fmt::Debug for SubmitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubmitError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for SubmitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T> std::error::Error for SubmitError<T> {}

/// A pull-mode request handed to an executor, with its assignment (SPEC F23).
#[derive(Debug)]
pub struct Job<T> {
    /// What the host submitted.
    pub payload: T,
    /// The cell and execution permit; release or quarantine it when done.
    pub assignment: Assignment,
}

/// A process-unique scheduler identity.
fn next_scheduler_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    // Relaxed: only uniqueness matters.
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Where assignments send their cells back.
pub(crate) trait CellReturn: Send + Sync {
    fn release(&self, class: ClassId, lease: Lease);
    fn quarantine(&self, class: ClassId, lease: Lease, reason: &'static str);
    fn forget_id(&self, slot: Slot);
}

pub(crate) struct Shared<T: Send + 'static, M: Mechanism> {
    /// Process-unique identity, stamped into every [`RequestHandle`] (SPEC F30).
    id: u64,
    /// Ids of the live requests (SPEC F34).
    ids: Arc<IdSet>,
    ledger: Ledger,
    classes: Box<[M::Class<T>]>,
    shut: AtomicBool,
    clock: Arc<dyn Clock>,
}

impl<T: Send + 'static, M: Mechanism> CellReturn for Shared<T, M> {
    fn release(&self, class: ClassId, lease: Lease) {
        self.classes[usize::from(class.0)].release(lease);
    }

    fn quarantine(&self, class: ClassId, lease: Lease, reason: &'static str) {
        self.classes[usize::from(class.0)].quarantine(lease, reason);
    }

    fn forget_id(&self, slot: Slot) {
        Shared::forget_id(self, slot);
    }
}

impl<T: Send + 'static, M: Mechanism> Shared<T, M> {
    fn class(&self, class: ClassId) -> Result<&M::Class<T>, Error> {
        self.classes
            .get(usize::from(class.0))
            .ok_or(Error::new(Code::InvalidArgument, Reason::Class))
    }

    fn is_shut(&self) -> bool {
        // Acquire: pairs with the Release store in `shutdown`.
        self.shut.load(Ordering::Acquire)
    }

    /// Checks that apply to every request before it reaches an engine; returns its class's
    /// engine and the request id's place among the live ids (SPEC F34), which the caller must
    /// give up ([`Shared::forget_id`]) when the request ends. A request refused for the state it
    /// or the scheduler is in (shut down, cancelled, expired) is counted in the class's
    /// snapshot; bad input (a foreign permit, a wrong token, a duplicate id) is not.
    fn check(&self, req: &AdmittedRequest) -> Result<(&M::Class<T>, Slot), Error> {
        if !req.permit.is_from(&self.ledger) {
            return Err(Error::new(Code::PermissionDenied, Reason::ForeignAdmission));
        }
        if req
            .token
            .as_ref()
            .is_some_and(|t| t.id() != req.permit.id())
        {
            return Err(Error::new(
                Code::InvalidArgument,
                Reason::CancellationIdentity,
            ));
        }
        let engine = self.class(req.permit.class())?;
        let refused = if self.is_shut() {
            Some(Error::new(Code::Unavailable, Reason::Shutdown))
        } else if let Some(reason) = req.token.as_ref().and_then(CancellationToken::reason) {
            Some(Error::new(Code::Cancelled, Reason::Host(reason)))
        } else if req.permit.deadline().is_some_and(|d| self.clock.now() >= d) {
            Some(Error::new(Code::DeadlineExceeded, Reason::DeadlineExceeded))
        } else {
            None
        };
        if let Some(e) = refused {
            engine.count_refused(e.code() == Code::DeadlineExceeded);
            return Err(e);
        }
        match self.ids.insert(req.permit.id().0) {
            Ok(slot) => Ok((engine, slot)),
            Err(InsertError::Duplicate) => {
                Err(Error::new(Code::AlreadyExists, Reason::DuplicateRequest))
            }
            // Cannot happen while the table is sized for every request that can be live (see
            // `Builder::build`); refuse rather than admit an unchecked id.
            Err(InsertError::Full) => {
                engine.count_refused(false);
                Err(Error::new(Code::ResourceExhausted, Reason::QueueFull))
            }
        }
    }

    /// Gives up a request id's place among the live ids: the request has ended.
    #[inline]
    pub(crate) fn forget_id(&self, slot: Slot) {
        self.ids.remove(slot);
    }

    /// A handle to the request queued under `key` in `class`.
    pub(crate) fn handle(&self, class: ClassId, key: u64) -> RequestHandle {
        RequestHandle {
            scheduler: self.id,
            class,
            key,
        }
    }
}

/// The fair scheduler. Cheap to clone (one `Arc`).
///
/// `T` is the payload type of pull-mode submissions (`()` if unused); `M` the mechanism.
///
/// # Fairness
///
/// Classes are independent. Within a class, tenants with queued work take turns round-robin
/// (`weight` grants per turn); within a tenant, higher priority first, then earlier deadline,
/// then arrival order; a request waiting longer than `starvation_after` goes before newer work
/// of its tenant. Priority never crosses tenants.
///
/// # Capacity
///
/// Everything is sized at build: per class `queue_capacity` live queued requests (plus as many
/// slots again for cancelled entries awaiting removal, plus one per cell), `max_tenants` tenants
/// (from the ledger), and 64 async pull-mode executors per class. Nothing allocates afterwards.
/// [`Builder::footprint`] gives the bytes before building; [`ClassConfig::MAX_CELLS`],
/// [`ClassConfig::MAX_QUEUE_CAPACITY`] and
/// [`LedgerConfig::MAX_TENANTS`](crate::admission::LedgerConfig::MAX_TENANTS) bound each figure.
pub struct Scheduler<T: Send + 'static = (), M: Mechanism = LockFree> {
    shared: Arc<Shared<T, M>>,
}

impl<T: Send + 'static, M: Mechanism> Clone for Scheduler<T, M> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T: Send + 'static, M: Mechanism> fmt::Debug for Scheduler<T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("classes", &self.shared.classes.len())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Scheduler`] from a validated configuration (SPEC F01, F07).
pub struct Builder<T> {
    ledger: Ledger,
    classes: Vec<ClassConfig>,
    starvation_after: Duration,
    pools: Option<Vec<Arc<dyn CellPool>>>,
    _payload: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for Builder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("classes", &self.classes)
            .field("starvation_after", &self.starvation_after)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Builder<T> {
    /// Adds the next class (its [`ClassId`] is its position, matching the ledger's classes).
    #[inline]
    pub fn class(mut self, cells: u32, queue_capacity: u32) -> Self {
        self.classes.push(ClassConfig {
            cells,
            queue_capacity,
        });
        self
    }

    /// Sets all classes at once.
    #[inline]
    pub fn classes(mut self, classes: impl IntoIterator<Item = ClassConfig>) -> Self {
        self.classes = classes.into_iter().collect();
        self
    }

    /// How long a request may wait before it goes ahead of newer work of its tenant (SPEC F14).
    /// Default: 1 second.
    #[inline]
    pub fn starvation_after(mut self, after: Duration) -> Self {
        self.starvation_after = after;
        self
    }

    /// Host-supplied cell pools, one per class in any order (SPEC F07). Default: a
    /// [`FixedCellPool`] per class.
    #[inline]
    pub fn pools(mut self, pools: Vec<Arc<dyn CellPool>>) -> Self {
        self.pools = Some(pools);
        self
    }

    /// Builds the lock-free scheduler.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` naming the field (`classes`, `cells` — 0 or above
    /// [`ClassConfig::MAX_CELLS`] —, `queue_capacity` — above
    /// [`ClassConfig::MAX_QUEUE_CAPACITY`] —, `starvation_after`), or
    /// `invalid-argument / pool-topology`. The configuration is checked before anything is
    /// allocated; [`footprint`](Self::footprint) tells what a valid one will allocate.
    #[inline]
    pub fn build(self) -> Result<Scheduler<T, LockFree>, Error> {
        self.build_with()
    }

    /// Builds the mutex baseline with [`std::sync::Mutex`].
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    #[inline]
    pub fn build_baseline(self) -> Result<Scheduler<T, Baseline<StdMutex>>, Error> {
        self.build_with()
    }

    /// Builds with any mechanism.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    pub fn build_with<M: Mechanism>(self) -> Result<Scheduler<T, M>, Error> {
        // Every check before the first allocation (SPEC F01).
        self.validate()?;
        let starvation_after = u64::try_from(self.starvation_after.as_nanos()).unwrap_or(u64::MAX);
        let pools: Vec<ClassPool> = match self.pools {
            Some(pools) => {
                let expected: Vec<(ClassId, u32)> = self
                    .classes
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (ClassId(i as u16), c.cells))
                    .collect();
                validate_pools(&expected, &pools)?;
                let mut ordered = Vec::with_capacity(pools.len());
                for i in 0..self.classes.len() {
                    let p = pools
                        .iter()
                        .find(|p| p.class() == ClassId(i as u16))
                        .expect("validated");
                    ordered.push(ClassPool::Host(p.clone()));
                }
                ordered
            }
            None => self
                .classes
                .iter()
                .enumerate()
                .map(|(i, c)| FixedCellPool::new(ClassId(i as u16), c.cells).map(ClassPool::Fixed))
                .collect::<Result<_, _>>()?,
        };
        let clock = self.ledger.clock().clone();
        // Every request that can be live at once: queued, or holding (or about to take) a cell.
        let live: u64 = self
            .classes
            .iter()
            .map(|c| u64::from(c.queue_capacity) + u64::from(c.cells))
            .sum();
        let ids = Arc::new(IdSet::new(
            usize::try_from(live.max(1)).map_err(|_| Error::configuration("queue_capacity"))?,
        )?);
        let classes = self
            .classes
            .iter()
            .zip(pools)
            .enumerate()
            .map(|(i, (c, pool))| {
                M::Class::<T>::new(ClassSetup {
                    class: ClassId(i as u16),
                    ledger: self.ledger.clone(),
                    ids: ids.clone(),
                    cells: c.cells,
                    queue_capacity: c.queue_capacity,
                    max_tenants: self.ledger.max_tenants(),
                    starvation_after,
                    pool,
                    clock: clock.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?
            .into_boxed_slice();
        Ok(Scheduler {
            shared: Arc::new(Shared {
                id: next_scheduler_id(),
                ids,
                ledger: self.ledger,
                classes,
                shut: AtomicBool::new(false),
                clock,
            }),
        })
    }
}

impl<T: Send + 'static> Scheduler<T, LockFree> {
    /// Starts building a scheduler bound to `ledger` (SPEC F04).
    pub fn builder(ledger: Ledger) -> Builder<T> {
        Builder {
            ledger,
            classes: Vec::new(),
            starvation_after: Duration::from_secs(1),
            pools: None,
            _payload: PhantomData,
        }
    }
}

impl<T: Send + 'static, M: Mechanism> Scheduler<T, M> {
    /// Queues an admitted request and returns a future resolving to its [`Assignment`].
    ///
    /// The request is queued when `enqueue` is called (not when first polled), so arrival
    /// order is call order. The future makes progress when polled on any executor.
    ///
    /// # Errors
    ///
    /// The future resolves to an error for a foreign permit (`permission-denied /
    /// foreign-admission`), a token of another request (`invalid-argument /
    /// cancellation-identity`), a full queue (`resource-exhausted / queue-full`), cancellation
    /// (`cancelled / <first reason>`), an expired deadline (`deadline-exceeded`), shutdown or
    /// quarantine of every cell (`unavailable / ...`).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future withdraws the request: a queued entry is removed and the permit
    /// refunded; a granted but unaccepted cell goes back to its pool first, then the quota.
    #[inline]
    pub fn enqueue(&self, request: AdmittedRequest) -> Enqueue<'_, T, M> {
        Enqueue::start(&self.shared, request)
    }

    /// Grants at once if nothing is queued in the class and a cell is free; never waits and
    /// never queues.
    ///
    /// # Errors
    ///
    /// `unavailable / no-capacity` with the request given back when it would have to wait;
    /// otherwise as [`enqueue`](Self::enqueue), with the request refunded.
    pub fn try_enqueue(&self, request: AdmittedRequest) -> Result<Assignment, TryEnqueueError> {
        let s = &*self.shared;
        let (engine, live) = match s.check(&request) {
            Ok(e) => e,
            Err(error) => {
                return Err(TryEnqueueError {
                    error,
                    request: None,
                })
            }
        };
        let ticket = Ticket::from_permit(&request.permit);
        let out = engine.try_grant_now(&ticket);
        if !matches!(out, Ok(Some(_))) {
            s.forget_id(live);
        }
        match out {
            Ok(Some(lease)) => Ok(Assignment::new(
                self.shared.clone(),
                lease,
                request.permit.into_execution(),
                0,
                Some(live),
            )),
            Ok(None) => Err(TryEnqueueError {
                error: Error::new(Code::Unavailable, Reason::NoCapacity),
                request: Some(request),
            }),
            Err(error) => Err(TryEnqueueError {
                error,
                request: None,
            }),
        }
    }

    /// Like [`enqueue`](Self::enqueue), blocking the calling thread (SPEC X02).
    ///
    /// # Errors
    ///
    /// As [`enqueue`](Self::enqueue).
    #[inline]
    pub fn enqueue_blocking(&self, request: AdmittedRequest) -> Result<Assignment, Error> {
        block_on(self.enqueue(request))
    }

    /// Pull mode (SPEC F23): deposits a request with its payload without waiting. An executor
    /// receives it from [`next`](Self::next) with its assignment.
    ///
    /// # Errors
    ///
    /// As [`enqueue`](Self::enqueue); the payload and permit are given back where possible.
    pub fn submit(
        &self,
        request: AdmittedRequest,
        payload: T,
    ) -> Result<RequestHandle, SubmitError<T>> {
        let s = &*self.shared;
        let req = request;
        let (engine, live) = match s.check(&req) {
            Ok(e) => e,
            Err(error) => {
                return Err(SubmitError {
                    error,
                    returned: Some((req.permit, payload)),
                })
            }
        };
        let class = req.permit.class();
        let ticket = Ticket {
            live: Some(live),
            ..Ticket::from_permit(&req.permit)
        };
        let out = engine.enqueue(ticket, Some((req.permit, payload)), req.token.as_ref());
        if !matches!(out, Ok(Enqueued::Queued(_))) {
            s.forget_id(live);
        }
        match out {
            Ok(Enqueued::Queued(key)) => Ok(s.handle(class, key)),
            Ok(Enqueued::Granted(lease)) => {
                // Pull-mode requests always queue; give the cell straight back if an engine
                // ever grants one directly.
                engine.release(lease);
                Err(SubmitError {
                    error: Error::new(Code::Internal, Reason::PullGrantedDirectly),
                    returned: None,
                })
            }
            Err((error, returned)) => Err(SubmitError { error, returned }),
        }
    }

    /// Pull mode: the next request of `class` by the fairness rules, if one can be granted now.
    pub fn try_next(&self, class: ClassId) -> Option<Job<T>> {
        let engine = self.shared.class(class).ok()?;
        loop {
            let p = engine.try_next()?;
            if let Some(job) = self.accept_pulled(p) {
                return Some(job);
            }
        }
    }

    /// Pull mode: waits for the next request of `class`; `None` once the scheduler is shut down
    /// (or every cell quarantined) and nothing is left.
    #[inline]
    pub fn next(&self, class: ClassId) -> Next<'_, T, M> {
        Next::new(self, class)
    }

    /// Pull mode: blocks the calling thread for the next request of `class`.
    #[inline]
    pub fn next_blocking(&self, class: ClassId) -> Option<Job<T>> {
        block_on(self.next(class))
    }

    /// Acceptance check of a pulled request (SPEC F46): expired ones are refunded.
    fn accept_pulled(&self, p: crate::engine::Pulled<T>) -> Option<Job<T>> {
        let s = &*self.shared;
        let engine = s.class(p.permit.class()).ok()?;
        let expired = p.permit.deadline().is_some_and(|d| s.clock.now() >= d);
        if expired || p.cancelled.is_some() || s.is_shut() {
            // The untouched lease goes back first, then the quota (SPEC F42).
            engine.count_refused_after_grant();
            engine.release(p.lease);
            drop(p.permit);
            if let Some(live) = p.live {
                s.forget_id(live);
            }
            return None;
        }
        let assignment = Assignment::new(self.shared.clone(), p.lease, p.permit, p.waited, p.live);
        Some(Job {
            payload: p.payload,
            assignment,
        })
    }

    /// Cancels a queued request in O(1) (SPEC F31, F33).
    ///
    /// # Errors
    ///
    /// `not-found` if the request is no longer queued (granted, finished, or the handle is
    /// stale); an executing cell is never touched.
    #[inline]
    pub fn cancel(&self, handle: RequestHandle) -> Result<(), Error> {
        if handle.scheduler != self.shared.id {
            return Err(Error::new(Code::PermissionDenied, Reason::ForeignHandle));
        }
        self.shared.class(handle.class)?.cancel(handle.key)
    }

    /// Stops new admissions, fails every queued request (`unavailable / shutdown`) and makes
    /// grants not yet accepted fail at acceptance. Accepted assignments keep their cell and quota
    /// until released (SPEC F47).
    #[inline]
    pub fn shutdown(&self) {
        // Release: pairs with the Acquire load in `is_shut`.
        self.shared.shut.store(true, Ordering::Release);
        for c in self.shared.classes.iter() {
            c.shutdown();
        }
    }

    /// Counters and pool view of `class` (SPEC F60).
    ///
    /// # Errors
    ///
    /// `invalid-argument / class` for an unknown class.
    #[inline]
    pub fn snapshot(&self, class: ClassId) -> Result<ClassSnapshot, Error> {
        Ok(self.shared.class(class)?.snapshot())
    }

    /// The ledger this scheduler is bound to.
    #[inline]
    pub fn ledger(&self) -> &Ledger {
        &self.shared.ledger
    }

    /// The number of classes.
    #[inline]
    pub fn class_count(&self) -> usize {
        self.shared.classes.len()
    }
}

/// What the enqueue future needs from its owner when it gives up.
pub(crate) fn give_up<T: Send + 'static, E: ClassEngine<T>>(engine: &E, key: u64, why: Ended) {
    if let Some(lease) = engine.withdraw(key, why) {
        engine.release(lease);
    }
}
