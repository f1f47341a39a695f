//! Latency histograms and the ratio statistics of the report.
//!
//! Each measuring thread owns one [`Latency`] histogram (allocated before the timed region;
//! `record` never allocates afterwards); after a run they are merged with `add`.

use hdrhistogram::Histogram;

/// Upper bound of a histogram, in timer ticks: about 100 s at 10 GHz, wide enough for any
/// preemption the report should still count in p99.9.
const MAX_TICKS: u64 = 1 << 40;

/// Per-operation latency in timer ticks.
#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

impl Latency {
    /// An empty histogram (3 significant digits).
    pub fn new() -> Self {
        Self(Histogram::new_with_bounds(1, MAX_TICKS, 3).expect("valid histogram bounds"))
    }

    /// Records one latency; values beyond the range saturate.
    #[inline]
    pub fn record(&mut self, ticks: u64) {
        self.0.saturating_record(ticks.max(1));
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Latency) {
        self.0.add(&other.0).expect("histograms share bounds");
    }

    /// The value at `quantile` (0..=1), in ticks; 0 for an empty histogram.
    pub fn quantile(&self, quantile: f64) -> u64 {
        if self.0.is_empty() {
            0
        } else {
            self.0.value_at_quantile(quantile)
        }
    }

    /// Number of recorded samples.
    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.0.len()
    }
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

/// The median of `values` (mean of the two middle values for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// The median over repetitions of `a[i] / b[i]`: the same-run ratio the report shows.
pub fn median_ratio(a: &[f64], b: &[f64]) -> f64 {
    let ratios: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|(_, &d)| d > 0.0)
        .map(|(&n, &d)| n / d)
        .collect();
    median(&ratios)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn median_ratio_pairs_by_repetition() {
        // Pairwise ratios 2, 0.5, 4: median 2 (a ratio of medians would give 1).
        assert_eq!(median_ratio(&[2.0, 1.0, 8.0], &[1.0, 2.0, 2.0]), 2.0);
    }

    #[test]
    fn merged_histograms_keep_every_sample() {
        let (mut a, mut b) = (Latency::new(), Latency::new());
        (1..=99).for_each(|v| a.record(v));
        b.record(1_000_000);
        a.merge(&b);
        assert_eq!(a.count(), 100);
        assert!(a.quantile(0.999) >= 999_000);
        assert_eq!(a.quantile(0.5), 50);
    }
}
