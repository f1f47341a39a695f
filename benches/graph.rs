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
//! The workloads are `fairway_bench_support::graph`'s, the same code `fairway-perf --suite
//! graph` runs: batches of set-up, a timed region, and clean-up outside it. They run whole
//! batches, so an iteration count is met or exceeded; the time reported for `iters` iterations
//! is `iters` times the measured time per operation.

mod common;

use fairway::oracle::{LockFreeGraph, MutexGraph};
use std::time::Duration;

use common::criterion;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use fairway_bench_support::graph::{p8_and_run_until, p8_until, p9_until, Until};
use fairway_bench_support::Measured;

/// Adapts a workload measured in operations per second to criterion's `iter_custom`.
fn timed(workload: fn(Until) -> Measured) -> impl FnMut(u64) -> Duration {
    move |iters| {
        if iters == 0 {
            return Duration::ZERO;
        }
        let m = workload(Until::Ops(iters));
        Duration::from_secs_f64(iters as f64 / m.ops_per_sec)
    }
}

fn graph(c: &mut Criterion) {
    let mut g = c.benchmark_group("graph/P8 complete fan-out 4 + drain");
    g.throughput(Throughput::Elements(1));
    g.bench_function("lock-free", |b| {
        b.iter_custom(timed(p8_until::<LockFreeGraph>))
    });
    g.bench_function("std-mutex", |b| {
        b.iter_custom(timed(p8_until::<MutexGraph>))
    });
    g.finish();
    let mut g = c.benchmark_group("graph/P8 complete fan-out 4 + run the 4");
    g.throughput(Throughput::Elements(1));
    g.bench_function("lock-free", |b| {
        b.iter_custom(timed(p8_and_run_until::<LockFreeGraph>))
    });
    g.bench_function("std-mutex", |b| {
        b.iter_custom(timed(p8_and_run_until::<MutexGraph>))
    });
    g.finish();
    let mut g = c.benchmark_group("graph/P9 submit with 4 edges");
    g.throughput(Throughput::Elements(1));
    g.bench_function("lock-free", |b| {
        b.iter_custom(timed(p9_until::<LockFreeGraph>))
    });
    g.bench_function("std-mutex", |b| {
        b.iter_custom(timed(p9_until::<MutexGraph>))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = criterion();
    targets = graph
}
criterion_main!(benches);
