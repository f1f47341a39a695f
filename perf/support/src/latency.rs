//! Timestamps and latency histograms, both in nanoseconds.
//!
//! `Instant::now()` costs about 47 ns on the 2-vCPU VM, more than the operations timed; the
//! [`Timer`] reads the invariant time-stamp counter through [`quanta`] (calibrated once per
//! process, with quanta's own fallback to the OS clock), about 10 ns a read.

use hdrhistogram::Histogram;

/// A cheap monotonic clock in nanoseconds since its creation. Clone one per measuring thread.
#[derive(Clone, Debug)]
pub struct Timer {
    clock: quanta::Clock,
    origin: u64,
}

impl Timer {
    /// A timer whose origin is now.
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        Self { clock, origin }
    }

    /// Nanoseconds since the timer was created.
    #[inline(always)]
    pub fn now_ns(&self) -> u64 {
        self.clock.delta_as_nanos(self.origin, self.clock.raw())
    }
}

impl Default for Timer {
    fn default() -> Self {
        Self::new()
    }
}

/// Upper bound of a histogram: 100 s, wide enough for any preemption p99.9 should still count.
const MAX_NS: u64 = 100_000_000_000;

/// Per-operation latency in nanoseconds (3 significant digits). Allocate before a timed region:
/// [`record`](Self::record) never allocates.
#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

impl Latency {
    /// An empty histogram.
    pub fn new() -> Self {
        Self(Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid histogram bounds"))
    }

    /// Records one latency; values beyond the range saturate.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.0.saturating_record(ns.max(1));
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Latency) {
        self.0.add(&other.0).expect("histograms share bounds");
    }

    /// The value at `quantile` (0..=1) in ns; 0 for an empty histogram.
    pub fn quantile(&self, quantile: f64) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.0.value_at_quantile(quantile) as f64
        }
    }

    /// Number of recorded samples.
    pub fn count(&self) -> u64 {
        self.0.len()
    }
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_histograms_keep_every_sample() {
        let (mut a, mut b) = (Latency::new(), Latency::new());
        (1..=99).for_each(|v| a.record(v));
        b.record(1_000_000);
        a.merge(&b);
        assert_eq!(a.count(), 100);
        assert!(a.quantile(0.999) >= 999_000.0);
        assert_eq!(a.quantile(0.5), 50.0);
    }

    #[test]
    fn timer_advances() {
        let t = Timer::new();
        let a = t.now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(t.now_ns() - a >= 1_000_000);
    }
}
