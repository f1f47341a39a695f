//! The scheduler's cycle on the engine (the tenant ring) and on the same policy under a
//! std or parking_lot mutex (PERF P1, P3, P13).
//!
//! Groups (16 tenants, priorities 0..4, every third request with a deadline):
//! * `scheduler/1-thread queued cycle`: one cell held, 16 requests waiting; each iteration
//!   releases the cell, which grants the request the policy picks, accepts the grant and
//!   enqueues a fresh request in its place (PERF P1; `fairway_bench_support::sched::Cycle`).
//! * `scheduler/1-thread fast path`: `try_enqueue` granting a free cell at once, then release.
//! * `scheduler/1-thread admit→refund`: the P13 row, the engine only, beside one uncontended CAS.
//! * `scheduler/2-thread submit+next`: pull mode on 4 cells; thread 0 submits, thread 1 takes
//!   each job with `try_next` and releases its cell; an iteration is one job (PERF P3).

mod common;

use fairway::oracle::{Baseline, ParkingLotMutex, Ring, StdMutex};
use std::hint::black_box;

use common::{bench_backend, criterion, time_op};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use fairway::ClassId;
use fairway_bench_support::sched::{
    AdmitRefund, Cycle, Engine, FastPath, Fixture, UncontendedCas, TENANTS,
};
use fairway_bench_support::{Named, SingleOp};

/// Thread 0 submits `iters` pull-mode requests (retrying while the queue is full); thread 1
/// takes and releases them.
fn submit_next<M: Engine>(f: &Fixture<M>, thread: usize, _threads: usize, iters: u64) {
    let ids = f.ids();
    if thread == 0 {
        for i in 0..iters {
            // A refused request gives its permit back (refunded on drop); admit it again.
            while f.sched.submit(f.request(i, i % ids), i).is_err() {
                std::hint::spin_loop();
            }
        }
    } else {
        let mut left = iters;
        while left > 0 {
            match f.sched.try_next(ClassId(0)).expect("class 0 exists") {
                Some(job) => {
                    black_box(job.payload);
                    job.assignment.release();
                    left -= 1;
                }
                None => std::hint::spin_loop(),
            }
        }
    }
}

/// Registers engine `M` in a group.
type Add = fn(&mut BenchmarkGroup<'_, WallTime>);

fn cycle<M: Engine>(g: &mut BenchmarkGroup<'_, WallTime>) {
    g.bench_function(M::NAME, |b| {
        b.iter_custom(|iters| time_op(iters, |run| run(&mut Cycle::new(&Cycle::<M>::fixture()))));
    });
}

fn fast<M: Engine>(g: &mut BenchmarkGroup<'_, WallTime>) {
    g.bench_function(M::NAME, |b| {
        b.iter_custom(|iters| time_op(iters, |run| run(&mut FastPath::<M>::new())));
    });
}

fn pull<M: Engine>(g: &mut BenchmarkGroup<'_, WallTime>) {
    bench_backend::<Fixture<M>>(
        g,
        2,
        || Fixture::new(4, 4096, u64::from(TENANTS)),
        submit_next::<M>,
    );
}

/// One group of `adds`.
fn group(c: &mut Criterion, name: &str, adds: &[Add]) {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(1));
    adds.iter().for_each(|add| add(&mut g));
    g.finish();
}

/// Registers single operation `O` in `group`.
fn single<O: SingleOp + Named + Default>(g: &mut BenchmarkGroup<'_, WallTime>) {
    g.bench_function(O::NAME, |b| {
        b.iter_custom(|iters| time_op(iters, |run| run(&mut O::default())));
    });
}

fn scheduler(c: &mut Criterion) {
    type Std = Baseline<StdMutex>;
    type Pl = Baseline<ParkingLotMutex>;
    let cycles: [Add; 3] = [cycle::<Ring>, cycle::<Std>, cycle::<Pl>];
    group(c, "scheduler/1-thread queued cycle", &cycles);
    group(
        c,
        "scheduler/1-thread fast path",
        &[fast::<Ring>, fast::<Std>, fast::<Pl>],
    );
    group(
        c,
        "scheduler/1-thread admit→refund",
        &[single::<AdmitRefund>, single::<UncontendedCas>],
    );
    group(
        c,
        "scheduler/2-thread submit+next",
        &[pull::<Ring>, pull::<Std>, pull::<Pl>],
    );
}

criterion_group! {
    name = benches;
    config = criterion();
    targets = scheduler
}
criterion_main!(benches);
