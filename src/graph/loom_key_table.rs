//! loom models of the lock-free graph's key table (SPEC D24): a lock-free lookup, and a
//! lock-free insertion of a new key, racing the index's compaction, which a removal triggers
//! under the topology lock. The models place the keys on one probe chain, so compaction moves
//! an entry the other thread is looking for. The lookup must always find the live key at its
//! version and never find a key that was not named; the insertion must leave exactly one entry
//! for its key, and the live key untouched.

use super::lockfree::{LockFreeGraph, Work};
use super::loom_support::{bounds, collect, spec};
use super::{Admission, GraphEngine, JobKey, JobOutcome, NodeRef};
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;

/// Names key `key` with a job that runs to success and is collected (its outcome read, its
/// handle dropped): the key stays, with no producer and no waiters.
fn create(g: &LockFreeGraph, key: u64) {
    let mut w = Work::default();
    let n: NodeRef = match g.submit(&spec(key, &[]), crate::graph::rules::NO_DEADLINE, &mut w) {
        Ok(Admission::Admitted(n)) => n,
        other => panic!("key {key} not admitted: {other:?}"),
    };
    assert!(g.pop_ready(&mut w).is_some());
    g.admitted(n, &mut w);
    assert!(g.start(n));
    g.complete(n, JobOutcome::Succeeded, &mut w).unwrap();
    assert_eq!(collect(g, n).unwrap(), Some(JobOutcome::Succeeded));
}

/// `count` keys (from 1 up) whose probes all start at the same index cell.
fn same_chain(g: &LockFreeGraph, count: usize) -> Vec<u64> {
    let home = g.key_home(JobKey::new(1));
    (1..)
        .filter(|&k| g.key_home(JobKey::new(k)) == home)
        .take(count)
        .collect()
}

/// A reader looks up a live key `a` (and a never-named key) while a removal of `b`, which
/// sits before `a` on the same chain, compacts the index and moves `a`.
#[test]
fn loom_graph_reader_vs_key_compaction() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        // Two key slots, four index cells: one tombstone triggers compaction.
        let g = Arc::new(LockFreeGraph::new(bounds(2, 1, 2)));
        let keys = same_chain(&g, 3);
        let (b, a, never) = (keys[0], keys[1], keys[2]);
        create(&g, b);
        create(&g, a);
        let va = g.version(JobKey::new(a)).unwrap();
        let reader = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let before = g.key_compactions();
                assert_eq!(g.version(JobKey::new(a)), Some(va));
                assert_eq!(g.version(JobKey::new(never)), None);
                when(before, g.key_compactions())
            })
        };
        let mut w = Work::default();
        GraphEngine::remove(&*g, JobKey::new(b), &mut w).unwrap();
        seen.hit(reader.join().unwrap());
        assert_eq!(g.key_compactions(), 1);
        assert_eq!(g.version(JobKey::new(a)), Some(va));
        assert_eq!(g.version(JobKey::new(b)), None);
        assert_eq!(g.occupancy().keys_used, 1);
    });
    eprintln!("reader vs compaction: {outcomes:?}");
    outcomes.assert_exactly(&["before", "overlapping", "after"]);
}

/// Where a thread's operations fell against the one compaction (counts read before and after).
fn when(before: u64, after: u64) -> &'static str {
    match (before, after) {
        (0, 0) => "before",
        (1, 1) => "after",
        _ => "overlapping",
    }
}

/// A submitter names a new key `c` (same chain) while a removal compacts the index: `c` ends
/// with exactly one entry (removing it once makes it unknown), `a` is untouched.
#[test]
fn loom_graph_insert_vs_key_compaction() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        // Four key slots, eight index cells: the second tombstone triggers compaction.
        let g = Arc::new(LockFreeGraph::new(bounds(2, 1, 4)));
        let keys = same_chain(&g, 4);
        let (b1, b2, a, c) = (keys[0], keys[1], keys[2], keys[3]);
        create(&g, b1);
        create(&g, b2);
        create(&g, a);
        let va = g.version(JobKey::new(a)).unwrap();
        let mut w = Work::default();
        GraphEngine::remove(&*g, JobKey::new(b1), &mut w).unwrap();
        assert_eq!(g.key_compactions(), 0);
        let inserter = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let before = g.key_compactions();
                match g.submit(&spec(c, &[]), crate::graph::rules::NO_DEADLINE, &mut w) {
                    Ok(Admission::Admitted(_)) => {}
                    other => panic!("key {c} not admitted: {other:?}"),
                };
                assert!(g.version(JobKey::new(c)).is_some());
                when(before, g.key_compactions())
            })
        };
        GraphEngine::remove(&*g, JobKey::new(b2), &mut w).unwrap();
        seen.hit(inserter.join().unwrap());
        assert_eq!(g.key_compactions(), 1);
        assert_eq!(g.version(JobKey::new(a)), Some(va));
        assert_eq!(g.occupancy().keys_used, 2);
        // One entry for `c`: after one removal it is gone.
        GraphEngine::remove(&*g, JobKey::new(c), &mut w).unwrap();
        assert_eq!(g.version(JobKey::new(c)), None);
        assert_eq!(g.occupancy().keys_used, 1);
    });
    eprintln!("insert vs compaction: {outcomes:?}");
    outcomes.assert_exactly(&["before", "overlapping", "after"]);
}
