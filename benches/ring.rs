//! Bounded MPMC ring: fairway's `Ring` against `crossbeam_queue::ArrayQueue` and a
//! `VecDeque` behind a std or parking_lot mutex.
//!
//! Groups:
//! * `ring/1-thread push+pop`: one thread pushes then pops one value per iteration.
//! * `ring/2-thread transfer`: one producer pushes `iters` values, one consumer pops them; an
//!   iteration is one value moved.

mod common;

use std::hint::black_box;

use common::bench_backend;
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use fairway::internals::Ring;
use fairway_bench_support::ring::{ParkingLotDeque, Queue as RingBackend, StdDeque, CAPACITY};

/// A measured workload: a body generic over the backend.
trait Workload {
    /// Group name in criterion's report.
    const GROUP: &'static str;
    /// Threads the body runs on.
    const THREADS: usize;
    /// The body, instantiated for backend `B`.
    fn body<B: RingBackend>(q: &B, thread: usize, threads: usize, iters: u64);
}

/// One thread: push one value and pop it back, `iters` times.
struct PushPopPair;

impl Workload for PushPopPair {
    const GROUP: &'static str = "ring/1-thread push+pop";
    const THREADS: usize = 1;
    fn body<B: RingBackend>(q: &B, _thread: usize, _threads: usize, iters: u64) {
        for i in 0..iters {
            let _ = black_box(q.push(black_box(i)));
            black_box(q.pop());
        }
    }
}

/// Thread 0 pushes `iters` values, thread 1 pops them; both retry on full/empty.
struct Transfer;

impl Workload for Transfer {
    const GROUP: &'static str = "ring/2-thread transfer";
    const THREADS: usize = 2;
    fn body<B: RingBackend>(q: &B, thread: usize, _threads: usize, iters: u64) {
        if thread == 0 {
            for i in 0..iters {
                let mut v = i;
                while let Err(back) = q.push(v) {
                    v = back;
                    std::hint::spin_loop();
                }
            }
        } else {
            let mut left = iters;
            while left > 0 {
                match q.pop() {
                    Some(v) => {
                        black_box(v);
                        left -= 1;
                    }
                    None => std::hint::spin_loop(),
                }
            }
        }
    }
}

/// Registers workload `W` for backend `B` in `group`.
fn add<B: RingBackend, W: Workload>(group: &mut BenchmarkGroup<'_, WallTime>) {
    bench_backend::<B>(
        group,
        W::THREADS,
        || B::with_capacity(CAPACITY),
        W::body::<B>,
    );
}

/// One criterion group running workload `W` on every backend.
fn group<W: Workload>(c: &mut Criterion) {
    let mut g = c.benchmark_group(W::GROUP);
    g.throughput(Throughput::Elements(1));
    add::<Ring<u64>, W>(&mut g);
    add::<crossbeam_queue::ArrayQueue<u64>, W>(&mut g);
    add::<StdDeque, W>(&mut g);
    add::<ParkingLotDeque, W>(&mut g);
    g.finish();
}

fn ring(c: &mut Criterion) {
    group::<PushPopPair>(c);
    group::<Transfer>(c);
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = ring
}
criterion_main!(benches);
