//! loom models of the lock-free graph's key operations (SPEC D20, D21, D24) against the hot
//! paths: `advance` against a completion (a stale completion is refused whole, never half
//! applied), `advance` against an executor starting a queued job, `advance` against a job
//! being published on the key, and `remove` against a dependent linking to the key's producer.
//! The topology lock is loom's here. loom does not produce store-buffering outcomes, so the
//! publication model checks the invariant but cannot by itself show why the key operation's
//! `detach` must be an RMW (see `lockfree/keys.rs`).

use super::lockfree::{LockFreeGraph, Work};
use super::loom_support::{bounds, spec};
use super::{Admission, Dependency, Gate, GraphEngine, JobKey, JobOutcome, NodeRef};
use crate::error::{Code, Reason};
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;

fn ready(g: &LockFreeGraph, work: &mut Work) -> Vec<u64> {
    let mut out = Vec::new();
    while let Some(r) = g.pop_ready(work) {
        out.push(r.key.key.0);
    }
    out
}

fn submit(g: &LockFreeGraph, key: u64, deps: &[Dependency], w: &mut Work) -> NodeRef {
    match g.submit(&spec(key, deps), crate::graph::rules::NO_DEADLINE, w) {
        Ok(Admission::Admitted(n)) => n,
        other => panic!("job {key} not admitted: {other:?}"),
    }
}

fn dep(key: u64, gate: Gate) -> Dependency {
    Dependency {
        key: JobKey::new(key),
        gate,
        pin: None,
    }
}

fn failed(o: Option<JobOutcome>, reason: Reason) -> bool {
    matches!(o, Some(JobOutcome::Failed(e)) if reason.eq(&e.reason()))
}

/// A running producer (key 1, with a waiting sequential dependent) completes while its key
/// advances. Either the completion came first — the producer succeeded and its dependent was
/// released exactly once — or it is stale: nothing published, the dependent followed the key
/// (SPEC D33) and waits for the next generation, which releases it once; the stale counter is
/// 1. Never a mix.
#[test]
fn loom_graph_advance_races_complete() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 2, 4)));
        let mut w = Work::default();
        let p = submit(&g, 1, &[], &mut w);
        assert_eq!(ready(&g, &mut w), vec![1]);
        g.admitted(p, &mut w);
        assert!(g.start(p));
        let d = submit(&g, 2, &[dep(1, Gate::Sequential)], &mut w);
        assert!(ready(&g, &mut w).is_empty());

        let completer = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let r = g.complete(p, JobOutcome::Succeeded, &mut w);
                (r, ready(&g, &mut w))
            })
        };
        let advancer = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let v = GraphEngine::advance(&*g, JobKey::new(1), &mut w).unwrap();
                assert_eq!(v.generation, 1);
                ready(&g, &mut w)
            })
        };
        let (r, by_completer) = completer.join().unwrap();
        let by_advancer = advancer.join().unwrap();
        let released = by_completer.len() + by_advancer.len();
        let o = g.occupancy();
        assert_eq!(o.running, 0);
        match r {
            Ok(()) => {
                assert_eq!(o.edges_used, 0);
                assert_eq!(g.outcome(p, false).unwrap(), Some(JobOutcome::Succeeded));
                assert_eq!(released, 1, "dependent released {released} times");
                assert_eq!(g.outcome(d, false).unwrap(), None);
                assert_eq!(g.stale_completions(), 0);
                seen.hit("completed-first");
            }
            Err(e) => {
                assert_eq!(
                    (e.code(), e.reason()),
                    (Code::Cancelled, Reason::Superseded)
                );
                assert!(failed(g.outcome(p, false).unwrap(), Reason::Superseded));
                assert_eq!(released, 0);
                assert_eq!(g.outcome(d, false).unwrap(), None, "the dependent followed");
                assert_eq!(g.stale_completions(), 1);
                assert_eq!((o.waiting, o.edges_used), (1, 1));
                let mut w = Work::default();
                let p2 = submit(&g, 1, &[], &mut w);
                assert_eq!(ready(&g, &mut w), vec![1]);
                g.admitted(p2, &mut w);
                assert!(g.start(p2));
                g.complete(p2, JobOutcome::Succeeded, &mut w).unwrap();
                assert_eq!(
                    ready(&g, &mut w),
                    vec![2],
                    "the next generation releases it"
                );
                seen.hit("stale");
            }
        }
    });
    eprintln!("advance vs complete: {outcomes:?}");
    outcomes.assert_exactly(&["completed-first", "stale"]);
}

