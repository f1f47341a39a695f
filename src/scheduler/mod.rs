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
pub use future::{Drain, Enqueue, Next};

use future::Holder;

use crate::admission::{ExecutionPermit, Ledger, Permit};
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

/// What becomes of the cell of an [`Assignment`] dropped without
/// [`release`](Assignment::release) or [`quarantine`](Assignment::quarantine) (SPEC F44): a
/// panic in the job, a `timeout` or `abort` around it, an early return.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropPolicy {
    /// The cell is quarantined: it may hold guest state whose cleanup nobody vouched for. It
    /// stays out of service until the host cleans it and returns it with
    /// [`Scheduler::restore_cell`]. The default.
    #[default]
    Quarantine,
    /// The cell goes back to its pool as after [`Assignment::release`]: for cells that hold no
    /// state of their own (a concurrency slot, a connection the job does not touch).
    Release,
}

/// One class of cells.
///
/// # Examples
///
/// ```
/// use fairway::{ClassConfig, DropPolicy};
/// let c = ClassConfig::new(4, 1024).on_drop(DropPolicy::Release);
/// assert_eq!((c.cells, c.queue_capacity, c.on_drop), (4, 1024, DropPolicy::Release));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClassConfig {
    /// Number of cells (`1..=`[`ClassConfig::MAX_CELLS`]).
    pub cells: u32,
    /// Exact bound on queued requests (at most [`ClassConfig::MAX_QUEUE_CAPACITY`]); `0` denies
    /// every request (SPEC F06).
    pub queue_capacity: u32,
    /// What a dropped assignment does to its cell. Default: [`DropPolicy::Quarantine`].
    pub on_drop: DropPolicy,
}

impl ClassConfig {
    /// A class of `cells` cells and at most `queue_capacity` queued requests, quarantining the
    /// cells of dropped assignments.
    #[inline]
    pub const fn new(cells: u32, queue_capacity: u32) -> Self {
        Self {
            cells,
            queue_capacity,
            on_drop: DropPolicy::Quarantine,
        }
    }

    /// Sets what a dropped assignment does to its cell.
    #[inline]
    #[must_use]
    pub const fn on_drop(mut self, policy: DropPolicy) -> Self {
        self.on_drop = policy;
        self
    }
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
///
/// Each method takes the assignment's execution permit and refunds it after the pool has the
/// cell back and before the class counts the cell free (SPEC F44), so a drain that sees every
/// cell back also sees every quota refunded.
pub(crate) trait CellReturn: Send + Sync {
    fn release(&self, class: ClassId, lease: Lease, permit: ExecutionPermit);
    fn quarantine(
        &self,
        class: ClassId,
        lease: Lease,
        reason: &'static str,
        permit: ExecutionPermit,
    );
    /// An assignment was dropped without a disposition: its class's [`DropPolicy`] decides.
    fn dropped(&self, class: ClassId, lease: Lease, permit: ExecutionPermit);
    /// The request's id is no longer live (SPEC F34).
    fn forget_id(&self, slot: Slot);
}

pub(crate) struct Shared<T: Send + 'static, M: Mechanism> {
    /// Process-unique identity, stamped into every [`RequestHandle`] (SPEC F30).
    id: u64,
    /// Ids of the live requests (SPEC F34).
    ids: Arc<IdSet>,
    ledger: Ledger,
    classes: Box<[M::Class<T>]>,
    /// Per class, what a dropped assignment does to its cell.
    on_drop: Box<[DropPolicy]>,
    shut: AtomicBool,
    /// Set by `close` (and `drain`): no new admissions.
    closed: AtomicBool,
    clock: Arc<dyn Clock>,
}

