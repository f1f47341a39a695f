//! loom models of the grant path's own shapes (the turn protocol's are in `loom_turns.rs`):
//! an enqueue's inbox publication vs the owner's closing re-check (no lost request), a release
//! vs an enqueue (no request stranded beside a free cell), a cancel vs the turn holder's grant
//! CAS (exactly one wins; a tombstone never outlives its tenant's turn), and a DRR round cut
//! short (the front queue) vs a second taker.
//!
//! After the racing threads join, every model runs the turns a call handed back at its F25
//! bound (as pollers do) and checks conservation (each request granted or
//! cancelled exactly once), the invariant (never a free credit with a ready tenant), and that
//! a class with a free cell holds nothing queued.

use super::{Core, Meta, CANCELLED, GRANTED, QUEUED, VACANT};
use crate::policy::NO_DEADLINE;
use crate::sync::model::{model, Outcomes};
use crate::sync::{Arc, AtomicUsize, Ordering};
use loom::thread;

fn meta(weight: u32) -> Meta {
    Meta {
        priority: 0,
        deadline: NO_DEADLINE,
        enqueued_at: 0,
        weight,
    }
}

/// The class and a count of grants seen by any thread.
struct World {
    core: Core,
    granted: AtomicUsize,
}

impl World {
    fn new(cells: u32, slots: u32, tenants: u32) -> Arc<World> {
        Self::with_core(Core::new(cells, slots, tenants, 1_000))
    }

    fn with_core(core: Core) -> Arc<World> {
        Arc::new(World {
            core,
            granted: AtomicUsize::new(0),
        })
    }

    fn enqueue(&self, tenant: u32, weight: u32) -> u32 {
        self.core
            .enqueue(tenant, meta(weight), 0, &mut |_| {
                self.granted.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap()
    }

    fn release(&self) {
        self.core.release(0, &mut |_| {
            self.granted.fetch_add(1, Ordering::Relaxed);
        });
    }

    fn cancel(&self, index: u32) -> bool {
        self.core.cancel(index, 0, &mut |_| {
            self.granted.fetch_add(1, Ordering::Relaxed);
        })
    }

    /// Runs every turn a call handed back (SPEC F25), as pollers do.
    fn settle(&self) {
        while self.core.help(0, &mut |_| {
            self.granted.fetch_add(1, Ordering::Relaxed);
        }) {}
    }

    /// The states of slots `0..n`.
    fn states(&self, n: u32) -> Vec<u32> {
        (0..n).map(|i| self.core.state(i)).collect()
    }

    /// No credit free beside a ready tenant; a free credit means nothing queued.
    fn check(&self, slots: u32) {
        let (free, ready) = self.core.counters();
        assert!(free == 0 || ready == 0, "free {free} beside ready {ready}");
        if free > 0 {
            assert!(
                !self.states(slots).contains(&QUEUED),
                "a request queued beside a free cell"
            );
        }
    }
}

fn on_thread<R: Send + 'static>(
    w: &Arc<World>,
    f: impl FnOnce(&World) -> R + Send + 'static,
) -> thread::JoinHandle<R> {
    let w = w.clone();
    thread::spawn(move || f(&w))
}

/// A slot's reuse vs a holder still using it (SPEC F30: the last reference frees the slot):
/// one slot, held by two references, each holder reading the slot's data and then letting go;
/// whoever finds the slot free afterwards takes it again and writes its data. The last drop
/// must order the other holder's read before that write (loom reports the write racing the
/// read if the last drop does not acquire).
#[test]
fn loom_f30_a_freed_slot_is_rewritten_only_after_every_holder_let_go() {
    use crate::sync::UnsafeCell;
    struct Slot {
        core: Core,
        data: UnsafeCell<u64>,
    }
    // SAFETY: `data` is read by holders of a reference and written only by the thread that
    // took the slot off the free list, after every holder let go (what the model checks).
    unsafe impl Sync for Slot {}
    model(|| {
        let s = Arc::new(Slot {
            core: Core::new(1, 1, 1, 1_000),
            data: UnsafeCell::new(7),
        });
        let index = s.core.alloc(0, 2, 0).expect("the one slot is free");
        let holders: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    // SAFETY: this thread holds a reference: nobody writes the data now.
                    let seen = s.data.with(|d| unsafe { *d });
                    s.core.unref(index);
                    if let Ok(again) = s.core.alloc(0, 1, 0) {
                        // SAFETY: the slot came off the free list: every holder let go.
                        s.data.with_mut(|d| unsafe { *d = 8 });
                        s.core.unref(again);
                    }
                    seen
                })
            })
            .collect();
        for h in holders {
            assert_eq!(h.join().unwrap(), 7, "a holder read the slot's next use");
        }
    });
}

