//! `fairway-perf`: side-by-side performance comparison of fairway against mutex baselines and
//! peer crates, following the method of the project's performance notes.
//!
//! ```text
//! cargo run --release -p fairway-perf [-- --quick] [--json] [--reps N] [--threads 1,2,8]
//! ```
//!
//! Backends run in the same process, interleaved (A B C D, A B C D, ...), for several
//! repetitions; the report shows medians and, for each metric, the median of the per-repetition
//! ratios against fairway's structure. Only those same-run ratios are comparable across runs and
//! machines; absolute figures move with the host.
//!
//! Layout: `timer` (cheap timestamps), `stats` (histograms, medians, ratios), `report` (text and
//! JSON), and one module per workload under `workloads`.

mod report;
mod stats;
mod timer;
mod workloads;

use std::process::ExitCode;
use std::time::Duration;

/// Command-line options.
#[derive(Debug, Clone, PartialEq)]
struct Args {
    /// A short run (seconds) for smoke checks.
    quick: bool,
    /// Print one JSON document instead of the table.
    json: bool,
    /// Repetitions per backend and thread count.
    reps: usize,
    /// Thread counts to run.
    threads: Vec<usize>,
}

/// Usage text for `--help` and argument errors.
const USAGE: &str = "usage: fairway-perf [--quick] [--json] [--reps N] [--threads 1,2,8]

  --quick          short runs (a few seconds in all)
  --json           print one JSON document instead of the table
  --reps N         interleaved repetitions per backend (default 5, 3 with --quick)
  --threads LIST   comma-separated thread counts (default 1,2,8)";

impl Args {
    /// Parses `args` (without the program name).
    fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut quick = false;
        let mut json = false;
        let mut reps = None;
        let mut threads = vec![1, 2, 8];
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
            match arg.as_str() {
                "--quick" => quick = true,
                "--json" => json = true,
                "--reps" => {
                    let v = value("--reps")?;
                    reps = Some(match v.parse() {
                        Ok(n) if n > 0 => n,
                        _ => return Err(format!("--reps: expected a positive integer, got {v:?}")),
                    });
                }
                "--threads" => {
                    let v = value("--threads")?;
                    threads = v
                        .split(',')
                        .map(|t| match t.trim().parse() {
                            Ok(n) if n > 0 => Ok(n),
                            _ => Err(format!("--threads: bad thread count {t:?}")),
                        })
                        .collect::<Result<_, _>>()?;
                }
                "-h" | "--help" => return Err(String::new()),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(Self {
            quick,
            json,
            reps: reps.unwrap_or(if quick { 3 } else { 5 }),
            threads,
        })
    }

    /// Wall time of one measured run.
    fn run_for(&self) -> Duration {
        Duration::from_millis(if self.quick { 25 } else { 200 })
    }
}

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let timer = timer::Timer::calibrate();
    let system = report::System::detect(&timer);
    if !args.json {
        eprintln!(
            "ring: {} backends x threads {:?} x {} reps, {} ms each...",
            4,
            args.threads,
            args.reps,
            args.run_for().as_millis()
        );
    }
    let samples = workloads::ring::run(&timer, &args.threads, args.reps, args.run_for());
    let baseline = workloads::ring::FAIRWAY;
    let rows = report::rows("ring", &samples, baseline, &timer);
    if args.json {
        println!("{}", report::json(&system, baseline, &rows));
    } else {
        print!("{}", report::text(&system, baseline, &rows));
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, String> {
        Args::parse(s.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn defaults() {
        let a = parse("").unwrap();
        assert_eq!(
            (a.quick, a.json, a.reps, a.threads),
            (false, false, 5, vec![1, 2, 8])
        );
    }

    #[test]
    fn all_flags() {
        let a = parse("--quick --json --reps 7 --threads 1,4").unwrap();
        assert_eq!(
            (a.quick, a.json, a.reps, a.threads),
            (true, true, 7, vec![1, 4])
        );
        assert_eq!(parse("--quick").unwrap().reps, 3);
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(parse("--reps 0").is_err());
        assert!(parse("--reps").is_err());
        assert!(parse("--threads 1,x").is_err());
        assert!(parse("--frobnicate").is_err());
    }

    #[test]
    fn quick_ring_run_reports_every_backend() {
        let timer = timer::Timer::calibrate();
        let samples = workloads::ring::run(&timer, &[1, 2], 2, Duration::from_millis(5));
        let rows = report::rows("ring", &samples, workloads::ring::FAIRWAY, &timer);
        assert_eq!(rows.len(), 8);
        for r in &rows {
            assert!(r.median.mops > 0.0, "{r:?}");
            assert_eq!(r.reps, 2);
        }
        assert!(rows
            .iter()
            .filter(|r| r.backend == workloads::ring::FAIRWAY)
            .all(|r| r.ratio.mops == 1.0));
    }
}
