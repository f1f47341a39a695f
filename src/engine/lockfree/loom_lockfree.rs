//! loom models of the lock-free engine: the races between producers, releasers, cancellers,
//! withdrawing owners and executors on one small class.
//!
//! Every model builds a fresh [`LockFreeClass`] with one or two cells and a queue of two, sets up
//! whatever is held or queued before spawning, lets two threads race, and after joining checks
//! that the class is quiescent: every cell back in the pool and counted free in `ctl`, nothing
//! queued, the token and `DIRTY` clear, and (after a compacting pass) every arena slot free. A
//! waiter that is never woken parks forever, which loom reports as a deadlock, so a lost wake-up
//! fails the model rather than passing silently.

use super::LockFreeClass;
use crate::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
use crate::clock::Clock;
use crate::engine::{ClassEngine, ClassSetup, Ended, Enqueued, Polled, Pulled, Ticket};
use crate::pool::{CellPool, FixedCellPool, Lease};
use crate::sync::model::{model, Outcomes};
use crate::sync::{Arc, Ordering};
use crate::{ClassId, Code, RequestId, TenantId};
use core::task::{Context, Poll, Waker};

/// A clock that never moves: the models are about interleavings, not time, and a constant clock
/// adds no modelled accesses.
struct Frozen;

impl Clock for Frozen {
    fn now(&self) -> u64 {
        0
    }
}

/// One class under test.
struct Rig {
    engine: Arc<LockFreeClass<u32>>,
    cells: u32,
}

/// A class whose cells come from a `FixedCellPool` given as a host's pool (every release and
/// acquire goes through the pool).
fn rig(cells: u32) -> Rig {
    rig_with(cells, false)
}

/// `rig`, or with `built_in` the scheduler's own pool (a release with work queued hands its cell
/// straight to the pass it runs).
fn rig_with(cells: u32, built_in: bool) -> Rig {
    let pool = FixedCellPool::new(ClassId(0), cells).unwrap();
    let pool = if built_in {
        crate::pool::ClassPool::Fixed(pool)
    } else {
        crate::pool::ClassPool::Host(
            std::sync::Arc::new(pool),
            crate::pool::QuarantineSet::new(cells),
        )
    };
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("a")], 2)).unwrap();
    let engine = LockFreeClass::new(ClassSetup {
        class: ClassId(0),
        ids: std::sync::Arc::new(crate::raw::idset::IdSet::new(8).unwrap()),
        ledger,
        cells,
        queue_capacity: 2,
        max_tenants: 2,
        starvation_after: u64::MAX,
        pool,
        clock: std::sync::Arc::new(Frozen),
    })
    .unwrap();
    Rig {
        engine: Arc::new(engine),
        cells,
    }
}

/// A future-mode ticket of `tenant`, admitted by the engine's ledger. Its queue slot stays
/// reserved for the engine to refund when the request leaves the queue; the rest of the permit
/// goes back at once (the models are about the engine, not the quota).
fn ticket(engine: &LockFreeClass<u32>, id: u64, tenant: u32) -> Ticket {
    let permit = engine
        .ledger
        .admit(AdmissionRequest::new(RequestId(id), TenantId(tenant)))
        .unwrap();
    let ticket = Ticket::from_permit(&permit);
    drop(permit.detach_queue_slot());
    ticket
}

/// What the facade does at a fast-path grant: the queue slot goes back (SPEC F45). (A queued
/// request's slot is refunded by the engine when it leaves the queue.)
fn fast_granted(engine: &LockFreeClass<u32>, tenant: u32) {
    engine
        .ledger
        .refund_queue_slot(TenantId(tenant), ClassId(0));
}

/// Takes a cell on an idle class (setup only: nothing races yet).
fn hold(engine: &LockFreeClass<u32>, id: u64) -> Lease {
    match engine.enqueue(ticket(engine, id, 0), None, None) {
        Ok(Enqueued::Granted(lease)) => {
            fast_granted(engine, 0);
            lease
        }
        other => panic!(
            "setup expected a fast grant, got {:?}",
            other.map_err(|e| e.0)
        ),
    }
}