/// Enqueue vs the owner's closing re-check: one cell, held; tenant 0's first request waits.
/// A releaser's turn grants it and ends the turn while a producer enqueues a second request of
/// tenant 0 (publication, then announcement). Either the owner saw the second request (or the
/// dirty mark) and requeued the tenant, or the tenant went idle and the producer put it back in
/// the ring: the second request waits, queued, with the tenant ready — never lost.
#[test]
fn loom_grant_enqueue_vs_owner_closing() {
    model(|| {
        let w = World::new(1, 4, 1);
        let held = w.enqueue(0, 1);
        let first = w.enqueue(0, 1);
        assert_eq!(w.granted.load(Ordering::Relaxed), 1);
        assert!(w.core.take(held));
        let releaser = on_thread(&w, |w| w.release());
        let producer = on_thread(&w, |w| w.enqueue(0, 1));
        releaser.join().unwrap();
        let second = producer.join().unwrap();
        w.settle();
        assert_eq!(w.granted.load(Ordering::Relaxed), 2);
        assert_eq!(w.core.state(first), GRANTED);
        assert_eq!(w.core.state(second), QUEUED);
        assert_eq!(w.core.counters(), (0, 1));
        w.check(4);
        // The cell comes back: the second request is granted.
        assert!(w.core.take(first));
        w.release();
        w.settle();
        assert_eq!(w.core.state(second), GRANTED);
        assert_eq!(w.core.counters(), (0, 0));
    });
}

/// Release vs enqueue of another tenant: one cell, held by tenant 0. Whatever the order, the
/// new request is granted by one of the two threads (the credit met the announcement in one
/// `ctl` RMW), and nothing is left queued beside the free cell.
#[test]
fn loom_grant_release_vs_enqueue_no_stranded_request() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::new(1, 4, 2);
        let held = w.enqueue(0, 1);
        assert!(w.core.take(held));
        let releaser = on_thread(&w, |w| w.release());
        let producer = on_thread(&w, |w| {
            let mut mine = false;
            let i = w
                .core
                .enqueue(1, meta(1), 0, &mut |_| {
                    mine = true;
                })
                .unwrap();
            (i, mine)
        });
        releaser.join().unwrap();
        let (i, by_producer) = producer.join().unwrap();
        w.settle();
        assert_eq!(w.core.state(i), GRANTED);
        assert_eq!(w.core.counters(), (0, 0));
        w.check(4);
        tally.hit(if by_producer {
            "granted-by-enqueuer"
        } else {
            "granted-by-releaser"
        });
    });
    outcomes.assert_exactly(&["granted-by-enqueuer", "granted-by-releaser"]);
}

/// Cancel vs the turn holder: tenant 0's only request waits for the held cell; one thread
/// releases the cell (its turn tries the grant CAS) while another cancels the request. Exactly
/// one wins. If the cancel won, the turn grants nothing, unlinks the tombstone, frees its slot
/// and leaves the credit free.
#[test]
fn loom_grant_cancel_vs_turn_holder() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::new(1, 3, 2);
        let held = w.enqueue(1, 1);
        let req = w.enqueue(0, 1);
        assert!(w.core.take(held));
        let releaser = on_thread(&w, |w| w.release());
        let canceller = on_thread(&w, move |w| w.cancel(req));
        releaser.join().unwrap();
        let cancelled = canceller.join().unwrap();
        w.settle();
        // The grant of `held` counted once before the race.
        let granted = w.granted.load(Ordering::Relaxed) - 1;
        assert_eq!(granted + usize::from(cancelled), 1, "taken twice or lost");
        w.check(3);
        match (cancelled, w.core.state(req), w.core.counters()) {
            (false, GRANTED, (0, 0)) => tally.hit("granted"),
            (true, VACANT, (1, 0)) => tally.hit("cancelled-slot-freed-credit-free"),
            other => panic!("unexpected: {other:?}"),
        }
        assert!(
            !w.states(3).contains(&CANCELLED),
            "a tombstone outlived the turn"
        );
    });
    outcomes.assert_exactly(&["cancelled-slot-freed-credit-free", "granted"]);
}

/// A DRR round cut short vs a second taker: tenant 0 (weight 2) has two requests and tenant 1
/// one, all waiting for the two held cells; two threads release one cell each. Either tenant
/// 0's turn took the second credit itself (both its requests granted), or the second release
/// met tenant 1 while tenant 0's turn was running, and tenant 0's round, cut short, waits in the
/// front queue: the next credit grants its second request before anything in the ring. (Under
/// the policy's lock the second outcome cannot happen: concurrent releases serialise.)
#[test]
fn loom_grant_front_queue_vs_second_taker() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::new(2, 7, 2);
        let h0 = w.enqueue(1, 1);
        let h1 = w.enqueue(1, 1);
        let a0 = w.enqueue(0, 2);
        let a1 = w.enqueue(0, 2);
        let b0 = w.enqueue(1, 1);
        let b1 = w.enqueue(1, 1);
        assert!(w.core.take(h0) && w.core.take(h1));
        let r1 = on_thread(&w, |w| w.release());
        let r2 = on_thread(&w, |w| w.release());
        r1.join().unwrap();
        r2.join().unwrap();
        w.settle();
        w.check(7);
        assert_eq!(w.core.state(a0), GRANTED);
        if w.core.state(a1) == GRANTED {
            assert_eq!(w.core.state(b0), QUEUED);
            tally.hit("round-took-both-credits");
        } else {
            assert_eq!(w.core.state(b0), GRANTED);
            assert_eq!(w.core.state(a1), QUEUED);
            // Tenant 0 is ahead of tenant 1's second request.
            assert!(w.core.take(a0));
            w.release();
            w.settle();
            assert_eq!(w.core.state(a1), GRANTED);
            assert_eq!(w.core.state(b1), QUEUED);
            tally.hit("round-resumed-from-front");
        }
    });
    outcomes.assert_exactly(&["round-resumed-from-front", "round-took-both-credits"]);
}

