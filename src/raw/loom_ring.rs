//! loom models of [`Ring`] at capacity 2.
//!
//! In every model the main closure only builds the ring (pre-filling it where the model needs a
//! starting state), spawns the racing threads and joins them; the checks run after the joins.

use super::Ring;
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;
use loom::thread;

/// Pops everything left in the ring (after the racing threads joined).
fn drain(ring: &Ring<u32>) -> Vec<u32> {
    std::iter::from_fn(|| ring.pop()).collect()
}

/// Two producers and one consumer on a ring holding one value: nothing is lost or duplicated,
/// and the second push either finds the slot freed by the pop ("not-full") or not ("full-seen").
#[test]
fn two_producers_one_consumer() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let ring = Arc::new(Ring::new(2));
        ring.push(0).unwrap();
        let producers: Vec<_> = [1u32, 2]
            .into_iter()
            .map(|v| {
                let ring = ring.clone();
                thread::spawn(move || ring.push(v).is_ok().then_some(v))
            })
            .collect();
        let consumer = {
            let ring = ring.clone();
            thread::spawn(move || ring.pop())
        };
        let pushed: Vec<u32> = producers
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect();
        // The pre-filled value happens-before the consumer, and it is the oldest.
        assert_eq!(consumer.join().unwrap(), Some(0));
        let mut rest = drain(&ring);
        // Whatever the producers pushed is there exactly once, in push order per producer.
        rest.sort_unstable();
        let mut expected = pushed.clone();
        expected.sort_unstable();
        assert_eq!(rest, expected);
        tally.hit(match pushed.len() {
            2 => "not-full",
            1 => "full-seen",
            _ => unreachable!("the first push always finds a free slot"),
        });
    });
    outcomes.assert_exactly(&["full-seen", "not-full"]);
}

/// One producer and two consumers racing for one value: at most one consumer gets it, and if
/// neither did, it is still in the ring.
#[test]
fn one_producer_two_consumers_race_for_one_value() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let ring = Arc::new(Ring::new(2));
        let producer = {
            let ring = ring.clone();
            thread::spawn(move || ring.push(7).unwrap())
        };
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let ring = ring.clone();
                thread::spawn(move || ring.pop())
            })
            .collect();
        producer.join().unwrap();
        let got: Vec<Option<u32>> = consumers.into_iter().map(|t| t.join().unwrap()).collect();
        let left = drain(&ring);
        tally.hit(match (got[0], got[1], left.as_slice()) {
            (Some(7), None, []) => "first-consumer",
            (None, Some(7), []) => "second-consumer",
            (None, None, [7]) => "neither-consumer",
            other => panic!("lost or duplicated value: {other:?}"),
        });
    });
    outcomes.assert_exactly(&["first-consumer", "second-consumer", "neither-consumer"]);
}

/// Wrap-around on a full ring (head at index 0 of lap 0, tail at index 0 of lap 1): one thread
/// pops, freeing slot 0 for lap 1, then pushes across the lap boundary, while another thread
/// pushes. Exactly one of the two pushes gets the single free slot, and FIFO order holds.
#[test]
fn wrap_around_pop_then_push_races_a_push() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let ring = Arc::new(Ring::new(2));
        ring.push(10).unwrap();
        ring.push(11).unwrap();
        let popper = {
            let ring = ring.clone();
            thread::spawn(move || (ring.pop(), ring.push(12).is_ok()))
        };
        let pusher = {
            let ring = ring.clone();
            thread::spawn(move || ring.push(13).is_ok())
        };
        let (popped, pushed_12) = popper.join().unwrap();
        let pushed_13 = pusher.join().unwrap();
        assert_eq!(popped, Some(10));
        let left = drain(&ring);
        tally.hit(match (pushed_12, pushed_13, left.as_slice()) {
            // The pusher saw the ring full: the pop had not freed slot 0 yet (as far as it
            // could see), or the popper's own push had already taken it.
            (true, false, [11, 12]) => "pusher-saw-full",
            // The pusher took the freed slot; the popper's push then found the ring full.
            (false, true, [11, 13]) => "pusher-took-freed-slot",
            other => panic!("lost, duplicated or reordered: {other:?}"),
        });
    });
    outcomes.assert_exactly(&["pusher-saw-full", "pusher-took-freed-slot"]);
}
