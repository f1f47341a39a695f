//! Per-class counters and the wait-time histogram (SPEC F60, F61).
//!
//! Everything here is a relaxed atomic: the counters are observations, not accounting, and a
//! snapshot samples them separately (F62). Recording never allocates and never takes a lock; the
//! [`hdrhistogram::Histogram`] handed out by snapshots is built from fixed log-linear buckets at
//! snapshot time.

use crate::pool::PoolCounters;
use crate::sync::{AtomicU64, Ordering};
use core::time::Duration;
use hdrhistogram::Histogram;

/// A class's state at one moment (SPEC F60). The queue view and the pool view are each
/// internally consistent but sampled separately (SPEC F62).
///
/// Every request the class has seen ends counted exactly once in `grants + rejections +
/// cancellations + expirations` (at quiescence the sum equals the requests enqueued or
/// submitted with a valid permit): a grant counts when the cell is granted, a refusal at enqueue
/// counts as a rejection (or an expiration, for a deadline already passed), and a queued request
/// counts when it ends. A granted request that is then refused at acceptance (its deadline passed
/// or its token was cancelled before its owner took the cell) stays counted as a grant and is
/// counted again, apart, in `refused_at_acceptance`.
///
/// Built by [`Scheduler::snapshot`](crate::Scheduler::snapshot), or refreshed in place by
/// [`Scheduler::snapshot_into`](crate::Scheduler::snapshot_into); fields may be added, so it is
/// `#[non_exhaustive]`.
///
/// # Serialized form
///
/// With the `serde` feature a snapshot serializes as a map of its fields; durations take serde's
/// form for [`Duration`] (`{"secs": .., "nanos": ..}`). `wait_histogram` has no serde form of its
/// own and is written as the list of its recorded values with their counts, lowest first:
/// `[[value_ns, count], ...]`. Those values are the floors of the snapshot's log-linear buckets,
/// so the list is compact (at most one pair per bucket met) and exact: deserializing records each
/// pair into a fresh histogram (3 significant digits, auto-resizing, as snapshots build), which
/// then answers every query as the one serialized did.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ClassSnapshot {
    /// Cells in the class.
    pub cells_total: u32,
    /// Cells free now.
    pub cells_available: u32,
    /// Cells leased now.
    pub cells_leased: u32,
    /// Cells quarantined (out of service until the host restores them).
    pub cells_quarantined: u32,
    /// Live queued requests.
    pub queue_depth: u32,
    /// Tenants in the rotation, as of the last dispatch pass.
    pub queued_tenants: u32,
    /// Requests granted a cell (saturating).
    pub grants: u64,
    /// Requests refused at enqueue (queue full, shutdown, every cell quarantined, already
    /// cancelled) or failed while queued by shutdown, quarantine or a pool error (saturating).
    pub rejections: u64,
    /// Queued requests cancelled (saturating).
    pub cancellations: u64,
    /// Requests whose deadline passed while queued or before they were enqueued (saturating).
    pub expirations: u64,
    /// Granted requests refused when their owner came to take the cell (saturating); already
    /// counted in `grants`.
    pub refused_at_acceptance: u64,
    /// Sum of waits of granted requests (saturating).
    pub wait_total: Duration,
    /// Longest wait of a granted request.
    pub wait_max: Duration,
    /// Age of the oldest live lease.
    pub oldest_lease_age: Option<Duration>,
    /// Waits of granted requests, in nanoseconds (log-linear buckets, within 12.5 %).
    #[cfg_attr(feature = "serde", serde(with = "histogram_pairs"))]
    pub wait_histogram: hdrhistogram::Histogram<u64>,
}

/// [`ClassSnapshot::wait_histogram`] as a list of `(value_ns, count)` pairs (see
/// [`ClassSnapshot`]'s serialized form).
#[cfg(feature = "serde")]
mod histogram_pairs {
    use hdrhistogram::Histogram;
    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for v in h.iter_recorded() {
            // The iterator names each bucket by its highest equivalent value; the lowest one is
            // the value the snapshot recorded (a bucket floor).
            let value = h.lowest_equivalent(v.value_iterated_to());
            seq.serialize_element(&(value, v.count_at_value()))?;
        }
        seq.end()
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let pairs: Vec<(u64, u64)> = Vec::deserialize(d)?;
        let mut h = Histogram::new(3).map_err(serde::de::Error::custom)?;
        h.auto(true);
        for (value, count) in pairs {
            h.record_n(value, count).map_err(serde::de::Error::custom)?;
        }
        Ok(h)
    }
}

/// Sub-buckets per power of two: relative bucket width 1/8 (12.5 %).
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Values below `SUB` get a bucket each; above, `SUB` buckets per power of two up to 2^63.
const BUCKETS: usize = (SUB as usize) + (64 - SUB_BITS as usize) * SUB as usize;
/// Buckets actually stored. Under loom every counter is a modelled object, so only a handful are
/// kept and larger waits share the last one (the models only check conservation, not waits).
const STORED: usize = if cfg!(loom) { 4 } else { BUCKETS };

