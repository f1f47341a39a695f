//! The scheduler against the oracle: libFuzzer's bytes decode to the operation sequences of the
//! differential test (`tests/common/sched_ops.rs`: enqueue with priorities, deadlines and
//! weights, pull-mode submit, the fast path, drops, both cancellations, release, quarantine,
//! pulls, time, shutdown, in-place priority and deadline changes over two classes and four
//! tenants), run on the engine and on the
//! oracle's mutex twin; their logs of every outcome, grant order and class counter must be
//! equal, and every permit must be back at the end.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../../tests/common/mod.rs"]
mod common;

use super::{int, pick};
use arbitrary::Unstructured;
use common::sched_ops::{run, Op};
use fairway::oracle::{Baseline, Ring};

fn op(u: &mut Unstructured<'_>) -> Op {
    let index = |u: &mut Unstructured<'_>| int(u, 0..=15) as usize;
    // The differential's weights: enqueue 6, release 5, submit 2, next 2, advance 2, the rest 1.
    match pick(
        u,
        &[
            0u8, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 6, 6, 6, 6, 7, 8, 8, 9, 9, 10, 11, 11, 12,
        ],
    ) {
        0 => Op::Enqueue {
            class: int(u, 0..=1) as u16,
            tenant: int(u, 0..=3) as u32,
            priority: int(u, 0..=3) as u8,
            deadline_ms: (int(u, 0..=2) == 0).then(|| int(u, 1..=49)),
            weight: int(u, 1..=3) as u32,
        },
        1 => Op::Submit {
            class: int(u, 0..=1) as u16,
            tenant: int(u, 0..=3) as u32,
            priority: int(u, 0..=3) as u8,
        },
        2 => Op::TryEnqueue {
            class: int(u, 0..=1) as u16,
            tenant: int(u, 0..=3) as u32,
        },
        3 => Op::DropFuture(index(u)),
        4 => Op::CancelHandle(index(u)),
        5 => Op::CancelToken(index(u)),
        6 => Op::Release(index(u)),
        7 => Op::Quarantine(index(u)),
        8 => Op::TryNext(int(u, 0..=1) as u16),
        9 => Op::Advance(int(u, 1..=29)),
        11 => Op::SetPriority(index(u), int(u, 0..=5) as u8),
        12 => Op::SetDeadline(index(u), (int(u, 0..=4) != 0).then(|| int(u, 0..=59))),
        _ => Op::Shutdown,
    }
}

/// Runs one input; panics on a disagreement.
pub fn check(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < 200 {
        ops.push(op(&mut u));
    }
    let engine = run::<Ring>(&ops);
    let oracle = run::<Baseline>(&ops);
    if let Some(i) = engine.iter().zip(&oracle).position(|(a, b)| a != b) {
        panic!(
            "the engine and the oracle differ at log line {i}: {:?} vs {:?}\nops: {ops:?}",
            engine[i], oracle[i]
        );
    }
    assert_eq!(
        engine.len(),
        oracle.len(),
        "logs of different lengths; ops: {ops:?}"
    );
}
