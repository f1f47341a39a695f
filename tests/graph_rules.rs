//! SPEC section D (part 1): one or more tests per rule, each run on both graph engines.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::graph::{
    Admission, ConcurrencyCap, Gate, Graph, GraphBuilder, GraphEngine, JobHandle, JobId,
    JobOutcome, JobSpec, Occupancy,
};
use fairway::oracle::GraphOn;
use fairway::{Code, Reason};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

#[path = "graph_rules/batch.rs"]
mod batch;
use batch::*;
#[path = "graph_rules/shutdown.rs"]
mod shutdown;
use shutdown::*;

#[macro_use]
#[path = "common/graph.rs"]
mod graph_common;
use graph_common::*;

both_graphs!(
    d02_submit_admits_or_backpressures_and_errors_are_separate,
    d02_unknown_and_foreign_handles_are_refused,
    d02_exhausted_node_generation_retires_the_slot_and_never_wraps,
    d02_shutdown_gives_every_job_exactly_one_outcome,
    d02_shutdown_wakes_waiters_and_waiting_submitters,
    d04_submit_batch_admits_one_by_one,
    d04_wait_batch_returns_every_outcome_in_input_order,
    d04_atomic_batch_admits_all_or_none,
    d04_atomic_batch_is_never_seen_half_admitted,
    d41_batch_cap_bounds_the_batch_bodies,
    d42_full_graph_makes_submitters_wait_or_retry_and_drops_nothing,
    d05_full_stores_backpressure_and_mutate_nothing,
    d05_waiting_submit_resumes_when_room_frees,
    d06_waiting_jobs_hold_no_quota,
    d06_ledger_refusal_fails_the_job_and_its_dependents_per_gate,
    d10_sequential_runs_after_a_failed_dependency,
    d10_on_success_fails_dependency_failed_transitively,
    d10_on_admission_runs_once_the_dependency_is_admitted,
    d10_admission_as_the_last_gate_after_a_failed_one_fails_the_job,
    d11_dependency_on_a_key_without_producer_waits_for_it,
    d12_ready_only_when_every_gate_holds,
    d13_completion_releases_fan_out_and_frees_edges,
    d14_discovered_dependency_gates_the_end_of_a_running_job,
    d14_failed_discovered_dependency_fails_the_job_and_its_dependents,
    d14_discovery_unions_and_refuses_cycles_and_stale_jobs,
    d15_self_dependency_is_refused,
    d15_cycle_through_a_waiting_key_is_refused_and_mutates_nothing,
    d40_chain_longer_than_the_class_cells_completes,
    d50_occupancy_reports_every_store_and_state,
);

fn ledger(limits: Limits) -> Ledger {
    Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4).tenant_limits(limits)).unwrap()
}

fn builder(limits: Limits) -> GraphBuilder {
    Graph::builder(ledger(limits))
        .class(4)
        .nodes(64)
        .edges(256)
        .keys(256)
}

fn graph<E: GraphEngine>() -> GraphOn<E> {
    builder(Limits::UNLIMITED).build_with::<E>().unwrap()
}

/// Runs every ready job of `CPU` until none is left; `fail` lists the jobs whose body fails.
/// Returns the jobs in the order they ran.
fn drain<E: GraphEngine>(g: &GraphOn<E>, fail: &[JobId]) -> Vec<JobId> {
    let mut ran = Vec::new();
    while let Some(job) = g.try_next(CPU) {
        let h = job.id();
        ran.push(h);
        let outcome = if fail.contains(&h) {
            JobOutcome::Failed(fairway::Error::new(Code::Internal, Reason::Failed))
        } else {
            JobOutcome::Succeeded
        };
        g.complete(job, outcome).unwrap();
    }
    ran
}

fn ready_handles<E: GraphEngine>(g: &GraphOn<E>) -> Vec<JobId> {
    drain(g, &[])
}

fn dependency_failed(o: Option<JobOutcome>) -> bool {
    matches!(o, Some(JobOutcome::Failed(e)) if e.reason() == Reason::DependencyFailed
        && e.code() == Code::Unavailable)
}

