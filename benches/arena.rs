//! Slot allocation: fairway's generation-tagged `Arena` against a free list in a
//! `crossbeam_queue::ArrayQueue` and a `Vec` behind a std or parking_lot mutex.
//!
//! Groups:
//! * `arena/1-thread alloc+free`: one thread allocates a slot and frees it.
//! * `arena/2-thread alloc+free`: two threads do the same on one shared arena, contending.

mod common;

use std::hint::black_box;

use common::{bench_backend, criterion, Backend};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use fairway::internals::Arena;

/// Slots in every arena.
const CAPACITY: usize = 64;

/// The operations the arena benches measure.
trait ArenaBackend: Backend {
    /// `capacity` free slots.
    fn with_capacity(capacity: usize) -> Self;
    /// Takes a free slot.
    fn alloc(&self) -> Option<u64>;
    /// Gives slot `key` back.
    fn free(&self, key: u64);
}

impl Backend for Arena {
    fn name() -> &'static str {
        "fairway Arena"
    }
}

impl ArenaBackend for Arena {
    fn with_capacity(capacity: usize) -> Self {
        Arena::new(capacity).expect("arena")
    }
    fn alloc(&self) -> Option<u64> {
        Arena::alloc(self)
    }
    fn free(&self, key: u64) {
        assert!(Arena::free(self, key), "fresh key");
    }
}

impl Backend for crossbeam_queue::ArrayQueue<u64> {
    fn name() -> &'static str {
        "crossbeam ArrayQueue free list"
    }
}

impl ArenaBackend for crossbeam_queue::ArrayQueue<u64> {
    fn with_capacity(capacity: usize) -> Self {
        let q = crossbeam_queue::ArrayQueue::new(capacity);
        (0..capacity as u64).for_each(|i| q.push(i).expect("room"));
        q
    }
    fn alloc(&self) -> Option<u64> {
        self.pop()
    }
    fn free(&self, key: u64) {
        self.push(key).expect("room for a freed slot");
    }
}

/// A free list (`Vec` used as a stack) behind one lock.
trait FreeList: Send + Sync + 'static {
    /// Label in criterion's report.
    const NAME: &'static str;
    /// Wraps `list`.
    fn new(list: Vec<u64>) -> Self;
    /// Runs `f` with the list locked.
    fn with<R>(&self, f: impl FnOnce(&mut Vec<u64>) -> R) -> R;
}

impl FreeList for std::sync::Mutex<Vec<u64>> {
    const NAME: &'static str = "std Mutex<Vec> free list";
    fn new(list: Vec<u64>) -> Self {
        std::sync::Mutex::new(list)
    }
    fn with<R>(&self, f: impl FnOnce(&mut Vec<u64>) -> R) -> R {
        f(&mut self.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl FreeList for parking_lot::Mutex<Vec<u64>> {
    const NAME: &'static str = "parking_lot Mutex<Vec> free list";
    fn new(list: Vec<u64>) -> Self {
        parking_lot::Mutex::new(list)
    }
    fn with<R>(&self, f: impl FnOnce(&mut Vec<u64>) -> R) -> R {
        f(&mut self.lock())
    }
}

/// A locked free list as an arena backend.
struct Locked<L>(L);

impl<L: FreeList> Backend for Locked<L> {
    fn name() -> &'static str {
        L::NAME
    }
}

impl<L: FreeList> ArenaBackend for Locked<L> {
    fn with_capacity(capacity: usize) -> Self {
        Self(L::new((0..capacity as u64).collect()))
    }
    fn alloc(&self) -> Option<u64> {
        self.0.with(Vec::pop)
    }
    fn free(&self, key: u64) {
        self.0.with(|l| l.push(key));
    }
}

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
        add::<crossbeam_queue::ArrayQueue<u64>>(&mut g, threads);
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
