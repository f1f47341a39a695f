//! loom models of the lock-free graph's hot race: a dependent linking to a producer while the
//! producer completes. Whatever the interleaving, the dependent's gate is counted exactly once:
//! it becomes ready (or fails `dependency-failed`) exactly once, through the completer (linked
//! before the seal) or through its own submission (saw the seal or the key's end).

use super::lockfree::{LockFreeGraph, Work};
use super::loom_support::{bounds, collect, spec};
use super::{Admission, Dependency, Gate, GraphEngine, JobKey, JobOutcome};
use crate::error::{Code, Error, Reason};
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;

/// Keys that became ready in `work`.
fn ready(g: &LockFreeGraph, work: &mut Work) -> Vec<u64> {
    let mut out = Vec::new();
    while let Some(r) = g.pop_ready(work) {
        out.push(r.key.key.0);
    }
    out
}

/// A running producer (key 1) completes (`succeeds` or not) while a dependent (key 2, gate
/// `gate`) is submitted.
fn link_races_complete(gate: Gate, succeeds: bool) {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 2, 4)));
        let mut w = Work::default();
        let Ok(Admission::Admitted(p)) =
            g.submit(&spec(1, &[]), crate::graph::rules::NO_DEADLINE, &mut w)
        else {
            panic!("producer not admitted");
        };
        assert_eq!(ready(&g, &mut w), vec![1]);
        g.admitted(p, &mut w);
        assert!(g.start(p));

        let completer = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let outcome = if succeeds {
                    JobOutcome::Succeeded
                } else {
                    JobOutcome::Failed(Error::new(Code::Internal, Reason::Failed))
                };
                g.complete(p, outcome, &mut w).unwrap();
                ready(&g, &mut w)
            })
        };
        let linker = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let deps = [Dependency {
                    key: JobKey::new(1),
                    gate,
                    pin: None,
                }];
                let Ok(Admission::Admitted(d)) =
                    g.submit(&spec(2, &deps), crate::graph::rules::NO_DEADLINE, &mut w)
                else {
                    panic!("dependent not admitted");
                };
                (d, ready(&g, &mut w))
            })
        };
        let by_completer = completer.join().unwrap();
        let (d, by_linker) = linker.join().unwrap();
        let runs = by_completer.len() + by_linker.len();
        let ended = g.outcome(d, false).unwrap();
        if succeeds || gate == Gate::Sequential {
            assert_eq!(runs, 1, "released {runs} times");
            assert_eq!(ended, None);
        } else {
            assert_eq!(runs, 0);
            assert!(
                matches!(ended, Some(JobOutcome::Failed(e)) if matches!(e.reason(), Reason::DependencyFailed))
            );
        }
        // Every edge is free again; only the two nodes are held.
        let o = g.occupancy();
        assert_eq!(o.edges_used, 0);
        assert_eq!(o.nodes_used, 2);
        seen.hit(if !by_completer.is_empty() {
            "linked-before-seal"
        } else if !by_linker.is_empty() {
            "saw-seal-at-link"
        } else {
            "failed-once"
        });
    });
    eprintln!("{gate:?}, producer succeeds {succeeds}: {outcomes:?}");
    if succeeds || gate == Gate::Sequential {
        outcomes.assert_exactly(&["linked-before-seal", "saw-seal-at-link"]);
    } else {
        outcomes.assert_exactly(&["failed-once"]);
    }
}

#[test]
fn loom_graph_link_races_complete_on_success() {
    link_races_complete(Gate::OnSuccess, true);
}

#[test]
fn loom_graph_link_races_complete_sequential_after_failure() {
    link_races_complete(Gate::Sequential, false);
}

#[test]
fn loom_graph_link_races_complete_on_success_after_failure() {
    link_races_complete(Gate::OnSuccess, false);
}

/// The producer completes, is collected (its outcome read, its handle dropped) and its slot
/// reused by a new job while a dependent links by the key: the dependent is released exactly
/// once, never linked onto the new job (every edge is free at the end), whichever generation
/// it read.
#[test]
fn loom_graph_late_linker_never_links_onto_a_reused_slot() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 2, 4)));
        let mut w = Work::default();
        let Ok(Admission::Admitted(p)) =
            g.submit(&spec(1, &[]), crate::graph::rules::NO_DEADLINE, &mut w)
        else {
            panic!("producer not admitted");
        };
        assert_eq!(ready(&g, &mut w), vec![1]);
        g.admitted(p, &mut w);
        assert!(g.start(p));

        let recycler = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                g.complete(p, JobOutcome::Succeeded, &mut w).unwrap();
                let mut r = ready(&g, &mut w);
                assert_eq!(collect(&*g, p).unwrap(), Some(JobOutcome::Succeeded));
                let Ok(Admission::Admitted(_)) =
                    g.submit(&spec(3, &[]), crate::graph::rules::NO_DEADLINE, &mut w)
                else {
                    panic!("reuser not admitted");
                };
                r.extend(ready(&g, &mut w));
                r
            })
        };
        let linker = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let deps = [Dependency {
                    key: JobKey::new(1),
                    gate: Gate::OnSuccess,
                    pin: None,
                }];
                let Ok(Admission::Admitted(_)) =
                    g.submit(&spec(2, &deps), crate::graph::rules::NO_DEADLINE, &mut w)
                else {
                    panic!("dependent not admitted");
                };
                ready(&g, &mut w)
            })
        };
        let by_recycler = recycler.join().unwrap();
        let by_linker = linker.join().unwrap();
        let d_runs = by_recycler
            .iter()
            .chain(&by_linker)
            .filter(|&&k| k == 2)
            .count();
        assert_eq!(d_runs, 1);
        assert!(by_recycler.contains(&3));
        assert_eq!(g.occupancy().edges_used, 0);
        seen.hit(if by_recycler.contains(&2) {
            "linked-before-seal"
        } else {
            "released-at-link"
        });
    });
    eprintln!("reuse: {outcomes:?}");
    outcomes.assert_exactly(&["linked-before-seal", "released-at-link"]);
}

