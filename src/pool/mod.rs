//! Cell pools: the fixed cells of a class, handed out as leases (SPEC F03, F07, F08, F16, F17,
//! F22).
//!
//! Each class owns exactly one pool of interchangeable cells (F03). The scheduler asks it for a
//! cell with [`CellPool::try_acquire_now`], which never waits (F16): it returns a [`Lease`],
//! "no capacity now", or an error. When nothing is free, the scheduler subscribes to the pool's
//! changes and probes again — in that order, so a cell released between the failed probe and the
//! subscription is never missed (F17). A cell whose cleanup is uncertain is quarantined and never
//! comes back, so a class's capacity only ever shrinks (F03); when it reaches zero the class fails
//! its requests instead of waiting forever (F22).
//!
//! Hosts may supply their own pools through the [`CellPool`] trait; [`FixedCellPool`] is the
//! built-in lock-free one. Pools are validated when the scheduler is built (F07) and every lease
//! is checked against the request it was asked for before it is handed on (F08).

mod fixed;

#[cfg(all(test, loom))]
#[path = "loom_pool.rs"]
mod loom_pool;
#[cfg(all(test, not(loom)))]
mod tests;

pub use fixed::FixedCellPool;

use crate::error::Reason;
use crate::error::{Code, Error, Result};
use crate::ids::{CellId, ClassId, RequestId};
use core::ops::Deref;
use core::task::Waker;

/// What the scheduler asks a pool for: a cell of `class` for `request`, with a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseRequest {
    /// The request the cell is for.
    pub request: RequestId,
    /// The class whose pool is asked.
    pub class: ClassId,
    /// CPU units granted with the cell.
    pub cpu_units: u64,
    /// Memory units granted with the cell.
    pub memory_units: u64,
}

/// The exclusive use of one cell, for one request, with a budget.
///
/// A lease is affine (not `Clone`): it goes back to its pool exactly once, through
/// [`CellPool::release`] or [`CellPool::quarantine`]. Dropping it instead leaks the cell (the
/// scheduler never does; its `Assignment` quarantines on drop).
#[derive(Debug, PartialEq, Eq, Hash)]
#[must_use = "a lease must go back to its pool (release or quarantine), or the cell is lost"]
pub struct Lease {
    request: RequestId,
    class: ClassId,
    cell: CellId,
    cpu_units: u64,
    memory_units: u64,
}

impl Lease {
    /// The lease of `cell` for `req`: what a pool returns from
    /// [`try_acquire_now`](CellPool::try_acquire_now).
    pub fn new(req: &LeaseRequest, cell: CellId) -> Lease {
        Lease {
            request: req.request,
            class: req.class,
            cell,
            cpu_units: req.cpu_units,
            memory_units: req.memory_units,
        }
    }

    /// The request the cell is leased to.
    #[inline]
    pub fn request(&self) -> RequestId {
        self.request
    }

    /// The class of the cell.
    #[inline]
    pub fn class(&self) -> ClassId {
        self.class
    }

    /// The cell.
    #[inline]
    pub fn cell(&self) -> CellId {
        self.cell
    }

    /// CPU units granted.
    #[inline]
    pub fn cpu_units(&self) -> u64 {
        self.cpu_units
    }

    /// Memory units granted.
    #[inline]
    pub fn memory_units(&self) -> u64 {
        self.memory_units
    }

    /// Whether this lease is exactly what `req` asked for: same request id, class and budget
    /// (F08). The scheduler refuses a mismatched lease with `internal / pool-lease-mismatch`.
    #[inline]
    pub fn matches(&self, req: &LeaseRequest) -> bool {
        self.request == req.request
            && self.class == req.class
            && self.cpu_units == req.cpu_units
            && self.memory_units == req.memory_units
    }
}

/// How the cells of a pool are split, sampled at one moment.
///
/// `available + leased + quarantined == total` always holds within one sample; separate samples
/// (and the scheduler's queue view) are not taken atomically together (F62).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PoolCounters {
    /// Cells in the pool, quarantined ones included.
    pub total: u32,
    /// Cells free to lease now.
    pub available: u32,
    /// Cells leased out.
    pub leased: u32,
    /// Cells out of service for good.
    pub quarantined: u32,
}

