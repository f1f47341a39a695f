//! Cancel by handle at queue depth 1, 64 and 4096 (PERF P7, SPEC F31: cancel is O(1)).
//!
//! Group `cancel/cancel+replace`: the class's only cell is held, and `depth` requests are queued
//! behind it. One operation cancels a queued request picked at random by its handle, polls its
//! future (which resolves to the cancellation and refunds the permit) and enqueues a replacement
//! under the same request id, so the depth stays `depth`. The replacement's admission and enqueue
//! are the same work at every depth; what may change with depth is the cancel.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use common::criterion;
use common::sched::{Engine, Fixture};
use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use fairway::{Baseline, LockFree, ParkingLotMutex, StdMutex};

/// Queue depths measured.
const DEPTHS: [u32; 3] = [1, 64, 4096];

/// Queue bound of every fixture (the same at every depth, so only the depth differs).
const QUEUE: u32 = 4096;

/// A small xorshift generator: which queued request to cancel next.
struct Pick(u64);

impl Pick {
    /// The next index below `n`.
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Times `iters` cancel+replace operations at queue depth `depth` on a fresh scheduler.
fn run<M: Engine>(depth: u32, iters: u64) -> Duration {
    let depth = depth as usize;
    // Ids 0..depth belong to the queue slots, id `depth` to the held request.
    let f = Fixture::<M>::new(1, QUEUE, depth as u64 + 1);
    let mut cx = Context::from_waker(Waker::noop());
    let held = f
        .sched
        .try_enqueue(f.request(0, depth as u64))
        .expect("the cell is free");
    let mut queued: Vec<_> = (0..depth)
        .map(|k| f.sched.enqueue(f.request(k as u64 + 1, k as u64)))
        .collect();
    for q in &mut queued {
        assert!(
            Pin::new(q).poll(&mut cx).is_pending(),
            "the only cell is held"
        );
    }
    let mut pick = Pick(0x9E37_79B9_7F4A_7C15);

    let start = Instant::now();
    for i in 0..iters {
        let k = pick.below(depth);
        let slot = &mut queued[k];
        let handle = slot.handle().expect("queued");
        f.sched
            .cancel(handle)
            .expect("queued requests can be cancelled");
        assert!(matches!(
            Pin::new(&mut *slot).poll(&mut cx),
            Poll::Ready(Err(_))
        ));
        *slot = f.sched.enqueue(f.request(i, k as u64));
    }
    let elapsed = start.elapsed();

    drop(queued);
    held.release();
    elapsed
}

/// Registers engine `M` at every depth in `group`.
fn add<M: Engine>(group: &mut BenchmarkGroup<'_, WallTime>) {
    for depth in DEPTHS {
        group.bench_with_input(BenchmarkId::new(M::NAME, depth), &depth, |b, &depth| {
            b.iter_custom(|iters| run::<M>(depth, iters));
        });
    }
}

fn cancel(c: &mut Criterion) {
    let mut g = c.benchmark_group("cancel/cancel+replace");
    g.throughput(Throughput::Elements(1));
    add::<LockFree>(&mut g);
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
