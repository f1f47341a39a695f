//! Cancel by handle at queue depth 1, 64 and 4096 (PERF P7, SPEC F31: cancel is O(1)).
//!
//! Group `cancel/cancel+replace`: the class's only cell is held, and `depth` requests are queued
//! behind it. One operation cancels a queued request picked at random by its handle, polls its
//! future (which resolves to the cancellation and refunds the permit) and enqueues a replacement
//! under the same request id, so the depth stays `depth` (`fairway_bench_support::sched::Cancel`).
//! The replacement's admission and enqueue are the same work at every depth; what may change
//! with depth is the cancel.

mod common;

use common::{criterion, time_op};
use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use fairway::oracle::{Baseline, ParkingLotMutex, Ring, StdMutex};

use fairway_bench_support::sched::{Cancel, Engine};

/// Queue depths measured.
const DEPTHS: [usize; 3] = [1, 64, 4096];

/// Registers engine `M` at every depth in `group`.
fn add<M: Engine>(group: &mut BenchmarkGroup<'_, WallTime>) {
    for depth in DEPTHS {
        group.bench_with_input(BenchmarkId::new(M::NAME, depth), &depth, |b, &depth| {
            b.iter_custom(|iters| {
                time_op(iters, |run| {
                    run(&mut Cancel::new(&Cancel::<M>::fixture(depth), depth))
                })
            });
        });
    }
}

fn cancel(c: &mut Criterion) {
    let mut g = c.benchmark_group("cancel/cancel+replace");
    g.throughput(Throughput::Elements(1));
    add::<Ring>(&mut g);
    add::<Baseline<StdMutex>>(&mut g);
    add::<Baseline<ParkingLotMutex>>(&mut g);
    g.finish();
}

criterion_group! {
    name = benches;
    config = criterion();
    targets = cancel
}
criterion_main!(benches);
