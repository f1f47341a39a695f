//! The admission ledger: quota reservations and the permits that own them (SPEC F04, F05, F45,
//! F50–F52).
//!
//! Before a request may queue, the host asks the [`Ledger`] for a [`Permit`]. Admission reserves,
//! for the request's tenant **and** for the class it is placed in, one queue slot, one unit of
//! concurrency and the request's CPU and memory units, each against a configured limit. The permit
//! is the only record of that reservation: it is affine (not `Clone`), carries the immutable
//! policy of the request (class, tenant, priority, weight, original deadline, budget — F05) and
//! gives every unit back exactly once, when it is dropped (F51). At grant the scheduler turns it
//! into an [`ExecutionPermit`], which returns only the queue slot and keeps the rest until the
//! work ends (F45).
//!
//! # Mechanism
//!
//! Each holder's counters are packed into one `AtomicU64` (`Layout`): queue slots and
//! concurrency always (their limits are `u32`), CPU and memory units too when their limits leave
//! room, each in a field as wide as its limit. An admission reserves with one compare-and-swap
//! loop per holder that checks every packed field against its limit and never moves one past it;
//! a refund is one `fetch_sub` per holder. A resource whose limit does not fit keeps a counter of
//! its own (reserved after the word, skipped for a zero amount). No lock, no allocation: an
//! admission is two successful RMWs (tenant and class) when everything is packed or the request
//! reserves no CPU or memory units, at most six otherwise, plus one reference-count increment for
//! the permit's link to its ledger; a refund is the same number of `fetch_sub`s.
//!
//! All counter operations are `Relaxed`. The counters publish no other memory: each is a number
//! that must never exceed its limit, and atomicity of the RMWs on that one location (its
//! modification order) is all that guarantees. Anyone who reads the counters and needs them to
//! reflect earlier drops (the conservation tests) gets that ordering from elsewhere, e.g. a
//! thread join.
//!
//! # Transient overcount
//!
//! A request is admitted only if *all* its counters fit. The tenant's and then the class's are
//! reserved one after the other (and, within one holder, the packed word before the counters kept
//! apart) and rolled back if a later one is refused, so a concurrent admission may observe a counter briefly
//! raised by a request that is about to roll back, and be refused because of it. Nothing is ever
//! over-reserved (no counter exceeds its limit at any moment) and nothing stays reserved by a
//! refused request; the only effect is that, under contention at the very edge of a limit, a
//! request can be refused although a serial order in which it fits exists.
//!
//! # Identity (F04)
//!
//! A ledger is identified by the address of its shared state. Every permit keeps that state alive
//! (it holds a reference to its ledger), so while a permit exists no other ledger can occupy the
//! same address: comparing a live permit with a live ledger is exact, even for two ledgers built
//! from the same configuration. [`Ledger::id`] exposes that address as a number, which is unique
//! among ledgers alive at the same time (a new ledger may reuse the id of one already dropped,
//! together with all its permits). This needs no global counter, so it is modelled by loom as is.

mod config;
mod counters;
pub use config::{ClassSpec, LedgerConfig, Limits};
use counters::{Counters, Layout};
mod permit;

#[cfg(all(test, loom))]
#[path = "loom_ledger.rs"]
mod loom_ledger;
#[cfg(all(test, not(loom)))]
mod tests;

pub use permit::{ExecutionPermit, Permit};

use crate::clock::{Clock, MonotonicClock};
use crate::error::Reason;
use crate::error::{Code, Error, Result};
use crate::ids::{ClassId, Priority, RequestId, TenantId};
use crate::sync::{Arc, AtomicU64, Ordering};
use arrayvec::ArrayVec;
use core::fmt;
use core::time::Duration;
use crossbeam_utils::CachePadded;

/// Index of the queue-slot counter in a [`Counters`] group.
const QUEUE_SLOTS: usize = 0;
/// Index of the concurrency counter.
const CONCURRENCY: usize = 1;
/// Index of the CPU-units counter.
const CPU_UNITS: usize = 2;
/// Index of the memory-units counter.
const MEMORY_UNITS: usize = 3;
/// Number of reserved resources per holder.
const KINDS: usize = 4;

/// `resource-exhausted` reasons for a tenant limit, by resource index.
const TENANT_REASONS: [Reason; KINDS] = [
    Reason::TenantQueueSlots,
    Reason::TenantConcurrency,
    Reason::TenantCpuUnits,
    Reason::TenantMemoryUnits,
];

