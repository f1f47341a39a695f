//! Bounded multi-producer multi-consumer ring.
//!
//! # The problem
//!
//! The lock-free engine hands granted pull-mode requests to whichever executor thread asks next
//! (SPEC F23): any dispatching thread may push, any executor may pop. The queue must be bounded,
//! allocate nothing after construction, and never make one thread wait for another to finish.
//! (DESIGN.md's atomic tenant ring has the same shape; see the README's Deviations for why the
//! engine keeps the tenant rotation in the sequential policy instead.)
//!
//! # Design
//!
//! An array of `capacity` slots and two monotonically advancing *positions*, `tail` (next push)
//! and `head` (next pop). A position packs a lap number and a slot index:
//!
//! ```text
//!   position = lap * one_lap + index       one_lap = (capacity + 1).next_power_of_two()
//!              \__ high bits __/ \_ low bits: index < capacity < one_lap _/
//! ```
//!
//! Advancing a position goes to `index + 1` in the same lap, or to index 0 of the next lap after
//! the last slot. Positions wrap around `usize` after `usize::MAX / one_lap` laps.
//!
//! Every slot carries a `stamp` word that says what the slot is waiting for. For the slot with
//! index `i` and a position `p` whose index is `i`:
//!
//! | `stamp`        | slot state                                                    |
//! |----------------|---------------------------------------------------------------|
//! | `p`            | empty, ready for the push at position `p`                     |
//! | `p + 1`        | holds the value pushed at `p`, ready for the pop at `p`       |
//! | `p + one_lap`  | value popped; empty and ready for the push one lap later      |
//!
//! Because `one_lap > capacity >= 1`, the "full" stamp `p + 1` never equals the "empty for the
//! next lap" stamp `p + one_lap`. The classic per-slot-sequence design advances the stamp by
//! `capacity` per lap instead, and at capacity 1 those two stamps coincide, so a slot cannot tell
//! "full" from "empty again" and the ring livelocks. This ring is correct at capacity 1 (see the
//! `capacity_one_*` tests).
//!
//! A push reads `tail`, checks that the slot's stamp says "empty for this position", claims the
//! position with one CAS on `tail`, writes the value and publishes it by storing `stamp = p + 1`.
//! A pop mirrors it on `head`, reads the value and frees the slot with `stamp = p + one_lap`. The
//! CAS on the position is the only arbiter between competing threads; the stamp orders the data.
//!
//! # Progress: no thread waits for another
//!
//! Unlike `crossbeam_queue::ArrayQueue`, this ring never spins on another thread's unfinished
//! operation. If the slot at `tail` is claimed by a pop that has not yet freed it, `push` reports
//! the ring full; if the slot at `head` is claimed by a push that has not yet published, `pop`
//! reports it empty. Every retry loop retries only because another thread's CAS succeeded, so the
//! ring is lock-free. In exchange, "full" and "empty" are exact only for operations ordered by
//! happens-before:
//!
//! * `push` returns `Err` only if the ring held `capacity` values, or a pop that claimed the
//!   oldest value had not yet freed its slot (as seen by the pushing thread). If every pop
//!   happens-before the push, `Err` means full.
//! * `pop` returns `None` only if the ring was empty, or the push that claimed the oldest position
//!   had not yet published (as seen by the popping thread). If every push happens-before the pop,
//!   `None` means empty.
//!
//! The engine's ready queue relies on neither boundary: it holds at least one entry per cell (a
//! push cannot find it full), and every push is followed by a wake of the waiting executors,
//! whose own re-check after registering catches a pop that raced the push.
//!
//! # Memory ordering
//!
//! Only Acquire/Release, no fences. The value is published by the Release store of the stamp
//! after writing it and acquired by the stamp load before reading it; symmetrically, a pop's
//! Release store of the freed stamp orders its read of the value before the next lap's overwrite.
//! The position CASes are Release and position loads Acquire, so a thread that sees a position
//! also sees everything the claiming thread did before (in particular its earlier pops and
//! pushes), which keeps `push`/`pop` from reporting full/empty against a thread's own history.
//!
//! # Layout
//!
//! `head` and `tail` are each `CachePadded` (producers and consumers hit different lines).
//! Slots are not padded: a slot is written by one pusher and one popper per lap, and padding
//! every slot would multiply the footprint by up to 16 for a measured loss (see DESIGN.md).

