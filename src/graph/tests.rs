//! Unit tests of the graph at its bounds and of its wait/wake handshake, on both graph engines
//! where the rule is the engines' (SPEC D04, D14, D15). The handshake test reads the count of
//! sleeping waiters, so it can wake the waiter only once it is known to sleep.

use super::{
    Admission, Dependency, Gate, Graph, GraphEngine, GraphOn, JobKey, JobOutcome, JobSpec,
    LockFreeGraph, MutexGraph,
};
use crate::admission::{ClassSpec, Ledger, LedgerConfig};
use crate::error::Reason;
use crate::ids::{ClassId, TenantId};
use crate::sync::Ordering;
use std::time::{Duration, Instant};

const CPU: ClassId = ClassId(0);
/// How long a test waits for a thread before it fails naming what is stuck.
const LIMIT: Duration = Duration::from_secs(20);

fn graph<E: GraphEngine>(nodes: u32, edges: u32, keys: u32, max_deps: u32) -> GraphOn<E> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    Graph::builder(ledger)
        .class(4)
        .nodes(nodes)
        .edges(edges)
        .keys(keys)
        .max_deps(max_deps)
        .build_with::<E>()
        .unwrap()
}

fn spec(key: u64, deps: &[Dependency]) -> JobSpec<'_> {
    JobSpec {
        key: JobKey::new(key),
        tenant: TenantId(0),
        class: CPU,
        priority: 0,
        deadline: None,
        deps,
    }
}

fn dep(key: u64) -> Dependency {
    Dependency {
        key: JobKey::new(key),
        gate: Gate::Sequential,
        pin: None,
    }
}

/// A job that discovers dependencies up to exactly `max_deps` in all is admitted; one more is
/// refused `too-many-dependencies`.
fn discovery_up_to_max_deps<E: GraphEngine>() {
    let g = graph::<E>(4, 8, 16, 3);
    let on_1 = [dep(1)];
    let Ok(Admission::Admitted(_producer)) = g.submit(&spec(1, &[])) else {
        panic!("producer not admitted");
    };
    let Ok(Admission::Admitted(job)) = g.submit(&spec(2, &on_1)) else {
        panic!("job not admitted");
    };
    let p = g.try_next(CPU).expect("the producer is ready");
    g.complete(p, JobOutcome::Succeeded).unwrap();
    let running = g.try_next(CPU).expect("the job is ready");
    assert_eq!(running.id(), job.id());
    // One known dependency and two new ones: exactly `max_deps`.
    let r = g.discover(&running, &[dep(3), dep(4)]);
    assert!(
        matches!(r, Ok(Admission::Admitted(()))),
        "a discovery reaching exactly max_deps (3) was refused: {r:?}"
    );
    let more = g.discover(&running, &[dep(5)]).unwrap_err();
    assert_eq!(more.reason(), Reason::TooManyDependencies);
    assert_eq!(
        g.occupancy().edges_used,
        2,
        "the refused discovery took an edge"
    );
}

#[test]
fn d14_discovery_up_to_exactly_max_deps_is_admitted_and_one_more_refused_lock_free() {
    discovery_up_to_max_deps::<LockFreeGraph>();
}

#[test]
fn d14_discovery_up_to_exactly_max_deps_is_admitted_and_one_more_refused_mutex() {
    discovery_up_to_max_deps::<MutexGraph>();
}

/// A job waits on the keys `1..=n` (none has a producer); a job on key `n` depending on it
/// closes a cycle through its last dependency and is refused, whatever the position.
fn cycle_through_the_last_of_many_dependencies<E: GraphEngine>(n: u64) {
    let g = graph::<E>(4, n as u32 + 4, 2 * n as u32 + 16, n as u32);
    let deps: Vec<Dependency> = (1..=n).map(dep).collect();
    let Ok(Admission::Admitted(_waiting)) = g.submit(&spec(0, &deps)) else {
        panic!("the job with {n} dependencies was not admitted");
    };
    let back = [dep(0)];
    for k in [1, n / 2, n] {
        match g.submit(&spec(k, &back)) {
            Err(e) => assert_eq!(e.reason(), Reason::Cycle),
            Ok(a) => panic!(
                "a job on key {k} depending on the job that waits on it (dependency {k} of {n}) \
                 was admitted, a cycle: {a:?}"
            ),
        }
    }
    assert_eq!(g.occupancy().nodes_used, 1, "a refused job kept its node");
}

