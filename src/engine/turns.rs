//! The turn protocol of the tenant-ring engine (docs/ring-engine.md): who may grant for which
//! tenant, with no lock and no token.
//!
//! # Words
//!
//! * `ctl`: two counters in one `AtomicU64`. `FREE`: cell credits nobody holds. `READY`: tenant
//!   ids pushed into the ring and not yet claimed by a turn taker.
//! * One *state word* per tenant: `IDLE` (no queued work known, not in the ring), `IN_RING`,
//!   `OWNED` (one thread holds the tenant's turn), `OWNED_DIRTY` (owned, and a producer announced
//!   work since the owner last looked).
//! * The ring: an [`Scq`] of tenant ids, in DRR order. A tenant is in it at most once (only the
//!   `IDLE → IN_RING` transition and the owner's requeue push it), so it never holds more ids
//!   than tenants.
//!
//! # The invariant: never a free cell and a ready tenant at once, but for a hand-back
//!
//! Every change of `ctl` that adds a credit or a ready unit is one read-modify-write that, if it
//! would leave both `FREE > 0` and `READY > 0`, takes one of each instead: the thread that made
//! it returns a [`Turn`] and must run it. So `FREE > 0 && READY > 0` holds only after a call that
//! reached its bound on helping (SPEC F25) handed a claimed turn back
//! ([`Turns::hand_back`]); every later RMW on `ctl`, and every poller's
//! [`Turns::help`], takes that turn. Nobody ever scans or retries for it. A thread that took a `READY` unit pops the ring
//! knowing an id is there (it counted a completed push), claims that tenant (`IN_RING → OWNED`)
//! and holds the tenant's turn and one cell credit.
//!
//! # Transitions
//!
//! | who                          | state word                  | then                                     |
//! |------------------------------|-----------------------------|------------------------------------------|
//! | producer, after publishing   | `IDLE → IN_RING`            | push id; `READY += 1` (maybe take a turn) |
//! |                              | `OWNED → OWNED_DIRTY`       | nothing: the owner looks again           |
//! |                              | `IN_RING`, `OWNED_DIRTY`: rewritten unchanged (an RMW, see below) | nothing |
//! | turn taker (after `ctl`)     | `IN_RING → OWNED`           | grant from the tenant's own queue        |
//! | owner, tenant has more work  | `→ IN_RING`                 | push id; `READY += 1`                     |
//! | owner, no more work          | `OWNED → IDLE` (CAS)        | done                                     |
//! |                              | CAS fails on `OWNED_DIRTY`: `→ OWNED`, look again |                     |
//! | cell released                | —                           | `FREE += 1` (maybe take a turn)           |
//!
//! # Progress (SPEC F24)
//!
//! (Pause points: `ring.credit_taken` after a `ctl` RMW took a credit and a ready unit, before the
//! ring pop; `ring.turn_owned` after the claim, with the turn owned.) A thread stopped while it
//! owns a turn holds that tenant (out of the ring) and one credit;
//! every other tenant stays in the ring and every other credit in `ctl`. A thread stopped
//! between taking `FREE`/`READY` and popping holds one credit and one ready unit; the id it would
//! have popped is popped by the next taker. A thread stopped inside a ring operation blocks
//! nobody ([`Scq`]'s consumers pass it).
//!
//! # Memory ordering
//!
//! The state word is only ever changed by read-modify-writes, so each transition reads the
//! latest value: a producer's RMW either comes before the taker's `IN_RING → OWNED` swap in the
//! word's modification order (the taker then acquires it, and sees the producer's queued work)
//! or after (it reads `OWNED` and marks `OWNED_DIRTY`, which the owner's closing CAS sees). A
//! plain load on the producer's side would allow the store-buffering outcome in which the
//! producer sees `IN_RING` from before the swap and the owner misses the producer's work.

use crossbeam_utils::CachePadded;

use crate::raw::pack::Field;
use crate::raw::pause;
use crate::raw::scq::Scq;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// Cell credits nobody holds.
const FREE: Field = Field::first(32);
/// Tenant ids in the ring not yet claimed by a turn taker.
const READY: Field = FREE.next(32);

/// Tenant state: no known queued work, not in the ring.
pub(crate) const IDLE: u32 = 0;
/// Tenant state: its id is in the ring (or being pushed), waiting for a turn.
pub(crate) const IN_RING: u32 = 1;
/// Tenant state: one thread holds its turn.
pub(crate) const OWNED: u32 = 2;
/// Tenant state: owned, and a producer announced work since the owner last looked.
pub(crate) const OWNED_DIRTY: u32 = 3;

