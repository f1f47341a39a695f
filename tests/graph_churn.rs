//! Churn on threads with conservation at quiescence, on both graph engines: submitters race
//! executors; jobs depend on keys whose producers may not exist yet (SPEC D11) and fail by
//! script; at the end every job has exactly the outcome the gates imply (computed
//! sequentially), every node and edge slot is free, occupancy is back to zero and the ledger
//! holds nothing.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome, JobSpec,
};
use fairway::{ClassId, Code, Error, Reason, TenantId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

fn gate_of(x: u64) -> Gate {
    match x % 3 {
        0 => Gate::Sequential,
        1 => Gate::OnSuccess,
        _ => Gate::OnAdmission,
    }
}

/// Dependencies of job `k`: only on smaller keys (no cycles), the first on its fan-out parent.
fn deps_of(k: u64, fan_out: u64, extra: u64) -> Vec<Dependency> {
    let mut d = Vec::new();
    if k == 0 {
        return d;
    }
    d.push(Dependency {
        key: JobKey::new(if fan_out > 1 { k / fan_out } else { k - 1 }),
        gate: gate_of(mix(k)),
        pin: None,
    });
    for i in 0..mix(k ^ 0x55) % (extra + 1) {
        let p = mix(k * 31 + i) % k;
        if d.iter().any(|x| x.key == JobKey::new(p)) {
            continue;
        }
        d.push(Dependency {
            key: JobKey::new(p),
            gate: gate_of(mix(p ^ k)),
            pin: None,
        });
    }
    d
}

fn body_fails(k: u64) -> bool {
    mix(k ^ 0xdead).is_multiple_of(7)
}

/// (admitted, succeeded) for every key, in key order.
fn expected(n: u64, fan_out: u64, extra: u64) -> Vec<(bool, bool)> {
    let mut out: Vec<(bool, bool)> = Vec::with_capacity(n as usize);
    for k in 0..n {
        let mut ok = true;
        for d in deps_of(k, fan_out, extra) {
            let (admitted, succeeded) = out[d.key.key.0 as usize];
            let met = match d.gate {
                Gate::Sequential => true,
                Gate::OnSuccess => succeeded,
                Gate::OnAdmission => admitted,
            };
            ok &= met;
        }
        out.push(if ok {
            (true, !body_fails(k))
        } else {
            (false, false)
        });
    }
    out
}

fn churn<E: GraphEngine>(n: u64, fan_out: u64, extra: u64, submitters: u64, executors: usize) {
    let ledger = Ledger::new(LedgerConfig::new(
        vec![ClassSpec::new("cpu"), ClassSpec::new("io")],
        4,
    ))
    .unwrap();
    let g = Graph::builder(ledger)
        .class(2)
        .class(2)
        .nodes(n as u32)
        .edges((n * (extra + 1)) as u32)
        .keys((n * 2) as u32)
        .max_deps(extra as u32 + 1)
        .build_with::<E>()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Arc<Mutex<Vec<Option<JobHandle>>>> = Arc::new(Mutex::new(vec![None; n as usize]));
    let mut execs = Vec::new();
    for e in 0..executors {
        let g = g.clone();
        let stop = stop.clone();
        execs.push(std::thread::spawn(move || {
            let class = ClassId((e % 2) as u16);
            let mut ran = 0u64;
            loop {
                // Its own class first, then the other: every class is served.
                let next = g
                    .try_next(class)
                    .or_else(|| g.try_next(ClassId(1 - class.0)));
                match next {
                    Some(job) => {
                        ran += 1;
                        let outcome = if body_fails(job.key().key.0) {
                            JobOutcome::Failed(Error::new(Code::Internal, Reason::Failed))
                        } else {
                            JobOutcome::Succeeded
                        };
                        g.complete(job, outcome).unwrap();
                    }
                    None => {
                        if stop.load(Ordering::Acquire) {
                            return ran;
                        }
                        std::thread::yield_now();
                    }
                }
            }
        }));
    }
    let mut subs = Vec::new();
    for t in 0..submitters {
        let g = g.clone();
        let handles = handles.clone();
        subs.push(std::thread::spawn(move || {
            // Each submitter takes every `submitters`-th key, in descending order, so
            // dependents often arrive before their producers.
            let mut keys: Vec<u64> = (0..n).filter(|k| k % submitters == t).collect();
            if t % 2 == 0 {
                keys.reverse();
            }
            for k in keys {
                let deps = deps_of(k, fan_out, extra);
                let spec = JobSpec {
                    key: JobKey::new(k),
                    tenant: TenantId((k % 4) as u32),
                    class: ClassId((k % 2) as u16),
                    priority: (k % 3) as u8,
                    deadline: None,
                    deps: &deps,
                };
                let h = loop {
                    match g.submit(&spec).unwrap() {
                        Admission::Admitted(h) => break h,
                        Admission::Backpressured => std::thread::yield_now(),
                        Admission::DedupeJoined(_) => unreachable!("every key is submitted once"),
                    }
                };
                handles.lock().unwrap()[k as usize] = Some(h);
            }
        }));
    }
    for s in subs {
        s.join().unwrap();
    }
    let handles: Vec<JobHandle> = handles.lock().unwrap().iter().map(|h| h.unwrap()).collect();
    // Wait for quiescence: every job has an outcome.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for (k, h) in handles.iter().enumerate() {
        while g.outcome(*h).unwrap().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "key {k} never ended: {:?}, deps {:?}",
                g.occupancy(),
                deps_of(k as u64, fan_out, extra)
            );
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Release);
    let ran: u64 = execs.into_iter().map(|e| e.join().unwrap()).sum();
    let want = expected(n, fan_out, extra);
    let mut admitted = 0;
    for (k, h) in handles.iter().enumerate() {
        let got = g.take_outcome(*h).unwrap().expect("ended");
        // Exactly one outcome: the handle is stale afterwards.
        assert!(g.take_outcome(*h).is_err());
        let (adm, ok) = want[k];
        admitted += u64::from(adm);
        match got {
            JobOutcome::Succeeded => assert!(ok, "key {k} succeeded, expected failure"),
            JobOutcome::Failed(e) => {
                assert!(!ok, "key {k} failed ({e}), expected success");
                if adm {
                    assert_eq!(e.reason(), Reason::Failed, "key {k}");
                } else {
                    assert_eq!(e.reason(), Reason::DependencyFailed, "key {k}");
                }
            }
        }
    }
    assert_eq!(ran, admitted, "every admitted job ran exactly once");
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
        (0, 0, 0, 0, 0),
        "{o:?}"
    );
    assert!(g.ledger().usage().is_zero());
}

