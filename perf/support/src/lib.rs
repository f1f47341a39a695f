//! What fairway's criterion benches (`benches/`), the `fairway-perf` harness and the allocation
//! tests (`tests/alloc.rs`) share, so that each backend, workload and the counting allocator
//! exist once:
//!
//! * [`alloc`]: a counting global allocator (per-thread counts).
//! * [`latency`]: the clock ([`quanta`]) and latency histograms in nanoseconds.
//! * [`graph`]: the dependency graph's P8 and P9 workloads on either graph engine.
//! * [`pool`]: one cell taken and given back, fairway's `FixedCellPool` and tokio's `Semaphore`.
//! * [`sched`]: the scheduler engines, the fixture, and the workloads: single-thread operations
//!   (the P1 cycle, the fast path, cancel at depth, the P13 admit → refund), the closed-loop
//!   multi-tenant mix, the open-loop latency workload and the P11 fairness run.

pub mod alloc;
pub mod graph;
pub mod latency;
pub mod pool;
pub mod sched;

/// Something measured side by side with its peers, with its label in reports.
pub trait Named {
    /// Label in criterion's and `fairway-perf`'s reports.
    const NAME: &'static str;
}

/// A single-thread operation measured by repetition: criterion times `run(iters)`,
/// `fairway-perf` times batches of it, and `perf/callgrind.sh` counts its instructions.
pub trait SingleOp {
    /// Runs the operation `iters` times.
    fn run(&mut self, iters: u64);
}

/// A closure that is handed a freshly built [`SingleOp`] (operations that borrow a fixture are
/// built inside the call that owns it).
pub type OpUser<'a> = &'a mut dyn FnMut(&mut dyn SingleOp);

/// What one timed run of a threaded workload measured.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Successful operations (grants, pushes and pops) per second of wall time.
    pub ops_per_sec: f64,
    /// Per-operation latency, merged over threads.
    pub latency: latency::Latency,
    /// Heap allocations per operation in the timed region (0 unless the binary counts).
    pub allocs_per_op: f64,
    /// A workload-specific score (P11: the smallest Jain index over 1,000-grant windows).
    pub score: Option<f64>,
}
