//! Dependents follow their key (SPEC D33), on both graph engines: a dependency on a key's
//! current producer moves to the key's next generation when `advance` supersedes the producer
//! (the dependent keeps waiting, whatever the producer's state: waiting, queued, running or
//! held), while a dependency pinned to one version counts as on a producer that ended
//! `superseded` unadmitted once the key is past that version: a `Sequential` gate holds, any
//! other fails the dependent `cancelled / superseded`. A pin the key has not reached is refused.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome,
};
use fairway::oracle::GraphOn;
use fairway::{Code, Reason};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[macro_use]
#[path = "common/graph.rs"]
mod graph_common;
use graph_common::*;

both_graphs!(
    d33_a_dependent_follows_its_key_across_two_advances,
    d33_dependents_of_a_queued_producer_follow_and_run_after_the_next_generation,
    d33_a_pinned_dependency_fails_superseded_per_its_gate,
    d33_a_running_producers_dependents_move_at_the_advance_not_at_its_completion,
    d33_a_pinned_waiter_without_producer_is_superseded_by_the_advance,
    d33_a_pin_to_a_past_version_counts_at_submit_and_a_pin_ahead_is_refused,
    d33_a_pin_to_a_removed_incarnation_fails_removed,
    d33_a_pinned_discovered_dependency_is_superseded_with_its_version,
    d33_a_thousand_dependents_follow_one_key,
    d33_followers_of_a_key_advanced_while_others_link_all_run_once,
);

fn graph<E: GraphEngine>(n: u32) -> GraphOn<E> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    Graph::builder(ledger)
        .class(4)
        .nodes(n)
        .edges(2 * n)
        .keys(2 * n)
        .build_with::<E>()
        .unwrap()
}

fn key(k: u64) -> JobKey {
    JobKey::new(k)
}

fn pinned<E: GraphEngine>(g: &GraphOn<E>, k: u64, gate: Gate) -> Dependency {
    Dependency::pinned(
        key(k),
        gate,
        g.version(key(k)).expect("the key has a version"),
    )
}

/// The producer waits on key 100 (never submitted) and is superseded twice; the dependent
/// waits through both advances and runs after the third generation's job.
pub(crate) fn d33_a_dependent_follows_its_key_across_two_advances<E: GraphEngine>() {
    let g = graph::<E>(64);
    let p0 = admit(&g, 1, &[dep(100, Gate::OnSuccess)]);
    let d = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    g.advance(key(1)).unwrap();
    assert!(superseded(g.outcome(&p0).unwrap()));
    assert_eq!(g.outcome(&d).unwrap(), None, "D ended at the first advance");
    let p1 = admit(&g, 1, &[dep(100, Gate::OnSuccess)]);
    g.advance(key(1)).unwrap();
    assert!(superseded(g.outcome(&p1).unwrap()));
    assert_eq!(
        g.outcome(&d).unwrap(),
        None,
        "D ended at the second advance"
    );
    assert!(drain(&g).is_empty(), "D ran without a producer");
    let p2 = admit(&g, 1, &[]);
    assert_eq!(drain(&g), ids(&[&p2, &d]));
    assert_eq!(g.outcome(&d).unwrap(), Some(JobOutcome::Succeeded));
    let handles = [p0, p1, p2, d];
    for h in &handles {
        g.outcome(h).unwrap().unwrap();
    }
    drop(handles);
    let occ = g.occupancy();
    assert_eq!((occ.nodes_used, occ.edges_used, occ.waiting), (0, 0, 0));
}

/// A queued producer (in the scheduler, not started) is taken by the advance; its dependents
/// of every gate follow the key and run after the next generation's job.
pub(crate) fn d33_dependents_of_a_queued_producer_follow_and_run_after_the_next_generation<
    E: GraphEngine,
>() {
    let g = graph::<E>(64);
    let p0 = admit(&g, 1, &[]);
    let seq = admit(&g, 2, &[dep(1, Gate::Sequential)]);
    let ok = admit(&g, 3, &[dep(1, Gate::OnSuccess)]);
    assert_eq!(g.occupancy().ready, 1, "P0 is queued");
    g.advance(key(1)).unwrap();
    assert!(superseded(g.outcome(&p0).unwrap()));
    assert_eq!(
        (g.outcome(&seq).unwrap(), g.outcome(&ok).unwrap()),
        (None, None)
    );
    assert!(drain(&g).is_empty(), "P0 was taken from the scheduler");
    let p1 = admit(&g, 1, &[]);
    let ran = drain(&g);
    assert_eq!(ran[0], p1.id(), "{ran:?}");
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert!(ran.contains(&seq.id()) && ran.contains(&ok.id()));
    // A failure of the next generation's job is what they see now.
    let d = admit(&g, 4, &[dep(5, Gate::OnSuccess)]);
    let q0 = admit(&g, 5, &[]);
    g.advance(key(5)).unwrap();
    assert!(superseded(g.outcome(&q0).unwrap()));
    let _q1 = admit(&g, 5, &[]);
    let job = g.try_next(CPU).unwrap();
    g.complete(
        job,
        JobOutcome::Failed(fairway::Error::new(Code::Internal, Reason::Failed)),
    )
    .unwrap();
    assert!(failed_with(
        g.outcome(&d).unwrap(),
        Code::Unavailable,
        Reason::DependencyFailed
    ));
}

