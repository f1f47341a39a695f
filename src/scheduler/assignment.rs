//! The affine result of a grant (SPEC F40, F43, F44).

use super::CellReturn;
use crate::admission::ExecutionPermit;
use crate::ids::{CellId, ClassId, RequestId, TenantId};
use crate::pool::{Lease, LeaseRequest};
use crate::raw::idset::Slot;
use core::fmt;
use core::time::Duration;
use std::sync::Arc;

/// A cell of a class, held for one request, together with its execution permit.
///
/// Only read accessors are exposed. End it with [`release`](Self::release) (clean finish) or
/// [`quarantine`](Self::quarantine) (uncertain cleanup); both settle the pool first and then
/// refund the quota.
///
/// # Cancel safety
///
/// An assignment is usually held across `.await`s of the job it runs, and a `timeout`, an
/// `abort` or an early return drops it without either call. What a drop does to the cell is the
/// class's [`DropPolicy`](crate::DropPolicy) ([`ClassConfig::on_drop`](crate::ClassConfig)):
///
/// - [`Quarantine`](crate::DropPolicy::Quarantine) (the default): the cell may hold guest state
///   nobody cleaned, so it leaves service. The host may clean it and give it back with
///   [`Scheduler::restore_cell`](crate::Scheduler::restore_cell); until then the class has one
///   cell fewer, and a class whose every cell is quarantined fails its requests
///   (`unavailable / all-cells-quarantined`).
/// - [`Release`](crate::DropPolicy::Release): the cell goes back to its pool as after
///   [`release`](Self::release); for cells that hold no state.
///
/// Either way the quota is refunded after the cell is settled, exactly once.
///
/// # Panics
///
/// No method panics. A panic in the job that holds the assignment unwinds through its drop,
/// which applies the drop policy above (quarantine by default), so a panicking job never leaks
/// its cell or its quota; with `panic = "abort"` nothing runs and the process ends.
///
/// # Examples
///
/// ```
/// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
/// use fairway::{AdmittedRequest, CancellationToken, ClassConfig, ClassId, DropPolicy};
/// use fairway::{RequestId, Scheduler, TenantId};
///
/// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("stateless")], 4))?;
/// let scheduler = Scheduler::builder(ledger.clone())
///     .class_config(ClassConfig::new(1, 16).on_drop(DropPolicy::Release))
///     .build()?;
/// let id = RequestId(1);
/// let permit = ledger.admit(AdmissionRequest::new(id, TenantId(0)))?;
/// let assignment =
///     scheduler.enqueue_blocking(AdmittedRequest::new(permit, CancellationToken::new(id)))?;
/// drop(assignment); // as a timeout would: the cell goes back (DropPolicy::Release)
/// assert_eq!(scheduler.available_cells(ClassId(0))?, 1);
/// assert!(ledger.usage().is_zero());
/// # Ok::<(), fairway::Error>(())
/// ```
#[must_use = "dropping an assignment applies its class's drop policy (quarantine by default)"]
pub struct Assignment {
    /// The leased cell. The rest of the lease (request, class, budget) is the permit's: a lease
    /// is handed on only if it matches the request exactly (F08), so it is rebuilt from the
    /// permit when the cell goes back, and an assignment carries 4 bytes instead of 32.
    cell: CellId,
    /// `None` once the assignment has ended.
    permit: Option<ExecutionPermit>,
    waited: u64,
    home: Arc<dyn CellReturn>,
    /// The request id's place among the scheduler's live ids (SPEC F34), given up at the end.
    live: Option<Slot>,
}

impl Assignment {
    #[inline]
    pub(crate) fn new(
        home: Arc<dyn CellReturn>,
        lease: Lease,
        permit: ExecutionPermit,
        waited: u64,
        live: Option<Slot>,
    ) -> Self {
        debug_assert!(
            lease.matches(&request_of(&permit)),
            "an assignment is built only from a checked lease (F08)"
        );
        Self {
            cell: lease.cell(),
            permit: Some(permit),
            waited,
            home,
            live,
        }
    }

    fn permit(&self) -> &ExecutionPermit {
        self.permit
            .as_ref()
            .expect("an assignment holds its permit until it ends")
    }

    /// The cell.
    #[inline]
    pub fn cell(&self) -> CellId {
        self.cell
    }

    /// The class.
    #[inline]
    pub fn class(&self) -> ClassId {
        self.permit().class()
    }

    /// The tenant.
    #[inline]
    pub fn tenant(&self) -> TenantId {
        self.permit().tenant()
    }

    /// The request.
    #[inline]
    pub fn request_id(&self) -> RequestId {
        self.permit().id()
    }

    /// Granted CPU units.
    #[inline]
    pub fn cpu_units(&self) -> u64 {
        self.permit().cpu_units()
    }

    /// Granted memory units.
    #[inline]
    pub fn memory_units(&self) -> u64 {
        self.permit().memory_units()
    }

    /// How long the request waited in the queue (zero if granted at once).
    #[inline]
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited)
    }

    /// Clean finish: the cell goes back to its pool, then the quota is refunded.
    #[inline]
    pub fn release(mut self) {
        self.end(End::Release);
    }

    /// Uncertain cleanup: the cell is quarantined, then the quota is refunded. It stays out of
    /// service until the host cleans it and returns it with
    /// [`Scheduler::restore_cell`](crate::Scheduler::restore_cell).
    #[inline]
    pub fn quarantine(mut self, reason: &'static str) {
        self.end(End::Quarantine(reason));
    }

    fn end(&mut self, how: End) {
        if let Some(permit) = self.permit.take() {
            let class = permit.class();
            let lease = Lease::new(&request_of(&permit), self.cell);
            let live = self.live.take();
            // The pool first, then the quota, then the class's free count, then the id (see
            // `CellReturn`).
            match how {
                End::Release => self.home.release(class, lease, permit, live),
                End::Quarantine(reason) => {
                    self.home.quarantine(class, lease, reason, permit, live);
                }
                End::Dropped => self.home.dropped(class, lease, permit, live),
            }
        }
    }
}

/// The lease request `permit` was granted with: what its lease matched (F08).
#[inline]
fn request_of(permit: &ExecutionPermit) -> LeaseRequest {
    LeaseRequest {
        request: permit.id(),
        class: permit.class(),
        cpu_units: permit.cpu_units(),
        memory_units: permit.memory_units(),
    }
}

/// How an assignment ends.
enum End {
    Release,
    Quarantine(&'static str),
    /// Dropped without a disposition: the class's drop policy decides.
    Dropped,
}

impl Drop for Assignment {
    #[inline]
    fn drop(&mut self) {
        // After `release` or `quarantine` there is nothing left to end: the check stays inline.
        if self.permit.is_some() {
            self.end(End::Dropped);
        }
    }
}

impl fmt::Debug for Assignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.permit {
            Some(_) => f
                .debug_struct("Assignment")
                .field("class", &self.class())
                .field("cell", &self.cell())
                .field("tenant", &self.tenant())
                .field("request", &self.request_id())
                .finish(),
            None => f.write_str("Assignment(ended)"),
        }
    }
}