/// Queues a request behind held cells (setup only).
fn queue(engine: &LockFreeClass<u32>, id: u64, tenant: u32) -> u64 {
    match engine.enqueue(ticket(engine, id, tenant), None, None) {
        Ok(Enqueued::Queued(key)) => key,
        other => panic!("setup expected to queue, got {:?}", other.map_err(|e| e.0)),
    }
}

/// Polls `key` once with a waker that does nothing.
fn poll_once(engine: &LockFreeClass<u32>, key: u64) -> Polled {
    engine.poll(key, &mut Context::from_waker(Waker::noop()))
}

/// Waits for `key` the way an enqueue future does (parks until woken). Returns what it ended
/// with and how many polls that took.
fn wait(engine: &LockFreeClass<u32>, key: u64) -> (Polled, usize) {
    let mut polls = 0;
    let out = loom::future::block_on(core::future::poll_fn(|cx| {
        polls += 1;
        match engine.poll(key, cx) {
            Polled::Pending => Poll::Pending,
            done => Poll::Ready(done),
        }
    }));
    (out, polls)
}

/// Waits for `key` and expects a grant; returns the lease and whether the first poll had it.
fn wait_granted(engine: &LockFreeClass<u32>, key: u64) -> (Lease, bool) {
    match wait(engine, key) {
        (Polled::Granted(lease, _), polls) => {
            // The handle is consumed: presenting it again is refused (SPEC F30).
            assert!(
                matches!(poll_once(engine, key), Polled::Ended(Ended::Failed(e)) if matches!(e.reason(), crate::Reason::StaleHandle)),
                "a granted handle stayed live"
            );
            (lease, polls == 1)
        }
        (other, _) => panic!("expected a grant, got {other:?}"),
    }
}

/// The owner cancels queued request `key` while something may grant it. Returns whether the
/// cancel won; it then sees exactly the cancellation and cannot cancel twice. Otherwise the entry
/// was granted: the lease is ready at the first poll and goes straight back.
fn cancel_or_take_grant(engine: &LockFreeClass<u32>, key: u64) -> bool {
    match engine.cancel(key) {
        Ok(()) => {
            let seen = poll_once(engine, key);
            assert!(matches!(seen, Polled::Ended(Ended::Cancelled)), "{seen:?}");
            assert!(engine.cancel(key).is_err(), "cancelled twice");
            true
        }
        Err(e) => {
            assert_eq!(e.code(), Code::NotFound);
            let (lease, first) = wait_granted(engine, key);
            assert!(first, "a non-queued entry must be ready at once");
            engine.release(lease);
            false
        }
    }
}

/// After the threads are joined: the class is back at rest with nothing lost or stranded.
fn assert_quiescent(rig: &Rig) {
    let engine = &*rig.engine;
    // Relaxed: the threads are joined.
    let cur = engine.ctl.load(Ordering::Relaxed);
    assert_eq!(
        cur.free(),
        u64::from(rig.cells),
        "cell credits lost or doubled: {cur:?}"
    );
    assert_eq!(cur.queued(), 0, "queued count left over: {cur:?}");
    assert!(
        !cur.token() && !cur.dirty(),
        "token or DIRTY left set: {cur:?}"
    );
    let pool = engine.pool.counters();
    assert_eq!(
        pool.available, rig.cells,
        "a cell never came back: {pool:?}"
    );
    assert_eq!(pool.leased, 0, "{pool:?}");
    let snap = engine.snapshot();
    assert_eq!(snap.queue_depth, 0);
    // A grant that lost its CAS to a canceller gave its cell back; the snapshot must not show
    // it as leased.
    assert_eq!(snap.oldest_lease_age, None, "a free cell shows a lease age");
    // Cancelled entries stay in the inbox or the policy until a pass meets them; a compacting
    // pass must drain them and free every slot (no reference bit leaked).
    engine.kick_with(true);
    assert!(engine.inbox.is_empty());
    assert_eq!(
        engine.arena.available(),
        engine.arena.capacity(),
        "an arena slot leaked"
    );
    assert!(engine.try_next().is_none());
    // Every queue slot was refunded exactly once, whichever thread moved its entry out of the
    // queue (SPEC F45, F51).
    let usage = engine.ledger.usage();
    assert!(usage.is_zero(), "quota left reserved: {usage:?}");
}

