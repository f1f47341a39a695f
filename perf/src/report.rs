//! The report: system header, one row per backend and thread count, as an aligned text table or
//! one JSON document.
//!
//! The JSON is written by hand rather than with serde: the document is a flat list of rows of
//! numbers and a few fixed strings, so a 15-line string escaper is all it needs, and the perf
//! binary stays free of serde's proc-macro build time. A test parses the output with serde_json
//! (a dev-dependency only) to keep it honest.

use std::fmt::Write as _;

use crate::stats::{median, median_ratio, Latency};
use crate::timer::{Source, Timer};
use crate::workloads::Sample;

/// Where the numbers were measured.
#[derive(Debug, Clone)]
pub struct System {
    /// `model name` from `/proc/cpuinfo`.
    pub cpu: String,
    /// Logical CPUs available to the process.
    pub cores: usize,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Timer description, e.g. `tsc 2.45 GHz`.
    pub timer: String,
}

impl System {
    /// Reads `/proc` (or says "unknown") and describes `timer`.
    pub fn detect(timer: &Timer) -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".to_owned());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let timer = match timer.source() {
            Source::Tsc => format!(
                "tsc {:.2} GHz, resolution {:.2} ns",
                timer.ghz(),
                1.0 / timer.ghz()
            ),
            Source::Instant => "Instant, resolution 1 ns (reads cost ~50 ns)".to_owned(),
        };
        Self {
            cpu,
            cores,
            kernel,
            timer,
        }
    }
}

/// The metrics of one row, in report units.
#[derive(Debug, Clone, Copy, Default)]
pub struct Metrics {
    /// Throughput, million operations per second.
    pub mops: f64,
    /// Median latency, ns.
    pub p50: f64,
    /// 99th percentile latency, ns.
    pub p99: f64,
    /// 99.9th percentile latency, ns.
    pub p999: f64,
}

impl Metrics {
    fn of(sample: &Sample, timer: &Timer) -> Self {
        let q = |l: &Latency, q: f64| timer.ns(l.quantile(q) as f64);
        Self {
            mops: sample.ops_per_sec / 1e6,
            p50: q(&sample.latency, 0.5),
            p99: q(&sample.latency, 0.99),
            p999: q(&sample.latency, 0.999),
        }
    }

