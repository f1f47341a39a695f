//! The engine: one class's grants, driven through per-tenant turns popped from an atomic ring
//! of tenant ids, with no class-wide lock or token on the grant path (docs/ring-engine.md).
//!
//! * `turns`: the turn protocol, the words that decide which thread may grant for which
//!   tenant;
//! * `tenant`: the per-tenant records (inbox, order heap and FIFO, DRR deficit) that the
//!   holder of a tenant's turn owns; their order is the policy's (`policy::order`);
//! * `grant`: the grant path that drives both over a class's entry slots;
//! * `class`: the [`ClassEngine`] around them (slots, hand-back, sweep, pull mode, lifecycle);
//! * `waiters`: the waker slots of waiting executors and drainers.
//!
//! The [`ClassEngine`] trait is also what the oracle's mutex twins implement (`crate::oracle`),
//! so the facade drives either; a single-threaded sequence of operations produces the same
//! outcomes and grant order on both.

mod class;
pub(crate) mod grant;
mod lease_ages;
pub(crate) mod rooms;
pub(crate) mod tenant;
pub(crate) mod turns;
pub(crate) mod waiters;

pub(crate) use class::RingClass;
pub(crate) use lease_ages::LeaseAges;

#[cfg(all(test, loom))]
mod loom_drain;
#[cfg(all(test, loom))]
mod loom_engine;
#[cfg(all(test, not(loom)))]
mod test_rng;

use crate::admission::{ExecutionPermit, Ledger, Permit};
use crate::cancel::CancellationToken;
use crate::clock::Clock;
use crate::error::Error;
use crate::error::Reason;
use crate::ids::{CellId, ClassId, RequestId};
use crate::policy::{Policy, PolicyConfig};
use crate::pool::{ClassPool, Lease, LeaseRequest};
use crate::raw::idset::{IdSet, Slot};
use crate::stats::{ClassSnapshot, ClassStats, Samples};
use core::task::{Context, Poll};
use std::sync::Arc;

/// Everything an engine needs to build one class.
pub struct ClassSetup {
    pub class: ClassId,
    /// The scheduler's ledger: queued entries refund their queue slot to it when they leave the
    /// queue (SPEC F45).
    pub ledger: Ledger,
    /// The scheduler's live request ids (SPEC F34): a pull-mode request the engine ends gives
    /// its id up here.
    pub(crate) ids: Arc<IdSet>,
    pub cells: u32,
    pub queue_capacity: u32,
    pub max_tenants: u32,
    pub starvation_after: u64,
    pub(crate) pool: ClassPool,
    pub clock: Arc<dyn Clock>,
}

impl ClassSetup {
    /// Validates the sizes both engines pack into their counters and builds the class's policy.
    /// Returns it with the number of entry slots: live queued entries, granted-but-untaken ones
    /// (at most one per cell) and as many tombstones as live entries before a compaction.
    pub(crate) fn policy(&self) -> Result<(Policy, usize), Error> {
        // Before anything is allocated (SPEC F01). The limits fit the engine's packed words
        // (asserted where each is defined) and the oracle's arena.
        const _: () = assert!(
            2 * crate::policy::MAX_QUEUE_CAPACITY as usize + crate::policy::MAX_CELLS as usize
                <= crate::oracle::mutex::key::MAX_CAPACITY
        );
        if self.cells == 0 || self.cells > crate::policy::MAX_CELLS {
            return Err(Error::configuration("cells"));
        }
        if self.queue_capacity > crate::policy::MAX_QUEUE_CAPACITY {
            return Err(Error::configuration("queue_capacity"));
        }
        let slots = (2 * self.queue_capacity as usize + self.cells as usize).max(1);
        let policy = Policy::new(PolicyConfig {
            capacity: slots as u32,
            max_tenants: self.max_tenants,
            starvation_after: self.starvation_after,
        })?;
        Ok((policy, slots))
    }
}

