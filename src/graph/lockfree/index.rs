//! The lock-free graph's key table: an **index** (key identity → key-slot number, open
//! addressing) over a fixed array of **key slots** that removal gives back for other keys.
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
//! Cells: `EMPTY(epoch)`, `REF(slot, gen)`, `TOMB` (left by removal) and `FROZEN` (during
//! compaction). Inserters skip tombstones and claim the first empty cell by one CAS from
//! `EMPTY(epoch)`, so two inserters of one key meet on the same cell. **Compaction** is the
//! rare locked path (under the topology lock, when tombstones pass a quarter of the index):
//! the sequence word `seq` goes odd, a freeze pass CASes every empty cell to `FROZEN` (so no
//! inserter can claim a cell while entries move; an insert that won a cell first is collected),
//! the entries are rewritten in place, the frozen cells become `EMPTY` of the next epoch and
//! `seq` goes even. A reader that meets `FROZEN`, or whose "absent" answer saw `seq` change,
//! asks again under the lock; an inserter's CAS from the old epoch's `EMPTY` fails. Nothing is
//! freed or replaced: the index, the slots and the compaction scratch are allocated at build,
//! so no reader can hold memory that goes away and there is nothing for an epoch collector to
//! reclaim.

use super::*;
use crate::graph::keys::fresh_incarnation;

/// Kinds of an index cell (its low two bits).
const C_EMPTY: u64 = 0;
const C_REF: u64 = 1;
const C_FROZEN: u64 = 2;
const C_TOMB: u64 = 3;

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

/// The index and what compaction needs, allocated at build.
pub(super) struct Index {
    pub(super) cells: Box<[AtomicU64]>,
    /// Even: stable, `seq / 2` is the epoch of empty cells. Odd: compaction under way.
    pub(super) seq: AtomicU64,
    /// Tombstones in `cells`; written under the topology lock.
    pub(super) tombs: AtomicU32,
    /// Compaction's copy of the live cells (one per key slot); used under the topology lock.
    scratch: Box<[AtomicU64]>,
    /// Compactions run (an observation).
    pub(super) compactions: AtomicU64,
}

impl Index {
    /// An index of `2 * slots` cells (a power of two) over `slots` key slots.
    pub(super) fn new(slots: u32) -> Self {
        let n = (slots as usize * 2).next_power_of_two();
        Self {
            cells: (0..n).map(|_| AtomicU64::new(cell_empty(0))).collect(),
            seq: AtomicU64::new(0),
            tombs: AtomicU32::new(0),
            scratch: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            compactions: AtomicU64::new(0),
        }
    }

