//! Differential test of the two graph engines (SPEC Q02 for section D): random single-threaded
//! sequences of submit (random keys, some not produced yet, random gates, cycles possible),
//! all-or-none batches of one to three such jobs (D04, dependencies inside the batch too), pull,
//! discover on a running job, complete with success or failure, and collect, give identical results and occupancy on the
//! lock-free graph and the mutex graph after every operation. Submits of a key whose job is live
//! join it (SPEC D02), submits through a [`DedupeHook`] that names another key's job join that
//! one (D03), and the joiners' outcomes are collected too.
//!
//! Fixed seeds by default; `FAIRWAY_GRAPH_DIFF_CASES` raises the number of cases.

#[path = "common/graph_ops.rs"]
mod graph_ops;

use fairway::graph::{Admission, Gate, JobOutcome};
use fairway::Reason;
use graph_ops::{run, Op, Seen};

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

fn ops(seed: u64, n: usize) -> Vec<Op> {
    let mut r = Rng(seed | 1);
    (0..n)
        .map(|_| match r.below(14) {
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
                let deps = random_deps(&mut r);
                Op::Submit(key, deps)
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
            match &x.0 {
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
         joined {joined}"
    );
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
