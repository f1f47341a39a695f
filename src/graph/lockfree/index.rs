//! The lock-free graph's key table: an **index** (key identity → key-slot number, open
//! addressing) over the **key slots**, which removal gives back for other keys.
//!
//! A key slot has a generation (`KeySlot::sgen`), bumped when the slot is freed. An index cell
//! names a slot *and* the generation it was claimed at (`REF(slot, gen)`), and every lock-free
//! user of a key holds that pair ([`KeyRef`]) and checks it where it acts:
//!
//! - a key's state word carries the slot's generation in its high half whenever it names no
//!   producer (`word(gen, K_NONE)`, `K_WAITING`, the end states), so a publication CAS from
//!   `word(gen, K_NONE)` fails once the slot was freed (the removal moves the word to the next
//!   generation in the same RMW that detaches the key, after it tombstoned the key's cell and
//!   bumped the slot's generation, so whoever sees the moved word also sees those and looks
//!   the key up afresh instead of finding the old slot again);
//! - a state word naming a producer (`key_live`) carries the producer's generation instead; a
//!   reader that loads it (Acquire) then checks the slot's generation: a later key's
//!   publication happens after the free's bump, so a reused slot is always detected;
//! - a lookup that lands on a cell checks the slot's identity and generation (a stale cell
//!   behaves as a tombstone).
//!
//! A user that finds its slot gone (the key was removed) looks the key up again, which names a
//! fresh incarnation: the operation is ordered after the removal.
//!
//! Cells: `EMPTY(epoch)`, `REF(slot, gen)`, `TOMB` (left by removal) and `FROZEN` (while
//! entries move). Inserters skip tombstones and claim the first empty cell by one CAS from
//! `EMPTY(epoch)`, so two inserters of one key meet on the same cell. The sequence word `seq`
//! is even while the index is stable (`seq / 2` is the epoch of its empty cells) and odd while
//! entries move, which happens on two rare locked paths, both under the topology lock:
//!
//! - **Compaction** (when tombstones pass a quarter of the array, or an insert finds no empty
//!   cell and the array would stay at most half full): `seq` goes odd, a freeze pass CASes
//!   every empty cell to `FROZEN` (so no inserter can claim a cell while entries move; an
//!   insert that won a cell first is collected), the entries are rewritten in place, the
//!   frozen cells become `EMPTY` of the next epoch and `seq` goes even. It allocates nothing:
//!   its scratch (a copy of the live cells, kept under the lock) is sized to half the array
//!   whenever the array is built or replaced, the most keys it holds before it grows.
//! - **Replacement** (SPEC D51: an index grows by replacing its array). The array starts at
//!   `min(2 * slots, 64)` cells (a power of two) and grows up to `2 * slots`: when an insert
//!   leaves more than half of it live (`Gauges::keys`), or an insert finds no empty cell and
//!   compaction would not leave it half empty. `seq` goes odd; the old array's empty cells
//!   are frozen exactly as compaction does (after which no cell of the old array changes
//!   again: those not frozen hold an entry or a tombstone, which change only under the lock);
//!   a new array of twice the size is built privately, every entry placed from its home and
//!   every other cell `EMPTY` of the next epoch; it is published (Release) and `seq` goes
//!   even. The old array stays frozen for good and is retired through the epoch collector
//!   (`defer_destroy`), which frees it once no pinned reader can hold it. `shrink_index` (the
//!   engine's `shrink`, on `reset` and `shrink_to_fit`) replaces it the same way by the
//!   smallest array of at least 64 cells that keeps the live keys within a quarter of it, and
//!   gives back the compaction scratch's excess.
//!
//! Every access to the array loads the current one under an epoch pin. The engine pins at
//! each entry point, so the pins taken here are nested and cheap; correctness does not rest
//! on them: a reference to an array never outlives the pin it was loaded under.
//!
//! Races with a replacement (the compaction ones are the same but for the array's identity):
//!
//! - A lookup probing the old array that finds an entry of its key is right (the entry is
//!   checked against the slot's identity and generation, and an entry in a replaced array
//!   never changes again; one whose key was removed since reads as a tombstone). One that
//!   meets `FROZEN` asks again under the lock, where the array is the current one and stable.
//! - An `Absent` answer needs `seq` even, the same before (loaded before the array) and after
//!   the probe, and the probe's last cell an empty cell *of that epoch*. A probe of a new
//!   array loaded with an old `seq` fails the epoch check (its empty cells carry the next
//!   epoch); one that read any cell the replacement wrote (a frozen cell, or the new array's
//!   pointer) sees `seq` changed (they are written after its odd `seq`, Release, and read
//!   Acquire). A present key (its insert finished before the lookup began) is in the old array
//!   and never leaves it, or was inserted into the new array, which happened after the new
//!   array's publication and `seq`'s even store: a lookup that follows it loads the new array.
//! - A `claim` of the empty cell a `find` saw CASes that cell of the array current at the
//!   claim: after a replacement, the new array's empty cells carry a newer epoch, so the CAS
//!   fails and the claim inserts afresh; after a shrink the cell may be past the new array's
//!   end, which the claim checks. A claim (or insert) that loaded the old array races the
//!   freeze on that cell: if it wins, the freeze sees its entry and the entry is copied; if
//!   the freeze wins, the CAS fails and the inserter probes again, meets `FROZEN` or an odd
//!   `seq`, and waits on the lock. Two inserters of one key therefore meet on one cell of one
//!   array.
//! - `unindex_key`, `for_each_key`, compaction and replacement run under the topology lock,
//!   which every replacement holds throughout: they always see the current array, stable.
//! - Reclamation: a reader holds an array only while pinned; the array is retired after it
//!   was unlinked, so only readers pinned before the swap can hold it and the collector waits
//!   for them (the loom models mark a reclaimed array instead of freeing it and check that no
//!   reader reads one).

use super::*;
use crate::graph::keys::fresh_incarnation;
use crate::sync::epoch::{self, Atomic, Guard, Owned, Shared};

/// Kinds of an index cell (its low two bits).
const C_EMPTY: u64 = 0;
const C_REF: u64 = 1;
const C_FROZEN: u64 = 2;
const C_TOMB: u64 = 3;

/// Cells of a fresh index, and the least a shrink leaves (unless the index's most is less).
const INITIAL_CELLS: usize = 64;

#[inline]
fn cell_ref(r: KeyRef) -> u64 {
    u64::from(r.gen) << 32 | u64::from(r.slot) << 2 | C_REF
}

#[inline]
fn cell_empty(seq: u64) -> u64 {
    (seq >> 1) << 2 | C_EMPTY
}

#[inline]
fn unref(c: u64) -> KeyRef {
    KeyRef {
        slot: (c as u32) >> 2,
        gen: (c >> 32) as u32,
    }
}

/// A key slot as claimed at one generation: what a lock-free user of a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct KeyRef {
    pub(super) slot: u32,
    pub(super) gen: u32,
}

/// One key's state; see the module docs of `lockfree` for the state word.
pub(super) struct KeySlot {
    pub(super) ident: AtomicU64,
    pub(super) state: AtomicU64,
    /// The key's version: incarnation and generation (`keys::GEN_BITS`). Set when the slot is
    /// claimed, changed under the topology lock only; 0 once the key is removed.
    pub(super) ver: AtomicU64,
    /// Waiter list head (edge index), touched under the topology lock only.
    pub(super) waiters: AtomicU32,
    /// The slot's generation: bumped (under the topology lock) when the slot is freed.
    pub(super) sgen: AtomicU32,
    /// Free-list link.
    pub(super) next: AtomicU32,
}

