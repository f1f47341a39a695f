//! Slot allocation: fairway's generation-tagged `Arena` against a free list in a
//! `crossbeam_queue::ArrayQueue` and a `Vec` behind a std or parking_lot mutex.

use fairway::internals::Arena;

use crate::Named;

/// Slots in every arena.
pub const CAPACITY: usize = 64;

/// The operations measured.
pub trait ArenaBackend: Named + Send + Sync + 'static {
    /// `capacity` free slots.
    fn with_capacity(capacity: usize) -> Self;
    /// Takes a free slot.
    fn alloc(&self) -> Option<u64>;
    /// Gives slot `key` back.
    fn free(&self, key: u64);
}

impl Named for Arena {
    const NAME: &'static str = "fairway Arena";
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

/// A free list in a `crossbeam_queue::ArrayQueue`.
pub struct QueueFreeList(crossbeam_queue::ArrayQueue<u64>);

impl Named for QueueFreeList {
    const NAME: &'static str = "crossbeam ArrayQueue free list";
}

impl ArenaBackend for QueueFreeList {
    fn with_capacity(capacity: usize) -> Self {
        let q = crossbeam_queue::ArrayQueue::new(capacity);
        (0..capacity as u64).for_each(|i| q.push(i).expect("room"));
        Self(q)
    }
    fn alloc(&self) -> Option<u64> {
        self.0.pop()
    }
    fn free(&self, key: u64) {
        self.0.push(key).expect("room for a freed slot");
    }
}

/// A free list (`Vec` used as a stack) behind one lock.
pub trait FreeList: Named + Send + Sync + 'static {
    /// Wraps `list`.
    fn new(list: Vec<u64>) -> Self;
    /// Runs `f` with the list locked.
    fn with<R>(&self, f: impl FnOnce(&mut Vec<u64>) -> R) -> R;
}

impl Named for std::sync::Mutex<Vec<u64>> {
    const NAME: &'static str = "std Mutex<Vec> free list";
}

impl FreeList for std::sync::Mutex<Vec<u64>> {
    fn new(list: Vec<u64>) -> Self {
        std::sync::Mutex::new(list)
    }
    fn with<R>(&self, f: impl FnOnce(&mut Vec<u64>) -> R) -> R {
        f(&mut self.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Named for parking_lot::Mutex<Vec<u64>> {
    const NAME: &'static str = "parking_lot Mutex<Vec> free list";
}

impl FreeList for parking_lot::Mutex<Vec<u64>> {
    fn new(list: Vec<u64>) -> Self {
        parking_lot::Mutex::new(list)
    }
    fn with<R>(&self, f: impl FnOnce(&mut Vec<u64>) -> R) -> R {
        f(&mut self.lock())
    }
}

/// A locked free list as an arena backend.
pub struct Locked<L>(L);

impl<L: FreeList> Named for Locked<L> {
    const NAME: &'static str = L::NAME;
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
