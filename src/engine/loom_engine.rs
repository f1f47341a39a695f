//! Loom models of the tenant-ring engine through its `ClassEngine` face: a canceller against
//! the turn holder that would grant the same request, and the deadline sweep against a turn.
//! After each: exactly one outcome per request, the cell back and counted free, nothing queued.

use super::class::RingClass;
use crate::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
use crate::clock::Clock;
use crate::engine::{ClassEngine, ClassSetup, Ended, Enqueued, Polled, Ticket};
use crate::ids::{ClassId, RequestId, TenantId};
use crate::pool::{FixedCellPool, Lease};
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;
use core::task::{Context, Waker};

/// A clock that never moves (deadlines of 0 have passed; none other has).
struct Frozen;

impl Clock for Frozen {
    fn now(&self) -> u64 {
        0
    }
}

/// A class of `cells` cells whose cells come from a `FixedCellPool` given as a host's pool
/// (every release and acquire goes through the pool).
pub(super) fn rig(cells: u32) -> Arc<RingClass<u32>> {
    rig_with(cells, false)
}

/// `rig`, or with `built_in` the scheduler's own pool.
pub(super) fn rig_with(cells: u32, built_in: bool) -> Arc<RingClass<u32>> {
    let fixed = FixedCellPool::new(ClassId(0), cells).unwrap();
    let pool = if built_in {
        crate::pool::ClassPool::Fixed(fixed)
    } else {
        crate::pool::ClassPool::Host(
            std::sync::Arc::new(fixed),
            crate::pool::QuarantineSet::new(cells),
        )
    };
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("a")], 2)).unwrap();
    let engine = RingClass::new(ClassSetup {
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
    Arc::new(engine)
}

/// A future-mode ticket of `tenant` (its queue slot left for the engine to refund).
pub(super) fn ticket(engine: &RingClass<u32>, id: u64, tenant: u32, deadline: u64) -> Ticket {
    let permit = engine
        .ledger()
        .admit(AdmissionRequest::new(RequestId(id), TenantId(tenant)))
        .unwrap();
    let mut ticket = Ticket::from_permit(&permit);
    ticket.deadline = deadline;
    drop(permit.detach_queue_slot());
    ticket
}

/// Takes the free cell for tenant 0 (setup only).
pub(super) fn hold(engine: &RingClass<u32>, id: u64) -> Lease {
    match engine.enqueue(ticket(engine, id, 0, u64::MAX), None, None) {
        Ok(Enqueued::Granted(lease)) => {
            engine.ledger().refund_queue_slot(TenantId(0), ClassId(0));
            lease
        }
        other => panic!(
            "setup expected a fast grant, got {:?}",
            other.map_err(|e| e.0)
        ),
    }
}

/// Queues a future-mode request (setup only); its handle.
pub(super) fn queue(engine: &RingClass<u32>, id: u64, tenant: u32, deadline: u64) -> u64 {
    match engine.enqueue(ticket(engine, id, tenant, deadline), None, None) {
        Ok(Enqueued::Queued(key)) => key,
        other => panic!("setup expected to queue, got {:?}", other.map_err(|e| e.0)),
    }
}

fn poll_once(engine: &RingClass<u32>, key: u64) -> Polled {
    engine.poll(key, &mut Context::from_waker(Waker::noop()))
}

/// The class is quiescent: the cell free, nothing queued, the quota refunded.
fn check_quiet(engine: &RingClass<u32>) {
    assert_eq!(engine.queue_depth(), 0);
    assert_eq!(engine.available_cells(), 1);
    assert!(engine.ledger().usage().is_zero());
}

/// SPEC F31/F33 against a turn holder: one cell, held; tenant 1's request queued. A releaser's
/// turn would grant it while a canceller cancels it by handle. Exactly one wins: granted (the
/// cancel is refused `not-found`, the owner gets the lease) or cancelled (the turn meets the
/// tombstone and the credit goes back).
#[test]
fn loom_ring_engine_cancel_vs_turn_holder() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let engine = rig(1);
        let held = hold(&engine, 1);
        let key = queue(&engine, 2, 1, u64::MAX);
        let releaser = {
            let engine = engine.clone();
            loom::thread::spawn(move || engine.release(held))
        };
        let cancelled = engine.cancel(key).is_ok();
        releaser.join().unwrap();
        match poll_once(&engine, key) {
            Polled::Granted(lease, _) => {
                assert!(!cancelled, "a cancelled request was granted");
                engine.release(lease);
                tally.hit("granted");
            }
            Polled::Ended(Ended::Cancelled) => {
                assert!(cancelled);
                tally.hit("cancelled");
            }
            other => panic!("unexpected {other:?}"),
        }
        check_quiet(&engine);
    });
    outcomes.assert_exactly(&["cancelled", "granted"]);
}

/// An end's fate publishes what the ender did first (SPEC F33, F47): one cell, held; tenant
/// 1's request queued and cancelled on another thread while its owner polls. An owner that
/// sees `Cancelled` sees the request's quota already refunded — the ledger as it was before the
/// request was admitted — as a host that checks its usage after an outcome expects.
#[test]
fn loom_ring_engine_an_ended_fate_publishes_the_refund() {
    model(|| {
        let engine = rig(1);
        let _held = hold(&engine, 1);
        let before = engine.ledger().usage();
        let key = queue(&engine, 2, 1, u64::MAX);
        let canceller = {
            let engine = engine.clone();
            loom::thread::spawn(move || engine.cancel(key).is_ok())
        };
        if let Polled::Ended(Ended::Cancelled) = poll_once(&engine, key) {
            assert_eq!(
                engine.ledger().usage(),
                before,
                "the owner saw its request cancelled before the refund"
            );
        }
        assert!(
            canceller.join().unwrap(),
            "the queued request was cancelled"
        );
    });
}