/// A fixed set of interchangeable cells of one class (F03, F07).
///
/// # Contract
///
/// - [`try_acquire_now`](Self::try_acquire_now) never parks or waits for a cell (F16).
/// - A quarantined cell becomes available again only through [`restore`](Self::restore), which
///   the host calls after cleaning it (issuer-owned cleanup, F44); the scheduler never restores
///   a cell by itself, and a pool never grows beyond its [`capacity`](Self::capacity) (F03).
/// - [`subscribe_changes`](Self::subscribe_changes) wakes the registered waker after a later
///   [`release`](Self::release) or [`quarantine`](Self::quarantine). Notifications are
///   coalescing hints, not accounting (F17).
/// - At build the pool has [`capacity`](Self::capacity) cells, all available (F07).
pub trait CellPool: Send + Sync + 'static {
    /// The class this pool serves.
    fn class(&self) -> ClassId;

    /// The number of cells, quarantined ones included.
    fn capacity(&self) -> u32;

    /// Non-queueing acquisition: a lease, `Ok(None)` if no cell is free now, or an error. Never
    /// parks (F16).
    ///
    /// # Errors
    ///
    /// Pool-specific. [`FixedCellPool`] fails `unavailable / all-cells-quarantined` when every
    /// cell is quarantined.
    fn try_acquire_now(&self, req: &LeaseRequest) -> Result<Option<Lease>>;

    /// Returns a cell after a clean finish; it becomes available again.
    fn release(&self, lease: Lease);

    /// Takes a cell out of service for good (uncertain cleanup): it is never leased again (F03).
    fn quarantine(&self, lease: Lease, reason: &'static str);

    /// Coalescing change subscription (F17): registers `waker` to be woken on the next change
    /// (release or quarantine). Callers register **before** probing with
    /// [`try_acquire_now`](Self::try_acquire_now).
    ///
    /// # Errors
    ///
    /// A pool that cannot notify keeps this default, which fails
    /// `invalid-argument / pool-topology`; such a pool is refused at build (F07).
    fn subscribe_changes(&self, waker: &Waker) -> Result<()> {
        let _ = waker;
        Err(Error::new(Code::InvalidArgument, Reason::PoolTopology))
    }

    /// The current split of the cells.
    fn counters(&self) -> PoolCounters;

    /// Returns a quarantined `cell`, cleaned by the host, to service: it becomes available
    /// again, and a change subscriber is woken as after a release (F44). The scheduler calls
    /// this from [`Scheduler::restore_cell`](crate::Scheduler::restore_cell), which also gives
    /// the class its cell credit back; hosts do not call it directly on a pool the scheduler
    /// uses.
    ///
    /// # Errors
    ///
    /// `invalid-argument / cell-not-quarantined` if `cell` is not a quarantined cell of this
    /// pool. A pool that cannot restore cells keeps this default, which fails
    /// `invalid-argument / restore-unsupported`.
    fn restore(&self, cell: CellId) -> Result<()> {
        let _ = cell;
        Err(Error::new(
            Code::InvalidArgument,
            Reason::RestoreUnsupported,
        ))
    }
}

/// A class's pool as the engines hold it: the built-in [`FixedCellPool`] by value, so that its
/// hot methods inline into the engine's fast path (through `dyn CellPool` every acquire and
/// release was an indirect call moving a 40-byte `Result<Option<Lease>>` through memory), and a
/// host's pool through its vtable.
pub(crate) enum ClassPool {
    /// The built-in pool.
    Fixed(FixedCellPool),
    /// A pool supplied by the host (F07), and the cells the scheduler quarantined in it (the
    /// trait does not say which; the scheduler sees every quarantine and restore).
    Host(std::sync::Arc<dyn CellPool>, QuarantineSet),
}

/// One bit per cell: quarantined by the scheduler and not restored since (a host pool's
/// [`ClassPool`] keeps it for the observer; written on the rare quarantine and restore paths).
pub(crate) struct QuarantineSet {
    bits: Box<[crate::sync::AtomicU64]>,
}

impl QuarantineSet {
    pub(crate) fn new(cells: u32) -> Self {
        Self {
            bits: (0..cells.div_ceil(64))
                .map(|_| crate::sync::AtomicU64::new(0))
                .collect(),
        }
    }

    fn at(&self, cell: CellId) -> Option<(&crate::sync::AtomicU64, u64)> {
        let w = self.bits.get((cell.0 / 64) as usize)?;
        Some((w, 1 << (cell.0 % 64)))
    }

    fn set(&self, cell: CellId, on: bool) {
        if let Some((w, m)) = self.at(cell) {
            // Relaxed: an observation; the pool's own calls order the cell's use.
            if on {
                w.fetch_or(m, crate::sync::Ordering::Relaxed);
            } else {
                w.fetch_and(!m, crate::sync::Ordering::Relaxed);
            }
        }
    }

    fn contains(&self, cell: CellId) -> bool {
        // Relaxed: an observation.
        self.at(cell)
            .is_some_and(|(w, m)| w.load(crate::sync::Ordering::Relaxed) & m != 0)
    }
}

