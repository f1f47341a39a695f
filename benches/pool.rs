//! One cell taken and given back: `FixedCellPool::try_acquire_now` + `release` against tokio's
//! `Semaphore::try_acquire` + drop of the permit (PERF P2).
//!
//! Groups:
//! * `pool/1-thread acquire+release`: one thread, one cell.
//! * `pool/2-thread acquire+release`: two threads on a shared pool of 2 cells (one bitmap word,
//!   so the threads contend on it); a thread that finds no cell retries.

mod common;

use common::{bench_backend, criterion};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use fairway::pool::FixedCellPool;
use fairway_bench_support::pool::PoolBackend;

/// Take and give back a cell `iters` times on every participating thread, retrying when none
/// is free.
fn cycle<B: PoolBackend>(p: &B, thread: usize, _threads: usize, iters: u64) {
    let id = thread as u64;
    for _ in 0..iters {
        while !p.acquire_release(id) {
            std::hint::spin_loop();
        }
    }
}

/// Registers backend `B` in `group`: `threads` threads on as many cells.
fn add<B: PoolBackend>(group: &mut BenchmarkGroup<'_, WallTime>, threads: usize) {
    let make: fn() -> B = if threads == 1 {
        || B::with_cells(1)
    } else {
        || B::with_cells(2)
    };
    bench_backend::<B>(group, threads, make, cycle::<B>);
}

fn pool(c: &mut Criterion) {
    for (name, threads) in [
        ("pool/1-thread acquire+release", 1),
        ("pool/2-thread acquire+release", 2),
    ] {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements(1));
        add::<FixedCellPool>(&mut g, threads);
        add::<tokio::sync::Semaphore>(&mut g, threads);
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = criterion();
    targets = pool
}
criterion_main!(benches);