/// What the policy needs to know about a request, plus what the grant needs.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    pub id: RequestId,
    pub tenant: u32,
    pub priority: u8,
    /// Absolute deadline in clock nanoseconds; `u64::MAX` = none.
    pub deadline: u64,
    pub weight: u32,
    pub cpu_units: u64,
    pub memory_units: u64,
    /// The request id's place among the scheduler's live ids (SPEC F34); the engine gives it up
    /// when it ends a pull-mode request itself.
    pub(crate) live: Option<Slot>,
}

impl Ticket {
    /// The contents of an unused slot.
    pub const BLANK: Ticket = Ticket {
        id: RequestId(0),
        tenant: 0,
        priority: 0,
        deadline: u64::MAX,
        weight: 1,
        cpu_units: 0,
        memory_units: 0,
        live: None,
    };

    pub fn from_permit(p: &Permit) -> Self {
        Ticket {
            id: p.id(),
            tenant: p.tenant().0,
            priority: p.priority(),
            deadline: p.deadline().unwrap_or(u64::MAX),
            weight: p.weight(),
            cpu_units: p.cpu_units(),
            memory_units: p.memory_units(),
            live: None,
        }
    }

    pub fn lease_request(&self, class: ClassId) -> LeaseRequest {
        LeaseRequest {
            request: self.id,
            class,
            cpu_units: self.cpu_units,
            memory_units: self.memory_units,
        }
    }
}

/// Result of registering a request.
#[derive(Debug)]
pub enum Enqueued {
    /// Nothing was queued and a cell was free: granted at once.
    Granted(Lease),
    /// Queued under this handle (an arena key).
    Queued(u64),
}

/// Why a queued request ended without a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Cancelled,
    Expired,
    Shutdown,
    Quarantined,
    /// A host pool broke its contract.
    Failed(Error),
}

/// What a future-mode poll observed.
#[derive(Debug)]
pub enum Polled {
    Pending,
    /// The lease and how long the request waited (ns).
    Granted(Lease, u64),
    Ended(Ended),
}

/// A pull-mode request handed to an executor.
pub struct Pulled<T> {
    pub payload: T,
    /// The queue slot went back at grant (SPEC F45).
    pub permit: ExecutionPermit,
    /// The request id's place among the live ids, for the assignment to give up.
    pub(crate) live: Option<Slot>,
    pub lease: Lease,
    pub waited: u64,
    /// The first reason, if the request's token was cancelled (checked again at acceptance,
    /// SPEC F46).
    pub cancelled: Option<&'static str>,
}

impl<T> Pulled<T> {
    /// A granted pull-mode entry, from the parts the executor that popped it took out of its
    /// slot: the slot of a granted entry holds both its content and its lease.
    pub(crate) fn from_parts(
        content: Option<(ExecutionPermit, T)>,
        lease: Option<Lease>,
        waited: u64,
        cancelled: Option<&'static str>,
        live: Option<Slot>,
    ) -> Self {
        let ((permit, payload), lease) = content
            .zip(lease)
            .expect("granted pull entry holds content and lease");
        Pulled {
            payload,
            permit,
            live,
            lease,
            waited,
            cancelled,
        }
    }
}

/// One class's mechanism. All methods are callable from any thread.
// The trait is reachable only through the hidden `Mechanism::Class`; its accessors name
// crate-private types on purpose.
#[allow(private_interfaces)]
pub trait ClassEngine<T: Send + 'static>: Send + Sync + Sized + 'static {
    fn new(setup: ClassSetup) -> Result<Self, Error>;

    /// Registers a request. Future mode passes `pull = None` and keeps the permit itself; pull
    /// mode passes the permit and payload, which the engine owns until an executor takes them
    /// (or gives them back on refusal), and the request's token, which the engine checks before
    /// selection (SPEC F32, F46). A refusal is counted in the snapshot (SPEC F60).
    #[allow(clippy::type_complexity)]
    fn enqueue(
        &self,
        ticket: Ticket,
        pull: Option<(Permit, T)>,
        token: Option<&CancellationToken>,
    ) -> Result<Enqueued, (Error, Option<(Permit, T)>)>;

