//! Churn on threads with conservation at quiescence, on both graph engines: submitters race
//! executors; jobs depend on keys whose producers may not exist yet (SPEC D11) and fail by
//! script; at the end every job has exactly the outcome the gates imply (computed
//! sequentially), every node and edge slot is free, occupancy is back to zero and the ledger
//! holds nothing. The urgency churn (SPEC D30) races demanders of mixed priorities and
//! deadlines against removals and advances, checks every live job's effective urgency exactly
//! once the racers are joined, and conserves at quiescence.

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

/// The demand plan of a churn (SPEC D31): which jobs' handles depart before the job ends
/// (`withdraw`), which are detached, and which are joined by a second submission of their key.
/// `withdraw` is closed under dependents (a job depending on a withdrawn one is withdrawn too),
/// so no job kept or detached has a withdrawn producer: their outcomes are still the ones
/// [`expected`] computes, while the withdrawn ones' depend on timing (cancelled, perhaps while
/// running, or ended before their demand left) and cascade upstream among themselves.
struct Plan {
    withdraw: Vec<bool>,
    detach: Vec<bool>,
    join: Vec<bool>,
}

/// How a withdrawn job's demand departs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Departure {
    /// Its handle is dropped right after the submission.
    Drop,
    /// `cancel()` right after the submission.
    Cancel,
    /// Dropped later, after more submissions of its submitter (perhaps while it runs).
    Later,
}

fn departure(k: u64) -> Departure {
    match mix(k ^ 0x5a5a) % 3 {
        0 => Departure::Drop,
        1 => Departure::Cancel,
        _ => Departure::Later,
    }
}

fn plan(n: u64, fan_out: u64, extra: u64) -> Plan {
    let n_ = n as usize;
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n_];
    for k in 0..n {
        for d in deps_of(k, fan_out, extra) {
            dependents[d.key.key.0 as usize].push(k as usize);
        }
    }
    let mut withdraw = vec![false; n_];
    for r in 0..n_ {
        if withdraw[r] || !mix(r as u64 ^ 0x77).is_multiple_of(12) {
            continue;
        }
        // `r` and everything depending on it, transitively, if that is at most eight jobs.
        let mut set = vec![r];
        let mut i = 0;
        while i < set.len() && set.len() <= 8 {
            for &d in &dependents[set[i]] {
                if !set.contains(&d) {
                    set.push(d);
                }
            }
            i += 1;
        }
        if set.len() <= 8 {
            for k in set {
                withdraw[k] = true;
            }
        }
    }
    let detach: Vec<bool> = (0..n_)
        .map(|k| !withdraw[k] && mix(k as u64 ^ 0x99).is_multiple_of(10))
        .collect();
    let join = (0..n_)
        .map(|k| !withdraw[k] && !detach[k] && mix(k as u64 ^ 0xab).is_multiple_of(8))
        .collect();
    Plan {
        withdraw,
        detach,
        join,
    }
}

/// What the executors saw of every key: runs, and completions refused `cancelled / withdrawn`.
struct Runs {
    ran: Vec<std::sync::atomic::AtomicU32>,
    refused: Vec<std::sync::atomic::AtomicU32>,
}

impl Runs {
    fn new(n: u64) -> Arc<Self> {
        Arc::new(Self {
            ran: (0..n).map(|_| Default::default()).collect(),
            refused: (0..n).map(|_| Default::default()).collect(),
        })
    }

    fn ran(&self, k: usize) -> u32 {
        self.ran[k].load(Ordering::Relaxed)
    }
}

/// An executor's completion of `job` with its scripted outcome: a job whose demand departed
/// (SPEC D31) may be refused `cancelled / withdrawn`; one kept or detached never is, and never
/// is told to stop. Returns whether it was refused.
fn complete_scripted<E: GraphEngine>(
    g: &fairway::oracle::GraphOn<E>,
    job: fairway::graph::RunningJob,
    plan: &Plan,
    runs: &Runs,
) -> bool {
    let k = job.key().key.0 as usize;
    runs.ran[k].fetch_add(1, Ordering::Relaxed);
    let told = job.is_cancelled();
    assert!(
        plan.withdraw[k] || !told,
        "key {k}: kept or detached, yet told to stop"
    );
    let outcome = if body_fails(k as u64) {
        JobOutcome::Failed(Error::new(Code::Internal, Reason::Failed))
    } else {
        JobOutcome::Succeeded
    };
    match g.complete(job, outcome) {
        Ok(()) => {
            assert!(!told, "key {k}: told to stop, yet its completion was taken");
            false
        }
        Err(e) => {
            assert!(
                plan.withdraw[k] && e.reason() == Reason::Withdrawn,
                "key {k} (withdrawn {}): completion refused {e}",
                plan.withdraw[k]
            );
            runs.refused[k].fetch_add(1, Ordering::Relaxed);
            true
        }
    }
}

/// What the submitters did with their handles (SPEC D31).
#[derive(Default, Debug)]
struct Demand {
    /// Withdrawn jobs, and of them the `cancel()`s that cancelled.
    withdrawn: u64,
    cancels_that_cancelled: u64,
    detached: u64,
    /// Joins (a second handle of a live job): kept to the end, and dropped at once.
    joins_kept: u64,
    joins_dropped: u64,
    /// Join attempts that met an ended job (`duplicate-key`) or a full claim count.
    joins_missed: u64,
}

