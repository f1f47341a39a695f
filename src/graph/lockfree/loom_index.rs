//! loom models of the key index's growth (SPEC D51): the index grows by replacing its array
//! under the topology lock and retires the old one through the epoch collector, while another
//! thread looks keys up, or names a new key, lock-free. In every interleaving the lookup must
//! find the live key at its version and not find a key never named, the new key must land in
//! exactly one cell, and no thread may touch an array after the epoch reclaimed it: in the
//! models a retired array is kept and marked when the collector reclaims it, and every probe
//! and claim checks the mark of the array it read (`Cells::assert_held`). As in the engine,
//! the index's readers do not pin: each call of the models pins as the public call it stands
//! for does (`sync::epoch::held`).

use super::index::Found;
use super::{LockFreeGraph, Work};
use crate::graph::loom_support::{bounds, collect, spec};
use crate::graph::{rules, Admission, GraphEngine, JobKey, JobOutcome, NodeRef};
use crate::sync::epoch;
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;

/// Names key `key` with a job that runs to success and is collected (its outcome read, its
/// handle dropped): the key stays, with no producer and no waiters.
fn create(g: &LockFreeGraph, key: u64) {
    let mut w = Work::default();
    let n: NodeRef = match g.submit(&spec(key, &[]), rules::NO_DEADLINE, &mut w) {
        Ok(Admission::Admitted(n)) => n,
        other => panic!("key {key} not admitted: {other:?}"),
    };
    assert!(g.pop_ready(&mut w).is_some());
    g.admitted(n, &mut w);
    assert!(g.start(n));
    g.complete(n, JobOutcome::Succeeded, &mut w).unwrap();
    assert_eq!(collect(g, n).unwrap(), Some(JobOutcome::Succeeded));
}

/// Two key slots' worth of table (eight cells at most) whose index starts at four cells, with
/// key 1 named.
fn small_table() -> Arc<LockFreeGraph> {
    let mut g = LockFreeGraph::new(bounds(2, 1, 4));
    g.start_index_with(4);
    create(&g, 1);
    assert_eq!(g.index_cells(), 4);
    Arc::new(g)
}

/// The growing side (pinned, as the engine's `shrink` is): doubles the index under the topology lock (retiring the old array), then
/// gives the collector the chances it needs to reclaim it (two epoch advances).
fn grow(g: &LockFreeGraph) {
    {
        let _pin = epoch::pin();
        g.grow_index_now();
    }
    for _ in 0..2 {
        epoch::pin().flush();
    }
}

/// Where a thread's operations fell against the growth (array sizes read before and after).
fn when(before: u32, after: u32) -> &'static str {
    match (before, after) {
        (4, 4) => "before",
        (8, 8) => "after",
        _ => "overlapping",
    }
}

/// Whether the old array was reclaimed by the time the other thread was done with the index.
fn reclaimed(g: &LockFreeGraph) -> &'static str {
    match g.index_arrays_reclaimed() {
        0 => "kept",
        1 => "reclaimed",
        n => panic!("{n} arrays reclaimed, one retired"),
    }
}

/// A lookup racing an index growth: a reader looks up the live key 1 and the never-named key
/// 2 while the other thread grows the index from four cells to eight and the collector may
/// reclaim the old array.
#[test]
fn loom_graph_lookup_racing_index_growth() {
    let timing = std::sync::Arc::new(Outcomes::new());
    let reclaim = std::sync::Arc::new(Outcomes::new());
    let (seen_timing, seen_reclaim) = (timing.clone(), reclaim.clone());
    epoch::model_with_epoch(|| {
        model(move || {
            let g = small_table();
            let v1 = g.version(JobKey::new(1)).unwrap();
            let reader = {
                let g = g.clone();
                loom::thread::spawn(move || {
                    let before = g.index_cells();
                    // Each read under a pin of its own, as `Graph::version` pins.
                    let version = |key| {
                        let _pin = epoch::pin();
                        g.version(JobKey::new(key))
                    };
                    assert_eq!(version(1), Some(v1), "a present key read absent");
                    assert_eq!(version(2), None);
                    (when(before, g.index_cells()), reclaimed(&g))
                })
            };
            grow(&g);
            let (at, freed) = reader.join().unwrap();
            seen_timing.hit(at);
            seen_reclaim.hit(freed);
            assert_eq!(g.index_cells(), 8);
            assert_eq!(g.version(JobKey::new(1)), Some(v1));
            assert_eq!(g.occupancy().keys_used, 1);
        })
    });
    eprintln!("lookup vs index growth: {timing:?} {reclaim:?}");
    timing.assert_exactly(&["before", "overlapping", "after"]);
    reclaim.assert_exactly(&["kept", "reclaimed"]);
}

/// An insert racing an index growth: a `find` of the new key 2 then its `claim` (the fast
/// path of a submit naming a new key) while the other thread grows the index. The claim's
/// cell may be frozen or replaced under it; the key lands in exactly one cell either way, and
/// key 1 is untouched.
#[test]
fn loom_graph_insert_racing_index_growth() {
    let timing = std::sync::Arc::new(Outcomes::new());
    let reclaim = std::sync::Arc::new(Outcomes::new());
    let (seen_timing, seen_reclaim) = (timing.clone(), reclaim.clone());
    epoch::model_with_epoch(|| {
        model(move || {
            let g = small_table();
            let v1 = g.version(JobKey::new(1)).unwrap();
            let ident = rules::ident(JobKey::new(2));
            let inserter = {
                let g = g.clone();
                loom::thread::spawn(move || {
                    let before = g.index_cells();
                    let r = {
                        // One pin for the lookup and its claim, as a submit holds.
                        let _pin = epoch::pin();
                        let seen = g.find(ident);
                        assert!(matches!(seen, Found::Absent(_)), "a key never named found");
                        g.claim(ident, seen, false).expect("a free key slot")
                    };
                    let found = {
                        let _pin = epoch::pin();
                        g.lookup(ident)
                    };
                    assert_eq!(found, Some(r), "the claimed key not found");
                    (when(before, g.index_cells()), reclaimed(&g), r)
                })
            };
            grow(&g);
            let (at, freed, r) = inserter.join().unwrap();
            seen_timing.hit(at);
            seen_reclaim.hit(freed);
            assert_eq!(g.index_cells(), 8);
            let mut entries = 0;
            {
                let _g = g.lock();
                g.for_each_key(|i, k| {
                    if i == ident {
                        assert_eq!(k, r);
                        entries += 1;
                    }
                });
            }
            assert_eq!(entries, 1, "the new key landed in {entries} cells");
            assert_eq!(g.lookup(ident), Some(r));
            assert_eq!(g.version(JobKey::new(1)), Some(v1));
            assert_eq!(g.occupancy().keys_used, 2);
        })
    });
    eprintln!("insert vs index growth: {timing:?} {reclaim:?}");
    timing.assert_exactly(&["before", "overlapping", "after"]);
    reclaim.assert_exactly(&["kept", "reclaimed"]);
}