use core::fmt;
use core::mem::MaybeUninit;

use crossbeam_utils::{Backoff, CachePadded};

use crate::error::Error;
use crate::sync::{AtomicUsize, Ordering, UnsafeCell};

// `one_lap` for the largest capacity is `2 * MAX_CAPACITY`; it must leave lap bits above it.
const _: () =
    assert!((Ring::<()>::MAX_CAPACITY + 1).next_power_of_two() <= 1 << (usize::BITS / 2 + 1));
const _: () = assert!(usize::BITS / 2 + 1 < usize::BITS - 1);

/// The panic message of [`Ring::new`] for an unusable capacity.
const CAPACITY_PANIC: &str = "ring capacity must be between 1 and MAX_CAPACITY";

/// One slot of the ring.
///
/// Invariant: `value` is initialised exactly when `stamp` has the form `p + 1` for the position
/// `p` of the slot's current lap (see the state table in the module docs), or while the single
/// thread that claimed the slot's position is between its CAS and its stamp store.
struct Slot<T> {
    /// What the slot waits for; see the module docs' state table.
    stamp: AtomicUsize,
    /// The value; accessed only by the thread that claimed this slot's position.
    value: UnsafeCell<MaybeUninit<T>>,
}

/// A bounded multi-producer multi-consumer FIFO ring.
///
/// `push` gives the value back when the ring is full; `pop` returns `None` when it is empty.
/// Neither ever blocks, spins on another thread, or allocates. See the module docs for the exact
/// meaning of full and empty under concurrency.
///
/// # Examples
///
/// ```
/// use fairway::internals::Ring;
///
/// let ring = Ring::new(2);
/// assert_eq!(ring.push(1), Ok(()));
/// assert_eq!(ring.push(2), Ok(()));
/// assert_eq!(ring.push(3), Err(3));
/// assert_eq!(ring.pop(), Some(1));
/// assert_eq!(ring.len(), 1);
/// ```
pub struct Ring<T> {
    /// Position of the next pop. Advanced only by a successful CAS in `pop`.
    head: CachePadded<AtomicUsize>,
    /// Position of the next push. Advanced only by a successful CAS in `push`.
    tail: CachePadded<AtomicUsize>,
    /// `capacity` slots; slot `i` starts with `stamp == i` (empty for lap 0).
    slots: Box<[Slot<T>]>,
    /// `(capacity + 1).next_power_of_two()`: the position distance of one lap.
    one_lap: usize,
}

// SAFETY: the ring owns its values; sending it to another thread moves them, which `T: Send`
// allows. Nothing in it is tied to the creating thread.
unsafe impl<T: Send> Send for Ring<T> {}