/// One producer, waiting; three dependents pinned to its version (one per gate) and one that
/// follows. The advance ends the pinned ones per their gate and leaves the follower waiting.
pub(crate) fn d33_a_pinned_dependency_fails_superseded_per_its_gate<E: GraphEngine>() {
    let g = graph::<E>(64);
    let p0 = admit(&g, 1, &[dep(100, Gate::OnSuccess)]);
    let on_success = admit(&g, 2, &[pinned(&g, 1, Gate::OnSuccess)]);
    let sequential = admit(&g, 3, &[pinned(&g, 1, Gate::Sequential)]);
    let on_admission = admit(&g, 4, &[pinned(&g, 1, Gate::OnAdmission)]);
    let follows = admit(&g, 5, &[dep(1, Gate::OnSuccess)]);
    g.advance(key(1)).unwrap();
    assert!(superseded(g.outcome(&p0).unwrap()));
    assert!(
        superseded(g.outcome(&on_success).unwrap()),
        "{:?}",
        g.outcome(&on_success)
    );
    assert!(
        superseded(g.outcome(&on_admission).unwrap()),
        "P0 was never admitted: {:?}",
        g.outcome(&on_admission)
    );
    assert_eq!(g.outcome(&follows).unwrap(), None);
    // The sequential gate holds on a producer that ended, whatever its outcome.
    assert_eq!(drain(&g), vec![sequential.id()]);
    assert_eq!(g.outcome(&sequential).unwrap(), Some(JobOutcome::Succeeded));
    let p1 = admit(&g, 1, &[]);
    assert_eq!(drain(&g), ids(&[&p1, &follows]));
    let occ = g.occupancy();
    assert_eq!((occ.edges_used, occ.waiting), (0, 0));
}

/// A running producer is superseded: its dependents move at the advance — the pinned one
/// fails then, the follower waits — and its stale completion releases nobody.
pub(crate) fn d33_a_running_producers_dependents_move_at_the_advance_not_at_its_completion<
    E: GraphEngine,
>() {
    let g = graph::<E>(64);
    let p0 = admit(&g, 1, &[]);
    let pin = pinned(&g, 1, Gate::OnSuccess);
    let pinned_dep = admit(&g, 2, &[pin]);
    let follows = admit(&g, 3, &[dep(1, Gate::Sequential)]);
    let job = g.try_next(CPU).unwrap();
    assert_eq!(job.id(), p0.id());
    g.advance(key(1)).unwrap();
    assert!(
        superseded(g.outcome(&pinned_dep).unwrap()),
        "the pinned dependent did not end at the advance: {:?}",
        g.outcome(&pinned_dep)
    );
    assert_eq!(g.outcome(&follows).unwrap(), None);
    assert_eq!(g.outcome(&p0).unwrap(), None, "P0 still runs");
    let e = g.complete(job, JobOutcome::Succeeded).unwrap_err();
    assert_eq!(e.reason(), Reason::Superseded);
    assert_eq!(
        g.outcome(&follows).unwrap(),
        None,
        "the stale completion released it"
    );
    assert!(drain(&g).is_empty());
    let p1 = admit(&g, 1, &[]);
    assert_eq!(drain(&g), ids(&[&p1, &follows]));
    assert_eq!(g.stale_completions(), 1);
}

/// A dependency pinned to a key's version with no producer yet waits on the key; the advance
/// past that version counts it superseded, while an unpinned waiter keeps waiting.
pub(crate) fn d33_a_pinned_waiter_without_producer_is_superseded_by_the_advance<E: GraphEngine>() {
    let g = graph::<E>(64);
    // Key 1 gets a version from the first dependency on it.
    let follows = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    let pin = pinned(&g, 1, Gate::OnSuccess);
    let seq_pin = pinned(&g, 1, Gate::Sequential);
    let waits = admit(&g, 3, &[pin]);
    let seq = admit(&g, 4, &[seq_pin]);
    assert_eq!(g.occupancy().waiting, 3);
    g.advance(key(1)).unwrap();
    assert!(superseded(g.outcome(&waits).unwrap()));
    assert_eq!(drain(&g), vec![seq.id()]);
    assert_eq!(g.outcome(&follows).unwrap(), None);
    let p = admit(&g, 1, &[]);
    assert_eq!(drain(&g), ids(&[&p, &follows]));
    assert_eq!(g.occupancy().edges_used, 0);
}

