//! The criterion side of fairway's benches: one generic runner, many backends.
//!
//! The backends, fixtures and single-thread operations come from `fairway-bench-support` (shared
//! with `fairway-perf`); a bench registers one generic body per group with [`bench_backend`]. Multi-thread bodies run on threads spawned before the timed
//! region; a start barrier releases them together and an end barrier closes the measurement, so
//! criterion's `iter_custom` sees only the work.

#![allow(dead_code)] // Each bench binary uses the part of the harness it needs.

#[cfg(unix)]
mod flamegraph;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use fairway_bench_support::{Named, SingleOp};

/// A bench body: runs `iters` operations as participant `thread` of `threads`, on shared `state`.
pub type Body<S> = fn(state: &S, thread: usize, threads: usize, iters: u64);

/// Runs `body` once on each of `threads` threads over a shared `state` and returns the wall time
/// between the start and end barriers. With one thread the body runs inline, untimed overhead
/// free.
pub fn timed_run<S: Send + Sync + 'static>(
    state: Arc<S>,
    threads: usize,
    iters: u64,
    body: Body<S>,
) -> Duration {
    if threads == 1 {
        let start = Instant::now();
        body(&state, 0, 1, iters);
        return start.elapsed();
    }
    let start = Arc::new(Barrier::new(threads + 1));
    let end = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            let (state, start, end) = (state.clone(), start.clone(), end.clone());
            std::thread::spawn(move || {
                start.wait();
                body(&state, thread, threads, iters);
                end.wait();
            })
        })
        .collect();
    start.wait();
    let begin = Instant::now();
    end.wait();
    let elapsed = begin.elapsed();
    for h in handles {
        h.join().expect("bench thread panicked");
    }
    elapsed
}

/// Registers backend `B` in `group`: each measurement builds a fresh state with `make` (outside
/// the timed region) and times `body` on `threads` threads.
pub fn bench_backend<B: Named + Send + Sync + 'static>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    threads: usize,
    make: fn() -> B,
    body: Body<B>,
) {
    group.bench_function(B::NAME, |b| {
        b.iter_custom(|iters| timed_run(Arc::new(make()), threads, iters, body));
    });
}

/// The criterion configuration every bench uses: the defaults (command-line flags still apply),
/// plus, on unix, a sampling profiler that writes a flame graph of each benchmark run with
/// `--profile-time <seconds>` to `target/criterion/<group>/<bench>/profile/flamegraph.svg`.
pub fn criterion() -> Criterion {
    let c = Criterion::default();
    #[cfg(unix)]
    let c = c.with_profiler(flamegraph::FlameGraph::new(997));
    c
}

/// Times `iters` runs of the single operation that `with` builds (outside the timed region).
pub fn time_op(iters: u64, with: impl FnOnce(&mut dyn FnMut(&mut dyn SingleOp))) -> Duration {
    let mut elapsed = Duration::ZERO;
    with(&mut |op| {
        let start = Instant::now();
        op.run(iters);
        elapsed = start.elapsed();
    });
    elapsed
}
