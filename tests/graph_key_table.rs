//! SPEC D01 and D24, the key table: a removed key gives its room back to other keys, key churn
//! never fills the table, removal and re-creation at scale, lookups racing the table's
//! compaction, and bad key operations staying typed errors once slots are reused. Every test
//! runs on both graph engines.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{Admission, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome, Version};
use fairway::oracle::GraphOn;
use fairway::{Code, Reason};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[macro_use]
#[path = "common/graph.rs"]
mod graph_common;
use graph_common::*;

both_graphs!(
    d24_removed_key_slot_is_reused_by_another_key,
    d24_key_churn_never_fills_the_table,
    d01_d24_removal_and_recreation_at_scale,
    d24_lookups_racing_key_compaction_never_answer_wrong,
    d24_operations_on_a_removed_key_whose_room_was_reused_are_typed_errors,
);

fn small<E: GraphEngine>(keys: u32) -> GraphOn<E> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    Graph::builder(ledger)
        .class(4)
        .nodes(64)
        .edges(128)
        .keys(keys)
        .build_with::<E>()
        .unwrap()
}

fn key(k: u64) -> JobKey {
    JobKey::new(k)
}

/// Runs every ready job (succeeding) and drops the handle of every job that has ended, which
/// frees it (SPEC D31).
fn run_all<E: GraphEngine>(g: &GraphOn<E>, handles: &mut Vec<JobHandle<E>>) {
    while let Some(job) = g.try_next(CPU) {
        g.complete(job, JobOutcome::Succeeded).unwrap();
    }
    handles.retain(|h| g.outcome(h).unwrap().is_none());
}

/// Whether the graph compacted its key index at least once, or is the mutex graph (which has
/// no index to compact).
fn compacts<E: GraphEngine>(g: &GraphOn<E>) -> bool {
    g.key_compactions() > 0 || std::any::type_name::<E>().ends_with("MutexGraph")
}

fn d24_removed_key_slot_is_reused_by_another_key<E: GraphEngine>() {
    let g = small::<E>(4);
    let mut hs = Vec::new();
    for k in 1..=4 {
        hs.push(admit(&g, k, &[]));
    }
    run_all(&g, &mut hs);
    let o = g.occupancy();
    assert_eq!((o.keys_used, o.keys_total), (4, 4));
    let v3 = g.version(key(3)).unwrap();
    // Full: a fifth key is refused, nothing changed.
    assert!(matches!(
        g.submit(&spec(5, &[])).unwrap(),
        Admission::Backpressured
    ));
    assert_eq!(g.occupancy().keys_used, 4);
    assert_eq!(g.version(key(5)), None);
    // Removing one gives its room to another key.
    g.remove(key(2)).unwrap();
    assert_eq!(g.occupancy().keys_used, 3);
    hs.push(admit(&g, 5, &[]));
    assert_eq!(g.occupancy().keys_used, 4);
    let v5 = g.version(key(5)).unwrap();
    assert_eq!(v5.generation, 0);
    // The other keys are untouched; the removed one is unknown.
    assert_eq!(g.version(key(3)), Some(v3));
    assert_eq!(g.version(key(2)), None);
    // Named again, the removed key is a new incarnation, and needs room: full again.
    assert!(matches!(
        g.submit(&spec(2, &[])).unwrap(),
        Admission::Backpressured
    ));
    g.remove(key(1)).unwrap();
    hs.push(admit(&g, 2, &[]));
    let v2 = g.version(key(2)).unwrap();
    assert!(v2.incarnation > v5.incarnation);
    run_all(&g, &mut hs);
    assert!(hs.is_empty());
    assert_eq!(g.version(key(5)), Some(v5));
    g.reset();
    let o = g.occupancy();
    assert_eq!((o.keys_used, o.nodes_used, o.edges_used), (0, 0, 0));
}

fn d24_key_churn_never_fills_the_table<E: GraphEngine>() {
    const TABLE: u32 = 8;
    let g = small::<E>(TABLE);
    let mut hs = Vec::new();
    // Two long-lived keys: one finished producer, one key whose producer never comes (its
    // dependent waits all along).
    hs.push(admit(&g, 1, &[]));
    run_all(&g, &mut hs);
    let waiter = admit(&g, 2, &[dep(3, Gate::OnSuccess)]);
    let (v1, v3) = (g.version(key(1)).unwrap(), g.version(key(3)).unwrap());
    // 40 times the table's size in keys, each created, run and removed; some removed while
    // still waiting on another churned key, which is removed too.
    let rounds = 40 * u64::from(TABLE);
    for i in 0..rounds {
        let k = 100 + i;
        let deps = [dep(1, Gate::Sequential)];
        let h = match g.submit(&spec(k, &deps)).unwrap() {
            Admission::Admitted(h) => h,
            other => panic!("key {k} (round {i}) refused: {other:?}"),
        };
        if i % 5 == 0 {
            // A dependent parked on a key without producer, then both removed.
            let w = admit(&g, 1_000_000 + i, &[dep(2_000_000 + i, Gate::OnSuccess)]);
            g.remove(key(2_000_000 + i)).unwrap();
            assert!(matches!(
                g.outcome(&w).unwrap(),
                Some(JobOutcome::Failed(e)) if e.reason() == Reason::Removed
            ));
            drop(w);
            g.remove(key(1_000_000 + i)).unwrap();
        }
        hs.push(h);
        run_all(&g, &mut hs);
        g.remove(key(k)).unwrap();
        assert!(g.occupancy().keys_used <= 4, "{:?}", g.occupancy());
    }
    assert!(hs.is_empty());
    assert_eq!(g.version(key(1)), Some(v1));
    assert_eq!(g.version(key(3)), Some(v3));
    assert_eq!(g.outcome(&waiter).unwrap(), None);
    assert_eq!(g.occupancy().keys_used, 3);
    assert!(compacts::<E>(&g), "no compaction ran");
    // Conservation at quiescence: every slot free after the reset.
    g.reset();
    assert!(g.outcome(&waiter).unwrap().is_some());
    drop(waiter);
    let o = g.occupancy();
    assert_eq!(
        (o.keys_used, o.nodes_used, o.edges_used, o.waiting, o.ready),
        (0, 0, 0, 0, 0)
    );
    assert!(g.ledger().usage().is_zero());
}

