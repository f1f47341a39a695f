//! loom model of the inbox: two producers push while the consumer drains twice.

use super::Inbox;
use crate::sync::model::{model, Outcomes};
use crate::sync::{Arc, UnsafeCell};

/// The inbox plus one payload per index, written by its producer before the push.
struct Shared {
    inbox: Inbox,
    payload: [UnsafeCell<u32>; 2],
}

// SAFETY: `payload[i]` is written only by producer `i` before it pushes `i`, and read only by the
// consumer after a drain yielded `i`; the model checks that the push/take_all pair orders the two
// (loom fails on any unordered access).
unsafe impl Sync for Shared {}

impl Shared {
    /// Producer side: writes the payload of `index`, then pushes it.
    fn produce(&self, index: u32) -> bool {
        self.payload[index as usize].with_mut(|p| {
            // SAFETY: only this producer touches `payload[index]` before the push (see `Shared`).
            unsafe { *p = 100 + index }
        });
        self.inbox.push(index)
    }

    /// Consumer side: drains once, checking each yielded index's payload.
    fn consume(&self) -> Vec<u32> {
        let got: Vec<u32> = self.inbox.take_all().collect();
        for &i in &got {
            let value = self.payload[i as usize].with(|p| {
                // SAFETY: the drain yielded `i`, so its producer's write is complete and ordered
                // before this read (see `Shared`).
                unsafe { *p }
            });
            assert_eq!(value, 100 + i, "payload of {i} not visible");
        }
        got
    }
}

/// Two producers push indices 0 and 1 while the consumer drains twice; what is left is drained
/// after the joins. Every index is delivered exactly once with its payload visible, and a drain
/// holding both yields them in push order (the one whose push found the inbox empty first).
#[test]
fn two_producers_one_consumer_deliver_once_in_order() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let shared = Arc::new(Shared {
            inbox: Inbox::new(2).unwrap(),
            payload: [UnsafeCell::new(0), UnsafeCell::new(0)],
        });
        let producers: Vec<_> = (0..2)
            .map(|i| {
                let shared = shared.clone();
                loom::thread::spawn(move || shared.produce(i))
            })
            .collect();
        let consumer = {
            let shared = shared.clone();
            loom::thread::spawn(move || [shared.consume(), shared.consume()])
        };
        let was_empty: Vec<bool> = producers.into_iter().map(|p| p.join().unwrap()).collect();
        let [first, second] = consumer.join().unwrap();
        let rest = shared.consume();
        assert!(shared.inbox.is_empty());

        let mut all: Vec<u32> = [&first, &second, &rest]
            .into_iter()
            .flatten()
            .copied()
            .collect();
        all.sort_unstable();
        assert_eq!(all, [0, 1], "each index delivered exactly once");
        for drain in [&first, &second, &rest] {
            if drain.len() == 2 {
                assert!(was_empty[drain[0] as usize] && !was_empty[drain[1] as usize]);
            }
        }
        seen.hit(match first.len() {
            2 => "both-in-first-take",
            1 => "split",
            _ => "none-in-first-take",
        });
    });
    outcomes.assert_exactly(&["both-in-first-take", "none-in-first-take", "split"]);
}