/// A pin to a version the key is already past counts at submit; a pin to a version the key has
/// not reached is refused and changes nothing.
pub(crate) fn d33_a_pin_to_a_past_version_counts_at_submit_and_a_pin_ahead_is_refused<
    E: GraphEngine,
>() {
    let g = graph::<E>(64);
    let p0 = admit(&g, 1, &[]);
    let v0 = g.version(key(1)).unwrap();
    assert_eq!(drain(&g), vec![p0.id()]);
    let v1 = g.advance(key(1)).unwrap();
    assert_eq!(v1.generation, v0.generation + 1);
    let late = admit(&g, 2, &[Dependency::pinned(key(1), Gate::OnSuccess, v0)]);
    assert!(
        superseded(g.outcome(&late).unwrap()),
        "{:?}",
        g.outcome(&late)
    );
    let seq = admit(&g, 3, &[Dependency::pinned(key(1), Gate::Sequential, v0)]);
    assert_eq!(drain(&g), vec![seq.id()]);
    // The current version links as usual.
    let cur = admit(&g, 4, &[Dependency::pinned(key(1), Gate::OnSuccess, v1)]);
    assert_eq!(g.outcome(&cur).unwrap(), None);
    let before = g.occupancy();
    let mut ahead = v1;
    ahead.generation += 1;
    let e = g
        .submit(&spec(
            5,
            &[Dependency::pinned(key(1), Gate::OnSuccess, ahead)],
        ))
        .unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::InvalidArgument, Reason::UnknownVersion)
    );
    assert_eq!(g.occupancy(), before, "a refused submit changed the graph");
    let p1 = admit(&g, 1, &[]);
    assert_eq!(drain(&g), ids(&[&p1, &cur]));
}

/// A pin to an incarnation that was removed fails `removed`, whatever the gate.
pub(crate) fn d33_a_pin_to_a_removed_incarnation_fails_removed<E: GraphEngine>() {
    let g = graph::<E>(64);
    let _old = admit(&g, 1, &[]);
    drain(&g);
    let old = g.version(key(1)).unwrap();
    g.remove(key(1)).unwrap();
    for (k, gate) in [(2, Gate::OnSuccess), (3, Gate::Sequential)] {
        let h = admit(&g, k, &[Dependency::pinned(key(1), gate, old)]);
        assert!(
            failed_with(g.outcome(&h).unwrap(), Code::Unavailable, Reason::Removed),
            "{gate:?}: {:?}",
            g.outcome(&h)
        );
    }
    assert!(drain(&g).is_empty());
}

/// A running job discovers a dependency pinned to a key's version (SPEC D14); the advance
/// supersedes it and the held job ends `superseded` when it completes.
pub(crate) fn d33_a_pinned_discovered_dependency_is_superseded_with_its_version<E: GraphEngine>() {
    let g = graph::<E>(64);
    let other = admit(&g, 9, &[dep(100, Gate::OnSuccess)]);
    let a = admit(&g, 1, &[]);
    let job = g.try_next(CPU).unwrap();
    assert_eq!(job.id(), a.id());
    g.discover(&job, &[pinned(&g, 9, Gate::OnSuccess)]).unwrap();
    g.complete(job, JobOutcome::Succeeded).unwrap();
    assert_eq!(
        g.outcome(&a).unwrap(),
        None,
        "held by the discovered dependency"
    );
    g.advance(key(9)).unwrap();
    assert!(superseded(g.outcome(&other).unwrap()));
    assert!(superseded(g.outcome(&a).unwrap()), "{:?}", g.outcome(&a));
    let occ = g.occupancy();
    assert_eq!((occ.waiting, occ.edges_used), (0, 0));
}

