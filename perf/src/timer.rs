//! Cheap timestamps for per-operation latency.
//!
//! `Instant::now()` costs tens of nanoseconds on the machines fairway is measured on: more than
//! the operations being timed. On x86-64 with an invariant TSC the timer reads the time-stamp
//! counter (`rdtsc`, a few nanoseconds) and converts ticks to nanoseconds with a factor
//! calibrated once against `Instant` at start-up. Elsewhere it falls back to `Instant`, and the
//! workloads then sample latency more sparsely (see [`Timer::sample_every`]).

use std::time::{Duration, Instant};

/// Which clock the timer reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The x86-64 time-stamp counter.
    Tsc,
    /// `std::time::Instant` (ticks are nanoseconds since the timer was created).
    Instant,
}

/// A calibrated timestamp source. `Copy`, so every measuring thread holds its own.
#[derive(Clone, Copy, Debug)]
pub struct Timer {
    source: Source,
    /// Nanoseconds per tick.
    ns_per_tick: f64,
    /// Origin of `Source::Instant` ticks.
    base: Instant,
}

impl Timer {
    /// Picks the TSC when it is usable (x86-64, `constant_tsc` in `/proc/cpuinfo`) and calibrates
    /// it against `Instant` over about 20 ms; otherwise an `Instant` timer.
    pub fn calibrate() -> Self {
        let base = Instant::now();
        if tsc_usable() {
            let (t0, i0) = (read_tsc(), Instant::now());
            while i0.elapsed() < Duration::from_millis(20) {
                std::hint::spin_loop();
            }
            let (t1, elapsed) = (read_tsc(), i0.elapsed());
            let ticks = t1.wrapping_sub(t0);
            if ticks > 0 {
                return Self {
                    source: Source::Tsc,
                    ns_per_tick: elapsed.as_nanos() as f64 / ticks as f64,
                    base,
                };
            }
        }
        Self {
            source: Source::Instant,
            ns_per_tick: 1.0,
            base,
        }
    }

    /// The clock in use.
    pub fn source(&self) -> Source {
        self.source
    }

    /// Ticks per nanosecond (the TSC frequency in GHz for [`Source::Tsc`]).
    pub fn ghz(&self) -> f64 {
        1.0 / self.ns_per_tick
    }

    /// Time one operation in every `sample_every()` with timestamps: 8 with the TSC, 64 with the
    /// `Instant` fallback, so timestamping adds well under a nanosecond per operation on average.
    pub fn sample_every(&self) -> u64 {
        match self.source {
            Source::Tsc => 8,
            Source::Instant => 64,
        }
    }

    /// The current timestamp in ticks.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        match self.source {
            Source::Tsc => read_tsc(),
            Source::Instant => self.base.elapsed().as_nanos() as u64,
        }
    }

    /// Converts a tick count to nanoseconds.
    pub fn ns(&self, ticks: f64) -> f64 {
        ticks * self.ns_per_tick
    }
}

/// Whether the TSC runs at a constant rate across frequency changes (the kernel's
/// `constant_tsc` flag).
fn tsc_usable() -> bool {
    cfg!(target_arch = "x86_64")
        && std::fs::read_to_string("/proc/cpuinfo")
            .map(|s| {
                s.lines()
                    .find(|l| l.starts_with("flags"))
                    .is_some_and(|l| l.split_whitespace().any(|f| f == "constant_tsc"))
            })
            .unwrap_or(false)
}

/// Reads the time-stamp counter; 0 where there is none (never used then).
#[inline(always)]
fn read_tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` is available on every x86-64 CPU and has no preconditions.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}
