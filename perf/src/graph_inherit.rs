//! The graph suite's inheritance rows (SPEC D30, F36), both graph engines, one thread.
//!
//! * [`raise_chain`]: a chain of `depth` jobs whose root is queued behind a running job (one
//!   cell). One operation submits an urgent job (priority 9) on the chain's far end — its
//!   urgency reaches every job of the chain and the queued root is re-ordered in the scheduler
//!   in place — and supersedes it with `advance`, which lets the chain drop back. The ns per
//!   operation over `2 · depth` is the cost per level of one update.
//! * [`urgent_behind`]: one cell, [`BEHIND`] jobs of tenant 0 queued, then a job `p` of the same
//!   tenant and priority, then `u`, which depends on `p`. The executor runs jobs back to back;
//!   the latency is `u`'s submission to its start, and the score is how many jobs ran before
//!   it. `urgent`: `u` has priority 9, which `p` inherits (it is granted next); otherwise `u`
//!   has priority 0, nothing is inherited and `p` waits behind the backlog.

use fairway::oracle::GraphOn;
use std::time::{Duration, Instant};

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome, JobSpec,
};
use fairway::{ClassId, TenantId};
use fairway_bench_support::alloc::thread_allocs;
use fairway_bench_support::latency::Latency;
use fairway_bench_support::Measured;

const CPU: ClassId = ClassId(0);
/// Jobs queued ahead of the urgent job's dependency in [`urgent_behind`].
pub const BEHIND: usize = 1000;
/// The urgent job's key (far from the chain's and the backlog's).
const URGENT: u64 = 1 << 40;
/// The blocker's key: the running job that holds the one cell.
const BLOCKER: u64 = 1 << 41;

fn graph<E: GraphEngine>(nodes: u32) -> GraphOn<E> {
    // Room for BATCH stale edges on top of the live ones. Reserved whole (SPEC D51): each
    // timed operation leaves a stale edge, so a batch climbs to a new high-water mark of its
    // fresh graph, and the rows measure the raise and the drop, not the stores' growth (the
    // graph suite's growth row does).
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 2)).unwrap();
    Graph::builder(ledger)
        .class(1)
        .nodes(nodes)
        .edges(nodes)
        .keys(4 * nodes)
        .reserve(nodes, nodes, 4 * nodes)
        .max_deps(1)
        .build_with::<E>()
        .unwrap()
}

fn admit<E: GraphEngine>(
    g: &GraphOn<E>,
    key: u64,
    priority: u8,
    deps: &[Dependency],
) -> JobHandle<E> {
    let spec = JobSpec {
        key: JobKey::new(key),
        tenant: TenantId(0),
        class: CPU,
        priority,
        deadline: None,
        deps,
    };
    match g.submit(&spec).unwrap() {
        Admission::Admitted(h) => h,
        other => panic!("not admitted: {other:?}"),
    }
}

fn on(key: u64) -> [Dependency; 1] {
    [Dependency::on(JobKey::new(key), Gate::OnSuccess)]
}

/// The set-up of [`raise_chain`]: the graph, the running blocker, the chain's root handle and
/// the handles of the blocker and of the rest of the chain (held, so that every job of the
/// chain stays wanted; dropped with the graph, untimed).
type Chain<E> = (
    GraphOn<E>,
    fairway::graph::RunningJob,
    JobHandle<E>,
    Vec<JobHandle<E>>,
);

/// A graph with the running blocker and the chain of `depth`: the root handle, the tail key.
fn chain<E: GraphEngine>(depth: usize) -> Chain<E> {
    let g = graph::<E>(depth as u32 + 2 * BATCH as u32 + 16);
    let mut held = Vec::with_capacity(depth + 1);
    held.push(admit(&g, BLOCKER, 0, &[]));
    let running = g.try_next(CPU).expect("the blocker runs");
    let root = admit(&g, 0, 0, &[]);
    for k in 1..depth as u64 {
        held.push(admit(&g, k, 0, &on(k - 1)));
    }
    (g, running, root, held)
}

/// Operations per graph in [`raise_chain`]: a superseded demander's edge stays on the tail's
/// list until the tail ends (the edges are inert, and the walks step over them), so the graph
/// is rebuilt (untimed) after this many, and a walk meets at most this many stale edges.
const BATCH: u64 = 63;

