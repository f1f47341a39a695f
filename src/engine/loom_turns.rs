//! loom models of the turn protocol: turn pop vs producer push (no lost turn), credit vs turn
//! (no stranded request while a cell is free), the owner's closing re-check vs a producer, and
//! cancel vs turn holder.
//!
//! Per-tenant queues are modelled by a count of queued requests per tenant. After the racing
//! threads join, every model checks the protocol's invariant (never `FREE > 0` with
//! `READY > 0`), that every tenant with queued work is in the ring, and conservation.

use super::{Turn, Turns, IDLE, IN_RING};
use crate::sync::model::{model, Outcomes};
use crate::sync::{Arc, AtomicUsize, Ordering};
use loom::thread;

struct World {
    turns: Turns,
    queued: Vec<AtomicUsize>,
    granted: AtomicUsize,
}

/// Runs `f` on a new loom thread with a handle on the world.
fn on_thread<R: Send + 'static>(
    w: &Arc<World>,
    f: impl FnOnce(&World) -> R + Send + 'static,
) -> thread::JoinHandle<R> {
    let w = w.clone();
    thread::spawn(move || f(&w))
}

impl World {
    fn new(cells: u32, tenants: u32) -> Arc<World> {
        Arc::new(World {
            turns: Turns::new(cells, tenants),
            queued: (0..tenants).map(|_| AtomicUsize::new(0)).collect(),
            granted: AtomicUsize::new(0),
        })
    }

    /// A producer publishes one request for `t` and announces it; runs a turn it is handed.
    fn produce(&self, t: u32) {
        // Release: the request is published before the announcement (pairs with the owner's
        // Acquire reads through the state word).
        self.queued[t as usize].fetch_add(1, Ordering::Release);
        if let Some(turn) = self.turns.announce(t) {
            self.run(turn);
        }
    }

    /// A cell comes back; runs a turn it is handed.
    fn release(&self) {
        if let Some(turn) = self.turns.give_credit() {
            self.run(turn);
        }
    }

    /// Runs `turn` and every turn handed on: grant one request if the tenant has one.
    fn run(&self, mut turn: Turn) {
        loop {
            let t = turn.tenant() as usize;
            // AcqRel: takes one published request.
            let g = self.queued[t]
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok();
            if g {
                self.granted.fetch_add(1, Ordering::Relaxed);
            }
            // Acquire: sees requests published before the announcements this owner acquired.
            let more = || self.queued[t].load(Ordering::Acquire) > 0;
            match self.turns.end_turn(turn, g, more) {
                Some(next) => turn = next,
                None => return,
            }
        }
    }

    /// The invariants of a quiescent world; returns (free, ready). A tenant with queued work
    /// is in the ring; one without may be idle, or in the ring because of an announcement that
    /// came after its request had already been granted (a stale turn: when a credit meets it,
    /// it grants nothing and hands the credit on).
    fn check(&self) -> (u64, u64) {
        let (free, ready) = self.turns.counters();
        assert!(free == 0 || ready == 0, "a free cell and a ready tenant");
        let mut in_ring = 0;
        for (t, q) in self.queued.iter().enumerate() {
            let s = self.turns.state(t as u32);
            if q.load(Ordering::Relaxed) > 0 {
                assert_eq!(s, IN_RING, "tenant {t} has work but no turn coming");
            } else {
                assert!(s == IDLE || s == IN_RING, "tenant {t} owned at rest");
            }
            in_ring += usize::from(s == IN_RING);
        }
        assert_eq!(ready as usize, in_ring);
        (free, ready)
    }
}

/// Turn pop vs producer push: one cell, two tenants announcing at once. Exactly one request is
/// granted (whoever met the credit), the other tenant waits in the ring; releasing the cell
/// then grants it.
#[test]
fn loom_turns_two_producers_one_cell() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::new(1, 2);
        let ps: Vec<_> = (0..2u32)
            .map(|t| on_thread(&w, move |w| w.produce(t)))
            .collect();
        for p in ps {
            p.join().unwrap();
        }
        assert_eq!(w.granted.load(Ordering::Relaxed), 1);
        assert_eq!(w.check(), (0, 1));
        tally.hit(if w.queued[0].load(Ordering::Relaxed) == 0 {
            "tenant-0-first"
        } else {
            "tenant-1-first"
        });
        w.release();
        assert_eq!(w.granted.load(Ordering::Relaxed), 2);
        assert_eq!(w.check(), (0, 0));
    });
    outcomes.assert_exactly(&["tenant-0-first", "tenant-1-first"]);
}

