//! A fixed-capacity slot arena with generation-tagged keys (SPEC F02, F21, F30).
//!
//! Queued requests, graph nodes and similar records must live in memory allocated once at build
//! time (F02), and a handle to a record must stay safe to present after the record has ended and
//! its slot has been reused: such a handle is refused, never acted on (F30). The arena provides
//! both: `capacity` slots allocated up front, each holding a user value `T` and one packed state
//! word, and [`Key`]s that carry the slot's generation. Every operation through a key compares
//! the generation as part of the same atomic step, so a key from an earlier allocation of the
//! slot can never read or move the current allocation's state.
//!
//! # Slot word
//!
//! Each slot has one `AtomicU64`:
//!
//! ```text
//!  63 ........... 8+G   8+G .......... 8   7 ..... 0
//! |  unused (zero)    |   generation (G)  |  state  |      G = 40 by default, 1..=40 in tests
//! ```
//!
//! | state            | generation | meaning                                                    |
//! |------------------|------------|------------------------------------------------------------|
//! | `FREE` (0)       | g          | on the free list; the next allocation is generation `g`    |
//! | `FREE` (0)       | g = max    | retired (F21): generation exhausted, never allocated again |
//! | `1..=255`        | g          | allocated as generation `g`; the value is the user's state |
//!
//! `FREE` is reserved by the arena; the user of the arena gives every other value its meaning
//! (for the scheduler: queued, granted, cancelled, ... plus flag bits) and the arena treats it as
//! opaque. Transitions:
//!
//! - [`Arena::alloc`]: `(g, FREE)` → `(g, s)`, by the thread that popped the slot (it owns it).
//! - [`Arena::update`] / `Arena::compare_exchange` (tests): `(g, s)` → `(g, s')`, CAS,
//!   `s' != FREE`.
//! - [`Arena::drop_bits`]: `(g, s)` → `(g, s & !bits)`, or → `(g + 1, FREE)` when no holder bit
//!   is left (the free below in the same CAS).
//! - [`Arena::free`]: `(g, s)` → `(g + 1, FREE)`, CAS, then the slot goes back on the free list;
//!   or `(max, s)` → `(max, FREE)` and the slot is retired. The generation never wraps (F21).
//!
//! # The user's value
//!
//! `T` is built with `T::default()` at construction and lives as long as the arena. The arena never
//! hands out `&mut T`: users keep their own interior mutability inside `T` and reach it through
//! [`Arena::get`]. A state transition made with [`Arena::update`] (`AcqRel`) orders the writes into
//! `T` made before it against the reads of whoever observes the new state; the free list orders
//! everything done to a slot before [`Arena::free`] against the next owner (see [`FreeList`]).
//!
//! # Free list
//!
//! See [`FreeList`]: an ABA-safe Treiber stack of slot indices whose links live in the slots.

use core::fmt;

use crossbeam_utils::CachePadded;

use super::pack::Field;
use crate::sync::AtomicU32;
use crate::sync::AtomicU64;
use crate::sync::AtomicUsize;
use crate::sync::Ordering::{AcqRel, Acquire, Relaxed, Release};
use crate::Error;

#[cfg(all(test, loom))]
#[path = "loom_arena.rs"]
mod loom_arena;

/// The state of a slot that is not allocated. Reserved by the arena: users never pass or return it.
pub(crate) const FREE: u8 = 0;

/// The user's state in the slot word.
const STATE: Field = Field::first(8);
/// The widest generation a slot word (and a [`Key`]) carries: 40 bits, all that a key's `u64`
/// leaves beside a 24-bit index. A slot is handed out at most 2^40 (about 1.1 x 10^12) times
/// before it retires, 256 times the 2^32 of 32-bit generations: at one request cycle per 280 ns
/// on one slot (the one-thread rate, where the LIFO free list hands the same slot out every
/// time) that is about 3.5 days of uninterrupted churn on that slot, where 32 bits lasted 20
/// minutes; with reuse spread over slots it is out of reach.
pub(crate) const MAX_GENERATION_BITS: u32 = 40;
const _: () = assert!(STATE.max() == u8::MAX as u64);
const _: () = assert!(STATE.end() + MAX_GENERATION_BITS <= 64);