    /// Grants now if nothing is queued and a cell is free, else `Ok(None)`; never queues.
    fn try_grant_now(&self, ticket: &Ticket) -> Result<Option<Lease>, Error>;

    /// Polls a future-mode handle. `Granted`/`Ended` consume the handle.
    fn poll(&self, key: u64, cx: &mut Context<'_>) -> Polled;

    /// The owner of a future-mode handle gives it up (dropped future, observed cancellation or
    /// deadline). Returns the lease if it had been granted but not taken; the caller must
    /// release it. Consumes the handle.
    fn withdraw(&self, key: u64, why: Ended) -> Option<Lease> {
        self.withdraw_refunding(key, why, &mut None)
    }

    /// `withdraw`, refunding `permit` (the owner's) if the request was still queued, before the
    /// class counts it out, so a drain that sees the queue empty sees the quota refunded. When a
    /// granted lease comes back instead, `permit` is left for the caller to refund after
    /// releasing the lease (SPEC F42).
    fn withdraw_refunding(
        &self,
        key: u64,
        why: Ended,
        permit: &mut Option<ExecutionPermit>,
    ) -> Option<Lease>;

    /// Cancels a queued request by handle (SPEC F33): `not-found` unless it is still queued.
    fn cancel(&self, key: u64) -> Result<(), Error>;

    /// Changes a queued request in place (SPEC F36): a new priority, and/or a new deadline
    /// (`Some(None)`: back to the permit's own), never later than the permit's own deadline.
    /// `not-found / too-late` if the request left the queue first (granted or ended, its slot
    /// freed or not).
    fn change(
        &self,
        key: u64,
        priority: Option<u8>,
        deadline: Option<Option<u64>>,
    ) -> Result<(), Error>;

    /// Returns a cell: the pool first, then the class's free count (SPEC F44).
    fn release(&self, lease: Lease) {
        self.release_then(lease, || {});
    }

    /// `release`, running `then` (the quota refund) after the pool has the cell and before the
    /// class counts it free, so a drain that sees every cell back also sees every quota refunded.
    fn release_then(&self, lease: Lease, then: impl FnOnce());

    /// Quarantines a cell until the host restores it (SPEC F03, F22, F44).
    fn quarantine(&self, lease: Lease, reason: &'static str) {
        self.quarantine_then(lease, reason, || {});
    }

    /// `quarantine`, running `then` (the quota refund) after the pool has the cell, as
    /// `release_then`.
    fn quarantine_then(&self, lease: Lease, reason: &'static str, then: impl FnOnce());

    /// Pull mode: the next granted request, if any, without waiting.
    fn try_next(&self) -> Option<Pulled<T>>;

    /// Pull mode: like `try_next`, registering `cx` to be woken when one may be ready.
    /// `Ready(None)` once the class is shut down (or dead) and nothing is left.
    fn poll_next(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<Option<Pulled<T>>>;

    /// Gives up an executor waiter slot taken by `poll_next`.
    fn forget_waiter(&self, slot: usize);

    /// Counts a request refused before it reached the engine (cancelled, expired or shut down at
    /// enqueue): an expiration if `expired`, else a rejection.
    fn count_refused(&self, expired: bool);

    /// Counts a granted request refused at acceptance (expired, cancelled, or the scheduler shut
    /// down). It was counted as a grant already.
    fn count_refused_after_grant(&self);

    /// Stops admissions and fails every queued request (SPEC F47).
    fn shutdown(&self);

    /// Stops admissions (`unavailable / shutdown`) but keeps granting what is queued: the
    /// first half of a graceful drain (SPEC F47).
    fn close(&self);

    /// `Ready` once admissions have stopped (`close`, `shutdown`, or every cell quarantined)
    /// and the class is empty: nothing queued, no granted request untaken, every usable cell
    /// back in the pool. Otherwise registers `cx` in a waiter slot (shared with `poll_next`; give
    /// it up with `forget_waiter`).
    fn poll_drained(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<()>;

    /// Live queued requests; allocation-free.
    fn queue_depth(&self) -> u32;

    /// Cells free now; allocation-free.
    fn available_cells(&self) -> u32;

    /// Returns a quarantined cell the host has cleaned to service: the pool first, then the
    /// class's free count, as a release (SPEC F44). Refused for a class that has died.
    fn restore_cell(&self, cell: CellId) -> Result<(), Error>;

    /// The class's pool (for observers: which cells are quarantined).
    fn pool(&self) -> &crate::pool::ClassPool;

    /// The bin of payloads that shutdown ended before delivery.
    fn undelivered(&self) -> &Undelivered<T>;

    /// The class's counters.
    fn stats(&self) -> &ClassStats;

    /// Samples for a snapshot: the pool's split, the queue depth, the tenants in rotation and
    /// the oldest lease's age.
    fn samples(&self) -> Samples;

    /// Keeps the payload of a pull-mode job refused at acceptance because of shutdown.
    fn keep_undelivered(&self, payload: T) {
        self.undelivered().keep(payload);
    }

    /// Moves the kept payloads of undelivered pull-mode jobs into `out`.
    fn take_undelivered(&self, out: &mut Vec<T>) {
        self.undelivered().take_into(out);
    }

    /// Counters and pool view (SPEC F60).
    fn snapshot(&self) -> ClassSnapshot {
        self.stats().snapshot(self.samples())
    }

    /// `snapshot` into `out`, reusing its histogram's storage.
    fn snapshot_into(&self, out: &mut ClassSnapshot) {
        self.stats().snapshot_into(self.samples(), out);
    }

    /// The class's clock.
    fn clock(&self) -> &Arc<dyn Clock>;

    /// Producers waiting for room in the queue (SPEC F23), told of every departure.
    fn rooms(&self) -> &rooms::RoomWaiters;

    /// Orders a producer that has just registered in [`rooms`](Self::rooms) against the
    /// departures: an RMW on the queue count, or the engine's lock (see the `rooms` module
    /// docs). The producer then submits once more.
    fn order_room_waiter(&self);
}

/// Payloads of pull-mode requests that shutdown ended before delivery, kept until the host takes
/// them (SPEC F47). Its storage is reserved at build for every entry slot (each holds at most one
/// payload), so keeping one never allocates. The lock is taken only on that end-of-life path,
/// never by a grant, a release or a pass that ends nothing.
pub(crate) struct Undelivered<T>(std::sync::Mutex<Vec<T>>);

impl<T> Undelivered<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self(std::sync::Mutex::new(Vec::with_capacity(capacity)))
    }

    pub(crate) fn keep(&self, payload: T) {
        // A panic while holding this lock cannot leave the vector inconsistent.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(payload);
    }

    pub(crate) fn take_into(&self, out: &mut Vec<T>) {
        out.append(
            &mut self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
    }
}

/// Whether an enqueue error is the class refusing the request (counted as a rejection in the
/// snapshot), rather than a collaborator failing.
pub(crate) fn is_refusal(e: &Error) -> bool {
    matches!(
        e.reason(),
        Reason::QueueFull | Reason::Shutdown | Reason::AllCellsQuarantined
    )
}

/// Maps how a queued request ended to the error its owner sees.
pub fn ended_error(why: Ended, cancel_reason: Option<&'static str>) -> Error {
    use crate::error::Code;
    match why {
        Ended::Cancelled => Error::new(
            Code::Cancelled,
            Reason::Host(cancel_reason.unwrap_or("cancelled")),
        ),
        Ended::Expired => Error::new(Code::DeadlineExceeded, Reason::DeadlineExceeded),
        Ended::Shutdown => Error::new(Code::Unavailable, Reason::Shutdown),
        Ended::Quarantined => Error::new(Code::Unavailable, Reason::AllCellsQuarantined),
        Ended::Failed(e) => e,
    }
}