#[test]
fn d13_churn_threads_conserve_tiny_single_thread_mutex() {
    churn::<fairway::oracle::MutexGraph>(20, 4, 1, 1, 1);
}

#[test]
fn d13_churn_threads_conserve_small_lock_free() {
    churn::<fairway::oracle::LockFreeGraph>(2_000, 4, 3, 3, 4);
}

#[test]
fn d13_churn_threads_conserve_small_mutex() {
    churn::<fairway::oracle::MutexGraph>(2_000, 4, 3, 3, 4);
}

/// Far from toy size: 10^4 jobs, each parent with 64 children.
#[test]
fn d13_churn_threads_conserve_ten_thousand_fan_out_64_lock_free() {
    churn::<fairway::oracle::LockFreeGraph>(10_000, 64, 2, 2, 4);
}

#[test]
fn d13_churn_threads_conserve_ten_thousand_fan_out_64_mutex() {
    churn::<fairway::oracle::MutexGraph>(10_000, 64, 2, 2, 4);
}

/// Two threads submit the two halves of a cycle at once, many times: in every round exactly one
/// is admitted and the other refused `invalid-argument / cycle`, whichever publishes last
/// (SPEC D15 under concurrency; the lock-free graph checks again when it publishes).
fn concurrent_cycle<E: GraphEngine>() {
    const ROUNDS: u64 = 2_000;
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1)).unwrap();
    let g = Graph::builder(ledger)
        .class(1)
        .nodes(ROUNDS as u32 + 8)
        .edges(2 * ROUNDS as u32 + 8)
        .keys(4 * ROUNDS as u32)
        .build_with::<E>()
        .unwrap();
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let side = |first: bool| {
        let g = g.clone();
        let barrier = barrier.clone();
        std::thread::spawn(move || {
            let mut admitted = Vec::new();
            for r in 0..ROUNDS {
                let (own, other) = if first {
                    (2 * r, 2 * r + 1)
                } else {
                    (2 * r + 1, 2 * r)
                };
                let deps = [Dependency {
                    key: JobKey::new(other),
                    gate: Gate::OnSuccess,
                    pin: None,
                }];
                barrier.wait();
                let out = g.submit(&JobSpec {
                    key: JobKey::new(own),
                    tenant: TenantId(0),
                    class: ClassId(0),
                    priority: 0,
                    deadline: None,
                    deps: &deps,
                });
                admitted.push(match out {
                    Ok(Admission::Admitted(_)) => true,
                    Err(e) => {
                        assert_eq!(
                            (e.code(), e.reason()),
                            (Code::InvalidArgument, Reason::Cycle)
                        );
                        false
                    }
                    Ok(other) => panic!("round {r}: {other:?}"),
                });
            }
            admitted
        })
    };
    let a = side(true);
    let b = side(false);
    let a = a.join().unwrap();
    let b = b.join().unwrap();
    for r in 0..ROUNDS as usize {
        assert!(a[r] ^ b[r], "round {r}: admitted {} and {}", a[r], b[r]);
    }
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.waiting), (ROUNDS as u32, ROUNDS as u32));
}

