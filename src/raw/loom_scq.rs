//! loom models of [`Scq`].
//!
//! In every model the main closure builds the ring, spawns the racing threads and joins them;
//! the checks run after the joins, and every model asserts which outcomes it reached.

use super::Scq;
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;
use loom::thread;

/// Pops everything left in the ring (after the racing threads joined).
fn drain(ring: &Scq) -> Vec<u32> {
    std::iter::from_fn(|| ring.pop()).collect()
}

/// Turn pop vs producer push: one thread pushes, another pops. The pop gets the index or finds
/// the ring empty, and the index is then in the ring exactly once: nothing lost or duplicated.
#[test]
fn loom_scq_push_vs_pop() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let ring = Arc::new(Scq::new(2));
        let producer = {
            let ring = ring.clone();
            thread::spawn(move || ring.push(1))
        };
        let consumer = {
            let ring = ring.clone();
            thread::spawn(move || ring.pop())
        };
        producer.join().unwrap();
        let got = consumer.join().unwrap();
        let left = drain(&ring);
        tally.hit(match (got, left.as_slice()) {
            (Some(1), []) => "popped",
            (None, [1]) => "empty-then-left",
            other => panic!("lost or duplicated: {other:?}; {:?}", &*ring),
        });
    });
    outcomes.assert_exactly(&["empty-then-left", "popped"]);
}

/// A producer stopped between taking its position and writing its entry does not block a
/// consumer: thread A takes a tail position and only then tries to write (falling back to a full
/// push if its position was passed); thread B pushes and then pops. B's pop always gets an
/// index — its own push happened before it, so the ring is not empty — whether or not A has
/// written: if A's position comes first and is unwritten, B passes it. Both indices end up popped
/// exactly once.
#[test]
fn loom_scq_consumer_passes_a_stalled_producer() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let ring = Arc::new(Scq::new(2));
        let a = {
            let ring = ring.clone();
            thread::spawn(move || {
                let t = ring.take_tail();
                let placed = ring.try_place(t, 0);
                if !placed {
                    ring.push(0);
                }
                (t, placed)
            })
        };
        let b = {
            let ring = ring.clone();
            thread::spawn(move || {
                ring.push(1);
                ring.pop()
            })
        };
        let (a_pos, a_placed) = a.join().unwrap();
        let got = b
            .join()
            .unwrap()
            .expect("a pop after a push never finds the ring empty");
        let mut all = drain(&ring);
        all.push(got);
        all.sort_unstable();
        assert_eq!(all, [0, 1], "lost or duplicated");
        tally.hit(match (got, a_pos, a_placed) {
            // A's position was the first one and B passed it before A wrote.
            (1, 4, false) => "passed-stalled-producer",
            // A wrote the first position before B's pop reached it.
            (0, 4, true) => "took-a",
            // B's push took the first position.
            (1, 5, true) => "b-first",
            other => panic!("unexpected: {other:?}"),
        });
    });
    outcomes.assert_exactly(&["b-first", "passed-stalled-producer", "took-a"]);
}

/// Two consumers race for one index that was pushed before them: exactly one gets it.
#[test]
fn loom_scq_two_pops_race_for_one_index() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let ring = Arc::new(Scq::new(1));
        ring.push(0);
        let pops: Vec<_> = (0..2)
            .map(|_| {
                let ring = ring.clone();
                thread::spawn(move || ring.pop())
            })
            .collect();
        let got: Vec<_> = pops.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(ring.pop(), None);
        tally.hit(match (got[0], got[1]) {
            (Some(0), None) => "first",
            (None, Some(0)) => "second",
            other => panic!("lost or duplicated: {other:?}"),
        });
    });
    outcomes.assert_exactly(&["first", "second"]);
}

/// Two producers on a ring of capacity 2 while a consumer pops: both indices end up popped
/// exactly once (the consumer's, if it got one, and the rest in the ring).
#[test]
fn loom_scq_two_pushes_and_a_pop() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let ring = Arc::new(Scq::new(2));
        let pushes: Vec<_> = [0u32, 1]
            .into_iter()
            .map(|i| {
                let ring = ring.clone();
                thread::spawn(move || ring.push(i))
            })
            .collect();
        let pop = {
            let ring = ring.clone();
            thread::spawn(move || ring.pop())
        };
        for p in pushes {
            p.join().unwrap();
        }
        let got = pop.join().unwrap();
        let mut all = drain(&ring);
        all.extend(got);
        all.sort_unstable();
        assert_eq!(all, [0, 1], "lost or duplicated");
        tally.hit(if got.is_some() { "popped" } else { "empty" });
    });
    outcomes.assert_exactly(&["empty", "popped"]);
}

/// Capacity 1 across cycles: two threads each take the one index and give it back, twice, so
/// the ring's two entries go through several cycles with pops passing positions and pushes
/// retrying. The index is never lost or duplicated: at the end it is in the ring exactly once,
/// and a thread's pop finds it unless the other thread holds it.
#[test]
fn loom_scq_capacity_one_circulation_across_cycles() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let ring = Arc::new(Scq::new(1));
        ring.push(0);
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let ring = ring.clone();
                thread::spawn(move || {
                    let mut missed = 0;
                    for _ in 0..2 {
                        match ring.pop() {
                            Some(i) => {
                                assert_eq!(i, 0);
                                ring.push(i);
                            }
                            None => missed += 1,
                        }
                    }
                    missed
                })
            })
            .collect();
        let missed: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(drain(&ring), [0], "lost or duplicated");
        tally.hit(if missed == 0 {
            "never-missed"
        } else {
            "missed-while-held"
        });
    });
    outcomes.assert_exactly(&["missed-while-held", "never-missed"]);
}
