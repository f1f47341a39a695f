//! Unit tests of the live request id set.

use super::*;
use crate::sync::Ordering::AcqRel;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Barrier, Mutex};

/// `n` distinct ids whose home in `set` is the same cell.
fn colliding(set: &IdSet, n: usize) -> Vec<u64> {
    let home = set.home(1);
    (1..).filter(|&id| set.home(id) == home).take(n).collect()
}

/// A small deterministic generator for the threaded tests (no shared state, no locks).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

proptest! {
    #[test]
    fn f34_cell_word_round_trips(version in 0..=VERSION.max(), state in FREE..=COLLIDED) {
        let w = Word::new(version, state);
        prop_assert_eq!((w.version(), w.state()), (version, state));
        let other = if state == MEMBER { FREE } else { MEMBER };
        prop_assert_eq!(w.with(other).version(), version);
        prop_assert_eq!(w.with(other).state(), other);
        let next = if version == VERSION.max() { 0 } else { version + 1 };
        prop_assert_eq!((w.taken().version(), w.taken().state()), (next, BUSY));
    }
}

#[test]
fn f34_same_id_twice_is_refused() {
    let set = IdSet::new(4).unwrap();
    let slot = set.insert(42).unwrap();
    assert_eq!(set.insert(42), Err(InsertError::Duplicate));
    assert_eq!(set.len(), 1);
    set.remove(slot);
    assert_eq!(set.len(), 0);
    let again = set.insert(42).unwrap();
    assert_eq!(set.insert(42), Err(InsertError::Duplicate));
    set.remove(again);
}

#[test]
fn f34_every_id_value_is_accepted() {
    let set = IdSet::new(8).unwrap();
    let ids = [0, 1, u64::MAX, u64::MAX - 1, 1 << 63];
    let slots: Vec<Slot> = ids.iter().map(|&id| set.insert(id).unwrap()).collect();
    for &id in &ids {
        assert_eq!(set.insert(id), Err(InsertError::Duplicate), "id {id}");
    }
    assert_eq!(set.len(), ids.len());
    for s in slots {
        set.remove(s);
    }
    assert_eq!(set.len(), 0);
}

#[test]
fn f34_absurd_sizes_are_refused() {
    for live in [0, MAX_LIVE + 1, usize::MAX] {
        let err = IdSet::new(live).unwrap_err();
        assert_eq!(err, Error::configuration("capacity"), "live {live}");
    }
    let set = IdSet::new(1).unwrap();
    assert_eq!(set.cells(), MIN_CELLS);
    assert_eq!(IdSet::new(1000).unwrap().cells(), 2048);
    assert_eq!(IdSet::new(1024).unwrap().cells(), 2048);
}

/// The classic hard case: a free cell nearer home than a member copy must not let a second
/// copy in, and a chain of colliding ids stays intact across removes in its middle.
#[test]
fn f34_duplicate_beyond_a_freed_cell_is_refused() {
    let set = IdSet::with_seed(8, 7).unwrap();
    let ids = colliding(&set, 5);
    let slots: Vec<Slot> = ids.iter().map(|&id| set.insert(id).unwrap()).collect();
    let home = set.home(ids[0]) as u32;
    for (d, s) in slots.iter().enumerate() {
        assert_eq!(s.index(), (home + d as u32) & set.mask as u32);
    }
    // Free the cells in front of the last id: every later copy is still found.
    set.remove(slots[0]);
    set.remove(slots[2]);
    for &id in &[ids[1], ids[3], ids[4]] {
        assert_eq!(set.insert(id), Err(InsertError::Duplicate), "id {id}");
    }
    // A new colliding id takes the first freed cell; the removed ones come back.
    let newcomer = colliding(&set, 6)[5];
    assert_eq!(set.insert(newcomer).unwrap().index(), slots[0].index());
    let back = set.insert(ids[0]).unwrap();
    assert_eq!(back.index(), slots[2].index());
    assert_eq!(
        set.insert(ids[2]).unwrap().index(),
        (home + 5) & set.mask as u32
    );
    assert_eq!(set.len(), 6);
}

/// Two copies of one id published by hand, `near` at home and `far` one step past it, as two
/// racing inserts leave them when a cell nearer home frees up between their scans.
fn two_undecided_copies(set: &IdSet, id: u64) -> [(usize, u32, Word); 2] {
    let home = set.home(id);
    let far = set.publish(id, home, 1, 0).unwrap();
    let near = set.publish(id, home, 0, 0).unwrap();
    assert_eq!((near.1, far.1), (0, 1));
    [near, far]
}

fn word_of(set: &IdSet, cell: usize) -> Word {
    Word(set.cells[cell].word.load(Relaxed))
}

