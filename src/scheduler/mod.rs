//! The public scheduler: build it, enqueue admitted requests, receive affine assignments.
//!
//! See the crate documentation for an overview and an example.

mod assignment;
mod builder;
mod footprint;
mod future;
mod lifecycle;
mod pull;
mod request;
mod shared;
mod submit;
#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use crate::block::block_on;
pub use crate::stats::ClassSnapshot;
pub use assignment::Assignment;
pub use builder::{Builder, ClassConfig, DropPolicy};
pub use footprint::Footprint;
pub use future::{Drain, DrainOn, Enqueue, EnqueueOn, Next, NextOn};
pub use lifecycle::QuarantinedCells;
pub use request::{AdmittedRequest, Job, RequestHandle, SubmitError, TryEnqueueError};
pub(crate) use shared::{CellReturn, Shared};
pub use submit::{Submit, SubmitOn};

use future::Holder;

use crate::admission::{ExecutionPermit, Ledger, Permit};
use crate::cancel::CancellationToken;
use crate::clock::Clock;
use crate::engine::RingClass;
use crate::engine::{ClassEngine, ClassSetup, Ended, Enqueued, Ticket};
use crate::error::Reason;
use crate::error::{Code, Error};
use crate::ids::{ClassId, Priority};
use crate::oracle::mutex::{BaselineClass, BaselineLock, StdMutex};
use crate::pool::{validate_pools, CellPool, ClassPool, FixedCellPool, Lease};
use crate::raw::idset::{IdSet, InsertError, Slot};
use crate::sync::{AtomicBool, Ordering};
use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;
use std::sync::Arc;

mod sealed {
    pub trait Sealed {}
}

/// What serialises one class's policy: the engine ([`Ring`]) or a mutex twin ([`Baseline`]),
/// which exists for the differential tests and the benches' comparison. Sealed; reached
/// through the hidden `fairway::oracle` module only.
#[doc(hidden)]
pub trait Mechanism: sealed::Sealed + Send + Sync + 'static {
    /// The per-class engine.
    #[doc(hidden)]
    type Class<T: Send + 'static>: ClassEngine<T>;
    /// Bytes per entry slot of this mechanism, besides the payload (see [`Footprint`]).
    const BYTES_PER_SLOT: u64;
}

/// The engine every [`Scheduler`] runs on: grants go through per-tenant turns handed out by an
/// atomic ring of tenant ids, with no class-wide lock or token on the grant path, so a thread
/// stopped mid-grant delays only its own tenant (docs/ring-engine.md).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Ring;

impl sealed::Sealed for Ring {}
impl Mechanism for Ring {
    type Class<T: Send + 'static> = RingClass<T>;
    // Also covers its per-tenant words beyond `Footprint::BYTES_PER_TENANT` (turn state, ring
    // positions, record, notice stack head) at the test suite's ratio of tenants to slots. 24
    // of it are the in-place change's words (SPEC F36: wanted priority and deadline, the
    // deadline in effect, the notice link).
    const BYTES_PER_SLOT: u64 = 472;
}

/// The mutex twin: the same policy under one lock per class, never tuned — the differential
/// tests' oracle and the benches' comparison. `L` picks the mutex (`StdMutex` or
/// `ParkingLotMutex`).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Baseline<L = StdMutex>(PhantomData<L>);

impl<L: BaselineLock> sealed::Sealed for Baseline<L> {}
impl<L: BaselineLock> Mechanism for Baseline<L> {
    type Class<T: Send + 'static> = BaselineClass<T, L>;
    const BYTES_PER_SLOT: u64 = 352;
}

/// The fair scheduler. Cheap to clone (one `Arc`).
///
/// `T` is the payload type of pull-mode submissions (`()` if unused).
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
///
/// # Cancel safety
///
/// Every future it returns can be dropped at any point (a `select!`, a `timeout`, an aborted
/// task) without losing a cell or quota: see [`enqueue`](Self::enqueue), [`next`](Self::next)
/// and, for the cell an [`Assignment`] holds, its class's [`DropPolicy`].
///
/// # Panics
///
/// No method panics on bad input: misuse is a typed [`Error`]. With the `tokio` feature,
/// [`enqueue_blocking`](Self::enqueue_blocking) panics inside a current-thread tokio runtime
/// (where it would hang). A panic in a host's [`CellPool`] or [`Clock`] propagates.
///
/// # Examples
///
/// ```
/// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
/// use fairway::{AdmittedRequest, CancellationToken, ClassId, RequestId, Scheduler, TenantId};
///
/// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 16))?;
/// let scheduler = Scheduler::builder(ledger.clone()).class(2, 1024).build()?;
/// let id = RequestId(1);
/// let permit = ledger.admit(AdmissionRequest::new(id, TenantId(3)))?;
/// let assignment =
///     scheduler.enqueue_blocking(AdmittedRequest::new(permit, CancellationToken::new(id)))?;
/// assert_eq!(assignment.class(), ClassId(0));
/// assignment.release();
/// assert!(ledger.usage().is_zero());
/// # Ok::<(), fairway::Error>(())
/// ```
/// [`Builder::footprint`] gives the bytes before building; [`ClassConfig::MAX_CELLS`],
/// [`ClassConfig::MAX_QUEUE_CAPACITY`] and
/// [`LedgerConfig::MAX_TENANTS`](crate::admission::LedgerConfig::MAX_TENANTS) bound each figure.
pub type Scheduler<T = ()> = SchedulerOn<T, Ring>;