fn dirty_marks(rig: &Rig) -> usize {
    // Relaxed: the threads are joined.
    rig.engine.dirty_marks.load(Ordering::Relaxed)
}

fn unqueued_now(rig: &Rig) -> usize {
    // Relaxed: the threads are joined.
    rig.engine.unqueued_now.load(Ordering::Relaxed)
}

fn lost_grants(rig: &Rig) -> usize {
    // Relaxed: the threads are joined.
    rig.engine.lost_grants.load(Ordering::Relaxed)
}

/// SPEC F17: a request queues behind the only cell while another thread releases that cell. The
/// request is always granted: on the fast path if the release came first, else by the releaser's
/// pass or its own poll's kick — before it parks or by waking it.
#[test]
fn f17_enqueue_racing_release_is_never_lost() {
    enqueue_racing_release(false);
}

/// As `f17_enqueue_racing_release_is_never_lost`, with the built-in pool (the released cell
/// goes straight to the pass that grants the waiter, or back to the pool).
#[test]
fn f17_enqueue_racing_a_release_that_hands_its_cell_over() {
    enqueue_racing_release(true);
}

fn enqueue_racing_release(built_in: bool) {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let rig = rig_with(1, built_in);
        let held = hold(&rig.engine, 1);
        let waiter = {
            let engine = rig.engine.clone();
            loom::thread::spawn(
                move || match engine.enqueue(ticket(&engine, 2, 1), None, None) {
                    Ok(Enqueued::Granted(lease)) => {
                        fast_granted(&engine, 1);
                        engine.release(lease);
                        "fast-path"
                    }
                    Ok(Enqueued::Queued(key)) => {
                        let (lease, first) = wait_granted(&engine, key);
                        engine.release(lease);
                        if first {
                            "granted-on-first-poll"
                        } else {
                            "granted-after-wake"
                        }
                    }
                    Err((e, _)) => panic!("enqueue refused: {e:?}"),
                },
            )
        };
        let releaser = {
            let engine = rig.engine.clone();
            loom::thread::spawn(move || engine.release(held))
        };
        let outcome = waiter.join().unwrap();
        releaser.join().unwrap();
        assert_quiescent(&rig);
        // The held cell's grant and the waiter's, each counted once whichever way it went: a
        // fast-path grant (an RMW from any thread) or a pass's (the token holder's plain write).
        assert_eq!(rig.engine.snapshot().grants, 2);
        outcomes.hit(outcome);
    });
    outcomes.assert_exactly(&["fast-path", "granted-after-wake", "granted-on-first-poll"]);
}

/// The waker hand-off in the entry's state word (`WAITING`): the owner has left a waker with a
/// first poll and polls again with another one (taking the cell back, replacing the waker,
/// setting `WAITING` again) while a releaser's pass grants the entry. Whichever CAS wins, the
/// owner is never left asleep (loom reports a deadlock if the wake is lost), the grant is taken
/// once, and no waker stays in the slot.
#[test]
fn f17_repoll_replacing_the_waker_racing_the_grant() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let rig = rig(1);
        let held = hold(&rig.engine, 1);
        let key = queue(&rig.engine, 2, 1);
        assert!(matches!(poll_once(&rig.engine, key), Polled::Pending));
        let owner = {
            let engine = rig.engine.clone();
            loom::thread::spawn(move || {
                let (lease, first) = wait_granted(&engine, key);
                engine.release(lease);
                if first {
                    "granted-on-repoll"
                } else {
                    "granted-after-wake"
                }
            })
        };
        let releaser = {
            let engine = rig.engine.clone();
            loom::thread::spawn(move || engine.release(held))
        };
        let outcome = owner.join().unwrap();
        releaser.join().unwrap();
        assert_quiescent(&rig);
        // SAFETY: the threads are joined and the slot is free: nobody else touches it.
        let left = rig
            .engine
            .arena
            .get(0)
            .waker
            .with(|w| unsafe { (*w).is_some() });
        assert!(!left, "a waker stayed in a freed slot");
        outcomes.hit(outcome);
    });
    outcomes.assert_exactly(&["granted-after-wake", "granted-on-repoll"]);
}

