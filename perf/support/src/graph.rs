//! The graph suite's workloads (PERF P8, P9): the dependency graph's hot paths on the
//! lock-free graph and on the mutex graph (the same rules under one std mutex), one thread.
//!
//! * P8: a running producer with four waiting dependents completes; the four, now ready, are
//!   handed to the scheduler (ledger permit, pull-mode submit) and pulled by the executor. One
//!   operation is one producer.
//! * P9: submitting a job whose four dependencies are live, running producers (four edges
//!   pushed onto their dependents' stacks). One operation is one submit.
//!
//! The perf harness's graph suite and `benches/graph.rs` both run these.
//!
//! Every op names fresh keys and none is removed (removal would add its own cost to the timed
//! region; the key-churn row measures it), so batches run on a graph rebuilt when its key table
//! fills. Building, setting up a batch's producers and dependents, and cleaning up
//! after a batch are outside the timed region; allocations are counted inside it only.

use fairway::oracle::GraphOn;
use std::time::{Duration, Instant};

use crate::alloc::thread_allocs;
use crate::Measured;
use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome, JobSpec,
    RunningJob,
};
use fairway::{ClassId, TenantId};

const CPU: ClassId = ClassId(0);
const KEYS: u32 = 1 << 16;
/// Cells of the graph's one class: a batch of P8 holds one per producer and four per producer
/// for the dependents it pulls, so [`P8_BATCH`] × 5 of them.
pub const CELLS: u32 = 64;
/// Producers per P8 batch.
const P8_BATCH: u64 = (CELLS / 5) as u64;
/// Dependents per P9 batch.
const P9_BATCH: u64 = 128;

fn fresh<E: GraphEngine>() -> GraphOn<E> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    Graph::builder(ledger)
        .class(CELLS)
        .nodes(1024)
        .edges(4096)
        .keys(KEYS)
        // Backed whole at build: P8 and P9 measure the steady state (growth has its own row).
        .reserve(1024, 4096, KEYS)
        .max_deps(4)
        .build_with::<E>()
        .unwrap()
}

fn spec(key: u64, deps: &[Dependency]) -> JobSpec<'_> {
    JobSpec {
        key: JobKey::new(key),
        tenant: TenantId((key % 4) as u32),
        class: CPU,
        priority: 0,
        deadline: None,
        deps,
    }
}

fn admit<E: GraphEngine>(g: &GraphOn<E>, key: u64, deps: &[Dependency]) -> JobHandle<E> {
    match g.submit(&spec(key, deps)).unwrap() {
        Admission::Admitted(h) => h,
        other => panic!("not admitted: {other:?}"),
    }
}

/// A graph and the next unused key; rebuilt when `need` more keys would not fit.
struct Keys<E: GraphEngine> {
    g: GraphOn<E>,
    next: u64,
}

impl<E: GraphEngine> Keys<E> {
    fn take(&mut self, need: u64) -> u64 {
        if self.next + need > u64::from(KEYS) * 3 / 4 {
            self.g = fresh();
            self.next = 0;
        }
        let k = self.next;
        self.next += need;
        k
    }
}

fn collect<E: GraphEngine>(g: &GraphOn<E>, handles: &mut Vec<JobHandle<E>>) {
    while let Some(job) = g.try_next(CPU) {
        g.complete(job, JobOutcome::Succeeded).unwrap();
    }
    // Each handle is dropped once its outcome is read: that frees its node.
    for h in handles.drain(..) {
        assert!(g.outcome(&h).unwrap().is_some());
        drop(h);
    }
}

/// How long a workload runs: timed work, or operations (for instruction counts).
#[derive(Clone, Copy, Debug)]
pub enum Until {
    /// About this much timed work.
    Time(Duration),
    /// At least this many operations.
    Ops(u64),
}

/// Runs batches until `until`; `batch(keys, handles)` returns the timed duration, operations
/// and allocations of one batch.
fn measure<E: GraphEngine>(
    until: Until,
    mut batch: impl FnMut(&mut Keys<E>, &mut Vec<JobHandle<E>>) -> (Duration, u64, u64),
) -> Measured {
    let mut keys = Keys {
        g: fresh(),
        next: 0,
    };
    let mut handles = Vec::with_capacity(1024);
    let (mut timed, mut ops, mut allocs) = (Duration::ZERO, 0u64, 0u64);
    while match until {
        Until::Time(d) => timed < d,
        Until::Ops(n) => ops < n,
    } {
        let (t, n, a) = batch(&mut keys, &mut handles);
        timed += t;
        ops += n;
        allocs += a;
    }
    Measured {
        ops_per_sec: ops as f64 / timed.as_secs_f64(),
        allocs_per_op: allocs as f64 / ops as f64,
        ..Measured::default()
    }
}

