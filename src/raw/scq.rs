//! A bounded MPMC FIFO ring of small indices with no claim/publish window (SPEC F24).
//!
//! # The problem
//!
//! The tenant-ring engine (DESIGN.md, "The lock-free engine") keeps a ring of tenant ids whose
//! pop hands one thread that tenant's turn. In a Vyukov-style ring
//! a push first claims a position and then publishes the value; a consumer that reaches the
//! claimed but unpublished slot cannot pass it, so one producer stalled in that window makes every
//! later pop report "empty" — every tenant stalls behind one preempted thread.
//!
//! # Design
//!
//! This is the scalable circular queue (SCQ) of Nikolaev ("A Scalable, Portable, and
//! Memory-Efficient Lock-Free FIFO Queue", DISC 2019), written from the paper's description. It
//! stores indices in `0..capacity`, at most `capacity` of them at once (the caller's contract,
//! which a ring of tenant ids meets when each tenant is in the ring at most once).
//!
//! With `n = capacity.next_power_of_two()`, the ring has `2n` entries. `head` and `tail` are
//! monotonically increasing 64-bit positions taken with fetch-add (never a CAS retry loop on
//! them); position `p` maps to entry `remap(p mod 2n)` and belongs to *cycle* `p / 2n`. Each
//! entry is one `AtomicU64`:
//!
//! ```text
//!   bits 0..25   index   (BOTTOM = all ones: no index)
//!   bit  25      safe    (cleared by a consumer that passed an entry holding an older index)
//!   bits 26..64  cycle   (of the position that last wrote it, modulo 2^38)
//! ```
//!
//! * **Push** takes `t = tail.fetch_add(1)` and tries to write `{cycle(t), safe, index}` into
//!   the entry with one CAS, allowed only if the entry's cycle is older than `cycle(t)`, it holds
//!   no index, and it is safe (or no consumer has gone past `t` yet: `head <= t`). Otherwise it
//!   takes a new position. A successful push resets the *threshold* to `3n - 1`.
//! * **Pop** returns `None` at once if the threshold is negative (the ring is known empty).
//!   Otherwise it takes `h = head.fetch_add(1)`. If the entry's cycle is `cycle(h)`, the push at
//!   position `h` has written it: the pop consumes it by setting the index to `BOTTOM` (one
//!   fetch-or) and returns it. If the entry's cycle is older, the pop *passes* the position: it
//!   CASes the entry to cycle `cycle(h)` (keeping an older index, marked unsafe, if one is still
//!   there), so a push that took position `h` but has not written yet will fail its CAS and take
//!   a new position. Then, if `tail <= h + 1` the ring is empty (the pop moves `tail` up to
//!   `h + 1` so later pushes do not land on passed positions, and returns `None`); otherwise it
//!   decrements the threshold and tries the next position, or returns `None` once the threshold
//!   is used up.
//!
//! The threshold bounds the positions a pop may pass on a ring that is (nearly) empty: the paper
//! shows that after `3n - 1` passed positions without finding an index, the ring was empty at
//! some point during the pop, so returning `None` is linearisable.
//!
//! # Progress: no claim/publish window
//!
//! Every operation takes its position with a fetch-add and then touches only its own entry. A
//! thread stopped anywhere — between taking a position and writing the entry (pause point
//! `scq.push.claimed`), or between taking a head position and reading it (`scq.pop.claimed`) —
//! blocks no other thread: consumers pass its position (the stalled push then retries
//! elsewhere), and a stalled pop's position is only one entry whose index the next cycle's pop
//! sees as unsafe. Pops and pushes are lock-free; every loop retries only because another
//! thread's operation succeeded. The state is `2n + 3` words allocated at construction; nothing
//! allocates later. There is no `unsafe` code.
//!
//! Unlike a Vyukov-style ring's, this ring's "empty" is exact (the ring is
//! linearisable): a pop that returns `None` was, at some instant during the call, facing an
//! empty ring; every push that returned before the pop started is seen.
//!
//! # Memory ordering
//!
//! Every access is `SeqCst`. The algorithm is proven under sequential consistency and it reads
//! one word to decide about another (a push reads `head` to decide whether an unsafe entry may be
//! used; a pop reads `tail` after writing an entry), so weaker orderings would need their own
//! proof. On x86-64 a `SeqCst` read-modify-write or load costs the same as an `AcqRel` one; the
//! threshold reset (a swap, the same `xchg` as a `SeqCst` store) is skipped when the threshold
//! already has that value.
//!
//! Under loom, which models a `SeqCst` load as an `Acquire` load (it may return a value older
//! than the last write in the total order), the loads of `head`, `tail` and `threshold` are
//! read-modify-writes that add 0 ([`sc_load`]): they read the latest value, as a `SeqCst` load
//! among accesses that are all `SeqCst` does at its place in the total order. Without that, loom
//! reports executions that sequential consistency rules out (for example a push reading a stale
//! full threshold and skipping its reset while pops have driven the threshold negative).
//!
//! # Limits
//!
//! Cycles are 38 bits and compared modulo `2^38` (as a signed distance), so a thread stopped in
//! the middle of an operation across `2^37` cycles of other threads' operations (`2^38 * n`
//! positions; at least `2.7 * 10^11` operations) could misread its cycle — the ABA window every
//! position-tagged ring has (for the Vyukov-style ring fairway carried before, `2^31` laps). Positions are 64-bit
//! counters and do not wrap in practice (`2^64` operations).