/// SPEC F31/F30: the owner cancels a queued request while another thread releases the cell it
/// waits for. Exactly one of cancel and grant wins; a grant is taken exactly once; a grant that
/// loses its CAS to the cancel gives the cell straight back.
#[test]
fn f31_cancel_racing_grant_exactly_one_wins() {
    cancel_racing_grant(false);
}

/// As `f31_cancel_racing_grant_exactly_one_wins`, with the built-in pool: the releaser hands
/// its cell straight to the pass it runs, which grants it, or gives it back to the pool (and
/// then its credit) when the cancel won.
#[test]
fn f31_cancel_racing_the_grant_of_a_handed_over_cell() {
    cancel_racing_grant(true);
}

fn cancel_racing_grant(built_in: bool) {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    let credit: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let rig = rig_with(1, built_in);
        let held = hold(&rig.engine, 1);
        let key = queue(&rig.engine, 2, 1);
        let owner = {
            let engine = rig.engine.clone();
            loom::thread::spawn(move || {
                if cancel_or_take_grant(&engine, key) {
                    "cancelled"
                } else {
                    "granted"
                }
            })
        };
        let releaser = {
            let engine = rig.engine.clone();
            loom::thread::spawn(move || engine.release(held))
        };
        let outcome = owner.join().unwrap();
        releaser.join().unwrap();
        // A cancel either takes its entry out of the policy itself (the token was free) or
        // leaves it for the releaser's pass to drop (the token was busy, or the entry was not in
        // the policy yet and the pass's drain took it out).
        let outcome = match (outcome, lost_grants(&rig), unqueued_now(&rig)) {
            ("cancelled", 0, 1) => "cancelled-unqueued-now",
            ("cancelled", 0, 0) => "cancelled-left-to-pass",
            ("cancelled", 1, 0) => "cancelled-grant-lost-cas",
            ("granted", 0, 0) => "granted",
            other => panic!("impossible {other:?}"),
        };
        assert_quiescent(&rig);
        outcomes.hit(outcome);
        // The releaser found the request queued and the token free, took the token with the
        // cell's credit and granted it, or found the request cancelled by then and gave the
        // credit back; or it gave the credit back at once (the token was taken, or nothing
        // was queued any more). Every way, the credit came back (`assert_quiescent`).
        // Relaxed: the threads are joined.
        let [kept, returned] = rig
            .engine
            .credit_passes
            .each_ref()
            .map(|c| c.load(Ordering::Relaxed));
        credit.hit(match (kept, returned, outcome) {
            (1, 0, "granted") => "kept-and-granted",
            (1, 1, _) => "kept-and-returned",
            (1, 0, _) => "kept-grant-lost-to-cancel",
            (0, 0, _) => "given-back",
            other => panic!("impossible {other:?}"),
        });
    });
    outcomes.assert_exactly(&[
        "cancelled-left-to-pass",
        "cancelled-unqueued-now",
        "cancelled-grant-lost-cas",
        "granted",
    ]);
    credit.assert_exactly(&[
        "kept-and-granted",
        "kept-and-returned",
        "kept-grant-lost-to-cancel",
        "given-back",
    ]);
}

