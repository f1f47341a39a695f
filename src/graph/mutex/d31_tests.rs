//! Demand-counted cancellation (SPEC D31) on the mutex engine, driven through the engine
//! interface as the graph layer drives it (submit, release, the hand-off's `pop_ready` and
//! `admitted`, an executor's `start` and `complete`). A job freed at its end is gone from
//! the node store, so how it ended is read where late linkers read it: its key.

use super::{MKey, MutexGraph, Work};
use crate::error::Reason;
use crate::graph::rules::{DEPENDENCY_CANCELLED, STALE, WITHDRAWN};
use crate::graph::{
    Admission, Bounds, Dependency, Gate, GraphEngine, JobKey, JobOutcome, JobSpec, NodeRef, Version,
};
use crate::ids::{ClassId, TenantId};

fn engine_with(nodes: u32, max_gen: u32) -> MutexGraph {
    MutexGraph::with_bounds(Bounds {
        nodes,
        edges: 4 * nodes,
        keys: 4 * nodes,
        max_deps: 4,
        max_gen,
        first_gen: 0,
        first_key_gen: 0,
        reserve: (0, 0, 0),
    })
}

fn engine(nodes: u32) -> MutexGraph {
    engine_with(nodes, Version::MAX_GENERATION)
}

fn spec(key: u64, deps: &[Dependency]) -> JobSpec<'_> {
    JobSpec {
        key: JobKey::new(key),
        tenant: TenantId(0),
        class: ClassId(0),
        priority: 0,
        deadline: None,
        deps,
    }
}

fn on(key: u64, gate: Gate) -> Dependency {
    Dependency {
        key: JobKey::new(key),
        gate,
        pin: None,
    }
}

/// Submits a job that must be admitted as a new job.
fn submit(g: &MutexGraph, key: u64, deps: &[Dependency], work: &mut Work) -> NodeRef {
    match g.submit(&spec(key, deps), crate::graph::rules::NO_DEADLINE, work) {
        Ok(Admission::Admitted(n)) => n,
        other => panic!("job on key {key} not admitted as a new job: {other:?}"),
    }
}

/// The graph layer's hand-off: every ready job takes its permit and is queued.
fn hand_off(g: &MutexGraph, work: &mut Work) -> Vec<NodeRef> {
    let mut queued = Vec::new();
    while let Some(r) = g.pop_ready(work) {
        g.admitted(r.node, work);
        queued.push(r.node);
    }
    queued
}

/// How the job the key names ended (admitted, outcome), if it did.
fn key_end(g: &MutexGraph, key: u64) -> Option<(bool, JobOutcome)> {
    let s = g.lock();
    match s.keys.get(&crate::graph::rules::ident(JobKey::new(key))) {
        Some(MKey::Done { admitted, outcome }) => Some((*admitted, *outcome)),
        _ => None,
    }
}

fn assert_empty(g: &MutexGraph) {
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
        (0, 0, 0, 0, 0),
        "the graph is not empty: {o:?}"
    );
}

#[test]
fn d31_releasing_the_last_handle_of_a_chain_of_100_cancels_all_of_it() {
    let g = engine(128);
    let mut w = Work::default();
    // Built from its end, so that every job already has its dependent when its own handle
    // goes: the tail waits on key 98 (no producer yet), each job k adopts job k+1.
    let tail = submit(&g, 99, &[on(98, Gate::OnSuccess)], &mut w);
    let mut root = None;
    for k in (0..99).rev() {
        let deps = if k > 0 {
            vec![on(k - 1, Gate::OnSuccess)]
        } else {
            Vec::new()
        };
        let n = submit(&g, k, &deps, &mut w);
        assert_eq!(
            g.release(n, false, &mut w),
            Ok(false),
            "job {k} was cancelled although job {} depends on it",
            k + 1
        );
        if k == 0 {
            root = Some(n);
        }
    }
    let root = root.unwrap();
    assert_eq!(hand_off(&g, &mut w), vec![root], "only the root is ready");
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.edges_used), (100, 99));
    assert_eq!(g.claims(root), None, "the root has no claim left");
    assert_eq!(g.outcome(root, false), Ok(None), "the root lives on");

    assert_eq!(g.release(tail, false, &mut w), Ok(true));
    for k in 0..100 {
        // Only the root had been admitted (it was queued); none ran.
        assert_eq!(
            key_end(&g, k),
            Some((k == 0, JobOutcome::Failed(WITHDRAWN))),
            "job {k}"
        );
    }
    assert_eq!(
        g.pop_withdrawn(&mut w),
        Some(root),
        "the queued root is withdrawn"
    );
    assert_eq!(g.pop_withdrawn(&mut w), None);
    assert!(g.pop_ready(&mut w).is_none());
    assert!(!g.start(root), "an executor started a withdrawn job");
    assert_eq!(
        g.outcome(tail, false),
        Err(STALE),
        "the tail's slot was not freed"
    );
    assert_eq!(g.release(tail, false, &mut w), Err(STALE));
    assert_empty(&g);
    assert_eq!(g.stale_completions(), 0);
}