impl KeySlot {
    /// A free slot at generation `gen` (0 but in tests of exhaustion), linked to `next`.
    pub(super) fn new(next: u32, gen: u32) -> Self {
        Self {
            ident: AtomicU64::new(0),
            state: AtomicU64::new(key_word(gen, K_NONE)),
            ver: AtomicU64::new(0),
            waiters: AtomicU32::new(NIL),
            sgen: AtomicU32::new(gen),
            next: AtomicU32::new(next),
        }
    }
}

/// One array of the index (a power of two of cells). Replaced whole when the index grows or
/// shrinks; a replaced array stays frozen and is reclaimed through the epoch.
pub(super) struct Cells {
    cell: Box<[AtomicU64]>,
    /// In the loom models a retired array is not freed but marked here when the epoch would
    /// free it (and leaked), so a read after its reclamation is caught instead of being
    /// undefined. Outside the model on purpose (loom sees no access to it, so it adds no
    /// interleavings): the models run one thread at a time, so a plain atomic tells whether,
    /// in the interleaving explored, the reclamation ran before a read.
    #[cfg(all(test, loom))]
    reclaimed: std::sync::atomic::AtomicBool,
}

impl Cells {
    /// `n` cells (a power of two), all `empty`.
    fn new(n: usize, empty: u64) -> Self {
        debug_assert!(n.is_power_of_two());
        Self {
            cell: (0..n).map(|_| AtomicU64::new(empty)).collect(),
            #[cfg(all(test, loom))]
            reclaimed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.cell.len()
    }

    #[inline]
    fn home(&self, ident: u64) -> usize {
        (ident.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 17) as usize & (self.cell.len() - 1)
    }

    /// In the loom models: panics if the epoch reclaimed this array (see `reclaimed`). Called
    /// after a read of its cells, by a reader still pinned.
    #[inline(always)]
    fn assert_held(&self) {
        #[cfg(all(test, loom))]
        assert!(
            !self.reclaimed.load(std::sync::atomic::Ordering::SeqCst),
            "a reader read an index array the epoch had reclaimed"
        );
    }
}

/// The index and what compaction needs.
pub(super) struct Index {
    /// The current array; never null. Replaced under the topology lock only.
    cells: Atomic<Cells>,
    /// The most cells the array grows to: `2 * slots`, a power of two.
    max: usize,
    /// The fewest cells a shrink leaves: the first array's size (it holds the keys reserved
    /// at build, SPEC D51).
    min: usize,
    /// Even: stable, `seq / 2` is the epoch of empty cells. Odd: entries are moving.
    pub(super) seq: AtomicU64,
    /// Tombstones in the current array; written under the topology lock.
    pub(super) tombs: AtomicU32,
    /// Compaction's copy of the live cells. Used under the topology lock only (so its mutex is
    /// never contended). Its capacity is half the array's, the most live keys the array holds
    /// before it grows: set when the array is built or replaced (the rare paths that allocate
    /// anyway), so a compaction allocates only if inserts in flight push the live entries past
    /// that high-water mark.
    scratch: Mutex<Vec<u64>>,
    /// Compactions run (an observation).
    pub(super) compactions: AtomicU64,
    /// Arrays replaced, by growth or shrink (an observation).
    pub(super) replacements: AtomicU64,
    /// In the loom models: replaced arrays the epoch has reclaimed (see `Cells::reclaimed`).
    #[cfg(all(test, loom))]
    reclaimed: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Index {
    /// An index over `slots` key slots: at most `2 * slots` cells (a power of two), at first
    /// [`INITIAL_CELLS`] of them or fewer.
    pub(super) fn new(slots: u32, reserve: u32) -> Self {
        let max = (slots as usize * 2).next_power_of_two();
        // Room for the reserved keys within half the array, kept through every shrink.
        let n = max.min(INITIAL_CELLS.max((reserve as usize * 2).next_power_of_two()));
        Self {
            cells: Atomic::new(Cells::new(n, cell_empty(0))),
            max,
            min: n,
            seq: AtomicU64::new(0),
            tombs: AtomicU32::new(0),
            scratch: Mutex::new(Vec::with_capacity(n / 2)),
            compactions: AtomicU64::new(0),
            replacements: AtomicU64::new(0),
            #[cfg(all(test, loom))]
            reclaimed: Default::default(),
        }
    }

    /// The current array, held for as long as `guard` stays pinned.
    #[inline]
    fn current<'g>(&self, guard: &'g Guard) -> &'g Cells {
        // Acquire: pairs with the Release swap that published the array (and its cells).
        let p = self.cells.load(Ordering::Acquire, guard);
        // SAFETY: never null (set at build, replaced only by another array), and an array
        // replaced is retired through the epoch (`retire`), so it stays allocated while
        // `guard` is pinned.
        unsafe { p.deref() }
    }

    /// Compaction's scratch (under the topology lock).
    fn scratch(&self) -> MutexGuard<'_, Vec<u64>> {
        self.scratch.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        let cells = core::mem::replace(&mut self.cells, Atomic::null());
        // SAFETY: `&mut self`: no reader can hold the index, and the current array is the
        // index's alone (each replaced one went to the epoch when it was replaced).
        drop(unsafe { cells.into_owned() });
    }
}

/// What a lock-free [`find`](LockFreeGraph::find) of a key found.
#[derive(Clone, Copy, Debug)]
pub(super) enum Found {
    /// The key's slot (valid when found).
    Key(KeyRef),
    /// Not present; the empty cell (index, value) a [`claim`](LockFreeGraph::claim) of the key
    /// may take, when the probe ended on one in a stable epoch.
    Absent(Option<(usize, u64)>),
}

/// What one probe of the index found.
enum Probe {
    Found(KeyRef),
    /// Not present; the first empty cell of the probe (index, value), if any.
    Absent(Option<(usize, u64)>),
    /// A frozen cell: entries are moving, or the array was replaced.
    Frozen,
}

impl LockFreeGraph {
    /// Whether `r` still names the slot as claimed (the key was not removed since).
    #[inline]
    pub(super) fn key_valid(&self, r: KeyRef) -> bool {
        // Acquire: a state word loaded before this (Acquire) that a later claim's publication
        // wrote makes the free's bump visible here.
        self.key(r).sgen.load(Ordering::Acquire) == r.gen
    }

    /// Whether state word `st`, loaded (Acquire) from `r`'s slot, belongs to the key `r`
    /// names: a word naming a producer is checked against the slot's generation, any other
    /// carries the generation itself.
    #[inline]
    pub(super) fn state_valid(&self, r: KeyRef, st: u64) -> bool {
        match st & 0xff {
            K_LIVE => self.key_valid(r),
            K_GONE => false,
            _ => gen_of(st) == r.gen,
        }
    }

    /// Before the node is published: the key slot it will be published on.
    pub(super) fn set_node_key(&self, me: NodeRef, r: KeyRef) {
        // SAFETY: the node is not published yet; only its submitter touches its info.
        self.node(me.idx).info.with_mut(|p| unsafe { (*p).key = r });
    }

