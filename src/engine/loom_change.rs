//! loom models of the in-place change (SPEC F36, `change.rs`): a change racing the grant of
//! the same request (applied before it, or refused as too late: never lost, and the notice
//! never keeps the slot once the tenant goes idle), a change whose request must move behind
//! another racing the turn that would grant it, and a change racing a cancel.

use super::super::{Core, Meta, Wanted, GRANTED, VACANT};
use crate::policy::NO_DEADLINE;
use crate::sync::model::{model, Outcomes};
use crate::sync::{Arc, AtomicUsize, Ordering};
use loom::thread;

fn meta(priority: u8) -> Meta {
    Meta {
        priority,
        deadline: NO_DEADLINE,
        enqueued_at: 0,
        weight: 1,
    }
}

struct World {
    core: Core,
    /// The slots granted, in order (at most 4).
    order: crate::sync::Mutex<Vec<u32>>,
    granted: AtomicUsize,
}

impl World {
    fn new(slots: u32, tenants: u32) -> Arc<World> {
        Arc::new(World {
            core: Core::new(1, slots, tenants, 1_000),
            order: crate::sync::Mutex::new(Vec::with_capacity(4)),
            granted: AtomicUsize::new(0),
        })
    }

    fn grant(&self, index: u32) {
        self.granted.fetch_add(1, Ordering::Relaxed);
        self.order.lock().unwrap().push(index);
    }

    fn enqueue(&self, tenant: u32, priority: u8) -> u32 {
        self.core
            .enqueue(tenant, meta(priority), 0, &mut |i| self.grant(i))
            .unwrap()
    }

    fn release(&self) {
        self.core.release(0, &mut |i| self.grant(i));
    }

    /// A change through a handle, as the class layer makes it: a reference for the call.
    fn change(&self, index: u32, priority: u8) -> bool {
        let handle = self.core.handle(index);
        let Some(i) = self.core.try_ref(handle) else {
            return false;
        };
        let wanted = Wanted {
            priority: Some(priority),
            deadline: None,
        };
        let ok = self
            .core
            .change(i, wanted, 0, &mut |g| self.grant(g))
            .is_ok();
        self.core.unref(i);
        ok
    }

    fn settle(&self) {
        while self.core.help(0, &mut |i| self.grant(i)) {}
    }
}

fn on_thread<R: Send + 'static>(
    w: &Arc<World>,
    f: impl FnOnce(&World) -> R + Send + 'static,
) -> thread::JoinHandle<R> {
    let w = w.clone();
    thread::spawn(move || f(&w))
}

/// Tenant 0's only request waits for the one cell (held by tenant 1). One thread releases
/// the cell, whose turn grants the request; another raises its priority. The change is either
/// applied (its CAS came first: the grant CAS failed on it and the turn re-picked) or refused
/// as too late; the request is granted exactly once either way. Once the grant is taken the
/// slot is free: a notice left on the stack of a tenant that went idle was looked at by a
/// cleanup turn (`Turns::touch`), not kept holding the slot.
#[test]
fn loom_f36_change_vs_grant_of_the_same_request() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::new(3, 2);
        let held = w.enqueue(1, 0);
        let req = w.enqueue(0, 0);
        assert!(w.core.take(held));
        let releaser = on_thread(&w, |w| w.release());
        let changer = on_thread(&w, move |w| w.change(req, 5));
        releaser.join().unwrap();
        let changed = changer.join().unwrap();
        w.settle();
        assert_eq!(
            w.granted.load(Ordering::Relaxed),
            2,
            "granted once, or lost"
        );
        assert_eq!(w.core.state(req), GRANTED);
        assert!(w.core.take(req));
        assert_eq!(w.core.state(req), VACANT);
        assert!(
            w.core.change_quiet(req, 0),
            "a notice or a wanted value outlived the request"
        );
        tally.hit(if changed { "applied" } else { "too-late" });
    });
    outcomes.assert_exactly(&["applied", "too-late"]);
}

/// Tenant 0 has `a` (priority 0, older) and `b` (priority 1): `b` is the candidate. One
/// thread releases the cell; another lowers `b` to 0, which puts it behind `a` (older, equal
/// priority). If the change returned success, `a` was granted (the change was in the order
/// before the grant); if `b` was granted, the change was refused as too late. Never a granted
/// `b` beside a successful change.
#[test]
fn loom_f36_change_is_in_the_order_before_the_grant_or_too_late() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::new(4, 2);
        let held = w.enqueue(1, 0);
        let a = w.enqueue(0, 0);
        let b = w.enqueue(0, 1);
        assert!(w.core.take(held));
        w.order.lock().unwrap().clear();
        let releaser = on_thread(&w, |w| w.release());
        let changer = on_thread(&w, move |w| w.change(b, 0));
        releaser.join().unwrap();
        let changed = changer.join().unwrap();
        w.settle();
        let first = w.order.lock().unwrap().clone();
        match (changed, first.as_slice()) {
            (true, [g]) if *g == a => tally.hit("lowered-a-granted"),
            (false, [g]) if *g == b => tally.hit("too-late-b-granted"),
            other => panic!("a change lost or misapplied: {other:?} (a = {a}, b = {b})"),
        }
        // The other one goes next, and everything is freed.
        assert!(w.core.take(first[0]));
        w.release();
        w.settle();
        let order = w.order.lock().unwrap().clone();
        assert_eq!(
            order.len(),
            2,
            "the second request was not granted: {order:?}"
        );
        assert!(w.core.take(order[1]));
        for i in [a, b] {
            assert!(w.core.change_quiet(i, 0), "slot {i} kept by a notice");
        }
    });
    outcomes.assert_exactly(&["lowered-a-granted", "too-late-b-granted"]);
}

/// A change racing a cancel of the same queued request (no cell free, so no grant): the cancel
/// always wins its CAS (`QUEUED` or `CHANGED` both end); the change is applied first or refused.
/// The tombstone and any notice are cleaned up and the slot is freed; nothing reorders the
/// ended request.
#[test]
fn loom_f36_change_vs_cancel() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let tally = outcomes.clone();
    model(move || {
        let w = World::new(3, 2);
        let held = w.enqueue(1, 0);
        let req = w.enqueue(0, 0);
        let canceller = on_thread(&w, move |w| w.core.cancel(req, 0, &mut |i| w.grant(i)));
        let changer = on_thread(&w, move |w| w.change(req, 3));
        let cancelled = canceller.join().unwrap();
        let changed = changer.join().unwrap();
        assert!(
            cancelled,
            "a pending change kept a cancel from ending the request"
        );
        w.settle();
        // The held cell comes back: nothing of tenant 0 is granted.
        assert!(w.core.take(held));
        w.release();
        w.settle();
        assert_eq!(
            w.granted.load(Ordering::Relaxed),
            1,
            "the cancelled request was granted"
        );
        assert_eq!(w.core.state(req), VACANT, "the tombstone kept its slot");
        assert!(w.core.change_quiet(req, 0), "a notice outlived the request");
        tally.hit(if changed {
            "changed-then-cancelled"
        } else {
            "too-late"
        });
    });
    outcomes.assert_exactly(&["changed-then-cancelled", "too-late"]);
}
