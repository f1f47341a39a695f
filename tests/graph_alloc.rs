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
/// counting only the submit; then runs everything, so the graph is left empty.
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
