//! Bounded MPMC ring: fairway's tenant ring against `crossbeam_queue::ArrayQueue` and a
//! `VecDeque` behind a std or parking_lot mutex.
//!
//! * 1 thread: the thread pushes a value and pops it back, repeatedly.
//! * T >= 2 threads: `T / 2` producers push, the other threads pop. Both sides retry on
//!   full/empty with `crossbeam_utils::Backoff::snooze` (spin, then yield), so an oversubscribed
//!   run does not burn whole time slices spinning.
//!
//! An operation is one successful `push` or `pop`; throughput counts them per second of wall
//! time. Every `sample_every`-th attempt is bracketed by timestamps and, if it succeeds, its
//! latency is recorded (failed attempts are waiting for the other side, not operation cost).
//! Each run lasts a fixed wall time; the main thread does not take part.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;
use fairway::internals::Ring;

use super::Sample;
use crate::stats::Latency;
use crate::timer::Timer;

/// Capacity of every queue.
pub const CAPACITY: usize = 64;

/// The operations the workload measures, implemented once per backend.
pub trait Queue: Send + Sync + 'static {
    /// Label in the report.
    const NAME: &'static str;
    /// An empty queue holding at most `capacity` values.
    fn with_capacity(capacity: usize) -> Self;
    /// Appends `v`, or gives it back when full.
    fn push(&self, v: u64) -> Result<(), u64>;
    /// Removes the oldest value, if any.
    fn pop(&self) -> Option<u64>;
}

/// Label of the fairway backend (the denominator of every ratio).
pub const FAIRWAY: &str = "fairway Ring";

impl Queue for Ring<u64> {
    const NAME: &'static str = FAIRWAY;
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

impl Queue for crossbeam_queue::ArrayQueue<u64> {
    const NAME: &'static str = "crossbeam ArrayQueue";
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
pub struct Locked<M> {
    queue: M,
    capacity: usize,
}

/// A mutex around a `VecDeque<u64>`: the one thing that differs between the two locked backends.
pub trait DequeLock: Send + Sync + 'static {
    /// Label in the report.
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

impl<M: DequeLock> Queue for Locked<M> {
    const NAME: &'static str = M::NAME;
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

/// One backend, type-erased for the interleaving loop.
struct Backend {
    name: &'static str,
    run: fn(&Timer, usize, Duration) -> (f64, Latency),
}

impl Backend {
    fn of<Q: Queue>() -> Self {
        Self {
            name: Q::NAME,
            run: run_once::<Q>,
        }
    }
}

/// The backends in report order; fairway first.
fn backends() -> [Backend; 4] {
    [
        Backend::of::<Ring<u64>>(),
        Backend::of::<crossbeam_queue::ArrayQueue<u64>>(),
        Backend::of::<Locked<std::sync::Mutex<VecDeque<u64>>>>(),
        Backend::of::<Locked<parking_lot::Mutex<VecDeque<u64>>>>(),
    ]
}

/// Runs every backend at every thread count in `threads`, interleaved, `reps` times, each run
/// lasting `run_for`. One discarded warm-up round precedes each thread count.
pub fn run(timer: &Timer, threads: &[usize], reps: usize, run_for: Duration) -> Vec<Sample> {
    let backends = backends();
    let mut samples = Vec::new();
    for &t in threads {
        for b in &backends {
            (b.run)(timer, t, run_for / 4);
        }
        for rep in 0..reps {
            for b in &backends {
                let (ops_per_sec, latency) = (b.run)(timer, t, run_for);
                samples.push(Sample {
                    backend: b.name,
                    threads: t,
                    rep,
                    ops_per_sec,
                    latency,
                });
            }
        }
    }
    samples
}

/// What a thread does in a run.
#[derive(Clone, Copy)]
enum Role {
    /// Push then pop, alternately (the 1-thread workload).
    Both,
    /// Push only.
    Producer,
    /// Pop only.
    Consumer,
}

/// One run of backend `Q` on `threads` threads for `run_for`: returns (ops/s, latency).
fn run_once<Q: Queue>(timer: &Timer, threads: usize, run_for: Duration) -> (f64, Latency) {
    let queue = Arc::new(Q::with_capacity(CAPACITY));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let role = match (threads, i < threads / 2) {
                (1, _) => Role::Both,
                (_, true) => Role::Producer,
                (_, false) => Role::Consumer,
            };
            let (queue, stop, start, timer) = (queue.clone(), stop.clone(), start.clone(), *timer);
            std::thread::spawn(move || {
                // Allocated before the start barrier: `record` never allocates.
                let mut latency = Latency::new();
                start.wait();
                let ops = worker(&*queue, role, &stop, &timer, &mut latency);
                (ops, latency)
            })
        })
        .collect();
    start.wait();
    let begin = Instant::now();
    std::thread::sleep(run_for);
    // Relaxed: a stop hint; the join below synchronises the results.
    stop.store(true, Ordering::Relaxed);
    let mut ops = 0u64;
    let mut merged = Latency::new();
    let mut elapsed = Duration::ZERO;
    for h in handles {
        let (n, lat) = h.join().expect("workload thread panicked");
        elapsed = begin.elapsed();
        ops += n;
        merged.merge(&lat);
    }
    (ops as f64 / elapsed.as_secs_f64(), merged)
}

/// Operations between two reads of the stop flag.
const BATCH: u64 = 256;

/// Per-thread attempt counter, sampler and backoff.
struct Meter<'a> {
    timer: Timer,
    every: u64,
    attempt: u64,
    latency: &'a mut Latency,
    backoff: Backoff,
}

impl Meter<'_> {
    /// One attempt of `op`, timed when it is a sampled one; returns 1 if it succeeded, else 0
    /// (after backing off).
    #[inline(always)]
    fn step(&mut self, op: impl FnOnce() -> bool) -> u64 {
        self.attempt += 1;
        let ok = if self.attempt.is_multiple_of(self.every) {
            let t0 = self.timer.now();
            let ok = op();
            let t1 = self.timer.now();
            if ok {
                self.latency.record(t1.wrapping_sub(t0));
            }
            ok
        } else {
            op()
        };
        if ok {
            self.backoff.reset();
        } else {
            self.backoff.snooze();
        }
        u64::from(ok)
    }
}

/// Runs `role` until `stop`; returns the number of successful operations.
fn worker<Q: Queue>(
    q: &Q,
    role: Role,
    stop: &AtomicBool,
    timer: &Timer,
    latency: &mut Latency,
) -> u64 {
    let mut m = Meter {
        timer: *timer,
        every: timer.sample_every(),
        attempt: 0,
        latency,
        backoff: Backoff::new(),
    };
    let mut ops = 0u64;
    // Relaxed: see `run_once`.
    while !stop.load(Ordering::Relaxed) {
        for i in 0..BATCH {
            ops += match role {
                Role::Both => {
                    m.step(|| q.push(black_box(i)).is_ok())
                        + m.step(|| black_box(q.pop()).is_some())
                }
                Role::Producer => m.step(|| q.push(black_box(i)).is_ok()),
                Role::Consumer => m.step(|| black_box(q.pop()).is_some()),
            };
        }
    }
    ops
}
