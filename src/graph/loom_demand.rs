//! loom models of demand on the lock-free graph (SPEC D31): the last handle of a job that has
//! not ended gives its claim back (the job is cancelled `cancelled / withdrawn` unless
//! something else wants it) while another thread adds a demand on it: a submission of the
//! same identity (a dedupe join) or a dependent that links to it by its key. Whichever comes
//! first, the outcome is one of two consistent classes, and never a demand on a job that ends
//! withdrawn without its demander being told.

use super::lockfree::{LockFreeGraph, Work};
use super::loom_support::{bounds, spec};
use super::{Admission, Dependency, Gate, GraphEngine, JobKey, JobOutcome, NodeRef};
use crate::error::Reason;
use crate::graph::rules::NO_DEADLINE;
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;

/// Submits a job on `key` with `deps` and returns its node (admitted, one claim).
fn admit(g: &LockFreeGraph, key: u64, deps: &[Dependency], w: &mut Work) -> NodeRef {
    match g.submit(&spec(key, deps), NO_DEADLINE, w) {
        Ok(Admission::Admitted(n)) => n,
        other => panic!("key {key} not admitted: {other:?}"),
    }
}

/// Hands the ready job on `node` to the scheduler as the graph layer does (it is queued:
/// admitted, not started).
fn queue(g: &LockFreeGraph, node: NodeRef, w: &mut Work) {
    let r = g.pop_ready(w).expect("the job is ready");
    assert_eq!(r.node, node);
    g.admitted(node, w);
}

/// Runs the queued job on `node` to success, as an executor does.
fn run(g: &LockFreeGraph, node: NodeRef, w: &mut Work) {
    assert!(g.start(node), "the job was not startable");
    g.complete(node, JobOutcome::Succeeded, w)
        .expect("the completion of a job still wanted was refused");
}

/// A queued job J of key 1 has one handle. Thread A drops it (the last demander: J is
/// withdrawn unless a join came first); thread B submits key 1 again. Either B joined the live
/// J, which then is not cancelled (B's claim holds it and it runs to its own outcome), or B
/// was admitted as a new job at the key's next generation and J ended withdrawn (A's release
/// cancelled it and handed out its scheduler request). Never does B join a job that ends
/// withdrawn.
#[test]
fn loom_last_demander_cancel_races_a_joiner() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(2, 1, 2)));
        let mut w = Work::default();
        let j = admit(&g, 1, &[], &mut w);
        queue(&g, j, &mut w);
        let (_, j_version) = g.node_version(j).expect("J is live");

        // The joiner is spawned first, as the linker below (see there).
        let joiner = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let r = g.submit(&spec(1, &[]), NO_DEADLINE, &mut w);
                let ready = g.pop_ready(&mut w).map(|r| r.node);
                (r, ready)
            })
        };
        let dropper = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let cancelled = g.release(j, false, &mut w).expect("J's claim is held");
                (cancelled, g.pop_withdrawn(&mut w))
            })
        };
        let (cancelled, withdrawn) = dropper.join().unwrap();
        let (joined, ready) = joiner.join().unwrap();

        let mut w = Work::default();
        match joined {
            Ok(Admission::DedupeJoined(b)) => {
                // B joined the live J: the drop was not the last demand.
                assert_eq!(b, j, "joined another job");
                assert!(!cancelled, "the release cancelled a job that B joined");
                assert_eq!(withdrawn, None, "a joined job's request was withdrawn");
                assert_eq!(ready, None, "a second job");
                assert!(!g.signalled(j), "a joined job is flagged");
                assert_eq!(g.outcome(j, false).unwrap(), None, "J is not live");
                assert_eq!(g.claims(j), Some(1), "B's claim does not hold J");
                // Run it: its outcome is its own, never withdrawn.
                run(&g, j, &mut w);
                assert_eq!(g.outcome(j, false).unwrap(), Some(JobOutcome::Succeeded));
                assert!(!g.release(j, false, &mut w).unwrap());
                assert!(g.outcome(j, false).is_err(), "J not freed with B's claim");
                seen.hit("joined-live");
            }
            Ok(Admission::Admitted(b)) => {
                // J was withdrawn first: B is a new job at the next generation.
                assert_ne!(b, j, "admitted onto J's node");
                assert!(cancelled, "B started a new job but J was not cancelled");
                assert_eq!(
                    withdrawn,
                    Some(j),
                    "J's scheduler request was not withdrawn"
                );
                assert_eq!(ready, Some(b), "the new job is not ready");
                // J ended withdrawn with no claim left: its slot was freed.
                assert!(
                    g.outcome(j, false).is_err(),
                    "the withdrawn J was not freed"
                );
                let (key, b_version) = g.node_version(b).expect("B is live");
                assert_eq!(key, JobKey::new(1));
                assert_eq!(b_version.incarnation, j_version.incarnation);
                assert_eq!(b_version.generation, j_version.generation + 1);
                assert_eq!(g.version(JobKey::new(1)), Some(b_version));
                g.admitted(b, &mut w);
                run(&g, b, &mut w);
                assert_eq!(g.outcome(b, false).unwrap(), Some(JobOutcome::Succeeded));
                assert!(!g.release(b, false, &mut w).unwrap());
                seen.hit("admitted-next-generation");
            }
            other => panic!("B's submission: {other:?}"),
        }
        let o = g.occupancy();
        assert_eq!((o.nodes_used, o.waiting, o.ready), (0, 0, 0), "{o:?}");
    });
    eprintln!("last demander vs joiner: {outcomes:?}");
    outcomes.assert_exactly(&["joined-live", "admitted-next-generation"]);
}