    /// The four metrics in column order.
    fn fields(&self) -> [f64; 4] {
        [self.mops, self.p50, self.p99, self.p999]
    }
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Row {
    /// Workload name.
    pub workload: &'static str,
    /// Backend label.
    pub backend: &'static str,
    /// Thread count.
    pub threads: usize,
    /// Repetitions that went into the medians.
    pub reps: usize,
    /// Medians over repetitions of each metric.
    pub median: Metrics,
    /// Medians over repetitions of `metric(backend) / metric(baseline)` within the same
    /// repetition (1 for the baseline itself).
    pub ratio: Metrics,
}

/// Builds rows from `samples`: for each thread count and backend, medians of the metrics, and
/// same-run ratios against `baseline`.
pub fn rows(workload: &'static str, samples: &[Sample], baseline: &str, timer: &Timer) -> Vec<Row> {
    let mut keys: Vec<(usize, &'static str)> = Vec::new();
    for s in samples {
        if !keys.contains(&(s.threads, s.backend)) {
            keys.push((s.threads, s.backend));
        }
    }
    // Per (threads, backend): metrics by repetition, sorted by repetition.
    let series = |threads: usize, backend: &str| -> Vec<Metrics> {
        let mut v: Vec<(usize, Metrics)> = samples
            .iter()
            .filter(|s| s.threads == threads && s.backend == backend)
            .map(|s| (s.rep, Metrics::of(s, timer)))
            .collect();
        v.sort_by_key(|(rep, _)| *rep);
        v.into_iter().map(|(_, m)| m).collect()
    };
    let column =
        |ms: &[Metrics], i: usize| -> Vec<f64> { ms.iter().map(|m| m.fields()[i]).collect() };
    keys.into_iter()
        .map(|(threads, backend)| {
            let own = series(threads, backend);
            let base = series(threads, baseline);
            let med = |i| median(&column(&own, i));
            let rat = |i| median_ratio(&column(&own, i), &column(&base, i));
            Row {
                workload,
                backend,
                threads,
                reps: own.len(),
                median: Metrics {
                    mops: med(0),
                    p50: med(1),
                    p99: med(2),
                    p999: med(3),
                },
                ratio: Metrics {
                    mops: rat(0),
                    p50: rat(1),
                    p99: rat(2),
                    p999: rat(3),
                },
            }
        })
        .collect()
}

/// The aligned text report.
pub fn text(system: &System, baseline: &str, rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cpu: {} | cores: {} | kernel: {} | timer: {}",
        system.cpu, system.cores, system.kernel, system.timer
    );
    let _ = writeln!(
        out,
        "medians over repetitions; x-columns: median of same-repetition ratios vs {baseline}"
    );
    let header = [
        "workload", "backend", "thr", "Mops/s", "x", "p50 ns", "x", "p99 ns", "x", "p99.9 ns", "x",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        let mut line = vec![
            r.workload.to_owned(),
            r.backend.to_owned(),
            r.threads.to_string(),
        ];
        for (m, x) in r.median.fields().into_iter().zip(r.ratio.fields()) {
            line.push(format!("{m:.1}"));
            line.push(format!("{x:.2}"));
        }
        table.push(line);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| table.iter().map(|l| l[c].len()).max().unwrap_or(0))
        .collect();
    for line in &table {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &w))| {
                if c < 2 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

/// Appends `s` as a JSON string literal.
pub fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends `x` as a JSON number (`null` when not finite: JSON has no NaN).
pub fn json_num(out: &mut String, x: f64) {
    if x.is_finite() {
        let _ = write!(out, "{x}");
    } else {
        out.push_str("null");
    }
}

/// Appends a metrics object.
fn json_metrics(out: &mut String, m: &Metrics) {
    let names = ["mops", "p50_ns", "p99_ns", "p999_ns"];
    out.push('{');
    for (i, (name, v)) in names.iter().zip(m.fields()).enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(out, name);
        out.push(':');
        json_num(out, v);
    }
    out.push('}');
}

/// The report as one JSON document.
pub fn json(system: &System, baseline: &str, rows: &[Row]) -> String {
    let mut out = String::from("{\"system\":{\"cpu\":");
    json_str(&mut out, &system.cpu);
    let _ = write!(out, ",\"cores\":{},\"kernel\":", system.cores);
    json_str(&mut out, &system.kernel);
    out.push_str(",\"timer\":");
    json_str(&mut out, &system.timer);
    out.push_str("},\"baseline\":");
    json_str(&mut out, baseline);
    out.push_str(",\"rows\":[");
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"workload\":");
        json_str(&mut out, r.workload);
        out.push_str(",\"backend\":");
        json_str(&mut out, r.backend);
        let _ = write!(
            out,
            ",\"threads\":{},\"reps\":{},\"median\":",
            r.threads, r.reps
        );
        json_metrics(&mut out, &r.median);
        out.push_str(",\"ratio\":");
        json_metrics(&mut out, &r.ratio);
        out.push('}');
    }
    out.push_str("]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_parses_and_escapes() {
        let system = System {
            cpu: "Odd \"CPU\"\\ \u{1}".to_owned(),
            cores: 2,
            kernel: "6.1".to_owned(),
            timer: "Instant".to_owned(),
        };
        let row = Row {
            workload: "ring",
            backend: "fairway Ring",
            threads: 2,
            reps: 5,
            median: Metrics {
                mops: 12.5,
                p50: 20.0,
                p99: 80.0,
                p999: f64::NAN,
            },
            ratio: Metrics {
                mops: 1.0,
                p50: 1.0,
                p99: 1.0,
                p999: 1.0,
            },
        };
        let doc = json(&system, "fairway Ring", &[row]);
        let v: serde_json::Value = serde_json::from_str(&doc).expect("valid JSON");
        assert_eq!(v["system"]["cpu"], system.cpu.as_str());
        assert_eq!(v["rows"][0]["median"]["mops"], 12.5);
        assert!(v["rows"][0]["median"]["p999_ns"].is_null());
    }
}