impl<T: Send + 'static, M: Mechanism> CellReturn for Shared<T, M> {
    fn release(&self, class: ClassId, lease: Lease, permit: ExecutionPermit) {
        self.classes[usize::from(class.0)].release_then(lease, || drop(permit));
    }

    fn quarantine(
        &self,
        class: ClassId,
        lease: Lease,
        reason: &'static str,
        permit: ExecutionPermit,
    ) {
        self.classes[usize::from(class.0)].quarantine_then(lease, reason, || drop(permit));
    }

    fn dropped(&self, class: ClassId, lease: Lease, permit: ExecutionPermit) {
        match self.on_drop[usize::from(class.0)] {
            DropPolicy::Release => self.release(class, lease, permit),
            DropPolicy::Quarantine => {
                self.quarantine(class, lease, "dropped-without-disposition", permit)
            }
        }
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
/// let ledger = Ledger::new(LedgerConfig {
///     classes: vec![ClassSpec::new("cpu")],
///     max_tenants: 16,
///     tenant_limits: Limits::UNLIMITED,
/// })?;
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
///
/// `T` is the pull-mode payload type: `()` from [`Scheduler::builder`], another one with
/// [`payload`](Self::payload).
///
/// # Panics
///
/// Never; a bad configuration is an error from [`build`](Self::build).
///
/// # Cancel safety
///
/// Not async: nothing to cancel. Building allocates every structure the scheduler will ever
/// use, once.
///
/// # Examples
///
/// ```
/// use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
/// use fairway::{ClassConfig, DropPolicy, Scheduler};
/// use std::time::Duration;
///
/// let ledger = Ledger::new(LedgerConfig {
///     classes: vec![ClassSpec::new("sandbox"), ClassSpec::new("io")],
///     max_tenants: 64,
///     tenant_limits: Limits::UNLIMITED,
/// })?;
/// let scheduler = Scheduler::builder(ledger)
///     .payload::<Vec<u8>>()
///     .class(8, 4096) // class 0: sandboxes hold guest state; dropped ones are quarantined
///     .class_config(ClassConfig::new(32, 4096).on_drop(DropPolicy::Release)) // class 1
///     .starvation_after(Duration::from_millis(250))
///     .build()?;
/// assert_eq!(scheduler.class_count(), 2);
/// # Ok::<(), fairway::Error>(())
/// ```
pub struct Builder<T = ()> {
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
    /// Starts building a scheduler with pull-mode payload type `T` bound to `ledger` (SPEC
    /// F04); the same as `Scheduler::builder(ledger).payload::<T>()`.
    pub fn new(ledger: Ledger) -> Self {
        Builder {
            ledger,
            classes: Vec::new(),
            starvation_after: Duration::from_secs(1),
            pools: None,
            _payload: PhantomData,
        }
    }

    /// Sets the payload type of pull-mode submissions ([`Scheduler::submit`]).
    #[inline]
    pub fn payload<U: Send + 'static>(self) -> Builder<U> {
        Builder {
            ledger: self.ledger,
            classes: self.classes,
            starvation_after: self.starvation_after,
            pools: self.pools,
            _payload: PhantomData,
        }
    }

    /// Adds the next class (its [`ClassId`] is its position, matching the ledger's classes).
    #[inline]
    pub fn class(mut self, cells: u32, queue_capacity: u32) -> Self {
        self.classes.push(ClassConfig::new(cells, queue_capacity));
        self
    }

    /// Adds the next class with all its settings (the drop policy, ...).
    #[inline]
    pub fn class_config(mut self, class: ClassConfig) -> Self {
        self.classes.push(class);
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
                on_drop: self.classes.iter().map(|c| c.on_drop).collect(),
                shut: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                clock,
            }),
        })
    }
}

impl Scheduler {
    /// Starts building a scheduler bound to `ledger` (SPEC F04), with no pull-mode payload
    /// (`T = ()`); [`Builder::payload`] picks another payload type.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
    /// use fairway::Scheduler;
    ///
    /// let ledger = Ledger::new(LedgerConfig {
    ///     classes: vec![ClassSpec::new("cpu")],
    ///     max_tenants: 4,
    ///     tenant_limits: Limits::UNLIMITED,
    /// })?;
    /// let scheduler = Scheduler::builder(ledger.clone()).class(2, 64).build()?;
    /// let pull = Scheduler::builder(ledger).payload::<String>().class(2, 64).build()?;
    /// # let _ = (scheduler, pull);
    /// # Ok::<(), fairway::Error>(())
    /// ```
    #[inline]
    pub fn builder(ledger: Ledger) -> Builder<()> {
        Builder::new(ledger)
    }
}