/// One submitter's handling of job `k`'s fresh handle `h` by the plan: detached, withdrawn (now
/// or into `later`), or kept (and joined by a second submission of `spec`).
#[allow(clippy::too_many_arguments)] // the submitter's lists, passed apart so each is borrowed alone
fn place<E: GraphEngine>(
    g: &fairway::oracle::GraphOn<E>,
    plan: &Plan,
    spec: &JobSpec<'_>,
    k: u64,
    h: JobHandle<E>,
    kept: &mut Vec<(u64, JobHandle<E>)>,
    joiners: &mut Vec<(u64, JobHandle<E>)>,
    later: &mut Vec<JobHandle<E>>,
    demand: &mut Demand,
) {
    let ku = k as usize;
    if plan.detach[ku] {
        demand.detached += 1;
        h.detach();
    } else if plan.withdraw[ku] {
        demand.withdrawn += 1;
        match departure(k) {
            Departure::Drop => drop(h),
            Departure::Cancel => demand.cancels_that_cancelled += u64::from(h.cancel()),
            Departure::Later => later.push(h),
        }
    } else {
        kept.push((k, h));
        if plan.join[ku] {
            match g.submit(spec) {
                Ok(Admission::DedupeJoined(j)) => {
                    if mix(k ^ 0x10).is_multiple_of(2) {
                        // A demand that arrives and departs while the first one stays: the job
                        // is not cancelled.
                        demand.joins_dropped += 1;
                        drop(j);
                    } else {
                        demand.joins_kept += 1;
                        joiners.push((k, j));
                    }
                }
                Ok(Admission::Backpressured) => demand.joins_missed += 1,
                Err(e) if e.reason() == Reason::DuplicateKey => demand.joins_missed += 1,
                other => panic!("key {k}: a second submission of a live job gave {other:?}"),
            }
        }
    }
}

