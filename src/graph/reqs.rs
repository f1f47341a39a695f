//! Per node slot: the scheduler request of the slot's queued job, so that a change of its
//! effective urgency (SPEC D30) can re-order it in place (F36). A seqlock per slot over
//! atomics: written once per job by its hand-off, read by whoever re-orders it.

use super::segments::{Geometry, LazyArray};
use super::NodeRef;
use crate::ids::ClassId;
use crate::scheduler::RequestHandle;
use crate::sync::{fence, AtomicU64, Ordering};

struct Slot {
    /// `gen << 1 | 1` once the request of the job at generation `gen` is written; `gen << 1`
    /// while it is being written.
    seq: AtomicU64,
    key: AtomicU64,
    class: AtomicU64,
}

pub(super) struct ReqSlots {
    /// Backed as node slots are (SPEC D51).
    slots: LazyArray<Slot>,
    /// The scheduler's identity (every handle of a graph names the graph's scheduler).
    scheduler: AtomicU64,
}

impl ReqSlots {
    pub(super) fn new(geo: Geometry, reserve: u32) -> Self {
        Self {
            slots: LazyArray::new(
                geo,
                || Slot {
                    seq: AtomicU64::new(0),
                    key: AtomicU64::new(0),
                    class: AtomicU64::new(0),
                },
                reserve,
            ),
            scheduler: AtomicU64::new(0),
        }
    }

    /// Records the request of the job on `node` (its hand-off, once per job).
    pub(super) fn set(&self, node: NodeRef, h: RequestHandle) {
        // The table's segments are read under a pin (SPEC D51), whatever the engine: the
        // lock-free graph's public call holds one; the mutex graph's does not.
        let _pin = crate::sync::epoch::ensure_pinned();
        let Some(s) = self.slots.get_or_grow(node.idx) else {
            return;
        };
        let g = u64::from(node.gen) << 1;
        let (scheduler, class, key) = h.raw_parts();
        s.seq.store(g, Ordering::Relaxed);
        // Release fence: a reader that sees any of the stores below sees the marker above.
        fence(Ordering::Release);
        self.scheduler.store(scheduler, Ordering::Relaxed);
        s.key.store(key, Ordering::Relaxed);
        s.class.store(u64::from(class.0), Ordering::Relaxed);
        // Release: pairs with the Acquire load in `get`.
        s.seq.store(g | 1, Ordering::Release);
    }

    /// The request of the job on `node`, if its hand-off recorded it.
    pub(super) fn get(&self, node: NodeRef) -> Option<RequestHandle> {
        let _pin = crate::sync::epoch::ensure_pinned();
        let s = self.slots.get(node.idx)?;
        let g = u64::from(node.gen) << 1 | 1;
        // Acquire: pairs with the Release store in `set`.
        if s.seq.load(Ordering::Acquire) != g {
            return None;
        }
        let scheduler = self.scheduler.load(Ordering::Relaxed);
        let key = s.key.load(Ordering::Relaxed);
        let class = ClassId(s.class.load(Ordering::Relaxed) as u16);
        // Acquire fence: pairs with the Release fence in `set`: if a later job's writer
        // touched the words read above, the load below sees its marker.
        fence(Ordering::Acquire);
        (s.seq.load(Ordering::Relaxed) == g)
            .then(|| RequestHandle::from_raw_parts(scheduler, class, key))
    }
}
