//! loom models of [`IdSet`]: racing inserts of one id (two and three threads), an insert racing
//! a remove and re-insert across a freed cell, a free cell opening nearer home than a racing
//! copy, different ids sharing a home, and a removed cell handed to the next inserter.
//!
//! Tables are the smallest the set builds (4 cells under loom). Ids are picked so that every id
//! in a model has the same home, which makes every model probe the same cells. Each model counts
//! which outcome each execution reached and asserts that every expected one was reached.

use super::{IdSet, InsertError, Slot, Word};
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;
use crate::sync::Ordering::Relaxed;
use loom::thread;

/// A set for one live id with a fixed hash key, and `n` distinct ids sharing one home there.
fn set_with_colliding(n: usize) -> (IdSet, Vec<u64>) {
    let set = IdSet::with_seed(1, 0).unwrap();
    let home = set.home(1);
    let ids = (1..).filter(|&id| set.home(id) == home).take(n).collect();
    (set, ids)
}

/// How many times cell `i` has been taken (its version), read after the threads joined.
fn takes(set: &IdSet, i: usize) -> u64 {
    Word(set.cells[i].word.load(Relaxed)).version()
}

/// The one admitted slot among `results`, checking that every other result is `Duplicate`.
fn sole_winner(results: &[Result<Slot, InsertError>]) -> (usize, Slot) {
    let won: Vec<(usize, Slot)> = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.ok().map(|s| (i, s)))
        .collect();
    assert_eq!(won.len(), 1, "exactly one insert is admitted: {results:?}");
    for r in results {
        assert!(
            matches!(r, Ok(_) | Err(InsertError::Duplicate)),
            "{results:?}"
        );
    }
    won[0]
}

/// Two threads insert the same id into an empty set: exactly one is admitted, the other is
/// refused as a duplicate, and the id can be inserted again once the winner removes it.
#[test]
fn same_id_two_threads_exactly_one_wins() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let set = Arc::new(IdSet::with_seed(1, 0).unwrap());
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let set = set.clone();
                thread::spawn(move || set.insert(7))
            })
            .collect();
        let results: Vec<_> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        let (who, slot) = sole_winner(&results);
        assert_eq!(set.len(), 1);
        assert_eq!(set.insert(7), Err(InsertError::Duplicate));
        set.remove(slot);
        set.remove(set.insert(7).unwrap());
        assert_eq!(set.len(), 0);
        tally.hit(if who == 0 { "first-won" } else { "second-won" });
    });
    outcomes.assert_exactly(&["first-won", "second-won"]);
}

/// Three threads insert the same id: helping chains (a copy deferring to a nearer one that
/// itself defers) still admit exactly one.
#[test]
fn same_id_three_threads_exactly_one_wins() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let set = Arc::new(IdSet::with_seed(1, 0).unwrap());
        let racers: Vec<_> = (0..3)
            .map(|_| {
                let set = set.clone();
                thread::spawn(move || set.insert(7))
            })
            .collect();
        let results: Vec<_> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        let (who, _) = sole_winner(&results);
        assert_eq!(set.len(), 1);
        tally.hit(["first-won", "second-won", "third-won"][who]);
    });
    outcomes.assert_exactly(&["first-won", "second-won", "third-won"]);
}

/// `x` and `y` share a home, `x` nearest. One thread removes `x` (freeing the cell in front of
/// `y`), removes `y` and inserts `y` again; another inserts `y`. At every instant at most one
/// copy of `y` is a member: exactly one of the two inserts is admitted.
#[test]
fn insert_races_remove_and_reinsert_across_a_freed_cell() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let (set, ids) = set_with_colliding(2);
        let (x, y) = (ids[0], ids[1]);
        let set = Arc::new(set);
        let sx = set.insert(x).unwrap();
        let sy = set.insert(y).unwrap();
        let churner = {
            let set = set.clone();
            thread::spawn(move || {
                set.remove(sx);
                set.remove(sy);
                set.insert(y)
            })
        };
        let racer = {
            let set = set.clone();
            thread::spawn(move || set.insert(y))
        };
        let results = [churner.join().unwrap(), racer.join().unwrap()];
        let (who, _) = sole_winner(&results);
        assert_eq!(set.len(), 1);
        assert_eq!(set.insert(y), Err(InsertError::Duplicate));
        tally.hit(if who == 0 {
            "reinsert-won"
        } else {
            "racer-won"
        });
    });
    outcomes.assert_exactly(&["racer-won", "reinsert-won"]);
}