fn d02_submit_admits_or_backpressures_and_errors_are_separate<E: GraphEngine>() {
    let g = builder(Limits::UNLIMITED)
        .nodes(1)
        .build_with::<E>()
        .unwrap();
    let a = admit(&g, 1, &[]);
    // Full: a result, not an error, and nothing changed.
    let before = g.occupancy();
    assert_eq!(g.submit(&spec(2, &[])).unwrap(), Admission::Backpressured);
    assert_eq!(g.occupancy(), before);
    // Bad input is the error layer.
    let e = g.submit(&spec(3, &[dep(3, Gate::Sequential)])).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::InvalidArgument, Reason::Cycle)
    );
    // The same identity while its job is live joins it, with the store full (SPEC D02).
    let joiner = match g.submit(&spec(1, &[])).unwrap() {
        Admission::DedupeJoined(h) => h,
        other => panic!("expected a join of job 1: {other:?}"),
    };
    assert_eq!(joiner, a);
    assert_eq!(g.occupancy(), before);
    assert_eq!(ready_handles(&g), vec![a.id()]);
    // After the job ended, the generation's job is taken: a duplicate.
    let e = g.submit(&spec(1, &[])).unwrap_err();
    assert_eq!(e.reason(), Reason::DuplicateKey);
    // Both handles see the one outcome; the slot is freed when the last one goes (SPEC D31).
    assert_eq!(a.outcome(), Some(JobOutcome::Succeeded));
    assert_eq!(g.outcome(&joiner).unwrap(), Some(JobOutcome::Succeeded));
    drop(a);
    assert_eq!(
        g.occupancy().nodes_used,
        1,
        "the joiner's claim holds the slot"
    );
    assert_eq!(joiner.outcome(), Some(JobOutcome::Succeeded));
    drop(joiner);
    assert_eq!(
        g.occupancy().nodes_used,
        0,
        "the last handle freed the slot"
    );
    assert!(matches!(
        g.submit(&spec(2, &[])).unwrap(),
        Admission::Admitted(_)
    ));
}

fn d02_unknown_and_foreign_handles_are_refused<E: GraphEngine>() {
    let g = graph::<E>();
    let other = graph::<E>();
    let a = admit(&g, 1, &[]);
    assert_eq!(
        other.outcome(&a).unwrap_err().reason(),
        Reason::ForeignHandle
    );
    assert_eq!(
        other.effective(a.id()).unwrap_err().reason(),
        Reason::ForeignHandle
    );
    drain(&g, &[]);
    assert_eq!(g.outcome(&a).unwrap(), Some(JobOutcome::Succeeded));
    // The last handle gone, the job is freed: its id is stale.
    let id = a.id();
    drop(a);
    let e = g.outcome(id).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::NotFound, Reason::StaleHandle)
    );
    // The slot is reused: the stale id still names nothing.
    let b = admit(&g, 2, &[]);
    assert_eq!(g.outcome(id).unwrap_err().reason(), Reason::StaleHandle);
    assert_ne!(b.id(), id);
    assert_eq!(g.outcome(&b).unwrap(), None);
}

/// Node generations are checked: a slot freed at the last generation retires (never
/// allocated again, counted as used) instead of wrapping, so no stale handle aliases a job.
fn d02_exhausted_node_generation_retires_the_slot_and_never_wraps<E: GraphEngine>() {
    let g = builder(Limits::UNLIMITED)
        .nodes(2)
        .first_node_generation(u32::MAX - 1)
        .build_with::<E>()
        .unwrap();
    let mut old = Vec::new();
    for key in 1..=4 {
        let h = admit(&g, key, &[]);
        assert!(!old.contains(&h.id()), "a job id was reused");
        assert_eq!(ready_handles(&g), vec![h.id()]);
        assert_eq!(g.outcome(&h).unwrap(), Some(JobOutcome::Succeeded));
        old.push(h.id());
        // The last handle gone: the ended job is freed.
        drop(h);
        // Each slot serves its last two generations, then retires.
        let retired = (key / 2) as u32;
        assert_eq!(g.occupancy().nodes_used, retired, "after job {key}");
        for h in &old {
            assert_eq!(g.outcome(*h).unwrap_err().reason(), Reason::StaleHandle);
        }
    }
    // Both slots retired: the node store is full for good, and says so.
    assert_eq!(g.submit(&spec(5, &[])).unwrap(), Admission::Backpressured);
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.nodes_total, o.waiting), (2, 2, 0));
}

fn d04_submit_batch_admits_one_by_one<E: GraphEngine>() {
    let g = graph::<E>();
    let deps = [dep(1, Gate::OnSuccess)];
    let r = g.submit_batch(&[
        spec(1, &[]),
        spec(1, &[]),
        spec(2, &deps),
        spec(3, &[9; 20].map(|k| dep(k, Gate::Sequential))),
    ]);
    assert_eq!(r.len(), 4);
    let [r0, r1, r2, r3]: [_; 4] = r.try_into().unwrap();
    let Ok(Admission::Admitted(a)) = r0 else {
        panic!("{r0:?}")
    };
    // One by one: the second job of key 1 joins the first (SPEC D02).
    let Ok(Admission::DedupeJoined(joiner)) = r1 else {
        panic!("{r1:?}")
    };
    assert_eq!(joiner, a);
    assert_eq!(r3.unwrap_err().reason(), Reason::TooManyDependencies);
    let Ok(Admission::Admitted(b)) = r2 else {
        panic!("{r2:?}")
    };
    // The jobs before and after the refused one stay admitted.
    assert_eq!(drain(&g, &[]), vec![a.id(), b.id()]);
}

