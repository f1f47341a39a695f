//! Slot stores that back only what is in use (SPEC D51): the node, edge and key-slot arenas.
//!
//! A store is addressed by a dense slot number up to its configured maximum, as a fixed array
//! would be, but holds memory in **segments** of doubling size: segment `k` holds the slots
//! `B·(2^k − 1) .. B·(2^(k+1) − 1)` (`B`, the first segment's size, is a power of two), so a
//! slot number finds its segment with one leading-zero count and the directory of segment
//! pointers, allocated at build, has at most 32 entries. Only the first segment is allocated at
//! build.
//!
//! - **Growth** happens when the free list is empty and the store is below its maximum: under
//!   the store's `grow` lock (a leaf: nothing else is taken while it is held), the lowest
//!   missing segment is allocated, its slots initialised free and linked into a chain, the
//!   segment published (Release, paired with the Acquire load of every lookup) and the chain
//!   pushed onto the free list with one CAS. That is the only allocation, and it happens at a
//!   new high-water mark; a steady state reuses freed slots and allocates nothing.
//! - **Shrinking** (`shrink`, from `Graph::reset` and `Graph::shrink_to_fit`) takes every free
//!   slot off the free list under the `grow` lock, sorts them by segment into intrusive chains,
//!   retires every segment but the first whose slots were all free (its directory entry is
//!   cleared, its memory handed to the epoch collector) and pushes the rest back. A slot taken
//!   meanwhile by a submitter keeps its segment. A submitter that finds the free list empty
//!   while a shrink drains it waits for the `grow` lock and pops again: it is never refused
//!   for lack of room the store has.
//! - **Readers** hold slot numbers they did not allocate: an edge names its dependent, a
//!   handle or an identity names its job, a free-list head names the next slot to pop. Such a
//!   slot may be freed, and its segment retired, while they read it. Every engine entry point
//!   therefore pins the epoch once (one pin per public call, not per slot); the segment stays
//!   allocated until every thread pinned when it was retired has unpinned. A retired segment
//!   reads as absent: `get` answers `None`, which callers treat as a generation mismatch (the
//!   job is gone).
//! - **Generations survive**: a retired segment leaves behind the highest generation among its
//!   free slots, and a segment allocated again in its place starts every slot there, so a stale
//!   handle never names a slot's new job.
//!
//! What a pin costs: `crossbeam_epoch::pin` reads a thread-local, bumps the guard count and,
//! for the outermost pin, stores the local epoch and issues a full fence (a `lock`ed RMW on
//! x86), and every 128th pin tries to advance the global epoch. Measured with callgrind on a
//! submit with four dependencies (P9), the one pin and its drop are about 40 instructions of
//! about 1,980, and the locked RMW is the submit's only one beyond those of the graph itself.
//! Nested pins would add a thread-local lookup and two counter updates each, so code below a
//! public call does not pin again: it loads through `sync::epoch::held`, which debug builds
//! check is under a pin. The design needs the pin because a stale slot number can be
//! dereferenced at any time by a lock-free reader, and only an epoch (or hazard pointers,
//! which would cost one fence per slot read) tells a retirer when the last such reader is
//! gone.
//!
//! A slot of the first segment is read with one compare and an address computation, as in a
//! fixed array: that segment's address is a plain field (it is never retired). A slot past it
//! costs a leading-zero count, the directory load and a null test more, inlined: the graph
//! suite's advance, remove and long raise rows, whose fresh graphs hold most of their jobs past
//! a 64-slot first segment, ran 1.4–1.8× slower with those reads behind calls.

use super::NIL;
use crate::graph::segments::{Geometry, SegArray, MAX_SEGMENTS};
use crate::sync::{epoch, AtomicU32, AtomicU64, Mutex, Ordering};

/// What a store holds: a slot that can be created free at a generation and that names its
/// free-list successor.
pub(super) trait Slot: Sized {
    /// A free slot at generation `gen`, linked to `next`.
    fn fresh(next: u32, gen: u32) -> Self;
    /// The generation a free slot is at (what the next job on it gets).
    fn free_gen(&self) -> u32;
    /// The free-list link.
    fn next(&self) -> &AtomicU32;
    /// The slot an unbacked slot number reads as: inert, at a generation no holder of a slot
    /// number of a retired segment can have (see [`Store::at`]).
    fn gone() -> Self;
}