/// A tenant's turn, with one cell credit. Must be ended with `Turns::end_turn`: dropping it
/// would keep the tenant owned forever.
#[must_use = "a turn must be ended with Turns::end_turn"]
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Turn {
    tenant: u32,
    /// Whether the turn holds a cell credit (a cleanup turn, [`Turns::own_idle`], holds none).
    credit: bool,
}

impl Turn {
    /// The tenant whose turn this is.
    pub(crate) fn tenant(&self) -> u32 {
        self.tenant
    }

    /// Whether the turn holds a cell credit (false for a cleanup turn): only then may it grant.
    pub(crate) fn has_credit(&self) -> bool {
        self.credit
    }
}

/// The turn protocol of one class (see the module docs).
#[derive(Debug)]
pub(crate) struct Turns {
    ctl: CachePadded<AtomicU64>,
    state: Box<[AtomicU32]>,
    ring: Scq,
    /// Tenants whose DRR round was cut short because no credit was free (F12): served before
    /// the ring, as the policy keeps such a tenant at the ring's head with its credits left.
    /// A `READY` unit counts a push into either.
    front: Scq,
    /// Tenants not idle (for snapshots): raised on every move out of `IDLE`, lowered on every
    /// move into it.
    active: AtomicU32,
}

impl Turns {
    /// `cells` free credits; tenants `0..tenants`, all idle.
    pub(crate) fn new(cells: u32, tenants: u32) -> Turns {
        Turns {
            ctl: CachePadded::new(AtomicU64::new(FREE.set(0, u64::from(cells)))),
            state: (0..tenants).map(|_| AtomicU32::new(IDLE)).collect(),
            ring: Scq::new(tenants),
            front: Scq::new(tenants),
            active: AtomicU32::new(0),
        }
    }

