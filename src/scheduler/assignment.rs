//! The affine result of a grant (SPEC F40, F43, F44).

use super::CellReturn;
use crate::admission::ExecutionPermit;
use crate::pool::Lease;
use crate::{CellId, ClassId, RequestId, TenantId};
use core::fmt;
use core::time::Duration;
use std::sync::Arc;

/// A cell of a class, held for one request, together with its execution permit.
///
/// Only read accessors are exposed. End it with [`release`](Self::release) (clean finish) or
/// [`quarantine`](Self::quarantine) (uncertain cleanup); both settle the pool first and then
/// refund the quota. Dropping an assignment without either quarantines the cell conservatively.
#[must_use = "dropping an assignment quarantines its cell"]
pub struct Assignment {
    lease: Option<Lease>,
    permit: Option<ExecutionPermit>,
    waited: u64,
    home: Arc<dyn CellReturn>,
}

impl Assignment {
    pub(crate) fn new(
        home: Arc<dyn CellReturn>,
        lease: Lease,
        permit: ExecutionPermit,
        waited: u64,
    ) -> Self {
        Self {
            lease: Some(lease),
            permit: Some(permit),
            waited,
            home,
        }
    }

    fn lease(&self) -> &Lease {
        self.lease
            .as_ref()
            .expect("an assignment holds its lease until it ends")
    }

    fn permit(&self) -> &ExecutionPermit {
        self.permit
            .as_ref()
            .expect("an assignment holds its permit until it ends")
    }

    /// The cell.
    pub fn cell(&self) -> CellId {
        self.lease().cell()
    }

    /// The class.
    pub fn class(&self) -> ClassId {
        self.permit().class()
    }

    /// The tenant.
    pub fn tenant(&self) -> TenantId {
        self.permit().tenant()
    }

    /// The request.
    pub fn request_id(&self) -> RequestId {
        self.permit().id()
    }

    /// Granted CPU units.
    pub fn cpu_units(&self) -> u64 {
        self.permit().cpu_units()
    }

    /// Granted memory units.
    pub fn memory_units(&self) -> u64 {
        self.permit().memory_units()
    }

    /// How long the request waited in the queue (zero if granted at once).
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited)
    }

    /// Clean finish: the cell goes back to its pool, then the quota is refunded.
    pub fn release(mut self) {
        self.end(None);
    }

    /// Uncertain cleanup: the cell is quarantined for good, then the quota is refunded.
    pub fn quarantine(mut self, reason: &'static str) {
        self.end(Some(reason));
    }

    fn end(&mut self, quarantine: Option<&'static str>) {
        if let (Some(lease), Some(permit)) = (self.lease.take(), self.permit.take()) {
            let class = permit.class();
            match quarantine {
                None => self.home.release(class, lease),
                Some(reason) => self.home.quarantine(class, lease, reason),
            }
            drop(permit);
        }
    }
}

impl Drop for Assignment {
    fn drop(&mut self) {
        self.end(Some("dropped-without-disposition"));
    }
}

impl fmt::Debug for Assignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.lease, &self.permit) {
            (Some(_), Some(_)) => f
                .debug_struct("Assignment")
                .field("class", &self.class())
                .field("cell", &self.cell())
                .field("tenant", &self.tenant())
                .field("request", &self.request_id())
                .finish(),
            _ => f.write_str("Assignment(ended)"),
        }
    }
}