/// Free-list head: the index on top of the stack ([`NIL`] when empty) ...
const HEAD_INDEX: Field = Field::first(32);
/// ... and a tag bumped by every push and pop, so that a stale head never compares equal.
const HEAD_TAG: Field = HEAD_INDEX.next(32);
/// The index meaning "no slot": the end of the free list, or an empty list.
const NIL: u32 = u32::MAX;
const _: () = assert!(HEAD_INDEX.max() == NIL as u64);
const _: () = assert!(HEAD_TAG.end() <= 64);

/// The most slots an arena can have: every index a [`Key`] carries (2^24, about 16.8 million),
/// all below [`NIL`].
pub(crate) const MAX_CAPACITY: usize = KEY_INDEX.max() as usize + 1;
const _: () = assert!(MAX_CAPACITY <= NIL as usize);

/// The last generation a slot can have: a slot freed at this generation retires (F21).
pub(crate) const MAX_GENERATION: u64 = KEY_GENERATION.max();

/// [`Key`] encoded as a `u64`: index in the low 24 bits, generation in the 40 above.
const KEY_INDEX: Field = Field::first(24);
const KEY_GENERATION: Field = KEY_INDEX.next(MAX_GENERATION_BITS);
const _: () = assert!(KEY_GENERATION.end() == 64);

/// The generation every slot of a new arena starts at (and the baseline engine's slots, which
/// keep their generations beside the arena's): 0, except in tests that start slots next to
/// exhaustion through `start_generations_at`, a test-only helper (a 2^40-reuse wait is no test).
#[inline]
pub(crate) fn first_generation() -> u64 {
    #[cfg(test)]
    {
        FIRST_GENERATION.with(core::cell::Cell::get)
    }
    #[cfg(not(test))]
    {
        0
    }
}

#[cfg(test)]
std::thread_local! {
    static FIRST_GENERATION: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// Test-only: slots of arenas (and baseline engines) built on this thread while the returned
/// guard lives start at generation `first` (clamped to the arena's widest generation).
#[cfg(test)]
#[must_use = "the first generation goes back to 0 when the guard drops"]
pub(crate) fn start_generations_at(first: u64) -> impl Drop {
    struct Reset(u64);
    impl Drop for Reset {
        fn drop(&mut self) {
            FIRST_GENERATION.with(|g| g.set(self.0));
        }
    }
    Reset(FIRST_GENERATION.with(|g| g.replace(first)))
}

/// Names one allocation of one slot: the slot's index and the generation it had when allocated.
///
/// A key outlives its allocation harmlessly: once the slot is freed, every operation through the
/// key is refused ([`Refused::Stale`]), including after the slot has been allocated again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) index: u32,
    pub(crate) generation: u64,
}

impl Key {
    /// The slot's index, for [`Arena::get`] and for index-based structures (inboxes, rings).
    #[cfg(test)]
    pub(crate) const fn index(self) -> u32 {
        self.index
    }

    /// The generation of the allocation this key names.
    #[cfg(test)]
    pub(crate) const fn generation(self) -> u64 {
        self.generation
    }

    /// The key as one `u64` (for handles the host holds); [`Key::from_u64`] inverts it.
    pub(crate) const fn to_u64(self) -> u64 {
        KEY_GENERATION.set(KEY_INDEX.set(0, self.index as u64), self.generation)
    }

    /// The key encoded by [`Key::to_u64`]. Any `u64` decodes to some key; one that names no
    /// allocation (index out of range, generation too wide, slot since freed) is simply refused
    /// by the arena.
    pub(crate) const fn from_u64(raw: u64) -> Key {
        Key {
            index: KEY_INDEX.get(raw) as u32,
            generation: KEY_GENERATION.get(raw),
        }
    }
}

/// Why an operation through a [`Key`] did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The key names no live allocation: the slot was freed (and perhaps reused) since, or the key
    /// never named a slot of this arena.
    Stale,
    /// The allocation is live but its state did not allow the transition; carries that state.
    Rejected(u8),
}