#[test]
fn d31_a_shared_producer_stays_while_one_of_its_dependents_remains() {
    let g = engine(16);
    let mut w = Work::default();
    // A diamond: B and C on A, D on B and C.
    let a = submit(&g, 1, &[], &mut w);
    let b = submit(&g, 2, &[on(1, Gate::OnSuccess)], &mut w);
    let c = submit(&g, 3, &[on(1, Gate::OnSuccess)], &mut w);
    let d = submit(
        &g,
        4,
        &[on(2, Gate::OnSuccess), on(3, Gate::OnSuccess)],
        &mut w,
    );
    assert_eq!(hand_off(&g, &mut w), vec![a]);
    assert_eq!(g.release(a, false, &mut w), Ok(false));
    assert_eq!(g.release(b, false, &mut w), Ok(false));
    // D goes: B loses its last demand; C keeps its handle, and so A keeps C.
    assert_eq!(g.release(d, false, &mut w), Ok(true));
    assert_eq!(key_end(&g, 4), Some((false, JobOutcome::Failed(WITHDRAWN))));
    assert_eq!(key_end(&g, 2), Some((false, JobOutcome::Failed(WITHDRAWN))));
    assert_eq!(
        g.outcome(c, false),
        Ok(None),
        "C was cancelled with a handle"
    );
    assert_eq!(
        g.outcome(a, false),
        Ok(None),
        "A was cancelled while C waits on it"
    );
    assert_eq!(g.pop_withdrawn(&mut w), None);
    assert_eq!(g.occupancy().nodes_used, 2);
    // The last demand of A goes with C.
    assert_eq!(g.release(c, false, &mut w), Ok(true));
    assert_eq!(key_end(&g, 3), Some((false, JobOutcome::Failed(WITHDRAWN))));
    assert_eq!(key_end(&g, 1), Some((true, JobOutcome::Failed(WITHDRAWN))));
    assert_eq!(g.pop_withdrawn(&mut w), Some(a));
    assert_empty(&g);
}

#[test]
fn d31_a_detached_job_is_never_cancelled_and_is_freed_at_its_end() {
    let g = engine(8);
    let mut w = Work::default();
    let a = submit(&g, 1, &[], &mut w);
    let dep = submit(&g, 2, &[on(1, Gate::OnSuccess)], &mut w);
    assert_eq!(hand_off(&g, &mut w), vec![a]);
    assert_eq!(g.release(a, true, &mut w), Ok(false));
    assert_eq!(g.claims(a), None);
    // Its dependent goes: A is detached, so it stays.
    assert_eq!(g.release(dep, false, &mut w), Ok(true));
    assert_eq!(key_end(&g, 2), Some((false, JobOutcome::Failed(WITHDRAWN))));
    assert_eq!(g.outcome(a, false), Ok(None));
    assert!(!g.signalled(a));
    assert!(g.start(a));
    assert!(!g.signalled(a));
    assert_eq!(g.complete(a, JobOutcome::Succeeded, &mut w), Ok(()));
    assert_eq!(key_end(&g, 1), Some((true, JobOutcome::Succeeded)));
    assert_eq!(
        g.outcome(a, false),
        Err(STALE),
        "the ended detached job was kept"
    );
    assert_empty(&g);
}

