//! The measured workloads. Each one runs its backends interleaved (A B C D, A B C D, ...) and
//! returns one [`Sample`] per backend, thread count and repetition; the report turns those into
//! medians and same-run ratios.

pub mod micro;
pub mod ring;
pub mod sched;

use crate::stats::Latency;

/// One run of one backend at one thread count.
#[derive(Debug)]
pub struct Sample {
    /// Backend label.
    pub backend: &'static str,
    /// Threads that ran the workload.
    pub threads: usize,
    /// Repetition index (samples with the same index ran back to back).
    pub rep: usize,
    /// Successful operations per second.
    pub ops_per_sec: f64,
    /// Per-operation latency of the sampled operations, merged over threads, in timer ticks.
    pub latency: Latency,
}