/// One slot: its packed word, its free-list link and the user's value.
///
/// `repr(C)` and cache-line aligned: the word and the first bytes of the value share the slot's
/// first cache line, so a user that puts its hottest fields first (the scheduler's entry puts
/// its waker there) reaches the state and those fields with one miss.
#[repr(C, align(64))]
struct Slot<T> {
    /// `generation | state`, see the module docs.
    word: AtomicU64,
    /// The index below this one on the free list (or [`NIL`]); meaningful only while the slot is
    /// on the list. Written only by the thread pushing the slot.
    next: AtomicU32,
    /// The user's value; see "The user's value" in the module docs.
    value: T,
}

/// The free list: a Treiber stack of slot indices, linked through [`Slot::next`].
///
/// # ABA
///
/// A pop reads `head = (i, tag)` and `next[i] = j`, then CASes `head` to `j`. If, between the read
/// and the CAS, other threads popped `i`, popped `j` and pushed `i` back, an untagged CAS would
/// succeed and install `j` — a slot someone now owns. The tag makes that CAS fail: every push and
/// every pop increments it, so any change of the head in between changes the word. A stale CAS
/// could succeed only if the 32-bit tag wrapped to the same value with the same index on top, that
/// is after exactly a multiple of 2^32 head changes while the popping thread sits between one load
/// and one CAS; the loom model `aba_pop_racing_pop_pop_push_is_refused` covers the case that tag
/// exists for.
///
/// # Stale `next` reads
///
/// The `next[i]` a pop reads may be concurrently rewritten: another thread may pop `i` and push it
/// again (writing `next[i]`) before this pop's CAS. The read is of an atomic, so it is not a data
/// race, and its value is used only if the CAS succeeds — which it cannot, since that pop changed
/// the tag. When the CAS does succeed, no pop or push happened since the head was read, so
/// `next[i]` is the value the last push of `i` wrote, made visible by the `Acquire` head load.
struct FreeList {
    /// `(index, tag)`, see [`HEAD_INDEX`] and [`HEAD_TAG`].
    head: AtomicU64,
    /// Approximate number of slots on the list (see [`Arena::available`]); kept only in test
    /// builds, where models and tests check it (it costs two RMWs per allocation). Kept next to the head,
    /// on the same cache line, so maintaining it moves no extra line between cores.
    #[cfg(test)]
    available: AtomicUsize,
}

/// A fixed-capacity arena of `T` slots handed out as generation-tagged [`Key`]s.
///
/// Every operation is O(1) and lock-free, and none allocates. See the module docs for the slot
/// word, the ordering contract and the free list.
pub(crate) struct Arena<T> {
    free: CachePadded<FreeList>,
    slots: Box<[Slot<T>]>,
    /// The generation field of the slot words: `STATE.next(bits)`.
    generation: Field,
    /// Slots retired because their generation is exhausted.
    retired: AtomicUsize,
}

impl<T: Default> Arena<T> {
    /// An arena of `capacity` slots with 40-bit generations.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` (field `capacity`) if `capacity` is 0 or above
    /// [`MAX_CAPACITY`].
    pub(crate) fn new(capacity: usize) -> Result<Self, Error> {
        Self::with_generation_bits(capacity, MAX_GENERATION_BITS)
    }