/// A lock-free stack of free slot numbers, tagged against ABA.
pub(super) struct FreeList {
    head: AtomicU64,
}

#[inline]
fn tag_word(tag: u32, idx: u32) -> u64 {
    u64::from(tag) << 32 | u64::from(idx)
}

impl FreeList {
    fn new() -> Self {
        Self {
            head: AtomicU64::new(tag_word(0, NIL)),
        }
    }

    fn pop(&self, next: impl Fn(u32) -> u32) -> Option<u32> {
        // Acquire: pairs with the Release CAS in `push`, so the slot's last writes are seen.
        let mut h = self.head.load(Ordering::Acquire);
        loop {
            let idx = h as u32;
            if idx == NIL {
                return None;
            }
            let new = tag_word(((h >> 32) as u32).wrapping_add(1), next(idx));
            // Acquire on success: as the load above.
            match self
                .head
                .compare_exchange_weak(h, new, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Some(idx),
                Err(cur) => h = cur,
            }
        }
    }

    /// Pushes the chain that starts at `idx`; `set_next` links its last slot to the old head.
    fn push(&self, idx: u32, set_next: impl Fn(u32)) {
        let mut h = self.head.load(Ordering::Relaxed);
        loop {
            set_next(h as u32);
            let new = tag_word(((h >> 32) as u32).wrapping_add(1), idx);
            // Release: publishes the slots' writes to the next `pop` (its Acquire).
            match self
                .head
                .compare_exchange_weak(h, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(cur) => h = cur,
            }
        }
    }
}

/// A segmented slot store with its free list (see the module docs).
pub(super) struct Store<T> {
    slots: SegArray<T>,
    /// Per slot, `extra` words (a node's dependency identities); empty when `extra` is 0.
    extra: SegArray<AtomicU64>,
    /// Per segment: the generation its slots start at when it is allocated (the highest its
    /// retired predecessor's free slots reached).
    floors: Box<[AtomicU32]>,
    /// Slots backed by memory now (observations only).
    backing: AtomicU32,
    free: FreeList,
    /// Serialises growth and shrinking (a leaf lock).
    grow: Mutex<()>,
    /// What [`at`](Self::at) answers for an unbacked slot.
    gone: T,
    /// Slots reserved at build: the segments that hold them are never retired.
    reserved: u32,
}

impl<T> Store<T> {
    /// Slot `i`, if its segment is backed.
    #[inline(always)]
    pub(super) fn get(&self, i: u32) -> Option<&T> {
        self.slots.get(i)
    }

    /// Slot `i`, or the store's inert `gone` slot if its segment is not backed: for readers
    /// that hold a slot number they did not allocate and check its generation. A retired
    /// segment held only free slots, none at the last generation (a slot that reaches it is
    /// kept, never freed), so every such holder's generation is below the `gone` slot's, which
    /// is the last one: its checks fail as they would on a slot reused since.
    #[inline(always)]
    pub(super) fn at(&self, i: u32) -> &T {
        match self.slots.in_first(i) {
            Some(s) => s,
            None => self.at_past_first(i),
        }
    }

    /// [`at`](Self::at) of a slot past the first segment.
    #[inline(always)]
    fn at_past_first(&self, i: u32) -> &T {
        match self.slots.get_past_first(i) {
            Some(s) => s,
            None => &self.gone,
        }
    }

    /// The `extra` words of slot `i`, if its segment is backed.
    #[inline]
    pub(super) fn extra(&self, i: u32) -> Option<&[AtomicU64]> {
        self.extra.run(i)
    }

    /// Slots backed by memory now.
    pub(super) fn backing(&self) -> u32 {
        self.backing.load(Ordering::Relaxed)
    }
}