/// SPEC F31 with a second request queued: A is cancelled while the cell is released, so the
/// releaser's pass (which grants B, or A if it gets there first) and the canceller's
/// `unqueue_now` compete for the dispatch token and the policy. Whoever runs second sees the
/// first one's policy writes (loom fails on any policy access not ordered by the token), A ends
/// exactly once, B is granted, and the class is back at rest.
#[test]
fn f31_cancel_racing_the_pass_that_grants_another() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let rig = rig(1);
        let held = hold(&rig.engine, 1);
        let a = queue(&rig.engine, 2, 0);
        let b = queue(&rig.engine, 3, 1);
        let canceller = {
            let engine = rig.engine.clone();
            // If A was granted first (its tenant is ahead in the ring), its cell is handed on.
            loom::thread::spawn(move || cancel_or_take_grant(&engine, a))
        };
        let releaser = {
            let engine = rig.engine.clone();
            loom::thread::spawn(move || engine.release(held))
        };
        let cancelled = canceller.join().unwrap();
        releaser.join().unwrap();
        let (lease, _) = wait_granted(&rig.engine, b);
        rig.engine.release(lease);
        assert_quiescent(&rig);
        outcomes.hit(match (cancelled, unqueued_now(&rig)) {
            (true, 1) => "a-cancelled-unqueued-now",
            (true, 0) => "a-cancelled-left-to-pass",
            (false, 0) => "a-granted-first",
            other => panic!("impossible {other:?}"),
        });
    });
    outcomes.assert_exactly(&[
        "a-cancelled-left-to-pass",
        "a-cancelled-unqueued-now",
        "a-granted-first",
    ]);
}

/// SPEC F42: the enqueue future is dropped (`withdraw`) while another thread releases the cell it
/// waits for. If the grant got there first the withdrawing owner gets the untouched lease and
/// returns it; either way the cell ends up back in the pool exactly once.
#[test]
fn f42_dropped_future_racing_grant_returns_the_cell_once() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let rig = rig(1);
        let held = hold(&rig.engine, 1);
        let key = queue(&rig.engine, 2, 1);
        let owner = {
            let engine = rig.engine.clone();
            loom::thread::spawn(move || match engine.withdraw(key, Ended::Cancelled) {
                Some(lease) => {
                    engine.release(lease);
                    "withdrew-granted"
                }
                None => "withdrew-queued",
            })
        };
        let releaser = {
            let engine = rig.engine.clone();
            loom::thread::spawn(move || engine.release(held))
        };
        let outcome = owner.join().unwrap();
        releaser.join().unwrap();
        let outcome = match (outcome, lost_grants(&rig)) {
            ("withdrew-queued", 1) => "withdrew-queued-grant-lost-cas",
            (o, 0) => o,
            other => panic!("impossible {other:?}"),
        };
        // The handle is consumed either way.
        assert!(rig.engine.withdraw(key, Ended::Cancelled).is_none());
        assert_quiescent(&rig);
        outcomes.hit(outcome);
    });
    outcomes.assert_exactly(&[
        "withdrew-granted",
        "withdrew-queued",
        "withdrew-queued-grant-lost-cas",
    ]);
}

/// Two producers race for the only (free) cell: one takes the fast path; the other either also
/// does after the first released, or queues and is granted on that release. Never both queued,
/// never both holding the cell at once.
#[test]
fn q01_two_producers_one_free_cell() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let rig = rig(1);
        let producers: Vec<_> = (1..=2u32)
            .map(|t| {
                let engine = rig.engine.clone();
                loom::thread::spawn(move || {
                    match engine.enqueue(ticket(&engine, u64::from(t), t - 1), None, None) {
                        Ok(Enqueued::Granted(lease)) => {
                            fast_granted(&engine, t - 1);
                            engine.release(lease);
                            true
                        }
                        Ok(Enqueued::Queued(key)) => {
                            let (lease, _) = wait_granted(&engine, key);
                            engine.release(lease);
                            false
                        }
                        Err((e, _)) => panic!("enqueue refused: {e:?}"),
                    }
                })
            })
            .collect();
        let fast = producers
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&f| f)
            .count();
        assert_quiescent(&rig);
        // One fast-path grant may race the pass that grants the other: both are counted.
        assert_eq!(rig.engine.snapshot().grants, 2);
        outcomes.hit(match fast {
            2 => "both-fast",
            1 => "one-queued",
            _ => panic!("both producers queued on a free cell"),
        });
    });
    outcomes.assert_exactly(&["both-fast", "one-queued"]);
}