/// [`Scheduler`] over any [`Mechanism`]: the engine (what `Scheduler<T>` names) or a mutex
/// twin (the oracle's).
#[doc(hidden)]
pub struct SchedulerOn<T: Send + 'static, M: Mechanism> {
    shared: Arc<Shared<T, M>>,
}

impl<T: Send + 'static, M: Mechanism> Clone for SchedulerOn<T, M> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T: Send + 'static, M: Mechanism> fmt::Debug for SchedulerOn<T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("classes", &self.shared.classes.len())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static, M: Mechanism> SchedulerOn<T, M> {
    /// Queues an admitted request and returns a future resolving to its [`Assignment`].
    ///
    /// The request is queued when `enqueue` is called (not when first polled), so arrival
    /// order is call order. The future makes progress when polled on any executor. It borrows
    /// the scheduler; [`enqueue_owned`](Self::enqueue_owned) returns a `'static` one to spawn.
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
    ///
    /// # Panics
    ///
    /// The future panics if polled again after it completed.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
    /// use fairway::{AdmittedRequest, CancellationToken, RequestId, Scheduler, TenantId};
    /// use std::future::Future;
    /// use std::pin::pin;
    /// use std::task::{Context, Poll, Waker};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4))?;
    /// let scheduler = Scheduler::builder(ledger.clone()).class(1, 16).build()?;
    /// let request = |n| -> Result<AdmittedRequest, fairway::Error> {
    ///     let id = RequestId(n);
    ///     let permit = ledger.admit(AdmissionRequest::new(id, TenantId(0)))?;
    ///     Ok(AdmittedRequest::new(permit, CancellationToken::new(id)))
    /// };
    /// let first = scheduler.enqueue_blocking(request(1)?)?;
    /// // The only cell is taken: the second request waits (`.await` in async code).
    /// let mut second = pin!(scheduler.enqueue(request(2)?));
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(second.as_mut().poll(&mut cx).is_pending());
    /// first.release();
    /// let Poll::Ready(Ok(granted)) = second.as_mut().poll(&mut cx) else { unreachable!() };
    /// granted.release();
    /// assert!(ledger.usage().is_zero());
    /// # Ok::<(), fairway::Error>(())
    /// ```
    #[inline]
    pub fn enqueue(&self, request: AdmittedRequest) -> EnqueueOn<'_, T, M> {
        EnqueueOn::start(Holder::Borrowed(&self.shared), request)
    }

    /// [`enqueue`](Self::enqueue) with a future that owns a handle to the scheduler (one `Arc`
    /// clone) instead of borrowing it, so it is `'static` and can be spawned
    /// (`tokio::spawn(scheduler.enqueue_owned(request))`), as tokio's `acquire_owned`.
    ///
    /// # Errors
    ///
    /// As [`enqueue`](Self::enqueue).
    ///
    /// # Cancel safety
    ///
    /// As [`enqueue`](Self::enqueue): dropping the future, or aborting the task that polls it,
    /// withdraws the request and refunds everything.
    #[inline]
    pub fn enqueue_owned(&self, request: AdmittedRequest) -> EnqueueOn<'static, T, M> {
        EnqueueOn::start(Holder::Owned(Arc::clone(&self.shared)), request)
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
                Arc::clone(&self.shared) as _,
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
    /// For threads that are not an async runtime's: blocking a runtime's thread keeps it from
    /// running the tasks that would release the cells this call waits for. In a current-thread
    /// runtime that is a hang (the one thread waits for itself); in a multi-thread runtime it
    /// takes a worker away. In async code use [`enqueue`](Self::enqueue)`(..).await`.
    ///
    /// # Errors
    ///
    /// As [`enqueue`](Self::enqueue).
    ///
    /// # Panics
    ///
    /// With the `tokio` cargo feature, when called from within a current-thread tokio runtime
    /// (where it would hang), as tokio's own blocking calls do (so do
    /// [`next_blocking`](Self::next_blocking) and [`drain_blocking`](Self::drain_blocking)).
    /// That includes the
    /// `spawn_blocking` threads of such a runtime, where blocking is in fact harmless; use
    /// `Handle::block_on(scheduler.enqueue(request))` there. Without the feature nothing is
    /// detected and such a call hangs.
    #[inline]
    pub fn enqueue_blocking(&self, request: AdmittedRequest) -> Result<Assignment, Error> {
        assert_not_in_current_thread_runtime("Scheduler::enqueue_blocking");
        block_on(self.enqueue(request))
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

    /// Changes the priority of a queued request in place (SPEC F36): it is re-ordered within
    /// its tenant, keeping its arrival order among equals (its sequence) and its place for
    /// aging. Costs what an insertion into the tenant's order costs, never a scan, and never
    /// waits for another thread: on the engine the change is applied by the next thread that
    /// takes the tenant's turn, before it can grant the request. It never gives the tenant an
    /// extra turn (F15): priority orders work inside a tenant only.
    ///
    /// # Errors
    ///
    /// `not-found / too-late` if the request is no longer queued: granted or ended first,
    /// however long ago (a change racing the grant either lands before it or is refused,
    /// never lost); `permission-denied / foreign-handle` for another scheduler's handle.
    ///
    /// # Example
    ///
    /// ```
    /// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
    /// use fairway::{ClassId, RequestId, Scheduler, TenantId};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("io")], 1))?;
    /// let s = Scheduler::builder(ledger.clone()).class(1, 8).build()?;
    /// let admit = |id| ledger.admit(AdmissionRequest::new(RequestId(id), TenantId(0)));
    /// let running = s.try_enqueue(admit(1)?.into()).expect("the cell is free");
    /// // Two requests wait behind it; the later one becomes urgent.
    /// let first = s.enqueue(admit(2)?.into());
    /// let second = s.enqueue(admit(3)?.into());
    /// # let (mut first, mut second) = (Box::pin(first), Box::pin(second));
    /// # let waker = std::task::Waker::noop();
    /// # let mut cx = std::task::Context::from_waker(&waker);
    /// # assert!(first.as_mut().poll(&mut cx).is_pending());
    /// # assert!(second.as_mut().poll(&mut cx).is_pending());
    /// s.set_priority(second.handle().expect("queued"), 9)?;
    /// running.release();
    /// # use std::future::Future;
    /// let std::task::Poll::Ready(granted) = second.as_mut().poll(&mut cx) else {
    ///     panic!("the raised request goes first");
    /// };
    /// assert!(first.as_mut().poll(&mut cx).is_pending(), "behind it");
    /// # drop(granted);
    /// # Ok::<(), fairway::Error>(())
    /// ```
    #[inline]
    pub fn set_priority(&self, handle: RequestHandle, priority: Priority) -> Result<(), Error> {
        self.change(handle, Some(priority), None)
    }

    /// Changes the deadline of a queued request in place (SPEC F36): `Some(d)` (absolute, in
    /// nanoseconds on the ledger's clock, as [`Permit::deadline`](crate::admission::Permit::deadline))
    /// tightens it, or relaxes an earlier change, but never past the deadline the request's
    /// permit was admitted with; `None` restores that one. The request is re-ordered within
    /// its tenant (earlier deadline first among equal priorities) and expires at the new
    /// deadline (F46); one already past expires now. Costs and races as
    /// [`set_priority`](Self::set_priority).
    ///
    /// # Errors
    ///
    /// As [`set_priority`](Self::set_priority).
    #[inline]
    pub fn set_deadline(&self, handle: RequestHandle, deadline: Option<u64>) -> Result<(), Error> {
        self.change(handle, None, Some(deadline))
    }

    fn change(
        &self,
        handle: RequestHandle,
        priority: Option<Priority>,
        deadline: Option<Option<u64>>,
    ) -> Result<(), Error> {
        if handle.scheduler != self.shared.id {
            return Err(Error::new(Code::PermissionDenied, Reason::ForeignHandle));
        }
        self.shared
            .class(handle.class)?
            .change(handle.key, priority, deadline)
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

/// With the `tokio` feature: panics if the calling thread is inside a current-thread tokio
/// runtime, where a blocking wait for a cell could never end.
#[inline]
#[track_caller]
fn assert_not_in_current_thread_runtime(what: &str) {
    #[cfg(feature = "tokio")]
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread {
            panic!(
                "{what} called from within a current-thread tokio runtime: blocking here would \
                 hang (what it waits for is done by a task of this same thread); await the \
                 async form instead (`enqueue`, `next`, `drain`)"
            );
        }
    }
    #[cfg(not(feature = "tokio"))]
    let _ = what;
}

/// What the enqueue future needs from its owner when it gives up: withdraws the request, gives
/// back a cell it had been granted, and refunds `permit` (after the cell, SPEC F42).
pub(crate) fn give_up<T: Send + 'static, E: ClassEngine<T>>(
    engine: &E,
    key: u64,
    why: Ended,
    mut permit: Option<ExecutionPermit>,
) {
    match engine.withdraw_refunding(key, why, &mut permit) {
        Some(lease) => engine.release_then(lease, || drop(permit)),
        None => drop(permit),
    }
}
