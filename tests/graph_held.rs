//! A job that completed while a dependency it discovered mid-run (SPEC D14) was still unmet is
//! held; if its key moves on meanwhile (`advance`, `remove`), the held result is stale: it is
//! never published, its dependents are not released as if it succeeded, and it is counted in
//! `stale_completions` (SPEC D20, D21, D24). Both graph engines.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome};
use fairway::oracle::GraphOn;
use fairway::{Code, Reason};

#[macro_use]
#[path = "common/graph.rs"]
mod graph_common;
use graph_common::*;

both_graphs!(
    d21_a_held_completion_is_stale_once_its_key_advanced,
    d24_a_held_completion_is_stale_once_its_key_was_removed,
);

/// A on key 1; D on key 3 after key 1 `OnSuccess`; A runs, discovers key 10 (no producer yet)
/// and completes `Succeeded` — held. Then `op` moves key 1 on, and a job on key 10 runs to
/// success. Returns the graph, D's handle, A's outcome, D's outcome if it ended, and the
/// stale count.
fn held_then<E: GraphEngine>(
    op: impl Fn(&GraphOn<E>),
) -> (
    GraphOn<E>,
    JobHandle<E>,
    JobOutcome,
    Option<JobOutcome>,
    u64,
) {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    let g = Graph::builder(ledger)
        .class(2)
        .nodes(8)
        .edges(8)
        .keys(16)
        .build_with::<E>()
        .unwrap();
    let a = admit(&g, 1, &[]);
    let d = admit(&g, 3, &[dep(1, Gate::OnSuccess)]);
    let running = g.try_next(CPU).expect("A is ready");
    assert_eq!(running.id(), a.id());
    g.discover(&running, &[dep(10, Gate::OnSuccess)]).unwrap();
    g.complete(running, JobOutcome::Succeeded).unwrap();
    assert_eq!(
        g.outcome(&a).unwrap(),
        None,
        "A is held by its discovered dependency"
    );
    op(&g);
    let p = admit(&g, 10, &[]);
    let mut d_ran = false;
    while let Some(r) = g.try_next(CPU) {
        d_ran |= r.id() == d.id();
        g.complete(r, JobOutcome::Succeeded).unwrap();
    }
    assert!(p.outcome().unwrap().is_success());
    drop(p);
    let a_out = g.outcome(&a).unwrap().expect("A ended");
    let d_out = g.outcome(&d).unwrap();
    assert!(
        !d_ran || !a_out.is_success(),
        "D ran on a result published after its key moved on"
    );
    let stale = g.stale_completions();
    (g, d, a_out, d_out, stale)
}

pub(crate) fn d21_a_held_completion_is_stale_once_its_key_advanced<E: GraphEngine>() {
    let (g, d, a, d_out, stale) = held_then::<E>(|g| {
        g.advance(JobKey::new(1)).unwrap();
    });
    assert!(
        matches!(a, JobOutcome::Failed(e) if e.code() == Code::Cancelled && e.reason() == Reason::Superseded),
        "A's held result was published after its key advanced: {a:?}"
    );
    assert_eq!(stale, 1, "the held completion is counted stale");
    // D depends on key 1's current producer: it follows the key (SPEC D33) and waits for the
    // next generation's job instead of seeing A's stale result.
    assert_eq!(d_out, None, "D ended instead of following key 1: {d_out:?}");
    let a2 = admit(&g, 1, &[]);
    let mut order = Vec::new();
    while let Some(r) = g.try_next(CPU) {
        order.push(r.id());
        g.complete(r, JobOutcome::Succeeded).unwrap();
    }
    assert_eq!(order, [a2.id(), d.id()], "key 1's next job runs, then D");
    assert_eq!(d.outcome(), Some(JobOutcome::Succeeded));
    drop((a2, d));
    assert_eq!(g.occupancy().nodes_used, 0);
}

pub(crate) fn d24_a_held_completion_is_stale_once_its_key_was_removed<E: GraphEngine>() {
    let (_g, _, a, d, stale) = held_then::<E>(|g| {
        g.remove(JobKey::new(1)).unwrap();
    });
    let d = d.expect("D ended with its key's removal");
    assert!(
        matches!(a, JobOutcome::Failed(e) if e.code() == Code::Cancelled && e.reason() == Reason::Removed),
        "A's held result was published after its key was removed: {a:?}"
    );
    assert!(!d.is_success(), "D saw A succeed: {d:?}");
    assert_eq!(stale, 1, "the held completion is counted stale");
}
