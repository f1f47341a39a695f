//! The scheduler's cycle on each engine: lock-free, and the same policy under a std or
//! parking_lot mutex (PERF P1, P3).
//!
//! Groups (16 tenants, priorities 0..4, every third request with a deadline):
//! * `scheduler/1-thread queued cycle`: one cell is held; a request is enqueued behind it (it
//!   queues and goes through the policy), the held cell is released, which grants the queued
//!   request, and its future is polled to accept the grant; it becomes the held one (PERF P1).
//! * `scheduler/1-thread fast path`: `try_enqueue` granting a free cell at once, then release.
//! * `scheduler/2-thread submit+next`: pull mode on 4 cells; thread 0 submits, thread 1 takes
//!   each job with `try_next` and releases its cell; an iteration is one job (PERF P3).

mod common;

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use common::sched::{Engine, Fixture, TENANTS};
use common::{bench_backend, criterion};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use fairway::{Baseline, ClassId, LockFree, ParkingLotMutex, StdMutex};

/// Queue bound of every fixture.
const QUEUE: u32 = 4096;

/// A measured workload: a body generic over the engine.
trait Workload {
    /// Group name in criterion's report.
    const GROUP: &'static str;
    /// Threads the body runs on.
    const THREADS: usize;
    /// Cells in the class.
    const CELLS: u32;
    /// The body, instantiated for engine `M`.
    fn body<M: Engine>(f: &Fixture<M>, thread: usize, threads: usize, iters: u64);
}

/// Enqueue behind the held cell → release → grant → accept, `iters` times.
struct QueuedCycle;

impl Workload for QueuedCycle {
    const GROUP: &'static str = "scheduler/1-thread queued cycle";
    const THREADS: usize = 1;
    const CELLS: u32 = 1;
    fn body<M: Engine>(f: &Fixture<M>, _thread: usize, _threads: usize, iters: u64) {
        let mut cx = Context::from_waker(Waker::noop());
        let ids = f.ids();
        let mut held = f
            .sched
            .try_enqueue(f.request(0, 0))
            .expect("the cell is free");
        for i in 1..=iters {
            let mut queued = pin!(f.sched.enqueue(f.request(i, i % ids)));
            assert!(
                queued.as_mut().poll(&mut cx).is_pending(),
                "the only cell is held"
            );
            held.release();
            held = match queued.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(a)) => a,
                other => panic!("release did not grant the queued request: {other:?}"),
            };
        }
        held.release();
    }
}

/// `try_enqueue` on a free cell, then release, `iters` times.
struct FastPath;

impl Workload for FastPath {
    const GROUP: &'static str = "scheduler/1-thread fast path";
    const THREADS: usize = 1;
    const CELLS: u32 = 1;
    fn body<M: Engine>(f: &Fixture<M>, _thread: usize, _threads: usize, iters: u64) {
        let ids = f.ids();
        for i in 0..iters {
            let a = f
                .sched
                .try_enqueue(f.request(i, i % ids))
                .expect("the cell is free");
            black_box(a.cell());
            a.release();
        }
    }
}

/// Thread 0 submits `iters` pull-mode requests (retrying while the queue is full); thread 1
/// takes and releases them.
struct ProducerExecutor;

impl Workload for ProducerExecutor {
    const GROUP: &'static str = "scheduler/2-thread submit+next";
    const THREADS: usize = 2;
    const CELLS: u32 = 4;
    fn body<M: Engine>(f: &Fixture<M>, thread: usize, _threads: usize, iters: u64) {
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
}

/// Registers workload `W` for engine `M` in `group`.
fn add<M: Engine, W: Workload>(group: &mut BenchmarkGroup<'_, WallTime>) {
    bench_backend::<Fixture<M>>(
        group,
        W::THREADS,
        || Fixture::new(W::CELLS, QUEUE, u64::from(TENANTS)),
        W::body::<M>,
    );
}

/// One criterion group running workload `W` on every engine.
fn group<W: Workload>(c: &mut Criterion) {
    let mut g = c.benchmark_group(W::GROUP);
    g.throughput(Throughput::Elements(1));
    add::<LockFree, W>(&mut g);
    add::<Baseline<StdMutex>, W>(&mut g);
    add::<Baseline<ParkingLotMutex>, W>(&mut g);
    g.finish();
}

fn scheduler(c: &mut Criterion) {
    group::<QueuedCycle>(c);
    group::<FastPath>(c);
    group::<ProducerExecutor>(c);
}

criterion_group! {
    name = benches;
    config = criterion();
    targets = scheduler
}
criterion_main!(benches);