/// Quiescence and conservation of a churn whose submitters are done (SPEC D31): waits (bounded)
/// until every kept job has ended and nothing waits, is ready or runs (withdrawn and detached
/// jobs ended too), then checks every job: a kept one ended with `expected`'s outcome (and its
/// joiners read the same), a kept or detached one ran iff `expected` admits it, a withdrawn one
/// ran at most once; the only node slots in use are the kept jobs' (a job that ended with no
/// handle was freed); dropping every handle frees everything and the ledger holds nothing.
/// Returns the runs of withdrawn jobs and their refused completions.
#[allow(clippy::too_many_arguments)]
#[allow(clippy::needless_range_loop)] // `k` indexes four per-key tables at once
fn conserve<E: GraphEngine>(
    g: &fairway::oracle::GraphOn<E>,
    n: u64,
    fan_out: u64,
    extra: u64,
    plan: &Plan,
    runs: &Runs,
    kept: Vec<(u64, JobHandle<E>)>,
    joiners: Vec<(u64, JobHandle<E>)>,
) -> (u64, u64) {
    let limit = std::time::Instant::now() + TEST_LIMIT;
    for (k, h) in &kept {
        while h.outcome().is_none() {
            assert!(
                std::time::Instant::now() < limit,
                "kept key {k} never ended: {:?}, deps {:?}",
                g.occupancy(),
                deps_of(*k, fan_out, extra)
            );
            std::thread::yield_now();
        }
    }
    let want = expected(n, fan_out, extra);
    loop {
        let o = g.occupancy();
        if (o.waiting, o.ready, o.running) == (0, 0, 0) {
            break;
        }
        let stuck: Vec<u64> = (0..n)
            .filter(|&k| {
                let k = k as usize;
                (plan.detach[k] && want[k].0 && runs.ran(k) == 0) || plan.withdraw[k]
            })
            .take(16)
            .collect();
        assert!(
            std::time::Instant::now() < limit,
            "jobs with no handle never ended: {o:?}; detached not run or withdrawn (first 16): \
             {stuck:?}"
        );
        std::thread::yield_now();
    }
    let o = g.occupancy();
    assert_eq!(
        o.nodes_used as usize,
        kept.len(),
        "only the kept jobs hold node slots at quiescence: {o:?}"
    );
    let (mut withdrawn_ran, mut refused) = (0, 0);
    for k in 0..n as usize {
        let ran = runs.ran(k);
        if plan.withdraw[k] {
            assert!(ran <= 1, "withdrawn key {k} ran {ran} times");
            withdrawn_ran += u64::from(ran);
            refused += u64::from(runs.refused[k].load(Ordering::Relaxed));
        } else {
            assert_eq!(
                ran,
                u32::from(want[k].0),
                "key {k} (detached {}): ran {ran} times, expected admitted {}",
                plan.detach[k],
                want[k].0
            );
        }
    }
    for (k, h) in &kept {
        let got = h.outcome().expect("ended");
        assert_eq!(
            g.outcome(h).unwrap(),
            Some(got),
            "key {k}: the graph reads the same"
        );
        let (adm, ok) = want[*k as usize];
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
    let by_key: std::collections::HashMap<u64, JobOutcome> = kept
        .iter()
        .map(|(k, h)| (*k, h.outcome().expect("ended")))
        .collect();
    for (k, j) in &joiners {
        assert_eq!(j.outcome(), Some(by_key[k]), "joiner of key {k}");
    }
    let ids: Vec<_> = kept.iter().map(|(_, h)| h.id()).collect();
    drop(joiners);
    drop(kept);
    // The last handle of an ended job frees it.
    for id in ids {
        assert_eq!(g.outcome(id).unwrap_err().reason(), Reason::StaleHandle);
    }
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
        (0, 0, 0, 0, 0),
        "{o:?}"
    );
    assert!(g.ledger().usage().is_zero());
    (withdrawn_ran, refused)
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
    let plan = Arc::new(plan(n, fan_out, extra));
    let runs = Runs::new(n);
    let stop = Arc::new(AtomicBool::new(false));
    let mut execs = Vec::new();
    for e in 0..executors {
        let (g, stop, plan, runs) = (g.clone(), stop.clone(), plan.clone(), runs.clone());
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
                        // The body of a job whose demand leaves late runs until told to stop
                        // (at most 2 ms): its submitter may drop the handle meanwhile.
                        let k = job.key().key.0 as usize;
                        if plan.withdraw[k] && departure(k as u64) == Departure::Later {
                            let t = std::time::Instant::now();
                            while !job.is_cancelled()
                                && t.elapsed() < std::time::Duration::from_millis(2)
                            {
                                std::thread::yield_now();
                            }
                        }
                        complete_scripted(&g, job, &plan, &runs);
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
        let (g, plan) = (g.clone(), plan.clone());
        subs.push(std::thread::spawn(move || {
            // Each submitter takes every `submitters`-th key, in descending order, so
            // dependents often arrive before their producers.
            let mut keys: Vec<u64> = (0..n).filter(|k| k % submitters == t).collect();
            if t % 2 == 0 {
                keys.reverse();
            }
            let (mut kept, mut joiners, mut later) = (Vec::new(), Vec::new(), Vec::new());
            let mut demand = Demand::default();
            let limit = std::time::Instant::now() + TEST_LIMIT;
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
                        Admission::Backpressured => {
                            assert!(
                                std::time::Instant::now() < limit,
                                "key {k}: backpressured for {TEST_LIMIT:?}: {:?}",
                                g.occupancy()
                            );
                            std::thread::yield_now()
                        }
                        Admission::DedupeJoined(_) => unreachable!("every key is submitted once"),
                    }
                };
                place(
                    &g,
                    &plan,
                    &spec,
                    k,
                    h,
                    &mut kept,
                    &mut joiners,
                    &mut later,
                    &mut demand,
                );
            }
            // Late departures: after every submission, one by one while executors run (the
            // job may have ended, be running, queued or waiting).
            (kept, joiners, demand, later)
        }));
    }
    let (mut kept, mut joiners, mut demand) = (Vec::new(), Vec::new(), Demand::default());
    let mut later = Vec::new();
    for s in subs {
        let (k, j, d, l) = join_within(s, TEST_LIMIT, "a submitter (backpressured?)");
        later.extend(l);
        kept.extend(k);
        joiners.extend(j);
        demand.withdrawn += d.withdrawn;
        demand.cancels_that_cancelled += d.cancels_that_cancelled;
        demand.detached += d.detached;
        demand.joins_kept += d.joins_kept;
        demand.joins_dropped += d.joins_dropped;
        demand.joins_missed += d.joins_missed;
    }
    kept.sort_by_key(|&(k, _)| k);
    for h in later {
        std::thread::sleep(std::time::Duration::from_micros(20));
        drop(h);
    }
    let (withdrawn_ran, refused) = conserve(&g, n, fan_out, extra, &plan, &runs, kept, joiners);
    stop.store(true, Ordering::Release);
    let ran: u64 = execs
        .into_iter()
        .map(|e| join_within(e, TEST_LIMIT, "an executor at quiescence"))
        .sum();
    let want = expected(n, fan_out, extra);
    let admitted = (0..n as usize)
        .filter(|&k| !plan.withdraw[k] && want[k].0)
        .count() as u64;
    assert_eq!(
        ran,
        admitted + withdrawn_ran,
        "every admitted job kept or detached ran exactly once, withdrawn ones at most once"
    );
    eprintln!(
        "{n} jobs: {demand:?}; withdrawn jobs that ran {withdrawn_ran}, their completions \
         refused {refused}"
    );
    if n >= 1_000 {
        assert!(
            demand.withdrawn > 0
                && demand.detached > 0
                && demand.joins_kept + demand.joins_dropped > 0,
            "{demand:?}"
        );
    }
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
            // The admitted halves' handles: held, each job waits (on a producer that never
            // comes) rather than being withdrawn (SPEC D31).
            let mut held = Vec::new();
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
                    Ok(Admission::Admitted(h)) => {
                        held.push(h);
                        true
                    }
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
            (admitted, held)
        })
    };
    let a = side(true);
    let b = side(false);
    let (a, held_a) = join_within(a, TEST_LIMIT, "the first halves' submitter");
    let (b, held_b) = join_within(b, TEST_LIMIT, "the second halves' submitter");
    for r in 0..ROUNDS as usize {
        assert!(a[r] ^ b[r], "round {r}: admitted {} and {}", a[r], b[r]);
    }
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.waiting), (ROUNDS as u32, ROUNDS as u32));
    // Their demand departs: each waiting half is withdrawn and freed.
    for h in held_a.iter().chain(&held_b) {
        assert_eq!(h.outcome(), None);
    }
    drop((held_a, held_b));
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.edges_used, o.waiting), (0, 0, 0), "{o:?}");
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
/// submitters are tasks, with the same demand departures (SPEC D31); a late departure awaits its
/// handle a little first and drops it while awaited (a timeout). Kept handles are awaited (each
/// bounded). At quiescence the scheduler shuts down and every executor ends.
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
    let plan = Arc::new(plan(n, fan_out, extra));
    let runs = Runs::new(n);
    let (kept, joiners, demand, execs) = rt.block_on(async {
        let mut execs = Vec::new();
        for e in 0..4u16 {
            let (g, plan, runs) = (g.clone(), plan.clone(), runs.clone());
            execs.push(tokio::spawn(async move {
                let mut ran = 0u64;
                while let Some(job) = g.next(ClassId(e % 2)).await {
                    ran += 1;
                    // As on threads: the body of a late-departing job awaits its signal (at
                    // most 2 ms).
                    let k = job.key().key.0 as usize;
                    if plan.withdraw[k] && departure(k as u64) == Departure::Later {
                        let _ = tokio::time::timeout(
                            std::time::Duration::from_millis(2),
                            job.cancelled(),
                        )
                        .await;
                    }
                    complete_scripted(&g, job, &plan, &runs);
                    if ran.is_multiple_of(16) {
                        tokio::task::yield_now().await;
                    }
                }
                ran
            }));
        }
        let mut subs = Vec::new();
        for t in 0..2u64 {
            let (g, plan) = (g.clone(), plan.clone());
            subs.push(tokio::spawn(async move {
                // Even keys ascending, odd ones descending (dependents before producers).
                let mut keys: Vec<u64> = (0..n).filter(|k| k % 2 == t).collect();
                if t == 1 {
                    keys.reverse();
                }
                let (mut kept, mut joiners, mut later) = (Vec::new(), Vec::new(), Vec::new());
                let mut demand = Demand::default();
                let limit = std::time::Instant::now() + TEST_LIMIT;
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
                            _ => {
                                assert!(
                                    std::time::Instant::now() < limit,
                                    "key {k}: not admitted for {TEST_LIMIT:?}: {:?}",
                                    g.occupancy()
                                );
                                tokio::task::yield_now().await
                            }
                        }
                    };
                    place(
                        &g,
                        &plan,
                        &spec,
                        k,
                        h,
                        &mut kept,
                        &mut joiners,
                        &mut later,
                        &mut demand,
                    );
                    // A late departure: awaited a moment, then dropped (perhaps still awaited:
                    // the future is the handle).
                    if let Some(mut h) = later.pop() {
                        let _ = tokio::time::timeout(std::time::Duration::from_micros(200), &mut h)
                            .await;
                        drop(h);
                    }
                }
                (kept, joiners, demand)
            }));
        }
        let (mut kept, mut joiners, mut demand) = (Vec::new(), Vec::new(), Demand::default());
        for s in subs {
            let (k, j, d) = tokio::time::timeout(TEST_LIMIT, s)
                .await
                .expect("a submitter task never finished (backpressured?)")
                .unwrap();
            kept.extend(k);
            joiners.extend(j);
            demand.withdrawn += d.withdrawn;
            demand.cancels_that_cancelled += d.cancels_that_cancelled;
            demand.detached += d.detached;
            demand.joins_kept += d.joins_kept;
            demand.joins_dropped += d.joins_dropped;
            demand.joins_missed += d.joins_missed;
        }
        kept.sort_by_key(|&(k, _)| k);
        // Every kept job's outcome, awaited through its handle.
        for (k, h) in &mut kept {
            let o = tokio::time::timeout(TEST_LIMIT, &mut *h)
                .await
                .unwrap_or_else(|_| panic!("kept key {k} never ended: {:?}", g.occupancy()));
            assert_eq!(
                h.outcome(),
                Some(o),
                "key {k}: the awaited outcome is the held one"
            );
        }
        (kept, joiners, demand, execs)
    });
    let (withdrawn_ran, refused) = conserve(&g, n, fan_out, extra, &plan, &runs, kept, joiners);
    let ran: u64 = rt.block_on(async {
        g.scheduler().shutdown();
        let mut ran = 0;
        for e in execs {
            ran += tokio::time::timeout(TEST_LIMIT, e)
                .await
                .expect("an executor task never ended after the scheduler's shutdown")
                .unwrap();
        }
        ran
    });
    let want = expected(n, fan_out, extra);
    let admitted = (0..n as usize)
        .filter(|&k| !plan.withdraw[k] && want[k].0)
        .count() as u64;
    assert_eq!(
        ran,
        admitted + withdrawn_ran,
        "every admitted job kept or detached ran exactly once, withdrawn ones at most once"
    );
    eprintln!(
        "tokio, {n} jobs: {demand:?}; withdrawn jobs that ran {withdrawn_ran}, their \
         completions refused {refused}"
    );
    assert!(
        demand.withdrawn > 0 && demand.detached > 0 && demand.joins_kept + demand.joins_dropped > 0,
        "{demand:?}"
    );
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
    let admitted: Arc<Mutex<Vec<JobHandle<E>>>> = Arc::new(Mutex::new(Vec::new()));
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
        join_within(s, TEST_LIMIT, "a submitter after the shutdown");
    }
    let handles = std::mem::take(&mut *admitted.lock().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for h in &handles {
        while g.outcome(h).unwrap().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "a job never ended: {:?}",
                g.occupancy()
            );
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Release);
    let ran: u64 = execs
        .into_iter()
        .map(|e| join_within(e, TEST_LIMIT, "an executor after the shutdown"))
        .sum();
    let (mut bodies, mut shut, mut failed) = (0u64, 0u64, 0u64);
    let admitted = handles.len();
    for h in handles {
        match g.outcome(&h).unwrap().expect("ended") {
            JobOutcome::Succeeded => bodies += 1,
            JobOutcome::Failed(e) => match e.reason() {
                Reason::Failed => bodies += 1,
                Reason::Shutdown => shut += 1,
                Reason::DependencyFailed => failed += 1,
                other => panic!("unexpected outcome {other:?}"),
            },
        }
        // Its only handle: dropping it frees the job.
        let id = h.id();
        drop(h);
        assert_eq!(
            g.outcome(id).unwrap_err().reason(),
            Reason::StaleHandle,
            "exactly one outcome"
        );
    }
    eprintln!("admitted {admitted}, ran {bodies}, shut down {shut}, dependency-failed {failed}");
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

