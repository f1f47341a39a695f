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
//! Fixed seeds by default; `FAIRWAY_GRAPH_DIFF_CASES` raises the number of cases.

#[path = "common/graph_ops.rs"]
mod graph_ops;

use fairway::graph::{Admission, Gate, JobOutcome};
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
        .map(|_| match r.below(19) {
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
    for case in 0..cases {
        let seed = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(case + 1);
        let ops = ops(seed, 80);
        let a = run::<fairway::oracle::LockFreeGraph>(&ops);
        let b = run::<fairway::oracle::MutexGraph>(&ops);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(
                x,
                y,
                "case {case} (seed {seed:#x}) differs at op {i} {:?}; ops so far {:?}",
                ops[i],
                &ops[..=i]
            );
            if check_urgency(x, case, i) {
                raised_queued += 1;
            }
            if i > 0 && lowered(&a[i - 1], x) {
                match ops[i] {
                    Op::Advance(_) => lowered_by_advance += 1,
                    Op::Remove(_) => lowered_by_remove += 1,
                    _ => {}
                }
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
        "{cases} cases: admitted {submitted}, cycles refused {refused_cycles}, \
         backpressured {backpressured}, dependency-failed outcomes {dependency_failed}, \
         discoveries {discovered}, batches admitted {batches}, refused {batches_refused}, \
         joined {joined}; urgency: queued jobs raised {raised_queued}, pulls of raised jobs \
         {urgent_pulls}, lowered by advance {lowered_by_advance}, by remove {lowered_by_remove}, \
         deadline-exceeded outcomes {expired}"
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
}