/// Settling the nearer copy first admits it and collides the farther one, whose own settle
/// then reports the loss with the member seen.
#[test]
fn f34_settle_nearer_copy_wins_and_collides_a_farther_one() {
    let set = IdSet::with_seed(8, 1).unwrap();
    let (id, home) = (99, set.home(99));
    let [near, far] = two_undecided_copies(&set, id);
    assert_eq!(
        set.settle(id, home, near.0, near.2, near.1, true),
        Fate::Won
    );
    assert_eq!(word_of(&set, far.0), far.2.with(COLLIDED));
    assert_eq!(
        set.settle(id, home, far.0, far.2, far.1, true),
        Fate::Lost { seen_member: true }
    );
    assert_eq!(word_of(&set, near.0), near.2.with(MEMBER));
    assert_eq!(set.len(), 1);
}

/// Settling the farther copy first makes it defer to the nearer undecided one and admit that
/// one on its behalf; the nearer inserter then finds itself admitted.
#[test]
fn f34_settle_farther_copy_defers_and_helps_the_nearer_one() {
    let set = IdSet::with_seed(8, 2).unwrap();
    let (id, home) = (99, set.home(99));
    let [near, far] = two_undecided_copies(&set, id);
    assert_eq!(
        set.settle(id, home, far.0, far.2, far.1, true),
        Fate::Lost { seen_member: true }
    );
    assert_eq!(word_of(&set, far.0), far.2.with(COLLIDED));
    assert_eq!(word_of(&set, near.0), near.2.with(MEMBER));
    assert_eq!(
        set.settle(id, home, near.0, near.2, near.1, true),
        Fate::Won
    );
    // A stale settle of the farther copy, after its cell was given back and reused, touches
    // nothing.
    // SeqCst: stands in for the inserter's give-up store in `insert`.
    set.cells[far.0].word.store(far.2.with(FREE).0, SeqCst);
    let other = set.insert(5).unwrap();
    set.settle(id, home, far.0, far.2, far.1, false);
    assert_eq!(set.len(), 2);
    set.remove(other);
}

/// The classic hard case: the farther copy is already a member when the nearer one (in a
/// cell that was free when the farther inserter scanned) is published; the nearer collides.
#[test]
fn f34_settle_member_farther_along_beats_a_nearer_copy() {
    let set = IdSet::with_seed(8, 3).unwrap();
    let (id, home) = (99, set.home(99));
    let far = set.publish(id, home, 1, 0).unwrap();
    assert_eq!(set.settle(id, home, far.0, far.2, far.1, true), Fate::Won);
    let near = set.publish(id, home, 0, 0).unwrap();
    assert_eq!(near.1, 0);
    assert_eq!(
        set.settle(id, home, near.0, near.2, near.1, true),
        Fate::Lost { seen_member: true }
    );
    assert_eq!(word_of(&set, near.0), near.2.with(COLLIDED));
    assert_eq!(set.len(), 1);
    // An insert finds the undecided-then-collided copy harmless and the member refusing.
    assert_eq!(set.insert(id), Err(InsertError::Duplicate));
}

#[test]
fn f34_full_table_is_reported_not_looped() {
    let set = IdSet::with_seed(1, 3).unwrap();
    let slots: Vec<Slot> = (0..set.cells() as u64)
        .map(|id| set.insert(id).unwrap())
        .collect();
    assert_eq!(set.insert(1000), Err(InsertError::Full));
    // A present id is still a duplicate, not "full".
    assert_eq!(set.insert(3), Err(InsertError::Duplicate));
    set.remove(slots[5]);
    set.insert(1000).unwrap();
    assert_eq!(set.insert(1001), Err(InsertError::Full));
}

/// One step of the model test: insert an id, or remove the `n`th live id (mod live count).
#[derive(Debug, Clone)]
enum Op {
    Insert(u64),
    Remove(usize),
}

fn ops(id_range: u64) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(
        prop_oneof![
            3 => (0..id_range).prop_map(Op::Insert),
            2 => any::<usize>().prop_map(Op::Remove),
        ],
        1..400,
    )
}

