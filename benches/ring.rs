//! Bounded MPMC ring: fairway's `Ring` against `crossbeam_queue::ArrayQueue` and a
//! `VecDeque` behind a std or parking_lot mutex.
//!
//! Groups:
//! * `ring/1-thread push+pop`: one thread pushes then pops one value per iteration.
//! * `ring/2-thread transfer`: one producer pushes `iters` values, one consumer pops them; an
//!   iteration is one value moved.

mod common;

use std::collections::VecDeque;
use std::hint::black_box;

use common::{bench_backend, Backend};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use fairway::internals::Ring;

/// Ring capacity used by every group.
const CAPACITY: usize = 64;

/// The operations the ring benches measure.
trait RingBackend: Backend {
    /// An empty queue holding at most `capacity` values.
    fn with_capacity(capacity: usize) -> Self;
    /// Appends `v`, or gives it back when full.
    fn push(&self, v: u64) -> Result<(), u64>;
    /// Removes the oldest value, if any.
    fn pop(&self) -> Option<u64>;
}

impl Backend for Ring<u64> {
    fn name() -> &'static str {
        "fairway Ring"
    }
}

impl RingBackend for Ring<u64> {
    fn with_capacity(capacity: usize) -> Self {
        Ring::new(capacity)
    }
    fn push(&self, v: u64) -> Result<(), u64> {
        Ring::push(self, v)
    }
    fn pop(&self) -> Option<u64> {
        Ring::pop(self)
    }
}

impl Backend for crossbeam_queue::ArrayQueue<u64> {
    fn name() -> &'static str {
        "crossbeam ArrayQueue"
    }
}

impl RingBackend for crossbeam_queue::ArrayQueue<u64> {
    fn with_capacity(capacity: usize) -> Self {
        crossbeam_queue::ArrayQueue::new(capacity)
    }
    fn push(&self, v: u64) -> Result<(), u64> {
        crossbeam_queue::ArrayQueue::push(self, v)
    }
    fn pop(&self) -> Option<u64> {
        crossbeam_queue::ArrayQueue::pop(self)
    }
}

/// A `VecDeque` bounded by hand behind one lock of type `M`.
struct Locked<M> {
    queue: M,
    capacity: usize,
}

/// A mutex around a `VecDeque<u64>`: the one thing that differs between the locked backends.
trait DequeLock: Send + Sync + 'static {
    /// Label in criterion's report.
    const NAME: &'static str;
    /// Wraps `deque`.
    fn new(deque: VecDeque<u64>) -> Self;
    /// Runs `f` with the deque locked.
    fn with<R>(&self, f: impl FnOnce(&mut VecDeque<u64>) -> R) -> R;
}

impl DequeLock for std::sync::Mutex<VecDeque<u64>> {
    const NAME: &'static str = "std Mutex<VecDeque>";
    fn new(deque: VecDeque<u64>) -> Self {
        std::sync::Mutex::new(deque)
    }
    fn with<R>(&self, f: impl FnOnce(&mut VecDeque<u64>) -> R) -> R {
        f(&mut self.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl DequeLock for parking_lot::Mutex<VecDeque<u64>> {
    const NAME: &'static str = "parking_lot Mutex<VecDeque>";
    fn new(deque: VecDeque<u64>) -> Self {
        parking_lot::Mutex::new(deque)
    }
    fn with<R>(&self, f: impl FnOnce(&mut VecDeque<u64>) -> R) -> R {
        f(&mut self.lock())
    }
}

impl<M: DequeLock> Backend for Locked<M> {
    fn name() -> &'static str {
        M::NAME
    }
}

impl<M: DequeLock> RingBackend for Locked<M> {
    fn with_capacity(capacity: usize) -> Self {
        Self {
            queue: M::new(VecDeque::with_capacity(capacity)),
            capacity,
        }
    }
    fn push(&self, v: u64) -> Result<(), u64> {
        self.queue.with(|q| {
            if q.len() == self.capacity {
                Err(v)
            } else {
                q.push_back(v);
                Ok(())
            }
        })
    }
    fn pop(&self) -> Option<u64> {
        self.queue.with(|q| q.pop_front())
    }
}

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
    add::<Locked<std::sync::Mutex<VecDeque<u64>>>, W>(&mut g);
    add::<Locked<parking_lot::Mutex<VecDeque<u64>>>, W>(&mut g);
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