/// A queued producer P of key 1 has one handle. Thread A drops it; thread B submits D on key
/// 2, which depends on key 1 with `OnSuccess`. Either D linked first (a pending dependent is a
/// demand: P is kept, not withdrawn, and runs; D then runs after it), or P was withdrawn first
/// and D ends `cancelled / dependency-cancelled`. Never is P withdrawn while D still waits on
/// it untold.
#[test]
fn loom_release_races_a_dependent_link() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(2, 1, 2)));
        let mut w = Work::default();
        let p = admit(&g, 1, &[], &mut w);
        queue(&g, p, &mut w);

        // The linker is spawned first: loom's first execution runs it first, and its search
        // (DPOR, which may miss interleavings: tokio-rs/loom#166) then starts from each side.
        let linker = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let deps = [Dependency::on(JobKey::new(1), Gate::OnSuccess)];
                let d = admit(&g, 2, &deps, &mut w);
                (d, g.pop_ready(&mut w).map(|r| r.node))
            })
        };
        let dropper = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let cancelled = g.release(p, false, &mut w).expect("P's claim is held");
                let withdrawn = g.pop_withdrawn(&mut w);
                let ready = g.pop_ready(&mut w).map(|r| r.node);
                (cancelled, withdrawn, ready)
            })
        };
        let (cancelled, withdrawn, ready_a) = dropper.join().unwrap();
        let (d, ready_b) = linker.join().unwrap();
        assert_eq!(ready_a.or(ready_b), None, "D became ready before P ended");

        let mut w = Work::default();
        let d_now = g.outcome(d, false).unwrap();
        if cancelled {
            // P was withdrawn first: D was told (its gate failed on a cancelled producer).
            assert_eq!(
                withdrawn,
                Some(p),
                "P's scheduler request was not withdrawn"
            );
            match d_now {
                Some(JobOutcome::Failed(e)) => {
                    assert_eq!(
                        e.reason(),
                        Reason::DependencyCancelled,
                        "D failed otherwise: {e:?}"
                    );
                }
                other => panic!(
                    "P was withdrawn while D was pending on it and D was not told: {other:?}"
                ),
            }
            assert!(
                g.outcome(p, false).is_err(),
                "the withdrawn P was not freed"
            );
            assert!(!g.release(d, false, &mut w).unwrap());
            seen.hit("withdrawn-first");
        } else {
            // D linked first: it demands P, which stays live and is not flagged.
            assert_eq!(withdrawn, None, "a kept producer's request was withdrawn");
            assert_eq!(d_now, None, "D ended while P was kept for it");
            assert_eq!(g.outcome(p, false).unwrap(), None, "P is not live");
            assert!(!g.signalled(p), "a kept producer is flagged");
            // P runs to success and D after it (P, with no claim left, is freed at its end).
            run(&g, p, &mut w);
            assert!(g.outcome(p, false).is_err(), "P not freed at its end");
            let r = g.pop_ready(&mut w).expect("D is released by P's success");
            assert_eq!(r.node, d);
            g.admitted(d, &mut w);
            run(&g, d, &mut w);
            assert_eq!(g.outcome(d, false).unwrap(), Some(JobOutcome::Succeeded));
            assert!(!g.release(d, false, &mut w).unwrap());
            seen.hit("linked-first");
        }
        let o = g.occupancy();
        assert_eq!(
            (o.nodes_used, o.edges_used, o.waiting, o.ready),
            (0, 0, 0, 0),
            "{o:?}"
        );
    });
    eprintln!("release vs dependent link: {outcomes:?}");
    outcomes.assert_exactly(&["linked-first", "withdrawn-first"]);
}