impl ClassPool {
    /// A cell for `req`, checked (F08): `Ok(Ok(lease))`; `Ok(Err(lease))` for a lease that does
    /// not match `req` (host pools only; the caller quarantines it); `Err` for no cell
    /// (`internal / pool-capacity-mismatch`: the engines ask only when they hold a cell credit)
    /// or the pool's own error. The built-in pool's leases are built here from `req`, so they
    /// match by construction, and it rescans until it finds the cell the credit stands for
    /// ([`FixedCellPool::acquire_credited`]); a host's pool is asked once.
    // Always inlined: the engine's fast path pays for the call otherwise (34 instructions per
    // fast-path grant, callgrind).
    #[inline(always)]
    pub(crate) fn acquire_checked(
        &self,
        req: &LeaseRequest,
    ) -> Result<core::result::Result<Lease, Lease>> {
        let capacity = || Error::new(Code::Internal, Reason::PoolCapacityMismatch);
        match self {
            ClassPool::Fixed(p) => Ok(Ok(Lease::new(req, p.acquire_credited(req.request)?))),
            ClassPool::Host(p, _) => match p.try_acquire_now(req)? {
                Some(lease) if lease.matches(req) => Ok(Ok(lease)),
                Some(lease) => Ok(Err(lease)),
                None => Err(capacity()),
            },
        }
    }

    #[inline]
    pub(crate) fn release(&self, lease: Lease) {
        match self {
            ClassPool::Fixed(p) => p.release(lease),
            ClassPool::Host(p, _) => p.release(lease),
        }
    }

    pub(crate) fn quarantine(&self, lease: Lease, reason: &'static str) {
        match self {
            ClassPool::Fixed(p) => p.quarantine(lease, reason),
            ClassPool::Host(p, q) => {
                q.set(lease.cell(), true);
                p.quarantine(lease, reason);
            }
        }
    }

    pub(crate) fn restore(&self, cell: CellId) -> Result<()> {
        match self {
            ClassPool::Fixed(p) => p.restore(cell),
            ClassPool::Host(p, q) => {
                if cell.0 >= p.capacity() {
                    return Err(Error::new(Code::InvalidArgument, Reason::CellRange));
                }
                if !q.contains(cell) {
                    return Err(Error::new(
                        Code::InvalidArgument,
                        Reason::CellNotQuarantined,
                    ));
                }
                p.restore(cell)?;
                q.set(cell, false);
                Ok(())
            }
        }
    }

    pub(crate) fn counters(&self) -> PoolCounters {
        match self {
            ClassPool::Fixed(p) => p.counters(),
            ClassPool::Host(p, _) => p.counters(),
        }
    }

    /// The class's cell count.
    pub(crate) fn capacity(&self) -> u32 {
        match self {
            ClassPool::Fixed(p) => p.capacity(),
            ClassPool::Host(p, _) => p.capacity(),
        }
    }

    /// Whether `cell` is quarantined (SPEC F22's observer); allocation-free.
    pub(crate) fn is_quarantined(&self, cell: CellId) -> bool {
        match self {
            ClassPool::Fixed(p) => p.is_quarantined(cell),
            ClassPool::Host(_, q) => q.contains(cell),
        }
    }
}

/// Checks the pools a host supplied against the configuration (F07): exactly one pool per
/// configured class (order-independent, no extra pools), each with the configured capacity, all
/// cells available and none leased or quarantined, and change notification supported (checked by
/// subscribing a no-op waker).
///
/// # Errors
///
/// `invalid-argument / pool-topology` on any mismatch.
#[allow(dead_code, reason = "called by the scheduler builder")]
pub(crate) fn validate_pools<P>(expected: &[(ClassId, u32)], pools: &[P]) -> Result<()>
where
    P: Deref<Target = dyn CellPool>,
{
    let topology = Error::new(Code::InvalidArgument, Reason::PoolTopology);
    if pools.len() != expected.len() {
        return Err(topology);
    }
    for (i, &(class, cells)) in expected.iter().enumerate() {
        if expected[..i].iter().any(|&(c, _)| c == class) {
            return Err(topology);
        }
        let mut matching = pools.iter().filter(|p| p.class() == class);
        let (Some(pool), None) = (matching.next(), matching.next()) else {
            return Err(topology);
        };
        let pristine = PoolCounters {
            total: cells,
            available: cells,
            leased: 0,
            quarantined: 0,
        };
        if pool.capacity() != cells || pool.counters() != pristine {
            return Err(topology);
        }
        pool.subscribe_changes(Waker::noop())
            .map_err(|_| topology)?;
    }
    Ok(())
}
