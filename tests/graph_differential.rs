//! Differential test of the two graph engines (SPEC Q02 for section D): random single-threaded
//! sequences of submit (random keys, some not produced yet, random gates, cycles possible),
//! all-or-none batches of one to three such jobs (D04, dependencies inside the batch too), pull,
//! discover on a running job, complete with success or failure, and collect, give identical results and occupancy on the
//! lock-free graph and the mutex graph after every operation. Submits of a key whose job is live
//! join it (SPEC D02), submits through a [`DedupeHook`] that names another key's job join that
//! one (D03), and the joiners' outcomes are collected too.
//!
//! Urgency (SPEC D30): most submits carry a priority in `0..8` and some a deadline; `advance` and
//! `remove` of random keys make demanders leave before their producers ran, and the clock moves
//! on so queued requests expire. After every operation the effective priority and deadline of
//! every job held are compared too, and the grant order is compared through the pulls. The test
//! counts that the sequences reach a queued producer raised by a more urgent demander and a
//! departure that lowers a producer that has not run, and asserts both happened.
//!
//! Demand (SPEC D31): handles are owned, each engine's kept in its run's vectors. Demand arrives
//! with every admission and with joins of a live identity (a new handle), and departs when a
//! handle is dropped (after its job ended: the slot is freed; before: the demand is withdrawn,
//! perhaps cancelling the job and, transitively, producers it leaves without demand), detached
//! (the job runs on with no handle) or cancelled (both engines must return the same bool).
//! After every operation the outcome every held handle reads, occupancy, every key's
//! generation and every running job's signal are compared; at the end of each run every handle
//! is dropped, the graph drained, reset and drained again, and each engine must hold nothing.
//! A job read through a held handle is never withdrawn (a handle is demand). The test counts
//! dependency-cancelled outcomes, cancels that cancelled and ones
//! that did not, signalled running jobs, refused completions of withdrawn jobs, new jobs of a
//! cancelled identity, and departures that lower a producer's urgency, and asserts each happened.
//!
//! Fixed seeds by default; `FAIRWAY_GRAPH_DIFF_CASES` raises the number of cases.

#[path = "common/graph_ops.rs"]
mod graph_ops;

use fairway::graph::{Admission, Gate, JobOutcome};
use fairway::Error;
use fairway::Reason;
use graph_ops::{run, Op, Seen, Step, Urge};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_deps(r: &mut Rng) -> Vec<(u64, Gate)> {
    (0..r.below(4))
        .map(|_| {
            let gate = match r.below(3) {
                0 => Gate::Sequential,
                1 => Gate::OnSuccess,
                _ => Gate::OnAdmission,
            };
            (r.below(12), gate)
        })
        .collect()
}

/// A submit of `key`: plain (priority 0, no deadline) a third of the time, otherwise with a
/// priority in `0..8` and, a third of the time, a deadline one to eight seconds on.
fn submit(r: &mut Rng, key: u64) -> Op {
    let deps = random_deps(r);
    if r.below(3) == 0 {
        return Op::Submit(key, deps);
    }
    let priority = r.below(8) as u8;
    let deadline = (r.below(3) == 0).then(|| 1 + r.below(8));
    Op::Urgent(key, priority, deadline, deps)
}