// SAFETY: through `&Ring` a thread can only move a `T` in (`push`) or out (`pop`); it never gets
// a `&T`, so `T: Sync` is not needed, and moving values between threads needs `T: Send`. Each
// slot's value is accessed only by the one thread whose CAS on `head`/`tail` claimed the slot's
// position, and the stamp's Release/Acquire pairs order consecutive claimants' accesses (module
// docs, "Memory ordering"), so there is no data race on the `UnsafeCell`s.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    /// The largest capacity [`Ring::new`] accepts: `2^(usize::BITS / 2)`.
    ///
    /// It keeps at least `usize::BITS / 2 - 1` bits of lap number in every position, so the
    /// signed distances between stamps and positions that the ring computes never overflow, and
    /// a thread would have to be stalled across `2^(usize::BITS / 2 - 1)` laps to see a stale
    /// position come around again (the ABA window that every position-CAS ring has).
    pub const MAX_CAPACITY: usize = 1 << (usize::BITS / 2);

    /// A ring holding at most `capacity` values.
    ///
    /// Allocates the `capacity` slots once; no later operation allocates.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0 or greater than [`Ring::MAX_CAPACITY`], with the message
    /// `"ring capacity must be between 1 and MAX_CAPACITY"`. Use [`Ring::try_new`] to get an
    /// error instead.
    pub fn new(capacity: usize) -> Self {
        match Self::try_new(capacity) {
            Ok(ring) => ring,
            Err(_) => panic!("{CAPACITY_PANIC}"),
        }
    }

    /// A ring holding at most `capacity` values, or an error for an unusable capacity.
    ///
    /// Capacity 1 is supported.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` naming the field `"capacity"` if `capacity` is 0 or
    /// greater than [`Ring::MAX_CAPACITY`].
    pub fn try_new(capacity: usize) -> Result<Self, Error> {
        if capacity == 0 || capacity > Self::MAX_CAPACITY {
            return Err(Error::configuration("capacity"));
        }
        let one_lap = (capacity + 1).next_power_of_two();
        let slots = (0..capacity)
            .map(|i| Slot {
                stamp: AtomicUsize::new(i),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        Ok(Self {
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
            slots,
            one_lap,
        })
    }

    /// The position after `pos`: the next index in the same lap, or index 0 of the next lap.
    #[inline]
    fn advance(&self, pos: usize) -> usize {
        let index = pos & (self.one_lap - 1);
        if index + 1 < self.slots.len() {
            pos + 1
        } else {
            (pos & !(self.one_lap - 1)).wrapping_add(self.one_lap)
        }
    }

    /// The slot that position `pos` maps to.
    #[inline]
    fn slot(&self, pos: usize) -> &Slot<T> {
        let index = pos & (self.one_lap - 1);
        debug_assert!(index < self.slots.len());
        // Indexing (with its bounds check) rather than `get_unchecked`: the check is one
        // predictable compare and keeps this file's unsafe surface to the value cell.
        &self.slots[index]
    }

    /// Appends `value` at the tail, or gives it back if no slot is free.
    ///
    /// # Errors
    ///
    /// `Err(value)` when the ring is full, or when the oldest value's slot has been claimed by a
    /// pop that has not yet freed it (see the module docs).
    pub fn push(&self, value: T) -> Result<(), T> {
        let backoff = Backoff::new();
        // Acquire: pairs with the Release CAS on `tail` below (in other pushes), so this thread
        // sees everything earlier claimants did, including their pops.
        let mut tail = self.tail.load(Ordering::Acquire);
        loop {
            let slot = self.slot(tail);
            // Acquire: pairs with the Release stamp store in `pop()` that freed this slot, so the
            // previous value has been moved out before it is overwritten below.
            let stamp = slot.stamp.load(Ordering::Acquire);
            // Stamps and positions stay within a few laps of each other, so the wrapping
            // difference read as signed tells "behind", "equal" and "ahead" apart.
            let ahead = stamp.wrapping_sub(tail) as isize;
            if ahead == 0 {
                let next = self.advance(tail);
                // Release: publishes this thread's earlier operations to the pushers whose
                // Acquire load of `tail` reads this value. Failure Acquire: as the load above.
                match self.tail.compare_exchange_weak(
                    tail,
                    next,
                    Ordering::Release,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        slot.value.with_mut(|p| {
                            // SAFETY: the CAS made this thread the only claimant of position
                            // `tail`; the stamp said the slot is empty for it, and the Acquire
                            // load ordered the previous occupant's read before this write.
                            unsafe { p.write(MaybeUninit::new(value)) }
                        });
                        // Release: publishes the value; pairs with the Acquire stamp load in
                        // `pop()`.
                        slot.stamp.store(tail.wrapping_add(1), Ordering::Release);
                        return Ok(());
                    }
                    Err(current) => {
                        tail = current;
                        backoff.spin();
                    }
                }
            } else if ahead < 0 {
                // The slot still holds (or is still being emptied of) the value pushed one lap
                // ago: full, or a pop of it is not finished.
                return Err(value);
            } else {
                // The stamp is past `tail`: another push claimed this position after our load.
                // That push's tail CAS happens-before the stamp we acquired, so the reload sees a
                // newer tail.
                // Acquire: as the first load of `tail`.
                tail = self.tail.load(Ordering::Acquire);
            }
        }
    }

    /// Removes and returns the value at the head, or `None` if no value is ready.
    ///
    /// `None` means the ring is empty, or the push that claimed the oldest position has not yet
    /// published its value (see the module docs).
    pub fn pop(&self) -> Option<T> {
        let backoff = Backoff::new();
        // Acquire: pairs with the Release CAS on `head` below (in other pops), so this thread
        // sees everything earlier claimants did, including their pushes.
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            let slot = self.slot(head);
            // Acquire: pairs with the Release stamp store in `push()` that published the value.
            let stamp = slot.stamp.load(Ordering::Acquire);
            let ahead = stamp.wrapping_sub(head.wrapping_add(1)) as isize;
            if ahead == 0 {
                let next = self.advance(head);
                // Release: publishes this thread's earlier operations to the pops whose Acquire
                // load of `head` reads this value. Failure Acquire: as the load above.
                match self.head.compare_exchange_weak(
                    head,
                    next,
                    Ordering::Release,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        let value = slot.value.with(|p| {
                            // SAFETY: the CAS made this thread the only claimant of position
                            // `head`; the Acquire stamp load saw `head + 1`, so the value written
                            // by that position's push is initialised and visible. It is moved
                            // out exactly once: the slot is marked empty right after.
                            unsafe { p.read().assume_init() }
                        });
                        // Release: orders the read above before the next lap's overwrite; pairs
                        // with the Acquire stamp load in `push()`.
                        slot.stamp
                            .store(head.wrapping_add(self.one_lap), Ordering::Release);
                        return Some(value);
                    }
                    Err(current) => {
                        head = current;
                        backoff.spin();
                    }
                }
            } else if ahead < 0 {
                // Nothing published at `head` yet: empty, or a push of it is not finished.
                return None;
            } else {
                // The stamp is past `head + 1`: another pop took this position after our load;
                // its head CAS happens-before the stamp we acquired, so the reload is newer.
                // Acquire: as the first load of `head`.
                head = self.head.load(Ordering::Acquire);
            }
        }
    }

    /// The number of values in the ring: exact when no operation runs concurrently, otherwise a
    /// snapshot that is always in `0..=capacity`.
    pub fn len(&self) -> usize {
        // Relaxed: a snapshot for observation only; no data is read through these positions.
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Relaxed);
        self.distance(head, tail)
    }

    /// The number of positions from `head` to `tail`, clamped to `0..=capacity` (the two loads
    /// in `len` are not one snapshot, so `head` may even be past `tail`).
    fn distance(&self, head: usize, tail: usize) -> usize {
        let mask = self.one_lap - 1;
        let cap = self.slots.len() as isize;
        let laps = ((tail & !mask).wrapping_sub(head & !mask) as isize) / self.one_lap as isize;
        let n = laps
            .saturating_mul(cap)
            .saturating_add((tail & mask) as isize - (head & mask) as isize);
        n.clamp(0, cap) as usize
    }

    /// Whether the ring holds no value (same caveat as [`Ring::len`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the ring holds `capacity` values (same caveat as [`Ring::len`]).
    pub fn is_full(&self) -> bool {
        self.len() == self.capacity()
    }

    /// The maximum number of values the ring holds.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // `&mut self`: no operation is in flight, so every position in head..tail is published.
        // Relaxed: exclusive access.
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        let len = self.distance(head, tail);
        let mut index = head & (self.one_lap - 1);
        for _ in 0..len {
            self.slots[index].value.with_mut(|p| {
                // SAFETY: positions head..tail hold initialised values (published, not popped),
                // and this is the last access to them.
                unsafe { (*p).assume_init_drop() }
            });
            index = if index + 1 == self.slots.len() {
                0
            } else {
                index + 1
            };
        }
    }
}

