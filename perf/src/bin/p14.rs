//! PERF P14 (SPEC F24): grant throughput of the other tenants while one thread is frozen
//! mid-turn, as a fraction of the same workload without that thread.
//!
//! Its own binary, built only with the `pause-points` feature, so the pause hook is in no other
//! row:
//!
//! ```text
//! cargo run --release -p fairway-perf --features pause-points --bin p14 [-- --reps N --window-ms M]
//! ```
//!
//! Workload: one class of 4 cells; each thread is one tenant and loops admit → enqueue (the
//! future polled with `yield_now` between polls) → about 200 ns of work → release. The
//! *frozen* run has 8 threads; thread 0 is armed at the engine's pause point (the mutex twins'
//! critical section, the engine's tenant turn) and
//! parks there the first time it reaches it, still holding what it holds. Once it is parked,
//! the grants of the 7 other threads are counted over a window. The *reference* run is the
//! same 7 threads without thread 0. Runs are interleaved (reference, frozen, per engine, per
//! repetition); the row reports the median ratio and its range.
//!
//! The engine (what `fairway::Scheduler` runs on) runs the same scheduler workload; thread 0 is
//! frozen at `ring.turn_owned`, the first time it holds a tenant's turn (any tenant's: a
//! release or an enqueue runs the turn it claims, whichever tenant that is), so the most it
//! can hold up is that tenant and the cells it already holds.
//!
//! A control row follows: the engine with thread 0 parked *outside* the engine while
//! holding one granted cell — the most F24 lets a stopped thread delay — which shows what an
//! engine meeting F24 could reach here, and that the measurement can see it.

use fairway::oracle::{Baseline, Mechanism, ParkingLotMutex, Ring, StdMutex};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use fairway::internals::pause::Gate;
use fairway::Assignment;
use fairway_bench_support::sched::Fixture;
use fairway_bench_support::Named;

/// Cells of the class.
const CELLS: u32 = 4;
/// The other tenants' threads (the reference run has exactly these).
const OTHERS: usize = 7;
/// How long thread 0 gets to reach its pause point.
const REACH: Duration = Duration::from_secs(5);
/// Settling time after thread 0 parked, before the window opens.
const SETTLE: Duration = Duration::from_millis(20);
/// The executor's stand-in work per grant.
const WORK: Duration = Duration::from_nanos(200);

/// Enqueues `req` and polls it, yielding between polls, until it resolves: the waiting thread
/// stays runnable, so the row measures the engine's grants rather than the operating system's
/// wake-up latency (which dominates `enqueue_blocking` on an oversubscribed machine).
fn grant<M: Mechanism>(f: &Fixture<M>, req: fairway::AdmittedRequest) -> Option<Assignment> {
    let mut fut = pin!(f.sched.enqueue(req));
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(r) => return r.ok(),
            Poll::Pending => std::thread::yield_now(),
        }
    }
}

/// The control row's "point": thread 0 takes one grant and parks outside the engine, holding
/// its cell (what F24 allows a stopped thread to delay), so the row shows what an engine that
/// meets F24 can reach on this workload.
const OUTSIDE: &str = "outside, one cell held";

/// A counter on a cache line of its own.
#[repr(align(128))]
struct Padded(AtomicU64);

/// One run's outcome: the other threads' grants per second in the window, or why there is none.
type Run = Result<f64, String>;