    #[inline]
    pub(super) fn key(&self, r: KeyRef) -> &KeySlot {
        self.keys.at(r.slot)
    }

    /// Keys live now (`Gauges::keys`). Lock-free inserters count after their CAS, so under
    /// the topology lock this may trail the entries in the index by the inserts in flight.
    #[inline]
    fn live_keys(&self) -> usize {
        // Relaxed: an observation; what it decides is checked again where it matters.
        self.gauges.keys.load(Ordering::Relaxed) as usize
    }

    /// One probe of the current array.
    #[inline]
    fn probe(&self, ident: u64) -> Probe {
        // The caller's public call holds the pin (see `sync::epoch::held`).
        self.probe_in(self.index.current(epoch::held()), ident)
    }

    /// One probe of `cells` (an array loaded under a pin the caller holds).
    #[inline]
    fn probe_in(&self, cells: &Cells, ident: u64) -> Probe {
        let p = self.probe_cells(cells, ident);
        cells.assert_held();
        p
    }

    #[inline]
    fn probe_cells(&self, cells: &Cells, ident: u64) -> Probe {
        // The slice held in a local: the atomic loads below would otherwise make the compiler
        // reload its length on every step.
        let (n, cell) = (cells.len(), &*cells.cell);
        let mask = n - 1;
        let mut i = cells.home(ident);
        for _ in 0..n {
            // Acquire: pairs with the Release CAS that published the cell (the slot's identity
            // and version), with compaction's Release rewrites (after its odd `seq`) and with
            // the freeze's Release CAS (after the odd `seq` of a compaction or replacement).
            let c = cell[i].load(Ordering::Acquire);
            match c & 3 {
                C_EMPTY => return Probe::Absent(Some((i, c))),
                C_FROZEN => return Probe::Frozen,
                C_REF => {
                    let r = unref(c);
                    let slot = self.keys.at(r.slot);
                    // Acquire: orders the generation check after the identity; an identity
                    // written by a later claim brings the free's bump with it. Acquire on the
                    // generation: as in `key_valid`.
                    if slot.ident.load(Ordering::Acquire) == ident
                        && slot.sgen.load(Ordering::Acquire) == r.gen
                    {
                        return Probe::Found(r);
                    }
                }
                _ => {}
            }
            i = (i + 1) & mask;
        }
        Probe::Absent(None)
    }

    /// The key slot of `ident`, if the key exists. Lock-free; under the topology lock exact.
    pub(super) fn lookup(&self, ident: u64) -> Option<KeyRef> {
        match self.find(ident) {
            Found::Key(r) => Some(r),
            Found::Absent(_) => None,
        }
    }

    /// [`lookup`](Self::lookup), and for an absent key the empty cell a later
    /// [`claim`](Self::claim) of it can take without probing again.
    #[inline]
    pub(super) fn find(&self, ident: u64) -> Found {
        {
            // Acquire: pairs with the Release updates of `seq` by compaction and replacement.
            let s = self.index.seq.load(Ordering::Acquire);
            // Loaded after `s`: an array published since `s` carries the next epoch's empty
            // cells, which fail the epoch check below. Under the public call's pin.
            let cells = self.index.current(epoch::held());
            match self.probe_in(cells, ident) {
                // Right whatever a compaction or replacement does (checked against the slot's
                // identity and generation): an existing key is found without waiting while one
                // runs, unless the probe meets a frozen cell first.
                Probe::Found(r) => return Found::Key(r),
                Probe::Absent(at) if s & 1 == 0 => {
                    // "Absent" holds only if no entry moved under the probe: a cell it read
                    // from a compaction or replacement would show `seq` changed here.
                    let epoch_ok = at.is_none_or(|(_, c)| c == cell_empty(s));
                    // Acquire: as above.
                    if epoch_ok && self.index.seq.load(Ordering::Acquire) == s {
                        return Found::Absent(at);
                    }
                }
                _ => {}
            }
        }
        // Entries moving or just moved: ask under the lock, where the index is stable.
        let _g = self.lock();
        match self.lookup_locked(ident) {
            Some(r) => Found::Key(r),
            None => Found::Absent(None),
        }
    }

    /// [`lookup`](Self::lookup) by a holder of the topology lock.
    pub(super) fn lookup_locked(&self, ident: u64) -> Option<KeyRef> {
        match self.probe(ident) {
            Probe::Found(r) => Some(r),
            _ => None,
        }
    }

    /// The key slot of `ident`, claiming a free slot for it (a fresh incarnation at generation
    /// 0, SPEC D01) if the key does not exist. `None`: every key slot is in use. `locked`:
    /// the caller holds the topology lock.
    #[inline]
    pub(super) fn lookup_or_insert(&self, ident: u64, locked: bool) -> Option<KeyRef> {
        // The common case, a key that exists: a found entry is right whatever compaction does
        // (it was checked against the slot's identity and generation).
        if let Probe::Found(r) = self.probe(ident) {
            return Some(r);
        }
        self.insert(ident, locked, None)
    }

    /// The key slot of `ident` as [`find`](Self::find) saw it (`seen`), claiming a free slot
    /// if the key was absent: on the empty cell `find` stopped at, by one CAS, when no other
    /// inserter, compaction or replacement took it since; otherwise as
    /// [`lookup_or_insert`](Self::lookup_or_insert). A key found may have been removed since;
    /// its user checks the slot where it acts, as for any [`KeyRef`]. `locked`: the caller
    /// holds the topology lock.
    #[inline]
    pub(super) fn claim(&self, ident: u64, seen: Found, locked: bool) -> Option<KeyRef> {
        match seen {
            Found::Key(r) => Some(r),
            Found::Absent(Some((i, c))) => {
                // The probe found no entry of the key before cell `i` and cell `i` empty; cells
                // before it stay non-empty until a compaction or replacement, which changes the
                // epoch of every empty cell (a replacement's new array has only empty cells of
                // the next epoch), so a CAS from `c` that succeeds claims the key's first empty
                // cell, where a concurrent inserter of the same key must meet it.
                let r = self.new_key_slot(ident)?;
                let len = {
                    // Under the public call's pin.
                    let cells = self.index.current(epoch::held());
                    // A shrink since `find` may have left no cell `i`.
                    // Release: publishes the slot's identity and version to lookups (their
                    // Acquire); Acquire: as `insert`'s CAS, which this one stands for.
                    let won = cells.cell.get(i).is_some_and(|cell| {
                        cell.compare_exchange(c, cell_ref(r), Ordering::AcqRel, Ordering::Acquire)
                            .is_ok()
                    });
                    cells.assert_held();
                    won.then_some(cells.len())
                };
                match len {
                    Some(len) => {
                        self.key_inserted(len, locked);
                        Some(r)
                    }
                    None => self.insert(ident, locked, Some(r)),
                }
            }
            Found::Absent(None) => self.insert(ident, locked, None),
        }
    }

    /// A free key slot, its identity and a fresh incarnation at generation 0 (SPEC D01) written
    /// and not yet published (the index cell's Release CAS does). `None`: every slot is in use.
    #[inline]
    fn new_key_slot(&self, ident: u64) -> Option<KeyRef> {
        let r = self.pop_key_slot()?;
        let slot = self.key(r);
        // Release: a stale reader that loads this identity (Acquire) sees the free's
        // generation bump and skips the slot.
        slot.ident.store(ident, Ordering::Release);
        // Relaxed: published by the index cell's Release CAS.
        slot.ver.store(fresh_incarnation(), Ordering::Relaxed);
        Some(r)
    }