#[test]
fn d15_concurrent_cycle_halves_admit_exactly_one_lock_free() {
    concurrent_cycle::<fairway::oracle::LockFreeGraph>();
}

#[test]
fn d15_concurrent_cycle_halves_admit_exactly_one_mutex() {
    concurrent_cycle::<fairway::oracle::MutexGraph>();
}

/// The same conservation on a tokio runtime: executors are tasks awaiting [`Graph::next`],
/// submitters are tasks; at quiescence the scheduler shuts down and every executor ends.
fn churn_tokio<E: GraphEngine>(n: u64, fan_out: u64, extra: u64) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let ledger = Ledger::new(LedgerConfig::new(
        vec![ClassSpec::new("cpu"), ClassSpec::new("io")],
        4,
    ))
    .unwrap();
    let g = Graph::builder(ledger)
        .class(2)
        .class(1)
        .nodes(n as u32)
        .edges((n * (extra + 1)) as u32)
        .keys((n * 2) as u32)
        .max_deps(extra as u32 + 1)
        .build_with::<E>()
        .unwrap();
    rt.block_on(async {
        let mut execs = Vec::new();
        for e in 0..4u16 {
            let g = g.clone();
            execs.push(tokio::spawn(async move {
                let mut ran = 0u64;
                while let Some(job) = g.next(ClassId(e % 2)).await {
                    ran += 1;
                    let outcome = if body_fails(job.key().key.0) {
                        JobOutcome::Failed(Error::new(Code::Internal, Reason::Failed))
                    } else {
                        JobOutcome::Succeeded
                    };
                    g.complete(job, outcome).unwrap();
                    if ran.is_multiple_of(16) {
                        tokio::task::yield_now().await;
                    }
                }
                ran
            }));
        }
        let mut subs = Vec::new();
        for t in 0..2u64 {
            let g = g.clone();
            subs.push(tokio::spawn(async move {
                // Even keys ascending, odd ones descending (dependents before producers).
                let mut keys: Vec<u64> = (0..n).filter(|k| k % 2 == t).collect();
                if t == 1 {
                    keys.reverse();
                }
                let mut handles = Vec::new();
                for k in keys {
                    let deps = deps_of(k, fan_out, extra);
                    let spec = JobSpec {
                        key: JobKey::new(k),
                        tenant: TenantId((k % 4) as u32),
                        class: ClassId((k % 2) as u16),
                        priority: (k % 3) as u8,
                        deadline: None,
                        deps: &deps,
                    };
                    let h = loop {
                        match g.submit(&spec).unwrap() {
                            Admission::Admitted(h) => break h,
                            _ => tokio::task::yield_now().await,
                        }
                    };
                    handles.push((k, h));
                }
                handles
            }));
        }
        let mut handles = Vec::new();
        for s in subs {
            handles.extend(s.await.unwrap());
        }
        handles.sort_by_key(|&(k, _)| k);
        for &(_, h) in &handles {
            while g.outcome(h).unwrap().is_none() {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
        g.scheduler().shutdown();
        let mut ran = 0;
        for e in execs {
            ran += e.await.unwrap();
        }
        let want = expected(n, fan_out, extra);
        let admitted = want.iter().filter(|w| w.0).count() as u64;
        assert_eq!(ran, admitted, "every admitted job ran exactly once");
        for &(k, h) in &handles {
            let got = g.take_outcome(h).unwrap().expect("ended");
            assert_eq!(got.is_success(), want[k as usize].1, "key {k}");
        }
    });
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
        (0, 0, 0, 0, 0),
        "{o:?}"
    );
    assert!(g.ledger().usage().is_zero());
}

#[test]
fn d13_churn_tokio_conserves_lock_free() {
    churn_tokio::<fairway::oracle::LockFreeGraph>(3_000, 8, 3);
}

#[test]
fn d13_churn_tokio_conserves_mutex() {
    churn_tokio::<fairway::oracle::MutexGraph>(3_000, 8, 3);
}