fn ops(seed: u64, n: usize) -> Vec<Op> {
    let mut r = Rng(seed | 1);
    (0..n)
        .map(|_| match r.below(24) {
            19 => Op::DropHandle(r.below(8) as usize),
            20 => Op::Detach(r.below(8) as usize),
            21 => Op::Cancel(r.below(8) as usize),
            22 | 23 => Op::Join(r.below(8) as usize, r.below(8) as u8),
            14 | 15 => Op::Advance(r.below(12)),
            16 => Op::Remove(r.below(12)),
            17 => Op::Tick(1 + r.below(3)),
            18 => {
                let key = r.below(12);
                submit(&mut r, key)
            }
            12 => Op::Hooked(r.below(12), r.below(12)),
            13 => Op::TakeJoiner(r.below(4) as usize),
            11 => Op::Batch(
                (0..1 + r.below(3))
                    .map(|_| {
                        let key = r.below(12);
                        (key, random_deps(&mut r))
                    })
                    .collect(),
            ),
            0..=3 => {
                let key = r.below(12);
                submit(&mut r, key)
            }
            10 => {
                let i = r.below(8) as usize;
                Op::Discover(i, random_deps(&mut r))
            }
            4 | 5 => Op::Pull,
            6 | 7 => Op::Complete(r.below(8) as usize, r.below(3) != 0),
            _ => Op::Take(r.below(12)),
        })
        .collect()
}

/// An urgency as one number that grows with it: priority first, then the earlier deadline.
fn rank((p, d): (u8, Option<u64>)) -> (u8, u64) {
    (p, u64::MAX - d.unwrap_or(u64::MAX))
}

/// Engine-independent checks of one step's urgency log: a job that has not ended is at least as
/// urgent as its own values in both priority and deadline. Returns whether a queued job was
/// raised above its own values by a demander.
fn check_urgency(step: &Step, case: u64, i: usize) -> bool {
    let mut raised_queued = false;
    for u in &step.urgency {
        let Ok((p, d)) = u.effective else { continue };
        if u.ended || u.key == u64::MAX {
            continue;
        }
        assert!(
            p >= u.own.0 && d.unwrap_or(u64::MAX) <= u.own.1.unwrap_or(u64::MAX),
            "case {case} op {i}: job {u:?} is below its own urgency"
        );
        raised_queued |=
            u.queued && (p > u.own.0 || d.unwrap_or(u64::MAX) < u.own.1.unwrap_or(u64::MAX));
    }
    raised_queued
}

/// Whether a job that has not run (neither ended nor running), in both `before` and `after`,
/// became less urgent.
fn lowered(before: &Step, after: &Step) -> bool {
    let live = |u: &&Urge| !u.ended && !u.running && u.key != u64::MAX;
    after.urgency.iter().filter(live).any(|a| {
        before
            .urgency
            .iter()
            .filter(live)
            .find(|b| b.key == a.key)
            .is_some_and(|b| match (&b.effective, &a.effective) {
                (Ok(x), Ok(y)) => rank(*y) < rank(*x),
                _ => false,
            })
    })
}

/// Where the two engines first differ on `ops` (or one of them panics: at quiescence, say),
/// described; `None` when they agree.
fn difference(ops: &[Op]) -> Option<(usize, String)> {
    let quiet = |ops: &[Op]| {
        let ops = ops.to_vec();
        std::panic::catch_unwind(move || {
            (
                run::<fairway::oracle::LockFreeGraph>(&ops),
                run::<fairway::oracle::MutexGraph>(&ops),
            )
        })
    };
    match quiet(ops) {
        Err(e) => Some((
            ops.len(),
            format!(
                "a run panicked: {}",
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            ),
        )),
        Ok((a, b)) => a
            .iter()
            .zip(&b)
            .position(|(x, y)| x != y)
            .map(|i| (i, format!("lock-free {:#?}\nmutex {:#?}", a[i], b[i]))),
    }
}

/// A shortest sequence found (one operation removed at a time, while the engines still differ)
/// that makes the engines differ as `ops` does.
fn minimise(ops: &[Op]) -> Vec<Op> {
    let mut ops = ops.to_vec();
    // Only up to the first difference.
    if let Some((i, _)) = difference(&ops) {
        ops.truncate((i + 1).min(ops.len()));
    }
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    loop {
        let before = ops.len();
        let mut i = 0;
        while i < ops.len() {
            let mut fewer = ops.clone();
            fewer.remove(i);
            if difference(&fewer).is_some() {
                ops = fewer;
            } else {
                i += 1;
            }
        }
        if ops.len() == before {
            break;
        }
    }
    std::panic::set_hook(hook);
    ops
}