    /// [`lookup_or_insert`](Self::lookup_or_insert) past its first probe; `spare`: a slot
    /// already taken for the key by [`new_key_slot`](Self::new_key_slot) and not published.
    #[inline(never)]
    fn insert(&self, ident: u64, locked: bool, mut spare: Option<KeyRef>) -> Option<KeyRef> {
        let mut lock = None;
        // The length of the array the key was inserted into.
        let mut inserted = None;
        let found = loop {
            let held = locked || lock.is_some();
            // Acquire: pairs with the Release updates of `seq` by compaction and replacement.
            let s = self.index.seq.load(Ordering::Acquire);
            // Loaded after `s`, as in `find`; under the public call's pin.
            let cells = self.index.current(epoch::held());
            let probe = if s & 1 == 0 {
                self.probe_in(cells, ident)
            } else {
                Probe::Frozen
            };
            match probe {
                Probe::Found(r) => break Some(r),
                Probe::Frozen => {
                    // Entries moving: wait for them on the lock, then go on under it.
                    if !held {
                        lock = Some(self.lock());
                    }
                }
                Probe::Absent(None) => {
                    // No empty cell: compact or grow, under the lock (`cells` is not read
                    // again: the next turn loads the array anew).
                    if !held {
                        lock = Some(self.lock());
                        continue;
                    }
                    if !self.make_room() {
                        break None;
                    }
                }
                Probe::Absent(Some((i, c))) => {
                    if c != cell_empty(s) {
                        continue; // entries moved since `s`: probe again
                    }
                    let r = match spare {
                        Some(r) => r,
                        None => match self.new_key_slot(ident) {
                            Some(r) => {
                                spare = Some(r);
                                r
                            }
                            None => break None,
                        },
                    };
                    // Release: publishes the slot's identity and version to lookups (their
                    // Acquire). Acquire on failure: the winner's slot, if it is this key.
                    let won = cells.cell[i]
                        .compare_exchange(c, cell_ref(r), Ordering::AcqRel, Ordering::Acquire)
                        .is_ok();
                    cells.assert_held();
                    if won {
                        inserted = Some(cells.len());
                        spare = None;
                        break Some(r);
                    }
                }
            }
        };
        if let Some(r) = spare {
            self.push_key_slot(r.slot);
        }
        if let Some(len) = inserted {
            self.key_inserted(len, locked || lock.is_some());
        }
        drop(lock);
        found
    }

    /// Counts a key just indexed in an array of `len` cells and grows the index when that
    /// leaves more than half of it live (the rare locked path, at a new high-water mark).
    /// `locked`: the caller holds the topology lock.
    #[inline]
    fn key_inserted(&self, len: usize, locked: bool) {
        // Relaxed: an observation, and a hint for growth that is checked again under the lock.
        let live = self.gauges.keys.fetch_add(1, Ordering::Relaxed) as usize + 1;
        if live * 2 > len && len < self.index.max {
            self.grow_index(locked);
        }
    }

    /// Doubles the index's array if more than half of it is live (see the module docs).
    /// `locked`: the caller holds the topology lock.
    #[cold]
    #[inline(never)]
    fn grow_index(&self, locked: bool) {
        let _lock = (!locked).then(|| self.lock());
        let guard = epoch::pin();
        let cells = self.index.current(&guard);
        let len = cells.len();
        // Another inserter may have grown it meanwhile.
        if self.live_keys() * 2 > len && len < self.index.max {
            self.replace_cells(&guard, cells, len * 2);
        }
    }

    /// Under the topology lock, for an insert whose probe met no empty cell: compacts in place
    /// when that leaves the array at most half full (or it cannot grow), else grows it. False:
    /// neither makes room (no tombstone, and the array at its most).
    fn make_room(&self) -> bool {
        let guard = epoch::pin();
        let cells = self.index.current(&guard);
        let len = cells.len();
        // Relaxed: written under the lock held here.
        let tombs = self.index.tombs.load(Ordering::Relaxed);
        if tombs > 0 && (self.live_keys() * 2 <= len || len >= self.index.max) {
            self.compact();
        } else if len < self.index.max {
            self.replace_cells(&guard, cells, len * 2);
        } else {
            return false;
        }
        true
    }

    fn pop_key_slot(&self) -> Option<KeyRef> {
        let slot = self.keys.alloc()?;
        // Relaxed: the free list's Acquire ordered the free's bump before this.
        let gen = self.keys.at(slot).sgen.load(Ordering::Relaxed);
        Some(KeyRef { slot, gen })
    }

    fn push_key_slot(&self, slot: u32) {
        self.keys.free(slot);
    }

    /// Under the topology lock, first step of removing key `ident` (slot `r`): tombstones its
    /// cell and bumps the slot's generation, so from here on every lock-free user holding `r`
    /// finds it invalid and a lookup does not find it: one that then looks the key up again
    /// names a new incarnation instead of finding this slot (and spinning on it) until the
    /// removal is done. The state word moves next (`detach`).
    pub(super) fn unindex_key(&self, ident: u64, r: KeyRef) {
        let ix = &self.index;
        let guard = epoch::pin();
        // Under the lock: the current array, which no one replaces meanwhile.
        let cells = ix.current(&guard);
        let mask = cells.len() - 1;
        let mut i = cells.home(ident);
        let want = cell_ref(r);
        for _ in 0..cells.len() {
            // Relaxed: cells holding a reference change only under this lock.
            if cells.cell[i].load(Ordering::Relaxed) == want {
                // Release: as compaction's rewrites.
                cells.cell[i].store(C_TOMB, Ordering::Release);
                ix.tombs.fetch_add(1, Ordering::Relaxed);
                break;
            }
            i = (i + 1) & mask;
        }
        if let Some(next) = r.gen.checked_add(1) {
            // Release: pairs with `key_valid`'s Acquire: a reader that sees the new generation
            // (or a state word written after this) sees the tombstone too.
            self.key(r).sgen.store(next, Ordering::Release);
        }
    }

    /// Under the topology lock, last step of removing a key: its state word moved to the
    /// slot's next generation (`detach`) and its waiters were taken; the slot goes back to the
    /// free list, or retires if its generation is exhausted. Compaction is the caller's
    /// (`maybe_compact`).
    pub(super) fn release_key_slot(&self, r: KeyRef) {
        dec(&self.gauges.keys);
        self.key(r).waiters.store(NIL, Ordering::Relaxed);
        if r.gen.checked_add(1).is_some() {
            self.push_key_slot(r.slot);
        }
    }

    /// Under the topology lock: compacts the index when tombstones pass a quarter of it.
    pub(super) fn maybe_compact(&self) {
        let guard = epoch::pin();
        let len = self.index.current(&guard).len();
        // Relaxed: written under the lock held here.
        if self.index.tombs.load(Ordering::Relaxed) as usize * 4 >= len {
            self.compact();
        }
    }