/// A shutdown in the middle of churn: submitters race executors (dependents often before their
/// producers, SPEC D11) and a third thread shuts the graph down after `after` admissions. Every
/// job admitted before gets exactly one outcome — its body's if it ran, `unavailable /
/// shutdown` if it was queued or became ready too late, `dependency-failed` if a gate can no
/// longer hold — and at quiescence every slot is free and the ledger holds nothing.
fn shutdown_churn<E: GraphEngine>(n: u64, after: u64) {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    let g = Graph::builder(ledger)
        .class(2)
        .nodes(n as u32)
        .edges((n * 3) as u32)
        .keys((n * 2) as u32)
        .max_deps(3)
        .build_with::<E>()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let ran_so_far = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let admitted: Arc<Mutex<Vec<JobHandle>>> = Arc::new(Mutex::new(Vec::new()));
    let execs: Vec<_> = (0..2)
        .map(|_| {
            let (g, stop, ran_so_far) = (g.clone(), stop.clone(), ran_so_far.clone());
            std::thread::spawn(move || {
                let mut ran = 0u64;
                loop {
                    match g.try_next(ClassId(0)) {
                        Some(job) => {
                            ran += 1;
                            ran_so_far.fetch_add(1, Ordering::Relaxed);
                            let outcome = if body_fails(job.key().key.0) {
                                JobOutcome::Failed(Error::new(Code::Internal, Reason::Failed))
                            } else {
                                JobOutcome::Succeeded
                            };
                            g.complete(job, outcome).unwrap();
                        }
                        None if stop.load(Ordering::Acquire) => return ran,
                        None => std::thread::yield_now(),
                    }
                }
            })
        })
        .collect();
    let subs: Vec<_> = (0..2u64)
        .map(|t| {
            let (g, admitted) = (g.clone(), admitted.clone());
            std::thread::spawn(move || {
                // Even keys ascending, odd ones descending (dependents before producers).
                let mut keys: Vec<u64> = (0..n).filter(|k| k % 2 == t).collect();
                if t == 1 {
                    keys.reverse();
                }
                for k in keys {
                    let deps = deps_of(k, 4, 2);
                    let spec = JobSpec {
                        key: JobKey::new(k),
                        tenant: TenantId((k % 4) as u32),
                        class: ClassId(0),
                        priority: 0,
                        deadline: None,
                        deps: &deps,
                    };
                    match g.submit(&spec) {
                        Ok(Admission::Admitted(h)) => admitted.lock().unwrap().push(h),
                        Ok(other) => panic!("{other:?}"),
                        Err(e) => {
                            assert_eq!(e.reason(), Reason::Shutdown);
                            return;
                        }
                    }
                }
            })
        })
        .collect();
    while ran_so_far.load(Ordering::Relaxed) < after {
        std::thread::yield_now();
    }
    g.shutdown();
    for s in subs {
        s.join().unwrap();
    }
    let handles = admitted.lock().unwrap().clone();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for h in &handles {
        while g.outcome(*h).unwrap().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "a job never ended: {:?}",
                g.occupancy()
            );
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Release);
    let ran: u64 = execs.into_iter().map(|e| e.join().unwrap()).sum();
    let (mut bodies, mut shut, mut failed) = (0u64, 0u64, 0u64);
    for h in &handles {
        match g.take_outcome(*h).unwrap().expect("ended") {
            JobOutcome::Succeeded => bodies += 1,
            JobOutcome::Failed(e) => match e.reason() {
                Reason::Failed => bodies += 1,
                Reason::Shutdown => shut += 1,
                Reason::DependencyFailed => failed += 1,
                other => panic!("unexpected outcome {other:?}"),
            },
        }
        assert!(g.take_outcome(*h).is_err(), "exactly one outcome");
    }
    eprintln!(
        "admitted {}, ran {bodies}, shut down {shut}, dependency-failed {failed}",
        handles.len()
    );
    assert_eq!(
        ran, bodies,
        "every job that ran ended with its body's outcome"
    );
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
        (0, 0, 0, 0, 0),
        "{o:?}"
    );
    assert!(g.ledger().usage().is_zero());
}

#[test]
fn d02_shutdown_during_churn_ends_every_job_once_lock_free() {
    shutdown_churn_at_several_points::<fairway::oracle::LockFreeGraph>();
}

#[test]
fn d02_shutdown_during_churn_ends_every_job_once_mutex() {
    shutdown_churn_at_several_points::<fairway::oracle::MutexGraph>();
}

/// Shut down at once, a quarter of the way and three quarters of the way through the jobs
/// that can run.
fn shutdown_churn_at_several_points<E: GraphEngine>() {
    const N: u64 = 2_000;
    let runnable = expected(N, 4, 2).iter().filter(|(adm, _)| *adm).count() as u64;
    for after in [0, runnable / 4, runnable * 3 / 4] {
        shutdown_churn::<E>(N, after);
    }
}