fn d04_wait_batch_returns_every_outcome_in_input_order<E: GraphEngine>() {
    let g = graph::<E>();
    let a = admit(&g, 1, &[]);
    let b = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    let c = admit(&g, 3, &[dep(2, Gate::Sequential)]);
    let alone = admit(&g, 9, &[]);
    // Another graph's handle is refused before waiting (an owned handle is never stale, and
    // one handle cannot appear twice: SPEC D31).
    let other = graph::<E>();
    let foreign = admit(&other, 1, &[]);
    let b_id = b.id();
    let exec = {
        let g = g.clone();
        std::thread::spawn(move || {
            let mut ran = 0;
            while ran < 4 {
                if let Some(job) = g.try_next(CPU) {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    let outcome = if job.id() == b_id {
                        JobOutcome::Failed(fairway::Error::new(Code::Internal, Reason::Failed))
                    } else {
                        JobOutcome::Succeeded
                    };
                    g.complete(job, outcome).unwrap();
                    ran += 1;
                } else {
                    std::thread::yield_now();
                }
            }
        })
    };
    assert_eq!(
        g.wait_batch(std::slice::from_ref(&alone)).unwrap(),
        vec![JobOutcome::Succeeded]
    );
    let mixed = [c, foreign];
    assert_eq!(
        g.wait_batch(&mixed).unwrap_err().reason(),
        Reason::ForeignHandle
    );
    let [c, foreign] = mixed;
    let cab = [c, a, b];
    let out = g.wait_batch(&cab).unwrap();
    join_within(exec, TEST_LIMIT, "the executor of the four jobs");
    assert_eq!(out[0], JobOutcome::Succeeded);
    assert_eq!(out[1], JobOutcome::Succeeded);
    assert!(matches!(out[2], JobOutcome::Failed(e) if e.reason() == Reason::Failed));
    // Nothing is taken: the handles still read their outcomes, and a second wait gives the
    // same, until the handles go (SPEC D31).
    assert_eq!(g.wait_batch(&cab).unwrap(), out);
    assert_eq!(
        g.occupancy().nodes_used,
        4,
        "the held handles keep their jobs"
    );
    let ids: Vec<JobId> = cab.iter().map(JobHandle::id).collect();
    drop(cab);
    drop(alone);
    for id in ids {
        assert_eq!(g.outcome(id).unwrap_err().reason(), Reason::StaleHandle);
    }
    assert_eq!(g.occupancy().nodes_used, 0);
    drop(foreign);
}

fn d05_full_stores_backpressure_and_mutate_nothing<E: GraphEngine>() {
    let g = builder(Limits::UNLIMITED)
        .nodes(4)
        .edges(2)
        .keys(8)
        .build_with::<E>()
        .unwrap();
    let p = admit(&g, 1, &[]);
    let q = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    let before = g.occupancy();
    assert_eq!(before.edges_used, 1);
    // Two more edges do not fit.
    let deps = [dep(1, Gate::Sequential), dep(2, Gate::Sequential)];
    assert_eq!(g.submit(&spec(3, &deps)).unwrap(), Admission::Backpressured);
    assert_eq!(g.occupancy(), before);
    // Nodes: fill them, then one more is refused.
    let _c = admit(&g, 3, &[]);
    let _d = admit(&g, 4, &[]);
    let full = g.occupancy();
    assert_eq!(full.nodes_used, full.nodes_total);
    assert_eq!(g.submit(&spec(5, &[])).unwrap(), Admission::Backpressured);
    assert_eq!(g.occupancy(), full);
    // Everything still runs.
    let ran = drain(&g, &[]);
    assert_eq!(ran.len(), 4);
    assert_eq!(g.outcome(&q).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.outcome(&p).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.occupancy().edges_used, 0);
}

fn d06_waiting_jobs_hold_no_quota<E: GraphEngine>() {
    let g = graph::<E>();
    let _w = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    // Only the waiting job exists: no permit taken.
    assert!(g.ledger().usage().is_zero());
    let _p = admit(&g, 1, &[]);
    assert!(!g.ledger().usage().is_zero());
    drain(&g, &[]);
    assert!(g.ledger().usage().is_zero());
}