/// An executor starts a queued job while its key advances: the advance takes it from the
/// queue (it never runs), or it runs and its completion is stale, or it completed first. It
/// ends exactly once and every gauge is back to zero.
#[test]
fn loom_graph_advance_races_start_of_a_queued_job() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 2, 4)));
        let mut w = Work::default();
        let p = submit(&g, 1, &[], &mut w);
        assert_eq!(ready(&g, &mut w), vec![1]);
        g.admitted(p, &mut w);

        let executor = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                if g.start(p) {
                    Some(g.complete(p, JobOutcome::Succeeded, &mut w).is_ok())
                } else {
                    None
                }
            })
        };
        let advancer = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                GraphEngine::advance(&*g, JobKey::new(1), &mut w).unwrap();
            })
        };
        let ran = executor.join().unwrap();
        advancer.join().unwrap();
        let o = g.occupancy();
        assert_eq!((o.waiting, o.ready, o.running), (0, 0, 0));
        let out = g.outcome(p, false).unwrap();
        match ran {
            None => {
                assert!(failed(out, Reason::Superseded));
                seen.hit("taken-from-queue");
            }
            Some(false) => {
                assert!(failed(out, Reason::Superseded));
                assert_eq!(g.stale_completions(), 1);
                seen.hit("ran-stale");
            }
            Some(true) => {
                assert_eq!(out, Some(JobOutcome::Succeeded));
                seen.hit("completed-first");
            }
        }
    });
    eprintln!("advance vs start: {outcomes:?}");
    outcomes.assert_exactly(&["taken-from-queue", "ran-stale", "completed-first"]);
}

/// A dependent links to a key's waiting producer while the key is removed. Either it linked
/// to the producer (which ends `removed` and fails it, its edge freed), or it saw the key
/// removed and waits, parked, for the key's next producer. Its gate is counted at most once.
#[test]
fn loom_graph_remove_races_link() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 2, 4)));
        let mut w = Work::default();
        // The producer waits on a key with no producer (its edge parked there).
        let p = submit(&g, 1, &[dep(9, Gate::OnSuccess)], &mut w);

        let remover = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                GraphEngine::remove(&*g, JobKey::new(1), &mut w).unwrap();
                ready(&g, &mut w)
            })
        };
        let linker = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let d = submit(&g, 2, &[dep(1, Gate::OnSuccess)], &mut w);
                (d, ready(&g, &mut w))
            })
        };
        let by_remover = remover.join().unwrap();
        let (d, by_linker) = linker.join().unwrap();
        assert!(by_remover.is_empty() && by_linker.is_empty());
        assert!(failed(g.outcome(p, false).unwrap(), Reason::Removed));
        let o = g.occupancy();
        match g.outcome(d, false).unwrap() {
            None => {
                // Parked on the removed key: its one edge is the only one held.
                assert_eq!((o.edges_used, o.waiting), (1, 1));
                seen.hit("parked-for-next-producer");
            }
            out => {
                assert!(failed(out, Reason::DependencyFailed));
                assert_eq!((o.edges_used, o.waiting), (0, 0));
                seen.hit("linked-then-failed");
            }
        }
    });
    eprintln!("remove vs link: {outcomes:?}");
    outcomes.assert_exactly(&["linked-then-failed", "parked-for-next-producer"]);
}

