//! A fixed-capacity, lock-free set of the request ids that are live (SPEC F34).
//!
//! A second live request with the id of a live one must be refused (`already-exists /
//! duplicate-request`), including when both arrive at the same moment on two threads: exactly one
//! of them may be admitted. The set is sized once ([`IdSet::new`]); [`IdSet::insert`] and
//! [`IdSet::remove`] take no lock and allocate nothing.
//!
//! # Table
//!
//! Open addressing over a power-of-two table of at least `2 × live` cells (load factor at most
//! 1/2 while callers respect `live`). Each cell has three atomics: a packed state word, the id it
//! holds, and the *reach* of the ids whose home is this cell: the farthest distance from home at
//! which any of them was ever placed. An id's *window* is the cells `home ..= home + reach[home]`
//! (wrapping); every copy of the id that any insertion ever published lies in that window,
//! because an inserter raises the reach before publishing (see "Why no duplicate is missed").
//! Reaches only grow, so a window never shrinks under a reader. Ids are hashed with a keyed mixer
//! (a seed drawn per set), so ids chosen to collide cost probe length, never correctness.
//!
//! There is no reserved id value: the id lives in its own word and the state word says whether
//! it is meaningful. A removed entry leaves its cell `FREE`, and any inserter may take it again —
//! there are no tombstones to accumulate, so a steady churn at the capacity bound keeps working
//! forever; the only long-lived trace of history is the reach, which is bounded by the largest
//! displacement ever needed.
//!
//! # Cell word
//!
//! ```text
//!  63 .................... 3   2 ..... 0
//! |        version (61)      |  state  |
//! ```
//!
//! | state       | id word       | meaning                                                   |
//! |-------------|---------------|-----------------------------------------------------------|
//! | `FREE`      | stale         | takeable by any inserter                                  |
//! | `BUSY`      | being written | taken by an inserter that has not published yet           |
//! | `INSERTING` | the id        | published; not yet decided whether it is the member       |
//! | `MEMBER`    | the id        | the id is in the set; the inserter's caller owns the cell |
//! | `COLLIDED`  | the id        | lost to another copy of the id; its inserter frees it     |
//!
//! Transitions (`v` = version, bumped only when a cell is taken, so a word never repeats):
//!
//! - take: `(v, FREE)` → `(v+1, BUSY)`, CAS by an inserter, which then writes the id;
//! - publish: `(v, BUSY)` → `(v, INSERTING)`, store by that inserter;
//! - admit: `(v, INSERTING)` → `(v, MEMBER)`, CAS by the inserter or any helper;
//! - collide: `(v, INSERTING)` → `(v, COLLIDED)`, CAS by the inserter or any helper;
//! - give up: `(v, COLLIDED)` → `(v, FREE)`, store by the inserter;
//! - remove: `(v, MEMBER)` → `(v, FREE)`, store by the owner of the [`Slot`] (no other
//!   transition starts from `MEMBER`, so nothing can race it).
//!
//! An uncontended insert of an id with no copy costs three read-modify-writes (take, publish,
//! admit) and a remove none; the reach is raised only when a copy lands beyond the reach the
//! insert read.
//!
//! # Deciding between copies
//!
//! Two inserters of the same id may take different cells (a cell nearer home can become free
//! between their scans), so taking a cell decides nothing. Each publishes its copy as `INSERTING`
//! and then *settles* it by scanning the whole window:
//!
//! - a `MEMBER` copy elsewhere: this copy collides (the id is present: `Duplicate`);
//! - an `INSERTING` copy nearer home: this copy collides, and the settler goes on to settle that
//!   nearer copy on its owner's behalf (helping), so that when it reports `Duplicate` a member has
//!   really been seen;
//! - an `INSERTING` copy farther from home: the settler collides it;
//! - nothing: the settler admits its copy (CAS to `MEMBER`).
//!
//! Every decision is a CAS from `INSERTING` with the copy's version, so a decision is made once,
//! by whoever gets there first, and a stale settler cannot touch a later use of the cell. An
//! inserter whose copy collided without it having seen a member (someone else collided it, and
//! that someone may have seen a member that was removed since) frees its cell and starts over;
//! it reports `Duplicate` only after seeing a member itself, so the report is true at some instant
//! of the call.
//!
//! # Why no duplicate is missed
//!
//! Every access to cell words and reaches that decides something is `SeqCst` (only hints — the
//! free-cell guess before a take CAS, and [`IdSet::len`] — are `Relaxed`; the remove is a
//! `Release` store, since a removed member takes no part in the argument), so they all sit in one
//! total order S. Suppose copies `a` and `b` of one id were both admitted (and both still members
//! at once). (A `SeqCst` read that returns a value from before a `SeqCst` write in the cell's
//! modification order, a free word a remove stored included, precedes that write in S.) Let `A` be
//! the settler that admitted `a`: it read `a` as `INSERTING` (after `a`'s publish), then read the
//! reach of the home, then read `b`'s cell, and did not see `b` published (had it seen `b` as a
//! member, or as `INSERTING` nearer home, `a` would collide; farther from home, `A` collides `b`,
//! which then can never be admitted). So in S: `publish(a) < A reads b < publish(b)`.
//! Symmetrically `publish(b) < B reads a < publish(a)`: a cycle. The reach cannot hide `b` from
//! `A` either: before publishing `b`, its inserter raised the reach to cover `b`, or read
//! (`SeqCst`) a reach that did, which puts the raise that made it cover `b` before that read in S;
//! if `A` read the reach before that raise, then `publish(a) < raise(b) < publish(b) < B's reads`,
//! and `B`'s window covers `a` (raised before `publish(a)`), so the argument runs with the roles
//! swapped. A cell that was freed and taken again carries a new version, so no CAS or read
//! confuses the two uses. In particular the classic hard case — an inserter takes a free cell
//! nearer home while a member copy lies farther along — is covered: the taken cell is only
//! `INSERTING` until the scan of the whole window sees the member.
//!
//! Reading a cell's id is validated like a seqlock: word, id, word again; the id belongs to the
//! word's version only if the version did not change in between (the id is written only while
//! the cell is `BUSY`, under a new version).
//!
//! # Progress
//!
//! Inserts and removes of different ids are lock-free: the only loops are the scans, a re-read of
//! a cell that changed under a validated read, and an insert's restart after a collision it did
//! not see the cause of — each caused by another operation's progress. There is no locked slow
//! path. [`IdSet::insert`] reports `Full` when its pass over the table (from the first free cell
//! its scan saw to the farthest cell) finds nothing free; it never waits for a cell. With at most
//! `live` ids live or in flight, at least half the table is free at every instant, so a spurious
//! `Full` would need other threads to move every free cell behind the pass while it runs.