    /// An arena whose generations are `bits` wide (1..=40), so that each slot can be allocated
    /// `2^bits` times before it is retired. Narrow generations exist for tests (F21).
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` naming `capacity` (0 or above [`MAX_CAPACITY`]) or
    /// `generation_bits` (outside 1..=40).
    pub(crate) fn with_generation_bits(capacity: usize, bits: u32) -> Result<Self, Error> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return Err(Error::configuration("capacity"));
        }
        if bits == 0 || bits > MAX_GENERATION_BITS {
            return Err(Error::configuration("generation_bits"));
        }
        let generation = STATE.next(bits);
        let first = first_generation().min(generation.max());
        let free_word = generation.set(STATE.set(0, FREE as u64), first);
        // The list starts as 0 -> 1 -> ... -> capacity-1 -> NIL, so slots are first handed out in
        // index order.
        let slots = (0..capacity)
            .map(|i| Slot {
                word: AtomicU64::new(free_word),
                next: AtomicU32::new(if i + 1 < capacity { i as u32 + 1 } else { NIL }),
                value: T::default(),
            })
            .collect();
        Ok(Self {
            free: CachePadded::new(FreeList {
                head: AtomicU64::new(HEAD_TAG.set(HEAD_INDEX.set(0, 0), 0)),
                #[cfg(test)]
                available: AtomicUsize::new(capacity),
            }),
            slots,
            generation,
            retired: AtomicUsize::new(0),
        })
    }
}

impl<T> Arena<T> {
    /// Allocates a slot in state `initial_state` (not [`FREE`]); `None` when every slot is taken.
    ///
    /// The caller owns the allocation until it hands the key on; exactly one party eventually
    /// calls [`Arena::free`] with it.
    pub(crate) fn alloc(&self, initial_state: u8) -> Option<Key> {
        debug_assert_ne!(initial_state, FREE, "FREE is reserved by the arena");
        let index = self.pop()?;
        #[cfg(test)]
        self.free.available.fetch_sub(1, Relaxed);
        let slot = &self.slots[index as usize];
        // Relaxed: the pop's Acquire ordered the last write of this word (the freeing CAS, or
        // construction) before this load, and nobody writes a FREE slot's word but its owner.
        let word = slot.word.load(Relaxed);
        debug_assert_eq!(STATE.get(word), FREE as u64, "free-list slot not FREE");
        // Relaxed: nobody knows the new key yet. Whoever receives it synchronises with this thread
        // through whatever carries the key, which orders this store first; a holder of an older
        // key is refused whatever value it reads, since the generation differs.
        slot.word
            .store(STATE.set(word, initial_state as u64), Relaxed);
        Some(Key {
            index,
            generation: self.generation.get(word),
        })
    }

    /// The state of the allocation `key` names; `None` if the key is stale.
    pub(crate) fn state(&self, key: Key) -> Option<u8> {
        let slot = self.slot(key)?;
        // Acquire: pairs with the Release half of the CAS in update()/compare_exchange() that
        // wrote this state, so what its caller wrote into `T` before the transition is visible.
        let word = slot.word.load(Acquire);
        self.is_live(word, key).then(|| STATE.get(word) as u8)
    }

    /// Applies `f` to the state of the allocation `key` names, atomically: `f` sees the current
    /// state and returns the next one, or `None` to leave it. Returns `(old, new)`.
    ///
    /// `f` may run several times (once per lost race) and must not return [`FREE`].
    ///
    /// # Errors
    ///
    /// [`Refused::Stale`] if the key is stale — then nothing happened, whatever the slot holds
    /// now; [`Refused::Rejected`] with the current state if `f` returned `None`.
    ///
    /// # Ordering
    ///
    /// A successful transition is `AcqRel`: it publishes the caller's writes into `T` made before
    /// it, and makes visible those of whoever made the previous transition. A refusal is
    /// `Acquire`, so a caller that acts on the state it was refused with sees that transition's
    /// writes too.
    pub(crate) fn update(
        &self,
        key: Key,
        mut f: impl FnMut(u8) -> Option<u8>,
    ) -> Result<(u8, u8), Refused> {
        let slot = self.slot(key).ok_or(Refused::Stale)?;
        // Acquire: pairs with the Release half of the CAS below in whichever update() wrote this
        // word, so `f` and a Rejected caller see the writes that came with that state.
        let mut word = slot.word.load(Acquire);
        loop {
            if !self.is_live(word, key) {
                return Err(Refused::Stale);
            }
            let old = STATE.get(word) as u8;
            let Some(new) = f(old) else {
                return Err(Refused::Rejected(old));
            };
            debug_assert_ne!(new, FREE, "FREE is reserved by the arena");
            // AcqRel on success: Release publishes the caller's writes into `T` to whoever reads
            // this state (state(), update(), free() Acquire); Acquire pairs with the previous
            // transition's Release. Acquire on failure: same as the load above. The generation is
            // part of the compared word, so a slot freed meanwhile fails the CAS.
            match slot.word.compare_exchange_weak(
                word,
                STATE.set(word, new as u64),
                AcqRel,
                Acquire,
            ) {
                Ok(_) => return Ok((old, new)),
                Err(actual) => word = actual,
            }
        }
    }

    /// Clears the bits `drop` of the state of the allocation `key` names, and, if none of the
    /// bits `holders` remain set, frees the allocation in the same CAS (as [`Arena::free`]
    /// would: generation bumped, slot pushed or retired). Returns whether it freed.
    ///
    /// One RMW where [`Arena::update`] followed by [`Arena::free`] takes two: the scheduler's
    /// entries are freed by whoever drops the last reference bit, on every request.
    ///
    /// # Errors
    ///
    /// [`Refused::Stale`] if the key is stale; nothing is changed.
    ///
    /// # Ordering
    ///
    /// `AcqRel` on success, as in [`Arena::update`]; a freeing CAS is also the Acquire that
    /// [`Arena::free`] takes, so every write into `T` made before any transition of this
    /// allocation happens-before the slot's next owner.
    pub(crate) fn drop_bits(&self, key: Key, drop: u8, holders: u8) -> Result<bool, Refused> {
        let slot = self.slot(key).ok_or(Refused::Stale)?;
        // The generation after this one, or None when exhausted: checked, never wrapping.
        let bumped = key
            .generation
            .checked_add(1)
            .filter(|&g| g <= self.generation.max());
        let freed = self.word(bumped.unwrap_or(key.generation), FREE);
        // Relaxed: only a guess at the current word; the CAS below validates it and orders.
        let mut word = slot.word.load(Relaxed);
        loop {
            if !self.is_live(word, key) {
                return Err(Refused::Stale);
            }
            let new = STATE.get(word) as u8 & !drop;
            let last = new & holders == 0;
            debug_assert!(last || new != FREE, "FREE is reserved by the arena");
            let next = if last {
                freed
            } else {
                STATE.set(word, new as u64)
            };
            // AcqRel on success: Release publishes our writes into `T` (see `update`); Acquire
            // pairs with the previous transition's Release (and, when freeing, with every
            // earlier one, as in `free`). Relaxed on failure: the value is only re-checked.
            match slot.word.compare_exchange_weak(word, next, AcqRel, Relaxed) {
                Ok(_) => {
                    if last {
                        match bumped {
                            Some(_) => self.push(key.index),
                            None => {
                                self.retired.fetch_add(1, Relaxed);
                            }
                        }
                    }
                    return Ok(last);
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Moves the allocation `key` names from state `from` to `to` (neither [`FREE`]) in one CAS.
    ///
    /// # Errors
    ///
    /// [`Refused::Stale`] if the key is stale; [`Refused::Rejected`] with the current state if it
    /// is not `from`. Orderings as in [`Arena::update`].
    #[cfg(test)]
    pub(crate) fn compare_exchange(&self, key: Key, from: u8, to: u8) -> Result<(), Refused> {
        debug_assert!(from != FREE && to != FREE, "FREE is reserved by the arena");
        let slot = self.slot(key).ok_or(Refused::Stale)?;
        let expected = self.word(key.generation, from);
        // AcqRel on success / Acquire on failure: as in update().
        match slot
            .word
            .compare_exchange(expected, self.word(key.generation, to), AcqRel, Acquire)
        {
            Ok(_) => Ok(()),
            Err(actual) if self.is_live(actual, key) => {
                Err(Refused::Rejected(STATE.get(actual) as u8))
            }
            Err(_) => Err(Refused::Stale),
        }
    }

    /// Ends the allocation `key` names: bumps the slot's generation (so every copy of `key` is
    /// refused from now on) and returns the slot to the free list — or retires the slot for good
    /// if its generation is exhausted (F21; see [`Arena::retired`]).
    ///
    /// Contract: exactly one party frees each allocation, once nobody will act on it any more
    /// (the scheduler frees after a terminal transition it won). A concurrent [`Arena::update`]
    /// through the same key is ordered before the free or refused, never lost in between.
    ///
    /// # Errors
    ///
    /// [`Refused::Stale`] if the key is already stale (a double free); nothing is changed.
    pub(crate) fn free(&self, key: Key) -> Result<(), Refused> {
        // Dropping every bit leaves no holder: the one CAS frees (its Acquire pairs with the
        // Release of the last transition, so every write into `T` made before any transition of
        // this allocation happens-before the push, and thus before the next owner's accesses).
        let freed = self.drop_bits(key, u8::MAX, u8::MAX)?;
        debug_assert!(freed, "dropping every bit frees");
        Ok(())
    }

    /// The key of slot `index` as of its current generation.
    ///
    /// Meaningful only to a party that holds a share of the slot's current allocation (so the
    /// generation cannot move while it looks): for example a queue that received the index
    /// from the allocation's owner.
    pub(crate) fn key_at(&self, index: u32) -> Key {
        // Acquire: pairs with the Release half of the CAS or store that last wrote the word
        // (`alloc` is ordered before the index reached the caller by whatever carried it).
        let word = self.slots[index as usize].word.load(Acquire);
        Key {
            index,
            generation: self.generation.get(word),
        }
    }

    /// The user's value of slot `index` (from [`Key::index`]).
    ///
    /// # Panics
    ///
    /// If `index >= capacity`.
    pub(crate) fn get(&self, index: u32) -> &T {
        &self.slots[index as usize].value
    }

    /// The number of slots, fixed at construction.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// About how many slots are free now. Exact when no operation is in flight; while some are,
    /// it may count a slot that is being pushed or popped (never more than `capacity`).
    #[cfg(test)]
    pub(crate) fn available(&self) -> usize {
        self.free.available.load(Relaxed).min(self.capacity())
    }

    /// How many slots have been retired because their generation is exhausted (F21).
    pub(crate) fn retired(&self) -> usize {
        self.retired.load(Relaxed)
    }

    /// The slot `key` may name, or `None` if the key cannot name any slot of this arena.
    fn slot(&self, key: Key) -> Option<&Slot<T>> {
        if key.generation > self.generation.max() {
            return None;
        }
        self.slots.get(key.index as usize)
    }

    /// Whether `word` is the live allocation `key` names.
    fn is_live(&self, word: u64, key: Key) -> bool {
        self.generation.get(word) == key.generation && STATE.get(word) != FREE as u64
    }

    /// The slot word `(generation, state)`.
    fn word(&self, generation: u64, state: u8) -> u64 {
        self.generation.set(STATE.set(0, state as u64), generation)
    }

    /// The head word after `head`: `index` on top, tag incremented (wrapping within its field).
    fn next_head(head: u64, index: u32) -> u64 {
        let tag = (HEAD_TAG.get(head) + 1) & HEAD_TAG.max();
        HEAD_TAG.set(HEAD_INDEX.set(head, index as u64), tag)
    }

    /// Pops a free slot's index, or `None` if the list is empty. See [`FreeList`].
    fn pop(&self) -> Option<u32> {
        // Acquire: pairs with the Release CAS in push() that put the top index there (head CASes
        // in between are RMWs and continue its release sequence), so that push's `next` store and
        // the freeing of the slot are visible.
        let mut head = self.free.head.load(Acquire);
        loop {
            let index = HEAD_INDEX.get(head) as u32;
            if index == NIL {
                return None;
            }
            // Relaxed: ordered by the Acquire above. If `index` is popped (and pushed) by someone
            // else first, this may read their value; the tag then differs and the CAS below
            // fails, discarding it (see FreeList, "Stale next reads").
            let next = self.slots[index as usize].next.load(Relaxed);
            // Acquire on success: the slot is ours; pairs with push()'s Release as above.
            // Acquire on failure: the next iteration reads the new top's `next`.
            match self.free.head.compare_exchange_weak(
                head,
                Self::next_head(head, next),
                Acquire,
                Acquire,
            ) {
                Ok(_) => return Some(index),
                Err(actual) => head = actual,
            }
        }
    }

    /// Pushes slot `index`, which the caller owns, onto the free list.
    fn push(&self, index: u32) {
        // Counted before the slot is visible on the list, so a pop (which counts down after) never
        // takes the counter below zero.
        #[cfg(test)]
        self.free.available.fetch_add(1, Relaxed);
        let slot = &self.slots[index as usize];
        let mut head = self.free.head.load(Relaxed);
        loop {
            // Relaxed: published by the Release CAS below.
            slot.next.store(HEAD_INDEX.get(head) as u32, Relaxed);
            // Release: publishes `next` and everything done to the slot before it was freed;
            // pairs with the Acquire load and CAS in pop(). Relaxed on failure: only retried.
            match self.free.head.compare_exchange_weak(
                head,
                Self::next_head(head, index),
                Release,
                Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }
}

impl<T> fmt::Debug for Arena<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Arena")
            .field("capacity", &self.capacity())
            .field("retired", &self.retired())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
#[path = "arena_tests.rs"]
mod tests;
