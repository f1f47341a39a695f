//! Slot allocation: fairway's generation-tagged `Arena` against a free list in a
//! `crossbeam_queue::ArrayQueue` and a `Vec` behind a std or parking_lot mutex.
//!
//! Groups:
//! * `arena/1-thread alloc+free`: one thread allocates a slot and frees it.
//! * `arena/2-thread alloc+free`: two threads do the same on one shared arena, contending.

mod common;

use std::hint::black_box;

use common::{bench_backend, criterion};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use fairway::internals::Arena;
use fairway_bench_support::arena::{ArenaBackend, Locked, QueueFreeList, CAPACITY};

/// Allocate a slot and free it, `iters` times, on every participating thread.
fn alloc_free<B: ArenaBackend>(a: &B, _thread: usize, _threads: usize, iters: u64) {
    for _ in 0..iters {
        let key = a
            .alloc()
            .expect("never more than one slot per thread is taken");
        a.free(black_box(key));
    }
}

/// Registers backend `B` on `threads` threads in `group`.
fn add<B: ArenaBackend>(group: &mut BenchmarkGroup<'_, WallTime>, threads: usize) {
    bench_backend::<B>(
        group,
        threads,
        || B::with_capacity(CAPACITY),
        alloc_free::<B>,
    );
}

fn arena(c: &mut Criterion) {
    for (name, threads) in [
        ("arena/1-thread alloc+free", 1),
        ("arena/2-thread alloc+free", 2),
    ] {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements(1));
        add::<Arena>(&mut g, threads);
        add::<QueueFreeList>(&mut g, threads);
        add::<Locked<std::sync::Mutex<Vec<u64>>>>(&mut g, threads);
        add::<Locked<parking_lot::Mutex<Vec<u64>>>>(&mut g, threads);
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = criterion();
    targets = arena
}
criterion_main!(benches);