#[test]
fn d15_a_cycle_through_the_65th_dependency_is_refused_lock_free() {
    cycle_through_the_last_of_many_dependencies::<LockFreeGraph>(65);
}

#[test]
fn d15_a_cycle_through_the_65th_dependency_is_refused_mutex() {
    cycle_through_the_last_of_many_dependencies::<MutexGraph>(65);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; the 65-dependency tests run the same code past one word"
)]
fn d15_a_cycle_through_the_1024th_dependency_is_refused_lock_free() {
    cycle_through_the_last_of_many_dependencies::<LockFreeGraph>(1024);
}

/// A graph whose node store is full refuses the next submit `Backpressured`, changing nothing,
/// and serves it once a slot is collected (the ended job's outcome read and its handle dropped).
fn full_node_store_backpressures<E: GraphEngine>() {
    let g = graph::<E>(2, 2, 8, 1);
    let mut held = Vec::new();
    for k in 1..=2 {
        let Ok(Admission::Admitted(h)) = g.submit(&spec(k, &[])) else {
            panic!("job {k} of 2 not admitted");
        };
        held.push(h);
    }
    let r = g.submit(&spec(3, &[]));
    assert!(
        matches!(r, Ok(Admission::Backpressured)),
        "a submit on a full node store (2 of 2) was not backpressured: {r:?}"
    );
    assert_eq!(g.occupancy().nodes_used, 2);
    let running = g.try_next(CPU).expect("a job is ready");
    let done = running.id();
    g.complete(running, JobOutcome::Succeeded).unwrap();
    let at = held
        .iter()
        .position(|h| h.id() == done)
        .expect("the job that ran is one of the two");
    let done = held.swap_remove(at);
    assert_eq!(g.outcome(&done).unwrap(), Some(JobOutcome::Succeeded));
    // Its last handle dropped: the ended job's slot is freed (collected).
    drop(done);
    let Ok(Admission::Admitted(_third)) = g.submit(&spec(3, &[])) else {
        panic!("the submit after a slot was collected was not admitted");
    };
    assert_eq!(g.occupancy().nodes_used, 2);
}

#[test]
fn d05_a_full_node_store_backpressures_and_serves_a_freed_slot_lock_free() {
    full_node_store_backpressures::<LockFreeGraph>();
}

#[test]
fn d05_a_full_node_store_backpressures_and_serves_a_freed_slot_mutex() {
    full_node_store_backpressures::<MutexGraph>();
}

/// Spins until `ok`, failing with `what` past [`LIMIT`].
fn spin_until(what: &str, ok: impl Fn() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < LIMIT, "stuck: {what}");
        std::thread::yield_now();
    }
}

/// One thread sleeps in `wait_batch` (it registered as a sleeper; the test waits for that
/// before it completes the job): the completion wakes it, and it returns the outcome.
#[test]
fn d04_wait_batch_with_one_sleeper_is_woken_by_the_completion() {
    let g = graph::<LockFreeGraph>(2, 2, 4, 1);
    let Ok(Admission::Admitted(h)) = g.submit(&spec(1, &[])) else {
        panic!("not admitted");
    };
    let running = g.try_next(CPU).expect("the job is ready");
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let g = g.clone();
        std::thread::spawn(move || {
            let _ = tx.send(g.wait_batch(&[h]));
        })
    };
    spin_until("the waiter never registered as a sleeper", || {
        g.inner.sleepers.load(Ordering::Relaxed) == 1
    });
    g.complete(running, JobOutcome::Succeeded).unwrap();
    match rx.recv_timeout(LIMIT) {
        Ok(r) => assert_eq!(r.unwrap(), [JobOutcome::Succeeded]),
        Err(_) => panic!(
            "wait_batch stuck: its one sleeper was not woken by the completion of its job \
             ({LIMIT:?})"
        ),
    }
    waiter.join().unwrap();
    assert_eq!(g.inner.sleepers.load(Ordering::Relaxed), 0);
    assert_eq!(g.occupancy().nodes_used, 0);
}