fn d06_ledger_refusal_fails_the_job_and_its_dependents_per_gate<E: GraphEngine>() {
    let g = builder(Limits::UNLIMITED.concurrency(1))
        .build_with::<E>()
        .unwrap();
    let a = admit(&g, 1, &[]);
    // `a` holds the tenant's only permit; `b` is ready now and is refused by the ledger.
    let b = admit(&g, 2, &[]);
    let e = match g.outcome(&b).unwrap() {
        Some(JobOutcome::Failed(e)) => e,
        other => panic!("expected a ledger refusal, got {other:?}"),
    };
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert_eq!(e.reason(), Reason::TenantConcurrency);
    let on_success = admit(&g, 3, &[dep(2, Gate::OnSuccess)]);
    let sequential = admit(&g, 4, &[dep(2, Gate::Sequential)]);
    let on_admission = admit(&g, 5, &[dep(2, Gate::OnAdmission)]);
    assert!(dependency_failed(g.outcome(&on_success).unwrap()));
    assert!(dependency_failed(g.outcome(&on_admission).unwrap()));
    // The sequential dependent ran into the same limit (the permit is still held by `a`) …
    assert!(
        matches!(g.outcome(&sequential).unwrap(), Some(JobOutcome::Failed(e)) if e.reason() == Reason::TenantConcurrency)
    );
    // … and once `a` ends, new work is admitted again.
    drain(&g, &[]);
    assert_eq!(g.outcome(&a).unwrap(), Some(JobOutcome::Succeeded));
    let c = admit(&g, 6, &[dep(2, Gate::Sequential)]);
    drain(&g, &[]);
    assert_eq!(g.outcome(&c).unwrap(), Some(JobOutcome::Succeeded));
    assert!(g.ledger().usage().is_zero());
}

fn d10_sequential_runs_after_a_failed_dependency<E: GraphEngine>() {
    let g = graph::<E>();
    let p = admit(&g, 1, &[]);
    let s = admit(&g, 2, &[dep(1, Gate::Sequential)]);
    assert_eq!(drain(&g, &[p.id()]), vec![p.id(), s.id()]);
    assert!(matches!(
        g.outcome(&p).unwrap(),
        Some(JobOutcome::Failed(_))
    ));
    assert_eq!(g.outcome(&s).unwrap(), Some(JobOutcome::Succeeded));
}

fn d10_on_success_fails_dependency_failed_transitively<E: GraphEngine>() {
    let g = graph::<E>();
    let p = admit(&g, 1, &[]);
    let a = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    let b = admit(&g, 3, &[dep(2, Gate::OnSuccess)]);
    let c = admit(&g, 4, &[dep(3, Gate::Sequential)]);
    let d = admit(&g, 5, &[dep(3, Gate::OnAdmission)]);
    let ran = drain(&g, &[p.id()]);
    // `c` runs (its gate is sequential); `a`, `b`, `d` never run.
    assert_eq!(ran, vec![p.id(), c.id()]);
    assert!(dependency_failed(g.outcome(&a).unwrap()));
    assert!(dependency_failed(g.outcome(&b).unwrap()));
    assert!(dependency_failed(g.outcome(&d).unwrap()));
    assert_eq!(g.outcome(&c).unwrap(), Some(JobOutcome::Succeeded));
    // A dependent submitted after the failure fails at once.
    let late = admit(&g, 6, &[dep(2, Gate::OnSuccess)]);
    assert!(dependency_failed(g.outcome(&late).unwrap()));
}

fn d10_on_admission_runs_once_the_dependency_is_admitted<E: GraphEngine>() {
    let g = graph::<E>();
    let w = admit(&g, 9, &[]);
    let p = admit(&g, 1, &[dep(9, Gate::OnSuccess)]);
    let a = admit(&g, 2, &[dep(1, Gate::OnAdmission)]);
    // Neither `p` nor `a` is admitted while `w` runs.
    let jw = g.try_next(CPU).unwrap();
    assert_eq!(jw.id(), w.id());
    assert!(g.try_next(CPU).is_none());
    g.complete(jw, JobOutcome::Succeeded).unwrap();
    // `p` admitted: `a` is ready as well, before `p` completes.
    let jp = g.try_next(CPU).unwrap();
    assert_eq!(jp.id(), p.id());
    let ja = g.try_next(CPU).unwrap();
    assert_eq!(ja.id(), a.id());
    g.complete(ja, JobOutcome::Succeeded).unwrap();
    assert_eq!(g.outcome(&p).unwrap(), None);
    g.complete(jp, JobOutcome::Succeeded).unwrap();
    assert_eq!(g.outcome(&a).unwrap(), Some(JobOutcome::Succeeded));
    // A late admission-gated dependent of a job that ran is ready at once.
    let late = admit(&g, 3, &[dep(1, Gate::OnAdmission)]);
    assert_eq!(drain(&g, &[]), vec![late.id()]);
}