/// A turn handed back at a call's F25 bound (a pass of one candidate here, so the bound is
/// reached after one turn) vs a producer's announcement. One cell, held;
/// tenant 0's only request was cancelled (a tombstone) and tenant 1 waits behind it. A releaser
/// runs tenant 0's turn (nothing to grant) and hands back the turn its credit meets (tenant 1's)
/// while tenant 2's producer announces. If the announcement's `ctl` RMW comes after the hand-back
/// it takes a turn and grants tenant 1's request itself; if it comes before, the free credit and
/// the ready tenants wait for a poller's `help` (the one state where `FREE > 0 && READY > 0`).
/// Either way, after the pollers run, tenant 1's request is granted first.
#[test]
fn loom_grant_hand_back_vs_announcement() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::with_core(Core::new(1, 5, 3, 1_000).with_pass(1));
        let held = w.enqueue(2, 1);
        let dead = w.enqueue(0, 1);
        let b = w.enqueue(1, 1);
        assert!(w.cancel(dead));
        assert!(w.core.take(held));
        let releaser = on_thread(&w, |w| w.release());
        let producer = on_thread(&w, |w| w.enqueue(2, 1));
        releaser.join().unwrap();
        let c = producer.join().unwrap();
        let (free, ready) = w.core.counters();
        if free > 0 && ready > 0 {
            assert_eq!(w.core.state(b), QUEUED);
            tally.hit("left-for-a-poller");
        } else {
            assert_eq!(w.core.state(b), GRANTED);
            tally.hit("granted-by-announcer");
        }
        w.settle();
        assert_eq!(w.core.state(b), GRANTED);
        assert_eq!(w.core.state(c), QUEUED);
        w.check(5);
    });
    outcomes.assert_exactly(&["granted-by-announcer", "left-for-a-poller"]);
}

/// The hand-back hint reaches a poller woken through another thread (SPEC F25, under every
/// memory model): the releaser's pass (one candidate) meets tenant 0's tombstone and hands
/// tenant 1's turn back, then sets the hint; a second thread takes the hint and wakes a poller
/// (a Release flag standing in for the waker); the poller, woken, helps. A poller that was woken
/// must find the handed-back turn and grant tenant 1's request: with the hint stored and taken
/// `Relaxed` it could read a `ctl` from before the hand-back and leave the request beside the
/// free cell with nobody left to wake.
#[test]
fn loom_grant_hand_back_hint_reaches_a_poller() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::with_core(Core::new(1, 4, 2, 1_000).with_pass(1));
        let held = w.enqueue(1, 1);
        let dead = w.enqueue(0, 1);
        let b = w.enqueue(1, 1);
        assert!(w.cancel(dead));
        assert!(w.core.take(held));
        let woken = Arc::new(AtomicUsize::new(0));
        let releaser = on_thread(&w, |w| w.release());
        let wake = woken.clone();
        let taker = on_thread(&w, move |w| {
            if w.core.take_handed_back() {
                // Release: a waker's wake (its AtomicWaker hand-over) orders as much.
                wake.store(1, Ordering::Release);
            }
        });
        let wake = woken.clone();
        let poller = on_thread(&w, move |w| {
            // Acquire: the woken task's poll, after the wake.
            if wake.load(Ordering::Acquire) == 1 {
                let before = w.granted.load(Ordering::Relaxed);
                w.core.help(0, &mut |_| {
                    w.granted.fetch_add(1, Ordering::Relaxed);
                });
                assert_eq!(
                    w.granted.load(Ordering::Relaxed),
                    before + 1,
                    "a woken poller found no handed-back turn: request stranded"
                );
                true
            } else {
                false
            }
        });
        releaser.join().unwrap();
        taker.join().unwrap();
        if poller.join().unwrap() {
            tally.hit("woken-poller-granted");
        } else {
            tally.hit("not-woken");
        }
        w.settle();
        assert_eq!(w.core.state(b), GRANTED);
        w.check(4);
    });
    outcomes.assert_exactly(&["not-woken", "woken-poller-granted"]);
}