/// `resource-exhausted` reasons for a class limit, by resource index.
const CLASS_REASONS: [Reason; KINDS] = [
    Reason::ClassQueueSlots,
    Reason::ClassConcurrency,
    Reason::ClassCpuUnits,
    Reason::ClassMemoryUnits,
];

/// The most classes a request may list in [`ClassChoice::OneOf`].
pub const MAX_CLASS_CHOICES: usize = 8;

/// Which classes a request accepts (F52).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassChoice {
    /// Any class that is not [`ClassSpec::explicit_only`], smallest (first in config order) with
    /// capacity first.
    Any,
    /// Exactly these classes (explicit-only ones included), tried in config order — smallest
    /// [`ClassId`] first, whatever the order of the list; duplicates are ignored.
    OneOf(ArrayVec<ClassId, MAX_CLASS_CHOICES>),
}

impl ClassChoice {
    /// Exactly one class.
    #[inline]
    pub fn only(class: ClassId) -> Self {
        let mut v = ArrayVec::new();
        v.push(class);
        ClassChoice::OneOf(v)
    }

    /// The classes in `classes`.
    ///
    /// # Errors
    ///
    /// `invalid-argument / class` if `classes` is empty or longer than [`MAX_CLASS_CHOICES`].
    #[inline]
    pub fn one_of(classes: &[ClassId]) -> Result<Self> {
        let v = ArrayVec::try_from(classes)
            .map_err(|_| Error::new(Code::InvalidArgument, Reason::Class))?;
        if v.is_empty() {
            return Err(Error::new(Code::InvalidArgument, Reason::Class));
        }
        Ok(ClassChoice::OneOf(v))
    }
}

/// A request for admission: who asks, for which classes, with which policy and budget.
///
/// # Examples
///
/// ```
/// use fairway::admission::AdmissionRequest;
/// use fairway::{ClassId, RequestId, TenantId};
/// use std::time::Duration;
/// let req = AdmissionRequest::new(RequestId(7), TenantId(0))
///     .class(ClassId(1))
///     .priority(3)
///     .deadline(Duration::from_millis(50))
///     .cpu_units(2);
/// assert_eq!(req.weight, 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionRequest {
    /// The request's id.
    pub id: RequestId,
    /// Its tenant (below [`LedgerConfig::max_tenants`]).
    pub tenant: TenantId,
    /// The classes it accepts.
    pub classes: ClassChoice,
    /// Priority inside its tenant (higher first).
    pub priority: Priority,
    /// Grants per round-robin turn of its tenant; at least 1.
    pub weight: u32,
    /// A relative timeout: the ledger stamps the absolute deadline `clock.now() + deadline` once,
    /// at admission, and the permit keeps that original deadline for the request's whole life.
    pub deadline: Option<Duration>,
    /// CPU units reserved for the request's execution.
    pub cpu_units: u64,
    /// Memory units reserved for the request's execution.
    pub memory_units: u64,
}

impl AdmissionRequest {
    /// A request in any class, priority 0, weight 1, no deadline and no CPU or memory units.
    pub fn new(id: RequestId, tenant: TenantId) -> Self {
        Self {
            id,
            tenant,
            classes: ClassChoice::Any,
            priority: 0,
            weight: 1,
            deadline: None,
            cpu_units: 0,
            memory_units: 0,
        }
    }

    /// Only `class`.
    #[inline]
    pub fn class(mut self, class: ClassId) -> Self {
        self.classes = ClassChoice::only(class);
        self
    }

    /// The given class choice.
    #[inline]
    pub fn classes(mut self, classes: ClassChoice) -> Self {
        self.classes = classes;
        self
    }

    /// The priority.
    #[inline]
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The weight (checked at admission: at least 1).
    #[inline]
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// A relative timeout, stamped into an absolute deadline at admission.
    #[inline]
    pub fn deadline(mut self, timeout: Duration) -> Self {
        self.deadline = Some(timeout);
        self
    }

    /// CPU units to reserve.
    #[inline]
    pub fn cpu_units(mut self, units: u64) -> Self {
        self.cpu_units = units;
        self
    }

    /// Memory units to reserve.
    #[inline]
    pub fn memory_units(mut self, units: u64) -> Self {
        self.memory_units = units;
        self
    }
}

/// Units held right now by one tenant or one class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Usage {
    /// Queue slots held.
    pub queue_slots: u64,
    /// Concurrency held.
    pub concurrency: u64,
    /// CPU units held.
    pub cpu_units: u64,
    /// Memory units held.
    pub memory_units: u64,
}