/// The deadline sweep (behind its try-token) against a turn: one cell, held; tenant 1's
/// request, whose deadline has passed, queued. A releaser (which sweeps first if it gets the
/// token, then runs its turn) races an executor's poll (whose help sweeps). The request ends
/// exactly once: expired by a sweep, or granted by the turn when the other thread held the
/// token.
#[test]
fn loom_ring_engine_sweep_vs_turn() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let engine = rig(1);
        let held = hold(&engine, 1);
        let key = queue(&engine, 2, 1, 0);
        let releaser = {
            let engine = engine.clone();
            loom::thread::spawn(move || engine.release(held))
        };
        assert!(engine.try_next().is_none());
        releaser.join().unwrap();
        match poll_once(&engine, key) {
            Polled::Granted(lease, _) => {
                engine.release(lease);
                tally.hit("granted");
            }
            Polled::Ended(Ended::Expired) => tally.hit("expired"),
            other => panic!("unexpected {other:?}"),
        }
        check_quiet(&engine);
    });
    outcomes.assert_exactly(&["expired", "granted"]);
}

/// The last usable cell is quarantined while another is restored
/// (SPEC F22); the class ends alive with one usable cell and grants it.
#[test]
fn loom_ring_f22_quarantine_of_the_last_cell_races_a_restore() {
    model(|| {
        let engine = rig(2);
        let a = hold(&engine, 1);
        let b = hold(&engine, 2);
        let cell_a = a.cell();
        engine.quarantine_then(a, "setup", || {});
        let quarantiner = {
            let e = engine.clone();
            loom::thread::spawn(move || e.quarantine_then(b, "lost", || {}))
        };
        engine.restore_cell(cell_a).unwrap();
        quarantiner.join().unwrap();
        let lease = hold(&engine, 3);
        assert_eq!(lease.cell(), cell_a, "the class grants the restored cell");
        engine.release_then(lease, || {});
    });
}

/// Two producers race for the only (free) cell: one takes the fast path; the other either also
/// does after the first released, or queues and is granted on that release (its owner parks
/// until woken, so a lost grant deadlocks the model). Never both queued on a free cell, never
/// both holding the cell at once (the pool has one).
#[test]
fn q01_two_producers_one_free_cell() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let engine = rig(1);
        let producers: Vec<_> = (1..=2u32)
            .map(|t| {
                let engine = engine.clone();
                loom::thread::spawn(move || {
                    let ticket = ticket(&engine, u64::from(t), t - 1, u64::MAX);
                    match engine.enqueue(ticket, None, None) {
                        Ok(Enqueued::Granted(lease)) => {
                            engine
                                .ledger()
                                .refund_queue_slot(TenantId(t - 1), ClassId(0));
                            engine.release(lease);
                            true
                        }
                        Ok(Enqueued::Queued(key)) => {
                            let polled = loom::future::block_on(core::future::poll_fn(|cx| {
                                match engine.poll(key, cx) {
                                    Polled::Pending => core::task::Poll::Pending,
                                    other => core::task::Poll::Ready(other),
                                }
                            }));
                            let Polled::Granted(lease, _) = polled else {
                                panic!("the queued producer ended without a grant: {polled:?}");
                            };
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
        check_quiet(&engine);
        assert_eq!(engine.snapshot().grants, 2);
        outcomes.hit(match fast {
            2 => "both-fast",
            1 => "one-queued",
            _ => panic!("both producers queued on a free cell"),
        });
    });
    outcomes.assert_exactly(&["both-fast", "one-queued"]);
}

/// SPEC F23, the waiting submit's handshake with a departure (`engine::rooms`): one cell held,
/// the queue (2 slots) full of tenant 1's requests. A canceller ends one of them while a
/// producer of tenant 0 registers as a waiter, orders itself, and submits once more. No room is
/// missed: the producer's submit is queued, or it finds itself told of the room.
#[test]
fn loom_f23_a_departure_never_misses_a_registering_waiter() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let engine = rig(1);
        let held = hold(&engine, 1);
        let first = queue(&engine, 2, 1, u64::MAX);
        let second = queue(&engine, 3, 1, u64::MAX);
        let canceller = {
            let engine = engine.clone();
            loom::thread::spawn(move || engine.cancel(first).unwrap())
        };
        let id = engine.rooms().register(0, Waker::noop());
        engine.order_room_waiter();
        let queued = match engine.enqueue(ticket(&engine, 4, 0, u64::MAX), None, None) {
            Ok(Enqueued::Queued(key)) => Some(key),
            Err((e, _)) if e.reason() == crate::error::Reason::QueueFull => None,
            other => panic!("unexpected {:?}", other.map_err(|e| e.0)),
        };
        canceller.join().unwrap();
        let told = engine.rooms().take_notified(id, Waker::noop());
        engine.rooms().leave(id);
        match queued {
            Some(key) => {
                tally.hit("queued");
                engine.cancel(key).unwrap();
            }
            None => {
                // A refused ticket's queue slot is its caller's to refund.
                engine.ledger().refund_queue_slot(TenantId(0), ClassId(0));
                assert!(told, "the room freed by the cancel reached nobody");
                tally.hit("told");
            }
        }
        engine.cancel(second).unwrap();
        engine.release(held);
        check_quiet(&engine);
    });
    outcomes.assert_exactly(&["queued", "told"]);
}