fn d10_admission_as_the_last_gate_after_a_failed_one_fails_the_job<E: GraphEngine>() {
    let g = graph::<E>();
    let f = admit(&g, 1, &[]);
    let j = admit(&g, 3, &[dep(1, Gate::OnSuccess), dep(2, Gate::OnAdmission)]);
    drain(&g, &[f.id()]);
    // One gate failed; the admission gate is still pending.
    assert_eq!(g.outcome(&j).unwrap(), None);
    let p = admit(&g, 2, &[]);
    assert!(dependency_failed(g.outcome(&j).unwrap()));
    assert_eq!(drain(&g, &[]), vec![p.id()]);
    assert_eq!(g.occupancy().waiting, 0);
}

fn d11_dependency_on_a_key_without_producer_waits_for_it<E: GraphEngine>() {
    let g = graph::<E>();
    let w = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    let v = admit(&g, 3, &[dep(1, Gate::OnAdmission)]);
    // No producer yet: waiting, not failed.
    assert!(drain(&g, &[]).is_empty());
    assert_eq!(g.outcome(&w).unwrap(), None);
    assert_eq!(g.occupancy().waiting, 2);
    let p = admit(&g, 1, &[]);
    let ran = drain(&g, &[]);
    assert_eq!(ran.len(), 3);
    assert!(ran.iter().position(|&h| h == p.id()) < ran.iter().position(|&h| h == w.id()));
    assert_eq!(g.outcome(&w).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.outcome(&v).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.occupancy().edges_used, 0);
}

fn d12_ready_only_when_every_gate_holds<E: GraphEngine>() {
    let g = graph::<E>();
    let a = admit(&g, 1, &[]);
    let b = admit(&g, 2, &[]);
    let c = admit(&g, 3, &[]);
    let deps = [
        dep(1, Gate::OnSuccess),
        dep(2, Gate::Sequential),
        dep(3, Gate::OnAdmission),
    ];
    let j = admit(&g, 4, &deps);
    let mut running = HashMap::new();
    for _ in 0..3 {
        let r = g.try_next(CPU).unwrap();
        running.insert(r.id(), r);
    }
    // Every producer admitted and running: `j` waits for `a` and `b` to end.
    assert!(g.try_next(CPU).is_none());
    g.complete(running.remove(&c.id()).unwrap(), JobOutcome::Succeeded)
        .unwrap();
    g.complete(running.remove(&a.id()).unwrap(), JobOutcome::Succeeded)
        .unwrap();
    assert!(g.try_next(CPU).is_none());
    assert_eq!(g.occupancy().waiting, 1);
    g.complete(
        running.remove(&b.id()).unwrap(),
        JobOutcome::Failed(fairway::Error::new(Code::Internal, Reason::Failed)),
    )
    .unwrap();
    assert_eq!(drain(&g, &[]), vec![j.id()]);
}

fn d13_completion_releases_fan_out_and_frees_edges<E: GraphEngine>() {
    let g = graph::<E>();
    let p = admit(&g, 1, &[]);
    let kids: Vec<JobHandle<E>> = (10..14)
        .map(|k| admit(&g, k, &[dep(1, Gate::OnSuccess)]))
        .collect();
    assert_eq!(g.occupancy().edges_used, 4);
    let jp = g.try_next(CPU).unwrap();
    assert_eq!(jp.id(), p.id());
    assert!(g.try_next(CPU).is_none());
    g.complete(jp, JobOutcome::Succeeded).unwrap();
    assert_eq!(g.occupancy().edges_used, 0);
    assert_eq!(g.occupancy().ready, 4);
    let mut ran = drain(&g, &[]);
    ran.sort_by_key(|h| format!("{h:?}"));
    let mut want: Vec<JobId> = kids.iter().map(JobHandle::id).collect();
    want.sort_by_key(|h| format!("{h:?}"));
    assert_eq!(ran, want);
    // Read every outcome, then drop the handles: that frees every node (SPEC D31).
    for h in kids.iter().chain([&p]) {
        assert_eq!(g.outcome(h).unwrap(), Some(JobOutcome::Succeeded));
    }
    drop(kids);
    drop(p);
    assert_eq!(g.occupancy().nodes_used, 0);
}