    /// Under the topology lock: freezes `cell` if it is empty (no inserter claims it from
    /// here on; one that won it first is kept) and returns what it holds now.
    fn freeze(cell: &AtomicU64) -> u64 {
        // Acquire: pairs with an inserter's Release CAS (the slot's identity with it).
        let mut c = cell.load(Ordering::Acquire);
        while c & 3 == C_EMPTY {
            // AcqRel: wins against an inserter's CAS from the same value, or sees its cell;
            // Release orders the odd `seq` before it for a reader that meets `FROZEN`.
            match cell.compare_exchange(c, C_FROZEN, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return C_FROZEN,
                Err(cur) => c = cur,
            }
        }
        c
    }

    /// Under the topology lock: rewrites the index without tombstones, in place (see the module
    /// docs). Allocates nothing unless inserts in flight push the live entries past half the
    /// array (its scratch's capacity).
    pub(super) fn compact(&self) {
        let ix = &self.index;
        let guard = epoch::pin();
        // Under the lock: the current array, which no one replaces meanwhile.
        let cells = ix.current(&guard);
        let mask = cells.len() - 1;
        let mut scratch = ix.scratch();
        scratch.clear();
        // AcqRel: odd; Release orders it before every rewrite below for readers that check it.
        // `seq` wraps after 2^63 compactions (from odd `u64::MAX` to even 0, which keeps its
        // parity meaning) and the epoch in an empty cell keeps its low 62 bits: a CAS from an
        // old epoch's empty cell could succeed again only after 2^62 compactions between its
        // probe and its CAS.
        let s = ix.seq.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        debug_assert_eq!(s & 1, 1);
        // Freeze: no inserter claims a cell from here on; one that won a cell first is kept.
        for cell in cells.cell.iter() {
            let c = Self::freeze(cell);
            if c & 3 == C_REF {
                scratch.push(c);
            }
        }
        // Rewrite: clear (a reader meeting `FROZEN` asks under the lock), then place every
        // entry at its first free cell from home.
        for cell in cells.cell.iter() {
            // Release: orders the odd `seq` before this for a reader that loads it.
            cell.store(C_FROZEN, Ordering::Release);
        }
        for &c in scratch.iter() {
            let r = unref(c);
            // Relaxed: the freeze's Acquire load of the entry ordered the identity before it.
            let ident = self.key(r).ident.load(Ordering::Relaxed);
            let mut i = cells.home(ident);
            // Relaxed: only this thread writes cells now.
            while cells.cell[i].load(Ordering::Relaxed) != C_FROZEN {
                i = (i + 1) & mask;
            }
            // Release: as above.
            cells.cell[i].store(c, Ordering::Release);
        }
        let next = s.wrapping_add(1);
        let empty = cell_empty(next);
        for cell in cells.cell.iter() {
            // Relaxed: only this thread writes cells now.
            if cell.load(Ordering::Relaxed) == C_FROZEN {
                // Release: as above.
                cell.store(empty, Ordering::Release);
            }
        }
        ix.tombs.store(0, Ordering::Relaxed);
        // Release: even again; pairs with the Acquire loads of `seq` in lookups and inserts.
        ix.seq.store(next, Ordering::Release);
        ix.compactions.fetch_add(1, Ordering::Relaxed);
    }

    /// Under the topology lock: replaces the current array `old` by a new one of `n` cells (a
    /// power of two), or more if its live entries need them to stay within half of it (see the
    /// module docs). `old` stays frozen and is retired through the epoch.
    #[cold]
    fn replace_cells(&self, guard: &Guard, old: &Cells, n: usize) {
        let ix = &self.index;
        // AcqRel: odd, as in `compact`; Release orders it before the freeze and the new array's
        // publication for readers that check it.
        let s = ix.seq.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        debug_assert_eq!(s & 1, 1);
        // Freeze: from here on no cell of `old` changes (those not frozen hold an entry or a
        // tombstone, which change only under the lock held here).
        let mut live = 0;
        for cell in old.cell.iter() {
            if Self::freeze(cell) & 3 == C_REF {
                live += 1;
            }
        }
        let mut n = n;
        while live * 2 > n && n < ix.max {
            n *= 2;
        }
        let next = s.wrapping_add(1);
        let empty = cell_empty(next);
        let fresh = Cells::new(n, empty);
        Self::size_scratch(&mut ix.scratch(), n);
        let mask = n - 1;
        for cell in old.cell.iter() {
            // Relaxed: frozen, and the freeze read it (Acquire) before.
            let c = cell.load(Ordering::Relaxed);
            if c & 3 != C_REF {
                continue;
            }
            // Relaxed: the freeze's Acquire load of the entry ordered the identity before it.
            let ident = self.key(unref(c)).ident.load(Ordering::Relaxed);
            let mut i = fresh.home(ident);
            // Relaxed: the new array is this thread's alone until its publication below.
            while fresh.cell[i].load(Ordering::Relaxed) != empty {
                i = (i + 1) & mask;
            }
            fresh.cell[i].store(c, Ordering::Relaxed);
        }
        // Release: publishes the new array and its cells to the readers' Acquire load
        // (`Index::current`), with the odd `seq` before it.
        let prev = ix.cells.swap(Owned::new(fresh), Ordering::Release, guard);
        debug_assert!(core::ptr::eq(prev.as_raw(), old));
        ix.tombs.store(0, Ordering::Relaxed);
        // Release: even again; pairs with the Acquire loads of `seq` in lookups and inserts.
        ix.seq.store(next, Ordering::Release);
        ix.replacements.fetch_add(1, Ordering::Relaxed);
        self.retire(guard, prev);
    }

    /// Under the topology lock: sizes compaction's scratch for an array of `n` cells (half of
    /// it), growing or shrinking it.
    fn size_scratch(scratch: &mut Vec<u64>, n: usize) {
        scratch.clear();
        let want = n / 2;
        if scratch.capacity() < want {
            scratch.reserve_exact(want);
        } else {
            scratch.shrink_to(want);
        }
    }

