//! Permits: the affine owners of a reservation (SPEC F05, F45, F51).
//!
//! | stage            | type               | holds                                            |
//! |------------------|--------------------|--------------------------------------------------|
//! | admitted, queued | [`Permit`]         | queue slot, concurrency, CPU units, memory units |
//! | granted          | [`ExecutionPermit`]| concurrency, CPU units, memory units             |
//! | ended            | (dropped)          | nothing                                          |
//!
//! Each stage gives back what the next one does not hold, exactly once: `Permit::drop` returns
//! the queue slot and then drops its `ExecutionPermit`, which returns the rest;
//! `Permit::into_execution` returns the queue slot and hands the `ExecutionPermit` on without
//! dropping it.

use super::{Ledger, CONCURRENCY, CPU_UNITS, KINDS, MEMORY_UNITS, QUEUE_SLOTS};
use crate::ids::{ClassId, Priority, RequestId, TenantId};
use core::mem::ManuallyDrop;

/// The right to queue one request, with its quota reserved (F04, F05, F51).
///
/// Minted only by [`Ledger::admit`]. It carries the request's immutable policy, which the
/// scheduler reads instead of taking a second copy (F05). It is not `Clone`: dropping it (at
/// whatever stage the request ends) refunds every unit it reserved, exactly once.
///
/// # Examples
///
/// ```
/// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
/// use fairway::{ClassId, RequestId, TenantId};
/// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
/// let permit = ledger.admit(AdmissionRequest::new(RequestId(9), TenantId(0)).cpu_units(3))?;
/// assert_eq!((permit.class(), permit.cpu_units()), (ClassId(0), 3));
/// assert_eq!(ledger.usage().tenants[0].cpu_units, 3);
/// drop(permit);
/// assert!(ledger.usage().is_zero());
/// # Ok::<(), fairway::Error>(())
/// ```
#[derive(Debug)]
pub struct Permit {
    /// Everything but the queue slot, which `Permit` itself owns (returned by its `Drop`).
    exec: ExecutionPermit,
}

/// What a granted request keeps until it ends: its concurrency, CPU and memory reservations
/// (F45). The queue slot was returned at grant.
///
/// Obtained from a [`Permit`] at grant; dropping it refunds what it holds, exactly once.
#[derive(Debug)]
pub struct ExecutionPermit {
    pub(super) ledger: Ledger,
    pub(super) id: RequestId,
    pub(super) tenant: TenantId,
    pub(super) class: ClassId,
    pub(super) priority: Priority,
    pub(super) weight: u32,
    pub(super) deadline: Option<u64>,
    pub(super) cpu_units: u64,
    pub(super) memory_units: u64,
}

impl ExecutionPermit {
    /// The amounts reserved, by resource index.
    #[inline]
    fn amounts(&self) -> [u64; KINDS] {
        let mut a = [0; KINDS];
        a[QUEUE_SLOTS] = 1;
        a[CONCURRENCY] = 1;
        a[CPU_UNITS] = self.cpu_units;
        a[MEMORY_UNITS] = self.memory_units;
        a
    }

    /// Gives back the queue slot (held by the enclosing [`Permit`], never by this type).
    #[inline]
    fn refund_queue_slot(&self) {
        self.ledger.refund(
            self.tenant,
            self.class,
            &self.amounts(),
            QUEUE_SLOTS..QUEUE_SLOTS + 1,
        );
    }
}

impl Drop for ExecutionPermit {
    fn drop(&mut self) {
        self.ledger
            .refund(self.tenant, self.class, &self.amounts(), CONCURRENCY..KINDS);
    }
}

/// Read accessors shared by both stages (each type provides `inner()`).
macro_rules! accessors {
    ($ty:ty) => {
        impl $ty {
            /// The request's id.
            #[inline]
            pub fn id(&self) -> RequestId {
                self.inner().id
            }

            /// The request's tenant.
            #[inline]
            pub fn tenant(&self) -> TenantId {
                self.inner().tenant
            }

            /// The class admission chose.
            #[inline]
            pub fn class(&self) -> ClassId {
                self.inner().class
            }

            /// Priority inside the tenant.
            #[inline]
            pub fn priority(&self) -> Priority {
                self.inner().priority
            }

            /// Grants per round-robin turn (at least 1).
            #[inline]
            pub fn weight(&self) -> u32 {
                self.inner().weight
            }

            /// The original absolute deadline, in nanoseconds on the ledger's clock, stamped at
            /// admission and never refreshed.
            #[inline]
            pub fn deadline(&self) -> Option<u64> {
                self.inner().deadline
            }

            /// CPU units reserved.
            #[inline]
            pub fn cpu_units(&self) -> u64 {
                self.inner().cpu_units
            }

            /// Memory units reserved.
            #[inline]
            pub fn memory_units(&self) -> u64 {
                self.inner().memory_units
            }

            /// The [`Ledger::id`] of the ledger that minted this.
            #[inline]
            pub fn ledger_id(&self) -> u64 {
                self.inner().ledger.id()
            }

            /// Whether `ledger` minted this (F04). Exact: see the identity section of the
            /// module docs.
            #[inline]
            #[allow(
                dead_code,
                reason = "called by the scheduler facade when it binds a permit"
            )]
            pub(crate) fn is_from(&self, ledger: &Ledger) -> bool {
                self.inner().ledger.same(ledger)
            }
        }
    };
}

accessors!(Permit);
accessors!(ExecutionPermit);

impl ExecutionPermit {
    /// The fields the accessors read (itself; see `Permit::inner`).
    #[inline(always)]
    fn inner(&self) -> &ExecutionPermit {
        self
    }
}

impl Permit {
    /// The fields the accessors read.
    #[inline(always)]
    fn inner(&self) -> &ExecutionPermit {
        &self.exec
    }

    #[inline]
    pub(super) fn new(exec: ExecutionPermit) -> Self {
        Self { exec }
    }

    /// The grant transition (F45): returns the queue slot now and hands on the concurrency, CPU
    /// and memory reservations, which the returned permit refunds when dropped.
    #[allow(dead_code, reason = "called by the scheduler facade at grant")]
    #[inline]
    pub(crate) fn into_execution(self) -> ExecutionPermit {
        self.exec.refund_queue_slot();
        self.detach_queue_slot()
    }

    /// Hands the queue slot's refund to someone else — the scheduler entry that now queues the
    /// request and refunds the slot when the request leaves the queue (at grant, SPEC F45, or
    /// when it ends queued) — and keeps the rest as an [`ExecutionPermit`].
    pub(crate) fn detach_queue_slot(self) -> ExecutionPermit {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped (it is in `ManuallyDrop`), so `exec` is moved out of it
        // exactly once and `Permit::drop` does not run: the queue slot is not refunded twice and
        // the execution reservation is owned by the returned value alone.
        unsafe { core::ptr::read(&this.exec) }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.exec.refund_queue_slot();
        // `self.exec` is dropped next, refunding the rest.
    }
}
