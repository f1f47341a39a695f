//! A counting global allocator: every allocation bumps a per-thread counter, so a thread can
//! count exactly its own allocations (SPEC Q03, PERF P10).
//!
//! Thread-local rather than one shared atomic: no cache line is shared between measured threads,
//! and allocations of other threads (a test harness, the main thread) cannot leak into a count.
//! A binary opts in with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: fairway_bench_support::alloc::Counting = fairway_bench_support::alloc::Counting;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting calls that hand out memory.
pub struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// Counts one allocation on this thread.
#[inline]
fn bump() {
    // `try_with`: the thread-local may already be gone while a thread is torn down.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which is ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract, which is ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract, which is ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Allocations made so far by the calling thread (0 unless [`Counting`] is the global
/// allocator).
pub fn thread_allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

/// Allocations `f` makes on the calling thread.
pub fn count(f: impl FnOnce()) -> u64 {
    let before = thread_allocs();
    f();
    thread_allocs() - before
}