    /// Adds `free` credits and `ready` units to `ctl` in one RMW; if both counters would then be
    /// positive, takes one of each instead and returns the turn the caller must now run.
    fn add(&self, free: u64, ready: u64) -> Option<Turn> {
        let mut took = false;
        // AcqRel: Release publishes what the caller did before (a cell back in the pool, an id
        // pushed into the ring) to the thread whose RMW takes the unit; Acquire, for a taker,
        // pairs with that Release (so its ring pop sees the push the unit counts).
        let _ = self
            .ctl
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                let f = FREE.get(c) + free;
                let r = READY.get(c) + ready;
                took = f > 0 && r > 0;
                let (f, r) = if took { (f - 1, r - 1) } else { (f, r) };
                Some(READY.set(FREE.set(0, f), r))
            });
        if !took {
            return None;
        }
        pause::point("ring.credit_taken");
        Some(self.claim())
    }

    /// Takes a ready tenant's turn *without* a credit (a cleanup turn: it may unlink
    /// tombstones, never grant), for the rare compaction of tenants that wait in the ring while
    /// no cell is free. End it with [`end_turn_at`](Self::end_turn_at) and `front`, so the
    /// tenant keeps its place. `None` if no tenant is ready.
    pub(crate) fn claim_cleanup(&self) -> Option<Turn> {
        // AcqRel: as in `add` (the unit counts a completed push; Acquire sees it).
        self.ctl
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                let r = READY.get(c);
                (r > 0).then(|| READY.set(c, r - 1))
            })
            .ok()?;
        let mut turn = self.claim();
        turn.credit = false;
        Some(turn)
    }

    /// After taking a ready unit: pops a tenant id and takes its turn.
    fn claim(&self) -> Turn {
        // The unit counts an id whose push into `front` or `ring` completed. Another taker may
        // take that id and leave this one the id of a later push into the queue looked at
        // first: look again. Each retry means another taker popped, so it is lock-free.
        let tenant = loop {
            if let Some(t) = self.front.pop().or_else(|| self.ring.pop()) {
                break t;
            }
            #[cfg(loom)]
            loom::thread::yield_now();
            #[cfg(not(loom))]
            core::hint::spin_loop();
        };
        // AcqRel: Acquire pairs with the Release RMWs of producers that announced work while the
        // tenant was in the ring (their work is visible to this owner); Release orders the claim
        // before the owner's later transitions.
        let prev = self.state[tenant as usize].swap(OWNED, Ordering::AcqRel);
        debug_assert_eq!(prev, IN_RING, "only ring members are popped");
        pause::point("ring.turn_owned");
        Turn {
            tenant,
            credit: true,
        }
    }

    /// A producer has published work for `tenant` (in the tenant's own queue). Puts the tenant in
    /// the ring if it was idle, or tells its owner to look again. Returns a turn the caller must
    /// run if a credit was free.
    pub(crate) fn announce(&self, tenant: u32) -> Option<Turn> {
        // AcqRel: Release publishes the caller's queued work to the tenant's next owner (pairs
        // with the Acquire of `claim`'s swap and of `end_turn`'s CAS); Acquire orders this read
        // after the work's publication. Always a write, even when unchanged: see the module
        // docs, "Memory ordering".
        let prev = self.state[tenant as usize]
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                Some(match s {
                    IDLE => IN_RING,
                    OWNED => OWNED_DIRTY,
                    other => other,
                })
            })
            .unwrap_or_else(|s| s);
        if prev == IDLE {
            // Relaxed: a count for snapshots.
            self.active.fetch_add(1, Ordering::Relaxed);
            self.ring.push(tenant);
            self.add(0, 1)
        } else {
            None
        }
    }

    /// A cell credit comes back (a released cell). Returns a turn the caller must run if a
    /// tenant was waiting.
    pub(crate) fn give_credit(&self) -> Option<Turn> {
        self.add(1, 0)
    }

    /// Ends `turn`. `granted`: its credit became a grant (the cell comes back later through
    /// [`give_credit`](Self::give_credit)); otherwise the credit returns now. `more` says whether
    /// the tenant still has queued work; it runs while the turn is still owned, and again if a
    /// producer announced work while the turn was ending. The tenant goes back to the ring's
    /// tail (DRR order) or to idle. Returns a turn the caller must run if the returned credit
    /// or the requeued tenant met its counterpart in `ctl`.
    #[cfg(test)]
    pub(crate) fn end_turn(
        &self,
        turn: Turn,
        granted: bool,
        more: impl FnMut() -> bool,
    ) -> Option<Turn> {
        self.end_turn_at(turn, granted, false, more)
    }

    /// `end_turn`, requeuing the tenant ahead of the ring if `front` (its DRR
    /// round was cut short by a busy cell, F12).
    pub(crate) fn end_turn_at(
        &self,
        turn: Turn,
        granted: bool,
        front: bool,
        mut more: impl FnMut() -> bool,
    ) -> Option<Turn> {
        let word = &self.state[turn.tenant as usize];
        let credit = u64::from(turn.credit && !granted);
        loop {
            if more() {
                // AcqRel: an RMW, so a producer's `OWNED_DIRTY` mark is read (Acquire) and the
                // next owner, whose swap reads this value, sees that producer's work (Release).
                word.swap(IN_RING, Ordering::AcqRel);
                if front {
                    self.front.push(turn.tenant);
                } else {
                    self.ring.push(turn.tenant);
                }
                return self.add(credit, 1);
            }
            // AcqRel: Release publishes the turn's work to whoever takes the tenant next;
            // Acquire (also on failure) pairs with the Release of a producer's dirty mark.
            match word.compare_exchange(OWNED, IDLE, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    // Relaxed: a count for snapshots.
                    self.active.fetch_sub(1, Ordering::Relaxed);
                    return if credit == 0 { None } else { self.add(1, 0) };
                }
                Err(dirty) => {
                    debug_assert_eq!(dirty, OWNED_DIRTY);
                    // AcqRel: as the CAS; an RMW so a later producer's mark is not overwritten
                    // by a plain store.
                    let _ = word.compare_exchange(
                        OWNED_DIRTY,
                        OWNED,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                }
            }
        }
    }

    /// Takes one more free credit for a turn already held (a DRR round granting its next
    /// request, F12). Fails when no credit is free. `READY` is 0 whenever `FREE > 0` (the
    /// invariant), so this never takes a credit a ready tenant was owed.
    pub(crate) fn take_credit(&self) -> bool {
        // AcqRel: Acquire pairs with the Release RMW that returned the credit (the cell is back
        // in the pool); Release keeps the counter's release sequence for later takers.
        self.ctl
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                let f = FREE.get(c);
                // A tenant handed back ready (F25) is owed the credit first.
                (f > 0 && READY.get(c) == 0).then(|| FREE.set(c, f - 1))
            })
            .is_ok()
    }

    /// Gives back a turn that was claimed and not run (SPEC F25: a call that has done its
    /// bounded share of work stops): the tenant goes back ahead of the ring and its credit and
    /// ready unit go back into `ctl` together, *without* pairing them. That is the one state in
    /// which `FREE > 0 && READY > 0` holds; the next RMW on `ctl` of any thread (an
    /// announcement, a returned credit, [`help`](Self::help)) takes the turn.
    pub(crate) fn hand_back(&self, turn: Turn) {
        debug_assert!(turn.credit, "only a claimed turn is handed back");
        // AcqRel: as the requeue in `end_turn` (a producer's dirty mark is read; the next owner
        // sees what this thread saw).
        self.state[turn.tenant as usize].swap(IN_RING, Ordering::AcqRel);
        self.front.push(turn.tenant);
        // Release: publishes the push to the taker of the unit (pairs with `add`'s Acquire).
        self.ctl
            .fetch_add(READY.set(FREE.set(0, 1), 1), Ordering::Release);
    }

    /// Takes a turn if a free credit and a ready tenant wait together (after a
    /// [`hand_back`](Self::hand_back)): what a poller does to keep grants going (F18).
    pub(crate) fn help(&self) -> Option<Turn> {
        let (f, r) = self.counters();
        if f > 0 && r > 0 {
            self.add(0, 0)
        } else {
            None
        }
    }

    /// A *cleanup turn* without a credit: owns `tenant` if it is idle (not in the ring, not
    /// owned), so a canceller can unlink its tombstones at once instead of leaving them for a
    /// turn that may never come (the lost compaction of the token engine). End it with
    /// `end_turn` like any turn; it returns no credit.
    pub(crate) fn own_idle(&self, tenant: u32) -> Option<Turn> {
        // AcqRel: Acquire pairs with the Release of the previous owner's closing CAS (its
        // record is visible); Release orders this claim before the cleanup.
        self.state[tenant as usize]
            .compare_exchange(IDLE, OWNED, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| {
                // Relaxed: a count for snapshots.
                self.active.fetch_add(1, Ordering::Relaxed);
            })
            .map(|()| Turn {
                tenant,
                credit: false,
            })
    }

    /// Makes sure `tenant`'s owner looks at its records again, without giving it a turn it
    /// would not have had: an idle tenant is owned with a cleanup turn (no credit), returned
    /// for the caller to run; an owned one is marked `OWNED_DIRTY`, so its owner's closing
    /// re-check runs again; a tenant in the ring will be looked at by its turn. What an
    /// in-place change's notice needs (SPEC F36, `change.rs`). Always an RMW, as `announce`.
    pub(crate) fn touch(&self, tenant: u32) -> Option<Turn> {
        // AcqRel: Release publishes the caller's notice to the owner that reads this value
        // (its closing CAS, or the claim of its next turn); Acquire, for a cleanup turn, sees
        // the previous owner's record.
        let prev = self.state[tenant as usize]
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                Some(match s {
                    IDLE => OWNED,
                    OWNED => OWNED_DIRTY,
                    other => other,
                })
            })
            .unwrap_or_else(|s| s);
        (prev == IDLE).then(|| {
            // Relaxed: a count for snapshots.
            self.active.fetch_add(1, Ordering::Relaxed);
            Turn {
                tenant,
                credit: false,
            }
        })
    }

    /// Tenants not idle now (an observation).
    pub(crate) fn active(&self) -> u32 {
        // Relaxed: an observation.
        self.active.load(Ordering::Relaxed)
    }

    /// `(FREE, READY)` now.
    pub(crate) fn counters(&self) -> (u64, u64) {
        // Acquire: pairs with the Release RMWs on `ctl`.
        let c = self.ctl.load(Ordering::Acquire);
        (FREE.get(c), READY.get(c))
    }

    /// The state word of `tenant` now.
    #[cfg(test)]
    pub(crate) fn state(&self, tenant: u32) -> u32 {
        // Acquire: pairs with the Release RMWs on the word.
        self.state[tenant as usize].load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(loom)))]
#[path = "turns_tests.rs"]
mod tests;

#[cfg(all(test, loom))]
#[path = "loom_turns.rs"]
mod loom_turns;
