//! Idle executors beyond a class's waiter slots (SPEC F22, F23). In a binary of its own: the
//! tests measure the whole process's CPU time, which tests running beside them would disturb,
//! and they run one after the other (one `#[test]`).

#[macro_use]
mod common;

use common::*;
use fairway::admission::Ledger;
use fairway::oracle::Mechanism;
use fairway::{ClassId, Scheduler};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Every engine, one after the other (never side by side: see the module docs).
#[test]
fn f22_an_idle_class_costs_nothing_measurable_with_100_or_1000_executors() {
    for n in [100, 1000] {
        idle_executors::<fairway::oracle::Ring>(n);
        idle_executors::<fairway::oracle::Ring>(n);
        idle_executors::<fairway::oracle::Baseline>(n);
    }
}

/// CPU seconds this process has used (user + system), from `/proc/self/stat`.
#[cfg(target_os = "linux")]
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which may hold spaces) start at ") ".
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// More executors than a class has waiter slots (100 and 1,000 on a 1-cell class, whose slots
/// are 63 or 64) park in `next_blocking` until work arrives: the process's CPU time over a
/// quiet three seconds stays under 0.01 CPU-seconds per second (three clock ticks of
/// `/proc/self/stat`: its resolution; only this process's threads count, so a busy machine
/// cannot fail it). Before the fix the executors without a slot woke themselves and slept
/// 50 µs to 1 ms between polls (0.10–0.17 CPU-seconds per second for 100). Then every one of
/// them receives a job.
fn idle_executors<M: Mechanism>(executors: usize) {
    #[cfg(target_os = "linux")]
    {
        const QUIET: f64 = 3.0;
        let ledger = Ledger::new(ledger_config(1, 4)).unwrap();
        let sched = Scheduler::builder(ledger.clone())
            .payload::<u64>()
            .class(1, 2048)
            .build_with::<M>()
            .unwrap();
        let got = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..executors)
            .map(|_| {
                let (sched, got) = (sched.clone(), got.clone());
                std::thread::spawn(move || {
                    while let Ok(Some(job)) = sched.next_blocking(ClassId(0)) {
                        got.fetch_add(1, Ordering::SeqCst);
                        job.assignment.release();
                    }
                })
            })
            .collect();
        // Let them all reach their wait, then measure a quiet stretch.
        std::thread::sleep(Duration::from_millis(500));
        let before = cpu_seconds();
        std::thread::sleep(Duration::from_secs_f64(QUIET));
        let used = (cpu_seconds() - before) / QUIET;
        let engine = std::any::type_name::<M>();
        println!("{executors} idle executors on {engine}: {used:.3} CPU-seconds per second");
        assert!(
            used <= 0.01,
            "{executors} idle executors on {engine} used {used:.3} CPU-seconds per second"
        );
        for id in 0..executors as u64 {
            sched.submit(admit_id(&ledger, id, 0), id).unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while got.load(Ordering::SeqCst) < executors {
            assert!(
                std::time::Instant::now() < deadline,
                "only {} of {executors} jobs delivered",
                got.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // The shutdown must wake every parked executor, those past the waiter slots too: a
        // bounded wait names how many are still blocked instead of hanging the test.
        sched.shutdown();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while threads.iter().any(|t| !t.is_finished()) {
            let blocked = threads.iter().filter(|t| !t.is_finished()).count();
            assert!(
                std::time::Instant::now() < deadline,
                "{blocked} of {executors} executors still blocked 30 s after shutdown"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        for t in threads {
            t.join().unwrap();
        }
        assert!(ledger.usage().is_zero(), "{:?}", ledger.usage());
    }
}