use crossbeam_utils::CachePadded;

use super::pack::Field;
use super::pause;
use crate::error::Error;
use crate::sync::{AtomicU64, Ordering};

/// The index part of an entry.
const INDEX: Field = Field::first(25);
/// Set while the entry may be used by a push at a position a consumer may already have passed.
const SAFE: Field = INDEX.next(1);
/// Width of [`CYCLE`].
const CYCLE_BITS: u32 = 38;
/// The cycle of the position that last wrote the entry.
const CYCLE: Field = SAFE.next(CYCLE_BITS);
const _: () = assert!(CYCLE.end() == 64);

/// The index value meaning "no index".
const BOTTOM: u64 = INDEX.max();

/// The ordering of every access; see the module docs, "Memory ordering".
const SC: Ordering = Ordering::SeqCst;

/// A `SeqCst` load of `word`; under loom, a read-modify-write adding 0, so that loom sees the
/// latest value as a `SeqCst` load would (module docs, "Memory ordering").
#[inline]
fn sc_load(word: &AtomicU64) -> u64 {
    #[cfg(loom)]
    {
        word.fetch_add(0, SC)
    }
    #[cfg(not(loom))]
    {
        word.load(SC)
    }
}

/// `a` is an older cycle than `b` (modulo `2^38`; see the module docs' limits).
#[inline]
fn older(a: u64, b: u64) -> bool {
    // The distance b - a, read as a signed 38-bit number, is positive.
    let d = b.wrapping_sub(a) & CYCLE.max();
    d != 0 && d < (1 << (CYCLE_BITS - 1))
}

/// One unpacked entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    cycle: u64,
    safe: bool,
    index: u64,
}

impl Entry {
    #[inline]
    fn unpack(word: u64) -> Entry {
        Entry {
            cycle: CYCLE.get(word),
            safe: SAFE.get(word) != 0,
            index: INDEX.get(word),
        }
    }

    #[inline]
    fn pack(self) -> u64 {
        CYCLE.set(0, self.cycle) | SAFE.set(0, self.safe as u64) | INDEX.set(0, self.index)
    }
}

/// A bounded multi-producer multi-consumer FIFO of indices in `0..capacity`, holding at most
/// `capacity` of them, whose consumers pass a producer stalled between taking a position and
/// writing it (see the module docs).
///
/// # Examples
///
/// ```
/// use fairway::internals::Scq;
///
/// let ring = Scq::new(3);
/// ring.push(2);
/// ring.push(0);
/// assert_eq!(ring.pop(), Some(2));
/// assert_eq!(ring.pop(), Some(0));
/// assert_eq!(ring.pop(), None);
/// ```
pub struct Scq {
    /// Next position to pop. Advanced by fetch-add only.
    head: CachePadded<AtomicU64>,
    /// Next position to push. Advanced by fetch-add, and raised by a pop that found the ring
    /// empty (`catch_up`).
    tail: CachePadded<AtomicU64>,
    /// Positions a pop may still pass before reporting empty, as an `i64`; negative: empty.
    threshold: CachePadded<AtomicU64>,
    /// The `2n` entries.
    entries: Box<[AtomicU64]>,
    /// Indices must be below this.
    capacity: u32,
    /// `log2(2n)`.
    order: u32,
    /// `log2` of the entries' rows in the cache-line remap; 0: no remap.
    rows: u32,
}

