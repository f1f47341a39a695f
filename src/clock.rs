//! Time as the scheduler sees it (SPEC F64).
//!
//! All deadlines, waits and ages are nanoseconds on one monotonic timeline, read through the
//! [`Clock`] trait so tests can drive time by hand with [`ManualClock`].

use crate::sync::{AtomicU64, Ordering};
use std::time::Duration;
#[cfg(any(miri, loom))]
use std::time::Instant;

/// A monotonic source of time in nanoseconds since an arbitrary origin.
///
/// Implementations must never go backwards. The scheduler reads the clock at most once per
/// operation that needs time (enqueue with a deadline, a dispatch pass, acceptance), never per
/// candidate.
pub trait Clock: Send + Sync + 'static {
    /// Nanoseconds since this clock's origin.
    fn now(&self) -> u64;
}

/// The default clock: the CPU's invariant time-stamp counter where it has one (through
/// [`quanta`], about 10 ns a read), else the operating system's monotonic clock.
///
/// `std::time::Instant::now()` costs about 47 ns on the machines fairway is measured on — more
/// than a whole scheduling decision — so the default clock reads the counter directly. `quanta`
/// calibrates the counter once, when the clock is created, and falls back to the OS clock itself
/// when the counter is not invariant. Under Miri, which cannot execute `rdtsc`, and under loom
/// (whose build of crossbeam's utilities lacks what `quanta` needs) it is `std::time::Instant`.
#[derive(Debug, Clone)]
pub struct MonotonicClock {
    #[cfg(not(any(miri, loom)))]
    clock: quanta::Clock,
    #[cfg(not(any(miri, loom)))]
    origin: u64,
    #[cfg(any(miri, loom))]
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now. Calibrates the time-stamp counter on first use in the
    /// process (a few milliseconds, once).
    pub fn new() -> Self {
        #[cfg(not(any(miri, loom)))]
        {
            let clock = quanta::Clock::new();
            let origin = clock.raw();
            Self { clock, origin }
        }
        #[cfg(any(miri, loom))]
        {
            Self {
                origin: Instant::now(),
            }
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> u64 {
        #[cfg(not(any(miri, loom)))]
        {
            self.clock.delta_as_nanos(self.origin, self.clock.raw())
        }
        #[cfg(any(miri, loom))]
        {
            u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
        }
    }
}

/// A clock that moves only when told to: deterministic tests of aging and deadlines.
///
/// # Examples
///
/// ```
/// use fairway::{Clock, ManualClock};
/// use std::time::Duration;
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(clock.now(), 5_000_000);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        Self {
            nanos: AtomicU64::new(0),
        }
    }

    /// Moves the clock forward by `by` (saturating).
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        // Relaxed: the clock value is a plain number; readers need no other memory from the writer.
        let _ = self
            .nanos
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_add(by))
            });
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> u64 {
        // Relaxed: see `advance`.
        self.nanos.load(Ordering::Relaxed)
    }
}

impl<C: Clock> Clock for std::sync::Arc<C> {
    #[inline]
    fn now(&self) -> u64 {
        (**self).now()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn f64_manual_clock_moves_only_when_told() {
        let c = ManualClock::new();
        assert_eq!(c.now(), 0);
        c.advance(Duration::from_nanos(7));
        assert_eq!(c.now(), 7);
        c.advance(Duration::MAX);
        assert_eq!(c.now(), u64::MAX);
    }

    #[test]
    fn f64_monotonic_clock_never_goes_back() {
        let c = MonotonicClock::new();
        let mut last = c.now();
        for _ in 0..1000 {
            let n = c.now();
            assert!(n >= last);
            last = n;
        }
    }
}
