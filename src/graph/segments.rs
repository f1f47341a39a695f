//! Arrays that back only the segments in use (SPEC D51), addressed like one fixed array.
//!
//! Slot `i` of an array whose first segment has `B` slots (a power of two) lies in segment
//! `k = log2((i + B) / B)`, which holds the slots `B·(2^k − 1) .. B·(2^(k+1) − 1)` (the last
//! segment stops at the maximum): one leading-zero count, and a directory of at most 32 segment
//! pointers, allocated with the array. Each slot may have `per` elements (a node's dependency
//! identities). A segment is published with a Release store of its pointer and read with an
//! Acquire load; a retired one's pointer is cleared and its memory handed to the epoch
//! collector, so a reader must be pinned (one pin per public call of the graph, see
//! `lockfree::store`) while it holds a reference.

use crate::sync::{epoch, AtomicPtr, Ordering};

/// The most segments an array can have: enough for 2^32 slots at any first-segment size.
pub(crate) const MAX_SEGMENTS: usize = 32;

/// Where a slot number lies: the segments' shapes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// `log2` of the first segment's size.
    shift: u32,
    max: u32,
}

impl Geometry {
    /// Segments for at most `max` slots, the first of `first` (rounded up to a power of two,
    /// at most `max` rounded up).
    pub(crate) fn new(max: u32, first: u32) -> Self {
        let first = first.clamp(1, max.max(1)).next_power_of_two();
        Self {
            shift: first.trailing_zeros(),
            max,
        }
    }

    /// The segment of slot `i` and its offset there.
    #[inline(always)]
    pub(crate) fn locate(self, i: u32) -> (usize, usize) {
        let j = u64::from(i) + (1u64 << self.shift);
        let k = 63 - j.leading_zeros() - self.shift;
        (k as usize, (j - (1u64 << (self.shift + k))) as usize)
    }

    /// The first slot of segment `k` and its length (0 past the maximum).
    pub(crate) fn span(self, k: usize) -> (u32, u32) {
        let b = 1u64 << self.shift;
        let start = b * ((1u64 << k) - 1);
        let len = (b << k).min(u64::from(self.max).saturating_sub(start));
        (start.min(u64::from(u32::MAX)) as u32, len as u32)
    }

    /// The slots' maximum.
    pub(crate) fn max(self) -> u32 {
        self.max
    }
}

/// A segmented array of `T`, `per` elements per slot.
///
/// A directory entry holds its segment's address biased by the segment's first slot (the
/// address element 0 of the whole array would have if it were one allocation), so slot `i`
/// is at `entry + i * per` whatever its segment: a read costs the segment's number (one
/// leading-zero count), one load and one null test. The last segment is allocated whole (to
/// `B·2^k` slots) so that no slot number needs a bound check; the slots past the maximum are
/// never handed out.
pub(crate) struct SegArray<T> {
    geo: Geometry,
    per: usize,
    /// Slots in the first segment, which is backed from `new` on and never retired.
    first_len: u32,
    /// The first segment (also in `segs[0]`), read without an atomic load: it is written once,
    /// before the array is shared, and never retired, so the compiler may keep it in a
    /// register across a call's slot reads.
    first: *mut T,
    /// Per segment: its biased address, or null while unbacked.
    segs: [AtomicPtr<T>; MAX_SEGMENTS],
}

// SAFETY: the elements are shared as `&T` only (`T: Sync`), and freed by the epoch collector or
// by `drop` (`&mut`).
unsafe impl<T: Send + Sync> Sync for SegArray<T> {}
// SAFETY: as above; nothing is tied to a thread.
unsafe impl<T: Send + Sync> Send for SegArray<T> {}

/// A retired segment on its way to the collector: its first element and length.
struct Retired<T>(*mut T, usize);

// SAFETY: the segment is unreachable once retired; whoever runs the deferred free owns it.
unsafe impl<T: Send> Send for Retired<T> {}

impl<T> Retired<T> {
    /// Frees the segment.
    ///
    /// # Safety
    ///
    /// The segment was allocated by [`SegArray::add`] with `self.1` elements and nobody can
    /// reach it any more.
    unsafe fn free(self) {
        // SAFETY: see the function's contract.
        drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(self.0, self.1)) });
    }
}

impl<T> SegArray<T> {
    /// An array of `geo`'s shape with its first segment backed, made by `init(slot,
    /// element)`. The first segment is never retired: a slot number below its length is read
    /// without a null test.
    pub(crate) fn new(geo: Geometry, per: usize, init: impl FnMut(u32, usize) -> T) -> Self {
        let mut a = Self {
            geo,
            per,
            first_len: 1 << geo.shift,
            first: core::ptr::null_mut(),
            segs: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
        };
        a.add(0, init);
        // Relaxed: `&mut`, not shared yet (sharing the array publishes it).
        a.first = a.segs[0].load(Ordering::Relaxed);
        a
    }

    /// Elements per slot.
    pub(crate) fn per(&self) -> usize {
        self.per
    }