fn d01_d24_removal_and_recreation_at_scale<E: GraphEngine>() {
    const N: u64 = 10_000;
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    let g = Graph::builder(ledger)
        .class(4)
        .nodes(256)
        .edges(2 * N as u32)
        .keys(N as u32 + 256)
        .max_deps(64)
        .build_with::<E>()
        .unwrap();
    // Keys exist from being named: here as dependencies of a few waiting jobs.
    let named = |g: &GraphOn<E>, base: u64| {
        let mut hs = Vec::new();
        for chunk in (0..N).collect::<Vec<_>>().chunks(64) {
            let deps: Vec<_> = chunk
                .iter()
                .map(|&k| dep(base + k, Gate::OnSuccess))
                .collect();
            hs.push(admit(g, base + N + chunk[0], &deps));
        }
        hs
    };
    let first = named(&g, 0);
    let before: Vec<Version> = (0..N).map(|k| g.version(key(k)).unwrap()).collect();
    assert!(g.occupancy().keys_used as u64 >= N);
    for k in 0..N {
        g.remove(key(k)).unwrap();
    }
    for h in first {
        assert!(g.outcome(&h).unwrap().is_some());
    }
    for k in 0..N {
        assert_eq!(g.version(key(k)), None);
        g.remove(key(N + k)).ok();
    }
    assert_eq!(g.occupancy().keys_used, 0);
    // Named again: each a new incarnation at generation 0, in a table that never filled.
    let second = named(&g, 0);
    for k in 0..N {
        let v = g.version(key(k)).unwrap();
        assert_eq!(v.generation, 0);
        assert!(v.incarnation > before[k as usize].incarnation);
    }
    g.reset();
    for h in second {
        assert!(g.outcome(&h).unwrap().is_some());
    }
    let o = g.occupancy();
    assert_eq!((o.keys_used, o.nodes_used, o.edges_used), (0, 0, 0));
}