/// Runs `ops` against the set and a `HashMap` model; the set's answers must match.
fn check_against_model(live: usize, seed: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let set = IdSet::with_seed(live, seed).unwrap();
    let mut model: HashMap<u64, Slot> = HashMap::new();
    let mut order: Vec<u64> = Vec::new();
    for op in ops {
        match *op {
            Op::Insert(id) => {
                let got = set.insert(id);
                if model.contains_key(&id) {
                    prop_assert_eq!(got, Err(InsertError::Duplicate));
                } else if model.len() < set.cells() {
                    let slot = got.map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
                    prop_assert!(model.values().all(|s| s.index != slot.index));
                    model.insert(id, slot);
                    order.push(id);
                } else {
                    prop_assert_eq!(got, Err(InsertError::Full));
                }
            }
            Op::Remove(n) if !order.is_empty() => {
                let id = order.swap_remove(n % order.len());
                set.remove(model.remove(&id).unwrap());
            }
            Op::Remove(_) => {}
        }
    }
    prop_assert_eq!(set.len(), model.len());
    for &id in model.keys() {
        prop_assert_eq!(set.insert(id), Err(InsertError::Duplicate));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn f34_matches_a_set_model_live_1(seed in any::<u64>(), ops in ops(4)) {
        check_against_model(1, seed, &ops)?;
    }

    #[test]
    fn f34_matches_a_set_model_live_33(seed in any::<u64>(), ops in ops(80)) {
        check_against_model(33, seed, &ops)?;
    }

    #[test]
    fn f34_matches_a_set_model_live_1000(seed in any::<u64>(), ops in ops(600)) {
        check_against_model(1000, seed, &ops)?;
    }

    #[test]
    fn f34_matches_a_set_model_live_100000(seed in any::<u64>(), ops in ops(500)) {
        check_against_model(100_000, seed, &ops)?;
    }
}

/// `threads` threads insert the same id at once, round after round, over a small table whose
/// other cells are churned between rounds so the racers take different free cells: exactly
/// one insert per round is admitted.
fn race_one_id(threads: usize, rounds: usize) {
    let set = IdSet::with_seed(4, threads as u64).unwrap();
    // Background ids share the racers' home, so free cells appear at varied distances.
    let ids = colliding(&set, 8);
    let (racer, background) = (ids[0], &ids[1..]);
    let barrier = Barrier::new(threads);
    // Racers spin to the start line rather than sleep in the barrier, so that they leave it
    // within nanoseconds of each other.
    let arrived = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(threads));
    let live_bg = Mutex::new(Vec::<(u64, Slot)>::new());
    std::thread::scope(|s| {
        for me in 0..threads {
            let (set, barrier, arrived) = (&set, &barrier, &arrived);
            let (results, live_bg) = (&results, &live_bg);
            s.spawn(move || {
                let mut rng = Rng(me as u64);
                for round in 0..rounds {
                    if me == 0 {
                        // Churn the background: at most 3 of them live, plus the racers'
                        // cells, fit the table.
                        let mut bg = live_bg.lock().unwrap();
                        if !bg.is_empty() && rng.below(2) == 0 {
                            let victim = rng.below(bg.len());
                            let (_, slot) = bg.swap_remove(victim);
                            set.remove(slot);
                        }
                        if bg.len() < 3 {
                            let id = background[rng.below(background.len())];
                            if let Ok(slot) = set.insert(id) {
                                bg.push((id, slot));
                            }
                        }
                    }
                    barrier.wait();
                    // Relaxed suffices: the round's state is ordered by the barrier above.
                    arrived.fetch_add(1, Relaxed);
                    let mut spins = 0u32;
                    while arrived.load(Relaxed) < threads * (round + 1) {
                        spins += 1;
                        if spins.is_multiple_of(1024) {
                            std::thread::yield_now();
                        }
                        std::hint::spin_loop();
                    }
                    let r = set.insert(racer);
                    results.lock().unwrap().push(r);
                    if barrier.wait().is_leader() {
                        let mut rs = results.lock().unwrap();
                        let won: Vec<Slot> = rs.iter().filter_map(|r| r.ok()).collect();
                        assert_eq!(won.len(), 1, "results {rs:?}");
                        assert_eq!(
                            rs.iter()
                                .filter(|r| **r == Err(InsertError::Duplicate))
                                .count(),
                            threads - 1
                        );
                        set.remove(won[0]);
                        rs.clear();
                    }
                    barrier.wait();
                }
            });
        }
    });
    assert_eq!(set.len(), live_bg.lock().unwrap().len());
}

#[test]
fn f34_racing_inserts_of_one_id_admit_exactly_one() {
    for threads in 2..=4 {
        race_one_id(threads, 3000);
    }
}

