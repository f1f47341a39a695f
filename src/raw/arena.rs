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
mod tests {
    use super::*;
    use crate::Code;
    use proptest::prelude::*;

    const QUEUED: u8 = 1;
    const GRANTED: u8 = 2;
    const CANCELLED: u8 = 3;

    fn arena(capacity: usize) -> Arena<()> {
        Arena::new(capacity).unwrap()
    }

    #[test]
    fn bad_capacity_or_generation_width_is_refused() {
        for capacity in [0, MAX_CAPACITY + 1] {
            let e = Arena::<()>::new(capacity).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument);
            assert_eq!(
                (e.reason().as_str(), e.field()),
                ("configuration", Some("capacity"))
            );
        }
        for bits in [0, MAX_GENERATION_BITS + 1] {
            let e = Arena::<()>::with_generation_bits(4, bits).unwrap_err();
            assert_eq!(e.field(), Some("generation_bits"));
        }
        assert!(Arena::<()>::with_generation_bits(1, 1).is_ok());
        assert!(Arena::<()>::with_generation_bits(1, MAX_GENERATION_BITS).is_ok());
        assert_eq!(MAX_CAPACITY, 1 << 24);
    }

    #[test]
    fn alloc_hands_out_every_slot_once_then_none() {
        let a = arena(4);
        assert_eq!((a.capacity(), a.available()), (4, 4));
        let keys: Vec<Key> = (0..4).map(|_| a.alloc(QUEUED).unwrap()).collect();
        let indices: Vec<u32> = keys.iter().map(|k| k.index()).collect();
        assert_eq!(indices, [0, 1, 2, 3]);
        assert!(keys.iter().all(|k| k.generation() == 0));
        assert!(keys.iter().all(|&k| a.state(k) == Some(QUEUED)));
        assert_eq!(a.available(), 0);
        assert_eq!(a.alloc(QUEUED), None);
        for k in keys {
            a.free(k).unwrap();
        }
        assert_eq!(a.available(), 4);
    }

    #[test]
    fn free_and_reuse_bumps_generation() {
        let a = arena(1);
        let k0 = a.alloc(QUEUED).unwrap();
        a.free(k0).unwrap();
        let k1 = a.alloc(GRANTED).unwrap();
        assert_eq!((k1.index(), k1.generation()), (0, 1));
        assert_eq!(a.state(k1), Some(GRANTED));
    }

    #[test]
    fn f30_stale_key_is_refused() {
        let a = arena(1);
        let old = a.alloc(QUEUED).unwrap();
        a.free(old).unwrap();
        // Freed and not yet reused.
        assert_eq!(a.state(old), None);
        assert_eq!(a.update(old, |_| Some(GRANTED)), Err(Refused::Stale));
        assert_eq!(
            a.compare_exchange(old, QUEUED, GRANTED),
            Err(Refused::Stale)
        );
        // Reused: the old key still touches nothing.
        let new = a.alloc(QUEUED).unwrap();
        assert_eq!(new.index(), old.index());
        let mut called = false;
        let r = a.update(old, |_| {
            called = true;
            Some(CANCELLED)
        });
        assert_eq!(r, Err(Refused::Stale));
        assert!(!called, "f must not see another allocation's state");
        assert_eq!(
            a.compare_exchange(old, QUEUED, CANCELLED),
            Err(Refused::Stale)
        );
        assert_eq!(a.state(old), None);
        assert_eq!(a.free(old), Err(Refused::Stale), "double free is refused");
        assert_eq!(a.state(new), Some(QUEUED));
        assert_eq!(a.available(), 0);
    }

    #[test]
    fn f30_key_from_foreign_u64_is_refused() {
        let a = Arena::<()>::with_generation_bits(2, 4).unwrap();
        let live = a.alloc(QUEUED).unwrap();
        assert_eq!(Key::from_u64(live.to_u64()), live);
        let out_of_range = Key::from_u64(Key { index: 2, ..live }.to_u64());
        let too_wide = Key::from_u64(
            Key {
                generation: 16,
                ..live
            }
            .to_u64(),
        );
        for k in [out_of_range, too_wide] {
            assert_eq!(a.state(k), None);
            assert_eq!(a.update(k, Some), Err(Refused::Stale));
            assert_eq!(a.compare_exchange(k, QUEUED, GRANTED), Err(Refused::Stale));
            assert_eq!(a.free(k), Err(Refused::Stale));
        }
        assert_eq!(a.state(live), Some(QUEUED));
    }

    #[test]
    fn f21_generation_exhaustion_retires_slot() {
        let a = Arena::<()>::with_generation_bits(2, 2).unwrap();
        let mut keys = Vec::new();
        for generation in 0..4 {
            let k = a.alloc(QUEUED).unwrap();
            assert_eq!((k.index(), k.generation()), (0, generation));
            a.free(k).unwrap();
            keys.push(k);
        }
        // Generation 3 was the last: slot 0 is retired, never wrapped back to generation 0.
        assert_eq!(a.retired(), 1);
        assert_eq!(a.available(), 1);
        let k = a.alloc(QUEUED).unwrap();
        assert_eq!((k.index(), k.generation()), (1, 0));
        assert_eq!(a.alloc(QUEUED), None);
        for old in keys {
            assert_eq!(a.state(old), None);
            assert_eq!(a.free(old), Err(Refused::Stale));
        }
    }

    #[test]
    fn drop_bits_frees_with_the_last_holder_bit() {
        const A: u8 = 0x10;
        const B: u8 = 0x20;
        let a = arena(1);
        let k = a.alloc(QUEUED | A | B).unwrap();
        assert_eq!(a.drop_bits(k, A, A | B), Ok(false));
        assert_eq!(a.state(k), Some(QUEUED | B));
        // Dropping a bit that is already clear changes nothing but is not an error.
        assert_eq!(a.drop_bits(k, A, A | B), Ok(false));
        assert_eq!(a.drop_bits(k, B, A | B), Ok(true));
        assert_eq!(a.state(k), None, "freed: the key is stale");
        assert_eq!(a.drop_bits(k, B, A | B), Err(Refused::Stale));
        let k1 = a.alloc(GRANTED).unwrap();
        assert_eq!((k1.index(), k1.generation()), (0, 1));
    }

    #[test]
    fn f21_drop_bits_retires_an_exhausted_slot() {
        let a = Arena::<()>::with_generation_bits(1, 1).unwrap();
        for generation in 0..2 {
            let k = a.alloc(QUEUED | 0x10).unwrap();
            assert_eq!(k.generation(), generation);
            assert_eq!(a.drop_bits(k, 0x10, 0x10), Ok(true));
        }
        assert_eq!(a.retired(), 1);
        assert_eq!(a.alloc(QUEUED), None);
    }

    #[test]
    fn update_applies_or_rejects_with_current_state() {
        let a = arena(2);
        let k = a.alloc(QUEUED).unwrap();
        assert_eq!(a.update(k, |s| Some(s + 1)), Ok((QUEUED, GRANTED)));
        assert_eq!(
            a.update(k, |s| (s == QUEUED).then_some(CANCELLED)),
            Err(Refused::Rejected(GRANTED))
        );
        assert_eq!(
            a.compare_exchange(k, QUEUED, CANCELLED),
            Err(Refused::Rejected(GRANTED))
        );
        assert_eq!(a.compare_exchange(k, GRANTED, CANCELLED), Ok(()));
        assert_eq!(a.state(k), Some(CANCELLED));
    }

    #[test]
    fn key_round_trips_through_u64() {
        for (index, generation) in [
            (0, 0),
            (1, 2),
            (MAX_CAPACITY as u32 - 1, MAX_GENERATION),
            (7, 1 << 31),
        ] {
            let k = Key { index, generation };
            assert_eq!(Key::from_u64(k.to_u64()), k);
        }
        assert_eq!(
            Key {
                index: 1,
                generation: 2
            }
            .to_u64(),
            2 << 24 | 1
        );
    }

    /// A trivially correct sequential arena: per slot a generation and a state, and a LIFO stack
    /// of free indices (the free list's order is observable, so the model pins it down).
    #[derive(Debug)]
    struct Model {
        generation: Vec<u64>,
        state: Vec<u8>,
        stack: Vec<u32>,
        max_generation: u64,
        retired: usize,
    }

    impl Model {
        fn new(capacity: usize, bits: u32) -> Self {
            Self {
                generation: vec![0; capacity],
                state: vec![FREE; capacity],
                stack: (0..capacity as u32).rev().collect(),
                max_generation: u64::MAX >> (64 - bits),
                retired: 0,
            }
        }

        fn live(&self, k: Key) -> Option<usize> {
            let i = k.index as usize;
            (self.generation[i] == k.generation && self.state[i] != FREE).then_some(i)
        }

        fn alloc(&mut self, s: u8) -> Option<Key> {
            let i = self.stack.pop()?;
            self.state[i as usize] = s;
            Some(Key {
                index: i,
                generation: self.generation[i as usize],
            })
        }

        fn free(&mut self, k: Key) -> Result<(), Refused> {
            let i = self.live(k).ok_or(Refused::Stale)?;
            self.state[i] = FREE;
            if self.generation[i] == self.max_generation {
                self.retired += 1;
            } else {
                self.generation[i] += 1;
                self.stack.push(i as u32);
            }
            Ok(())
        }

        fn update(&mut self, k: Key, to: Option<u8>) -> Result<(u8, u8), Refused> {
            let i = self.live(k).ok_or(Refused::Stale)?;
            let old = self.state[i];
            let new = to.ok_or(Refused::Rejected(old))?;
            self.state[i] = new;
            Ok((old, new))
        }

        fn compare_exchange(&mut self, k: Key, from: u8, to: u8) -> Result<(), Refused> {
            let i = self.live(k).ok_or(Refused::Stale)?;
            if self.state[i] != from {
                return Err(Refused::Rejected(self.state[i]));
            }
            self.state[i] = to;
            Ok(())
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(u8),
        /// Operations through some key handed out so far (live or stale).
        Free(prop::sample::Index),
        Update(prop::sample::Index, Option<u8>),
        CompareExchange(prop::sample::Index, u8, u8),
        State(prop::sample::Index),
    }

    fn op() -> impl Strategy<Value = Op> {
        let state = 1u8..=4;
        let key = any::<prop::sample::Index>();
        prop_oneof![
            3 => state.clone().prop_map(Op::Alloc),
            2 => key.clone().prop_map(Op::Free),
            2 => (key.clone(), proptest::option::of(state.clone()))
                .prop_map(|(k, s)| Op::Update(k, s)),
            2 => (key.clone(), state.clone(), state)
                .prop_map(|(k, a, b)| Op::CompareExchange(k, a, b)),
            1 => key.prop_map(Op::State),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

        #[test]
        fn f30_arena_matches_sequential_model(
            capacity in 1usize..=5,
            bits in prop_oneof![Just(MAX_GENERATION_BITS), 1u32..=3],
            ops in proptest::collection::vec(op(), 0..80),
        ) {
            let arena = Arena::<()>::with_generation_bits(capacity, bits).unwrap();
            let mut model = Model::new(capacity, bits);
            let mut keys: Vec<Key> = Vec::new();
            for op in ops {
                let pick = |i: prop::sample::Index| keys[i.index(keys.len())];
                match op {
                    Op::Alloc(s) => {
                        let got = arena.alloc(s);
                        prop_assert_eq!(got, model.alloc(s));
                        keys.extend(got);
                    }
                    Op::Free(i) if !keys.is_empty() => {
                        let k = pick(i);
                        prop_assert_eq!(arena.free(k), model.free(k));
                    }
                    Op::Update(i, to) if !keys.is_empty() => {
                        let k = pick(i);
                        prop_assert_eq!(arena.update(k, |_| to), model.update(k, to));
                    }
                    Op::CompareExchange(i, from, to) if !keys.is_empty() => {
                        let k = pick(i);
                        prop_assert_eq!(
                            arena.compare_exchange(k, from, to),
                            model.compare_exchange(k, from, to)
                        );
                    }
                    Op::State(i) if !keys.is_empty() => {
                        let k = pick(i);
                        prop_assert_eq!(arena.state(k), model.live(k).map(|i| model.state[i]));
                    }
                    _ => {}
                }
                prop_assert_eq!(arena.available(), model.stack.len());
                prop_assert_eq!(arena.retired(), model.retired);
            }
        }
    }

    /// Per-slot value for the stress tests: which thread believes it owns the slot (0 = none).
    #[derive(Default)]
    struct Owner(AtomicUsize);

    /// Claims slot `k` for thread `me` in the slot's own value, checking that nobody held it.
    fn claim(arena: &Arena<Owner>, k: Key, me: usize) {
        let prev = arena.get(k.index()).0.swap(me, Relaxed);
        assert_eq!(prev, 0, "slot {} owned by {prev} and {me}", k.index());
    }

    fn release(arena: &Arena<Owner>, k: Key, me: usize) {
        let prev = arena.get(k.index()).0.swap(0, Relaxed);
        assert_eq!(prev, me, "slot {} stolen from {me} by {prev}", k.index());
    }

    const THREADS: usize = 4;
    const ITERS: usize = if cfg!(miri) { 50 } else { 50_000 };

    #[test]
    fn concurrent_alloc_free_never_shares_a_slot() {
        let arena = Arena::<Owner>::new(3).unwrap();
        std::thread::scope(|s| {
            for t in 1..=THREADS {
                let arena = &arena;
                s.spawn(move || {
                    let me_state = t as u8;
                    let mut held: Vec<Key> = Vec::with_capacity(2);
                    for i in 0..ITERS {
                        if held.len() < 2 && i % 3 != 2 {
                            if let Some(k) = arena.alloc(me_state) {
                                claim(arena, k, t);
                                held.push(k);
                            }
                        } else if let Some(k) = held.pop() {
                            // Our state is still there and only we can move it.
                            assert_eq!(arena.state(k), Some(me_state));
                            arena.compare_exchange(k, me_state, me_state + 100).unwrap();
                            assert_eq!(arena.state(k), Some(me_state + 100));
                            release(arena, k, t);
                            arena.free(k).unwrap();
                            assert_eq!(arena.state(k), None);
                        }
                    }
                    for k in held {
                        release(arena, k, t);
                        arena.free(k).unwrap();
                    }
                });
            }
        });
        assert_eq!((arena.available(), arena.retired()), (3, 0));
        let mut indices: Vec<u32> = (0..3).map(|_| arena.alloc(1).unwrap().index()).collect();
        indices.sort_unstable();
        assert_eq!(indices, [0, 1, 2]);
    }

    #[test]
    fn f21_concurrent_exhaustion_retires_every_slot_once() {
        const CAPACITY: usize = 16;
        const BITS: u32 = 2;
        let arena = Arena::<Owner>::with_generation_bits(CAPACITY, BITS).unwrap();
        let total = std::thread::scope(|s| {
            let handles: Vec<_> = (1..=THREADS)
                .map(|t| {
                    let arena = &arena;
                    s.spawn(move || {
                        let mut allocations = 0usize;
                        while let Some(k) = arena.alloc(1) {
                            claim(arena, k, t);
                            allocations += 1;
                            release(arena, k, t);
                            arena.free(k).unwrap();
                        }
                        allocations
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .sum::<usize>()
        });
        // A thread stops at the first None, which may come while others still hold slots; the
        // rest are drained here.
        let mut rest = 0;
        while let Some(k) = arena.alloc(1) {
            rest += 1;
            arena.free(k).unwrap();
        }
        assert_eq!(total + rest, CAPACITY << BITS);
        assert_eq!((arena.retired(), arena.available()), (CAPACITY, 0));
    }

    /// F21 with the default width: a slot is reused past generation 2^32 - 1 (where 32-bit
    /// generations retired it) and keeps its keys exact there.
    #[test]
    fn f21_generation_continues_past_2_pow_32() {
        let _first = start_generations_at(u64::from(u32::MAX) - 1);
        let a = arena(1);
        let mut old = Vec::new();
        for step in 0..8u64 {
            let k = a.alloc(QUEUED).expect("the slot stays in service");
            assert_eq!(k.generation(), u64::from(u32::MAX) - 1 + step);
            assert_eq!(Key::from_u64(k.to_u64()), k);
            assert_eq!(a.state(k), Some(QUEUED));
            a.free(k).unwrap();
            old.push(k);
        }
        assert_eq!(a.retired(), 0);
        let live = a.alloc(GRANTED).unwrap();
        for k in old {
            assert_eq!(a.state(k), None, "a stale key past 2^32 is refused");
            assert_eq!(a.free(k), Err(Refused::Stale));
        }
        assert_eq!(a.state(live), Some(GRANTED));
    }

    /// F21 at the widest generation: the last generation is handed out once, then the slot
    /// retires; its generation never wraps back, so no earlier key is ever live again.
    #[test]
    fn f21_widest_generation_exhaustion_retires_without_wrapping() {
        let _first = start_generations_at(MAX_GENERATION - 1);
        let a = arena(2);
        let mut keys = Vec::new();
        // Slot 0 then slot 1 (LIFO): each gives its last two generations, then retires.
        for _ in 0..4 {
            let k = a.alloc(QUEUED).unwrap();
            assert!(k.generation() >= MAX_GENERATION - 1);
            assert_eq!(Key::from_u64(k.to_u64()), k);
            a.free(k).unwrap();
            keys.push(k);
        }
        assert_eq!(a.retired(), 2);
        assert_eq!(a.alloc(QUEUED), None);
        for k in keys {
            assert_eq!(a.state(k), None);
            assert_eq!(a.update(k, Some), Err(Refused::Stale));
        }
    }

    /// F21/F30 at non-default widths (a packing bug can hide behind the default): for each width,
    /// a slot at the top index starts two generations before exhaustion; its keys round-trip
    /// through `u64` exactly, a key one generation too wide is refused, and the slot retires after
    /// its last generation.
    #[test]
    fn f21_narrow_widths_pack_and_exhaust_exactly() {
        const CAPACITY: usize = 100_000;
        for bits in [
            1,
            7,
            20,
            31,
            32,
            33,
            MAX_GENERATION_BITS - 1,
            MAX_GENERATION_BITS,
        ] {
            let max = u64::MAX >> (64 - bits);
            let _first = start_generations_at(max.saturating_sub(1));
            let a = Arena::<()>::with_generation_bits(CAPACITY, bits).unwrap();
            let keys: Vec<Key> = (0..CAPACITY).map(|_| a.alloc(QUEUED).unwrap()).collect();
            let top = keys[CAPACITY - 1];
            assert_eq!(top.index(), CAPACITY as u32 - 1);
            assert_eq!(top.generation(), max.saturating_sub(1));
            assert_eq!(Key::from_u64(top.to_u64()), top, "{bits} bits");
            if bits < MAX_GENERATION_BITS {
                let too_wide = Key {
                    generation: max + 1,
                    ..top
                };
                assert_eq!(Key::from_u64(too_wide.to_u64()), too_wide);
                assert_eq!(a.state(too_wide), None, "{bits} bits");
            }
            assert_eq!(a.state(top), Some(QUEUED));
            for k in keys {
                a.free(k).unwrap();
            }
            // Every slot has its last generation left.
            let mut handed = 0;
            while let Some(k) = a.alloc(GRANTED) {
                assert_eq!(k.generation(), max);
                a.free(k).unwrap();
                handed += 1;
            }
            assert_eq!(handed, CAPACITY, "{bits} bits");
            assert_eq!(a.retired(), CAPACITY, "{bits} bits");
        }
    }

    /// Sizes past toy: 10^5 slots are each handed out once, freed, and handed out again with
    /// the next generation.
    #[test]
    fn hundred_thousand_slots_each_once_per_generation() {
        const CAPACITY: usize = 100_000;
        let a = arena(CAPACITY);
        let keys: Vec<Key> = (0..CAPACITY).map(|_| a.alloc(QUEUED).unwrap()).collect();
        assert_eq!(a.alloc(QUEUED), None);
        let mut seen = vec![false; CAPACITY];
        for k in &keys {
            assert!(!std::mem::replace(&mut seen[k.index() as usize], true));
            assert_eq!(k.generation(), 0);
        }
        for k in keys.iter().rev() {
            a.free(*k).unwrap();
        }
        assert_eq!(a.available(), CAPACITY);
        for k in keys {
            let again = a.alloc(GRANTED).unwrap();
            assert_eq!(
                again.index(),
                k.index(),
                "LIFO: freed in reverse, popped in order"
            );
            assert_eq!(again.generation(), 1);
            assert_eq!(a.state(k), None);
        }
    }

    /// F21 through the scheduler, on both engines: with every entry slot started just below
    /// 2^32, requests keep queueing and cancelling past it (with 32-bit generations the slots
    /// retired there and `enqueue` failed `queue-full` below capacity).
    mod engines {
        use crate::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
        use crate::{
            AdmittedRequest, Baseline, CancellationToken, ClassId, Code, LockFree, Mechanism,
            RequestId, Scheduler, StdMutex, TenantId,
        };
        use core::future::Future;
        use core::pin::pin;
        use core::task::{Context, Poll, Waker};

        fn reuse_past_2_pow_32<M: Mechanism>() {
            let _first = super::start_generations_at(u64::from(u32::MAX) - 2);
            let ledger = Ledger::new(LedgerConfig {
                classes: vec![ClassSpec::new("c")],
                max_tenants: 2,
                tenant_limits: Limits::UNLIMITED,
            })
            .unwrap();
            // One cell and one queue slot: three entry slots in all, reused on every request.
            let sched = Scheduler::<()>::builder(ledger.clone())
                .class(1, 1)
                .build_with::<M>()
                .unwrap();
            let admit = |id: u64| {
                let permit = ledger
                    .admit(AdmissionRequest::new(RequestId(id), TenantId(0)).class(ClassId(0)))
                    .unwrap();
                AdmittedRequest::new(permit, CancellationToken::new(RequestId(id)))
            };
            let held = sched.try_enqueue(admit(1)).unwrap();
            let mut cx = Context::from_waker(Waker::noop());
            for id in 2..40 {
                let mut f = pin!(sched.enqueue(admit(id)));
                assert!(f.as_mut().poll(&mut cx).is_pending(), "request {id} queues");
                let handle = f.handle().expect("queued");
                sched.cancel(handle).unwrap();
                match f.as_mut().poll(&mut cx) {
                    Poll::Ready(Err(e)) => assert_eq!(e.code(), Code::Cancelled, "{e}"),
                    other => panic!("request {id}: {other:?}"),
                }
                assert_eq!(sched.cancel(handle).unwrap_err().code(), Code::NotFound);
            }
            held.release();
            let a = sched.try_enqueue(admit(100)).unwrap();
            a.release();
            assert!(ledger.usage().is_zero());
        }

        #[test]
        fn f21_entry_slots_reused_past_2_pow_32_lockfree() {
            reuse_past_2_pow_32::<LockFree>();
        }

        #[test]
        fn f21_entry_slots_reused_past_2_pow_32_baseline() {
            reuse_past_2_pow_32::<Baseline<StdMutex>>();
        }
    }
}