/// A job is published on a key while the key advances. Either the publication came first and
/// the advance retired it (ended at once if it was waiting or queued; refused at completion if
/// the advance caught it between ready and queued), or it came after and the job runs at the
/// new generation: a job whose completion is accepted always carries the key's current version.
#[test]
fn loom_graph_publication_races_advance() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 2, 4)));
        let mut w = Work::default();
        // Key 1 exists (named by a dependency) with no producer and no waiters: a dependent
        // of key 1 that was superseded leaves it so.
        let d = submit(&g, 2, &[dep(1, Gate::OnSuccess)], &mut w);
        GraphEngine::advance(&*g, JobKey::new(2), &mut w).unwrap();
        assert!(failed(g.outcome(d, false).unwrap(), Reason::Superseded));
        let before = GraphEngine::version(&*g, JobKey::new(1)).unwrap();

        let publisher = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let p = submit(&g, 1, &[], &mut w);
                for k in ready(&g, &mut w) {
                    assert_eq!(k, 1);
                    g.admitted(p, &mut w);
                }
                p
            })
        };
        let advancer = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                GraphEngine::advance(&*g, JobKey::new(1), &mut w).unwrap()
            })
        };
        let p = publisher.join().unwrap();
        let v = advancer.join().unwrap();
        assert_eq!(v.generation, before.generation + 1);
        let (key, recorded) = GraphEngine::node_version(&*g, p).unwrap();
        assert_eq!(key, JobKey::new(1));
        if let Some(out) = g.outcome(p, false).unwrap() {
            assert!(failed(Some(out), Reason::Superseded));
            seen.hit("ended-by-advance");
            return;
        }
        assert!(g.start(p));
        match g.complete(p, JobOutcome::Succeeded, &mut w) {
            Ok(()) => {
                assert_eq!(recorded, v, "accepted at a stale version");
                seen.hit("current-at-the-new-generation");
            }
            Err(e) => {
                assert_eq!(e.reason(), Reason::Superseded);
                seen.hit("ran-stale");
            }
        }
        let o = g.occupancy();
        assert_eq!((o.waiting, o.ready, o.running), (0, 0, 0));
    });
    eprintln!("publication vs advance: {outcomes:?}");
    outcomes.assert_exactly(&[
        "ended-by-advance",
        "ran-stale",
        "current-at-the-new-generation",
    ]);
}

/// A dependent links to key 1 while `advance` supersedes the key's waiting producer (SPEC
/// D33): it links to the producer before the advance takes its list (and follows the key), or
/// finds the list taken and reads the key again, or links after the detach and parks on the
/// key. Whichever way, it is never failed: it waits, exactly one edge of it is in use, and the
/// next generation's job releases it once.
#[test]
fn loom_graph_advance_races_a_follower_linking() {
    model(|| {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 3, 4)));
        let mut w = Work::default();
        // The producer waits on key 9, which never comes.
        let p = submit(&g, 1, &[dep(9, Gate::OnSuccess)], &mut w);
        let advancer = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                GraphEngine::advance(&*g, JobKey::new(1), &mut w).unwrap();
                ready(&g, &mut w)
            })
        };
        let mut w2 = Work::default();
        let d = submit(&g, 2, &[dep(1, Gate::OnSuccess)], &mut w2);
        assert!(ready(&g, &mut w2).is_empty());
        assert!(advancer.join().unwrap().is_empty());
        assert!(failed(g.outcome(p, false).unwrap(), Reason::Superseded));
        assert_eq!(
            g.outcome(d, false).unwrap(),
            None,
            "the follower was failed"
        );
        let o = g.occupancy();
        // The superseded producer's edge on key 9 went with it; the follower's waits.
        assert_eq!((o.waiting, o.edges_used), (1, 1));
        let p2 = submit(&g, 1, &[], &mut w);
        assert_eq!(ready(&g, &mut w), vec![1]);
        g.admitted(p2, &mut w);
        assert!(g.start(p2));
        g.complete(p2, JobOutcome::Succeeded, &mut w).unwrap();
        assert_eq!(ready(&g, &mut w), vec![2]);
    });
}

/// A dependent pinned to key 1's version 0 links while `advance` moves the key to version 1:
/// it sees the new version at link (counted at once), or is linked to the producer when the
/// advance takes its list, or parks and is taken off the waiter list by the advance. Whichever
/// way it ends `superseded` once, before both return, and no edge is left.
#[test]
fn loom_graph_advance_races_a_pinned_dependent_linking() {
    model(|| {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 3, 4)));
        let mut w = Work::default();
        let p = submit(&g, 1, &[dep(9, Gate::OnSuccess)], &mut w);
        let v0 = GraphEngine::version(&*g, JobKey::new(1)).unwrap();
        let advancer = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                GraphEngine::advance(&*g, JobKey::new(1), &mut w).unwrap();
                ready(&g, &mut w)
            })
        };
        let pinned = [Dependency::pinned(JobKey::new(1), Gate::OnSuccess, v0)];
        let mut w2 = Work::default();
        let d = submit(&g, 2, &pinned, &mut w2);
        assert!(ready(&g, &mut w2).is_empty());
        assert!(advancer.join().unwrap().is_empty());
        assert!(failed(g.outcome(p, false).unwrap(), Reason::Superseded));
        assert!(
            failed(g.outcome(d, false).unwrap(), Reason::Superseded),
            "{:?}",
            g.outcome(d, false)
        );
        let o = g.occupancy();
        assert_eq!((o.waiting, o.edges_used), (0, 0));
    });
}
