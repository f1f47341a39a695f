//! The version directory: MVCC roots over a fixed set of keys (SPEC V01–V04).
//!
//! A [`VersionDirectory`] records, for every key, what the host last said about it, and keeps the
//! older answers that some captured [`Root`] can still see. A root is an epoch: a
//! [`Root::lookup`] answers as the directory stood when the root was captured, whatever happened
//! since.
//!
//! # Keys, incarnations, generations, hashes
//!
//! Keys are plain `u64` values below the key capacity chosen at build
//! ([`VersionsBuilder::keys`]); a host maps its own identities (paths, node ids) onto them. Each
//! key is in one of four states:
//!
//! | state | [`Lookup`] answer | how it gets there |
//! |---|---|---|
//! | never named | `Unknown` | the start |
//! | live, content known | `Present { incarnation, generation, hash }` | `publish` |
//! | live, content pending | `Absent { incarnation, generation }` | `advance` |
//! | removed | `Absent { incarnation, generation }` (the last ones it had) | `remove` |
//!
//! - [`publish(key, hash)`](VersionDirectory::publish) records the content hash of the key's
//!   current generation. On a key that is not live (never named, or removed) it first creates a
//!   new **incarnation** (a directory-wide counter, never reused, so a re-created key orders after
//!   every version of its previous life) at generation 0. Each `(incarnation, generation)` gets at
//!   most one hash: publishing over a `Present` generation is refused
//!   (`already-exists / duplicate-key`); `advance` first.
//! - [`advance(key)`](VersionDirectory::advance) says the key's content changed: the
//!   **generation** goes up by one (checked: at its limit the call is refused with
//!   `resource-exhausted / generation-exhausted`, never wraps) and the new generation has no
//!   content yet, so the key reads `Absent` until the next `publish`.
//! - [`remove(key)`](VersionDirectory::remove) retires the incarnation: the key reads `Absent` with
//!   the incarnation and generation it had; its next `publish` starts a new incarnation.
//!
//! `advance` and `remove` of a key that is not live are refused with `not-found / unknown-key`; a
//! key at or past the capacity with `invalid-argument / key-range`.
//!
//! # Epochs and total order (V02, V03)
//!
//! Every successful transition call, a single one or a batch ([`VersionDirectory::apply`]),
//! takes the next **epoch** (a 48-bit counter, checked: `unavailable / sequence-exhausted` at its
//! end) and stamps the version records it creates with it. All records of the call are linked in
//! first, and only then does the directory's current epoch move to the new value, in one store.
//! A root captured at epoch `E` reads, for each key, the newest record stamped `<= E`, so it sees
//! either every record of a call or none: a batch that removes one key and publishes another is
//! never seen half done, and no root ever sees a call made after its capture. Transitions are
//! serialised by a writer lock (the rare, writer-side path); captures and lookups never take it.
//!
//! # Layout
//!
//! - `heads[key]`: a link (version slot, slot tag) to the key's newest record, or none.
//! - a fixed store of version records (built with [`VersionsBuilder::versions`] slots): epoch,
//!   kind, incarnation, generation, hash and a link to the key's next older record. A record's
//!   fields never change while it is in use except its older link, which reclamation shortens.
//! - `current`: one word packing the current epoch with the number of the **root slot** that
//!   counts the roots captured at that epoch. There are [`VersionsBuilder::root_epochs`] root
//!   slots; each holds a counter of live roots.
//!
//! # Capture and lookup (V01)
//!
//! [`capture`](VersionDirectory::capture) reads `current`, adds one to that root slot's counter
//! and reads `current` again; if it moved (a transition ran in between) it takes the count back
//! and tries again. It touches two words whatever the number of keys: no copy, no walk. A
//! [`Root`] is that counted reference, borrowing the directory; dropping it takes the count
//! back. [`capture_owned`](VersionDirectory::capture_owned) on an `Arc` of the directory
//! returns an [`OwnedRoot`] that holds the `Arc` instead, for roots that move between threads.
//!
//! A lookup follows the key's links from the newest record to the first one stamped at or before
//! the root's epoch. Each step checks the slot's tag after reading the record, so a record whose
//! slot was reclaimed and reused meanwhile is never believed (the walk starts again from the
//! head). Stamps strictly decrease along a walk, so it ends; it starts over only when a writer
//! reused a slot, so lookups are lock-free. Tags are 32 bits: a reader would be fooled only if
//! one slot were freed 2^32 times between two of its loads.
//!
//! Every capture at one epoch updates the same counter, so threads capturing at once share
//! that cache line (the cost stays O(1) in keys; it grows with concurrent capturers).
//!
//! # Retention (V04)
//!
//! A record stamped `a` and superseded at epoch `b` is visible to roots at epochs `a..b` and to
//! nobody else; the current record of a key is always kept. When a transition moves the epoch
//! off a root slot whose counter is not zero, the writer keeps that slot, with its epoch, on a
//! **held** list (ordered by epoch); a superseded record is reclaimed at once when no held epoch
//! falls in its range, and otherwise joins a **retired** list. A reclamation pass drops the held
//! slots whose counter reached zero and frees every retired record that no remaining held epoch
//! can see: its newer neighbour's link skips it, its tag moves on, and its slot goes back to the
//! free list. So a record is kept exactly while a live root (or the current state) can see it.
//!
//! A pass runs when a transition needs room, on [`VersionDirectory::reclaim`], and when the last
//! root of an old epoch is dropped: the drop registers a request and runs the pass itself if the
//! writer lock is free (`try_lock`, never waiting); otherwise the writer that holds the lock runs
//! it after releasing it. Once every root is dropped, the store therefore holds one record per
//! named key again (the steady state), without any further call.
//!
//! Memory is fixed at build: the store, the root slots and the writer's lists. When live roots
//! retain so many records that a transition finds no free slot even after a pass, it is refused
//! with `resource-exhausted / versions-retained`; when every root slot is held by live roots of
//! distinct old epochs, with `resource-exhausted / root-epochs`. A refused call changes no key
//! and takes no epoch (the reclamation pass it ran only freed records nobody could see).
//!
//! # Why tags, not `crossbeam-epoch`
//!
//! The race an epoch collector solves is a reader still reading a record the reclaimer wants to
//! reuse. Here records live in a store allocated once and reused, never returned to the
//! allocator, and every field is an atomic, so reading a reused slot is not undefined behaviour,
//! only a wrong answer; the per-slot tag turns that into a detected retry (the seqlock pattern:
//! fields are written with Release after the tag moves and read with Acquire before the tag is
//! checked). That costs a lookup one extra load per record instead of a pin per lookup
//! (`crossbeam_epoch::pin` costs about as much as the whole capture), allocates nothing
//! (`crossbeam-epoch` allocates a thread's record on first pin and its deferred bags as they
//! fill), frees a reclaimed slot at once instead of after every pinned thread moved on (so the
//! exhaustion bound above is exact), and the loom model covers it (`crossbeam-epoch`'s own
//! atomics are invisible to loom).
//!
//! # Example
//!
//! ```
//! use fairway::versions::{Lookup, VersionDirectory};
//!
//! let dir = VersionDirectory::builder().keys(16).versions(64).build()?;
//! dir.publish(3, 0xabc)?;
//! let before = dir.capture();
//! dir.advance(3)?;
//! let after = dir.capture();
//! assert_eq!(before.lookup(3)?, Lookup::Present { incarnation: 1, generation: 0, hash: 0xabc });
//! assert_eq!(after.lookup(3)?, Lookup::Absent { incarnation: 1, generation: 1 });
//! assert_eq!(after.lookup(4)?, Lookup::Unknown);
//! # Ok::<(), fairway::Error>(())
//! ```

