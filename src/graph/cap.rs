//! A concurrency cap shared by a batch's job bodies (SPEC D41).

use super::segments::{Geometry, LazyArray};
use super::*;
use crate::sync::UnsafeCell;

/// A per-batch concurrency cap shared by a batch's jobs (SPEC D41): a permit is taken right
/// before a body runs and given back when it returns or unwinds.
#[derive(Debug, Clone)]
pub struct ConcurrencyCap {
    pub(super) inner: Arc<(Mutex<u32>, Condvar)>,
    pub(super) capacity: u32,
}

impl ConcurrencyCap {
    /// A cap of `capacity` bodies at once.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration (capacity)` for 0.
    pub fn new(capacity: u32) -> Result<Self, Error> {
        if capacity == 0 {
            return Err(Error::configuration("capacity"));
        }
        Ok(Self {
            inner: Arc::new((Mutex::new(capacity), Condvar::new())),
            capacity,
        })
    }

    /// The capacity.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Permits free now.
    pub fn available(&self) -> u32 {
        *self.inner.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a permit, runs `body`, gives the permit back on return and on unwind.
    pub fn run<R>(&self, body: impl FnOnce() -> R) -> R {
        let _permit = self.acquire();
        body()
    }

    fn acquire(&self) -> CapPermit<'_> {
        let (lock, cond) = &*self.inner;
        let mut free = lock.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = cond.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        CapPermit { cap: self }
    }
}

struct CapPermit<'a> {
    pub(super) cap: &'a ConcurrencyCap,
}

impl Drop for CapPermit<'_> {
    fn drop(&mut self) {
        let (lock, cond) = &*self.cap.inner;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        cond.notify_one();
    }
}

/// Per node slot: the cap of the capped batch whose job holds the slot, tagged with the job's
/// node (generation included), so an entry left by an earlier job of the slot is told apart
/// and simply overwritten by the next capped batch. No lock: each slot is written only by the
/// submitter of a capped batch while its job holds the slot and is not yet sealed, and read
/// only by the executor that started that slot's current job; see [`CapSlots::set`].
pub(super) struct CapSlots(LazyArray<UnsafeCell<CapEntry>>);

/// A slot's entry: the job's node and its batch's cap.
type CapEntry = Option<(NodeRef, ConcurrencyCap)>;

// SAFETY: the cells are accessed under the protocol of `set` and `get`: for one slot, every
// write happens before the reads of the job it names and after the reads of earlier jobs.
unsafe impl Sync for CapSlots {}
// SAFETY: as above; nothing is tied to a thread.
unsafe impl Send for CapSlots {}

impl CapSlots {
    /// Backed as node slots are (SPEC D51).
    pub(super) fn new(geo: Geometry, reserve: u32) -> Self {
        Self(LazyArray::new(geo, || UnsafeCell::new(None), reserve))
    }

    /// Records `cap` for the job on `node`.
    ///
    /// # Safety
    ///
    /// `node` is a job of an atomic batch that is admitted and not yet sealed: nobody else
    /// touches its slot's cell. Earlier jobs of the slot were collected, which happens after
    /// their executors' reads (completion, then the free list's Release/Acquire); the seal and
    /// the hand-off to the scheduler order this write before the read of the executor that
    /// starts the job.
    pub(super) unsafe fn set(&self, node: NodeRef, cap: &ConcurrencyCap) {
        // The table's segments are read under a pin (SPEC D51), whatever the engine: the
        // lock-free graph's public call holds one; the mutex graph's does not.
        let _pin = crate::sync::epoch::ensure_pinned();
        if let Some(cell) = self.0.get_or_grow(node.idx) {
            // SAFETY: see the function's contract.
            cell.with_mut(|p| unsafe { *p = Some((node, cap.clone())) });
        }
    }

    /// The cap recorded for the job on `node`, if any.
    ///
    /// # Safety
    ///
    /// The caller has just started `node` (its `start` succeeded): no write to its slot can
    /// happen until the job is collected.
    pub(super) unsafe fn get(&self, node: NodeRef) -> Option<ConcurrencyCap> {
        let _pin = crate::sync::epoch::ensure_pinned();
        // SAFETY: see the function's contract.
        self.0.get(node.idx)?.with(|p| match unsafe { &*p } {
            Some((n, cap)) if *n == node => Some(cap.clone()),
            _ => None,
        })
    }
}
