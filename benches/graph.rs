//! The dependency graph's hot paths on each engine: the lock-free graph and the same rules under
//! one std mutex (PERF P8, P9). Single thread, same run, so the ratio is what matters.
//!
//! * `graph/P8 complete fan-out 4 + drain`: a running producer with four waiting dependents
//!   completes; its four dependents, now ready, are handed to the scheduler (ledger permit and
//!   pull-mode submit) and pulled. One iteration is one producer.
//! * `graph/P8 complete fan-out 4 + run the 4`: the same, and the four are completed too.
//! * `graph/P9 submit with 4 edges`: submitting a job whose four dependencies are live, running
//!   producers (four edges pushed onto their dependent stacks). One iteration is one submit.
//!
//! Keys are never freed in this part of the graph, so each batch of iterations runs on a graph
//! rebuilt when its key table fills; building, the producers' set-up and the clean-up after a
//! batch are outside the timed region.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use common::criterion;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome, JobSpec,
    RunningJob,
};
use fairway::{ClassId, LockFreeGraph, MutexGraph, TenantId};

const CPU: ClassId = ClassId(0);
/// Producers (P8) or dependents (P9) per batch.
const BATCH: u64 = 128;
const KEYS: u32 = 1 << 16;

fn fresh<E: GraphEngine>() -> Graph<E> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    Graph::builder(ledger)
        .class(1024)
        .nodes(1024)
        .edges(4096)
        .keys(KEYS)
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
        deps,
    }
}

fn admit<E: GraphEngine>(g: &Graph<E>, key: u64, deps: &[Dependency]) -> JobHandle {
    match g.submit(&spec(key, deps)).unwrap() {
        Admission::Admitted(h) => h,
        other => panic!("not admitted: {other:?}"),
    }
}

/// A graph and the next unused key; rebuilt when `need` more keys would not fit.
struct Keys<E: GraphEngine> {
    g: Graph<E>,
    next: u64,
}

impl<E: GraphEngine> Keys<E> {
    fn new() -> Self {
        Self {
            g: fresh(),
            next: 0,
        }
    }

    fn take(&mut self, need: u64) -> u64 {
        if self.next + need > u64::from(KEYS) * 3 / 4 {
            *self = Self::new();
        }
        let k = self.next;
        self.next += need;
        k
    }
}

fn collect<E: GraphEngine>(g: &Graph<E>, handles: &mut Vec<JobHandle>) {
    while let Some(job) = g.try_next(CPU) {
        g.complete(job, JobOutcome::Succeeded).unwrap();
    }
    for h in handles.drain(..) {
        assert!(g.take_outcome(h).unwrap().is_some());
    }
}

fn p8<E: GraphEngine>(iters: u64) -> Duration {
    p8_with::<E>(iters, false)
}

fn p8_and_run<E: GraphEngine>(iters: u64) -> Duration {
    p8_with::<E>(iters, true)
}

/// One producer per iteration completes; its four released dependents are pulled from the
/// scheduler and, if `run_them`, completed inside the timed region too.
fn p8_with<E: GraphEngine>(iters: u64, run_them: bool) -> Duration {
    let mut keys = Keys::<E>::new();
    let mut handles = Vec::with_capacity(BATCH as usize * 5);
    let mut running: Vec<RunningJob> = Vec::with_capacity(BATCH as usize);
    let mut pulled: Vec<RunningJob> = Vec::with_capacity(BATCH as usize * 4);
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = BATCH.min(iters - done);
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
            }];
            for c in 0..4 {
                handles.push(admit(&g, base + n + p * 4 + c, &dep));
            }
        }
        let start = Instant::now();
        for producer in running.drain(..) {
            g.complete(producer, JobOutcome::Succeeded).unwrap();
            for _ in 0..4 {
                let job = g.try_next(CPU).expect("a released dependent");
                if run_them {
                    g.complete(black_box(job), JobOutcome::Succeeded).unwrap();
                } else {
                    pulled.push(black_box(job));
                }
            }
        }
        total += start.elapsed();
        for job in pulled.drain(..) {
            g.complete(job, JobOutcome::Succeeded).unwrap();
        }
        collect(&g, &mut handles);
        done += n;
    }
    total
}

fn p9<E: GraphEngine>(iters: u64) -> Duration {
    let mut keys = Keys::<E>::new();
    let mut handles = Vec::with_capacity(BATCH as usize + 4);
    let mut running: Vec<RunningJob> = Vec::with_capacity(4);
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = BATCH.min(iters - done);
        let base = keys.take(n + 4);
        let g = keys.g.clone();
        for p in 0..4 {
            handles.push(admit(&g, base + p, &[]));
            running.push(g.try_next(CPU).expect("a free cell"));
        }
        let deps = [
            Dependency {
                key: JobKey::new(base),
                gate: Gate::OnSuccess,
            },
            Dependency {
                key: JobKey::new(base + 1),
                gate: Gate::Sequential,
            },
            Dependency {
                key: JobKey::new(base + 2),
                gate: Gate::OnSuccess,
            },
            Dependency {
                key: JobKey::new(base + 3),
                gate: Gate::Sequential,
            },
        ];
        let start = Instant::now();
        for i in 0..n {
            let out = g.submit(&spec(base + 4 + i, &deps));
            if let Ok(Admission::Admitted(h)) = black_box(out) {
                handles.push(h);
            }
        }
        total += start.elapsed();
        assert_eq!(handles.len() as u64, n + 4, "every submit admitted");
        for job in running.drain(..) {
            g.complete(job, JobOutcome::Succeeded).unwrap();
        }
        collect(&g, &mut handles);
        done += n;
    }
    total
}

fn graph(c: &mut Criterion) {
    let mut g = c.benchmark_group("graph/P8 complete fan-out 4 + drain");
    g.throughput(Throughput::Elements(1));
    g.bench_function("lock-free", |b| b.iter_custom(p8::<LockFreeGraph>));
    g.bench_function("std-mutex", |b| b.iter_custom(p8::<MutexGraph>));
    g.finish();
    let mut g = c.benchmark_group("graph/P8 complete fan-out 4 + run the 4");
    g.throughput(Throughput::Elements(1));
    g.bench_function("lock-free", |b| b.iter_custom(p8_and_run::<LockFreeGraph>));
    g.bench_function("std-mutex", |b| b.iter_custom(p8_and_run::<MutexGraph>));
    g.finish();
    let mut g = c.benchmark_group("graph/P9 submit with 4 edges");
    g.throughput(Throughput::Elements(1));
    g.bench_function("lock-free", |b| b.iter_custom(p9::<LockFreeGraph>));
    g.bench_function("std-mutex", |b| b.iter_custom(p9::<MutexGraph>));
    g.finish();
}

criterion_group! {
    name = benches;
    config = criterion();
    targets = graph
}
criterion_main!(benches);