#[inline]
fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // e >= SUB_BITS
    let shift = e - SUB_BITS;
    (SUB + u64::from(shift) * SUB + ((v >> shift) & (SUB - 1))) as usize
}

/// The smallest value that falls into bucket `b`.
fn bucket_floor(b: usize) -> u64 {
    let b = b as u64;
    if b < SUB {
        return b;
    }
    let shift = (b - SUB) / SUB;
    let sub = (b - SUB) % SUB;
    (SUB | sub) << shift
}

/// Adds `n` to `a`, saturating at `u64::MAX` (SPEC F61).
#[inline]
pub(crate) fn saturating_add(a: &AtomicU64, n: u64) {
    // Relaxed: a statistics counter; no other memory is published through it.
    let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        v.checked_add(n).or(Some(u64::MAX))
    });
}

/// What a snapshot samples from its class's engine, besides the [`ClassStats`] counters.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Samples {
    /// The pool's split of the cells.
    pub(crate) pool: PoolCounters,
    /// Live queued requests.
    pub(crate) queue_depth: u32,
    /// Tenants in rotation.
    pub(crate) queued_tenants: u32,
    /// Age of the oldest lease out, in nanoseconds.
    pub(crate) oldest_lease_age: Option<u64>,
    /// Grants that did not wait, counted by the engine outside these counters (per cell, by the
    /// lease's holder: [`LeaseAges`](crate::engine::LeaseAges)).
    pub(crate) fast_grants: u64,
}

/// Counters of one class.
#[derive(Debug)]
pub(crate) struct ClassStats {
    pub(crate) rejections: AtomicU64,
    pub(crate) cancellations: AtomicU64,
    pub(crate) expirations: AtomicU64,
    refused_at_acceptance: AtomicU64,
    /// Written only by the holder of the class's exclusive section (see
    /// [`record_grant_exclusive`](Self::record_grant_exclusive)).
    pub(crate) wait_total: AtomicU64,
    /// As `wait_total`.
    pub(crate) wait_max: AtomicU64,
    /// As `wait_total`.
    buckets: Box<[AtomicU64]>,
}

