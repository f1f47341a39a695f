//! Idle executors beyond a class's waiter slots (SPEC F23). In a binary of its own: the test
//! measures the whole process's CPU time, which tests running beside it would disturb.

#[macro_use]
mod common;

use common::*;
use fairway::admission::Ledger;
use fairway::{ClassId, Mechanism, Scheduler};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Every engine, one after the other (never side by side: see the module docs).
#[test]
fn f23_idle_blocking_executors_beyond_the_waiter_slots_do_not_spin() {
    idle_executors::<fairway::LockFree>();
    idle_executors::<fairway::Ring>();
    idle_executors::<fairway::Baseline>();
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

/// More executors than a class has waiter slots (100 on a 1-cell class, whose slots are 64)
/// wait in `next_blocking` without burning CPU: before the fix the ones without a slot polled in
/// a tight loop (1–2 CPU-seconds per second). Then every one of them receives a job.
fn idle_executors<M: Mechanism>() {
    #[cfg(target_os = "linux")]
    {
        const EXECUTORS: usize = 100;
        let ledger = Ledger::new(ledger_config(1, 4)).unwrap();
        let sched = Scheduler::builder(ledger.clone())
            .payload::<u64>()
            .class(1, 256)
            .build_with::<M>()
            .unwrap();
        let got = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..EXECUTORS)
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
        std::thread::sleep(Duration::from_millis(300));
        let before = cpu_seconds();
        std::thread::sleep(Duration::from_millis(1000));
        let used = cpu_seconds() - before;
        println!("{EXECUTORS} idle executors: {used:.2} CPU-seconds in one second");
        assert!(
            used < 0.5,
            "{EXECUTORS} idle executors used {used:.2} CPU-seconds in one second"
        );
        for id in 0..EXECUTORS as u64 {
            sched.submit(admit_id(&ledger, id, 0), id).unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while got.load(Ordering::SeqCst) < EXECUTORS {
            assert!(
                std::time::Instant::now() < deadline,
                "only {} of {EXECUTORS} jobs delivered",
                got.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        sched.shutdown();
        for t in threads {
            t.join().unwrap();
        }
        assert!(ledger.usage().is_zero(), "{:?}", ledger.usage());
    }
}