// Used by the scheduler's duplicate-request check (F34); until that lands only tests call it.

use core::fmt;

use super::pack::Field;
use crate::error::Error;
use crate::sync::AtomicU32;
use crate::sync::AtomicU64;
use crate::sync::Ordering::{self, Acquire, Relaxed, Release, SeqCst};

#[cfg(all(test, loom))]
#[path = "loom_idset.rs"]
mod loom_idset;

/// The state of a cell, in the low bits of its word.
const STATE: Field = Field::first(3);
/// The version of a cell, bumped each time the cell is taken.
const VERSION: Field = STATE.next(61);
const _: () = assert!(VERSION.end() == 64);

/// Takeable.
const FREE: u64 = 0;
/// Taken, id not yet published.
const BUSY: u64 = 1;
/// Published, undecided.
const INSERTING: u64 = 2;
/// Admitted: the id is in the set.
const MEMBER: u64 = 3;
/// Lost to another copy; its inserter frees it.
const COLLIDED: u64 = 4;
const _: () = assert!(COLLIDED <= STATE.max());

/// The ordering of the remove's store: `Release` (a plain store on x86-64).
///
/// Under loom, `SeqCst`: loom regards `SeqCst` loads as `Acquire` and lets one return a value
/// older than the newest `SeqCst` store of its location only when that older value was not itself
/// stored `SeqCst` (its README: `SeqCst` accesses are regarded as `AcqRel`, with false alarms).
/// A scan that reads a freed word while a later use of the cell is already published is such a
/// read. The C++20 model orders that read before the publish in S whatever ordering the free
/// was stored with (a load that reads a value earlier in the modification order than a `SeqCst`
/// write is coherence-ordered before it), which is all the argument in the module docs uses; loom
/// can follow that order only between `SeqCst` stores. The loom models therefore check the set
/// with a `SeqCst` remove, and the step from it to `Release` rests on that argument alone.
/// `remove_hands_the_cell_to_the_next_inserter` checks what `Release` must provide on its own:
/// the owner's writes reach the next taker of the cell.
const REMOVE: Ordering = if cfg!(loom) { SeqCst } else { Release };