#[test]
fn d31_a_running_job_cancelled_by_release_is_signalled_and_ends_withdrawn() {
    let g = engine(8);
    let mut w = Work::default();
    let a = submit(&g, 1, &[], &mut w);
    assert_eq!(hand_off(&g, &mut w), vec![a]);
    assert!(g.start(a));
    assert_eq!(g.release(a, false, &mut w), Ok(true));
    assert!(g.signalled(a));
    assert_eq!(
        g.outcome(a, false),
        Ok(None),
        "a running job ends at its completion"
    );
    assert_eq!(g.occupancy().running, 1);
    assert_eq!(
        g.join(
            a,
            crate::graph::rules::Urgency {
                priority: 0,
                deadline: u64::MAX
            },
            &mut w
        ),
        Err(STALE),
        "a cancelled job was joined"
    );
    assert_eq!(g.complete(a, JobOutcome::Succeeded, &mut w), Err(WITHDRAWN));
    assert_eq!(g.stale_completions(), 0);
    assert_eq!(key_end(&g, 1), Some((true, JobOutcome::Failed(WITHDRAWN))));
    assert!(!g.signalled(a), "a freed node is stale");
    assert_empty(&g);
}

#[test]
fn d31_a_job_cancelled_on_its_way_to_the_scheduler_runs_flagged() {
    let g = engine(4);
    let mut w = Work::default();
    let a = submit(&g, 1, &[], &mut w);
    // Ready, not handed off yet: only flagged.
    assert_eq!(g.release(a, false, &mut w), Ok(true));
    assert!(g.signalled(a));
    assert_eq!(hand_off(&g, &mut w), vec![a]);
    assert_eq!(g.pop_withdrawn(&mut w), None);
    assert!(g.start(a), "the flagged job was not started");
    assert_eq!(
        g.complete(a, JobOutcome::Failed(STALE), &mut w),
        Err(WITHDRAWN)
    );
    assert_eq!(key_end(&g, 1), Some((true, JobOutcome::Failed(WITHDRAWN))));
    assert_empty(&g);
}

#[test]
fn d31_dependents_of_a_cancelled_producer_follow_their_gates_transitively() {
    let g = engine(16);
    let mut w = Work::default();
    let a = submit(&g, 1, &[], &mut w);
    assert_eq!(hand_off(&g, &mut w), vec![a]);
    assert!(g.start(a));
    assert_eq!(g.release(a, false, &mut w), Ok(true));
    // Late linkers on the flagged job, and one on such a linker.
    let on_success = submit(&g, 2, &[on(1, Gate::OnSuccess)], &mut w);
    let sequential = submit(&g, 3, &[on(1, Gate::Sequential)], &mut w);
    let second = submit(&g, 4, &[on(2, Gate::OnSuccess)], &mut w);
    assert_eq!(g.complete(a, JobOutcome::Succeeded, &mut w), Err(WITHDRAWN));
    let failed = Ok(Some(JobOutcome::Failed(DEPENDENCY_CANCELLED)));
    assert_eq!(g.outcome(on_success, false), failed);
    assert_eq!(g.outcome(second, false), failed, "not transitive");
    assert_eq!(hand_off(&g, &mut w), vec![sequential], "Sequential holds");
    // Late linkers on the ended job: OnAdmission holds on an admitted one.
    let admission = submit(&g, 5, &[on(1, Gate::OnAdmission)], &mut w);
    let late = submit(&g, 6, &[on(1, Gate::OnSuccess)], &mut w);
    assert_eq!(hand_off(&g, &mut w), vec![admission]);
    assert_eq!(g.outcome(late, false), failed);
    // On a job cancelled before its admission, OnAdmission fails too.
    let w8 = submit(&g, 7, &[on(8, Gate::OnSuccess)], &mut w);
    assert_eq!(g.release(w8, false, &mut w), Ok(true));
    let never = submit(&g, 9, &[on(7, Gate::OnAdmission)], &mut w);
    assert_eq!(g.outcome(never, false), failed);
    let e = DEPENDENCY_CANCELLED;
    assert_eq!(e.reason(), Reason::DependencyCancelled);
}