impl core::fmt::Debug for Scq {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Scq")
            .field("capacity", &self.capacity)
            .field("head", &self.head.load(Ordering::Relaxed))
            .field("tail", &self.tail.load(Ordering::Relaxed))
            .field(
                "threshold",
                &(self.threshold.load(Ordering::Relaxed) as i64),
            )
            .finish_non_exhaustive()
    }
}

/// Entries per 64-byte line, as a power of two.
const LINE_ORDER: u32 = 3;

impl Scq {
    /// The largest capacity [`Scq::new`] accepts: `2^24`, the most tenants a class holds.
    pub const MAX_CAPACITY: u32 = 1 << 24;

    /// An empty ring for indices in `0..capacity`. Allocates its `2 * capacity.next_power_of_two()`
    /// entries once.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0 or greater than [`Scq::MAX_CAPACITY`]; [`Scq::try_new`] returns an
    /// error instead.
    pub fn new(capacity: u32) -> Scq {
        match Scq::try_new(capacity) {
            Ok(r) => r,
            Err(_) => panic!("scq capacity must be between 1 and MAX_CAPACITY"),
        }
    }

    /// An empty ring for indices in `0..capacity`, or an error for an unusable capacity.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` naming `"capacity"` if `capacity` is 0 or greater than
    /// [`Scq::MAX_CAPACITY`].
    pub fn try_new(capacity: u32) -> Result<Scq, Error> {
        Scq::starting_at(capacity, 1)
    }

    /// A ring whose positions start at cycle `cycle` (the entries one cycle before): 1 normally;
    /// tests start just before the cycle field wraps.
    fn starting_at(capacity: u32, cycle: u64) -> Result<Scq, Error> {
        if capacity == 0 || capacity > Scq::MAX_CAPACITY {
            return Err(Error::configuration("capacity"));
        }
        let order = capacity.next_power_of_two().trailing_zeros() + 1;
        let size = 1usize << order;
        let empty = Entry {
            cycle: cycle.wrapping_sub(1) & CYCLE.max(),
            safe: true,
            index: BOTTOM,
        }
        .pack();
        let entries = (0..size).map(|_| AtomicU64::new(empty)).collect();
        let start = (cycle & CYCLE.max()) << order;
        Ok(Scq {
            head: CachePadded::new(AtomicU64::new(start)),
            tail: CachePadded::new(AtomicU64::new(start)),
            threshold: CachePadded::new(AtomicU64::new(-1i64 as u64)),
            entries,
            capacity,
            order,
            rows: order.saturating_sub(LINE_ORDER),
        })
    }

    /// The bound on indices (and on how many the ring holds at once).
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// `3n - 1`: the threshold a push resets.
    #[inline]
    fn full_threshold(&self) -> u64 {
        3 * (1u64 << (self.order - 1)) - 1
    }

    /// The cycle of position `p`.
    #[inline]
    fn cycle(&self, p: u64) -> u64 {
        (p >> self.order) & CYCLE.max()
    }

    /// The entry of position `p`. Consecutive positions go to different cache lines: with
    /// `2^rows` rows of 8 entries, `p mod 2n = r * 2^rows + c` goes to entry `c * 8 + r`.
    #[inline]
    fn entry(&self, p: u64) -> &AtomicU64 {
        let j = (p & ((1u64 << self.order) - 1)) as usize;
        let j = if self.rows == 0 {
            j
        } else {
            ((j & ((1 << self.rows) - 1)) << LINE_ORDER) | (j >> self.rows)
        };
        &self.entries[j]
    }

    /// Appends `index`.
    ///
    /// The caller keeps at most [`capacity`](Scq::capacity) indices in the ring at once (a ring
    /// of tenant ids does, with each tenant in it at most once). Pushing more is a logic error:
    /// it cannot corrupt the ring, but the push may then spin until a pop makes room.
    ///
    /// # Panics
    ///
    /// If `index >= capacity`.
    pub fn push(&self, index: u32) {
        assert!(index < self.capacity, "scq index out of range");
        loop {
            let t = self.take_tail();
            pause::point("scq.push.claimed");
            if self.try_place(t, index) {
                return;
            }
        }
    }

    /// Takes the next tail position.
    #[inline]
    fn take_tail(&self) -> u64 {
        // SeqCst: see the module docs; pairs with the head/tail loads of pops and pushes.
        self.tail.fetch_add(1, SC)
    }