fn d24_lookups_racing_key_compaction_never_answer_wrong<E: GraphEngine>() {
    // A small table: compaction runs every few removals.
    let g = small::<E>(16);
    let mut hs = Vec::new();
    for k in 1..=4 {
        hs.push(admit(&g, k, &[]));
    }
    run_all(&g, &mut hs);
    let stable: Vec<Version> = (1..=4).map(|k| g.version(key(k)).unwrap()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    // Readers: the stable keys are always found at their version; a never-named key never.
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (g, stop, stable) = (g.clone(), stop.clone(), stable.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) || n < 1000 {
                    for (i, v) in stable.iter().enumerate() {
                        assert_eq!(g.version(key(i as u64 + 1)), Some(*v));
                    }
                    assert_eq!(g.version(key(999)), None);
                    n += 1;
                }
            })
        })
        .collect();
    // A second writer names and removes its own keys: its lookups and insertions race the
    // compactions the first one triggers.
    let other = {
        let (g, stop) = (g.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = 500_000 + (i % 3);
                let w = match g.submit(&spec(k, &[dep(k + 10, Gate::OnSuccess)])).unwrap() {
                    Admission::Admitted(w) => w,
                    Admission::Backpressured => continue,
                    other => panic!("{other:?}"),
                };
                assert!(g.version(key(k)).is_some());
                g.remove(key(k + 10)).unwrap();
                g.remove(key(k)).unwrap();
                assert!(g.outcome(&w).unwrap().is_some());
                drop(w);
                i += 1;
            }
        })
    };
    for i in 0..3000u64 {
        let k = 10_000 + i;
        let h = match g.submit(&spec(k, &[])).unwrap() {
            Admission::Admitted(h) => h,
            Admission::Backpressured => continue,
            other => panic!("{other:?}"),
        };
        assert_eq!(g.version(key(k)).map(|v| v.generation), Some(0));
        g.remove(key(k)).unwrap();
        assert_eq!(g.version(key(k)), None);
        // The ended job's payload leaves the scheduler when an executor skips it.
        assert!(g.try_next(CPU).is_none());
        let o = g.outcome(&h).unwrap();
        drop(h);
        assert!(
            matches!(o, Some(JobOutcome::Failed(e)) if e.reason() == Reason::Removed),
            "{o:?}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    other.join().unwrap();
    for (i, v) in stable.iter().enumerate() {
        assert_eq!(g.version(key(i as u64 + 1)), Some(*v));
    }
    // The lock-free graph's index compacted under the readers (the mutex graph has none).
    assert!(compacts::<E>(&g), "no compaction ran");
    g.reset();
    assert_eq!(g.occupancy().keys_used, 0);
}

fn d24_operations_on_a_removed_key_whose_room_was_reused_are_typed_errors<E: GraphEngine>() {
    let g = small::<E>(2);
    let a = admit(&g, 1, &[]);
    let job = g.try_next(CPU).unwrap();
    let w = g.witness(&job);
    g.complete(job, JobOutcome::Succeeded).unwrap();
    g.outcome(&a).unwrap().unwrap();
    drop(a);
    let _b = admit(&g, 2, &[]);
    g.remove(key(1)).unwrap();
    // Key 3 takes key 1's room.
    let c = admit(&g, 3, &[]);
    let before = (g.occupancy(), g.version(key(2)), g.version(key(3)));
    let unknown =
        |e: fairway::Error| (e.code(), e.reason()) == (Code::NotFound, Reason::UnknownKey);
    assert!(unknown(g.advance(key(1)).unwrap_err()));
    assert!(unknown(g.remove(key(1)).unwrap_err()));
    assert_eq!(g.version(key(1)), None);
    assert_eq!(
        g.check_witness(&w).unwrap_err().reason(),
        Reason::StaleWitness
    );
    assert_eq!(
        (g.occupancy(), g.version(key(2)), g.version(key(3))),
        before
    );
    assert_eq!(g.outcome(&c).unwrap(), None);
}

/// SPEC D22 at the key table's limit (lock-free graph only: the mutex graph keeps keys in a
/// map, with no slot generations to run out). Both key slots start one generation before
/// exhaustion: each serves two keys in turn, then retires instead of wrapping to generation 0.
/// Removal at the last generation still fails the key's waiters, a witness of a key on a
/// retired slot stays refused, and once both slots retired no new key fits.
#[test]
fn d22_key_slot_at_its_last_generation_retires_and_never_wraps() {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    let g = Graph::builder(ledger)
        .class(4)
        .nodes(16)
        .edges(16)
        .keys(2)
        .first_key_slot_generation(u32::MAX - 1)
        .build()
        .unwrap();
    let full = |g: &GraphOn<_>, k: u64| {
        matches!(g.submit(&spec(k, &[])).unwrap(), Admission::Backpressured)
            && g.version(key(k)).is_none()
    };
    // Slots A and B at generation `u32::MAX - 1`: job 1 waits on key 2. Removing key 1 ends
    // job 1 and frees slot A, now at its last generation.
    let h1 = admit(&g, 1, &[dep(2, Gate::OnSuccess)]);
    assert_eq!(g.occupancy().keys_used, 2);
    g.remove(key(1)).unwrap();
    assert!(matches!(
        g.outcome(&h1).unwrap(),
        Some(JobOutcome::Failed(_))
    ));
    // Job 2 (on key 2, slot B) waits on key 3, which takes slot A at its last generation.
    let h2 = admit(&g, 2, &[dep(3, Gate::OnSuccess)]);
    assert_eq!(g.occupancy().keys_used, 2);
    assert_eq!(g.version(key(3)).map(|v| v.generation), Some(0));
    // Removing key 3 fails its waiter as at any generation, and retires slot A.
    g.remove(key(3)).unwrap();
    assert!(
        matches!(g.outcome(&h2).unwrap(), Some(JobOutcome::Failed(e))
        if (e.code(), e.reason()) == (Code::Unavailable, Reason::Removed))
    );
    assert_eq!(g.occupancy().keys_used, 1);
    // Slot B holds key 2; slot A is gone: no room for another key.
    assert!(full(&g, 9));
    // Slot B at its last generation: key 4 runs and is removed; the slot retires.
    g.remove(key(2)).unwrap();
    let h4 = admit(&g, 4, &[]);
    let job = g.try_next(CPU).unwrap();
    let w4 = g.witness(&job);
    g.complete(job, JobOutcome::Succeeded).unwrap();
    assert_eq!(g.outcome(&h4).unwrap(), Some(JobOutcome::Succeeded));
    g.check_witness(&w4).unwrap();
    g.remove(key(4)).unwrap();
    assert_eq!(g.occupancy().keys_used, 0);
    // Both slots retired: no key fits, nothing changed; old witnesses and keys stay refused.
    assert!(full(&g, 100));
    assert!(full(&g, 1));
    assert!(g.check_witness(&w4).is_err());
    assert!(g.remove(key(4)).is_err());
    assert!(g.advance(key(4)).is_err());
    assert_eq!(g.occupancy().keys_used, 0);
}
