//! loom models of the lock-free graph's urgency protocol (SPEC D30, `lockfree/urgency.rs`):
//! lock-free linkers and leavers change list membership or the `ACTIVE` bit, fence, and read
//! the producer's values; a recomputation under the topology lock stores, fences and walks
//! again until two walks agree. Whatever the interleaving, a producer ends at the join of its
//! base and its remaining active demanders: no arrival missed, no stale raise left.
//!
//! loom does not produce store-buffering outcomes (see `loom_keys.rs`), which is the reordering
//! the SeqCst fence pairs exclude: these models check the outcome over every interleaving loom
//! explores, and the outcomes recorded show that both sides of each race were reached.

use super::lockfree::{LockFreeGraph, Work};
use super::loom_support::bounds;
use super::rules::{Urgency, NO_DEADLINE};
use super::{Admission, Dependency, Gate, GraphEngine, JobKey, JobSpec, NodeRef};
use crate::ids::{ClassId, TenantId};
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;

/// A job on `key` of tenant 0, class 0, with `priority` and `deps`.
fn job(key: u64, priority: u8, deps: &[Dependency]) -> JobSpec<'_> {
    JobSpec {
        key: JobKey::new(key),
        tenant: TenantId(0),
        class: ClassId(0),
        priority,
        deadline: None,
        deps,
    }
}

fn submit(g: &LockFreeGraph, key: u64, priority: u8, deps: &[Dependency], w: &mut Work) -> NodeRef {
    match g.submit(&job(key, priority, deps), NO_DEADLINE, w) {
        Ok(Admission::Admitted(n)) => n,
        other => panic!("job {key} not admitted: {other:?}"),
    }
}

/// A dependency on `key` that stays pending until its producer ends.
fn on(key: u64) -> [Dependency; 1] {
    [Dependency {
        key: JobKey::new(key),
        gate: Gate::OnSuccess,
        pin: None,
    }]
}

fn priority(g: &LockFreeGraph, n: NodeRef) -> u8 {
    g.effective(n).expect("live").priority
}

/// A producer (key 1, priority 0) raised to 5 by a demander (key 2) that is removed while a
/// more urgent dependent than the producer's base (key 3, priority 3) links. At the end the
/// producer is at 3, the one demander left: the departure's recomputation saw the arrival (in
/// its first walk, or in the second after storing the base), or the arrival saw the lowered
/// value and raised it itself. What each thread read of the producer afterwards names the
/// interleaving.
#[test]
fn loom_graph_urgent_link_races_a_departing_demander() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 2, 4)));
        let mut w = Work::default();
        let p = submit(&g, 1, 0, &[], &mut w);
        let d1 = submit(&g, 2, 5, &on(1), &mut w);
        assert_eq!(priority(&g, p), 5);
        let leaver = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                g.remove(JobKey::new(2), &mut w).unwrap();
                priority(&g, p)
            })
        };
        let linker = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let d2 = submit(&g, 3, 3, &on(1), &mut w);
                (d2, priority(&g, p))
            })
        };
        let after_leave = leaver.join().unwrap();
        let (d2, after_link) = linker.join().unwrap();
        assert!(g.outcome(d1, false).unwrap().is_some(), "the demander left");
        assert_eq!(g.outcome(d2, false).unwrap(), None);
        assert_eq!(
            g.effective(p),
            Some(Urgency {
                priority: 3,
                deadline: NO_DEADLINE
            }),
            "the producer is at its one remaining demander's urgency \
             (left saw {after_leave}, link saw {after_link})"
        );
        seen.hit(match (after_leave, after_link) {
            // The leaver read the base: the linker then exceeded it and raised it itself.
            (0, 3) => "departure-first-arrival-raised",
            // The linker read the old raise (no lock); the recomputation found its edge.
            (3, 5) => "arrival-under-the-old-raise-found-by-the-walk",
            // The linker read the first walk's stored base; the second walk found its edge.
            (3, 0) => "second-walk-found-the-arrival",
            (3, 3) => "both-read-the-remaining-demander",
            _ => "other",
        });
    });
    eprintln!("urgent link against a departure: {outcomes:?}");
    outcomes.assert_exactly(&[
        "departure-first-arrival-raised",
        "arrival-under-the-old-raise-found-by-the-walk",
        "second-walk-found-the-arrival",
        "both-read-the-remaining-demander",
    ]);
}

/// A producer (key 1, priority 0) with two demanders (key 2 at 5, key 3 at 3), both removed
/// at once. Each removal ends its job outside the topology lock: key 2's departure recomputes
/// the producer under the lock (and may first find key 3's job still active, storing 3); key
/// 3's clears its `ACTIVE` bit, fences and reads the producer, taking the lock only if it may
/// be what lifts it. At the end the producer is back at its base, whichever saw the other:
/// the recomputation's second walk saw the departure, or the leaver saw the stored 3.
#[test]
fn loom_graph_departure_races_a_recomputation() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(3, 2, 4)));
        let mut w = Work::default();
        let p = submit(&g, 1, 0, &[], &mut w);
        let d1 = submit(&g, 2, 5, &on(1), &mut w);
        let d2 = submit(&g, 3, 3, &on(1), &mut w);
        assert_eq!(priority(&g, p), 5);
        let remover = |key: u64| {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                g.remove(JobKey::new(key), &mut w).unwrap();
                priority(&g, p)
            })
        };
        let first = remover(2);
        let second = remover(3);
        let after_first = first.join().unwrap();
        let after_second = second.join().unwrap();
        assert!(g.outcome(d1, false).unwrap().is_some());
        assert!(g.outcome(d2, false).unwrap().is_some());
        assert_eq!(
            g.effective(p),
            Some(Urgency {
                priority: 0,
                deadline: NO_DEADLINE
            }),
            "no demander is left (the first removal saw {after_first}, the second \
             {after_second})"
        );
        seen.hit(match (after_first, after_second) {
            (0, 0) => "both-saw-base",
            (3, _) => "recomputed-to-the-other-demander-first",
            (_, 5) => "left-under-the-first-raise",
            _ => "other",
        });
    });
    eprintln!("departure against a recomputation: {outcomes:?}");
    outcomes.assert_exactly(&[
        "both-saw-base",
        "recomputed-to-the-other-demander-first",
        "left-under-the-first-raise",
    ]);
}