impl Usage {
    /// Whether nothing is held.
    #[inline]
    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }

    /// Whether every counter is within `limits`.
    #[inline]
    pub fn within(&self, limits: &Limits) -> bool {
        let l = limits.as_array();
        self.as_array().iter().zip(l).all(|(u, l)| *u <= l)
    }

    fn as_array(&self) -> [u64; KINDS] {
        [
            self.queue_slots,
            self.concurrency,
            self.cpu_units,
            self.memory_units,
        ]
    }
}

/// The counters of a ledger, per class and per tenant, sampled one by one (each value is exact at
/// the moment it was read; the set is a consistent state only at quiescence).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LedgerUsage {
    /// Indexed by [`ClassId`].
    pub classes: Vec<Usage>,
    /// Indexed by [`TenantId`].
    pub tenants: Vec<Usage>,
}

impl LedgerUsage {
    /// Whether nothing at all is held (every permit has been refunded).
    #[inline]
    pub fn is_zero(&self) -> bool {
        self.classes.iter().chain(&self.tenants).all(Usage::is_zero)
    }
}

/// One class: its configuration and its counters.
#[derive(Debug)]
struct Class {
    name: &'static str,
    explicit_only: bool,
    layout: Layout,
    counters: CachePadded<Counters>,
}

/// The shared state of a ledger. Its address is the ledger's identity (see the module docs).
struct Inner {
    /// Indexed by [`ClassId`]; at most `u16::MAX + 1` entries.
    classes: Box<[Class]>,
    /// Indexed by [`TenantId`]; `max_tenants` entries.
    tenants: Box<[Counters]>,
    tenant_layout: Layout,
    /// Whether some class may be chosen by [`ClassChoice::Any`].
    any_eligible: bool,
    clock: std::sync::Arc<dyn Clock>,
}

/// The admission ledger: hands out [`Permit`]s against per-tenant and per-class limits.
///
/// Cloning a `Ledger` gives another handle to the same ledger (same counters, same identity).
///
/// # Examples
///
/// ```
/// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
/// use fairway::{Code, Reason, RequestId, TenantId};
/// let ledger = Ledger::new(
///     LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)
///         .tenant_limits(Limits::UNLIMITED.concurrency(1)),
/// )?;
/// let permit = ledger.admit(AdmissionRequest::new(RequestId(1), TenantId(0)))?;
/// let refused = ledger.admit(AdmissionRequest::new(RequestId(2), TenantId(0))).unwrap_err();
/// assert_eq!((refused.code(), refused.reason()), (Code::ResourceExhausted, Reason::TenantConcurrency));
/// drop(permit); // refunds everything
/// assert!(ledger.usage().is_zero());
/// # Ok::<(), fairway::Error>(())
/// ```
///
/// # Capacity
///
/// See [`LedgerConfig`]: all memory is allocated by the constructor; [`Ledger::admit`] and the
/// drop of a permit never allocate.
#[derive(Clone)]
pub struct Ledger(Arc<Inner>);