impl<T: Send + 'static, M: Mechanism> Scheduler<T, M> {
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
    /// let ledger = Ledger::new(LedgerConfig {
    ///     classes: vec![ClassSpec::new("cpu")],
    ///     max_tenants: 4,
    ///     tenant_limits: Limits::UNLIMITED,
    /// })?;
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
    pub fn enqueue(&self, request: AdmittedRequest) -> Enqueue<'_, T, M> {
        Enqueue::start(Holder::Borrowed(&self.shared), request)
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
    pub fn enqueue_owned(&self, request: AdmittedRequest) -> Enqueue<'static, T, M> {
        Enqueue::start(Holder::Owned(Arc::clone(&self.shared)), request)
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
    /// let ledger = Ledger::new(LedgerConfig {
    ///     classes: vec![ClassSpec::new("cpu")],
    ///     max_tenants: 4,
    ///     tenant_limits: Limits::UNLIMITED,
    /// })?;
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
    /// The future resolves to `Ok(None)` once the scheduler is shut down or drained (or every
    /// cell of the class is quarantined) and nothing is left to deliver in the class.
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
    /// let ledger = Ledger::new(LedgerConfig {
    ///     classes: vec![ClassSpec::new("cpu")],
    ///     max_tenants: 4,
    ///     tenant_limits: Limits::UNLIMITED,
    /// })?;
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
    pub fn next(&self, class: ClassId) -> Next<'_, T, M> {
        Next::new(Holder::Borrowed(self), class)
    }

    /// [`next`](Self::next) with a `'static` future that owns a handle to the scheduler (for
    /// spawning executor tasks).
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next).
    #[inline]
    pub fn next_owned(&self, class: ClassId) -> Next<'static, T, M> {
        Next::new(Holder::Owned(self.clone()), class)
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
    fn accept_pulled(&self, p: crate::engine::Pulled<T>) -> Option<Job<T>> {
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
        let assignment = Assignment::new(
            Arc::clone(&self.shared) as _,
            p.lease,
            p.permit,
            p.waited,
            p.live,
        );
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
    /// let ledger = Ledger::new(LedgerConfig {
    ///     classes: vec![ClassSpec::new("cpu")],
    ///     max_tenants: 4,
    ///     tenant_limits: Limits::UNLIMITED,
    /// })?;
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
    pub fn drain(&self) -> Drain<'_, T, M> {
        self.close();
        Drain::new(self)
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
    /// let ledger = Ledger::new(LedgerConfig {
    ///     classes: vec![ClassSpec::new("cpu")],
    ///     max_tenants: 4,
    ///     tenant_limits: Limits::UNLIMITED,
    /// })?;
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
    fn refuse_ready(&self, engine: &M::Class<T>) {
        while let Some(p) = engine.try_next() {
            if let Some(job) = self.accept_pulled(p) {
                // Only if the scheduler was not shut down after all: keep it the same way.
                engine.keep_undelivered(job.payload);
                job.assignment.release();
            }
        }
    }

    /// Live queued requests of `class` (SPEC F60), from one atomic load (the lock-free engine)
    /// or one short lock (the baselines); never allocates.
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

    /// Returns a quarantined cell of `class` to service once the host has cleaned it
    /// (issuer-owned cleanup, SPEC F44): its pool makes it available again and a waiting
    /// request may be granted it at once. The scheduler never restores a cell by itself, and
    /// never grows a class beyond its configured cells.
    ///
    /// # Errors
    ///
    /// - `invalid-argument / class` for an unknown class;
    /// - `failed-precondition / cell-not-quarantined` for a cell that is not quarantined (free,
    ///   leased, restored already, or not a cell of the class);
    /// - `unavailable / all-cells-quarantined` once every cell of the class had been
    ///   quarantined: that class has failed its requests and stays closed (SPEC F22);
    /// - the pool's own error for a host pool that cannot restore cells (the default of
    ///   [`CellPool::restore`]).
    pub fn restore_cell(&self, class: ClassId, cell: crate::CellId) -> Result<(), Error> {
        self.shared.class(class)?.restore_cell(cell)
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
    /// let ledger = Ledger::new(LedgerConfig {
    ///     classes: vec![ClassSpec::new("cpu")],
    ///     max_tenants: 4,
    ///     tenant_limits: Limits::UNLIMITED,
    /// })?;
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