/// The most live ids a set can be sized for: the table (`2 × live`, rounded up to a power of two)
/// then has at most 2^32 cells, so cell indices and distances fit in a `u32`.
pub(crate) const MAX_LIVE: usize = 1 << 31;

/// The fewest cells a table has, so that a few racing inserts of one id always find room even in
/// a set sized for one live id.
const MIN_CELLS: usize = if cfg!(loom) { 4 } else { 8 };

/// A loaded cell word.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Word(u64);

impl Word {
    const fn new(version: u64, state: u64) -> Word {
        Word(VERSION.set(STATE.set(0, state), version & VERSION.max()))
    }

    const fn state(self) -> u64 {
        STATE.get(self.0)
    }

    const fn version(self) -> u64 {
        VERSION.get(self.0)
    }

    /// This cell's word with the same version in `state`.
    const fn with(self, state: u64) -> Word {
        Word::new(self.version(), state)
    }

    /// The word of the cell taken from this free word.
    const fn taken(self) -> Word {
        Word::new(self.version().wrapping_add(1), BUSY)
    }

    /// Whether the cell's id word is meaningful and the copy counts (published, not lost).
    const fn holds_copy(self) -> bool {
        matches!(self.state(), INSERTING | MEMBER)
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state() {
            FREE => "free",
            BUSY => "busy",
            INSERTING => "inserting",
            MEMBER => "member",
            COLLIDED => "collided",
            _ => "invalid",
        };
        write!(f, "{state}@{}", self.version())
    }
}

/// One cell of the table.
struct Cell {
    /// `version | state`, see the module docs.
    word: AtomicU64,
    /// The id of the copy in this cell; meaningful while the word holds a copy, and written only
    /// while the cell is `BUSY`.
    id: AtomicU64,
    /// For the ids whose home is this cell: the farthest distance from home any of them has been
    /// published at. Only grows.
    reach: AtomicU32,
}

/// The cell an admitted id occupies, handed to the caller by [`IdSet::insert`] and given back to
/// [`IdSet::remove`]. Carries the cell's version, so a stale slot removes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    index: u32,
    version: u64,
}

impl Slot {
    /// The cell's index (tests place colliding ids with it).
    #[cfg(test)]
    pub(crate) const fn index(self) -> u32 {
        self.index
    }
}

/// Why [`IdSet::insert`] admitted nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InsertError {
    /// The id was live at some instant during the call (F34 `duplicate-request`).
    Duplicate,
    /// No free cell: more ids (live plus in flight) than the table holds.
    Full,
}

/// How settling a copy ended, for the inserter that started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// The inserter's own copy is the member.
    Won,
    /// The inserter's own copy collided; `seen_member` says whether the settler saw a member copy
    /// of the id (or made one) on the way.
    Lost { seen_member: bool },
}