fn d14_discovered_dependency_gates_the_end_of_a_running_job<E: GraphEngine>() {
    let g = graph::<E>();
    let x = admit(&g, 1, &[]);
    let after_x = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    let job = g.try_next(CPU).unwrap();
    assert_eq!(job.id(), x.id());
    // While running, `x` finds it needs key 9, which has no producer yet.
    assert_eq!(
        g.discover(&job, &[dep(9, Gate::OnSuccess)]).unwrap(),
        Admission::Admitted(())
    );
    g.complete(job, JobOutcome::Succeeded).unwrap();
    // The body is done, but `x` has not ended: its dependent waits.
    assert_eq!(g.outcome(&x).unwrap(), None);
    assert!(g.try_next(CPU).is_none());
    assert_eq!(g.occupancy().waiting, 2);
    let nine = admit(&g, 9, &[]);
    assert_eq!(drain(&g, &[]), vec![nine.id(), after_x.id()]);
    assert_eq!(g.outcome(&x).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.outcome(&after_x).unwrap(), Some(JobOutcome::Succeeded));
    let o = g.occupancy();
    assert_eq!((o.edges_used, o.waiting, o.running), (0, 0, 0));
}

fn d14_failed_discovered_dependency_fails_the_job_and_its_dependents<E: GraphEngine>() {
    let g = graph::<E>();
    let bad = admit(&g, 5, &[]);
    assert_eq!(drain(&g, &[bad.id()]), vec![bad.id()]);
    let x = admit(&g, 1, &[]);
    let after_x = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    let seq_x = admit(&g, 3, &[dep(1, Gate::Sequential)]);
    let job = g.try_next(CPU).unwrap();
    // A discovered dependency that already failed: the job will end dependency-failed.
    g.discover(&job, &[dep(5, Gate::OnSuccess)]).unwrap();
    g.complete(job, JobOutcome::Succeeded).unwrap();
    assert!(dependency_failed(g.outcome(&x).unwrap()));
    assert!(dependency_failed(g.outcome(&after_x).unwrap()));
    assert_eq!(drain(&g, &[]), vec![seq_x.id()]);
    // A job that ran and then failed a discovered gate counts as admitted.
    let adm = admit(&g, 4, &[dep(1, Gate::OnAdmission)]);
    assert_eq!(drain(&g, &[]), vec![adm.id()]);
}

fn d14_discovery_unions_and_refuses_cycles_and_stale_jobs<E: GraphEngine>() {
    let g = graph::<E>();
    let p = admit(&g, 7, &[]);
    let x = admit(&g, 1, &[dep(7, Gate::OnAdmission)]);
    let y = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    let jp = g.try_next(CPU).unwrap();
    assert_eq!(jp.id(), p.id());
    let job = g.try_next(CPU).unwrap();
    assert_eq!(job.id(), x.id());
    // Key 7 is already a dependency: discovering it again adds no edge.
    let before = g.occupancy();
    g.discover(&job, &[dep(7, Gate::OnSuccess), dep(7, Gate::Sequential)])
        .unwrap();
    assert_eq!(g.occupancy(), before);
    // `y` depends on `x`: `x` discovering `y` would close a cycle; itself, too.
    let e = g.discover(&job, &[dep(2, Gate::Sequential)]).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::InvalidArgument, Reason::Cycle)
    );
    let e = g.discover(&job, &[dep(1, Gate::Sequential)]).unwrap_err();
    assert_eq!(e.reason(), Reason::Cycle);
    assert_eq!(g.occupancy(), before);
    // Discovered twice, then union: one edge.
    g.discover(&job, &[dep(8, Gate::Sequential)]).unwrap();
    g.discover(&job, &[dep(8, Gate::OnSuccess)]).unwrap();
    assert_eq!(g.occupancy().edges_used, before.edges_used + 1);
    let keep = job.id();
    g.complete(job, JobOutcome::Succeeded).unwrap();
    g.complete(jp, JobOutcome::Succeeded).unwrap();
    assert_eq!(g.outcome(keep).unwrap(), None);
    let _eight = admit(&g, 8, &[]);
    drain(&g, &[]);
    assert_eq!(g.outcome(&x).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.outcome(&y).unwrap(), Some(JobOutcome::Succeeded));
}

fn d15_self_dependency_is_refused<E: GraphEngine>() {
    let g = graph::<E>();
    let before = g.occupancy();
    let e = g
        .submit(&spec(
            1,
            &[dep(2, Gate::Sequential), dep(1, Gate::OnSuccess)],
        ))
        .unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::InvalidArgument, Reason::Cycle)
    );
    assert_eq!(g.occupancy(), before);
}

fn d15_cycle_through_a_waiting_key_is_refused_and_mutates_nothing<E: GraphEngine>() {
    let g = graph::<E>();
    // a -> b -> c, with `c` not produced yet; c -> a would close the cycle.
    let a = admit(&g, 1, &[dep(3, Gate::OnSuccess)]);
    let b = admit(&g, 2, &[dep(1, Gate::Sequential)]);
    let before = g.occupancy();
    let e = g
        .submit(&spec(3, &[dep(2, Gate::OnAdmission)]))
        .unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::InvalidArgument, Reason::Cycle)
    );
    assert_eq!(g.occupancy(), before);
    // Without the cycle, the key's producer runs and releases the chain.
    let c = admit(&g, 3, &[]);
    assert_eq!(drain(&g, &[]), ids(&[&c, &a, &b]));
}