impl Ledger {
    /// A ledger on a [`MonotonicClock`].
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` naming the field: `classes` (empty, or more than
    /// 65,536), `classes.name` (duplicate), `max_tenants` (0, or above
    /// [`LedgerConfig::MAX_TENANTS`]). Every check comes before any allocation.
    #[inline]
    pub fn new(config: LedgerConfig) -> Result<Ledger> {
        Self::with_clock(config, std::sync::Arc::new(MonotonicClock::new()))
    }

    /// A ledger that stamps deadlines with `clock`.
    ///
    /// # Errors
    ///
    /// As [`Ledger::new`].
    pub fn with_clock(config: LedgerConfig, clock: std::sync::Arc<dyn Clock>) -> Result<Ledger> {
        let LedgerConfig {
            classes,
            max_tenants,
            tenant_limits,
        } = config;
        if classes.is_empty() || classes.len() > usize::from(u16::MAX) + 1 {
            return Err(Error::configuration("classes"));
        }
        let mut names: Vec<&str> = classes.iter().map(|c| c.name).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::configuration("classes.name"));
        }
        if max_tenants == 0 || max_tenants > LedgerConfig::MAX_TENANTS {
            return Err(Error::configuration("max_tenants"));
        }
        let any_eligible = classes.iter().any(|c| !c.explicit_only);
        let classes = classes
            .into_iter()
            .map(|c| Class {
                name: c.name,
                explicit_only: c.explicit_only,
                layout: Layout::new(c.limits.as_array()),
                counters: CachePadded::new(Counters::new()),
            })
            .collect();
        let tenants = (0..max_tenants).map(|_| Counters::new()).collect();
        Ok(Ledger(Arc::new(Inner {
            classes,
            tenants,
            tenant_layout: Layout::new(tenant_limits.as_array()),
            any_eligible,
            clock,
        })))
    }

    /// Admits `req`: reserves its tenant's and one chosen class's units and returns the permit
    /// that owns them.
    ///
    /// The class is chosen per F52: the candidates ([`ClassChoice`]) are tried in config order
    /// and the first whose limits fit wins. The tenant's limits are checked first (they do not
    /// depend on the class). If the deadline is set, the clock is read once and the absolute
    /// deadline stamped into the permit.
    ///
    /// # Errors
    ///
    /// - `invalid-argument / weight` if `req.weight` is 0; `invalid-argument / tenant` if the
    ///   tenant is not below `max_tenants`; `invalid-argument / class` if a listed class does not
    ///   exist, the list is empty, or no class is eligible for [`ClassChoice::Any`].
    /// - `resource-exhausted / tenant-queue-slots`, `tenant-concurrency`, `tenant-cpu-units` or
    ///   `tenant-memory-units` if a tenant limit is refused (the first refused, in that order).
    /// - `resource-exhausted / class-queue-slots`, `class-concurrency`, `class-cpu-units` or
    ///   `class-memory-units` if every candidate class refused: the error is the one of the
    ///   **first** candidate tried (the smallest class), which is the caller's preferred class.
    ///
    /// On any error nothing stays reserved (F50).
    pub fn admit(&self, req: AdmissionRequest) -> Result<Permit> {
        let AdmissionRequest {
            id,
            tenant,
            mut classes,
            priority,
            weight,
            deadline,
            cpu_units,
            memory_units,
        } = req;
        let inner = &*self.0;
        if weight == 0 {
            return Err(Error::new(Code::InvalidArgument, Reason::Weight));
        }
        let tenant_counters = inner
            .tenants
            .get(tenant.0 as usize)
            .ok_or(Error::new(Code::InvalidArgument, Reason::Tenant))?;
        match &mut classes {
            ClassChoice::Any if !inner.any_eligible => {
                return Err(Error::new(Code::InvalidArgument, Reason::Class));
            }
            ClassChoice::Any => {}
            ClassChoice::OneOf(list) => {
                if list.is_empty() || list.iter().any(|c| usize::from(c.0) >= inner.classes.len()) {
                    return Err(Error::new(Code::InvalidArgument, Reason::Class));
                }
                // Config order is ClassId order; at most 8 elements, in place (a one-class list,
                // the common case, skips the sort's setup).
                if list.len() > 1 {
                    list.sort_unstable();
                }
            }
        }

        let amounts = [1, 1, cpu_units, memory_units];
        tenant_counters
            .reserve(&amounts, &inner.tenant_layout)
            .map_err(|kind| Error::new(Code::ResourceExhausted, TENANT_REASONS[kind]))?;

        // One named class (the common request): reserve it directly, without the candidate
        // loop.
        if let ClassChoice::OneOf(list) = &classes {
            if let [only] = list.as_slice() {
                let index = usize::from(only.0);
                let class = &inner.classes[index];
                if let Err(kind) = class.counters.reserve(&amounts, &class.layout) {
                    tenant_counters.refund(&amounts, 0..KINDS, &inner.tenant_layout);
                    return Err(Error::new(Code::ResourceExhausted, CLASS_REASONS[kind]));
                }
                return Ok(self.permit(id, tenant, index, priority, weight, deadline, amounts));
            }
        }

        let mut first_refusal = None;
        let mut try_class = |index: usize| -> bool {
            let class = &inner.classes[index];
            match class.counters.reserve(&amounts, &class.layout) {
                Ok(()) => true,
                Err(kind) => {
                    first_refusal.get_or_insert(kind);
                    false
                }
            }
        };
        let chosen = match &classes {
            ClassChoice::Any => (0..inner.classes.len())
                .filter(|&i| !inner.classes[i].explicit_only)
                .find(|&i| try_class(i)),
            ClassChoice::OneOf(list) => {
                let mut previous = None;
                list.iter()
                    .map(|c| usize::from(c.0))
                    .filter(|&i| previous.replace(i) != Some(i))
                    .find(|&i| try_class(i))
            }
        };
        let Some(class) = chosen else {
            tenant_counters.refund(&amounts, 0..KINDS, &inner.tenant_layout);
            let kind = first_refusal.unwrap_or(QUEUE_SLOTS);
            return Err(Error::new(Code::ResourceExhausted, CLASS_REASONS[kind]));
        };

        Ok(self.permit(id, tenant, class, priority, weight, deadline, amounts))
    }

    /// The permit of an admission whose units are reserved: stamps the deadline.
    #[inline(always)]
    #[allow(
        clippy::too_many_arguments,
        reason = "the fields of one permit, in order"
    )]
    fn permit(
        &self,
        id: RequestId,
        tenant: TenantId,
        class: usize,
        priority: Priority,
        weight: u32,
        deadline: Option<Duration>,
        amounts: [u64; KINDS],
    ) -> Permit {
        let deadline = deadline.map(|timeout| {
            let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
            self.0.clock.now().saturating_add(nanos)
        });
        Permit::new(ExecutionPermit {
            ledger: self.clone(),
            id,
            tenant,
            // `class < classes.len() <= u16::MAX + 1`, checked at build.
            class: ClassId(class as u16),
            priority,
            weight,
            deadline,
            cpu_units: amounts[CPU_UNITS],
            memory_units: amounts[MEMORY_UNITS],
        })
    }

    /// Every counter, per class and per tenant (allocates; a diagnostic, not a hot path).
    #[inline]
    pub fn usage(&self) -> LedgerUsage {
        LedgerUsage {
            classes: (self.0.classes.iter())
                .map(|c| c.counters.sample(&c.layout))
                .collect(),
            tenants: (self.0.tenants.iter())
                .map(|t| t.sample(&self.0.tenant_layout))
                .collect(),
        }
    }

    /// This ledger's identity: unique among ledgers alive at the same time (see the module docs).
    #[inline]
    pub fn id(&self) -> u64 {
        Arc::as_ptr(&self.0).addr() as u64
    }

    /// The clock deadlines are stamped with.
    #[inline]
    pub fn clock(&self) -> &std::sync::Arc<dyn Clock> {
        &self.0.clock
    }

    /// Tenants are `TenantId(0..max_tenants())`.
    #[inline]
    pub fn max_tenants(&self) -> u32 {
        self.0.tenants.len() as u32
    }

    /// The number of classes.
    #[inline]
    pub fn class_count(&self) -> usize {
        self.0.classes.len()
    }

    /// The name of `class`, if it exists.
    #[inline]
    pub fn class_name(&self, class: ClassId) -> Option<&'static str> {
        self.0.classes.get(usize::from(class.0)).map(|c| c.name)
    }

    /// The class named `name`, if any.
    #[inline]
    pub fn class_by_name(&self, name: &str) -> Option<ClassId> {
        self.0
            .classes
            .iter()
            .position(|c| c.name == name)
            .map(|i| ClassId(i as u16))
    }

    /// Gives back one queue slot of `tenant` in `class`: the refund of a permit whose queue slot
    /// was detached ([`Permit::detach_queue_slot`]), made by the scheduler entry that held it
    /// when the request leaves the queue.
    #[inline]
    pub(crate) fn refund_queue_slot(&self, tenant: TenantId, class: ClassId) {
        let mut amounts = [0; KINDS];
        amounts[QUEUE_SLOTS] = 1;
        self.refund(tenant, class, &amounts, QUEUE_SLOTS..QUEUE_SLOTS + 1);
    }

    /// Gives back `amounts[kind]`, `kind` in `kinds`, to `tenant` and `class` (used by permits).
    #[inline]
    fn refund(
        &self,
        tenant: TenantId,
        class: ClassId,
        amounts: &[u64; KINDS],
        kinds: core::ops::Range<usize>,
    ) {
        let inner = &*self.0;
        inner.tenants[tenant.0 as usize].refund(amounts, kinds.clone(), &inner.tenant_layout);
        let class = &inner.classes[usize::from(class.0)];
        class.counters.refund(amounts, kinds, &class.layout);
    }

    /// Whether `self` and `other` are the same ledger.
    #[inline]
    #[allow(
        dead_code,
        reason = "used by `Permit::is_from`, called by the scheduler facade"
    )]
    fn same(&self, other: &Ledger) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ledger")
            .field("id", &self.id())
            .field("classes", &self.0.classes.len())
            .field("tenants", &self.0.tenants.len())
            .finish_non_exhaustive()
    }
}