/// Credit vs turn: the only cell is held; tenant 0 has one request waiting in the ring. One
/// thread releases the cell while another produces a second request for tenant 0 (which may
/// find tenant 0 owned by the releaser's turn and mark it dirty). Both requests are granted or
/// waiting with a turn coming; never a free cell beside a ready tenant.
#[test]
fn loom_turns_release_vs_producer_of_the_owned_tenant() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::new(1, 1);
        // Take the cell with a grant of a first request, then queue another.
        w.produce(0);
        assert_eq!(w.granted.load(Ordering::Relaxed), 1);
        w.produce(0);
        let releaser = on_thread(&w, |w| w.release());
        let producer = on_thread(&w, |w| w.produce(0));
        releaser.join().unwrap();
        producer.join().unwrap();
        // The release granted the second request; the third waits for the next cell.
        assert_eq!(w.granted.load(Ordering::Relaxed), 2);
        assert_eq!(w.check(), (0, 1));
        tally.hit("third-waits-in-ring");
        w.release();
        assert_eq!(w.granted.load(Ordering::Relaxed), 3);
        assert_eq!(w.check(), (0, 0));
    });
    outcomes.assert_exactly(&["third-waits-in-ring"]);
}

/// The owner's closing re-check vs a producer: tenant 0's first request waits in the ring with
/// no cell free; one thread releases two cells while a producer adds a second request. Whatever
/// the interleaving, both are granted (no lost turn): by the producer (the tenant was idle
/// again and a credit free) or by an owner (it saw the work, or the dirty mark, and requeued
/// the tenant). If an owner granted the second request before the producer's announcement, the
/// announcement leaves a stale turn in the ring, which the next credit passes over.
#[test]
fn loom_turns_owner_closing_vs_producer() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::new(0, 1);
        w.produce(0);
        assert_eq!(w.check(), (0, 1));
        let releaser = on_thread(&w, |w| {
            w.release();
            w.release();
        });
        let producer = on_thread(&w, |w| w.produce(0));
        releaser.join().unwrap();
        producer.join().unwrap();
        assert_eq!(w.granted.load(Ordering::Relaxed), 2);
        match w.check() {
            (0, 0) => tally.hit("both-granted-idle"),
            (0, 1) => {
                // The stale turn: a third credit passes over it and stays free.
                w.release();
                assert_eq!(w.granted.load(Ordering::Relaxed), 2);
                assert_eq!(w.check(), (1, 0));
                tally.hit("both-granted-stale-turn");
            }
            other => panic!("unexpected counters {other:?}"),
        }
    });
    outcomes.assert_exactly(&["both-granted-idle", "both-granted-stale-turn"]);
}

/// Cancel vs turn holder: tenant 0's only request waits in the ring; one thread releases a cell
/// (its turn tries to grant the request) while another cancels the request (takes it out of the
/// tenant's queue). Exactly one of them gets it; if the cancel won, the turn grants nothing and
/// its credit goes back to `ctl` free, with no tenant left ready.
#[test]
fn loom_turns_cancel_vs_turn_holder() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::new(0, 1);
        w.produce(0);
        let releaser = on_thread(&w, |w| w.release());
        let canceller = on_thread(&w, |w| {
            // AcqRel: takes the request out, as the entry CAS of a cancel does.
            w.queued[0]
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok()
        });
        releaser.join().unwrap();
        let cancelled = canceller.join().unwrap();
        let granted = w.granted.load(Ordering::Relaxed);
        assert_eq!(granted + usize::from(cancelled), 1, "taken twice or lost");
        match (cancelled, w.check()) {
            (false, (0, 0)) => tally.hit("granted"),
            (true, (1, 0)) => tally.hit("cancelled-credit-back"),
            other => panic!("unexpected: {other:?}"),
        }
    });
    outcomes.assert_exactly(&["cancelled-credit-back", "granted"]);
}