/// The own urgency of job `k` in the urgency churn (SPEC D30): a priority in `0..8` and, for a
/// third of the keys, a deadline one to 64 seconds on the manual clock, which stays at zero (so
/// no deadline passes and the values are absolute).
fn own_urgency(k: u64) -> (u8, Option<u64>) {
    let x = mix(k ^ 0x0bad_cafe);
    let deadline = x
        .is_multiple_of(3)
        .then(|| (1 + (x >> 8) % 64) * 1_000_000_000);
    (((x >> 4) % 8) as u8, deadline)
}

/// The larger urgency of `a` and `b`, component by component (priority up, deadline earlier).
fn urgency_max(a: (u8, Option<u64>), b: (u8, Option<u64>)) -> (u8, Option<u64>) {
    let d = match (a.1, b.1) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    (a.0.max(b.0), d)
}

fn urgent_spec(k: u64, deps: &[Dependency]) -> JobSpec<'_> {
    let (priority, deadline) = own_urgency(k);
    JobSpec {
        key: JobKey::new(k),
        tenant: TenantId((k % 4) as u32),
        class: ClassId(0),
        priority,
        deadline: deadline.map(std::time::Duration::from_nanos),
        deps,
    }
}

/// Submits until admitted (waiting out backpressure).
fn admit_urgent<E: GraphEngine>(
    g: &fairway::oracle::GraphOn<E>,
    k: u64,
    deps: &[Dependency],
) -> JobHandle<E> {
    let limit = std::time::Instant::now() + TEST_LIMIT;
    loop {
        match g.submit(&urgent_spec(k, deps)).unwrap() {
            Admission::Admitted(h) => return h,
            Admission::Backpressured => {
                assert!(
                    std::time::Instant::now() < limit,
                    "key {k}: backpressured for {TEST_LIMIT:?}: {:?}",
                    g.occupancy()
                );
                std::thread::yield_now();
            }
            Admission::DedupeJoined(_) => unreachable!("every key is submitted once"),
        }
    }
}