    /// The array's shape.
    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Elements allocated for segment `k` (the last one whole, see the type's docs).
    fn alloc_len(&self, k: usize) -> usize {
        (1usize << (self.geo.shift as usize + k)) * self.per
    }

    /// The element offset of segment `k`'s first slot in the whole array.
    fn bias(&self, k: usize) -> usize {
        self.geo.span(k).0 as usize * self.per
    }

    /// The biased address of slot `i`'s segment, or null.
    #[inline(always)]
    fn entry(&self, i: u32) -> *mut T {
        debug_assert!(
            cfg!(loom) || epoch::is_pinned(),
            "a segment read outside an epoch pin"
        );
        // `i + B` fits: the maxima are at most 2^30 slots.
        let k = ((i + (1 << self.geo.shift)).ilog2() - self.geo.shift) as usize;
        // Acquire: pairs with the Release store in `add`, so the segment's initialised
        // elements are seen.
        self.segs[k % MAX_SEGMENTS].load(Ordering::Acquire)
    }

    /// The element of slot `i` (`per` is 1) if it lies in the first segment: a compare and an
    /// address, no atomic load (the segment is never retired).
    #[inline(always)]
    pub(crate) fn in_first(&self, i: u32) -> Option<&T> {
        debug_assert_eq!(self.per, 1);
        // Not needed for this segment, but a caller that reads one unpinned would read the
        // others so too.
        debug_assert!(
            cfg!(loom) || epoch::is_pinned(),
            "a segment read outside an epoch pin"
        );
        if i < self.first_len {
            // SAFETY: the first segment is backed by `new`, published to this thread by
            // whatever shared the array, and never retired (`retire` refuses it); `i` is inside
            // it.
            Some(unsafe { &*self.first.add(i as usize) })
        } else {
            None
        }
    }

    /// The `per` elements of slot `i`, if its segment is backed.
    #[inline(always)]
    pub(crate) fn run(&self, i: u32) -> Option<&[T]> {
        debug_assert!(
            cfg!(loom) || epoch::is_pinned(),
            "a segment read outside an epoch pin"
        );
        if i < self.first_len {
            // SAFETY: as in `in_first`; the slot's `per` elements lie inside the first segment.
            return Some(unsafe {
                core::slice::from_raw_parts(self.first.add(i as usize * self.per), self.per)
            });
        }
        self.run_past_first(i)
    }

    /// [`run`](Self::run) of a slot past the first segment.
    #[inline(always)]
    fn run_past_first(&self, i: u32) -> Option<&[T]> {
        let p = self.entry(i);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null entry is its segment's address biased by the segment's first
        // slot, and the segment holds every slot number that maps to it (the last one too,
        // allocated whole), so the run lies inside its allocation of initialised elements;
        // the segment is freed only by the epoch collector after `retire` cleared the entry
        // and every thread pinned then (the caller is pinned) unpinned, or by `drop`.
        Some(unsafe {
            core::slice::from_raw_parts(p.wrapping_add(i as usize * self.per), self.per)
        })
    }

    /// Element of slot `i` (`per` is 1), if its segment is backed.
    #[inline(always)]
    pub(crate) fn get(&self, i: u32) -> Option<&T> {
        if let Some(t) = self.in_first(i) {
            return Some(t);
        }
        self.get_past_first(i)
    }

    /// [`get`](Self::get) of a slot past the first segment.
    #[inline(always)]
    pub(crate) fn get_past_first(&self, i: u32) -> Option<&T> {
        let p = self.entry(i);
        if p.is_null() {
            return None;
        }
        // SAFETY: as in `run`.
        Some(unsafe { &*p.wrapping_add(i as usize) })
    }

    /// Whether segment `k` is backed. The caller holds whatever lock serialises `add` and
    /// `retire`.
    pub(crate) fn is_backed(&self, k: usize) -> bool {
        // Relaxed: the directory changes only under the caller's lock.
        !self.segs[k].load(Ordering::Relaxed).is_null()
    }

    /// Backs segment `k` with elements made by `init(slot, element)`. Under the caller's lock
    /// that serialises `add` and `retire`; `k` is unbacked.
    pub(crate) fn add(&self, k: usize, mut init: impl FnMut(u32, usize) -> T) {
        debug_assert!(!self.is_backed(k));
        let (start, _) = self.geo.span(k);
        loop {
            let elems: Box<[T]> = (0..self.alloc_len(k))
                .map(|e| init(start + (e / self.per) as u32, e % self.per))
                .collect();
            let p = Box::into_raw(elems) as *mut T;
            let biased = p.wrapping_sub(self.bias(k));
            if biased.is_null() {
                // The one address whose bias reads as "unbacked": allocate elsewhere.
                // SAFETY: just allocated with this length, never shared.
                unsafe { Retired(p, self.alloc_len(k)).free() };
                continue;
            }
            // Release: publishes the initialised elements to every reader's Acquire load.
            self.segs[k].store(biased, Ordering::Release);
            return;
        }
    }

    /// Unbacks segment `k` and hands its memory to the epoch collector: it is freed once every
    /// thread pinned now has unpinned. Under the caller's lock; `k` is backed and no slot of it
    /// is in use.
    pub(crate) fn retire(&self, k: usize, guard: &epoch::Guard)
    where
        T: Send + 'static,
    {
        assert!(k > 0, "the first segment is never retired");
        // Relaxed: the directory changes only under the caller's lock; a reader that loads the
        // old entry is pinned, and the collector waits for it.
        let biased = self.segs[k].swap(core::ptr::null_mut(), Ordering::Relaxed);
        debug_assert!(!biased.is_null());
        let retired = Retired(biased.wrapping_add(self.bias(k)), self.alloc_len(k));
        // SAFETY: the entry is cleared, so no reader pinned from now on finds the segment;
        // the collector runs the closure once every thread pinned before has unpinned, and
        // nothing else frees it (`drop` sees the null entry).
        unsafe {
            guard.defer_unchecked(move || retired.free());
        }
    }
}

impl<T> Drop for SegArray<T> {
    fn drop(&mut self) {
        for k in 0..MAX_SEGMENTS {
            // Relaxed: `&mut self`, no other thread holds the array.
            let biased = self.segs[k].load(Ordering::Relaxed);
            if !biased.is_null() {
                // SAFETY: allocated by `add` with `alloc_len(k)` elements at this bias and not
                // retired (a retired entry is null); nobody else can reach it.
                unsafe { Retired(biased.wrapping_add(self.bias(k)), self.alloc_len(k)).free() };
            }
        }
    }
}

/// A per-node side table that backs a segment the first time a slot of it is written (SPEC
/// D51): the scheduler requests and batch caps of the graph's jobs. It grows with the node
/// store's high-water mark and is given back when the graph is dropped; it is not shrunk (a
/// writer could be filling a slot of a segment a shrink retires, and these tables are small
/// beside the node store: see `docs/deviations.md`).
pub(crate) struct LazyArray<T> {
    arr: SegArray<T>,
    init: fn() -> T,
    grow: crate::sync::Mutex<()>,
}

impl<T> LazyArray<T> {
    /// A table of at most `max` slots in segments of `geo`'s shape, each slot made by `init`;
    /// the first segment backed.
    /// The segments that hold the first `reserve` slots are backed too.
    pub(crate) fn new(geo: Geometry, init: fn() -> T, reserve: u32) -> Self {
        let arr = SegArray::new(geo, 1, |_, _| init());
        for k in 1..MAX_SEGMENTS {
            let (start, len) = geo.span(k);
            if start >= reserve || len == 0 {
                break;
            }
            arr.add(k, |_, _| init());
        }
        Self {
            arr,
            init,
            grow: crate::sync::Mutex::new(()),
        }
    }

