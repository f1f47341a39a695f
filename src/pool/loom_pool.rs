//! loom models of [`FixedCellPool`].

use super::*;
use crate::sync::model::{model, Outcomes};
use core::task::Poll;

fn req(id: u64) -> LeaseRequest {
    LeaseRequest {
        request: RequestId(id),
        class: ClassId(0),
        cpu_units: 0,
        memory_units: 0,
    }
}

/// Two threads race for the only cell: exactly one wins, the other gets "no capacity"; once the
/// winner releases it the cell is available again.
#[test]
fn two_acquirers_one_cell() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let pool = crate::sync::Arc::new(FixedCellPool::new(ClassId(0), 1).unwrap());
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let pool = pool.clone();
                loom::thread::spawn(move || pool.try_acquire_now(&req(t)).unwrap())
            })
            .collect();
        let results: Vec<Option<Lease>> = threads.into_iter().map(|h| h.join().unwrap()).collect();
        let winner = match (&results[0], &results[1]) {
            (Some(_), None) => "first-won",
            (None, Some(_)) => "second-won",
            _ => "not-exactly-one",
        };
        outcomes.hit(winner);
        assert_eq!(pool.counters().leased, 1);
        results.into_iter().flatten().for_each(|l| pool.release(l));
        assert_eq!(pool.counters().available, 1);
        let again = pool
            .try_acquire_now(&req(9))
            .unwrap()
            .expect("the cell is back");
        pool.release(again);
    });
    outcomes.assert_exactly(&["first-won", "second-won"]);
}

/// F17: a waiter registers, then probes, while another thread releases the only cell. The waiter
/// always ends up with the cell: either its probe sees it, or it is woken and the next probe does.
#[test]
fn f17_no_lost_wakeup() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let pool = crate::sync::Arc::new(FixedCellPool::new(ClassId(0), 1).unwrap());
        let held = pool.try_acquire_now(&req(1)).unwrap().unwrap();
        let waiter = {
            let pool = pool.clone();
            loom::thread::spawn(move || {
                let mut polls = 0;
                let lease = loom::future::block_on(core::future::poll_fn(|cx| {
                    polls += 1;
                    pool.subscribe_changes(cx.waker()).unwrap();
                    match pool.try_acquire_now(&req(2)).unwrap() {
                        Some(lease) => Poll::Ready(lease),
                        None => Poll::Pending,
                    }
                }));
                (lease, polls)
            })
        };
        let releaser = {
            let pool = pool.clone();
            loom::thread::spawn(move || pool.release(held))
        };
        releaser.join().unwrap();
        let (lease, polls) = waiter.join().unwrap();
        assert_eq!(lease.request(), RequestId(2));
        outcomes.hit(if polls == 1 {
            "acquired-directly"
        } else {
            "acquired-after-wake"
        });
        pool.release(lease);
        assert_eq!(pool.counters().available, 1);
    });
    outcomes.assert_exactly(&["acquired-directly", "acquired-after-wake"]);
}

/// Two bitmap words (33 cells; all but cells 5 and 32 stay leased). A holds a cell credit for
/// cell 5 and scans from word 1 (request 1); B releases cell 32 and, holding that credit again,
/// acquires from word 0 (request 2). If A reads word 1 while cell 32 is out and word 0 after B
/// took cell 5, a single scan finds nothing although a cell was free at every instant; with a
/// credit the built-in pool rescans and A gets cell 32. Both cells are always handed out, once.
#[test]
fn f08_credit_holder_rescans_two_words() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let pool = crate::sync::Arc::new(FixedCellPool::new(ClassId(0), 33).unwrap());
        let all: Vec<Lease> = (0..33)
            .map(|i| pool.try_acquire_now(&req(100 + i)).unwrap().unwrap())
            .collect();
        let mut kept = Vec::new();
        let mut b_cell = None;
        for lease in all {
            match lease.cell().0 {
                5 => pool.release(lease),
                32 => b_cell = Some(lease),
                _ => kept.push(lease),
            }
        }
        let b_cell = b_cell.expect("cell 32 leased");
        let a = {
            let pool = pool.clone();
            loom::thread::spawn(move || pool.acquire_credited(RequestId(1)).unwrap())
        };
        let b = {
            let pool = pool.clone();
            loom::thread::spawn(move || {
                pool.release(b_cell);
                pool.acquire_credited(RequestId(2)).unwrap()
            })
        };
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        outcomes.hit(match (a.0, b.0) {
            (5, 32) => "a-took-the-free-cell",
            (32, 5) => "a-took-the-released-cell",
            other => panic!("impossible {other:?}"),
        });
        for cell in [a, b] {
            pool.release(Lease::new(&req(0), cell));
        }
        kept.into_iter().for_each(|l| pool.release(l));
        assert_eq!(pool.counters().available, 33);
    });
    outcomes.assert_exactly(&["a-took-the-free-cell", "a-took-the-released-cell"]);
}
