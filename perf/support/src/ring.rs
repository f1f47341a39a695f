//! Bounded MPMC queues: fairway's tenant ring against `crossbeam_queue::ArrayQueue` and a
//! `VecDeque` behind a std or parking_lot mutex, and the threaded workload `fairway-perf` runs
//! on them.
//!
//! Workload: at 1 thread the thread pushes a value and pops it back; at T >= 2 threads `T / 2`
//! producers push and the others pop, retrying on full/empty with `Backoff::snooze`. An operation
//! is one successful push or pop; one attempt in 8 is timed and recorded if it succeeds.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;
use fairway::internals::Ring;

use crate::latency::{Latency, Timer};
use crate::{Measured, Named};

/// Capacity of every queue.
pub const CAPACITY: usize = 64;

/// The operations measured, implemented once per backend.
pub trait Queue: Named + Send + Sync + 'static {
    /// An empty queue holding at most `capacity` values.
    fn with_capacity(capacity: usize) -> Self;
    /// Appends `v`, or gives it back when full.
    fn push(&self, v: u64) -> Result<(), u64>;
    /// Removes the oldest value, if any.
    fn pop(&self) -> Option<u64>;
}

impl Named for Ring<u64> {
    const NAME: &'static str = "fairway Ring";
}

impl Queue for Ring<u64> {
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

impl Named for crossbeam_queue::ArrayQueue<u64> {
    const NAME: &'static str = "crossbeam ArrayQueue";
}

impl Queue for crossbeam_queue::ArrayQueue<u64> {
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

/// A mutex around a `VecDeque<u64>`: the one thing that differs between the locked backends.
pub trait DequeLock: Named + Send + Sync + 'static {
    /// Wraps `deque`.
    fn new(deque: VecDeque<u64>) -> Self;
    /// Runs `f` with the deque locked.
    fn with<R>(&self, f: impl FnOnce(&mut VecDeque<u64>) -> R) -> R;
}

impl Named for std::sync::Mutex<VecDeque<u64>> {
    const NAME: &'static str = "std Mutex<VecDeque>";
}

impl DequeLock for std::sync::Mutex<VecDeque<u64>> {
    fn new(deque: VecDeque<u64>) -> Self {
        std::sync::Mutex::new(deque)
    }
    fn with<R>(&self, f: impl FnOnce(&mut VecDeque<u64>) -> R) -> R {
        f(&mut self.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Named for parking_lot::Mutex<VecDeque<u64>> {
    const NAME: &'static str = "parking_lot Mutex<VecDeque>";
}

impl DequeLock for parking_lot::Mutex<VecDeque<u64>> {
    fn new(deque: VecDeque<u64>) -> Self {
        parking_lot::Mutex::new(deque)
    }
    fn with<R>(&self, f: impl FnOnce(&mut VecDeque<u64>) -> R) -> R {
        f(&mut self.lock())
    }
}

impl<M: DequeLock> Named for Locked<M> {
    const NAME: &'static str = M::NAME;
}

impl<M: DequeLock> Queue for Locked<M> {
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

/// `std Mutex<VecDeque>` as a [`Queue`].
pub type StdDeque = Locked<std::sync::Mutex<VecDeque<u64>>>;
/// `parking_lot Mutex<VecDeque>` as a [`Queue`].
pub type ParkingLotDeque = Locked<parking_lot::Mutex<VecDeque<u64>>>;

/// A backend's threaded run: `(timer, threads, run_for)`.
pub type RunFn = fn(&Timer, usize, Duration) -> Measured;

/// The backends in report order (fairway first), with their threaded runs.
pub fn backends() -> [(&'static str, RunFn); 4] {
    [
        (Ring::<u64>::NAME, run::<Ring<u64>>),
        (
            crossbeam_queue::ArrayQueue::<u64>::NAME,
            run::<crossbeam_queue::ArrayQueue<u64>>,
        ),
        (StdDeque::NAME, run::<StdDeque>),
        (ParkingLotDeque::NAME, run::<ParkingLotDeque>),
    ]
}

/// One run of backend `Q` on `threads` threads for `run_for`.
pub fn run<Q: Queue>(timer: &Timer, threads: usize, run_for: Duration) -> Measured {
    let queue = Arc::new(Q::with_capacity(CAPACITY));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            // (push, pop): both at 1 thread, else producers then consumers.
            let role = (
                threads == 1 || i < threads / 2,
                threads == 1 || i >= threads / 2,
            );
            let (queue, stop, start, timer) =
                (queue.clone(), stop.clone(), start.clone(), timer.clone());
            std::thread::spawn(move || {
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
    // Relaxed: a stop hint; the joins synchronise the results.
    stop.store(true, Ordering::Relaxed);
    let mut m = Measured::default();
    let mut ops = 0;
    for h in handles {
        let (n, lat) = h.join().expect("workload thread panicked");
        ops += n;
        m.latency.merge(&lat);
    }
    m.ops_per_sec = ops as f64 / begin.elapsed().as_secs_f64();
    m
}

/// One thread's attempt counter, sampler and backoff.
struct Meter<'a> {
    timer: &'a Timer,
    latency: &'a mut Latency,
    backoff: Backoff,
    attempt: u64,
    ops: u64,
}

impl Meter<'_> {
    /// One attempt of `op`, timed if it is every 8th and recorded if it succeeds; backs off
    /// after a failure.
    #[inline(always)]
    fn step(&mut self, op: impl FnOnce() -> bool) {
        self.attempt += 1;
        let ok = if self.attempt.is_multiple_of(8) {
            let t0 = self.timer.now_ns();
            let ok = op();
            if ok {
                self.latency.record(self.timer.now_ns() - t0);
            }
            ok
        } else {
            op()
        };
        if ok {
            self.backoff.reset();
            self.ops += 1;
        } else {
            self.backoff.snooze();
        }
    }
}

/// Pushes and/or pops until `stop`; returns the successful operations.
fn worker<Q: Queue>(
    q: &Q,
    (push, pop): (bool, bool),
    stop: &AtomicBool,
    timer: &Timer,
    latency: &mut Latency,
) -> u64 {
    let mut m = Meter {
        timer,
        latency,
        backoff: Backoff::new(),
        attempt: 0,
        ops: 0,
    };
    // Relaxed: see `run`.
    while !stop.load(Ordering::Relaxed) {
        for i in 0..256 {
            if push {
                m.step(|| q.push(black_box(i)).is_ok());
            }
            if pop {
                m.step(|| black_box(q.pop()).is_some());
            }
        }
    }
    m.ops
}