/// A fixed-capacity, lock-free set of `u64` ids; see the module docs.
pub(crate) struct IdSet {
    cells: Box<[Cell]>,
    /// `cells.len() - 1`.
    mask: usize,
    /// Key of the hash, so that the placement of ids is not predictable from outside.
    seed: u64,
}

impl IdSet {
    /// A set with room for at least `live` ids at once; every cell is allocated here.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` (field `capacity`) if `live` is 0 or above
    /// [`MAX_LIVE`]; checked before anything is allocated.
    pub(crate) fn new(live: usize) -> Result<Self, Error> {
        Self::with_seed(live, random_seed())
    }

    /// [`IdSet::new`] with a chosen hash key (tests pick it to place colliding ids).
    pub(crate) fn with_seed(live: usize, seed: u64) -> Result<Self, Error> {
        if live == 0 || live > MAX_LIVE {
            return Err(Error::configuration("capacity"));
        }
        let Some(len) = live
            .checked_mul(2)
            .and_then(usize::checked_next_power_of_two)
        else {
            return Err(Error::configuration("capacity"));
        };
        let len = len.max(MIN_CELLS);
        let cells = (0..len)
            .map(|_| Cell {
                word: AtomicU64::new(Word::new(0, FREE).0),
                id: AtomicU64::new(0),
                reach: AtomicU32::new(0),
            })
            .collect::<Box<[Cell]>>();
        // Under loom only: loom regards a `SeqCst` load as `Acquire` and may return an older
        // value than the newest `SeqCst` store only when that older value was not itself
        // stored `SeqCst`, and an atomic's initial value is not. The argument that no duplicate
        // is missed reads "this load returned a value older than that `SeqCst` write" as "this
        // load precedes that write in S" (coherence), which loom can only follow between
        // `SeqCst` stores; storing the initial reach `SeqCst` gives it that. (The real set needs
        // no such store: the C++20 model orders a `SeqCst` load that reads the initial value
        // before every later `SeqCst` write in S.)
        #[cfg(loom)]
        for c in cells.iter() {
            c.reach.store(0, SeqCst);
        }
        Ok(Self {
            cells,
            mask: len - 1,
            seed,
        })
    }

    /// The number of cells (at least `2 × live`).
    #[cfg(test)]
    pub(crate) fn cells(&self) -> usize {
        self.cells.len()
    }