fn d40_chain_longer_than_the_class_cells_completes<E: GraphEngine>() {
    // One cell; a chain of 16 dependent jobs; one executor thread that never waits on a
    // dependency (only ready jobs reach the scheduler).
    let g = Graph::builder(ledger(Limits::UNLIMITED))
        .class(1)
        .nodes(32)
        .build_with::<E>()
        .unwrap();
    const N: u64 = 16;
    let mut handles = vec![admit(&g, 0, &[])];
    for k in 1..N {
        handles.push(admit(&g, k, &[dep(k - 1, Gate::OnSuccess)]));
    }
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let exec = {
        let g = g.clone();
        let order = order.clone();
        std::thread::spawn(move || {
            for _ in 0..N {
                let job = g.next_blocking(CPU).expect("scheduler open");
                order.lock().unwrap().push(job.id());
                g.complete(job, JobOutcome::Succeeded).unwrap();
            }
        })
    };
    join_within(exec, TEST_LIMIT, "the one executor running the chain of 16");
    let want: Vec<JobId> = handles.iter().map(JobHandle::id).collect();
    assert_eq!(*order.lock().unwrap(), want);
    for h in &handles {
        assert_eq!(g.outcome(h).unwrap(), Some(JobOutcome::Succeeded));
    }
    drop(handles);
    assert_eq!(g.occupancy().nodes_used, 0);
}

fn d50_occupancy_reports_every_store_and_state<E: GraphEngine>() {
    let g = graph::<E>();
    let empty = g.occupancy();
    assert_eq!(
        (empty.nodes_total, empty.edges_total, empty.keys_total),
        (64, 256, 256)
    );
    assert_eq!(
        (empty.nodes_used, empty.edges_used, empty.keys_used),
        (0, 0, 0)
    );
    let p = admit(&g, 1, &[]);
    let w = admit(&g, 2, &[dep(1, Gate::OnSuccess), dep(7, Gate::Sequential)]);
    let o = g.occupancy();
    assert_eq!(
        (
            o.nodes_used,
            o.edges_used,
            o.keys_used,
            o.waiting,
            o.ready,
            o.running
        ),
        (2, 2, 3, 1, 1, 0)
    );
    let jp = g.try_next(CPU).unwrap();
    let o = g.occupancy();
    assert_eq!((o.waiting, o.ready, o.running), (1, 0, 1));
    g.complete(jp, JobOutcome::Succeeded).unwrap();
    let o = g.occupancy();
    assert_eq!((o.edges_used, o.waiting, o.running), (1, 1, 0));
    let seven = admit(&g, 7, &[]);
    drain(&g, &[]);
    for h in [p, w, seven] {
        assert_eq!(g.outcome(&h).unwrap(), Some(JobOutcome::Succeeded));
        // Dropped here: the ended job's node is freed.
    }
    let o = g.occupancy();
    assert_eq!(
        o,
        Occupancy {
            keys_used: 3,
            ..empty
        }
    );
}

#[test]
fn d41_concurrency_cap_of_zero_is_refused() {
    let e = ConcurrencyCap::new(0).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.field(), Some("capacity"));
}

#[test]
fn d41_cap_bounds_bodies_and_releases_on_return_and_unwind() {
    let cap = ConcurrencyCap::new(2).unwrap();
    let live = Arc::new(AtomicU32::new(0));
    let peak = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let cap = cap.clone();
            let live = live.clone();
            let peak = peak.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        cap.run(|| {
                            let now = live.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            std::thread::yield_now();
                            live.fetch_sub(1, Ordering::SeqCst);
                            if i % 2 == 0 {
                                panic!("body fails");
                            }
                        })
                    }));
                    assert_eq!(r.is_err(), i % 2 == 0);
                }
            })
        })
        .collect();
    for (i, t) in threads.into_iter().enumerate() {
        join_within(
            t,
            TEST_LIMIT,
            &format!("thread {i} of 6 running bodies under a cap of 2 (a permit never came back?)"),
        );
    }
    assert!(peak.load(Ordering::SeqCst) <= 2);
    assert_eq!(peak.load(Ordering::SeqCst), 2, "the cap was never reached");
    // Every permit came back, including those of the panicking bodies.
    assert_eq!(cap.available(), 2);
}