    /// Slot `i`, if its segment is backed.
    #[inline(always)]
    pub(crate) fn get(&self, i: u32) -> Option<&T> {
        self.arr.get(i)
    }

    /// Slot `i`, backing its segment first if needed (under the table's lock: a new
    /// high-water mark). `None` past the maximum.
    #[inline]
    pub(crate) fn get_or_grow(&self, i: u32) -> Option<&T> {
        if let Some(s) = self.arr.get(i) {
            return Some(s);
        }
        self.grow_to(i)
    }

    #[cold]
    #[inline(never)]
    fn grow_to(&self, i: u32) -> Option<&T> {
        if i >= self.arr.geometry().max() {
            return None;
        }
        let _g = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        let (k, _) = self.arr.geometry().locate(i);
        if !self.arr.is_backed(k) {
            let init = self.init;
            self.arr.add(k, |_, _| init());
        }
        self.arr.get(i)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn d51_segments_cover_every_slot_once() {
        let g = Geometry::new(1000, 4);
        for i in 0..1000u32 {
            let (k, off) = g.locate(i);
            let (start, len) = g.span(k);
            assert_eq!(start + off as u32, i, "slot {i}");
            assert!((off as u32) < len, "slot {i}");
        }
        assert_eq!(
            g.span(7),
            (508, 492),
            "the last segment stops at the maximum"
        );
        assert_eq!(g.span(8).1, 0);
        // At the largest maxima: 2^30 slots from segments of 256.
        let g = Geometry::new(1 << 30, 256);
        let (k, off) = g.locate((1 << 30) - 1);
        assert!(k < MAX_SEGMENTS);
        assert_eq!(g.span(k).0 + off as u32, (1 << 30) - 1);
    }

    #[test]
    fn d51_an_unbacked_or_retired_segment_reads_as_absent() {
        let guard = epoch::pin();
        let a = SegArray::<u64>::new(Geometry::new(100, 8), 2, |slot, e| {
            u64::from(slot) * 10 + e as u64
        });
        assert_eq!(a.run(3).unwrap(), &[30, 31]);
        assert!(a.run(8).is_none(), "segment 1 is not backed");
        a.add(1, |slot, e| u64::from(slot) * 10 + e as u64);
        assert_eq!(a.run(23).unwrap(), &[230, 231]);
        a.retire(1, &guard);
        assert!(a.run(23).is_none());
    }
}
