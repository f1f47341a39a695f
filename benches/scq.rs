//! The SCQ ring of indices (`Scq`, the engine's ring of tenant turns) against crossbeam's
//! `ArrayQueue<u32>` on the engine's pattern: turns circulate.
//!
//! Both rings start holding every index `0..64` once; an iteration pops one index and pushes it
//! back (a turn taken and returned).
//!
//! Groups:
//! * `scq/1-thread pop+push`.
//! * `scq/4-thread circulate`: four threads circulating at once (on fewer cores, threads are
//!   preempted mid-operation, which is where the rings differ: an `ArrayQueue` pop behind a
//!   preempted push reports empty and retries, an `Scq` pop passes it).

mod common;

use std::hint::black_box;

use common::bench_backend;
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use fairway::internals::Scq;
use fairway_bench_support::Named;

/// Indices in circulation.
const INDICES: u32 = 64;

/// A ring of indices under test.
trait Turns: Named + Send + Sync + 'static {
    /// A ring holding every index `0..INDICES` once.
    fn full() -> Self;
    /// Takes an index, if one is there.
    fn take(&self) -> Option<u32>;
    /// Gives an index back.
    fn give(&self, i: u32);
}

/// `Scq` of capacity [`INDICES`].
struct ScqTurns(Scq);

impl Named for ScqTurns {
    const NAME: &'static str = "fairway Scq";
}

impl Turns for ScqTurns {
    fn full() -> Self {
        let r = Scq::new(INDICES);
        (0..INDICES).for_each(|i| r.push(i));
        ScqTurns(r)
    }
    fn take(&self) -> Option<u32> {
        self.0.pop()
    }
    fn give(&self, i: u32) {
        self.0.push(i);
    }
}

/// crossbeam's `ArrayQueue<u32>` of capacity [`INDICES`].
struct ArrayQueueTurns(crossbeam_queue::ArrayQueue<u32>);

impl Named for ArrayQueueTurns {
    const NAME: &'static str = "crossbeam ArrayQueue";
}

impl Turns for ArrayQueueTurns {
    fn full() -> Self {
        let q = crossbeam_queue::ArrayQueue::new(INDICES as usize);
        (0..INDICES).for_each(|i| q.push(i).expect("room"));
        ArrayQueueTurns(q)
    }
    fn take(&self) -> Option<u32> {
        self.0.pop()
    }
    fn give(&self, i: u32) {
        // A pop that claimed the slot but has not freed it makes the queue look full for a
        // moment.
        let mut v = i;
        while let Err(back) = self.0.push(v) {
            v = back;
            std::hint::spin_loop();
        }
    }
}

/// `iters` turns: pop an index (retrying while the ring reports empty), push it back.
fn circulate<B: Turns>(q: &B, _thread: usize, _threads: usize, iters: u64) {
    for _ in 0..iters {
        let i = loop {
            match q.take() {
                Some(i) => break i,
                None => std::hint::spin_loop(),
            }
        };
        q.give(black_box(i));
    }
}

fn add<B: Turns>(group: &mut BenchmarkGroup<'_, WallTime>, threads: usize) {
    bench_backend::<B>(group, threads, B::full, circulate::<B>);
}

fn scq(c: &mut Criterion) {
    for (name, threads) in [("scq/1-thread pop+push", 1), ("scq/4-thread circulate", 4)] {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements(threads as u64));
        add::<ScqTurns>(&mut g, threads);
        add::<ArrayQueueTurns>(&mut g, threads);
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = scq
}
criterion_main!(benches);