impl<T> fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, loom))]
#[path = "loom_ring.rs"]
mod loom_ring;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::Arc;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// Counts its drops in a shared counter.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    const _: fn() = || {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Ring<Box<u8>>>();
    };

    #[test]
    #[should_panic(expected = "ring capacity must be between 1 and MAX_CAPACITY")]
    fn new_zero_capacity_panics() {
        let _ = Ring::<u8>::new(0);
    }

    #[test]
    fn try_new_refuses_unusable_capacities() {
        for cap in [0, Ring::<u8>::MAX_CAPACITY + 1, usize::MAX] {
            let err = Ring::<u8>::try_new(cap).unwrap_err();
            assert_eq!(err, Error::configuration("capacity"));
            assert_eq!(
                err.to_string(),
                "invalid-argument / configuration (capacity)"
            );
        }
    }

    #[test]
    fn push_gives_value_back_when_full() {
        let ring = Ring::new(3);
        assert!(ring.is_empty());
        for i in 0..3 {
            assert_eq!(ring.push(i), Ok(()));
        }
        assert!(ring.is_full());
        assert_eq!(ring.push(9), Err(9));
        assert_eq!(ring.len(), 3);
        assert_eq!(ring.capacity(), 3);
        assert_eq!(ring.pop(), Some(0));
        assert_eq!(ring.push(3), Ok(()));
        assert_eq!(
            (ring.pop(), ring.pop(), ring.pop()),
            (Some(1), Some(2), Some(3))
        );
        assert_eq!(ring.pop(), None);
        assert!(ring.is_empty());
    }

    #[test]
    fn capacity_one_alternates_full_and_empty_across_many_laps() {
        let ring = Ring::new(1);
        // Each lap of a one-slot ring is two pushes and two pops; Miri takes about 0.1 s a lap.
        let laps = if cfg!(miri) { 40 } else { 1000u32 };
        for i in 0..laps {
            assert_eq!(ring.pop(), None);
            assert_eq!(ring.push(i), Ok(()));
            assert!(ring.is_full());
            assert_eq!(ring.push(i + 1), Err(i + 1));
            assert_eq!(ring.pop(), Some(i));
            assert!(ring.is_empty());
        }
    }

    #[test]
    fn len_is_exact_across_lap_boundaries() {
        // A capacity that is not a power of two leaves unused index values in each lap.
        let ring = Ring::new(5);
        let mut expected = 0;
        for round in 0..40usize {
            if round % 3 == 2 {
                while ring.pop().is_some() {
                    expected -= 1;
                    assert_eq!(ring.len(), expected);
                }
            } else {
                while ring.push(round).is_ok() {
                    expected += 1;
                    assert_eq!(ring.len(), expected);
                }
                let _ = ring.pop();
                expected -= 1;
            }
            assert_eq!(ring.len(), expected);
        }
    }

    #[test]
    fn positions_wrap_around_usize() {
        // Start both positions a few laps before usize wraps.
        let ring = Ring::new(3);
        let start = 0usize.wrapping_sub(4 * ring.one_lap);
        ring.head.store(start, Ordering::Relaxed);
        ring.tail.store(start, Ordering::Relaxed);
        for (i, slot) in ring.slots.iter().enumerate() {
            slot.stamp.store(start + i, Ordering::Relaxed);
        }
        let mut model = VecDeque::new();
        for i in 0..100u32 {
            if i % 4 == 3 {
                assert_eq!(ring.pop(), model.pop_front());
            } else {
                let pushed = ring.push(i);
                assert_eq!(pushed.is_ok(), model.len() < 3);
                if pushed.is_ok() {
                    model.push_back(i);
                }
            }
            assert_eq!(ring.len(), model.len());
        }
    }

    #[test]
    fn drop_drops_every_remaining_value_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let ring = Ring::new(4);
        // Leave the remaining values straddling the wrap from index 3 to index 0.
        for _ in 0..3 {
            assert!(ring.push(Counted(drops.clone())).is_ok());
        }
        drop(ring.pop());
        drop(ring.pop());
        for _ in 0..3 {
            assert!(ring.push(Counted(drops.clone())).is_ok());
        }
        let rejected = ring.push(Counted(drops.clone())).unwrap_err();
        drop(rejected);
        assert_eq!(drops.load(Ordering::Relaxed), 3);
        assert_eq!(ring.len(), 4);
        drop(ring);
        assert_eq!(drops.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn zero_sized_values() {
        let ring = Ring::new(2);
        assert_eq!(ring.push(()), Ok(()));
        assert_eq!(ring.push(()), Ok(()));
        assert_eq!(ring.push(()), Err(()));
        assert_eq!(ring.pop(), Some(()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

        /// Single-threaded, the ring is exactly a bounded `VecDeque`.
        #[test]
        fn matches_vecdeque_model(
            cap in 1usize..=9,
            ops in proptest::collection::vec(
                proptest::option::of(any::<u16>()),
                0..if cfg!(miri) { 60 } else { 200 },
            ),
        ) {
            let ring = Ring::new(cap);
            let mut model = VecDeque::with_capacity(cap);
            for op in ops {
                match op {
                    Some(v) => {
                        let expected = if model.len() < cap {
                            model.push_back(v);
                            Ok(())
                        } else {
                            Err(v)
                        };
                        prop_assert_eq!(ring.push(v), expected);
                    }
                    None => prop_assert_eq!(ring.pop(), model.pop_front()),
                }
                prop_assert_eq!(ring.len(), model.len());
                prop_assert_eq!(ring.is_empty(), model.is_empty());
                prop_assert_eq!(ring.is_full(), model.len() == cap);
            }
        }
    }

    /// `producers` threads push `(producer, seq)` for `seq` in `0..per_producer`, retrying when
    /// full; `consumers` threads pop until everything is taken. Checks that every value arrives
    /// exactly once and that each consumer sees each producer's values in increasing order.
    fn mpmc_stress(capacity: usize, producers: usize, consumers: usize, per_producer: usize) {
        let ring = Arc::new(Ring::<(usize, usize)>::new(capacity));
        let taken = Arc::new(AtomicUsize::new(0));
        let total = producers * per_producer;
        let producer_threads: Vec<_> = (0..producers)
            .map(|p| {
                let ring = ring.clone();
                std::thread::spawn(move || {
                    for seq in 0..per_producer {
                        let mut v = (p, seq);
                        while let Err(back) = ring.push(v) {
                            v = back;
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let consumer_threads: Vec<_> = (0..consumers)
            .map(|_| {
                let ring = ring.clone();
                let taken = taken.clone();
                std::thread::spawn(move || {
                    let mut last = vec![None::<usize>; producers];
                    let mut got = Vec::new();
                    while taken.load(Ordering::Relaxed) < total {
                        match ring.pop() {
                            Some((p, seq)) => {
                                taken.fetch_add(1, Ordering::Relaxed);
                                assert!(last[p].is_none_or(|l| l < seq), "per-producer FIFO");
                                last[p] = Some(seq);
                                got.push((p, seq));
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                    got
                })
            })
            .collect();
        for t in producer_threads {
            t.join().unwrap();
        }
        let mut seen = vec![false; total];
        let mut sum = 0usize;
        for t in consumer_threads {
            for (p, seq) in t.join().unwrap() {
                let i = p * per_producer + seq;
                assert!(!seen[i], "duplicated {p}/{seq}");
                seen[i] = true;
                sum += seq;
            }
        }
        assert!(seen.iter().all(|&s| s), "lost values");
        assert_eq!(sum, producers * per_producer * (per_producer - 1) / 2);
        assert!(ring.is_empty());
    }

    const N: usize = if cfg!(miri) { 50 } else { 100_000 };

    #[test]
    fn mpmc_stress_conserves_values_and_per_producer_order() {
        mpmc_stress(8, 4, 4, N);
    }

    #[test]
    fn capacity_one_mpmc_stress() {
        mpmc_stress(1, 2, 2, N / 4);
    }
}