use crate::raw::pack::Field;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::{Code, Error, Reason};
use crossbeam_utils::CachePadded;

#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};

#[cfg(all(test, loom))]
mod loom_versions;
#[cfg(all(test, not(loom)))]
mod tests;

/// `current`: the root slot counting roots of the current epoch, then the epoch.
const CUR_SLOT: Field = Field::first(16);
const CUR_EPOCH: Field = CUR_SLOT.next(48);

/// A link to a version record: slot number + 1 (0 = none), then the slot's tag.
const LINK_SLOT: Field = Field::first(32);
const LINK_TAG: Field = LINK_SLOT.next(32);
const NO_LINK: u64 = 0;

/// A record's `meta` word: its kind, then its epoch stamp.
const META_KIND: Field = Field::first(2);
const META_EPOCH: Field = META_KIND.next(48);

const KIND_PRESENT: u64 = 1;
const KIND_PENDING: u64 = 2;
const KIND_REMOVED: u64 = 3;

/// The largest epoch the packed words hold.
const EPOCH_MAX: u64 = CUR_EPOCH.max();
/// The most root slots `current` can name.
const ROOT_SLOTS_MAX: usize = CUR_SLOT.max() as usize;
/// The most version records a link can name (slot number + 1 must fit 32 bits).
const VERSIONS_MAX: usize = (LINK_SLOT.max() - 1) as usize;

/// What a [`Root`] says about a key (SPEC V02).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lookup {
    /// The key had never been named at the root's epoch.
    Unknown,
    /// The key had no content at the root's epoch: its generation was advanced and not yet
    /// published, or the key was removed (then these are the last incarnation and generation it
    /// had).
    Absent {
        /// The key's incarnation.
        incarnation: u64,
        /// The key's generation within that incarnation.
        generation: u64,
    },
    /// The key's content at the root's epoch.
    Present {
        /// The key's incarnation.
        incarnation: u64,
        /// The key's generation within that incarnation.
        generation: u64,
        /// The hash published for this incarnation and generation.
        hash: u64,
    },
}

/// One transition of a key, for [`VersionDirectory::apply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// [`VersionDirectory::advance`]: the next generation, content pending.
    Advance(u64),
    /// [`VersionDirectory::remove`]: the key's incarnation ends.
    Remove(u64),
    /// [`VersionDirectory::publish`]: the content hash of the current generation.
    Publish {
        /// The key.
        key: u64,
        /// Its content hash.
        hash: u64,
    },
}