/// Whether `o` is a cancellation for want of demand (SPEC D31): withdrawn, or a dependent of a
/// cancelled producer.
fn cancelled(o: &Option<JobOutcome>) -> Option<Reason> {
    match o {
        Some(JobOutcome::Failed(e))
            if matches!(e.reason(), Reason::Withdrawn | Reason::DependencyCancelled) =>
        {
            Some(e.reason())
        }
        _ => None,
    }
}

fn is_withdrawn(r: &Result<(), Error>) -> bool {
    matches!(r, Err(e) if e.reason() == Reason::Withdrawn)
}

/// What the D31 demand operations reached, over all cases.
#[derive(Debug, Default)]
struct Demand {
    /// Handles dropped before their job ended, and after.
    dropped_live: u64,
    dropped_ended: u64,
    detached: u64,
    /// Cancels that cancelled the job, and ones that did not (other demand, or ended).
    cancels_true: u64,
    cancels_false: u64,
    /// Joins of a live identity through `Join`.
    joins: u64,
    /// Held jobs first seen ended `cancelled / dependency-cancelled` (a held job is never
    /// withdrawn: asserted).
    dependency_cancelled: u64,
    /// Steps where a running job is told to stop.
    signalled: u64,
    /// Completions refused `cancelled / withdrawn` (during the run, and at quiescence).
    refused_withdrawn: u64,
    /// `Join` on a cancelled job's key that admitted a new job at the key's next generation.
    new_after_cancel: u64,
    /// A departure (drop, detach, cancel) that lowered a producer that has not run.
    lowered_by_departure: u64,
}