/// Runs the workload on engine `M`: threads `1..=OTHERS` always, thread 0 too if `frozen` names
/// the pause point to freeze it at. Returns the grants per second of threads `1..=OTHERS` over
/// `window`.
fn run<M: Mechanism>(frozen: Option<&'static str>, window: Duration) -> Run {
    let f = Fixture::<M>::new(CELLS, 256, 1 << 20);
    let counting = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let grants: Vec<Padded> = (0..=OTHERS).map(|_| Padded(AtomicU64::new(0))).collect();
    let gate = frozen.filter(|&p| p != OUTSIDE).map(Gate::new);
    let outside = AtomicBool::new(false);
    let first = if frozen.is_some() { 0 } else { 1 };
    std::thread::scope(|s| {
        for k in first..=OTHERS {
            let (f, counting, stop, grants, gate) = (&f, &counting, &stop, &grants, &gate);
            let outside = &outside;
            s.spawn(move || {
                if k == 0 {
                    match gate {
                        Some(g) => g.arm(),
                        None => {
                            let a = grant(f, f.request(0, 0)).expect("grant");
                            outside.store(true, Ordering::Release);
                            while !stop.load(Ordering::Relaxed) {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                            a.release();
                            return;
                        }
                    }
                }
                let mut i = k as u64;
                while !stop.load(Ordering::Relaxed) {
                    // Tenant `k` (the fixture's request `i` is tenant `i % 16`).
                    let req = f.request(i, 0);
                    i += 16;
                    if let Some(a) = grant(f, req) {
                        let t = Instant::now();
                        while t.elapsed() < WORK {
                            std::hint::spin_loop();
                        }
                        a.release();
                        if counting.load(Ordering::Relaxed) {
                            grants[k].0.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
        let reached = match (&gate, frozen) {
            (Some(g), _) => g.wait_parked(REACH),
            (None, Some(_)) => {
                let t = Instant::now();
                while !outside.load(Ordering::Acquire) && t.elapsed() < REACH {
                    std::thread::sleep(Duration::from_millis(1));
                }
                outside.load(Ordering::Acquire)
            }
            (None, None) => true,
        };
        let out = if reached {
            std::thread::sleep(SETTLE);
            counting.store(true, Ordering::Relaxed);
            let t0 = Instant::now();
            std::thread::sleep(window);
            counting.store(false, Ordering::Relaxed);
            let secs = t0.elapsed().as_secs_f64();
            let n: u64 = grants[1..]
                .iter()
                .map(|g| g.0.load(Ordering::Relaxed))
                .sum();
            Ok(n as f64 / secs)
        } else {
            Err(format!(
                "thread 0 never reached {} within {REACH:?}",
                frozen.unwrap_or("?")
            ))
        };
        stop.store(true, Ordering::Relaxed);
        if let Some(g) = &gate {
            g.release();
        }
        out
    })
}

/// The P14 row of engine `M` frozen at `point`: per-repetition ratios and reference rates.
struct Row {
    name: &'static str,
    point: &'static str,
    ratios: Vec<f64>,
    reference: Vec<f64>,
    errors: Vec<String>,
}

impl Row {
    fn new<M: Mechanism + Named>(point: &'static str) -> Row {
        Row {
            name: M::NAME,
            point,
            ratios: Vec::new(),
            reference: Vec::new(),
            errors: Vec::new(),
        }
    }

    fn measure<M: Mechanism>(&mut self, window: Duration) {
        self.record(run::<M>(None, window), run::<M>(Some(self.point), window));
    }

    fn record(&mut self, reference: Run, frozen: Run) {
        match (reference, frozen) {
            (Ok(reference), Ok(frozen)) => {
                self.reference.push(reference);
                self.ratios.push(if reference > 0.0 {
                    frozen / reference
                } else {
                    f64::NAN
                });
            }
            (Err(e), _) | (_, Err(e)) => self.errors.push(e),
        }
    }

    fn print(&self) {
        if self.ratios.is_empty() {
            println!(
                "P14 {:<12} no measurement: {}",
                self.name,
                self.errors.first().map_or("", String::as_str)
            );
            return;
        }
        let mut r = self.ratios.clone();
        r.sort_by(f64::total_cmp);
        let mut refs = self.reference.clone();
        refs.sort_by(f64::total_cmp);
        println!(
            "P14 {:<12} frozen at {:<23} other tenants' grants = {:>6.1} % of the 7-thread run \
             (median of {}, range {:.1}-{:.1} %; 7-thread run {:.0} grants/s){}  target >= 50 %: {}",
            self.name,
            self.point,
            100.0 * r[r.len() / 2],
            r.len(),
            100.0 * r[0],
            100.0 * r[r.len() - 1],
            refs[refs.len() / 2],
            if self.errors.is_empty() {
                String::new()
            } else {
                format!(" ({} runs failed: {})", self.errors.len(), self.errors[0])
            },
            if r[r.len() / 2] >= 0.5 { "met" } else { "MISSED" },
        );
    }
}

fn main() {
    let mut reps = 5usize;
    let mut window_ms = 200u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match a.as_str() {
            "--reps" => reps = value("--reps").max(1) as usize,
            "--window-ms" => window_ms = value("--window-ms").max(1),
            "--help" | "-h" => {
                println!("p14 [--reps N] [--window-ms M]");
                return;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let window = Duration::from_millis(window_ms);
    let mut std_mutex = Row::new::<Baseline<StdMutex>>("baseline.locked");
    let mut parking = Row::new::<Baseline<ParkingLotMutex>>("baseline.locked");
    let mut control = Row::new::<Ring>(OUTSIDE);
    let mut ring = Row::new::<Ring>("ring.turn_owned");
    for _ in 0..reps {
        control.measure::<Ring>(window);
        std_mutex.measure::<Baseline<StdMutex>>(window);
        parking.measure::<Baseline<ParkingLotMutex>>(window);
        ring.measure::<Ring>(window);
    }
    println!(
        "P14: {CELLS} cells, {OTHERS} other tenants' threads, window {window_ms} ms, {reps} \
         interleaved repetitions"
    );
    for row in [&ring, &std_mutex, &parking] {
        row.print();
    }
    println!("control (not a P14 row): thread 0 parked outside the engine, holding one cell");
    control.print();
}