    /// The number of ids in the set. Observational: it counts member cells one by one (O(cells)),
    /// so with concurrent inserts and removes it is only a value the set had near the call; exact
    /// when nothing runs concurrently.
    pub(crate) fn len(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| Word(c.word.load(Relaxed)).state() == MEMBER)
            .count()
    }

    /// Admits `id` and returns the cell it occupies, for [`IdSet::remove`].
    ///
    /// Lock-free and allocation-free. Of several concurrent inserts of one id (with no member
    /// copy), exactly one is admitted.
    ///
    /// # Errors
    ///
    /// [`InsertError::Duplicate`] if `id` was in the set at some instant during the call;
    /// [`InsertError::Full`] if one pass over the table found no free cell (only when more ids
    /// are live or in flight than the table has cells; it is never retried in a loop).
    pub(crate) fn insert(&self, id: u64) -> Result<Slot, InsertError> {
        let home = self.home(id);
        'attempt: loop {
            // Look for a copy already there, and for the first free cell of the window.
            let reach = self.reach(home);
            let mut first_free = None;
            for d in 0..=reach {
                let j = self.at(home, d);
                match self.copy_of(j, id) {
                    Some(w) if w.state() == MEMBER => return Err(InsertError::Duplicate),
                    Some(w) => {
                        // Another insert of `id` is undecided: settle it rather than add a
                        // copy that would most likely lose to it.
                        match self.settle(id, home, j, w, d, false) {
                            Fate::Lost { seen_member: true } => return Err(InsertError::Duplicate),
                            _ => continue 'attempt,
                        }
                    }
                    None => {
                        if first_free.is_none()
                            && Word(self.cells[j].word.load(Relaxed)).state() == FREE
                        {
                            first_free = Some(d);
                        }
                    }
                }
            }
            let (cell, dist, published) = self
                .publish(
                    id,
                    home,
                    first_free.unwrap_or(reach.saturating_add(1)),
                    reach,
                )
                .ok_or(InsertError::Full)?;
            let c = &self.cells[cell];
            match self.settle_own(id, home, cell, published, dist) {
                Fate::Won => {
                    return Ok(Slot {
                        index: cell as u32,
                        version: published.version(),
                    })
                }
                Fate::Lost { seen_member } => {
                    debug_assert_eq!(Word(c.word.load(Relaxed)), published.with(COLLIDED));
                    // SeqCst: gives the collided cell back; pairs with the take CAS of the next
                    // inserter (its Acquire side orders our id write before its own).
                    c.word.store(published.with(FREE).0, SeqCst);
                    if seen_member {
                        return Err(InsertError::Duplicate);
                    }
                }
            }
        }
    }

    /// Removes the id admitted as `slot`. O(1): no probing, and no read-modify-write: a member
    /// cell's word is changed by its remove alone (every other transition starts from another
    /// state), so a plain store frees it.
    ///
    /// Each slot [`IdSet::insert`] returned must be removed once, by the one party that owns it
    /// (the scheduler hands a request's slot along with the request, and gives it up once, when
    /// the request ends). A slot that no longer names a member (removed already, seen by the
    /// calling thread) removes nothing; two removes of one slot racing on two threads could free
    /// a later use of the cell, which is why the slot must have one owner.
    pub(crate) fn remove(&self, slot: Slot) {
        let Some(cell) = self.cells.get(slot.index as usize) else {
            debug_assert!(false, "slot out of range");
            return;
        };
        let member = Word::new(slot.version, MEMBER);
        // Relaxed: only checks that the owner's slot still names a member (the owner's own
        // earlier remove, if any, is the last write it can have made to a member word).
        if Word(cell.word.load(Relaxed)) != member {
            debug_assert!(false, "removing a slot that is not a member");
            return;
        }
        // Release: the remove; pairs with the take CAS (SeqCst, so Acquire) of the next inserter
        // of this cell, which then sees everything the owner did before removing. It needs no
        // place in the scans' total order (see "Why no duplicate is missed"). `SeqCst` under
        // loom only, see `REMOVE`.
        cell.word.store(member.with(FREE).0, REMOVE);
    }

    /// The home cell of `id`.
    fn home(&self, id: u64) -> usize {
        (mix(id ^ self.seed) as usize) & self.mask
    }

    /// The cell `d` steps past `home`, wrapping.
    fn at(&self, home: usize, d: u32) -> usize {
        home.wrapping_add(d as usize) & self.mask
    }

    /// The reach of `home`, capped to the table.
    fn reach(&self, home: usize) -> u32 {
        // SeqCst: pairs with the SeqCst `fetch_max` in `insert`: a scan that starts after a copy
        // is published covers it (see "Why no duplicate is missed").
        let r = self.cells[home].reach.load(SeqCst);
        r.min(self.mask as u32)
    }

    /// Takes a free cell at distance `from` or more from `home` (see [`IdSet::take`]) and
    /// publishes a copy of `id` in it: `(cell, distance, published word)`. `seen_reach`: a reach
    /// of `home` the caller loaded (`SeqCst`) before; a cell within it needs no raise.
    fn publish(
        &self,
        id: u64,
        home: usize,
        from: u32,
        seen_reach: u32,
    ) -> Option<(usize, u32, Word)> {
        let (cell, dist, taken) = self.take(home, from)?;
        let c = &self.cells[cell];
        // Release: the id is read after its word by validated reads (`copy_of`); a reader whose
        // Acquire load of the id sees this store also sees the take, so its second word load sees
        // the new version and discards the read.
        c.id.store(id, Release);
        if dist > seen_reach {
            // SeqCst: raise the window before publishing; ordered before the publish below and
            // against the reach loads of every settler (see "Why no duplicate is missed"). A cell
            // within `seen_reach` needs no raise: the write that made the reach cover it precedes
            // the caller's load, so the publish below, in the total order S.
            self.cells[home].reach.fetch_max(dist, SeqCst);
        }
        let published = taken.with(INSERTING);
        // SeqCst: the publish; pairs with the SeqCst word loads of the scans in `insert` and
        // `settle` (a settler either sees it or is seen by this copy's settler).
        c.word.store(published.0, SeqCst);
        Some((cell, dist, published))
    }

    /// Takes the first free cell at distance `from` or more from `home`: `(cell, distance,
    /// taken word)`, or `None` after a pass over the whole table.
    fn take(&self, home: usize, from: u32) -> Option<(usize, u32, Word)> {
        for d in u64::from(from)..self.cells.len() as u64 {
            let d = d as u32;
            let j = self.at(home, d);
            let cell = &self.cells[j];
            let w = Word(cell.word.load(Relaxed));
            // SeqCst: the take; pairs with the remove / give-up stores that freed the cell (so the
            // previous use happens-before this one) and sits in the scans' total order.
            if w.state() == FREE
                && cell
                    .word
                    .compare_exchange(w.0, w.taken().0, SeqCst, Relaxed)
                    .is_ok()
            {
                return Some((j, d, w.taken()));
            }
        }
        None
    }

    /// The word of cell `j` if it holds a copy of `id` (published, not lost), read so that the id
    /// and the word belong to the same use of the cell.
    fn copy_of(&self, j: usize, id: u64) -> Option<Word> {
        let cell = &self.cells[j];
        // SeqCst: pairs with the publish store in `insert` (and the admit / collide CASes).
        let mut w = Word(cell.word.load(SeqCst));
        loop {
            if !w.holds_copy() {
                return None;
            }
            // Acquire: pairs with the Release id store in `insert`; keeps the second word load
            // below after this one (the seqlock check).
            let held = cell.id.load(Acquire);
            // SeqCst: as the first load; validates that the id belongs to `w`'s version.
            let again = Word(cell.word.load(SeqCst));
            if again.version() == w.version() {
                return (held == id && again.holds_copy()).then_some(again);
            }
            w = again;
        }
    }

    /// [`settle`](Self::settle) of the caller's own copy, published as `word` in `cell`, `dist`
    /// from `home`. When the copy is at home and the home's reach is 0, the window is that one
    /// cell and `settle` would scan nothing: the same two accesses (the reach's `SeqCst` load,
    /// then the admit CAS) are done here inline, without the call and its scan set-up — the
    /// common case of an insert with no copy and no collision at home.
    #[inline]
    fn settle_own(&self, id: u64, home: usize, cell: usize, word: Word, dist: u32) -> Fate {
        if dist == 0 && self.reach(home) == 0 {
            // SeqCst: the admit, as in `settle`; pairs with the collide CASes on the same word
            // and with the scans that read it.
            return match self.cells[cell].word.compare_exchange(
                word.0,
                word.with(MEMBER).0,
                SeqCst,
                SeqCst,
            ) {
                Ok(_) => Fate::Won,
                // A helper admitted our copy first.
                Err(now) if Word(now) == word.with(MEMBER) => Fate::Won,
                // Collided by someone else: we did not see why.
                Err(_) => Fate::Lost { seen_member: false },
            };
        }
        self.settle(id, home, cell, word, dist, true)
    }

    /// Settles the copy of `id` in cell `t` (published as `t_word`, `t_dist` from `home`): decides
    /// it and every nearer undecided copy it defers to. `own`: `t` is the caller's own copy.
    fn settle(
        &self,
        id: u64,
        home: usize,
        mut t: usize,
        mut t_word: Word,
        mut t_dist: u32,
        own: bool,
    ) -> Fate {
        // Whether `t` is still the caller's own copy (we move on to nearer copies after ours
        // collided).
        let mut mine = own;
        // The outcome for the caller once `t` is decided as `now`.
        let decided = |now: Word, t_word: Word, mine: bool| -> Fate {
            if now == t_word.with(MEMBER) {
                if mine {
                    Fate::Won
                } else {
                    Fate::Lost { seen_member: true }
                }
            } else {
                // Collided by someone else (or already reused): we did not see why.
                Fate::Lost { seen_member: false }
            }
        };
        'target: loop {
            let reach = self.reach(home);
            let mut nearer = None;
            let mut member_seen = false;
            for d in 0..=reach {
                if d == t_dist {
                    continue;
                }
                let j = self.at(home, d);
                let Some(w) = self.copy_of(j, id) else {
                    continue;
                };
                if w.state() == MEMBER {
                    member_seen = true;
                    break;
                }
                if d < t_dist {
                    nearer = Some((j, w, d));
                    break;
                }
                // A farther undecided copy: it must not be admitted while `t` may be. Collide it,
                // unless `t` itself is decided already.
                // SeqCst: re-reads `t`; pairs with the admit / collide CASes on it.
                let now = Word(self.cells[t].word.load(SeqCst));
                if now != t_word {
                    return decided(now, t_word, mine);
                }
                // SeqCst: the collide; pairs with the admit CAS on the same word (one of them
                // wins) and with the scans that read it.
                match self.cells[j]
                    .word
                    .compare_exchange(w.0, w.with(COLLIDED).0, SeqCst, SeqCst)
                {
                    Err(now) if Word(now) == w.with(MEMBER) => {
                        member_seen = true;
                        break;
                    }
                    _ => {}
                }
            }
            if !member_seen && nearer.is_none() {
                // Nothing defers `t`: admit it.
                // SeqCst: the admit; pairs with the collide CASes on the same word and with the
                // scans that read it.
                return match self.cells[t].word.compare_exchange(
                    t_word.0,
                    t_word.with(MEMBER).0,
                    SeqCst,
                    SeqCst,
                ) {
                    Ok(_) => decided(t_word.with(MEMBER), t_word, mine),
                    Err(now) => decided(Word(now), t_word, mine),
                };
            }
            // `t` defers: collide it.
            // SeqCst: the collide; pairs with the admit CAS on the same word.
            if let Err(now) = self.cells[t].word.compare_exchange(
                t_word.0,
                t_word.with(COLLIDED).0,
                SeqCst,
                SeqCst,
            ) {
                if Word(now) == t_word.with(MEMBER) {
                    return decided(Word(now), t_word, mine);
                }
            }
            match nearer {
                Some((j, w, d)) => {
                    // Settle the nearer copy on its inserter's behalf; ours (if `t` was ours) is
                    // collided now.
                    t = j;
                    t_word = w;
                    t_dist = d;
                    mine = false;
                    continue 'target;
                }
                None => return Fate::Lost { seen_member: true },
            }
        }
    }
}

impl fmt::Debug for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdSet")
            .field("cells", &self.cells.len())
            .field("len", &self.len())
            .finish()
    }
}

/// A bijective 64-bit mixer (the splitmix64 finaliser): every input bit moves every output bit.
const fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A hash key for a new set: random per set, fixed under loom (whose executions must replay).
fn random_seed() -> u64 {
    if cfg!(loom) {
        0
    } else {
        use std::hash::BuildHasher;
        std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
    }
}

#[cfg(all(test, not(loom)))]
#[path = "idset_tests.rs"]
mod tests;