impl<T: Slot + Send + 'static> Store<T> {
    /// A store of at most `max` slots, `extra` words per slot, its first segment of `first`
    /// slots (rounded up to a power of two; at most `max`) allocated, every slot starting at
    /// generation `gen`.
    /// The segments that hold the first `reserve` slots are allocated too, and kept through
    /// every shrink.
    pub(super) fn new(max: u32, first: u32, extra: usize, gen: u32, reserve: u32) -> Self {
        let geo = Geometry::new(max, first);
        let (_, len0) = geo.span(0);
        let s = Self {
            slots: SegArray::new(geo, 1, |i, _| {
                T::fresh(if i + 1 < len0 { i + 1 } else { NIL }, gen)
            }),
            extra: SegArray::new(geo, extra, |_, _| AtomicU64::new(0)),
            floors: (0..MAX_SEGMENTS).map(|_| AtomicU32::new(gen)).collect(),
            backing: AtomicU32::new(0),
            free: FreeList::new(),
            grow: Mutex::new(()),
            gone: T::gone(),
            reserved: reserve,
        };
        s.publish_segment(0);
        for k in 1..MAX_SEGMENTS {
            let (start, len) = geo.span(k);
            if start >= reserve || len == 0 {
                break;
            }
            s.add_segment(k);
        }
        s
    }

    /// Allocates segment `k`, publishes it and pushes its slots onto the free list. Under the
    /// `grow` lock, or at build.
    fn add_segment(&self, k: usize) {
        let _pin = epoch::pin();
        let (start, len) = self.slots.geometry().span(k);
        debug_assert!(len > 0);
        // Relaxed: written under the `grow` lock held here.
        let gen = self.floors[k].load(Ordering::Relaxed);
        let end = start + len;
        if self.extra.per() > 0 {
            self.extra.add(k, |_, _| AtomicU64::new(0));
        }
        self.slots.add(k, |i, _| {
            T::fresh(if i + 1 < end { i + 1 } else { NIL }, gen)
        });
        self.publish_segment(k);
    }

    /// Counts segment `k`, just backed, and pushes its slots (already a chain) onto the free
    /// list.
    fn publish_segment(&self, k: usize) {
        let _pin = epoch::pin();
        let (start, len) = self.slots.geometry().span(k);
        let end = start + len;
        self.backing.fetch_add(len, Ordering::Relaxed);
        let last = self.slots.get(end - 1).expect("just backed");
        self.free
            .push(start, |h| last.next().store(h, Ordering::Relaxed));
    }

    /// A free slot: popped from the free list, or from a segment added for it. `None` at the
    /// maximum with every slot in use.
    #[inline]
    pub(super) fn alloc(&self) -> Option<u32> {
        self.free
            .pop(|i| self.next_of(i))
            .or_else(|| self.alloc_slow())
    }

    #[inline(always)]
    fn next_of(&self, i: u32) -> u32 {
        // A slot number read from the head may belong to a segment retired since (the pop's
        // CAS then fails, the head having moved): its link reads as the end.
        self.get(i)
            .map_or(NIL, |s| s.next().load(Ordering::Relaxed))
    }

    #[cold]
    #[inline(never)]
    fn alloc_slow(&self) -> Option<u32> {
        let _g = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        // Another thread grew, or a shrink pushed slots back, while this one waited.
        if let Some(i) = self.free.pop(|i| self.next_of(i)) {
            return Some(i);
        }
        let geo = self.slots.geometry();
        let k = (0..MAX_SEGMENTS).find(|&k| !self.slots.is_backed(k) && geo.span(k).1 > 0)?;
        self.add_segment(k);
        self.free.pop(|i| self.next_of(i))
    }

    /// Gives slot `i` back.
    #[inline]
    pub(super) fn free(&self, i: u32) {
        self.free_chain(i, i);
    }

    /// Gives back the chain `first ..= last` (linked through `next`, `last`'s link is
    /// overwritten) with one CAS.
    #[inline]
    pub(super) fn free_chain(&self, first: u32, last: u32) {
        let s = self.get(last).expect("a slot in use is backed");
        self.free
            .push(first, |n| s.next().store(n, Ordering::Relaxed));
    }

    /// Retires every segment but the first whose slots are all free (see the module docs).
    /// Returns the slots given back.
    pub(super) fn shrink(&self) -> u32 {
        let _g = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        let guard = epoch::pin();
        let geo = self.slots.geometry();
        // Per segment: the chain of its free slots taken off the list, its tail and length.
        let mut head = [NIL; MAX_SEGMENTS];
        let mut tail = [NIL; MAX_SEGMENTS];
        let mut count = [0u32; MAX_SEGMENTS];
        while let Some(i) = self.free.pop(|i| self.next_of(i)) {
            let (k, _) = geo.locate(i);
            let s = self.get(i).expect("a free slot is backed");
            s.next().store(head[k], Ordering::Relaxed);
            if head[k] == NIL {
                tail[k] = i;
            }
            head[k] = i;
            count[k] += 1;
        }
        let mut given = 0;
        for k in 1..MAX_SEGMENTS {
            let (start, len) = geo.span(k);
            if !self.slots.is_backed(k) || count[k] != len || start < self.reserved {
                continue;
            }
            let floor = (start..start + len)
                .filter_map(|i| self.get(i))
                .map(T::free_gen)
                .max()
                .unwrap_or(0);
            // Relaxed: read under this lock by the next `add_segment` of this segment.
            self.floors[k].store(floor, Ordering::Relaxed);
            self.slots.retire(k, &guard);
            if self.extra.per() > 0 {
                self.extra.retire(k, &guard);
            }
            self.backing.fetch_sub(len, Ordering::Relaxed);
            given += len;
            head[k] = NIL;
        }
        for k in 0..MAX_SEGMENTS {
            if head[k] != NIL {
                let t = self.get(tail[k]).expect("a kept segment is backed");
                self.free
                    .push(head[k], |h| t.next().store(h, Ordering::Relaxed));
            }
        }
        // Hands the retired segments to the global queue now, so the next pins can free them.
        guard.flush();
        given
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    struct S {
        next: AtomicU32,
        gen: AtomicU32,
    }

    impl Slot for S {
        fn fresh(next: u32, gen: u32) -> Self {
            S {
                next: AtomicU32::new(next),
                gen: AtomicU32::new(gen),
            }
        }
        fn free_gen(&self) -> u32 {
            self.gen.load(Ordering::Relaxed)
        }
        fn next(&self) -> &AtomicU32 {
            &self.next
        }
        fn gone() -> Self {
            Self::fresh(NIL, u32::MAX)
        }
    }

    #[test]
    fn d51_store_grows_to_its_maximum_and_shrinks_back() {
        let _pin = epoch::pin();
        // Segments of 4, 8, 16, ...: slot 500 lies in 252 ..= 507 (256 slots), slot 50 of the
        // smaller store Miri runs in 28 ..= 59 (32 slots).
        let (max, kept, kept_len) = if cfg!(miri) {
            (100u32, 50u32, 32u32)
        } else {
            (1000, 500, 256)
        };
        let s = Store::<S>::new(max, 4, 2, 7, 0);
        assert_eq!(s.backing(), 4);
        let taken: Vec<u32> = (0..max).map(|_| s.alloc().expect("room")).collect();
        assert_eq!(s.backing(), max);
        assert!(s.alloc().is_none(), "past the maximum");
        let mut sorted = taken.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), max as usize, "every slot handed out once");
        assert_eq!(s.extra(max - 1).unwrap().len(), 2);
        // Slot `kept` is kept: its segment stays.
        for &i in &taken {
            if i != kept {
                s.get(i).unwrap().gen.store(9, Ordering::Relaxed);
                s.free(i);
            }
        }
        assert_eq!(s.shrink(), max - 4 - kept_len);
        assert_eq!(s.backing(), 4 + kept_len);
        assert!(
            s.get(max - 1).is_none(),
            "a retired segment reads as absent"
        );
        assert!(s.get(kept).is_some());
        // Regrown segments start at the highest generation their slots had.
        let again: Vec<u32> = (0..max - 1).map(|_| s.alloc().expect("room")).collect();
        assert_eq!(s.backing(), max);
        assert_eq!(s.get(max - 1).unwrap().free_gen(), 9);
        assert_eq!(s.get(1).unwrap().free_gen(), 9, "kept slots keep theirs");
        drop(again);
    }

    #[test]
    fn d51_concurrent_allocation_past_segments_hands_out_each_slot_once() {
        // Past several segments: 4096 slots from 8 (256 under Miri).
        let max = if cfg!(miri) { 256 } else { 4096 };
        let s = Store::<S>::new(max, 8, 0, 0, 0);
        let got: Vec<Vec<u32>> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    sc.spawn(|| {
                        let _pin = epoch::pin();
                        let mut mine = Vec::new();
                        while let Some(i) = s.alloc() {
                            mine.push(i);
                        }
                        mine
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<u32> = got.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, (0..max).collect::<Vec<_>>());
    }
}
