//! An intrusive multi-producer inbox of slot indices, drained all at once by one consumer.
//!
//! Producers (enqueuers, cancellers) hand entries to the one thread that currently owns a tenant's
//! turn. The entries already live in an [`Arena`](super::arena::Arena), so the inbox stores only
//! their indices and links them through a per-index `next` array sized at build time: pushing
//! never allocates and never fails.
//!
//! # Structure
//!
//! A Treiber stack: `head` is the most recently pushed index (or [`EMPTY`]) and `next[i]` the one
//! pushed before `i`. The consumer never pops single entries; it detaches the whole stack with
//! one `swap(EMPTY)` and then owns every detached link, reversing them in place so that
//! [`Inbox::take_all`] yields indices in push order (FIFO, per producer and overall as ordered by
//! the head CAS).
//!
//! # Why there is no ABA problem
//!
//! ABA hurts a Treiber stack when a pop reads `next` of the top and installs it with a CAS that
//! succeeds against a head which meanwhile left and came back. Here the only operations on `head`
//! are push (a CAS whose new value is the pusher's own index; the `next` it wrote is re-written
//! before every retry, so it is correct for whatever head the CAS succeeds against) and the
//! consumer's unconditional `swap`. Nothing installs a value read from another entry's link, so a
//! head that changed and came back is harmless.
//!
//! # Contract
//!
//! An index is in the inbox from its push until the [`Drain`] that detached it has yielded it; it
//! must not be pushed again in between (checked in debug builds). One consumer (the owner of the
//! turn) calls [`Inbox::take_all`]; should two race, each `swap` detaches a disjoint chain, so every
//! index is still yielded exactly once, only the order between the two drains is lost.

use crossbeam_utils::CachePadded;

#[cfg(debug_assertions)]
use crate::sync::AtomicBool;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::Error;

#[cfg(all(test, loom))]
#[path = "loom_inbox.rs"]
mod loom_inbox;

/// `head` (or a link) that points nowhere: the inbox is empty (or the chain ends).
const EMPTY: u32 = u32::MAX;

/// The most indices an inbox can hold: every index below [`EMPTY`].
pub(crate) const MAX_CAPACITY: usize = EMPTY as usize;

/// A multi-producer, single-consumer inbox of indices `0..capacity`. See the module docs.
pub(crate) struct Inbox {
    /// The most recently pushed index, or [`EMPTY`].
    head: CachePadded<AtomicU32>,
    /// `next[i]`: the index pushed before `i` while `i` is in the stack; reversed in place (the
    /// index pushed after `i`) once the consumer has detached the chain.
    next: Box<[AtomicU32]>,
    /// Debug check of the contract: `queued[i]` while `i` is in the inbox.
    #[cfg(debug_assertions)]
    queued: Box<[AtomicBool]>,
}

impl Inbox {
    /// An empty inbox for indices `0..capacity`.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` (field `capacity`) if `capacity` is 0 or above
    /// [`MAX_CAPACITY`].
    pub(crate) fn new(capacity: usize) -> Result<Self, Error> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return Err(Error::configuration("capacity"));
        }
        Ok(Self {
            head: CachePadded::new(AtomicU32::new(EMPTY)),
            next: (0..capacity).map(|_| AtomicU32::new(EMPTY)).collect(),
            #[cfg(debug_assertions)]
            queued: (0..capacity).map(|_| AtomicBool::new(false)).collect(),
        })
    }

    /// The number of indices the inbox accepts (`0..capacity`).
    pub(crate) fn capacity(&self) -> usize {
        self.next.len()
    }

    /// Pushes `index`. Returns whether the inbox was empty just before, so the caller can decide
    /// whether the consumer needs a signal.
    ///
    /// Everything the caller wrote before the push is visible to the consumer once a
    /// [`Inbox::take_all`] has yielded `index`.
    ///
    /// # Panics
    ///
    /// If `index >= capacity`; in debug builds also if `index` is already in the inbox.
    pub(crate) fn push(&self, index: u32) -> bool {
        let link = &self.next[index as usize];
        #[cfg(debug_assertions)]
        assert!(
            !self.queued[index as usize].swap(true, Relaxed),
            "index {index} pushed while already in the inbox"
        );
        let mut head = self.head.load(Relaxed);
        loop {
            // Relaxed: published by the Release CAS below.
            link.store(head, Relaxed);
            // Release: publishes the link and the caller's writes to the entry; pairs with the
            // Acquire swap in take_all(). Relaxed on failure: the head is only re-linked.
            match self
                .head
                .compare_exchange_weak(head, index, Release, Relaxed)
            {
                Ok(_) => return head == EMPTY,
                Err(actual) => head = actual,
            }
        }
    }

    /// Detaches everything pushed so far and returns it as an iterator in push order.
    ///
    /// O(n) in the number of detached entries (one pass to reverse the links); allocates nothing.
    /// Entries pushed after the detach wait for the next call. The caller must exhaust the
    /// [`Drain`]: indices it does not yield stay "in the inbox" and can never be pushed again.
    pub(crate) fn take_all(&self) -> Drain<'_> {
        // Acquire: pairs with the Release CAS of every push() in the detached chain (each later
        // push continues the release sequence of the earlier ones), so all links and all entry
        // writes made before those pushes are visible.
        let mut cur = self.head.swap(EMPTY, Acquire);
        // Reverse the detached chain in place; no producer can reach it any more.
        let mut reversed = EMPTY;
        while cur != EMPTY {
            let link = &self.next[cur as usize];
            // Relaxed: the links are ours now; ordered by the Acquire swap above.
            let older = link.load(Relaxed);
            link.store(reversed, Relaxed);
            reversed = cur;
            cur = older;
        }
        Drain {
            inbox: self,
            cur: reversed,
        }
    }

    /// Whether the inbox is empty now (a hint: a producer may push right after).
    ///
    /// Acquire: pairs with the Release CAS in push(), so a caller that sees an entry and reads it
    /// through its own synchronisation is ordered after that push. To close a "went idle, then an
    /// entry arrived" race, callers order this load after an RMW on their own state word that the
    /// producer also RMWs after pushing (the tenant ring's dirty re-check).
    pub(crate) fn is_empty(&self) -> bool {
        self.head.load(Acquire) == EMPTY
    }
}