/// Steady churn at the capacity bound, single-threaded: a million removes and inserts never
/// report `Full`, and every live id stays a duplicate.
#[test]
fn f34_churn_at_capacity_never_fills() {
    const LIVE: usize = 1000;
    const OPS: usize = 1_000_000;
    let set = IdSet::with_seed(LIVE, 11).unwrap();
    let mut rng = Rng(5);
    let mut live: Vec<(u64, Slot)> = Vec::with_capacity(LIVE);
    let mut next_id = 0u64;
    while live.len() < LIVE {
        live.push((next_id, set.insert(next_id).unwrap()));
        next_id += 1;
    }
    for op in 0..OPS {
        let (id, slot) = live.swap_remove(rng.below(LIVE));
        set.remove(slot);
        // Alternate a fresh id and the one just removed.
        let id = if op % 2 == 0 { next_id } else { id };
        next_id += 1;
        let slot = set.insert(id).unwrap_or_else(|e| panic!("op {op}: {e:?}"));
        live.push((id, slot));
        if op % 1000 == 0 {
            let (present, _) = live[rng.below(LIVE)];
            assert_eq!(set.insert(present), Err(InsertError::Duplicate));
        }
    }
    assert_eq!(set.len(), LIVE);
    let max_reach = set
        .cells
        .iter()
        .map(|c| c.reach.load(Relaxed))
        .max()
        .unwrap();
    assert!(max_reach < 64, "reach grew to {max_reach}");
}

/// Concurrent churn at the capacity bound over a shared id space: ids are inserted and
/// removed by 4 threads, each holding at most its share of `LIVE`; an external flag per id
/// catches any id admitted twice, and `Full` is never reported.
#[test]
fn f34_concurrent_churn_never_admits_a_duplicate() {
    const LIVE: usize = 64;
    const THREADS: usize = 4;
    const OPS: usize = 1_000_000 / THREADS;
    const IDS: usize = 2 * LIVE;
    let set = IdSet::with_seed(LIVE, 13).unwrap();
    let held: Vec<AtomicBool> = (0..IDS).map(|_| AtomicBool::new(false)).collect();
    let duplicates_refused = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for me in 0..THREADS {
            let (set, held, refused) = (&set, &held, &duplicates_refused);
            s.spawn(move || {
                let mut rng = Rng(100 + me as u64);
                let mut mine: Vec<(u64, Slot)> = Vec::new();
                for _ in 0..OPS {
                    if mine.len() == LIVE / THREADS || (!mine.is_empty() && rng.below(2) == 0) {
                        let victim = rng.below(mine.len());
                        let (id, slot) = mine.swap_remove(victim);
                        // AcqRel: hands the id to its next holder; pairs with the swap
                        // below, made after that holder's insert was admitted.
                        assert!(held[id as usize].swap(false, AcqRel));
                        set.remove(slot);
                    } else {
                        let id = rng.below(IDS) as u64;
                        match set.insert(id) {
                            Ok(slot) => {
                                assert!(
                                    // AcqRel: pairs with the release of the id above.
                                    !held[id as usize].swap(true, AcqRel),
                                    "id {id} admitted twice"
                                );
                                mine.push((id, slot));
                            }
                            Err(InsertError::Duplicate) => {
                                refused.fetch_add(1, Relaxed);
                            }
                            Err(InsertError::Full) => panic!("full below the capacity bound"),
                        }
                    }
                }
                for (id, slot) in mine {
                    // Release: pairs with the AcqRel swap of the id's next holder.
                    held[id as usize].store(false, Release);
                    set.remove(slot);
                }
            });
        }
    });
    assert_eq!(set.len(), 0);
    // The id space is shared, so duplicates were actually attempted.
    assert!(duplicates_refused.load(Relaxed) > 1000);
    let seen: HashSet<u64> = (0..IDS as u64).collect();
    for id in seen {
        set.remove(set.insert(id).unwrap());
    }
}

/// The reach of a home is raised only by a copy published beyond it: an insert into a cell
/// within the reach it read leaves the reach alone, and the copies beyond that cell are still
/// found.
#[test]
fn f34_insert_within_the_reach_leaves_it_and_still_finds_copies_beyond() {
    let set = IdSet::with_seed(8, 3).unwrap();
    let ids = colliding(&set, 4);
    let home = set.home(ids[0]);
    let slots: Vec<Slot> = ids[..3].iter().map(|&id| set.insert(id).unwrap()).collect();
    assert_eq!(set.reach(home), 2);
    set.remove(slots[0]);
    // The newcomer lands at home, within the reach: no raise.
    let newcomer = set.insert(ids[3]).unwrap();
    assert_eq!(newcomer.index() as usize, home);
    assert_eq!(set.reach(home), 2);
    for &id in &ids[1..] {
        assert_eq!(set.insert(id), Err(InsertError::Duplicate), "id {id}");
    }
    // A copy beyond the reach raises it.
    let back = set.insert(ids[0]).unwrap();
    assert_eq!(back.index() as usize, set.at(home, 3));
    assert_eq!(set.reach(home), 3);
    assert_eq!(set.insert(ids[0]), Err(InsertError::Duplicate));
}