#[path = "common/bound.rs"]
mod bound;
use bound::{join_within, within, TEST_LIMIT};

/// One job of the urgency churn: its key, handle and dependencies.
struct Urgent<E: GraphEngine> {
    key: u64,
    handle: JobHandle<E>,
    deps: Vec<(u64, Gate)>,
}

/// The effective urgency every live job of `jobs` must have (SPEC D30), computed from the
/// graph's structure: its own, joined with that of every live job with a pending edge on it.
/// Producers `0..producers` never run here; the even ones have no dependency (admitted, so an
/// `OnAdmission` edge on them is released), every other job waits.
fn expected_urgency<E: GraphEngine>(
    g: &fairway::oracle::GraphOn<E>,
    jobs: &[Urgent<E>],
    producers: u64,
) -> Vec<Option<(u8, Option<u64>)>> {
    let live: Vec<bool> = jobs
        .iter()
        .map(|j| g.outcome(&j.handle).unwrap().is_none())
        .collect();
    let by_key: std::collections::HashMap<u64, usize> =
        jobs.iter().enumerate().map(|(i, j)| (j.key, i)).collect();
    let mut dependents: Vec<Vec<(usize, Gate)>> = vec![Vec::new(); jobs.len()];
    for (i, j) in jobs.iter().enumerate() {
        for &(k, gate) in &j.deps {
            dependents[by_key[&k]].push((i, gate));
        }
    }
    fn eff<E: GraphEngine>(
        x: usize,
        jobs: &[Urgent<E>],
        live: &[bool],
        dependents: &[Vec<(usize, Gate)>],
        producers: u64,
        memo: &mut Vec<Option<(u8, Option<u64>)>>,
    ) -> (u8, Option<u64>) {
        if let Some(v) = memo[x] {
            return v;
        }
        let admitted = jobs[x].key < producers && jobs[x].key.is_multiple_of(2);
        let mut v = own_urgency(jobs[x].key);
        for &(y, gate) in &dependents[x] {
            if live[y] && !(gate == Gate::OnAdmission && admitted) {
                v = urgency_max(v, eff(y, jobs, live, dependents, producers, memo));
            }
        }
        memo[x] = Some(v);
        v
    }
    let mut memo = vec![None; jobs.len()];
    (0..jobs.len())
        .map(|x| live[x].then(|| eff(x, jobs, &live, &dependents, producers, &mut memo)))
        .collect()
}