    /// Writes `index` at position `t` if the entry may take it; `false`: take a new position.
    fn try_place(&self, t: u64, index: u32) -> bool {
        let entry = self.entry(t);
        let cycle = self.cycle(t);
        // SeqCst: pairs with the entry CASes and fetch-ors of pops.
        let mut word = entry.load(SC);
        loop {
            let e = Entry::unpack(word);
            // SeqCst: the `head` read pairs with pops' fetch-add on `head`: if no pop has taken
            // position `t` yet, the one that will sees this entry written.
            if !(older(e.cycle, cycle) && e.index == BOTTOM && (e.safe || sc_load(&self.head) <= t))
            {
                return false;
            }
            let new = Entry {
                cycle,
                safe: true,
                index: u64::from(index),
            }
            .pack();
            // SeqCst: publishes the index; pairs with the entry loads of pops.
            match entry.compare_exchange_weak(word, new, SC, SC) {
                Ok(_) => break,
                Err(current) => word = current,
            }
        }
        let full = self.full_threshold();
        // SeqCst: pairs with the threshold load at the start of `pop`: a pop that starts after
        // this push returned sees a non-negative threshold. A swap rather than a store: on
        // x86-64 a `SeqCst` store is the same `xchg`, and it keeps every write of the threshold
        // a read-modify-write (loom's model of a plain store racing read-modify-writes can order
        // the store before a read-modify-write that did not read it).
        if sc_load(&self.threshold) != full {
            self.threshold.swap(full, SC);
        }
        true
    }

    /// Removes and returns the oldest index, or `None` if the ring is empty.
    pub fn pop(&self) -> Option<u32> {
        // SeqCst: pairs with the threshold reset of pushes.
        if (sc_load(&self.threshold) as i64) < 0 {
            return None;
        }
        loop {
            // SeqCst: see the module docs; pairs with the `head` load of pushes.
            let h = self.head.fetch_add(1, SC);
            pause::point("scq.pop.claimed");
            if let Some(index) = self.take_or_pass(h) {
                return Some(index);
            }
            // SeqCst: pairs with pushes' fetch-add on `tail`.
            let t = sc_load(&self.tail);
            if t <= h + 1 {
                self.catch_up(t, h + 1);
                // SeqCst: as every threshold access.
                self.threshold.fetch_sub(1, SC);
                return None;
            }
            // SeqCst: as every threshold access.
            if (self.threshold.fetch_sub(1, SC) as i64) <= 0 {
                return None;
            }
        }
    }

    /// At head position `h`: takes the index written for it, or marks the entry so that no push
    /// writes one there for this cycle.
    fn take_or_pass(&self, h: u64) -> Option<u32> {
        let entry = self.entry(h);
        let cycle = self.cycle(h);
        // SeqCst: pairs with the entry CAS of pushes.
        let mut word = entry.load(SC);
        loop {
            let e = Entry::unpack(word);
            if e.cycle == cycle {
                // Written by the push of position `h` (the only position of this cycle that maps
                // here), so it holds an index. SeqCst: as the load.
                entry.fetch_or(INDEX.mask(), SC);
                return Some(e.index as u32);
            }
            if !older(e.cycle, cycle) {
                // A later cycle already went past: nothing to do here.
                return None;
            }
            let new = if e.index == BOTTOM {
                // Empty: move it to our cycle so the push of position `h` cannot write it.
                Entry { cycle, ..e }
            } else {
                // An older index nobody has taken yet (its pop is stalled or behind): leave it,
                // but mark the entry so a push that a pop may already have passed does not use it.
                Entry { safe: false, ..e }
            };
            // SeqCst: pairs with the entry CAS of pushes and the entry loads of other pops.
            match entry.compare_exchange_weak(word, new.pack(), SC, SC) {
                Ok(_) => return None,
                Err(current) => word = current,
            }
        }
    }

    /// Moves `tail` up to `head` after a pop found the ring empty, so pushes do not take
    /// positions every pop has already passed.
    fn catch_up(&self, mut tail: u64, mut head: u64) {
        // SeqCst: as every access to the positions.
        while self.tail.compare_exchange_weak(tail, head, SC, SC).is_err() {
            head = sc_load(&self.head);
            tail = sc_load(&self.tail);
            if tail >= head {
                break;
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
#[path = "scq_tests.rs"]
mod tests;

#[cfg(all(test, loom))]
#[path = "loom_scq.rs"]
mod loom_scq;