#[test]
fn q02_graph_engines_agree_on_random_sequences() {
    let cases: u64 = std::env::var("FAIRWAY_GRAPH_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let mut submitted = 0;
    let mut refused_cycles = 0;
    let mut joined = 0;
    let mut backpressured = 0;
    let mut dependency_failed = 0;
    let mut discovered = 0;
    let (mut batches, mut batches_refused) = (0, 0);
    let (mut raised_queued, mut lowered_by_advance, mut lowered_by_remove) = (0, 0, 0);
    let (mut urgent_pulls, mut expired) = (0, 0);
    let mut demand = Demand::default();
    let mut steps = 0u64;
    for case in 0..cases {
        let seed = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(case + 1);
        let ops = ops(seed, 80);
        let a = run::<fairway::oracle::LockFreeGraph>(&ops);
        let b = run::<fairway::oracle::MutexGraph>(&ops);
        assert_eq!(
            a.len(),
            ops.len() + 1,
            "one step per operation, and the end"
        );
        assert_eq!(a.len(), b.len());
        if let Some(i) = a.iter().zip(&b).position(|(x, y)| x != y) {
            let min = minimise(&ops);
            let (at, what) = difference(&min).expect("the minimised sequence differs");
            panic!(
                "case {case} (seed {seed:#x}) differs at op {i} {:?}; ops so far {:?}\n\
                 minimised to {} ops, differing at op {at}: {min:?}\n{what}",
                ops.get(i),
                &ops[..i.min(ops.len() - 1) + 1],
                min.len()
            );
        }
        for (i, x) in a.iter().enumerate() {
            // The last step is the run's end at quiescence.
            let op = ops.get(i);
            steps += 1;
            if check_urgency(x, case, i) {
                raised_queued += 1;
            }
            if i > 0 && lowered(&a[i - 1], x) {
                match op {
                    Some(Op::Advance(_)) => lowered_by_advance += 1,
                    Some(Op::Remove(_)) => lowered_by_remove += 1,
                    Some(Op::DropHandle(_) | Op::Detach(_) | Op::Cancel(_)) => {
                        demand.lowered_by_departure += 1
                    }
                    _ => {}
                }
            }
            // Cancellations first seen in this step, through the handles still held.
            let before: Vec<_> = if i > 0 {
                a[i - 1].urgency.clone()
            } else {
                Vec::new()
            };
            for u in &x.urgency {
                let Some(reason) = cancelled(&u.outcome) else {
                    continue;
                };
                // A handle is demand: a job read through a held handle is never withdrawn
                // (its dependents may be dependency-cancelled: late linkers of a cancelled key).
                assert_ne!(
                    reason,
                    Reason::Withdrawn,
                    "case {case} op {i} {op:?}: a held job was withdrawn: {u:?}; ops {:?}",
                    &ops[..i.min(ops.len() - 1) + 1]
                );
                if !before
                    .iter()
                    .any(|b| b.key == u.key && b.outcome == u.outcome)
                {
                    demand.dependency_cancelled += 1;
                }
            }
            demand.signalled += u64::from(x.running.iter().any(|&(_, s)| s));
            match &x.seen {
                Seen::Departed(Some((_, before, _))) => match op {
                    Some(Op::Detach(_)) => demand.detached += 1,
                    _ if before.is_some() => demand.dropped_ended += 1,
                    _ => demand.dropped_live += 1,
                },
                Seen::Cancelled(Some((_, true, after))) => {
                    demand.cancels_true += 1;
                    // What cancelled it is its outcome (or it still runs, signalled).
                    assert!(
                        matches!(after, Ok(None))
                            || matches!(after, Ok(Some(JobOutcome::Failed(e)))
                                if e.reason() == Reason::Withdrawn)
                            || matches!(after, Err(e) if e.reason() == Reason::StaleHandle),
                        "case {case} op {i}: a cancel that cancelled reads {after:?}"
                    );
                }
                Seen::Cancelled(Some((_, false, _))) => demand.cancels_false += 1,
                Seen::Submitted(Ok("joined")) if matches!(op, Some(Op::Join(..))) => {
                    demand.joins += 1
                }
                Seen::Submitted(Ok("admitted")) => {
                    // A join of an identity whose job was cancelled admits a new job: the key
                    // advanced one generation (nothing else in the step advances a key).
                    if let Some(Op::Join(..)) = op {
                        if i > 0
                            && x.versions
                                .iter()
                                .zip(&a[i - 1].versions)
                                .any(|(n, o)| matches!((n, o), (Some(n), Some(o)) if n == &(o + 1)))
                        {
                            demand.new_after_cancel += 1;
                        }
                    }
                }
                Seen::Completed(Some((_, r))) if is_withdrawn(r) => demand.refused_withdrawn += 1,
                Seen::Quiesced(first, second) => {
                    demand.refused_withdrawn += first
                        .iter()
                        .chain(second)
                        .filter(|(_, r)| is_withdrawn(r))
                        .count() as u64
                }
                _ => {}
            }
            match &x.seen {
                // A pull of a job raised above its own priority.
                Seen::Pulled(Some(k))
                    if i > 0
                        && a[i - 1].urgency.iter().any(|u| {
                            u.key == k.key.0 && matches!(u.effective, Ok((p, _)) if p > u.own.0)
                        }) =>
                {
                    urgent_pulls += 1
                }
                Seen::Taken(Some(Ok(Some(JobOutcome::Failed(e)))))
                    if e.reason() == Reason::DeadlineExceeded =>
                {
                    expired += 1
                }
                _ => {}
            }
            match &x.seen {
                Seen::Submitted(Ok("admitted")) => submitted += 1,
                Seen::Submitted(Ok("backpressured")) => backpressured += 1,
                Seen::Submitted(Ok("joined")) => joined += 1,
                Seen::Submitted(Err(e)) if e.reason() == Reason::Cycle => refused_cycles += 1,
                Seen::Discovered(Some(Ok(Admission::Admitted(())))) => discovered += 1,
                Seen::Batched(Ok("admitted")) => batches += 1,
                Seen::Batched(_) => batches_refused += 1,
                Seen::Taken(Some(Ok(Some(JobOutcome::Failed(e)))))
                    if e.reason() == Reason::DependencyFailed =>
                {
                    dependency_failed += 1
                }
                _ => {}
            }
        }
    }
    eprintln!(
        "{cases} cases, {steps} steps compared: admitted {submitted}, cycles refused \
         {refused_cycles}, backpressured {backpressured}, dependency-failed outcomes \
         {dependency_failed}, discoveries {discovered}, batches admitted {batches}, refused \
         {batches_refused}, joined {joined}; urgency: queued jobs raised {raised_queued}, pulls \
         of raised jobs {urgent_pulls}, lowered by advance {lowered_by_advance}, by remove \
         {lowered_by_remove}, deadline-exceeded outcomes {expired}; demand: {demand:?}"
    );
    // The sequences reach the states D30 is about: a queued producer raised by a more urgent
    // demander (and granted while raised), and a demander leaving before its producer ran.
    assert!(
        raised_queued > 0 && urgent_pulls > 0 && lowered_by_advance > 0 && lowered_by_remove > 0,
        "raised {raised_queued}, pulls {urgent_pulls}, lowered by advance {lowered_by_advance}, \
         by remove {lowered_by_remove}"
    );
    assert!(expired > 0);
    assert!(joined > 0);
    // The generator reaches every interesting case.
    assert!(discovered > 0);
    assert!(batches > 0 && batches_refused > 0);
    assert!(
        submitted > 0 && refused_cycles > 0 && backpressured > 0 && dependency_failed > 0,
        "admitted {submitted}, cycles {refused_cycles}, backpressured {backpressured}, \
         dependency-failed {dependency_failed}"
    );
    // And every state D31 is about: arrivals (joins of a live identity), departures before and
    // after the end, detaches, cancels both ways, withdrawn and dependency-cancelled jobs,
    // running jobs told to stop and their completions refused, a cancelled identity submitted
    // again, and a departure that lowers a producer's urgency.
    let d = &demand;
    assert!(
        d.dropped_live > 0
            && d.dropped_ended > 0
            && d.detached > 0
            && d.cancels_true > 0
            && d.cancels_false > 0
            && d.joins > 0
            && d.dependency_cancelled > 0
            && d.signalled > 0
            && d.refused_withdrawn > 0
            && d.new_after_cancel > 0
            && d.lowered_by_departure > 0,
        "{d:?}"
    );
}

/// The shortest sequences the random ones were minimised to where the engines differed (SPEC
/// D31), kept as regressions: a submission of a withdrawn job's identity that is backpressured
/// mutates nothing (the key does not advance); a resubmission of the identity of a job that
/// ended `dependency-cancelled` (a late dependent of a withdrawn job) is refused
/// `duplicate-key` as for any job that ended (only a withdrawn job's identity starts a new job).
#[test]
fn d31_engines_agree_on_the_minimised_demand_sequences() {
    use Gate::OnSuccess;
    let mut backpressured = vec![Op::Submit(6, vec![]), Op::Cancel(0)];
    for k in [0, 1, 2, 3, 4, 5, 7, 8] {
        backpressured.push(Op::Submit(k, vec![]));
    }
    backpressured.push(Op::Submit(6, vec![]));
    let dependency_cancelled = vec![
        Op::Submit(1, vec![]),
        Op::Cancel(0),
        Op::Submit(8, vec![(1, OnSuccess)]),
        Op::Submit(8, vec![]),
    ];
    for ops in [backpressured, dependency_cancelled] {
        let a = run::<fairway::oracle::LockFreeGraph>(&ops);
        let b = run::<fairway::oracle::MutexGraph>(&ops);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x, y, "differs at op {i} {:?}; ops {ops:?}", ops.get(i));
        }
    }
}