/// Asserts that every live job of `jobs` has the effective urgency `expected_urgency` computes;
/// returns how many live jobs were raised above their own values.
fn check_effective<E: GraphEngine>(
    g: &fairway::oracle::GraphOn<E>,
    jobs: &[Urgent<E>],
    producers: u64,
    when: &str,
) -> usize {
    let want = expected_urgency(g, jobs, producers);
    let mut raised = 0;
    for (j, w) in jobs.iter().zip(want) {
        let Some(w) = w else { continue };
        let got = g.effective(&j.handle).unwrap();
        assert_eq!(
            got,
            w,
            "{when}: key {} (own {:?}, deps {:?}) has the wrong effective urgency",
            j.key,
            own_urgency(j.key),
            j.deps
        );
        raised += usize::from(w != own_urgency(j.key));
    }
    raised
}

/// Churn with urgency on threads (SPEC D30, D31), in three phases on one graph.
///
/// 1. With no executor, `producers` jobs wait (odd ones on the even one before them, the even
///    ones queued in the scheduler); submitter threads race demanders of mixed priorities and
///    deadlines onto them (some on other demanders) while a leaver thread removes and advances
///    demander keys. Once they are joined, every live job's effective urgency is exactly its
///    own joined with that of its live pending demanders: no arrival missed, no stale raise.
/// 2. Two threads remove every demander key at once: every producer is back to its own values.
/// 3. Executors start; submitters add jobs with dependencies on earlier keys and producers while
///    a leaver removes and advances keys; each pulled job is at least as urgent as its own values.
///    After a last removal of every key the leaver touched (waiters on a key with no producer
///    fail), at quiescence every job has ended exactly once, every completion refused is a job
///    superseded or removed while it ran, and occupancy, the ledger and the scheduler's queue
///    are all empty.
fn urgency_churn<E: GraphEngine>(
    seed: u64,
    producers: u64,
    demanders: u64,
    later: u64,
) -> (usize, u64) {
    const SUBMITTERS: u64 = 3;
    let clock = Arc::new(fairway::ManualClock::new());
    let ledger = Ledger::with_clock(
        LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)
            .tenant_limits(fairway::admission::Limits::UNLIMITED),
        clock,
    )
    .unwrap();
    let total = producers + SUBMITTERS * demanders + 2 * later;
    let g = Graph::builder(ledger)
        .class(2)
        .nodes(total as u32)
        .edges((total * 3) as u32)
        .keys((total * 4) as u32)
        .max_deps(3)
        .build_with::<E>()
        .unwrap();
    let mut jobs: Vec<Urgent<E>> = Vec::new();
    for k in 0..producers {
        let deps: Vec<(u64, Gate)> = if k % 2 == 1 {
            vec![(k - 1, Gate::OnSuccess)]
        } else {
            Vec::new()
        };
        let d: Vec<Dependency> = deps.iter().map(|&(k, gate)| dep_on(k, gate)).collect();
        jobs.push(Urgent {
            key: k,
            handle: admit_urgent(&g, k, &d),
            deps,
        });
    }
    // Phase 1: demanders arrive while others leave.
    let submitted: Arc<Mutex<Vec<Urgent<E>>>> = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicBool::new(false));
    let subs: Vec<_> = (0..SUBMITTERS)
        .map(|t| {
            let (g, submitted) = (g.clone(), submitted.clone());
            std::thread::spawn(move || {
                let first = 1_000 * (t + 1);
                for i in 0..demanders {
                    let k = first + i;
                    let x = mix(seed ^ k);
                    // The first dependency waits (a producer that never runs here, gate not
                    // `OnAdmission`), so a demander is never admitted in this phase; a third
                    // depend on an earlier demander of this thread too, with any gate.
                    let mut deps = vec![(
                        x % producers,
                        if x & 1 == 0 {
                            Gate::Sequential
                        } else {
                            Gate::OnSuccess
                        },
                    )];
                    let p2 = (x >> 8) % producers;
                    if p2 != deps[0].0 && (x >> 16).is_multiple_of(2) {
                        deps.push((p2, gate_of(x >> 20)));
                    }
                    if i > 0 && (x >> 24).is_multiple_of(3) {
                        deps.push((first + (x >> 28) % i, gate_of(x >> 32)));
                    }
                    let d: Vec<Dependency> =
                        deps.iter().map(|&(k, gate)| dep_on(k, gate)).collect();
                    let handle = admit_urgent(&g, k, &d);
                    submitted.lock().unwrap().push(Urgent {
                        key: k,
                        handle,
                        deps,
                    });
                    // Room for the leaver between arrivals.
                    std::thread::yield_now();
                }
            })
        })
        .collect();
    let leaver = {
        let (g, submitted, done) = (g.clone(), submitted.clone(), done.clone());
        std::thread::spawn(move || {
            let (mut removed, mut advanced) = (0u64, 0u64);
            let mut i = 0u64;
            while !done.load(Ordering::Acquire) {
                i += 1;
                let x = mix(seed ^ i ^ 0x1eaf);
                let pick = {
                    let s = submitted.lock().unwrap();
                    (!s.is_empty()).then(|| s[(x % s.len() as u64) as usize].key)
                };
                match pick {
                    Some(k) if x.is_multiple_of(3) => {
                        removed += u64::from(g.remove(JobKey::new(k)).is_ok())
                    }
                    Some(k) if x % 3 == 1 => {
                        advanced += u64::from(g.advance(JobKey::new(k)).is_ok())
                    }
                    _ => {}
                }
                std::thread::yield_now();
            }
            (removed, advanced)
        })
    };
    for s in subs {
        join_within(s, TEST_LIMIT, "a demander submitter (backpressured?)");
    }
    done.store(true, Ordering::Release);
    let (removed, advanced) = join_within(leaver, TEST_LIMIT, "the leaver of phase 1");
    jobs.append(&mut submitted.lock().unwrap());
    check_effective(&g, &jobs, producers, "after arrivals racing departures");
    let raised_values: Vec<_> = jobs[..producers as usize]
        .iter()
        .map(|j| g.effective(&j.handle).unwrap())
        .collect();
    // Phase 2: every demander leaves.
    let keys: Vec<u64> = jobs[producers as usize..].iter().map(|j| j.key).collect();
    let halves: Vec<_> = keys
        .chunks(keys.len().div_ceil(2).max(1))
        .map(|c| {
            let (g, c) = (g.clone(), c.to_vec());
            std::thread::spawn(move || {
                for k in c {
                    let _ = g.remove(JobKey::new(k));
                }
            })
        })
        .collect();
    for h in halves {
        join_within(h, TEST_LIMIT, "a remover of every demander");
    }
    for j in &jobs[producers as usize..] {
        assert!(
            g.outcome(&j.handle).unwrap().is_some(),
            "demander {} lives on after its key was removed",
            j.key
        );
    }
    // Only the producers' own chain still raises: an even producer is raised by the odd one
    // after it, and nothing else is above its own values.
    let chain = (0..producers / 2)
        .filter(|p| urgency_max(own_urgency(2 * p), own_urgency(2 * p + 1)) != own_urgency(2 * p))
        .count();
    assert_eq!(
        check_effective(&g, &jobs, producers, "after every demander left"),
        chain,
        "a producer kept an inherited value with no demander left"
    );
    // Producers raised by demanders in phase 1 and lowered again by their departure.
    let raised = jobs[..producers as usize]
        .iter()
        .zip(&raised_values)
        .filter(|(j, v)| g.effective(&j.handle).unwrap() != **v)
        .count();
    // Phase 3: executors, submitters and a leaver together.
    let stop = Arc::new(AtomicBool::new(false));
    let execs: Vec<_> = (0..2)
        .map(|_| {
            let (g, stop) = (g.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut ran, mut refused) = (0u64, 0u64);
                loop {
                    match g.try_next(ClassId(0)) {
                        Some(job) => {
                            ran += 1;
                            let k = job.key().key.0;
                            let (p, d) = g.effective(job.id()).unwrap();
                            let own = own_urgency(k);
                            assert!(
                                p >= own.0 && d.unwrap_or(u64::MAX) <= own.1.unwrap_or(u64::MAX),
                                "key {k} runs at {:?}, below its own {own:?}",
                                (p, d)
                            );
                            let outcome = if body_fails(k) {
                                JobOutcome::Failed(Error::new(Code::Internal, Reason::Failed))
                            } else {
                                JobOutcome::Succeeded
                            };
                            // The body runs a while: a removal or advance may meet it.
                            for _ in 0..k % 4 {
                                std::thread::yield_now();
                            }
                            if g.complete(job, outcome).is_err() {
                                refused += 1;
                            }
                        }
                        None if stop.load(Ordering::Acquire) => return (ran, refused),
                        None => std::thread::yield_now(),
                    }
                }
            })
        })
        .collect();
    let base = 100_000;
    let later_keys = Arc::new(Mutex::new(Vec::<u64>::new()));
    let subs: Vec<_> = (0..2u64)
        .map(|t| {
            let (g, later_keys) = (g.clone(), later_keys.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                for i in 0..later {
                    let k = base + 2 * i + t;
                    let x = mix(seed ^ k);
                    let mut deps = Vec::new();
                    for (j, shift) in [0u32, 20, 40].into_iter().enumerate() {
                        let y = x >> shift;
                        let on = if j == 0 || i == 0 {
                            y % producers
                        } else {
                            // An earlier key of either submitter (perhaps not submitted yet).
                            base + (y >> 4) % (2 * i)
                        };
                        if y % 4 != 3 && !deps.iter().any(|&(k, _)| k == on) {
                            deps.push((on, gate_of(y >> 2)));
                        }
                    }
                    let d: Vec<Dependency> =
                        deps.iter().map(|&(k, gate)| dep_on(k, gate)).collect();
                    out.push(Urgent {
                        key: k,
                        handle: admit_urgent(&g, k, &d),
                        deps,
                    });
                    later_keys.lock().unwrap().push(k);
                    std::thread::yield_now();
                }
                out
            })
        })
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let leaver = {
        let (g, later_keys, done) = (g.clone(), later_keys.clone(), done.clone());
        std::thread::spawn(move || {
            let mut touched = Vec::new();
            let mut i = 0u64;
            while !done.load(Ordering::Acquire) {
                i += 1;
                let x = mix(seed ^ i ^ 0x7ea);
                let pick = {
                    let s = later_keys.lock().unwrap();
                    (!s.is_empty()).then(|| s[(x % s.len() as u64) as usize])
                };
                if let Some(k) = pick {
                    let r = if x.is_multiple_of(2) {
                        g.remove(JobKey::new(k))
                    } else {
                        g.advance(JobKey::new(k)).map(|_| ())
                    };
                    if r.is_ok() {
                        touched.push(k);
                    }
                }
                for _ in 0..3 {
                    std::thread::yield_now();
                }
            }
            touched
        })
    };
    for s in subs {
        jobs.extend(join_within(s, TEST_LIMIT, "a submitter of phase 3"));
    }
    done.store(true, Ordering::Release);
    let touched = join_within(leaver, TEST_LIMIT, "the leaver of phase 3");
    // A key removed or advanced may have dependents waiting for a producer that never comes:
    // removing it once more fails them (SPEC D11, D24).
    for &k in &touched {
        let _ = g.remove(JobKey::new(k));
    }
    let limit = std::time::Instant::now() + TEST_LIMIT;
    for j in &jobs {
        while g.outcome(&j.handle).unwrap().is_none() {
            assert!(
                std::time::Instant::now() < limit,
                "key {} (deps {:?}) never ended: {:?}",
                j.key,
                j.deps,
                g.occupancy()
            );
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Release);
    let (mut ran, mut refused) = (0, 0);
    for e in execs {
        let (r, f) = join_within(e, TEST_LIMIT, "an executor at quiescence");
        ran += r;
        refused += f;
    }
    let mut reasons: std::collections::BTreeMap<String, u64> = Default::default();
    let mut bodies = 0;
    let count = jobs.len();
    for j in jobs {
        let got = g.outcome(&j.handle).unwrap().expect("ended");
        // Its only handle: dropping it frees the job.
        let id = j.handle.id();
        drop(j.handle);
        assert_eq!(
            g.outcome(id).unwrap_err().reason(),
            Reason::StaleHandle,
            "exactly one outcome"
        );
        let reason = match got {
            JobOutcome::Succeeded => {
                bodies += 1;
                "succeeded".to_owned()
            }
            JobOutcome::Failed(e) => {
                match e.reason() {
                    Reason::Failed => bodies += 1,
                    Reason::DependencyFailed | Reason::Superseded | Reason::Removed => {}
                    other => panic!("key {}: unexpected outcome {other:?} ({e})", j.key),
                }
                format!("{:?}", e.reason())
            }
        };
        *reasons.entry(reason).or_default() += 1;
    }
    eprintln!(
        "seed {seed:#x}: {} jobs; phase 1 removed {removed}, advanced {advanced}, producers raised then lowered {raised}; \
         phase 3 keys touched {}, ran {ran}, completions refused {refused}; outcomes {reasons:?}",
        count,
        touched.len()
    );
    assert_eq!(ran, bodies + refused, "every job that ran ended once");
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
        (0, 0, 0, 0, 0),
        "{o:?}"
    );
    assert!(g.ledger().usage().is_zero());
    assert_eq!(
        g.scheduler().snapshot(ClassId(0)).unwrap().queue_depth,
        0,
        "the scheduler's queue is empty"
    );
    (raised, removed + advanced)
}

fn dep_on(key: u64, gate: Gate) -> Dependency {
    Dependency {
        key: JobKey::new(key),
        gate,
        pin: None,
    }
}

/// Several seeds; the races reached raised producers and departures.
fn urgency_churn_seeds<E: GraphEngine>() {
    let (mut raised, mut left) = (0, 0);
    for seed in 1..=6u64 {
        let (r, l) = urgency_churn::<E>(seed * 0x9E37_79B9, 24, 120, 1_500);
        raised += r;
        left += l;
    }
    assert!(
        raised > 0 && left > 0,
        "producers raised then lowered {raised}, phase-1 departures {left}"
    );
}

#[test]
fn d30_urgency_churn_conserves_and_leaves_no_stale_raise_lock_free() {
    within(
        TEST_LIMIT,
        "d30 urgency churn, lock-free",
        urgency_churn_seeds::<fairway::oracle::LockFreeGraph>,
    );
}

#[test]
fn d30_urgency_churn_conserves_and_leaves_no_stale_raise_mutex() {
    within(
        TEST_LIMIT,
        "d30 urgency churn, mutex",
        urgency_churn_seeds::<fairway::oracle::MutexGraph>,
    );
}
