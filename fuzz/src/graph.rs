//! The lock-free graph against the mutex graph: libFuzzer's bytes choose the graph's sizes, then
//! decode to the graph differential's operation sequences (`tests/common/graph_ops.rs`: submits
//! with random keys and gates, cycles possible, all-or-none batches, dedupe joins through a hook,
//! pulls, discovery, completion with success or failure, collection, urgent jobs with deadlines,
//! advance, remove, time). What every operation showed, every held job's effective urgency and
//! the occupancy after it must be the same on both.
#[allow(dead_code)]
#[path = "../../tests/common/graph_ops.rs"]
mod graph_ops;

use super::{int, pick};
use arbitrary::Unstructured;
use fairway::graph::Gate;
use fairway::oracle::{LockFreeGraph, MutexGraph};
use graph_ops::{run_sized, Op, Sizes};

fn deps(u: &mut Unstructured<'_>, keys: u64) -> Vec<(u64, Gate)> {
    (0..int(u, 0..=4))
        .map(|_| {
            let gate = pick(u, &[Gate::Sequential, Gate::OnSuccess, Gate::OnAdmission]);
            (int(u, 0..=keys), gate)
        })
        .collect()
}

fn op(u: &mut Unstructured<'_>, keys: u64) -> Op {
    match pick(
        u,
        &[0u8, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 8, 9, 10, 11],
    ) {
        0 => {
            let key = int(u, 0..=keys);
            Op::Submit(key, deps(u, keys))
        }
        1 => Op::Pull,
        2 => Op::Complete(int(u, 0..=7) as usize, int(u, 0..=2) != 0),
        3 => Op::Take(int(u, 0..=keys)),
        4 => {
            let i = int(u, 0..=7) as usize;
            Op::Discover(i, deps(u, keys))
        }
        5 => Op::Batch(
            (0..int(u, 1..=3))
                .map(|_| {
                    let key = int(u, 0..=keys);
                    (key, deps(u, keys))
                })
                .collect(),
        ),
        6 => Op::Hooked(int(u, 0..=keys), int(u, 0..=keys)),
        7 => Op::TakeJoiner(int(u, 0..=3) as usize),
        // Inheritance (SPEC D30): urgent jobs with deadlines, departures, time.
        8 => {
            let key = int(u, 0..=keys);
            let priority = int(u, 0..=8) as u8;
            let deadline = (int(u, 0..=2) == 0).then(|| int(u, 1..=5));
            Op::Urgent(key, priority, deadline, deps(u, keys))
        }
        9 => Op::Advance(int(u, 0..=keys)),
        10 => Op::Remove(int(u, 0..=keys)),
        _ => Op::Tick(int(u, 1..=3)),
    }
}

/// Runs one input; panics on a disagreement.
pub fn check(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let sizes = Sizes {
        cells: int(&mut u, 1..=4) as u32,
        nodes: int(&mut u, 1..=12) as u32,
        edges: int(&mut u, 1..=16) as u32,
        keys: int(&mut u, 1..=24) as u32,
        max_deps: int(&mut u, 1..=6) as u32,
    };
    // Job keys within the key table's size (the mutex graph has no key table to fill).
    let keys = u64::from(sizes.keys) - 1;
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < 160 {
        ops.push(op(&mut u, keys));
    }
    let a = run_sized::<LockFreeGraph>(sizes, &ops);
    let b = run_sized::<MutexGraph>(sizes, &ops);
    if let Some(i) = a.iter().zip(&b).position(|(x, y)| x != y) {
        panic!(
            "the graphs differ at op {i} ({:?}) on {sizes:?}: lock-free {:?}, mutex {:?}\nops: {:?}",
            ops[i],
            a[i],
            b[i],
            &ops[..=i]
        );
    }
}