impl Transition {
    fn key(self) -> u64 {
        match self {
            Transition::Advance(k) | Transition::Remove(k) => k,
            Transition::Publish { key, .. } => key,
        }
    }
}

/// How full the directory's fixed stores are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VersionOccupancy {
    /// Key capacity.
    pub keys: usize,
    /// Keys that have a record (named at least once).
    pub named_keys: usize,
    /// Version records in use (current ones plus those retained for roots).
    pub versions_used: usize,
    /// Version store capacity.
    pub versions_total: usize,
    /// Superseded records still retained because a live root may see them.
    pub retained: usize,
    /// Root slots in use (the current epoch's plus those held by roots of older epochs).
    pub root_epochs_used: usize,
    /// Root slot capacity.
    pub root_epochs_total: usize,
    /// Records created since build.
    pub created: u64,
    /// Records reclaimed since build.
    pub reclaimed: u64,
}

/// Sizes of a [`VersionDirectory`], fixed at build.
#[derive(Debug, Clone, Copy)]
pub struct VersionsBuilder {
    keys: usize,
    versions: usize,
    root_epochs: usize,
    epoch_limit: u64,
    incarnation_limit: u64,
    generation_limit: u64,
    first_epoch: u64,
    first_incarnation: u64,
}

impl Default for VersionsBuilder {
    fn default() -> Self {
        Self {
            keys: 1024,
            versions: 4096,
            root_epochs: 64,
            epoch_limit: EPOCH_MAX,
            incarnation_limit: u64::MAX,
            generation_limit: u64::MAX,
            first_epoch: 0,
            first_incarnation: 1,
        }
    }
}

impl VersionsBuilder {
    /// Key capacity: keys are `0..keys` (default 1,024; at most 2^32).
    pub fn keys(mut self, keys: usize) -> Self {
        self.keys = keys;
        self
    }

    /// Version store capacity: current records plus those retained for live roots (default
    /// 4,096; at least 1, less than 2^32 - 1).
    pub fn versions(mut self, versions: usize) -> Self {
        self.versions = versions;
        self
    }

    /// Root slots: at most `root_epochs - 1` distinct old epochs can be held by live roots at
    /// once (default 64; from 2 to 65,535).
    pub fn root_epochs(mut self, root_epochs: usize) -> Self {
        self.root_epochs = root_epochs;
        self
    }

    /// Lowers the last epoch, incarnation and generation the counters may reach, so tests can
    /// reach exhaustion without 2^48 transitions. Not for production use.
    #[doc(hidden)]
    pub fn counter_limits(mut self, epoch: u64, incarnation: u64, generation: u64) -> Self {
        self.epoch_limit = epoch.min(EPOCH_MAX);
        self.incarnation_limit = incarnation;
        self.generation_limit = generation;
        self
    }

    /// Starts the epoch and incarnation counters at these values instead of 0 and 1, so tests
    /// can run next to the counters' real ends. Not for production use.
    #[doc(hidden)]
    pub fn first_counters(mut self, epoch: u64, incarnation: u64) -> Self {
        self.first_epoch = epoch;
        self.first_incarnation = incarnation;
        self
    }

