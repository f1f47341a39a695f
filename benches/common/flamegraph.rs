//! criterion's `Profiler` hooks driving pprof: a flame graph per benchmark under `--profile-time`.
//!
//! pprof's own criterion integration targets an older criterion; this adapter is the whole of
//! what is needed. pprof samples with `SIGPROF` (no `perf`, no hardware counters).

use std::fs::File;
use std::path::Path;

use criterion::profiler::Profiler;
use pprof::ProfilerGuard;

/// Samples the benchmark thread(s) between `start_profiling` and `stop_profiling` and writes
/// `flamegraph.svg` into criterion's profile directory of the benchmark.
pub struct FlameGraph {
    /// Samples per second.
    frequency: i32,
    /// The running profiler, while a benchmark is being profiled.
    active: Option<ProfilerGuard<'static>>,
}

impl FlameGraph {
    /// A profiler sampling `frequency` times per second (a prime avoids lock-step with periodic
    /// work).
    pub fn new(frequency: i32) -> Self {
        Self {
            frequency,
            active: None,
        }
    }
}

impl Profiler for FlameGraph {
    fn start_profiling(&mut self, _benchmark_id: &str, _benchmark_dir: &Path) {
        let guard = pprof::ProfilerGuardBuilder::default()
            .frequency(self.frequency)
            // Unwinding through these while a signal interrupts them can deadlock.
            .blocklist(&["libc", "libgcc", "pthread", "vdso"])
            .build()
            .expect("starting the pprof sampler");
        self.active = Some(guard);
    }

    fn stop_profiling(&mut self, benchmark_id: &str, benchmark_dir: &Path) {
        let Some(guard) = self.active.take() else {
            return;
        };
        let report = guard.report().build().expect("building the pprof report");
        std::fs::create_dir_all(benchmark_dir).expect("creating the profile directory");
        let path = benchmark_dir.join("flamegraph.svg");
        let file = File::create(&path).expect("creating flamegraph.svg");
        report.flamegraph(file).expect("writing flamegraph.svg");
        eprintln!("{benchmark_id}: flame graph in {}", path.display());
    }
}