    /// Hands a replaced array to the epoch collector, which frees it once no reader pinned
    /// before its replacement is pinned still.
    fn retire(&self, guard: &Guard, old: Shared<'_, Cells>) {
        #[cfg(not(all(test, loom)))]
        // SAFETY: `old` is unlinked (the index names its successor, and nothing else keeps
        // it), so only readers pinned before the swap can hold it, and the epoch defers its
        // destruction until they have all unpinned; it is retired once.
        unsafe {
            guard.defer_destroy(old)
        };
        #[cfg(all(test, loom))]
        {
            // The loom models keep the array and mark it reclaimed instead (`Cells::reclaimed`).
            let p = old.as_raw() as usize;
            let count = self.index.reclaimed.clone();
            guard.defer(move || {
                // SAFETY: in the models a retired array is never freed (leaked here).
                let cells = unsafe { &*(p as *const Cells) };
                cells
                    .reclaimed
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
        // Hand it to the collector now: replacements are rare, and an array left in this
        // thread's bag would wait for the bag to fill.
        guard.flush();
    }

    /// Under the topology lock (the engine's `shrink`, SPEC D51): when few keys are live,
    /// replaces the index's array by the smallest one of at least [`INITIAL_CELLS`] cells (a
    /// power of two) that keeps them within a quarter of it, retiring the old one through the
    /// epoch; and gives back the compaction scratch's capacity beyond half the array.
    pub(super) fn shrink_index(&self) {
        let ix = &self.index;
        let guard = epoch::pin();
        let cells = ix.current(&guard);
        let live = self.live_keys();
        let mut n = ix.min;
        while live * 4 > n && n < ix.max {
            n *= 2;
        }
        if n < cells.len() {
            self.replace_cells(&guard, cells, n);
        } else {
            Self::size_scratch(&mut ix.scratch(), cells.len());
        }
    }

    /// Cells in the index's array now.
    pub(super) fn index_cells(&self) -> u32 {
        let guard = epoch::pin();
        u32::try_from(self.index.current(&guard).len()).unwrap_or(u32::MAX)
    }

    /// The most cells the index's array grows to.
    pub(super) fn index_cells_max(&self) -> u32 {
        u32::try_from(self.index.max).unwrap_or(u32::MAX)
    }

    /// Sets a fresh index's sequence word to `seq` (even), with its empty cells in that epoch:
    /// tests of the epoch's wrap start near it.
    #[cfg(all(test, not(loom)))]
    fn start_index_at(&self, seq: u64) {
        assert_eq!(seq & 1, 0);
        assert_eq!(
            self.gauges.keys.load(Ordering::Relaxed),
            0,
            "a fresh index only"
        );
        self.index.seq.store(seq, Ordering::Relaxed);
        let guard = epoch::pin();
        for cell in self.index.current(&guard).cell.iter() {
            cell.store(cell_empty(seq), Ordering::Relaxed);
        }
    }

    /// Starts a fresh index at `n` cells (a power of two, at most its most) instead of its
    /// first size: the models grow a small table's index.
    #[cfg(all(test, loom))]
    pub(super) fn start_index_with(&mut self, n: usize) {
        assert!(n.is_power_of_two() && n <= self.index.max);
        assert_eq!(
            self.gauges.keys.load(Ordering::Relaxed),
            0,
            "a fresh index only"
        );
        // Relaxed: `&mut self`.
        let empty = cell_empty(self.index.seq.load(Ordering::Relaxed));
        let old = core::mem::replace(&mut self.index.cells, Atomic::new(Cells::new(n, empty)));
        // SAFETY: `&mut self`: no reader holds the old array.
        drop(unsafe { old.into_owned() });
    }

    /// Doubles the index's array now, under the topology lock, whatever its load: the growth
    /// of the models.
    #[cfg(all(test, loom))]
    pub(super) fn grow_index_now(&self) {
        let _g = self.lock();
        let guard = epoch::pin();
        let cells = self.index.current(&guard);
        self.replace_cells(&guard, cells, cells.len() * 2);
    }

    /// The compaction scratch's capacity (tests of a steady state's allocations).
    #[cfg(all(test, not(loom)))]
    fn index_scratch_capacity(&self) -> usize {
        self.index.scratch().capacity()
    }

    /// In the loom models: replaced arrays the epoch has reclaimed so far.
    #[cfg(all(test, loom))]
    pub(super) fn index_arrays_reclaimed(&self) -> usize {
        self.index
            .reclaimed
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The index cell a key's probe starts at (for models that place keys on one chain).
    #[cfg(all(test, loom))]
    pub(crate) fn key_home(&self, key: JobKey) -> usize {
        let guard = epoch::pin();
        self.index.current(&guard).home(rules::ident(key))
    }

    /// Every key slot claimed now (index cells naming a slot), for `reset`. Under the lock.
    pub(super) fn for_each_key(&self, mut f: impl FnMut(u64, KeyRef)) {
        let guard = epoch::pin();
        // Under the lock: the current array, which no one replaces meanwhile.
        for cell in self.index.current(&guard).cell.iter() {
            // Acquire: an inserter's cell claimed meanwhile (Release) comes with its identity.
            let c = cell.load(Ordering::Acquire);
            if c & 3 == C_REF {
                let r = unref(c);
                f(self.key(r).ident.load(Ordering::Relaxed), r);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::graph::Bounds;

    fn graph(keys: u32) -> LockFreeGraph {
        LockFreeGraph::new(Bounds {
            nodes: 4,
            edges: 4,
            keys,
            max_deps: 1,
            max_gen: crate::graph::Version::MAX_GENERATION,
            first_gen: 0,
            first_key_gen: 0,
            reserve: (0, 0, 0),
        })
    }

    fn remove(g: &LockFreeGraph, ident: u64) {
        let _g = g.lock();
        let r = g.lookup_locked(ident).unwrap();
        g.remove_locked(ident, r);
        g.maybe_compact();
    }

    /// Churn through a table of 8 slots (16 cells): compaction runs every 4 removals, the
    /// live keys keep their slots, and a removed key's slot serves the next key.
    #[test]
    fn d24_key_index_compacts_and_reuses_slots() {
        let _pin = crate::sync::epoch::pin();
        let g = graph(8);
        let live: Vec<KeyRef> = (1..=3)
            .map(|k| g.lookup_or_insert(k, false).unwrap())
            .collect();
        // Fewer rounds under Miri, which interprets every probe.
        let rounds: u64 = if cfg!(miri) { 40 } else { 1000 };
        for i in 0..rounds {
            let ident = 100 + i;
            let r = g.lookup_or_insert(ident, false).unwrap();
            assert_eq!(g.lookup(ident), Some(r));
            remove(&g, ident);
            assert_eq!(g.lookup(ident), None);
            assert!(!g.key_valid(r));
            for (k, &l) in live.iter().enumerate() {
                assert_eq!(g.lookup(k as u64 + 1), Some(l));
            }
        }
        assert_eq!(g.key_compactions(), rounds / 4);
        assert_eq!(g.gauges.keys.load(Ordering::Relaxed), 3);
        // Every slot usable: fill the table.
        for ident in 1000..1005 {
            assert!(g.lookup_or_insert(ident, false).is_some());
        }
        assert_eq!(g.lookup_or_insert(2000, false), None);
    }

    /// Index cells naming `ident`'s slot.
    fn cells_of(g: &LockFreeGraph, ident: u64) -> usize {
        let mut n = 0;
        g.for_each_key(|i, _| n += usize::from(i == ident));
        n
    }

    /// The index's sequence word wraps (after 2^63 compactions) without losing its meaning:
    /// started a few compactions before the wrap, churn compacts across it, every live key
    /// stays found, and an insert that saw an empty cell before the wrap cannot claim it after
    /// (its CAS from the old epoch fails; it probes again and inserts the key once).
    #[test]
    fn d24_index_epoch_wraps_across_compactions() {
        let _pin = crate::sync::epoch::pin();
        let g = graph(8);
        g.start_index_at(u64::MAX - 5);
        let live: Vec<KeyRef> = (1..=3)
            .map(|k| g.lookup_or_insert(k, false).unwrap())
            .collect();
        // A lookup of an absent key, before any compaction: the empty cell it would claim.
        let seen = g.find(77);
        assert!(matches!(seen, Found::Absent(Some(_))));
        // 4 removals per compaction: 6 compactions take `seq` from u64::MAX - 5 past the wrap.
        for i in 0..24 {
            let ident = 100 + i;
            let r = g.lookup_or_insert(ident, false).unwrap();
            remove(&g, ident);
            assert!(!g.key_valid(r));
            for (k, &l) in live.iter().enumerate() {
                assert_eq!(g.lookup(k as u64 + 1), Some(l));
            }
        }
        assert_eq!(g.key_compactions(), 6);
        let seq = g.index.seq.load(Ordering::Relaxed);
        assert!(
            seq < 12 && seq & 1 == 0,
            "seq wrapped to a small even value: {seq}"
        );
        // The pre-wrap empty cell is stale: the claim falls back to a fresh probe.
        let r = g.claim(77, seen, false).unwrap();
        assert_eq!(g.lookup(77), Some(r));
        assert_eq!(cells_of(&g, 77), 1);
        // And a claim from a current lookup takes its cell directly.
        let seen = g.find(78);
        let r = g.claim(78, seen, false).unwrap();
        assert_eq!(g.lookup(78), Some(r));
        assert_eq!(cells_of(&g, 78), 1);
        assert_eq!(g.gauges.keys.load(Ordering::Relaxed), 5);
    }

    /// Two claims of one absent key from the same lookup: the second finds the first's entry
    /// instead of inserting the key twice.
    #[test]
    fn d01_two_claims_from_one_lookup_insert_the_key_once() {
        let _pin = crate::sync::epoch::pin();
        let g = graph(8);
        let seen = g.find(5);
        let a = g.claim(5, seen, false).unwrap();
        let b = g.claim(5, seen, false).unwrap();
        assert_eq!(a, b);
        assert_eq!(cells_of(&g, 5), 1);
        assert_eq!(g.gauges.keys.load(Ordering::Relaxed), 1);
    }

    /// A key slot at its last generation (`u32::MAX`) serves one key, and on that key's removal
    /// retires: its generation does not wrap to 0 (where a holder of an old reference at
    /// generation 0 would take it for its own), it is not reused, and the table has one slot
    /// fewer.
    #[test]
    fn d22_key_slot_at_its_last_generation_retires_and_never_wraps() {
        let _pin = crate::sync::epoch::pin();
        let g = LockFreeGraph::new(Bounds {
            nodes: 4,
            edges: 4,
            keys: 2,
            max_deps: 1,
            max_gen: crate::graph::Version::MAX_GENERATION,
            first_gen: 0,
            first_key_gen: u32::MAX - 1,
            reserve: (0, 0, 0),
        });
        let a = g.lookup_or_insert(1, false).unwrap();
        let b = g.lookup_or_insert(2, false).unwrap();
        assert_eq!((a.gen, b.gen), (u32::MAX - 1, u32::MAX - 1));
        remove(&g, 1);
        // One generation left: the slot is reused at `u32::MAX`.
        let c = g.lookup_or_insert(3, false).unwrap();
        assert_eq!(
            c,
            KeyRef {
                slot: a.slot,
                gen: u32::MAX
            }
        );
        assert!(!g.key_valid(a));
        remove(&g, 3);
        // Exhausted: the slot retires. Its generation stays, its state word is gone for good.
        assert_eq!(g.key(c).sgen.load(Ordering::Relaxed), u32::MAX);
        assert_eq!(g.key(c).state.load(Ordering::Relaxed) & 0xff, K_GONE);
        assert_eq!(g.lookup(3), None);
        // Key 2 keeps the only other slot; no further key fits, even after many tries.
        assert_eq!(g.lookup_or_insert(4, false), None);
        assert_eq!(g.lookup(2), Some(b));
        remove(&g, 2);
        let d = g.lookup_or_insert(4, false).unwrap();
        assert_eq!(
            d,
            KeyRef {
                slot: b.slot,
                gen: u32::MAX
            }
        );
        assert_eq!(g.lookup_or_insert(5, false), None);
        assert_eq!(g.gauges.keys.load(Ordering::Relaxed), 1);
    }

    /// The size an index that starts at 64 cells reaches with `live` keys inserted one by
    /// one (it doubles while more than half would be live), and its doublings.
    fn grown_for(live: u64) -> (u32, u64) {
        let (mut cells, mut doublings) = (64u32, 0);
        while live * 2 > u64::from(cells) {
            cells *= 2;
            doublings += 1;
        }
        (cells, doublings)
    }

    /// Inserts every key of `keys` (lock-free), with the slot each got.
    fn insert_all(g: &LockFreeGraph, keys: impl Iterator<Item = u64>) -> Vec<(u64, KeyRef)> {
        keys.map(|k| (k, g.lookup_or_insert(k, false).unwrap()))
            .collect()
    }

    /// SPEC D51: the index starts at 64 cells and doubles while four threads insert keys (two
    /// of them the same keys, one by `find` then `claim`, the other by `lookup_or_insert`, two
    /// others keys of their own): every key stays findable at the slot its insert returned,
    /// each has one cell, and the array ends at the least size that keeps it half empty.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "six minutes under Miri even at 120 keys; the loom models of inserts and lookups \
                  racing a growth cover its interleavings, and the lookup race below runs"
    )]
    fn d51_index_grows_while_keys_are_inserted_from_several_threads() {
        let _pin = crate::sync::epoch::pin();
        let g = graph(1024);
        assert_eq!((g.index_cells(), g.index_cells_max()), (64, 2048));
        let (shared, own) = (400u64, 200u64);
        let results: Vec<Vec<(u64, KeyRef)>> = std::thread::scope(|s| {
            let g = &g;
            let threads: Vec<_> = (0..4u64)
                .map(|t| {
                    s.spawn(move || {
                        let keys: Vec<u64> = match t {
                            0 | 1 => (1..=shared).collect(),
                            _ => (0..own).map(|i| t * 10_000 + i).collect(),
                        };
                        let mut got = Vec::new();
                        for k in keys {
                            // Pinned per operation, as the engine's entry points pin.
                            let _pin = crate::sync::epoch::pin();
                            let r = if t == 0 {
                                let seen = g.find(k);
                                g.claim(k, seen, false).unwrap()
                            } else {
                                g.lookup_or_insert(k, false).unwrap()
                            };
                            assert_eq!(g.lookup(k), Some(r), "key {k} lost after its insert");
                            got.push((k, r));
                        }
                        got
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        // The two inserters of each shared key met on one cell.
        assert_eq!(results[0], results[1]);
        for &(k, r) in results.iter().flatten() {
            assert_eq!(g.lookup(k), Some(r));
            assert_eq!(cells_of(&g, k), 1, "key {k}");
        }
        let live = shared + 2 * own;
        assert_eq!(g.gauges.keys.load(Ordering::Relaxed) as u64, live);
        // 800 live keys: 2048 cells (1024 would be more than half full), five doublings.
        assert_eq!(grown_for(live), (2048, 5));
        assert_eq!(g.index_cells(), 2048);
        assert_eq!(g.index.replacements.load(Ordering::Relaxed), 5);
    }

    /// SPEC D51: readers looking up keys while another thread's inserts grow the index six
    /// times never find a present key absent: neither the keys that were there before, nor
    /// the latest key the inserter announced (after its insert returned).
    #[test]
    fn d51_lookups_racing_growth_never_answer_absent_for_a_present_key() {
        let _pin = crate::sync::epoch::pin();
        let g = graph(4096);
        let before = insert_all(&g, 1..=20);
        assert_eq!(g.index_cells(), 64);
        let announced = crate::sync::AtomicU64::new(0);
        let done = crate::sync::AtomicBool::new(false);
        let count = if cfg!(miri) { 200 } else { 3000 };
        std::thread::scope(|s| {
            let (g, before, announced, done) = (&g, &before, &announced, &done);
            s.spawn(move || {
                for k in 1000..1000 + count {
                    // Pinned per operation, as the engine's entry points pin.
                    let _pin = crate::sync::epoch::pin();
                    g.lookup_or_insert(k, false).unwrap();
                    // Release: the insert before it, for a reader that loads this (Acquire).
                    announced.store(k, Ordering::Release);
                }
                // Release: as above.
                done.store(true, Ordering::Release);
            });
            for _ in 0..2 {
                s.spawn(move || {
                    let mut rounds = 0u64;
                    loop {
                        let _pin = crate::sync::epoch::pin();
                        // Acquire: pairs with the inserter's Release (see there).
                        let finished = done.load(Ordering::Acquire);
                        // Acquire: pairs with the announcement.
                        let last = announced.load(Ordering::Acquire);
                        if last != 0 {
                            assert!(g.lookup(last).is_some(), "announced key {last} absent");
                        }
                        for &(k, r) in before {
                            assert_eq!(g.lookup(k), Some(r), "key {k} during growth");
                        }
                        rounds += 1;
                        if finished {
                            break;
                        }
                    }
                    assert!(rounds > 0);
                });
            }
        });
        // 3020 keys (220 under Miri): 8192 cells from 64 (512).
        let (cells, doublings) = grown_for(20 + count);
        assert_eq!(
            (cells, doublings),
            if cfg!(miri) { (512, 3) } else { (8192, 7) }
        );
        assert_eq!(g.index_cells(), cells);
        assert_eq!(g.index.replacements.load(Ordering::Relaxed), doublings);
        for k in 1000..1000 + count {
            assert!(g.lookup(k).is_some());
        }
    }

    /// SPEC D51: after most keys are removed, a shrink returns the index to its first size and
    /// gives back the compaction scratch's excess; the keys left are found at their slots, the
    /// removed ones are not, and the index grows again as keys come back.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a thousand inserts and removals take minutes under Miri; the growth tests run the same unsafe code there"
    )]
    fn d51_shrink_after_removing_most_keys_returns_to_the_initial_size() {
        let _pin = crate::sync::epoch::pin();
        let g = graph(1024);
        let all = insert_all(&g, 1..=1000);
        assert_eq!(g.index_cells(), 2048);
        // A shrink with every key live changes nothing.
        {
            let _l = g.lock();
            g.shrink_index();
        }
        assert_eq!(g.index_cells(), 2048);
        assert_eq!(g.index.replacements.load(Ordering::Relaxed), 5);
        let (kept, gone) = all.split_at(10);
        for &(k, _) in gone {
            remove(&g, k);
        }
        assert!(g.key_compactions() > 0);
        assert_eq!(g.index_scratch_capacity(), 1024);
        {
            let _l = g.lock();
            g.shrink_index();
        }
        assert_eq!(g.index_cells(), 64);
        assert_eq!(g.index.replacements.load(Ordering::Relaxed), 6);
        assert!((10..=32).contains(&g.index_scratch_capacity()));
        for &(k, r) in kept {
            assert_eq!(g.lookup(k), Some(r));
            assert_eq!(cells_of(&g, k), 1);
        }
        for &(k, _) in gone {
            assert_eq!(g.lookup(k), None);
        }
        // 10 live keys fit a quarter of 64: a second shrink changes nothing.
        {
            let _l = g.lock();
            g.shrink_index();
        }
        assert_eq!(g.index.replacements.load(Ordering::Relaxed), 6);
        let back = insert_all(&g, 5000..5100);
        // 110 live: 256 cells.
        assert_eq!(g.index_cells(), 256);
        for &(k, r) in kept.iter().chain(&back) {
            assert_eq!(g.lookup(k), Some(r));
        }
    }

    /// SPEC D51: a `find` that saw a key absent, then a growth, then its `claim`: the claim's
    /// CAS on the replaced array's cell cannot succeed (the new array's empty cells carry a
    /// newer epoch), it inserts afresh, and the key has one cell; a second claim from the same
    /// stale lookup finds it.
    #[test]
    fn d51_absent_then_claim_across_a_growth_inserts_the_key_once() {
        let _pin = crate::sync::epoch::pin();
        let g = graph(1024);
        let seen = g.find(77);
        assert!(matches!(seen, Found::Absent(Some(_))));
        insert_all(&g, 1000..1100);
        assert_eq!(g.index_cells(), 256);
        let a = g.claim(77, seen, false).unwrap();
        assert_eq!(g.lookup(77), Some(a));
        assert_eq!(cells_of(&g, 77), 1);
        let b = g.claim(77, seen, false).unwrap();
        assert_eq!(a, b);
        assert_eq!(cells_of(&g, 77), 1);
        assert_eq!(g.gauges.keys.load(Ordering::Relaxed), 101);
    }

    /// SPEC D51: a `claim` whose cell lies past the end of the array a shrink left falls back
    /// to a fresh insert instead of indexing out of it.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "six hundred inserts and removals take minutes under Miri; the growth tests run the same unsafe code there"
    )]
    fn d51_claim_of_a_cell_past_a_shrunk_array_inserts_afresh() {
        let _pin = crate::sync::epoch::pin();
        let g = graph(1024);
        let all = insert_all(&g, 1..=600);
        assert_eq!(g.index_cells(), 2048);
        let (k, seen) = (10_000..)
            .map(|k| (k, g.find(k)))
            .find(|(_, f)| matches!(f, Found::Absent(Some((i, _))) if *i >= 64))
            .unwrap();
        for &(k, _) in &all[5..] {
            remove(&g, k);
        }
        {
            let _l = g.lock();
            g.shrink_index();
        }
        assert_eq!(g.index_cells(), 64);
        let r = g.claim(k, seen, false).unwrap();
        assert_eq!(g.lookup(k), Some(r));
        assert_eq!(cells_of(&g, k), 1);
        assert_eq!(g.gauges.keys.load(Ordering::Relaxed), 6);
    }

    /// SPEC D51: once a remove/insert churn has reached its high-water mark, it allocates
    /// nothing: the index array is not replaced and the compaction scratch keeps its capacity,
    /// while compactions go on in place.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "four minutes under Miri; the growth tests run the same unsafe code there"
    )]
    fn d51_churn_after_warm_up_allocates_nothing() {
        let _pin = crate::sync::epoch::pin();
        let g = graph(256);
        let live = insert_all(&g, 1..=100);
        assert_eq!(g.index_cells(), 256);
        let churn = |from: u64, rounds: u64| {
            for i in from..from + rounds {
                let k = 1_000 + i;
                let r = g.lookup_or_insert(k, false).unwrap();
                assert_eq!(g.lookup(k), Some(r));
                remove(&g, k);
            }
        };
        churn(0, 200);
        let snapshot = |g: &LockFreeGraph| {
            (
                g.index_cells(),
                g.index_scratch_capacity(),
                g.index.replacements.load(Ordering::Relaxed),
            )
        };
        let warm = snapshot(&g);
        let compactions = g.key_compactions();
        churn(200, if cfg!(miri) { 200 } else { 5_000 });
        assert_eq!(snapshot(&g), warm);
        assert!(g.key_compactions() > compactions + 2);
        for &(k, r) in &live {
            assert_eq!(g.lookup(k), Some(r));
        }
    }
}