/// A running job discovers a dependency on a producer that completes at the same time, then
/// completes itself: it ends exactly once, with its body's outcome, through whichever of the
/// two counted its last gate (its dependent becomes ready exactly once).
#[test]
fn loom_graph_discovery_races_the_producer_completing() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 2, 4)));
        let mut w = Work::default();
        let mut run = |key: u64| {
            let Ok(Admission::Admitted(h)) =
                g.submit(&spec(key, &[]), crate::graph::rules::NO_DEADLINE, &mut w)
            else {
                panic!("not admitted");
            };
            assert_eq!(ready(&g, &mut w), vec![key]);
            g.admitted(h, &mut w);
            assert!(g.start(h));
            h
        };
        let p = run(1);
        let x = run(2);
        let after = [Dependency {
            key: JobKey::new(2),
            gate: Gate::Sequential,
            pin: None,
        }];
        let Ok(Admission::Admitted(_)) =
            g.submit(&spec(3, &after), crate::graph::rules::NO_DEADLINE, &mut w)
        else {
            panic!("dependent not admitted");
        };

        let producer = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                g.complete(p, JobOutcome::Succeeded, &mut w).unwrap();
                ready(&g, &mut w)
            })
        };
        let discoverer = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let found = [Dependency {
                    key: JobKey::new(1),
                    gate: Gate::OnSuccess,
                    pin: None,
                }];
                assert_eq!(g.discover(x, &found, &mut w), Ok(Admission::Admitted(())));
                g.complete(x, JobOutcome::Succeeded, &mut w).unwrap();
                ready(&g, &mut w)
            })
        };
        let by_producer = producer.join().unwrap();
        let by_discoverer = discoverer.join().unwrap();
        let released = by_producer
            .iter()
            .chain(&by_discoverer)
            .filter(|&&k| k == 3)
            .count();
        assert_eq!(released, 1);
        assert_eq!(g.outcome(x, false).unwrap(), Some(JobOutcome::Succeeded));
        let o = g.occupancy();
        assert_eq!((o.edges_used, o.waiting, o.running), (0, 0, 0));
        seen.hit(if by_producer.contains(&3) {
            "ended-by-producer"
        } else {
            "ended-by-own-completion"
        });
    });
    eprintln!("discovery: {outcomes:?}");
    outcomes.assert_exactly(&["ended-by-producer", "ended-by-own-completion"]);
}

/// A dependent links to a key whose producer is being published at the same time (SPEC D11):
/// the linker may find no producer, then, under the topology lock, find it live. Whatever it
/// saw, its gate is counted exactly once when the producer ends — linked onto the producer's
/// list, or parked as a waiter and adopted by the publication — and never parked on a key that
/// already names its producer, whose waiters nobody reads.
#[test]
fn d11_a_dependent_linking_while_its_producer_publishes_is_released_once() {
    model(|| {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 2, 4)));
        let publisher = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let Ok(Admission::Admitted(p)) =
                    g.submit(&spec(1, &[]), crate::graph::rules::NO_DEADLINE, &mut w)
                else {
                    panic!("producer not admitted");
                };
                (p, ready(&g, &mut w))
            })
        };
        let linker = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let deps = [Dependency {
                    key: JobKey::new(1),
                    gate: Gate::Sequential,
                    pin: None,
                }];
                let Ok(Admission::Admitted(d)) =
                    g.submit(&spec(2, &deps), crate::graph::rules::NO_DEADLINE, &mut w)
                else {
                    panic!("dependent not admitted");
                };
                (d, ready(&g, &mut w))
            })
        };
        let (p, by_publisher) = publisher.join().unwrap();
        let (d, by_linker) = linker.join().unwrap();
        assert_eq!(
            by_publisher,
            vec![1],
            "the producer is ready once published"
        );
        assert!(
            by_linker.is_empty(),
            "the dependent ran before its producer"
        );
        // Run the producer to its end: the dependent's gate must be counted now.
        let mut w = Work::default();
        g.admitted(p, &mut w);
        assert!(g.start(p));
        g.complete(p, JobOutcome::Succeeded, &mut w).unwrap();
        let released = ready(&g, &mut w);
        assert_eq!(
            released,
            vec![2],
            "the dependent's gate was not counted when its producer ended: its edge is lost"
        );
        assert_eq!(g.outcome(d, false).unwrap(), None);
        let o = g.occupancy();
        assert_eq!((o.edges_used, o.waiting), (0, 0));
    });
}
