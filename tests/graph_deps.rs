//! Jobs past the 64-dependency fast size and at the largest `max_deps` (1,024), and the input a
//! submit refuses at the call (SPEC D02, D05, D10, D13), on both graph engines.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{Admission, Dependency, Gate, Graph, GraphEngine, JobOutcome, JobSpec};
use fairway::oracle::GraphOn;
use fairway::{ClassId, Code, Reason, TenantId};

#[macro_use]
#[path = "common/graph.rs"]
mod graph_common;
use graph_common::*;

both_graphs!(
    d05_a_job_with_65_dependencies_waits_for_every_one,
    d05_a_job_with_1024_dependencies_waits_for_every_one,
    d13_the_first_of_1024_dependencies_failing_fails_the_job,
    d13_the_65th_of_1024_dependencies_failing_fails_the_job,
    d13_the_last_of_1024_dependencies_failing_fails_the_job,
    d02_a_job_of_an_unknown_class_is_refused_at_submit,
    d02_a_job_of_an_out_of_range_tenant_is_refused_at_submit,
);

fn graph<E: GraphEngine>(deps: u32) -> GraphOn<E> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    Graph::builder(ledger)
        .class(4)
        .nodes(deps + 8)
        .edges(deps + 8)
        .keys(2 * deps + 64)
        .max_deps(1024)
        .build_with::<E>()
        .unwrap()
}

/// `n` producers on keys 1..=n, then a job on key 0 depending on all of them `OnSuccess`;
/// producer `fail` (if any) fails. Returns the dependent's outcome; checks that it ran only
/// after every producer ended, and that the graph is empty at the end.
fn run_fan_in<E: GraphEngine>(n: u64, fail: Option<u64>) -> JobOutcome {
    let g = graph::<E>(n as u32);
    let producers: Vec<_> = (1..=n).map(|k| admit(&g, k, &[])).collect();
    let deps: Vec<Dependency> = (1..=n).map(|k| dep(k, Gate::OnSuccess)).collect();
    let last = admit(&g, 0, &deps);
    let mut ended = 0;
    let mut ran_last = false;
    while let Some(r) = g.try_next(CPU) {
        if r.id() == last.id() {
            assert_eq!(
                ended, n,
                "the dependent ran after {ended} of its {n} dependencies"
            );
            ran_last = true;
            g.complete(r, JobOutcome::Succeeded).unwrap();
            continue;
        }
        let key = r.key().key.0;
        let outcome = if Some(key) == fail {
            JobOutcome::Failed(fairway::Error::new(Code::Internal, Reason::Failed))
        } else {
            JobOutcome::Succeeded
        };
        g.complete(r, outcome).unwrap();
        ended += 1;
    }
    assert_eq!(ended, n, "every producer ran");
    assert_eq!(
        ran_last,
        fail.is_none(),
        "the dependent runs only if every gate held"
    );
    let out = g.wait_batch(std::slice::from_ref(&last)).unwrap().remove(0);
    assert_eq!(g.wait_batch(&producers).unwrap().len(), n as usize);
    // Every job ended; their last handles gone, every node is freed (SPEC D31).
    drop(last);
    drop(producers);
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.edges_used), (0, 0));
    out
}

pub(crate) fn d05_a_job_with_65_dependencies_waits_for_every_one<E: GraphEngine>() {
    assert_eq!(run_fan_in::<E>(65, None), JobOutcome::Succeeded);
}

pub(crate) fn d05_a_job_with_1024_dependencies_waits_for_every_one<E: GraphEngine>() {
    assert_eq!(run_fan_in::<E>(1024, None), JobOutcome::Succeeded);
}

fn dependency_failed(o: JobOutcome) -> bool {
    matches!(o, JobOutcome::Failed(e) if e.reason() == Reason::DependencyFailed)
}

pub(crate) fn d13_the_first_of_1024_dependencies_failing_fails_the_job<E: GraphEngine>() {
    assert!(dependency_failed(run_fan_in::<E>(1024, Some(1))));
}

pub(crate) fn d13_the_65th_of_1024_dependencies_failing_fails_the_job<E: GraphEngine>() {
    assert!(dependency_failed(run_fan_in::<E>(1024, Some(65))));
}

pub(crate) fn d13_the_last_of_1024_dependencies_failing_fails_the_job<E: GraphEngine>() {
    assert!(dependency_failed(run_fan_in::<E>(1024, Some(1024))));
}

fn job(key: u64, tenant: u32, class: u16) -> JobSpec<'static> {
    JobSpec {
        key: fairway::graph::JobKey::new(key),
        tenant: TenantId(tenant),
        class: ClassId(class),
        priority: 0,
        deadline: None,
        deps: &[],
    }
}

fn assert_refused_at_the_call<E: GraphEngine>(bad: JobSpec<'static>, reason: Reason) {
    let g = graph::<E>(4);
    let e = g.submit(&bad).unwrap_err();
    assert_eq!((e.code(), e.reason()), (Code::InvalidArgument, reason));
    let e = g
        .submit_batch_atomic(&[job(7, 0, 0), bad], None)
        .unwrap_err();
    assert_eq!((e.code(), e.reason()), (Code::InvalidArgument, reason));
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.waiting, o.ready),
        (0, 0, 0, 0),
        "a refused submit took nothing"
    );
    // The batch's good job was not admitted either: its key is free.
    assert!(matches!(
        g.submit(&job(7, 0, 0)),
        Ok(Admission::Admitted(_))
    ));
}

pub(crate) fn d02_a_job_of_an_unknown_class_is_refused_at_submit<E: GraphEngine>() {
    assert_refused_at_the_call::<E>(job(1, 0, 1), Reason::Class);
}

pub(crate) fn d02_a_job_of_an_out_of_range_tenant_is_refused_at_submit<E: GraphEngine>() {
    assert_refused_at_the_call::<E>(job(1, 4, 0), Reason::Tenant);
}
