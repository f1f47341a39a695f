//! A plain-threads host with a worker pool per class, in pull mode (SPEC X02, X03).
//!
//! A build server with two kinds of work: `compile` jobs on 3 cells and `test` jobs on 2. Each
//! class has its own pool of worker threads that pull the next job by the fairness rules with
//! [`Scheduler::next_blocking`]; no async runtime is involved. Four tenants submit unequal
//! amounts of work — tenant 0 floods the `compile` class — and fairness across tenants keeps the
//! small tenants' jobs from waiting behind the flood. At the end a graceful drain runs what is
//! queued, the workers see `Ok(None)` and exit, and the ledger is back at zero.
//!
//! Run it with `cargo run --release --example threads_host`.

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::{AdmittedRequest, ClassId, RequestId, Scheduler, TenantId};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a worker runs. Kept small and allocation-free so the scheduler's costs stay visible.
#[derive(Debug)]
struct Task {
    tenant: u32,
    /// How long the "work" takes.
    spin: Duration,
    /// When it was submitted, for the report.
    submitted: Instant,
}

const COMPILE: ClassId = ClassId(0);
const TEST: ClassId = ClassId(1);
const TENANTS: u32 = 4;

/// Per-tenant figures the workers fill in.
#[derive(Default)]
struct Tally {
    done: [AtomicU64; TENANTS as usize],
    waited_ns: [AtomicU64; TENANTS as usize],
}

/// Runs the host; returns the number of jobs completed.
pub fn run(quiet: bool) -> Result<u64, fairway::Error> {
    // Admission: two classes; every tenant may have at most 64 requests admitted at once.
    let ledger = Ledger::new(
        LedgerConfig::new(
            vec![ClassSpec::new("compile"), ClassSpec::new("test")],
            TENANTS,
        )
        .tenant_limits(Limits::UNLIMITED.concurrency(64)),
    )?;
    // Scheduling: class 0 has 3 cells and room for 256 queued jobs, class 1 2 cells and 256.
    let scheduler = Scheduler::builder(ledger.clone())
        .payload::<Task>()
        .class(3, 256)
        .class(2, 256)
        .build()?;
    let tally = Arc::new(Tally::default());

    let started = Instant::now();
    let completed = std::thread::scope(|s| {
        // A worker pool per class: as many workers as cells, each pulling the next job.
        let mut workers = Vec::new();
        for (class, threads) in [(COMPILE, 3), (TEST, 2)] {
            for _ in 0..threads {
                let scheduler = &scheduler;
                let tally = &tally;
                workers.push(s.spawn(move || -> Result<u64, fairway::Error> {
                    let mut ran = 0;
                    // `Ok(None)` once the class is drained (or shut down).
                    while let Some(job) = scheduler.next_blocking(class)? {
                        let t = job.payload.tenant as usize;
                        tally.waited_ns[t].fetch_add(
                            job.payload.submitted.elapsed().as_nanos() as u64,
                            Ordering::Relaxed,
                        );
                        let until = Instant::now() + job.payload.spin;
                        while Instant::now() < until {
                            std::hint::spin_loop();
                        }
                        tally.done[t].fetch_add(1, Ordering::Relaxed);
                        // The cell goes back to the class; the permit's quota to the ledger.
                        job.assignment.release();
                        ran += 1;
                    }
                    Ok(ran)
                }));
            }
        }

        // Producers: tenant 0 submits 400 compile jobs, tenants 1–3 40 each, of both kinds.
        let mut next_id = 0u64;
        let mut submit = |tenant: u32, class: ClassId| -> Result<(), fairway::Error> {
            next_id += 1;
            let request = AdmissionRequest::new(RequestId(next_id), TenantId(tenant)).class(class);
            // Admission may refuse (the tenant is at its limit): wait a little and retry, as a
            // host applying backpressure to its clients would.
            let permit = loop {
                match ledger.admit(request.clone()) {
                    Ok(p) => break p,
                    Err(e) if e.code() == fairway::Code::ResourceExhausted => {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    Err(e) => return Err(e),
                }
            };
            let task = Task {
                tenant,
                spin: Duration::from_micros(if class == COMPILE { 50 } else { 80 }),
                submitted: Instant::now(),
            };
            // Token-less: nothing here cancels jobs, so no `CancellationToken` is made.
            scheduler
                .submit(AdmittedRequest::without_token(permit), task)
                .map(drop)
                .map_err(|e| e.error)
        };
        for round in 0..40 {
            for _ in 0..10 {
                submit(0, COMPILE)?;
            }
            for tenant in 1..TENANTS {
                submit(tenant, if round % 2 == 0 { COMPILE } else { TEST })?;
            }
        }

        // Graceful stop: no new work, run what is queued, wait for every cell to come back.
        scheduler.drain_blocking();
        let mut completed = 0;
        for w in workers {
            completed += w.join().expect("worker panicked")?;
        }
        Ok::<_, fairway::Error>(completed)
    })?;

    assert!(ledger.usage().is_zero(), "every permit was refunded");
    if !quiet {
        println!(
            "{completed} jobs in {:.1} ms on 5 worker threads",
            started.elapsed().as_secs_f64() * 1e3
        );
        for t in 0..TENANTS as usize {
            let done = tally.done[t].load(Ordering::Relaxed);
            let waited = tally.waited_ns[t].load(Ordering::Relaxed);
            println!(
                "tenant {t}: {done:4} jobs, mean wait {:7.1} µs",
                waited as f64 / done.max(1) as f64 / 1e3
            );
        }
        for class in [COMPILE, TEST] {
            let snap = scheduler.snapshot(class)?;
            println!(
                "class {}: {} granted, queue now {}",
                class.0, snap.grants, snap.queue_depth
            );
        }
    }
    Ok(completed)
}

#[allow(dead_code)] // `tests/examples.rs` includes this file and calls `run` itself.
fn main() -> Result<(), fairway::Error> {
    run(false).map(drop)
}