#[test]
fn d41_cap_wraps_graph_job_bodies() {
    let g = graph::<fairway::oracle::LockFreeGraph>();
    let cap = ConcurrencyCap::new(1).unwrap();
    let h = admit(&g, 1, &[]);
    let job = g.try_next(CPU).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cap.run(|| -> () { panic!("job body panics") })
    }));
    assert!(r.is_err());
    assert_eq!(cap.available(), 1);
    g.complete(
        job,
        JobOutcome::Failed(fairway::Error::new(Code::Internal, Reason::Failed)),
    )
    .unwrap();
    assert!(matches!(
        g.outcome(&h).unwrap(),
        Some(JobOutcome::Failed(_))
    ));
}

#[global_allocator]
static GLOBAL: fairway_bench_support::alloc::Counting = fairway_bench_support::alloc::Counting;

/// PERF P8/P9 on the lock-free graph: submitting a job with 4 dependency edges, completing a
/// producer with fan-out 4, handing the ready jobs to the scheduler, running and collecting
/// them allocate nothing (counted by the thread-local counting allocator).
#[test]
fn p9_lock_free_submit_complete_and_hand_off_allocate_nothing() {
    let g = Graph::builder(ledger(Limits::UNLIMITED))
        .class(16)
        .nodes(64)
        .edges(256)
        .keys(8192)
        .build()
        .unwrap();
    let round = |base: u64| {
        // Four producers, running.
        let mut producers = [None, None, None, None];
        let mut handles: [Option<JobHandle>; 9] = Default::default();
        for (i, slot) in handles.iter_mut().enumerate().take(4) {
            *slot = Some(admit(&g, base + i as u64, &[]));
        }
        for p in &mut producers {
            *p = g.try_next(CPU);
        }
        let deps = [
            dep(base, Gate::OnSuccess),
            dep(base + 1, Gate::Sequential),
            dep(base + 2, Gate::OnAdmission),
            dep(base + 3, Gate::OnSuccess),
        ];
        // Fan-out 4 on each producer: four dependents with four edges each.
        for (i, slot) in handles.iter_mut().enumerate().skip(4).take(4) {
            *slot = Some(admit(&g, base + i as u64, &deps));
        }
        for p in producers {
            g.complete(p.expect("a free cell"), JobOutcome::Succeeded)
                .unwrap();
        }
        while let Some(job) = g.try_next(CPU) {
            g.complete(job, JobOutcome::Succeeded).unwrap();
        }
        for h in handles.iter().flatten() {
            assert_eq!(g.outcome(h).unwrap(), Some(JobOutcome::Succeeded));
        }
        // Collected: the last handles go, which frees every node (SPEC D31).
        drop(handles);
    };
    // Warm up to the working set's high-water mark, its keys included (the stores back what
    // is used and grow only past it, SPEC D51); remove the keys, whose slots and index cells
    // the counted rounds then reuse; count the same rounds again.
    for r in 0..500u64 {
        round(r * 16);
    }
    for r in 0..500u64 {
        for i in 0..8 {
            g.remove(fairway::graph::JobKey::new(r * 16 + i)).unwrap();
        }
    }
    let allocs = fairway_bench_support::alloc::count(|| {
        for r in 0..500u64 {
            round(r * 16);
        }
    });
    assert_eq!(allocs, 0);
    assert_eq!(g.occupancy().nodes_used, 0);
    assert_eq!(g.occupancy().edges_used, 0);
}

/// SPEC D05, D42: the waiting form of submit waits for room instead of backpressuring, and
/// resumes once a completion or a collected outcome frees it.
fn d05_waiting_submit_resumes_when_room_frees<E: GraphEngine>() {
    let g = builder(Limits::UNLIMITED)
        .nodes(1)
        .edges(1)
        .build_with::<E>()
        .unwrap();
    let a = admit(&g, 1, &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let waiting = {
        let g = g.clone();
        rt.spawn(async move {
            let deps = [dep(1, Gate::OnSuccess)];
            g.submit_waiting(&spec(2, &deps)).await
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(!waiting.is_finished(), "no node was free");
    assert_eq!(ready_handles(&g), vec![a.id()]);
    // Completing frees no node (the handle keeps the ended job); dropping the last handle
    // after reading the outcome does.
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(!waiting.is_finished());
    assert_eq!(g.outcome(&a).unwrap(), Some(JobOutcome::Succeeded));
    drop(a);
    let t = std::time::Instant::now();
    while !waiting.is_finished() {
        assert!(
            t.elapsed() < TEST_LIMIT,
            "the waiting submit did not resume after the node was freed"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let b = rt.block_on(waiting).unwrap().unwrap();
    // Its producer had already succeeded: it runs at once.
    assert_eq!(ready_handles(&g), vec![b.id()]);
}
