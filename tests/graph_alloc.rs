//! Allocation counts of the lock-free graph's submit past the 64-dependency fast size and at the
//! largest `max_deps` (SPEC D05's fixed bounds, Q03). The thread-local counting allocator of
//! `fairway-bench-support` counts only this thread's allocations.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{Admission, Dependency, Gate, Graph, JobKey, JobOutcome, JobSpec};
use fairway::{ClassId, TenantId};
use fairway_bench_support::alloc::{count, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

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

/// Submits a job with `n` dependencies on keys that already exist (their producers are live),
/// counting only the submit of the second of two identical rounds (the first brings the
/// graph's stores to the working set's size, SPEC D51); each round runs everything, so the
/// graph is left empty.
fn submit_allocations(n: u64) -> u64 {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1)).unwrap();
    let g = Graph::builder(ledger)
        .class(2)
        .nodes(n as u32 + 4)
        .edges(n as u32 + 4)
        .keys(2 * n as u32 + 64)
        .max_deps(1024)
        .build()
        .unwrap();
    submit_round(&g, n);
    // The keys go, so the second round names them afresh on the slots and index cells they
    // leave.
    for k in 0..=n {
        g.remove(JobKey::new(k)).unwrap();
    }
    submit_round(&g, n)
}

/// One round of [`submit_allocations`]: the allocations of its dependent's submit.
fn submit_round(g: &Graph, n: u64) -> u64 {
    let producers: Vec<_> = (1..=n)
        .map(|k| match g.submit(&spec(k, &[])).unwrap() {
            Admission::Admitted(h) => h,
            other => panic!("{other:?}"),
        })
        .collect();
    let deps: Vec<Dependency> = (1..=n)
        .map(|k| Dependency {
            key: JobKey::new(k),
            gate: Gate::OnSuccess,
            pin: None,
        })
        .collect();
    let dependent = spec(0, &deps);
    let mut handle = None;
    let allocs = count(|| {
        handle = Some(g.submit(&dependent).unwrap());
    });
    let Some(Admission::Admitted(last)) = handle else {
        panic!("not admitted: {handle:?}");
    };
    while let Some(r) = g.try_next(ClassId(0)) {
        g.complete(r, JobOutcome::Succeeded).unwrap();
    }
    assert_eq!(
        g.wait_batch(std::slice::from_ref(&last)).unwrap(),
        [JobOutcome::Succeeded]
    );
    g.wait_batch(&producers).unwrap();
    // The last handles gone, every ended job is freed (SPEC D31).
    drop(last);
    drop(producers);
    assert_eq!(g.occupancy().nodes_used, 0);
    allocs
}

#[test]
fn q03_submit_with_65_dependencies_does_not_allocate() {
    assert_eq!(
        submit_allocations(65),
        0,
        "allocations in one submit of 65 dependencies"
    );
}

#[test]
fn q03_submit_with_1024_dependencies_does_not_allocate() {
    assert_eq!(
        submit_allocations(1024),
        0,
        "allocations in one submit of 1,024 dependencies"
    );
}

#[test]
fn q03_submit_with_64_dependencies_does_not_allocate() {
    assert_eq!(
        submit_allocations(64),
        0,
        "allocations in one submit of 64 dependencies"
    );
}

/// Builds a fan-out / fan-in DAG of 10,002 jobs top-down (the sink first, so every job has
/// its dependents when its handle goes): one source, 100 groups of 99 middle jobs on the
/// source and one collector on the group's middles, and a sink on the 100 collectors. Only
/// the sink's handle is kept. Keys from `base` on (fresh ones: a new dependent of a withdrawn
/// job's key would meet that cancelled job). Returns it.
fn wide_dag(g: &Graph, base: u64) -> fairway::graph::JobHandle {
    let admit = |key: u64, deps: &[Dependency]| match g.submit(&spec(base + key, deps)).unwrap() {
        Admission::Admitted(h) => h,
        other => panic!("key {key}: {other:?}"),
    };
    let on = |k: u64| Dependency {
        key: JobKey::new(base + k),
        gate: Gate::OnSuccess,
        pin: None,
    };
    let collectors: Vec<Dependency> = (0..100).map(|c| on(1_000_000 + c)).collect();
    let sink = admit(2_000_000, &collectors);
    for c in 0..100u64 {
        let middles: Vec<Dependency> = (0..99).map(|m| on(10_000 + c * 100 + m)).collect();
        drop(admit(1_000_000 + c, &middles));
        for m in 0..99u64 {
            drop(admit(10_000 + c * 100 + m, &[on(1)]));
        }
    }
    drop(admit(1, &[]));
    sink
}

/// SPEC D31: dropping the last handle of a DAG of 10^4 jobs cancels every job of it, frees
/// every node and edge, and allocates nothing (in a steady state: the second DAG, after one
/// cancellation warmed the graph's lists).
#[test]
fn d31_dropping_the_last_handle_of_a_10k_dag_frees_it_without_allocating() {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1)).unwrap();
    let g = Graph::builder(ledger.clone())
        .class(2)
        .nodes(10_100)
        .edges(20_200)
        .keys(20_400)
        .max_deps(128)
        .build()
        .unwrap();
    let mut timed = Vec::new();
    for round in 0..2 {
        let sink = wide_dag(&g, round * 10_000_000);
        assert_eq!(
            g.occupancy().nodes_used,
            10_002,
            "round {round}: the DAG is held"
        );
        let mut cancelled = false;
        let t = std::time::Instant::now();
        let allocs = count(|| cancelled = sink.cancel());
        timed.push(t.elapsed());
        assert!(
            cancelled,
            "round {round}: the sink was the DAG's only demand"
        );
        let o = g.occupancy();
        assert_eq!(
            (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
            (0, 0, 0, 0, 0),
            "round {round}: {o:?}"
        );
        assert!(
            g.try_next(ClassId(0)).is_none(),
            "round {round}: nothing runs"
        );
        assert!(
            ledger.usage().is_zero(),
            "round {round}: the source's permit is back"
        );
        if round == 1 {
            assert_eq!(allocs, 0, "dropping the DAG's last handle allocated");
        }
    }
    println!("dropping the last handle of 10,002 jobs: {:?}", timed);
}
