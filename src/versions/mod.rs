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

use crate::error::{Code, Error, Reason};
use crate::raw::pack::Field;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};

mod builder;
mod root;
mod writer;

use builder::Limits;
pub use builder::VersionsBuilder;
pub use root::{OwnedRoot, Root};

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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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
        // Dropping the lock serves the reclamation requests made meanwhile.
        self.transition(&mut w, batch)
    }

    /// Runs a reclamation pass now (the directory also runs one when it needs room and when a
    /// root's drop leaves an old epoch without roots). Returns the number of records reclaimed.
    pub fn reclaim(&self) -> usize {
        let mut w = self.lock();
        self.reclaim_pass(&mut w)
    }

    /// How full the fixed stores are. Takes the writer lock (and, releasing it, serves the
    /// reclamation requests of roots dropped while it was held, as every holder does).
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