/// Pull mode: a producer hands a payload and its permit to the class while an executor asks for
/// work. The executor gets the payload exactly once, with a lease; the permit is refunded exactly
/// once (SPEC F51); a waiting executor is always woken.
#[test]
fn pull_enqueue_racing_executor_delivers_once() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let rig = rig(1);
        let permit = rig
            .engine
            .ledger
            .admit(AdmissionRequest::new(RequestId(1), TenantId(1)))
            .unwrap();
        let producer = {
            let engine = rig.engine.clone();
            loom::thread::spawn(move || {
                let ticket = Ticket::from_permit(&permit);
                match engine.enqueue(ticket, Some((permit, 7)), None) {
                    Ok(Enqueued::Queued(_)) => {}
                    Ok(Enqueued::Granted(_)) => panic!("pull mode took the fast path"),
                    Err((e, _)) => panic!("enqueue refused: {e:?}"),
                }
            })
        };
        let executor = {
            let engine = rig.engine.clone();
            loom::thread::spawn(move || {
                let (pulled, outcome) = match engine.try_next() {
                    Some(p) => (p, "taken-by-try-next"),
                    None => {
                        let mut slot = None;
                        let mut polls = 0;
                        let p = loom::future::block_on(core::future::poll_fn(|cx| {
                            polls += 1;
                            engine.poll_next(cx, &mut slot)
                        }));
                        if let Some(i) = slot {
                            engine.forget_waiter(i);
                        }
                        let p: Pulled<u32> = p.expect("class is live");
                        (
                            p,
                            if polls == 1 {
                                "taken-on-first-poll"
                            } else {
                                "taken-after-wake"
                            },
                        )
                    }
                };
                assert_eq!(pulled.payload, 7);
                assert!(engine.try_next().is_none(), "delivered twice");
                engine.release(pulled.lease);
                drop(pulled.permit);
                outcome
            })
        };
        producer.join().unwrap();
        let outcome = executor.join().unwrap();
        assert!(
            rig.engine.ledger.usage().is_zero(),
            "permit not refunded: {:?}",
            rig.engine.ledger.usage()
        );
        assert_quiescent(&rig);
        outcomes.hit(outcome);
    });
    outcomes.assert_exactly(&[
        "taken-after-wake",
        "taken-by-try-next",
        "taken-on-first-poll",
    ]);
}

/// The dispatch token is try-only: two cells come back on two threads while two requests wait.
/// Both releasers want a pass; when one finds the token held it only leaves `DIRTY`, and the
/// holder must run again, so neither request is stranded with a free cell (each owner parks until
/// granted, so a stranded request deadlocks the model).
#[test]
fn q01_token_dirty_handoff_strands_nothing() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let rig = rig(2);
        let held = [hold(&rig.engine, 1), hold(&rig.engine, 2)];
        let keys = [queue(&rig.engine, 3, 0), queue(&rig.engine, 4, 1)];
        let threads: Vec<_> = held
            .into_iter()
            .zip(keys)
            .map(|(lease, key)| {
                let engine = rig.engine.clone();
                loom::thread::spawn(move || {
                    engine.release(lease);
                    let (lease, _) = wait_granted(&engine, key);
                    engine.release(lease);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let outcome = if dirty_marks(&rig) > 0 {
            "dirty-seen"
        } else {
            "no-dirty"
        };
        assert_quiescent(&rig);
        outcomes.hit(outcome);
    });
    outcomes.assert_exactly(&["dirty-seen", "no-dirty"]);
}

/// The last usable cell is quarantined while the host restores another (SPEC F22): `DEAD`
/// must end matching the usable count. Two cells, one quarantined at setup; one thread
/// quarantines the other while another restores the first. Whichever way they interleave, one
/// cell is usable at the end and the class grants it: it is not left dead beside a usable cell.
#[test]
fn loom_f22_quarantine_of_the_last_cell_races_a_restore() {
    model(|| {
        let r = rig_with(2, true);
        let a = hold(&r.engine, 1);
        let b = hold(&r.engine, 2);
        let cell_a = a.cell();
        r.engine.quarantine_then(a, "setup", || {});
        let quarantiner = {
            let e = r.engine.clone();
            loom::thread::spawn(move || e.quarantine_then(b, "lost", || {}))
        };
        r.engine.restore_cell(cell_a).unwrap();
        quarantiner.join().unwrap();
        let lease = hold(&r.engine, 3);
        assert_eq!(lease.cell(), cell_a, "the class grants the restored cell");
        r.engine.release_then(lease, || {});
    });
}