impl core::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Inbox")
            .field("capacity", &self.capacity())
            .field("empty", &self.is_empty())
            .finish()
    }
}

/// The entries one [`Inbox::take_all`] detached, yielded in push order.
///
/// Each index is read out of the chain before it is yielded, so the caller may push a yielded
/// index again (even while iterating) without disturbing the rest of the drain.
#[must_use = "indices not yielded are lost from the inbox"]
pub(crate) struct Drain<'a> {
    inbox: &'a Inbox,
    /// The next index to yield, or [`EMPTY`].
    cur: u32,
}

impl Iterator for Drain<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.cur == EMPTY {
            return None;
        }
        let index = self.cur;
        // Relaxed: the detached chain is ours (see take_all()).
        self.cur = self.inbox.next[index as usize].load(Relaxed);
        #[cfg(debug_assertions)]
        self.inbox.queued[index as usize].store(false, Relaxed);
        Some(index)
    }
}

impl core::fmt::Debug for Drain<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Drain")
            .field("exhausted", &(self.cur == EMPTY))
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::Code;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn bad_capacity_is_refused() {
        for capacity in [0, MAX_CAPACITY + 1] {
            let e = Inbox::new(capacity).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument);
            assert_eq!(
                (e.reason().as_str(), e.field()),
                ("configuration", Some("capacity"))
            );
        }
        assert_eq!(Inbox::new(1).unwrap().capacity(), 1);
    }

    #[test]
    fn take_all_yields_push_order() {
        let inbox = Inbox::new(8).unwrap();
        assert!(inbox.is_empty());
        assert_eq!(inbox.take_all().count(), 0);
        assert!(inbox.push(5));
        assert!(!inbox.push(2));
        assert!(!inbox.push(7));
        assert!(!inbox.is_empty());
        assert_eq!(inbox.take_all().collect::<Vec<_>>(), [5, 2, 7]);
        assert!(inbox.is_empty());
        assert!(inbox.push(2), "empty again after take_all");
        assert_eq!(inbox.take_all().collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn pushes_during_a_drain_wait_for_the_next_take() {
        let inbox = Inbox::new(4).unwrap();
        for i in 0..4 {
            inbox.push(i);
        }
        let mut first = Vec::new();
        for i in inbox.take_all() {
            first.push(i);
            // Re-push what was just yielded; the rest of this drain is unaffected.
            inbox.push(i);
        }
        assert_eq!(first, [0, 1, 2, 3]);
        assert_eq!(inbox.take_all().collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "already in the inbox")]
    fn double_push_is_caught_in_debug() {
        let inbox = Inbox::new(2).unwrap();
        inbox.push(1);
        inbox.push(1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u32),
        TakeAll,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

        #[test]
        fn inbox_matches_fifo_model(
            capacity in 1usize..=6,
            ops in proptest::collection::vec(
                prop_oneof![3 => (0u32..6).prop_map(Op::Push), 1 => Just(Op::TakeAll)],
                0..if cfg!(miri) { 30 } else { 60 },
            ),
        ) {
            let inbox = Inbox::new(capacity).unwrap();
            let mut model: VecDeque<u32> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Push(i) if (i as usize) < capacity && !model.contains(&i) => {
                        prop_assert_eq!(inbox.push(i), model.is_empty());
                        model.push_back(i);
                    }
                    Op::Push(_) => {}
                    Op::TakeAll => {
                        let got: Vec<u32> = inbox.take_all().collect();
                        prop_assert_eq!(got, model.drain(..).collect::<Vec<_>>());
                    }
                }
                prop_assert_eq!(inbox.is_empty(), model.is_empty());
            }
        }
    }

    #[test]
    fn producers_deliver_each_index_once_in_order() {
        const PRODUCERS: usize = 3;
        const PER: usize = if cfg!(miri) { 50 } else { 20_000 };
        let inbox = Inbox::new(PRODUCERS * PER).unwrap();
        let mut seen = vec![false; PRODUCERS * PER];
        let mut last = [None::<usize>; PRODUCERS];
        std::thread::scope(|s| {
            for p in 0..PRODUCERS {
                let inbox = &inbox;
                s.spawn(move || {
                    for i in p * PER..(p + 1) * PER {
                        inbox.push(i as u32);
                    }
                });
            }
            let mut delivered = 0;
            while delivered < PRODUCERS * PER {
                for i in inbox.take_all() {
                    let i = i as usize;
                    assert!(!std::mem::replace(&mut seen[i], true), "{i} twice");
                    let p = i / PER;
                    assert!(last[p] < Some(i), "producer {p}: {i} after {:?}", last[p]);
                    last[p] = Some(i);
                    delivered += 1;
                }
                std::hint::spin_loop();
            }
        });
        assert!(inbox.is_empty());
        assert!(seen.iter().all(|&s| s));
    }
}