/// See the module docs. One op is one raise and one drop through `depth` levels.
pub fn raise_chain<E: GraphEngine>(depth: usize, d: Duration) -> Measured {
    let tail = depth as u64 - 1;
    {
        // The row measures real work: the raise reaches the root, and the drop takes it back.
        let (g, running, root, _held) = chain::<E>(depth);
        let u = admit(&g, URGENT, 9, &on(tail));
        assert_eq!(
            g.effective(&root).unwrap().0,
            9,
            "the raise did not reach the root"
        );
        g.advance(JobKey::new(URGENT)).unwrap();
        assert!(g.outcome(&u).unwrap().is_some());
        drop(u);
        assert_eq!(
            g.effective(&root).unwrap().0,
            0,
            "the drop did not reach the root"
        );
        g.complete(running, JobOutcome::Succeeded).unwrap();
    }
    let (start, mut secs, mut ops, mut allocs) = (Instant::now(), 0.0, 0u64, 0u64);
    while ops == 0 || start.elapsed() < d {
        let (g, running, root, _held) = chain::<E>(depth);
        // Untimed: the first update of a graph grows its propagation buffers to this size.
        let u = admit(&g, URGENT, 9, &on(tail));
        g.advance(JobKey::new(URGENT)).unwrap();
        let _ = g.outcome(&u).unwrap();
        drop(u);
        let (t, before) = (Instant::now(), thread_allocs());
        for _ in 0..BATCH {
            let u = admit(&g, URGENT, 9, &on(tail));
            g.advance(JobKey::new(URGENT)).unwrap();
            // The superseded job's outcome is read and its handle dropped: that frees it.
            let _ = g.outcome(&u).unwrap();
            drop(u);
        }
        secs += t.elapsed().as_secs_f64();
        allocs += thread_allocs() - before;
        ops += BATCH;
        assert_eq!(g.effective(&root).unwrap().0, 0);
        g.complete(running, JobOutcome::Succeeded).unwrap();
    }
    Measured {
        ops_per_sec: ops as f64 / secs,
        latency: Latency::new(),
        allocs_per_op: allocs as f64 / ops as f64,
        score: None,
    }
}

/// See the module docs.
pub fn urgent_behind<E: GraphEngine>(urgent: bool, d: Duration) -> Measured {
    let (start, mut secs, mut ran) = (Instant::now(), 0.0, 0u64);
    let mut latency = Latency::new();
    let mut before_u = Vec::new();
    while before_u.is_empty() || start.elapsed() < d {
        let g = graph::<E>(BEHIND as u32 + 16);
        // Every job's handle is held until the graph's jobs have run (dropped untimed).
        let mut held = Vec::with_capacity(BEHIND + 2);
        held.push(admit(&g, BLOCKER, 0, &[]));
        let blocker = g.try_next(CPU).expect("the blocker runs");
        for k in 0..BEHIND as u64 {
            held.push(admit(&g, k, 0, &[]));
        }
        let p = BEHIND as u64;
        held.push(admit(&g, p, 0, &[]));
        let t = Instant::now();
        let _u = admit(&g, URGENT, if urgent { 9 } else { 0 }, &on(p));
        g.complete(blocker, JobOutcome::Succeeded).unwrap();
        let mut n = 0u64;
        loop {
            let job = g.try_next(CPU).expect("work left");
            let is_u = job.key() == JobKey::new(URGENT);
            if is_u {
                latency.record(t.elapsed().as_nanos() as u64);
                before_u.push(n);
            }
            g.complete(job, JobOutcome::Succeeded).unwrap();
            ran += 1;
            if is_u {
                break;
            }
            n += 1;
        }
        secs += t.elapsed().as_secs_f64();
        while let Some(job) = g.try_next(CPU) {
            g.complete(job, JobOutcome::Succeeded).unwrap();
            ran += 1;
        }
    }
    before_u.sort_unstable();
    Measured {
        ops_per_sec: ran as f64 / secs,
        latency,
        allocs_per_op: 0.0,
        score: Some(before_u[before_u.len() / 2] as f64),
    }
}