impl ClassStats {
    pub(crate) fn new() -> Self {
        Self {
            rejections: AtomicU64::new(0),
            cancellations: AtomicU64::new(0),
            expirations: AtomicU64::new(0),
            refused_at_acceptance: AtomicU64::new(0),
            wait_total: AtomicU64::new(0),
            wait_max: AtomicU64::new(0),
            buckets: (0..STORED).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts a request refused at enqueue: expired (`expired`) or otherwise rejected.
    pub(crate) fn count_refused_at_enqueue(&self, expired: bool) {
        let c = if expired {
            &self.expirations
        } else {
            &self.rejections
        };
        saturating_add(c, 1);
    }

    /// Counts a granted request refused at acceptance.
    pub(crate) fn count_refused_at_acceptance(&self) {
        saturating_add(&self.refused_at_acceptance, 1);
    }

    /// Records one grant after waiting `wait` nanoseconds, from any thread (an engine with no
    /// exclusive section around its grants): read-modify-writes.
    #[inline]
    pub(crate) fn record_grant_waited(&self, wait: u64) {
        saturating_add(&self.buckets[bucket_of(wait).min(STORED - 1)], 1);
        if wait > 0 {
            saturating_add(&self.wait_total, wait);
            // Relaxed: statistics only.
            self.wait_max.fetch_max(wait, Ordering::Relaxed);
        }
    }

    /// Records one grant after waiting `wait` nanoseconds, without a read-modify-write.
    ///
    /// The caller must be the only writer of the wait counters at this moment: it holds the
    /// class's exclusive section (the mutex twin's lock),
    /// whose acquisition (Acquire) and release (Release) order one holder's writes before the
    /// next one's reads. Readers (snapshots) load them separately (SPEC F62). Other threads record
    /// waited grants through [`record_grant_waited`](Self::record_grant_waited); grants that did
    /// not wait are counted per cell by the lease's holder
    /// ([`LeaseAges`](crate::engine::LeaseAges)) and reach snapshots through [`Samples`].
    #[inline]
    pub(crate) fn record_grant_exclusive(&self, wait: u64) {
        // Under loom the wait comes from the real clock, so which counter is touched and whether
        // a load happens at all would differ between executions of one model (loom requires
        // every execution to replay the same operations); read-modify-writes in a fixed
        // sequence keep the models deterministic.
        #[cfg(loom)]
        {
            self.buckets[bucket_of(wait).min(STORED - 1)].fetch_add(1, Ordering::Relaxed);
            self.wait_total.fetch_add(wait, Ordering::Relaxed);
            self.wait_max.fetch_max(wait, Ordering::Relaxed);
        }
        #[cfg(not(loom))]
        {
            // Relaxed: statistics only; single writer (see above).
            let add = |a: &AtomicU64, n: u64| {
                a.store(
                    a.load(Ordering::Relaxed).saturating_add(n),
                    Ordering::Relaxed,
                )
            };
            add(&self.buckets[bucket_of(wait).min(STORED - 1)], 1);
            if wait > 0 {
                add(&self.wait_total, wait);
                // Relaxed: as above.
                if wait > self.wait_max.load(Ordering::Relaxed) {
                    self.wait_max.store(wait, Ordering::Relaxed);
                }
            }
        }
    }

    /// Assembles a snapshot from these counters and the engine's samples.
    pub(crate) fn snapshot(&self, samples: Samples) -> ClassSnapshot {
        let mut wait_histogram = Histogram::new(3).expect("3 significant digits is valid");
        wait_histogram.auto(true);
        let mut out = ClassSnapshot {
            cells_total: 0,
            cells_available: 0,
            cells_leased: 0,
            cells_quarantined: 0,
            queue_depth: 0,
            queued_tenants: 0,
            grants: 0,
            rejections: 0,
            cancellations: 0,
            expirations: 0,
            refused_at_acceptance: 0,
            wait_total: Duration::ZERO,
            wait_max: Duration::ZERO,
            oldest_lease_age: None,
            wait_histogram,
        };
        self.snapshot_into(samples, &mut out);
        out
    }

    /// [`snapshot`](Self::snapshot) into `out`, reusing its histogram: nothing is allocated
    /// unless the waits outgrow the histogram's range.
    pub(crate) fn snapshot_into(&self, samples: Samples, out: &mut ClassSnapshot) {
        let Samples {
            pool,
            queue_depth,
            queued_tenants,
            oldest_lease_age,
            fast_grants,
        } = samples;
        // Relaxed: statistics only (SPEC F62: sampled separately).
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        out.cells_total = pool.total;
        out.cells_available = pool.available;
        out.cells_leased = pool.leased;
        out.cells_quarantined = pool.quarantined;
        out.queue_depth = queue_depth;
        out.queued_tenants = queued_tenants;
        out.grants = self
            .buckets
            .iter()
            .fold(fast_grants, |n, b| n.saturating_add(get(b)));
        out.rejections = get(&self.rejections);
        out.cancellations = get(&self.cancellations);
        out.expirations = get(&self.expirations);
        out.refused_at_acceptance = get(&self.refused_at_acceptance);
        out.wait_total = Duration::from_nanos(get(&self.wait_total));
        out.wait_max = Duration::from_nanos(get(&self.wait_max));
        out.oldest_lease_age = oldest_lease_age.map(Duration::from_nanos);
        self.histogram_into(fast_grants, &mut out.wait_histogram);
    }

    /// Records the waits into `h` after clearing it (values are bucket floors, within 12.5 %);
    /// `fast_grants` grants did not wait.
    fn histogram_into(&self, fast_grants: u64, h: &mut Histogram<u64>) {
        h.reset();
        h.auto(true);
        for (b, c) in self.buckets.iter().enumerate() {
            // Relaxed: statistics only.
            let mut c = c.load(Ordering::Relaxed);
            if b == 0 {
                c = c.saturating_add(fast_grants);
            }
            if c > 0 {
                // Cannot fail: the histogram auto-resizes.
                let _ = h.record_n(bucket_floor(b), c);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn f60_buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in (0..10_000u64).chain([u64::MAX / 3, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b >= last && b < BUCKETS);
            last = b;
            let floor = bucket_floor(b);
            assert!(floor <= v, "{v} {floor}");
            assert!(v - floor <= v / SUB, "bucket too wide at {v}");
        }
    }

    #[test]
    fn f60_fast_and_waited_grants_both_count() {
        let s = ClassStats::new();
        // Fast grants are counted per cell by the lease's holder; the snapshot sums the cells
        // (two cells, past one word of either).
        let ages = crate::engine::LeaseAges::new(70);
        for cell in [0, 69, 69] {
            ages.count_fast_grant(crate::ids::CellId(cell));
        }
        s.record_grant_exclusive(0);
        s.record_grant_exclusive(1_000);
        s.record_grant_exclusive(250);
        let snap = s.snapshot(Samples {
            fast_grants: ages.fast_grants(),
            ..Samples::default()
        });
        assert_eq!(snap.grants, 6);
        assert_eq!(snap.wait_total, Duration::from_nanos(1_250));
        assert_eq!(snap.wait_max, Duration::from_nanos(1_000));
        // Four grants without a wait (three fast, one through a pass) in the lowest bucket.
        assert_eq!(snap.wait_histogram.count_at(0), 4);
        assert_eq!(snap.wait_histogram.len(), 6);
        s.wait_total.store(u64::MAX - 1, Ordering::Relaxed);
        s.record_grant_exclusive(5);
        assert_eq!(s.wait_total.load(Ordering::Relaxed), u64::MAX, "saturates");
    }

    #[test]
    fn f61_counters_saturate() {
        let a = AtomicU64::new(u64::MAX - 1);
        saturating_add(&a, 5);
        assert_eq!(a.load(Ordering::Relaxed), u64::MAX);
    }
}
