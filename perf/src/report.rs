//! What a run produces, as data: the rows (one per workload and backend, with every
//! repetition's figures), the target verdicts and the system; written as text, Markdown or JSON,
//! read back for `--report` and `--compare`.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::targets::Verdict;

/// One repetition of one backend on one workload.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct Rep {
    /// Operations (grants, pushes, pops, single operations) per second.
    pub ops_per_sec: f64,
    /// Latency percentiles in ns (0 where the workload does not time single operations).
    pub p50_ns: f64,
    /// See `p50_ns`.
    pub p99_ns: f64,
    /// See `p50_ns`.
    pub p999_ns: f64,
    /// Heap allocations per operation in the timed region.
    pub allocs_per_op: f64,
    /// A workload-specific score (P11: the smallest window Jain index).
    pub score: Option<f64>,
}

/// Everything measured for one backend on one workload; repetition `i` of every backend of a
/// workload ran back to back (interleaved), so same-index ratios are same-run ratios.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Row {
    /// Workload label, e.g. `pull 2 thr 4 cells`.
    pub workload: String,
    /// Backend label, e.g. `lock-free`.
    pub backend: String,
    /// Per repetition.
    pub reps: Vec<Rep>,
}

impl Row {
    /// The median over repetitions of `f`.
    pub fn median(&self, f: impl Fn(&Rep) -> f64) -> f64 {
        median(&self.reps.iter().map(f).collect::<Vec<_>>())
    }
}

/// Where the numbers were measured.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct System {
    /// `model name` from `/proc/cpuinfo`.
    pub cpu: String,
    /// Logical CPUs available to the process.
    pub cores: usize,
    /// Kernel release.
    pub kernel: String,
    /// Load averages (1, 5, 15 min) when the run ended: other work on the host shows here.
    #[serde(default)]
    pub load: String,
}

impl System {
    /// Reads `/proc` (or says "unknown").
    pub fn detect() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpu = read("/proc/cpuinfo")
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or_else(|| "unknown".to_owned(), |(_, v)| v.trim().to_owned());
        let kernel = read("/proc/sys/kernel/osrelease").trim().to_owned();
        Self {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: if kernel.is_empty() {
                "unknown".into()
            } else {
                kernel
            },
            load: read("/proc/loadavg")
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// One run of `fairway-perf`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Report {
    /// Where.
    pub system: System,
    /// The suite run.
    pub suite: String,
    /// Interleaved repetitions per workload.
    pub reps: usize,
    /// Wall time of the whole run, seconds.
    pub wall_s: f64,
    /// Every row.
    pub rows: Vec<Row>,
    /// The PERF.md targets whose rows ran.
    pub targets: Vec<Verdict>,
    /// Plots written.
    pub plots: Vec<String>,
}

/// The median (mean of the middle two for an even count), NaNs ignored; NaN when empty.
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

/// Smallest and largest of `values` (NaNs ignored).
pub fn range(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .filter(|x| !x.is_nan())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// A latency or 0 as a column.
fn ns(x: f64) -> String {
    if x > 0.0 {
        format!("{x:.0}")
    } else {
        "-".into()
    }
}

impl Report {
    /// The aligned text report: rows, then targets.
    pub fn text(&self) -> String {
        let s = &self.system;
        let mut out = format!(
            "fairway-perf, suite {}: {} interleaved repetitions, {:.0} s\ncpu: {} | cores: {} | kernel: {} | load average at the end: {}\n\n",
            self.suite, self.reps, self.wall_s, s.cpu, s.cores, s.kernel, s.load
        );
        let _ = writeln!(
            out,
            "medians over repetitions (latency: from enqueue, or from the scheduled arrival in open-loop rows)\n{:<28} {:<28} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8}",
            "workload", "backend", "Mops/s", "ns/op", "p50 ns", "p99 ns", "p99.9 ns", "alloc/op"
        );
        for r in &self.rows {
            let tput = r.median(|x| x.ops_per_sec);
            let score = r.median(|x| x.score.unwrap_or(f64::NAN));
            let _ = write!(
                out,
                "{:<28} {:<28} {:>9.3} {:>9.1} {:>9} {:>9} {:>10} {:>8.2}",
                r.workload,
                r.backend,
                tput / 1e6,
                1e9 / tput,
                ns(r.median(|x| x.p50_ns)),
                ns(r.median(|x| x.p99_ns)),
                ns(r.median(|x| x.p999_ns)),
                r.reps.iter().map(|x| x.allocs_per_op).fold(0.0, f64::max),
            );
            if !score.is_nan() {
                let _ = write!(out, "  score {score:.4}");
            }
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&crate::targets::text(&self.targets));
        for p in &self.plots {
            let _ = writeln!(out, "plot: {p}");
        }
        out
    }
}