/// P8 on engine `E` for about `run_for`.
pub fn p8<E: GraphEngine>(run_for: Duration) -> Measured {
    p8_until::<E>(Until::Time(run_for))
}

/// P9 on engine `E` for about `run_for`.
pub fn p9<E: GraphEngine>(run_for: Duration) -> Measured {
    p9_until::<E>(Until::Time(run_for))
}

/// P8's timed region: complete each producer and pull its four released dependents (and, with
/// `RUN`, complete them too). Not inlined, so callgrind can count exactly this
/// (`perf/callgrind.sh graph-p8-...`).
#[inline(never)]
fn p8_timed<E: GraphEngine, const RUN: bool>(
    g: &GraphOn<E>,
    running: &mut Vec<RunningJob>,
    pulled: &mut Vec<RunningJob>,
) {
    for producer in running.drain(..) {
        g.complete(producer, JobOutcome::Succeeded).unwrap();
        for _ in 0..4 {
            let job = std::hint::black_box(g.try_next(CPU).expect("a released dependent"));
            if RUN {
                g.complete(job, JobOutcome::Succeeded).unwrap();
            } else {
                pulled.push(job);
            }
        }
    }
}

/// P9's timed region: `n` submits with the four dependencies `deps`.
#[inline(never)]
fn p9_timed<E: GraphEngine>(
    g: &GraphOn<E>,
    base: u64,
    n: u64,
    deps: &[Dependency],
    handles: &mut Vec<JobHandle<E>>,
) {
    for i in 0..n {
        if let Ok(Admission::Admitted(h)) = std::hint::black_box(g.submit(&spec(base + i, deps))) {
            handles.push(h);
        }
    }
}

/// P8 on engine `E` until `until`.
pub fn p8_until<E: GraphEngine>(until: Until) -> Measured {
    p8_with::<E, false>(until)
}

/// P8 with the four released dependents also run (completed) inside the timed region.
pub fn p8_and_run_until<E: GraphEngine>(until: Until) -> Measured {
    p8_with::<E, true>(until)
}

fn p8_with<E: GraphEngine, const RUN: bool>(until: Until) -> Measured {
    let mut running: Vec<RunningJob> = Vec::with_capacity(P8_BATCH as usize);
    let mut pulled: Vec<RunningJob> = Vec::with_capacity(P8_BATCH as usize * 4);
    measure::<E>(until, |keys, handles| {
        let n = P8_BATCH;
        let base = keys.take(n * 5);
        let g = keys.g.clone();
        for p in 0..n {
            handles.push(admit(&g, base + p, &[]));
            running.push(g.try_next(CPU).expect("a free cell"));
        }
        for p in 0..n {
            let dep = [Dependency {
                key: JobKey::new(base + p),
                gate: Gate::OnSuccess,
                pin: None,
            }];
            for c in 0..4 {
                handles.push(admit(&g, base + n + p * 4 + c, &dep));
            }
        }
        let (start, before) = (Instant::now(), thread_allocs());
        p8_timed::<E, RUN>(&g, &mut running, &mut pulled);
        let (t, a) = (start.elapsed(), thread_allocs() - before);
        for job in pulled.drain(..) {
            g.complete(job, JobOutcome::Succeeded).unwrap();
        }
        collect(&g, handles);
        (t, n, a)
    })
}

/// P9 on engine `E` until `until`.
pub fn p9_until<E: GraphEngine>(until: Until) -> Measured {
    let mut running: Vec<RunningJob> = Vec::with_capacity(4);
    measure::<E>(until, |keys, handles| {
        let n = P9_BATCH;
        let base = keys.take(n + 4);
        let g = keys.g.clone();
        for p in 0..4 {
            handles.push(admit(&g, base + p, &[]));
            running.push(g.try_next(CPU).expect("a free cell"));
        }
        let gates = [Gate::OnSuccess, Gate::Sequential];
        let deps: [Dependency; 4] = std::array::from_fn(|i| Dependency {
            key: JobKey::new(base + i as u64),
            gate: gates[i % 2],
            pin: None,
        });
        let (start, before) = (Instant::now(), thread_allocs());
        p9_timed(&g, base + 4, n, &deps, handles);
        let (t, a) = (start.elapsed(), thread_allocs() - before);
        assert_eq!(handles.len() as u64, n + 4, "every submit admitted");
        for job in running.drain(..) {
            g.complete(job, JobOutcome::Succeeded).unwrap();
        }
        collect(&g, handles);
        (t, n, a)
    })
}