/// `x` sits at the home of `y`. One thread inserts `y` (landing one step past `x`, or at home if
/// `x` is gone by then); another removes `x` and inserts `y`, possibly into the freed home cell,
/// nearer than the first copy. Exactly one is admitted, whichever cell it took — including the
/// classic hard case where the copy farther from home is already a member when the nearer copy
/// is published ("far-won-over-near"): the nearer copy must find it.
#[test]
fn free_cell_opening_in_front_of_a_racing_copy() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let (set, ids) = set_with_colliding(2);
        let (x, y) = (ids[0], ids[1]);
        let set = Arc::new(set);
        let home = set.home(y);
        let sx = set.insert(x).unwrap();
        let plain = {
            let set = set.clone();
            thread::spawn(move || set.insert(y))
        };
        let freer = {
            let set = set.clone();
            thread::spawn(move || {
                set.remove(sx);
                set.insert(y)
            })
        };
        let results = [plain.join().unwrap(), freer.join().unwrap()];
        let (_, slot) = sole_winner(&results);
        assert_eq!(set.len(), 1);
        assert_eq!(set.insert(y), Err(InsertError::Duplicate));
        // Cells taken by the two inserts (the home cell was taken once for `x` beforehand).
        let extra: u64 = (0..set.cells()).map(|i| takes(&set, i)).sum::<u64>() - 1;
        let near = slot.index() as usize == home;
        tally.hit(match (near, extra) {
            (true, 1) => "near-won-alone",
            (true, _) => "near-won-over-far",
            (false, 1) => "far-won-alone",
            (false, _) => "far-won-over-near",
        });
    });
    outcomes.assert_exactly(&[
        "far-won-alone",
        "far-won-over-near",
        "near-won-alone",
        "near-won-over-far",
    ]);
}

/// Two different ids with the same home are inserted at once: both are admitted, into different
/// cells, and both are then refused as duplicates.
#[test]
fn different_ids_sharing_a_home_are_both_admitted() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let (set, ids) = set_with_colliding(2);
        let set = Arc::new(set);
        let home = set.home(ids[0]);
        let threads: Vec<_> = ids
            .iter()
            .map(|&id| {
                let set = set.clone();
                thread::spawn(move || set.insert(id).unwrap())
            })
            .collect();
        let slots: Vec<Slot> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_ne!(slots[0].index(), slots[1].index());
        assert_eq!(set.len(), 2);
        for &id in &ids {
            assert_eq!(set.insert(id), Err(InsertError::Duplicate));
        }
        tally.hit(if slots[0].index() as usize == home {
            "first-at-home"
        } else {
            "second-at-home"
        });
    });
    outcomes.assert_exactly(&["first-at-home", "second-at-home"]);
}

/// The remove is a plain `Release` store. `x`'s owner writes a per-cell note (a non-atomic cell
/// standing for whatever the owner did with the request) and removes `x`; another thread inserts
/// `y`, which shares `x`'s home. When `y` lands in the cell `x` left, its inserter reads the note
/// with no further synchronisation: loom fails the model if the remove did not order the write
/// before the take. Whichever cell `y` took, `x` can come back afterwards, and `y` is a member.
#[test]
fn remove_hands_the_cell_to_the_next_inserter() {
    use crate::sync::UnsafeCell;
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let (set, ids) = set_with_colliding(2);
        let (x, y) = (ids[0], ids[1]);
        let set = Arc::new(set);
        let notes: Arc<Vec<UnsafeCell<u64>>> =
            Arc::new((0..set.cells()).map(|_| UnsafeCell::new(0)).collect());
        let sx = set.insert(x).unwrap();
        let owner = {
            let (set, notes) = (set.clone(), notes.clone());
            thread::spawn(move || {
                // SAFETY: the cell `sx` names is this thread's until the remove below; the next
                // taker of the cell reads the note only after its take.
                notes[sx.index() as usize].with_mut(|n| unsafe { *n = x });
                set.remove(sx);
            })
        };
        let inserter = {
            let (set, notes) = (set.clone(), notes.clone());
            thread::spawn(move || {
                let sy = set.insert(y).unwrap();
                // SAFETY: the cell is this thread's since its take; the previous owner's last
                // write to the note was before its remove, which the take read.
                let note = notes[sy.index() as usize].with(|n| unsafe { *n });
                (sy, note)
            })
        };
        owner.join().unwrap();
        let (sy, note) = inserter.join().unwrap();
        assert_eq!(set.insert(y), Err(InsertError::Duplicate));
        let again = set.insert(x).unwrap();
        assert_eq!(set.len(), 2);
        set.remove(again);
        set.remove(sy);
        assert_eq!(set.len(), 0);
        tally.hit(if sy.index() == sx.index() {
            assert_eq!(note, x, "the owner's write before its remove is seen");
            "reused-freed-cell"
        } else {
            "took-next-cell"
        });
    });
    outcomes.assert_exactly(&["reused-freed-cell", "took-next-cell"]);
}