    #[inline]
    fn home(&self, ident: u64) -> usize {
        (ident.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 17) as usize & (self.cells.len() - 1)
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
    /// A frozen cell: compaction is under way.
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

    #[inline]
    fn probe(&self, ident: u64) -> Probe {
        // Slices held in locals: the atomic loads below would otherwise make the compiler
        // reload their lengths on every step.
        let cells = &*self.index.cells;
        let mask = cells.len() - 1;
        let mut i = self.index.home(ident);
        for _ in 0..cells.len() {
            // Acquire: pairs with the Release CAS that published the cell (the slot's identity
            // and version), and with compaction's Release rewrites (after its odd `seq`).
            let c = cells[i].load(Ordering::Acquire);
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
        // Acquire: pairs with compaction's Release updates of `seq`.
        let s = self.index.seq.load(Ordering::Acquire);
        match self.probe(ident) {
            // Right whatever a compaction does (checked against the slot's identity and
            // generation): an existing key is found without waiting while one runs, unless
            // the probe meets a frozen cell first.
            Probe::Found(r) => return Found::Key(r),
            Probe::Absent(at) if s & 1 == 0 => {
                // "Absent" holds only if no compaction moved entries under the probe: a
                // cell it read from a compaction would show `seq` changed here.
                let epoch_ok = at.is_none_or(|(_, c)| c == cell_empty(s));
                // Acquire: as above.
                if epoch_ok && self.index.seq.load(Ordering::Acquire) == s {
                    return Found::Absent(at);
                }
            }
            _ => {}
        }
        // Compaction under way or just done: ask under the lock, where the index is stable.
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
    /// inserter or compaction took it since; otherwise as
    /// [`lookup_or_insert`](Self::lookup_or_insert). A key found may have been removed since; its user checks
    /// the slot where it acts, as for any [`KeyRef`]. `locked`: the caller holds the topology
    /// lock.
    #[inline]
    pub(super) fn claim(&self, ident: u64, seen: Found, locked: bool) -> Option<KeyRef> {
        match seen {
            Found::Key(r) => Some(r),
            Found::Absent(Some((i, c))) => {
                // The probe found no entry of the key before cell `i` and cell `i` empty; cells
                // before it stay non-empty until a compaction, which changes the epoch of every
                // empty cell, so a CAS from `c` that succeeds claims the key's first empty cell,
                // where a concurrent inserter of the same key must meet it.
                let r = self.new_key_slot(ident)?;
                // Release: publishes the slot's identity and version to lookups (their
                // Acquire); Acquire: as `insert`'s CAS, which this one stands for.
                if self.index.cells[i]
                    .compare_exchange(c, cell_ref(r), Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    inc(&self.gauges.keys);
                    return Some(r);
                }
                self.insert(ident, locked, Some(r))
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
        let mut guard = None;
        let found = loop {
            // Acquire: pairs with compaction's Release updates of `seq`.
            let s = self.index.seq.load(Ordering::Acquire);
            let probe = if s & 1 == 0 {
                self.probe(ident)
            } else {
                Probe::Frozen
            };
            match probe {
                Probe::Found(r) => break Some(r),
                Probe::Frozen => {
                    // Compaction under way: wait for it on the lock, then go on under it.
                    if !locked && guard.is_none() {
                        guard = Some(self.lock());
                    }
                }
                Probe::Absent(None) => {
                    // No empty cell: only tombstones can be reclaimed.
                    if !locked && guard.is_none() {
                        guard = Some(self.lock());
                        continue;
                    }
                    // Relaxed: written under the lock held here.
                    if self.index.tombs.load(Ordering::Relaxed) == 0 {
                        break None;
                    }
                    self.compact();
                }
                Probe::Absent(Some((i, c))) => {
                    if c != cell_empty(s) {
                        continue; // a compaction finished since `s`: probe again
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
                    if self.index.cells[i]
                        .compare_exchange(c, cell_ref(r), Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        inc(&self.gauges.keys);
                        spare = None;
                        break Some(r);
                    }
                }
            }
        };
        if let Some(r) = spare {
            self.push_key_slot(r.slot);
        }
        drop(guard);
        found
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
        let mask = ix.cells.len() - 1;
        let mut i = ix.home(ident);
        let want = cell_ref(r);
        for _ in 0..ix.cells.len() {
            // Relaxed: cells holding a reference change only under this lock.
            if ix.cells[i].load(Ordering::Relaxed) == want {
                // Release: as compaction's rewrites.
                ix.cells[i].store(C_TOMB, Ordering::Release);
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

    /// Under the topology lock: gives back index memory beyond what the keys in use need
    /// (SPEC D51). The index's own growth and shrink are not built yet: nothing to give.
    pub(super) fn shrink_index(&self) {}

    /// Cells in the index now.
    pub(super) fn index_cells(&self) -> u32 {
        self.index.cells.len() as u32
    }

    /// The most cells the index can have.
    pub(super) fn index_cells_max(&self) -> u32 {
        self.index.cells.len() as u32
    }

    /// Under the topology lock: compacts the index when tombstones pass a quarter of it.
    pub(super) fn maybe_compact(&self) {
        // Relaxed: written under the lock held here.
        if self.index.tombs.load(Ordering::Relaxed) as usize * 4 >= self.index.cells.len() {
            self.compact();
        }
    }

    /// Under the topology lock: rewrites the index without tombstones, in place (see the module
    /// docs). Allocates nothing.
    pub(super) fn compact(&self) {
        let ix = &self.index;
        let mask = ix.cells.len() - 1;
        // AcqRel: odd; Release orders it before every rewrite below for readers that check it.
        // `seq` wraps after 2^63 compactions (from odd `u64::MAX` to even 0, which keeps its
        // parity meaning) and the epoch in an empty cell keeps its low 62 bits: a CAS from an
        // old epoch's empty cell could succeed again only after 2^62 compactions between its
        // probe and its CAS.
        let s = ix.seq.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        debug_assert_eq!(s & 1, 1);
        // Freeze: no inserter claims a cell from here on; one that won a cell first is kept.
        let mut live = 0;
        for cell in ix.cells.iter() {
            // Acquire: pairs with an inserter's Release CAS.
            let mut c = cell.load(Ordering::Acquire);
            loop {
                if c & 3 != C_EMPTY {
                    break;
                }
                // AcqRel: wins against an inserter's CAS from the same value, or sees its cell.
                match cell.compare_exchange(c, C_FROZEN, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        c = C_FROZEN;
                        break;
                    }
                    Err(cur) => c = cur,
                }
            }
            if c & 3 == C_REF {
                ix.scratch[live].store(c, Ordering::Relaxed);
                live += 1;
            }
        }
        // Rewrite: clear (a reader meeting `FROZEN` asks under the lock), then place every
        // entry at its first free cell from home.
        for cell in ix.cells.iter() {
            // Release: orders the odd `seq` before this for a reader that loads it.
            cell.store(C_FROZEN, Ordering::Release);
        }
        for e in &ix.scratch[..live] {
            let c = e.load(Ordering::Relaxed);
            let r = unref(c);
            let ident = self.key(r).ident.load(Ordering::Relaxed);
            let mut i = ix.home(ident);
            // Relaxed: only this thread writes cells now.
            while ix.cells[i].load(Ordering::Relaxed) != C_FROZEN {
                i = (i + 1) & mask;
            }
            // Release: as above.
            ix.cells[i].store(c, Ordering::Release);
        }
        let next = s.wrapping_add(1);
        let empty = cell_empty(next);
        for cell in ix.cells.iter() {
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
        for cell in self.index.cells.iter() {
            cell.store(cell_empty(seq), Ordering::Relaxed);
        }
    }

    /// The index cell a key's probe starts at (for models that place keys on one chain).
    #[cfg(all(test, loom))]
    pub(crate) fn key_home(&self, key: JobKey) -> usize {
        self.index.home(rules::ident(key))
    }

    /// Every key slot claimed now (index cells naming a slot), for `reset`. Under the lock.
    pub(super) fn for_each_key(&self, mut f: impl FnMut(u64, KeyRef)) {
        for cell in self.index.cells.iter() {
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
}