#[test]
fn d31_resubmitting_a_withdrawn_identity_starts_a_new_job_at_the_next_generation() {
    let g = engine(16);
    let mut w = Work::default();
    // Cancelled while waiting (on a key without producer).
    let a = submit(&g, 1, &[on(9, Gate::OnSuccess)], &mut w);
    let v0 = g.version(JobKey::new(1)).unwrap();
    assert_eq!(g.release(a, false, &mut w), Ok(true));
    assert_eq!(g.occupancy().edges_used, 0, "the parked edge was kept");
    let a2 = submit(&g, 1, &[], &mut w);
    assert_ne!(a2, a);
    let v1 = g.version(JobKey::new(1)).unwrap();
    assert_eq!(
        (v1.incarnation, v1.generation),
        (v0.incarnation, v0.generation + 1)
    );
    assert_eq!(g.node_version(a2).map(|(_, v)| v), Some(v1));
    assert_eq!(hand_off(&g, &mut w), vec![a2]);
    assert!(g.start(a2));
    assert_eq!(g.complete(a2, JobOutcome::Succeeded, &mut w), Ok(()));
    assert_eq!(g.outcome(a2, true), Ok(Some(JobOutcome::Succeeded)));
    // A job that ended otherwise keeps its generation.
    let again = g.submit(&spec(1, &[]), u64::MAX, &mut w);
    assert_eq!(again.unwrap_err().reason(), Reason::DuplicateKey);

    // Cancelled while running: a submission does not join it but starts a new job, and the
    // job linked on it after the cancellation follows the key to the new one.
    let b = submit(&g, 2, &[], &mut w);
    assert_eq!(hand_off(&g, &mut w), vec![b]);
    assert!(g.start(b));
    assert_eq!(g.release(b, false, &mut w), Ok(true));
    let follower = submit(&g, 3, &[on(2, Gate::OnSuccess)], &mut w);
    let b2 = submit(&g, 2, &[], &mut w);
    assert_ne!(b2, b);
    assert_eq!(g.version(JobKey::new(2)).unwrap().generation, 1);
    assert_eq!(g.complete(b, JobOutcome::Succeeded, &mut w), Err(WITHDRAWN));
    assert_eq!(
        g.outcome(follower, false),
        Ok(None),
        "the follower took the old end"
    );
    assert_eq!(hand_off(&g, &mut w), vec![b2]);
    assert!(g.start(b2));
    assert_eq!(g.complete(b2, JobOutcome::Succeeded, &mut w), Ok(()));
    assert_eq!(hand_off(&g, &mut w), vec![follower]);

    // At the last generation the submission gets the advance's error and changes nothing.
    let g = engine_with(4, 0);
    let c = submit(&g, 5, &[on(6, Gate::OnSuccess)], &mut w);
    assert_eq!(g.release(c, false, &mut w), Ok(true));
    let r = g.submit(&spec(5, &[]), u64::MAX, &mut w);
    assert_eq!(r.unwrap_err().reason(), Reason::GenerationExhausted);
    assert_empty(&g);
}

#[test]
fn d31_no_cancellation_once_closed_and_stale_releases_are_refused() {
    let g = engine(4);
    let mut w = Work::default();
    let a = submit(&g, 1, &[on(2, Gate::OnSuccess)], &mut w);
    let b = submit(&g, 3, &[on(4, Gate::Sequential)], &mut w);
    assert_eq!(g.release(b, false, &mut w), Ok(true));
    assert_eq!(
        g.release(b, false, &mut w),
        Err(STALE),
        "a second release of one claim"
    );
    g.close();
    assert_eq!(g.release(a, false, &mut w), Ok(false));
    assert_eq!(g.outcome(a, false), Ok(None), "cancelled after close");
    g.shutdown(&mut w);
    // Its shutdown end frees it: it has no claim.
    assert_eq!(g.outcome(a, false), Err(STALE));
    assert_empty(&g);
}