/// Past toy sizes: 1,000 dependents of every gate follow one key across an advance and run
/// after the next generation's job; nothing leaks.
pub(crate) fn d33_a_thousand_dependents_follow_one_key<E: GraphEngine>() {
    let n = if cfg!(miri) { 40 } else { 1000 };
    let g = graph::<E>(n + 8);
    let p0 = admit(&g, 1, &[dep(100_000, Gate::OnSuccess)]);
    let gates = [Gate::Sequential, Gate::OnSuccess, Gate::OnAdmission];
    let deps: Vec<JobHandle<E>> = (0..u64::from(n))
        .map(|i| admit(&g, 10 + i, &[dep(1, gates[(i % 3) as usize])]))
        .collect();
    g.advance(key(1)).unwrap();
    assert!(superseded(g.outcome(&p0).unwrap()));
    let occ = g.occupancy();
    assert_eq!((occ.waiting, occ.edges_used), (n, n));
    let p1 = admit(&g, 1, &[]);
    let ran = drain(&g);
    assert_eq!(ran.len(), n as usize + 1);
    for h in deps.iter().chain([&p1]) {
        assert_eq!(g.outcome(h).unwrap(), Some(JobOutcome::Succeeded));
    }
    assert!(superseded(g.outcome(&p0).unwrap()));
    drop((deps, p1, p0));
    let occ = g.occupancy();
    assert_eq!((occ.nodes_used, occ.edges_used, occ.waiting), (0, 0, 0));
}

/// Threads: one advances key 1 again and again, one submits new producers of it, two submit
/// followers of it. Every follower runs exactly once and succeeds; at quiescence nothing is
/// left waiting and every edge is back.
pub(crate) fn d33_followers_of_a_key_advanced_while_others_link_all_run_once<E: GraphEngine>() {
    let rounds = if cfg!(miri) { 2 } else { 200 };
    let g = Arc::new(graph::<E>(1024));
    for round in 0..rounds {
        let base = 1000 + round * 100;
        let (followers, producers) = std::thread::scope(|s| {
            let advancer = s.spawn(|| {
                for _ in 0..8 {
                    let _ = g.advance(key(1));
                    std::thread::yield_now();
                }
            });
            let producer = s.spawn(|| {
                let mut handles = Vec::new();
                for _ in 0..8 {
                    match g.submit(&spec(1, &[dep(7, Gate::OnSuccess)])).unwrap() {
                        Admission::Admitted(h) | Admission::DedupeJoined(h) => handles.push(h),
                        Admission::Backpressured => panic!("round {round}: graph full"),
                    }
                    std::thread::yield_now();
                }
                handles
            });
            let linkers: Vec<_> = (0..2u64)
                .map(|t| {
                    let g = &g;
                    s.spawn(move || {
                        (0..8u64)
                            .map(|i| admit(g, base + t * 10 + i, &[dep(1, Gate::OnSuccess)]))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            advancer.join().unwrap();
            let producers = producer.join().unwrap();
            let followers = linkers
                .into_iter()
                .flat_map(|l| l.join().unwrap())
                .collect::<Vec<_>>();
            (followers, producers)
        });
        // Supersede whatever producer is left, then run a fresh one (key 7 never comes, so no
        // earlier producer of key 1 ever ran).
        g.advance(key(1)).unwrap();
        let last = admit(&g, 1, &[]);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut ran = Vec::new();
        while ran.len() < followers.len() + 1 {
            assert!(
                Instant::now() < deadline,
                "round {round}: followers stuck: ran {} of {}",
                ran.len(),
                followers.len() + 1
            );
            match g.try_next(CPU) {
                Some(job) => {
                    ran.push(job.id());
                    g.complete(job, JobOutcome::Succeeded).unwrap();
                }
                None => panic!(
                    "round {round}: nothing ready with {} of {} run; occupancy {:?}",
                    ran.len(),
                    followers.len() + 1,
                    g.occupancy()
                ),
            }
        }
        assert_eq!(ran[0], last.id());
        for h in &followers {
            assert_eq!(ran.iter().filter(|r| **r == h.id()).count(), 1);
            assert_eq!(g.outcome(h).unwrap(), Some(JobOutcome::Succeeded));
        }
        assert_eq!(last.outcome(), Some(JobOutcome::Succeeded));
        // Every producer of the round was superseded before it could run.
        for h in &producers {
            assert!(superseded(g.outcome(h).unwrap()), "round {round}");
        }
        // Every handle of the round goes: each ended job is freed with its last one.
        drop((followers, last, producers));
        let occ = g.occupancy();
        assert_eq!(occ.nodes_used, 0, "round {round}: {occ:?}");
        assert_eq!(occ.waiting, 0, "round {round}: {occ:?}");
        assert_eq!(occ.ready + occ.running, 0, "round {round}: {occ:?}");
        // Key 7's parked edges belong to superseded producers: freed when they ended.
        assert_eq!(occ.edges_used, 0, "round {round}: {occ:?}");
        g.reset();
    }
}