    /// Builds the directory, allocating every store.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` naming the field (`keys`, `versions`, `root_epochs`)
    /// that is out of range.
    pub fn build(self) -> Result<VersionDirectory, Error> {
        if self.keys > u32::MAX as usize + 1 {
            return Err(Error::configuration("keys"));
        }
        if self.versions == 0 || self.versions > VERSIONS_MAX {
            return Err(Error::configuration("versions"));
        }
        if self.root_epochs < 2 || self.root_epochs > ROOT_SLOTS_MAX {
            return Err(Error::configuration("root_epochs"));
        }
        if self.first_epoch > self.epoch_limit {
            return Err(Error::configuration("first_epoch"));
        }
        let root_slots = self.root_epochs;
        Ok(VersionDirectory {
            current: CachePadded::new(AtomicU64::new(pack_current(0, self.first_epoch))),
            heads: (0..self.keys).map(|_| AtomicU64::new(NO_LINK)).collect(),
            store: (0..self.versions).map(|_| Record::new()).collect(),
            roots: (0..root_slots)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            want_reclaim: AtomicU32::new(0),
            writer: Mutex::new(Writer {
                // Slot 0 is the current one; pop from the end hands out 1, 2, ...
                free_slots: (1..root_slots as u16).rev().collect(),
                held: Vec::with_capacity(root_slots),
                free_versions: (0..self.versions as u32).rev().collect(),
                newer: vec![NIL; self.versions],
                tags: vec![0; self.versions],
                retired: Vec::with_capacity(self.versions),
                batch_mark: vec![0; self.keys],
                new_links: Vec::new(),
                next_incarnation: Some(self.first_incarnation),
                named_keys: 0,
                created: 0,
                reclaimed: 0,
            }),
            limits: Limits {
                epoch: self.epoch_limit,
                incarnation: self.incarnation_limit,
                generation: self.generation_limit,
            },
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Limits {
    epoch: u64,
    incarnation: u64,
    generation: u64,
}

const NIL: u32 = u32::MAX;

/// One version record. Every field is atomic so a reader racing a reuse reads stale values, never
/// undefined ones; `tag` tells it (see the module docs).
#[derive(Debug)]
struct Record {
    /// Moves on each time the slot is freed; links carry the tag they were made with.
    tag: AtomicU32,
    meta: AtomicU64,
    incarnation: AtomicU64,
    generation: AtomicU64,
    hash: AtomicU64,
    /// The key's next older record, or none.
    older: AtomicU64,
}

impl Record {
    fn new() -> Self {
        Self {
            tag: AtomicU32::new(0),
            meta: AtomicU64::new(0),
            incarnation: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            hash: AtomicU64::new(0),
            older: AtomicU64::new(NO_LINK),
        }
    }
}

/// A superseded record still visible to the roots at epochs `from..until`.
#[derive(Debug, Clone, Copy)]
struct Retired {
    slot: u32,
    from: u64,
    until: u64,
}

/// A root slot holding the count of live roots captured at `epoch`, no longer current.
#[derive(Debug, Clone, Copy)]
struct Held {
    slot: u16,
    epoch: u64,
}

/// The writer's private state, behind the writer lock. Every vector is sized at build.
#[derive(Debug)]
struct Writer {
    free_slots: Vec<u16>,
    /// Ordered by epoch (epochs only grow, so pushes keep the order).
    held: Vec<Held>,
    free_versions: Vec<u32>,
    /// Per record: the key's next newer record (the one whose `older` link names it), or `NIL`.
    newer: Vec<u32>,
    /// Per record: its current tag (the writer's copy of `Record::tag`).
    tags: Vec<u32>,
    retired: Vec<Retired>,
    /// Per key: the epoch of the last call that touched it, to refuse a key twice in one batch.
    batch_mark: Vec<u64>,
    /// Scratch for one call's new records (reserved on first use, then reused).
    new_links: Vec<(usize, Decoded)>,
    /// The next incarnation to hand out; `None` once the counter passed `u64::MAX`.
    next_incarnation: Option<u64>,
    named_keys: usize,
    created: u64,
    reclaimed: u64,
}

/// A record's contents, as the writer decodes or plans it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decoded {
    kind: u64,
    incarnation: u64,
    generation: u64,
    hash: u64,
}

/// The version directory (SPEC V01–V04); see the [module docs](self).
#[derive(Debug)]
pub struct VersionDirectory {
    current: CachePadded<AtomicU64>,
    heads: Box<[AtomicU64]>,
    store: Box<[Record]>,
    roots: Box<[CachePadded<AtomicU64>]>,
    /// Reclamation requests from dropped roots not yet served by a pass.
    want_reclaim: AtomicU32,
    writer: Mutex<Writer>,
    limits: Limits,
}

/// A captured epoch of a [`VersionDirectory`] and a lease on every record it can see (SPEC V04).
///
/// Cloning a root takes another lease on the same epoch; dropping the last one lets the records
/// only it could see be reclaimed.
#[derive(Debug)]
pub struct Root<'d> {
    dir: &'d VersionDirectory,
    epoch: u64,
    slot: u16,
}

#[inline]
fn pack_current(slot: u16, epoch: u64) -> u64 {
    CUR_EPOCH.set(CUR_SLOT.set(0, u64::from(slot)), epoch)
}

#[inline]
fn link(slot: u32, tag: u32) -> u64 {
    LINK_TAG.set(LINK_SLOT.set(0, u64::from(slot) + 1), u64::from(tag))
}

/// `(slot, tag)` of a link, or `None`.
#[inline]
fn unlink(word: u64) -> Option<(usize, u32)> {
    match LINK_SLOT.get(word) {
        0 => None,
        s => Some(((s - 1) as usize, LINK_TAG.get(word) as u32)),
    }
}

fn key_range() -> Error {
    Error::new(Code::InvalidArgument, Reason::KeyRange)
}

impl VersionDirectory {
    /// A builder with the default sizes.
    pub fn builder() -> VersionsBuilder {
        VersionsBuilder::default()
    }

    /// Captures a root at the current epoch, in O(1) whatever the number of keys (SPEC V01).
    ///
    /// Lock-free: it starts over only when a transition completed meanwhile.
    pub fn capture(&self) -> Root<'_> {
        let (epoch, slot) = self.lease();
        Root {
            dir: self,
            epoch,
            slot,
        }
    }

    /// [`capture`](Self::capture) for a directory behind an `Arc`: the root keeps the directory
    /// alive, so it can move to another thread or outlive the caller's scope. Also O(1); it adds
    /// one reference count to the `Arc`.
    pub fn capture_owned(self: &std::sync::Arc<Self>) -> OwnedRoot {
        let (epoch, slot) = self.lease();
        OwnedRoot {
            dir: std::sync::Arc::clone(self),
            epoch,
            slot,
        }
    }

    /// Counts a new root on the current epoch's root slot; returns the epoch and the slot.
    fn lease(&self) -> (u64, u16) {
        loop {
            // Acquire: pairs with the Release of the transition's swap, so every record of
            // that epoch is visible to this root's lookups.
            let cur = self.current.load(Ordering::Acquire);
            capture_step();
            let slot = CUR_SLOT.get(cur) as u16;
            // AcqRel RMW: pairs with the writer's `fetch_add(0)` on the same counter after it
            // moved `current` (see `transition`): either the writer's read sees this count, or
            // this RMW reads after the writer's and the load below sees the move.
            self.roots[slot as usize].fetch_add(1, Ordering::AcqRel);
            capture_step();
            // Acquire: pairs with the transition's swap of `current`.
            let again = self.current.load(Ordering::Acquire);
            capture_step();
            if again == cur {
                return (CUR_EPOCH.get(cur), slot);
            }
            self.release(slot);
        }
    }

    /// The current epoch: the number of successful transition calls since build.
    pub fn epoch(&self) -> u64 {
        // Acquire: pairs with the transition's swap of `current`.
        CUR_EPOCH.get(self.current.load(Ordering::Acquire))
    }

    /// The next generation of a live key, content pending. Returns the new epoch.
    ///
    /// # Errors
    ///
    /// See [`VersionDirectory::apply`].
    pub fn advance(&self, key: u64) -> Result<u64, Error> {
        self.apply(&[Transition::Advance(key)])
    }

    /// Ends a live key's incarnation. Returns the new epoch.
    ///
    /// # Errors
    ///
    /// See [`VersionDirectory::apply`].
    pub fn remove(&self, key: u64) -> Result<u64, Error> {
        self.apply(&[Transition::Remove(key)])
    }

    /// Publishes the content hash of the key's current generation (creating a new incarnation
    /// if the key is not live). Returns the new epoch.
    ///
    /// # Errors
    ///
    /// See [`VersionDirectory::apply`].
    pub fn publish(&self, key: u64, hash: u64) -> Result<u64, Error> {
        self.apply(&[Transition::Publish { key, hash }])
    }

    /// Applies `batch` at one new epoch, all or nothing: a root sees every transition of the
    /// batch or none (SPEC V03). Returns the new epoch. An empty batch changes nothing and
    /// returns the current epoch.
    ///
    /// # Errors
    ///
    /// Nothing is changed when any of these is returned:
    /// - `invalid-argument / key-range`: a key at or past the key capacity;
    /// - `invalid-argument / duplicate-key`: a key twice in the batch;
    /// - `not-found / unknown-key`: `advance` or `remove` of a key that is not live;
    /// - `already-exists / duplicate-key`: `publish` over a generation that has its hash;
    /// - `resource-exhausted / generation-exhausted`: `advance` past the generation limit;
    /// - `unavailable / sequence-exhausted`: the epoch or the incarnation counter is at its end;
    /// - `resource-exhausted / versions-retained`: no free record even after reclaiming every
    ///   record no live root can see;
    /// - `resource-exhausted / root-epochs`: every root slot is held by live roots.
    pub fn apply(&self, batch: &[Transition]) -> Result<u64, Error> {
        let mut w = self.lock();
        let result = self.transition(&mut w, batch);
        drop(w);
        self.serve_reclaim_requests();
        result
    }

    /// Runs a reclamation pass now (the directory also runs one when it needs room and when a
    /// root's drop leaves an old epoch without roots). Returns the number of records reclaimed.
    pub fn reclaim(&self) -> usize {
        let mut w = self.lock();
        let n = self.reclaim_pass(&mut w);
        drop(w);
        self.serve_reclaim_requests();
        n
    }

    /// How full the fixed stores are. Takes the writer lock.
    pub fn occupancy(&self) -> VersionOccupancy {
        let w = self.lock();
        VersionOccupancy {
            keys: self.heads.len(),
            named_keys: w.named_keys,
            versions_used: self.store.len() - w.free_versions.len(),
            versions_total: self.store.len(),
            retained: w.retired.len(),
            root_epochs_used: self.roots.len() - w.free_slots.len(),
            root_epochs_total: self.roots.len(),
            created: w.created,
            reclaimed: w.reclaimed,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes back one count of `slot` (a dropped root or a capture that starts over); asks for
    /// a reclamation pass when that was the last root of an epoch no longer current.
    fn release(&self, slot: u16) {
        // AcqRel RMW: Release so this root's reads happen before a reclaimer that sees the
        // count at zero; pairs with the writer's `fetch_add(0)` after its swap of `current`.
        if self.roots[slot as usize].fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        // Acquire: pairs with the transition's swap. If the slot is still current, the writer
        // that moves off it will read the counter after this RMW and free the slot itself.
        if CUR_SLOT.get(self.current.load(Ordering::Acquire)) == u64::from(slot) {
            return;
        }
        // AcqRel RMW: pairs with the `fetch_add(0)` a lock holder makes after unlocking in
        // `serve_reclaim_requests`: one of the two sees the other (see there).
        self.want_reclaim.fetch_add(1, Ordering::AcqRel);
        self.serve_reclaim_requests();
    }

    /// Runs passes while reclamation requests are pending and the writer lock is free; never
    /// waits. A request made while another thread holds the lock is served by that thread, which
    /// calls this after unlocking: its RMW on `want_reclaim` either reads after the request (and
    /// sees it) or before it, and then its unlock happened before the requester's `try_lock`,
    /// which therefore finds the lock free or taken by a later holder that will check in turn.
    fn serve_reclaim_requests(&self) {
        loop {
            // AcqRel RMW (a read that orders like a write): pairs with `release`'s fetch_add.
            if self.want_reclaim.fetch_add(0, Ordering::AcqRel) == 0 {
                return;
            }
            let mut w = match self.writer.try_lock() {
                Ok(w) => w,
                // A poisoned lock is taken over, as `lock` does.
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return,
            };
            // AcqRel: pairs with `release`'s fetch_add; the pass below starts after every
            // request this swap consumed.
            self.want_reclaim.swap(0, Ordering::AcqRel);
            self.reclaim_pass(&mut w);
        }
    }

    fn transition(&self, w: &mut Writer, batch: &[Transition]) -> Result<u64, Error> {
        // Relaxed: only the writer stores `current`, and it holds the lock.
        let cur = self.current.load(Ordering::Relaxed);
        let old_epoch = CUR_EPOCH.get(cur);
        let old_slot = CUR_SLOT.get(cur) as u16;
        if batch.is_empty() {
            return Ok(old_epoch);
        }
        let epoch = match old_epoch.checked_add(1) {
            Some(e) if e <= self.limits.epoch => e,
            _ => return Err(Error::new(Code::Unavailable, Reason::SequenceExhausted)),
        };
        // Plan: check every transition before changing anything.
        let planned = self.plan(w, batch, epoch).and_then(|new_incarnations| {
            // Room: one record per transition and a root slot for the new epoch.
            if w.free_versions.len() < batch.len() || w.free_slots.is_empty() {
                self.reclaim_pass(w);
            }
            if w.free_versions.len() < batch.len() {
                return Err(Error::new(
                    Code::ResourceExhausted,
                    Reason::VersionsRetained,
                ));
            }
            match w.free_slots.pop() {
                Some(slot) => Ok((new_incarnations, slot)),
                None => Err(Error::new(Code::ResourceExhausted, Reason::RootEpochs)),
            }
        });
        let (new_incarnations, new_slot) = match planned {
            Ok(p) => p,
            Err(e) => {
                // A refused call leaves no mark behind (the next call reuses this epoch).
                for t in batch {
                    if let Some(m) = usize::try_from(t.key())
                        .ok()
                        .and_then(|k| w.batch_mark.get_mut(k))
                    {
                        if *m == epoch {
                            *m = 0;
                        }
                    }
                }
                return Err(e);
            }
        };
        w.next_incarnation = w
            .next_incarnation
            .and_then(|n| n.checked_add(new_incarnations));
        // Link every new record in. Roots at older epochs skip them (stamp > their epoch); no
        // root sees the new epoch before `current` moves below.
        let first_retired = w.retired.len();
        for i in 0..w.new_links.len() {
            let (key, d) = w.new_links[i];
            let slot = w.free_versions.pop().expect("room checked above");
            let rec = &self.store[slot as usize];
            // Relaxed: the head is written only by the writer, under the lock.
            let old_head = self.heads[key].load(Ordering::Relaxed);
            // Release stores: a reader that loads any of them (Acquire) before checking the
            // tag sees the tag bump of the slot's previous free (see the module docs).
            rec.meta.store(
                META_EPOCH.set(META_KIND.set(0, d.kind), epoch),
                Ordering::Release,
            );
            rec.incarnation.store(d.incarnation, Ordering::Release);
            rec.generation.store(d.generation, Ordering::Release);
            rec.hash.store(d.hash, Ordering::Release);
            rec.older.store(old_head, Ordering::Release);
            // Release: pairs with the lookup's Acquire load of the head; publishes the fields.
            self.heads[key].store(link(slot, w.tags[slot as usize]), Ordering::Release);
            w.newer[slot as usize] = NIL;
            w.created += 1;
            match unlink(old_head) {
                Some((old, _)) => {
                    w.newer[old] = slot;
                    // Relaxed: the writer's own earlier store.
                    let from = META_EPOCH.get(self.store[old].meta.load(Ordering::Relaxed));
                    w.retired.push(Retired {
                        slot: old as u32,
                        from,
                        until: epoch,
                    });
                }
                None => w.named_keys += 1,
            }
        }
        // Publish the epoch. AcqRel: Release publishes the records linked above to captures
        // that load `current` (Acquire); the RMW orders it before the counter read below.
        self.current
            .swap(pack_current(new_slot, epoch), Ordering::AcqRel);
        // AcqRel RMW: pairs with `capture`'s fetch_add and `release`'s fetch_sub (see there):
        // a root that validated against the old epoch is counted here.
        if self.roots[old_slot as usize].fetch_add(0, Ordering::AcqRel) == 0 {
            w.free_slots.push(old_slot);
        } else {
            w.held.push(Held {
                slot: old_slot,
                epoch: old_epoch,
            });
        }
        // Records superseded now that no held epoch can see go at once.
        let mut i = first_retired;
        while i < w.retired.len() {
            let r = w.retired[i];
            if held_in(&w.held, r.from, r.until) {
                i += 1;
            } else {
                w.retired.swap_remove(i);
                self.free_record(w, r.slot);
            }
        }
        Ok(epoch)
    }

    /// Checks every transition of `batch` against the keys' current records and fills
    /// `w.new_links` with the records to create. Returns the number of new incarnations.
    fn plan(&self, w: &mut Writer, batch: &[Transition], epoch: u64) -> Result<u64, Error> {
        let mut new_incarnations = 0u64;
        w.new_links.clear();
        for t in batch {
            let key = usize::try_from(t.key()).map_err(|_| key_range())?;
            if key >= self.heads.len() {
                return Err(key_range());
            }
            if w.batch_mark[key] == epoch {
                return Err(Error::new(Code::InvalidArgument, Reason::DuplicateKey));
            }
            w.batch_mark[key] = epoch;
            let live = self.head_of(key).filter(|h| h.kind != KIND_REMOVED);
            let next = match (*t, live) {
                (Transition::Advance(_), Some(h)) => match h.generation.checked_add(1) {
                    Some(generation) if generation <= self.limits.generation => Decoded {
                        kind: KIND_PENDING,
                        generation,
                        hash: 0,
                        ..h
                    },
                    _ => {
                        return Err(Error::new(
                            Code::ResourceExhausted,
                            Reason::GenerationExhausted,
                        ))
                    }
                },
                (Transition::Remove(_), Some(h)) => Decoded {
                    kind: KIND_REMOVED,
                    ..h
                },
                (Transition::Advance(_) | Transition::Remove(_), None) => {
                    return Err(Error::new(Code::NotFound, Reason::UnknownKey))
                }
                (Transition::Publish { hash, .. }, Some(h)) if h.kind == KIND_PENDING => Decoded {
                    kind: KIND_PRESENT,
                    hash,
                    ..h
                },
                (Transition::Publish { .. }, Some(_)) => {
                    return Err(Error::new(Code::AlreadyExists, Reason::DuplicateKey))
                }
                (Transition::Publish { hash, .. }, None) => {
                    match w
                        .next_incarnation
                        .and_then(|n| n.checked_add(new_incarnations))
                    {
                        Some(incarnation) if incarnation <= self.limits.incarnation => {
                            new_incarnations += 1;
                            Decoded {
                                kind: KIND_PRESENT,
                                incarnation,
                                generation: 0,
                                hash,
                            }
                        }
                        _ => return Err(Error::new(Code::Unavailable, Reason::SequenceExhausted)),
                    }
                }
            };
            w.new_links.push((key, next));
        }
        Ok(new_incarnations)
    }

    /// The writer's view of a key's newest record.
    fn head_of(&self, key: usize) -> Option<Decoded> {
        // Relaxed: heads and records are written only by the writer, which holds the lock.
        let (slot, _) = unlink(self.heads[key].load(Ordering::Relaxed))?;
        let rec = &self.store[slot];
        Some(Decoded {
            kind: META_KIND.get(rec.meta.load(Ordering::Relaxed)),
            incarnation: rec.incarnation.load(Ordering::Relaxed),
            generation: rec.generation.load(Ordering::Relaxed),
            hash: rec.hash.load(Ordering::Relaxed),
        })
    }

    /// Drops held root slots whose roots are all gone, then frees every retired record no
    /// remaining held epoch can see. Returns the number of records freed.
    fn reclaim_pass(&self, w: &mut Writer) -> usize {
        let Writer {
            held, free_slots, ..
        } = w;
        held.retain(|h| {
            // Acquire: pairs with `release`'s fetch_sub, so the dropped roots' reads happened
            // before any slot freed below is reused.
            let live = self.roots[h.slot as usize].load(Ordering::Acquire) != 0;
            if !live {
                free_slots.push(h.slot);
            }
            live
        });
        let mut freed = 0;
        let mut i = 0;
        while i < w.retired.len() {
            let r = w.retired[i];
            if held_in(&w.held, r.from, r.until) {
                i += 1;
            } else {
                w.retired.swap_remove(i);
                self.free_record(w, r.slot);
                freed += 1;
            }
        }
        freed
    }

    /// Unlinks a superseded record from its key's chain and returns its slot to the free list.
    fn free_record(&self, w: &mut Writer, slot: u32) {
        let s = slot as usize;
        let newer = w.newer[s];
        debug_assert_ne!(newer, NIL, "only superseded records are freed");
        // Relaxed: the writer's own earlier store.
        let older = self.store[s].older.load(Ordering::Relaxed);
        // Release: a reader that follows the shortened link sees the older record's fields.
        self.store[newer as usize]
            .older
            .store(older, Ordering::Release);
        if let Some((o, _)) = unlink(older) {
            w.newer[o] = newer;
        }
        w.newer[s] = NIL;
        let tag = w.tags[s].wrapping_add(1);
        w.tags[s] = tag;
        // Release: pairs with the lookup's Acquire load of the tag, so a reader that sees the
        // new tag (and starts over) also sees the newer neighbour's shortened link above and
        // walks around this record. It is also ordered before the slot's next field stores,
        // which are Release (see the module docs: a reader that sees any of those sees this
        // tag).
        self.store[s].tag.store(tag, Ordering::Release);
        w.free_versions.push(slot);
        w.reclaimed += 1;
    }

    /// What `key` reads at `epoch` (see [`Root::lookup`]).
    fn lookup_at(&self, key: usize, epoch: u64) -> Lookup {
        'restart: loop {
            // Acquire: pairs with the writer's Release store of the head.
            let mut at = self.heads[key].load(Ordering::Acquire);
            loop {
                let Some((slot, tag)) = unlink(at) else {
                    return Lookup::Unknown;
                };
                let rec = &self.store[slot];
                // Acquire loads: pair with the writer's Release stores of the fields; a value
                // from a reuse of the slot brings the reuse's tag bump with it.
                let meta = rec.meta.load(Ordering::Acquire);
                let older = rec.older.load(Ordering::Acquire);
                let found = META_EPOCH.get(meta) <= epoch;
                let answer = if found {
                    let incarnation = rec.incarnation.load(Ordering::Acquire);
                    let generation = rec.generation.load(Ordering::Acquire);
                    match META_KIND.get(meta) {
                        KIND_PRESENT => Lookup::Present {
                            incarnation,
                            generation,
                            hash: rec.hash.load(Ordering::Acquire),
                        },
                        _ => Lookup::Absent {
                            incarnation,
                            generation,
                        },
                    }
                } else {
                    Lookup::Unknown
                };
                // Acquire: pairs with `free_record`'s Release store of the tag (a changed tag
                // brings the shortened link with it); ordered after the field loads above.
                if rec.tag.load(Ordering::Acquire) != tag {
                    continue 'restart;
                }
                if found {
                    return answer;
                }
                at = older;
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
thread_local! {
    /// Shared-memory accesses made by `capture` on this thread (the V01 operation count).
    static CAPTURE_STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts one shared-memory access of `capture` (test builds only).
#[inline(always)]
fn capture_step() {
    #[cfg(all(test, not(loom)))]
    CAPTURE_STEPS.with(|c| c.set(c.get() + 1));
}

/// Whether some held epoch lies in `from..until` (`held` is ordered by epoch).
fn held_in(held: &[Held], from: u64, until: u64) -> bool {
    let i = held.partition_point(|h| h.epoch < from);
    held.get(i).is_some_and(|h| h.epoch < until)
}

impl Root<'_> {
    /// The epoch this root was captured at.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// What `key` was at this root's epoch (SPEC V02). Lock-free; O(number of records of the key
    /// newer than the root that are still retained).
    ///
    /// # Errors
    ///
    /// `invalid-argument / key-range` for a key at or past the key capacity.
    pub fn lookup(&self, key: u64) -> Result<Lookup, Error> {
        let k = usize::try_from(key).map_err(|_| key_range())?;
        if k >= self.dir.heads.len() {
            return Err(key_range());
        }
        Ok(self.dir.lookup_at(k, self.epoch))
    }
}

/// A [`Root`] that owns a reference to its directory ([`VersionDirectory::capture_owned`]).
#[derive(Debug)]
pub struct OwnedRoot {
    dir: std::sync::Arc<VersionDirectory>,
    epoch: u64,
    slot: u16,
}

impl OwnedRoot {
    /// The epoch this root was captured at.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// What `key` was at this root's epoch; see [`Root::lookup`].
    ///
    /// # Errors
    ///
    /// `invalid-argument / key-range` for a key at or past the key capacity.
    pub fn lookup(&self, key: u64) -> Result<Lookup, Error> {
        let k = usize::try_from(key).map_err(|_| key_range())?;
        if k >= self.dir.heads.len() {
            return Err(key_range());
        }
        Ok(self.dir.lookup_at(k, self.epoch))
    }
}

impl Clone for OwnedRoot {
    fn clone(&self) -> Self {
        // AcqRel RMW: as in `Root::clone`.
        self.dir.roots[self.slot as usize].fetch_add(1, Ordering::AcqRel);
        OwnedRoot {
            dir: std::sync::Arc::clone(&self.dir),
            epoch: self.epoch,
            slot: self.slot,
        }
    }
}

impl Drop for OwnedRoot {
    fn drop(&mut self) {
        self.dir.release(self.slot);
    }
}

impl Clone for Root<'_> {
    fn clone(&self) -> Self {
        // AcqRel RMW: the slot already counts this root, so it stays held; pairs with the
        // reclaimer's Acquire load like any count.
        self.dir.roots[self.slot as usize].fetch_add(1, Ordering::AcqRel);
        Root {
            dir: self.dir,
            epoch: self.epoch,
            slot: self.slot,
        }
    }
}

impl Drop for Root<'_> {
    fn drop(&mut self) {
        self.dir.release(self.slot);
    }
}
