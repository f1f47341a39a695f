//! SPEC F24 (progress while a thread is stopped), with the test-only pause points.
//!
//! Each test freezes one thread at a named pause point inside an engine — the mutex twin's
//! critical section, or a point on the engine's grant, enqueue, cancel and sweep paths — and
//! checks whether another tenant's queued request is still granted within a bounded wait
//! (100 ms) on a cell another thread releases.
//!
//! * The mutex twins cannot meet F24 by construction; their tests assert the failure mode they
//!   exist to show: while the lock holder is paused, no other tenant is granted, and the grant
//!   comes once it is let go.
//! * The engine (what every `Scheduler` runs on) has no class-wide lock or token: one
//!   `f24_ring_*` test per pause point on its paths asserts that another tenant is granted
//!   within 100 ms while a thread is parked there.
//!
//! Built only with the `pause-points` feature:
//! `cargo test --features pause-points --test f24_progress`.
#![cfg(feature = "pause-points")]

mod common;

use common::{poll_once, queue, Harness};
use fairway::internals::pause::Gate;
use fairway::oracle::{Baseline, Mechanism, ParkingLotMutex, Ring, StdMutex};
use fairway::ClassId;
use std::sync::mpsc;
use std::task::Poll;
use std::time::Duration;

/// How long the other tenant's grant is waited for while the thread is paused.
const WINDOW: Duration = Duration::from_millis(100);
/// How long anything is waited for that must happen (a hang fails the test instead).
const LIMIT: Duration = Duration::from_secs(10);

/// What the scenario observed.
#[derive(Debug, PartialEq, Eq)]
struct Observed {
    /// Tenant 1's request was granted within [`WINDOW`] while tenant 0's thread was paused.
    granted_while_paused: bool,
    /// The paused thread had not finished its release when the window closed.
    still_paused: bool,
}

/// Two cells, both held by tenant 0; tenant 1 has a request queued. A thread of tenant 0
/// armed at `point` releases one cell and is paused at the point (inside the engine). Another
/// thread releases the other cell and polls tenant 1's request until it is granted. Returns
/// whether that grant came within [`WINDOW`]; in every case it must come once the paused thread
/// is let go, and the class must end with both cells free.
fn other_tenant_while_paused<M: Mechanism>(point: &'static str) -> Observed {
    let h = Harness::<M>::new(&[(2, 16)], 4);
    let mut held = h.occupy(2);
    let (mut fut, _id) = queue(&h, h.admit(1));
    let (second, first) = (held.pop().unwrap(), held.pop().unwrap());
    let gate = Gate::new(point);
    let observed = std::thread::scope(|s| {
        let paused = {
            let gate = gate.clone();
            s.spawn(move || {
                gate.arm();
                first.release();
            })
        };
        assert!(
            gate.wait_parked(LIMIT),
            "the releasing thread never reached {point}"
        );
        let (tx, rx) = mpsc::channel();
        let other = s.spawn(move || {
            second.release();
            loop {
                match poll_once(&mut fut) {
                    Poll::Ready(r) => {
                        let _ = tx.send(r);
                        return;
                    }
                    Poll::Pending => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        let during = rx.recv_timeout(WINDOW);
        let still_paused = gate.parked() == 1 && !paused.is_finished();
        gate.release();
        let granted = match &during {
            Ok(r) => r.is_ok(),
            Err(_) => false,
        };
        let result = match during {
            Ok(r) => r,
            Err(_) => rx
                .recv_timeout(LIMIT)
                .expect("granted once the paused thread goes on"),
        };
        result.expect("tenant 1 is granted").release();
        paused.join().unwrap();
        other.join().unwrap();
        Observed {
            granted_while_paused: granted,
            still_paused,
        }
    });
    assert_eq!(
        h.sched.available_cells(ClassId(0)),
        Ok(2),
        "every cell back"
    );
    observed
}

/// Runs a pause-point test's body bounded by `TEST_LIMIT`, named after the test (libtest names
/// the thread): a thread that never comes back from a pause point fails the test instead of
/// hanging the run.
fn bounded<T: Send + 'static>(body: impl FnOnce() -> T + Send + 'static) -> T {
    let test = std::thread::current()
        .name()
        .unwrap_or("a pause-point test")
        .to_owned();
    common::within(common::TEST_LIMIT, &test, body)
}

#[test]
fn f24_std_mutex_baseline_grants_nobody_while_the_lock_holder_is_paused() {
    assert_eq!(
        bounded(|| other_tenant_while_paused::<Baseline<StdMutex>>("baseline.locked")),
        Observed {
            granted_while_paused: false,
            still_paused: true
        }
    );
}

#[test]
fn f24_parking_lot_baseline_grants_nobody_while_the_lock_holder_is_paused() {
    assert_eq!(
        bounded(|| other_tenant_while_paused::<Baseline<ParkingLotMutex>>("baseline.locked")),
        Observed {
            granted_while_paused: false,
            still_paused: true
        }
    );
}

/// The pause points themselves: a thread armed for one point passes every other point, and an
/// unarmed thread passes every point (the other tests' other threads rely on both).
#[test]
fn f24_pause_points_park_only_the_armed_thread_at_its_point() {
    let h = Harness::<Baseline<StdMutex>>::new(&[(2, 16)], 4);
    let gate = Gate::new("ring.turn_owned");
    std::thread::scope(|s| {
        s.spawn(|| {
            gate.arm();
            // Takes the baseline's lock (point `baseline.locked`) twice: passes both.
            h.occupy(2).into_iter().for_each(|a| a.release());
            Gate::disarm();
        });
    });
    assert_eq!(gate.hits(), 0);
    h.occupy(2).into_iter().for_each(|a| a.release());
    assert_eq!(h.sched.available_cells(ClassId(0)), Ok(2));
}

/// What the paused thread of a tenant-ring scenario does before it reaches the point.
#[derive(Clone, Copy)]
enum Action {
    /// Releases one of tenant 0's cells (the grant path: `ring.credit_taken`,
    /// `ring.turn_owned`, `scq.pop.claimed`, and the deadline sweep a release runs first).
    Release,
    /// Queues a request of tenant 4, idle until then (`ring.announce`, `scq.push.claimed`).
    Enqueue,
    /// Cancels tenant 3's queued request by handle (`ring.cancel_marked`).
    Cancel,
}

/// The tenant-ring engine under F24: two cells held by tenant 0; tenants 1 and 2 each have a
/// request queued, and tenant 3 one with a deadline that has passed (so the next call runs the
/// deadline sweep). A thread armed at `point` does `action` and parks there. Another thread
/// releases a cell and polls tenants 1's and 2's requests: one of them must be granted within
/// 100 ms while the thread is still parked. Everything is settled once it is let go.
fn ring_other_tenant_granted_while_paused(point: &'static str, action: Action) {
    let h = Harness::<Ring>::new(&[(2, 16)], 8);
    let mut held = h.occupy(2);
    let (mut one, _) = queue(&h, h.admit(1));
    let (mut two, _) = queue(&h, h.admit(2));
    let (three, _) = queue(
        &h,
        h.admit_with(3, |r| r.deadline(Duration::from_millis(5))),
    );
    if !matches!(action, Action::Cancel) {
        h.advance(Duration::from_millis(10));
    }
    let handle = three.handle().expect("queued");
    let (second, first) = (held.pop().unwrap(), held.pop().unwrap());
    let gate = Gate::new(point);
    std::thread::scope(|s| {
        let paused = {
            let (gate, h) = (gate.clone(), &h);
            s.spawn(move || {
                gate.arm();
                let mut extra = None;
                match action {
                    Action::Release => first.release(),
                    Action::Enqueue => {
                        let mut f = Box::pin(h.sched.enqueue(h.admit(4)));
                        match poll_once(&mut f) {
                            Poll::Ready(r) => r.expect("granted").release(),
                            Poll::Pending => extra = Some(f),
                        }
                        first.release();
                    }
                    Action::Cancel => {
                        let _ = h.sched.cancel(handle);
                        first.release();
                    }
                }
                Gate::disarm();
                extra
            })
        };
        assert!(
            gate.wait_parked(LIMIT),
            "the armed thread never reached {point}"
        );
        let (tx, rx) = mpsc::channel();
        let other = s.spawn(move || {
            second.release();
            let mut done = [false, false];
            while !(done[0] && done[1]) {
                for (i, f) in [&mut one, &mut two].into_iter().enumerate() {
                    if done[i] {
                        continue;
                    }
                    if let Poll::Ready(r) = poll_once(f) {
                        done[i] = true;
                        let a = r.expect("granted");
                        let _ = tx.send(());
                        a.release();
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let during = rx.recv_timeout(WINDOW).is_ok();
        let still_paused = gate.parked() == 1 && !paused.is_finished();
        gate.release();
        assert!(
            during && still_paused,
            "{point}: another tenant granted within {WINDOW:?} while the thread is parked \
             (granted: {during}, still parked: {still_paused})"
        );
        other.join().unwrap();
        if let Some(mut f) = paused.join().unwrap() {
            let deadline = std::time::Instant::now() + LIMIT;
            loop {
                match poll_once(&mut f) {
                    Poll::Ready(r) => {
                        r.expect("granted").release();
                        break;
                    }
                    Poll::Pending if std::time::Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    Poll::Pending => panic!("the paused thread's request never granted"),
                }
            }
        }
    });
    drop(three);
    assert_eq!(
        h.sched.available_cells(ClassId(0)),
        Ok(2),
        "every cell back"
    );
    assert_eq!(h.sched.queue_depth(ClassId(0)), Ok(0));
}

#[test]
fn f24_ring_credit_taken_paused_other_tenant_granted_within_100ms() {
    bounded(|| ring_other_tenant_granted_while_paused("ring.credit_taken", Action::Release));
}

#[test]
fn f24_ring_turn_owned_paused_other_tenant_granted_within_100ms() {
    bounded(|| ring_other_tenant_granted_while_paused("ring.turn_owned", Action::Release));
}

#[test]
fn f24_ring_scq_pop_claimed_paused_other_tenant_granted_within_100ms() {
    bounded(|| ring_other_tenant_granted_while_paused("scq.pop.claimed", Action::Release));
}

#[test]
fn f24_ring_sweep_held_paused_other_tenant_granted_within_100ms() {
    bounded(|| ring_other_tenant_granted_while_paused("ring.sweep_held", Action::Release));
}

#[test]
fn f24_ring_announce_paused_other_tenant_granted_within_100ms() {
    bounded(|| ring_other_tenant_granted_while_paused("ring.announce", Action::Enqueue));
}

#[test]
fn f24_ring_scq_push_claimed_paused_other_tenant_granted_within_100ms() {
    bounded(|| ring_other_tenant_granted_while_paused("scq.push.claimed", Action::Enqueue));
}

#[test]
fn f24_ring_cancel_marked_paused_other_tenant_granted_within_100ms() {
    bounded(|| ring_other_tenant_granted_while_paused("ring.cancel_marked", Action::Cancel));
}

/// Pull mode under F24: a thread of tenant 0 is parked at `point` while releasing a cell
/// (holding the ring engine's turn, or the token engine's dispatch token); tenant 1's pull-mode
/// job is queued and the other cell is released. Another executor calls `try_next` in a loop
/// for 100 ms. Returns whether it was handed tenant 1's job while the thread was still parked,
/// and the slowest single `try_next` call. Everything is settled once the thread is let go.
fn try_next_while_paused<M: Mechanism>(point: &'static str) -> (bool, Duration) {
    let h = Harness::<M>::new(&[(2, 16)], 4);
    let mut held = h.occupy(2);
    let (mut zero, _) = queue(&h, h.admit(0));
    h.sched
        .submit(h.admit(1), 11)
        .expect("tenant 1's job is queued");
    let (second, first) = (held.pop().unwrap(), held.pop().unwrap());
    let gate = Gate::new(point);
    let (handed, slowest) = std::thread::scope(|s| {
        let paused = {
            let gate = gate.clone();
            s.spawn(move || {
                gate.arm();
                first.release();
                Gate::disarm();
            })
        };
        assert!(gate.wait_parked(LIMIT), "never reached {point}");
        second.release();
        let start = std::time::Instant::now();
        let mut slowest = Duration::ZERO;
        let mut job = None;
        while job.is_none() && start.elapsed() < WINDOW {
            let t = std::time::Instant::now();
            job = h.sched.try_next(ClassId(0)).expect("the class exists");
            slowest = slowest.max(t.elapsed());
            if job.is_none() {
                std::thread::yield_now();
            }
        }
        let handed = job.is_some() && gate.parked() == 1 && !paused.is_finished();
        gate.release();
        paused.join().unwrap();
        let job = match job {
            Some(job) => job,
            None => {
                let deadline = std::time::Instant::now() + LIMIT;
                loop {
                    if let Some(job) = h.sched.try_next(ClassId(0)).unwrap() {
                        break job;
                    }
                    assert!(std::time::Instant::now() < deadline, "the job never came");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        };
        assert_eq!(job.payload, 11);
        job.assignment.release();
        (handed, slowest)
    });
    // Tenant 0's request, granted by the let-go thread or by a released cell.
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        match poll_once(&mut zero) {
            Poll::Ready(r) => {
                r.expect("granted").release();
                break;
            }
            Poll::Pending if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Poll::Pending => panic!("tenant 0's request never granted"),
        }
    }
    assert_eq!(h.sched.available_cells(ClassId(0)), Ok(2));
    assert_eq!(h.sched.queue_depth(ClassId(0)), Ok(0));
    (handed, slowest)
}

/// The ring engine: an executor's `try_next` is never behind a stopped granter. Every call
/// returns at once, and tenant 1's job is handed over within 100 ms while tenant 0's turn
/// holder is parked.
#[test]
fn f24_ring_try_next_is_handed_other_tenants_jobs_while_a_turn_holder_is_paused() {
    let (handed, slowest) = bounded(|| try_next_while_paused::<Ring>("ring.turn_owned"));
    assert!(
        handed,
        "tenant 1's job handed over while the turn holder is parked"
    );
    assert!(
        slowest < Duration::from_millis(20),
        "every try_next returned at once (slowest {slowest:?})"
    );
}

/// SPEC F36 under F24: a changer stopped after its CAS (`ring.change_marked`: the change is
/// the linearisation point's, its notice not posted yet) holds nobody up, not even its own
/// tenant. Tenant 1 has `a` (priority 1) and `b` (priority 0, older); the paused thread lowers
/// `a` to 0. A released cell's turn picks `a`, its grant CAS fails on the pending change, and
/// the turn applies it itself: `b` (older, now first) is granted within [`WINDOW`] while the
/// changer is still parked. Once let go its notice is taken and the slot of `a` comes free.
#[test]
fn f24_ring_change_marked_paused_its_own_tenant_still_granted_within_100ms() {
    bounded(|| {
        let h = Harness::<Ring>::new(&[(1, 16)], 4);
        let held = h.occupy(1).pop().unwrap();
        let (mut b, b_id) = queue(&h, h.admit_prio(1, 0));
        let (mut a, _) = queue(&h, h.admit_prio(1, 1));
        let handle = a.handle().expect("queued");
        let gate = Gate::new("ring.change_marked");
        std::thread::scope(|s| {
            let paused = {
                let (gate, h) = (gate.clone(), &h);
                s.spawn(move || {
                    gate.arm();
                    let r = h.sched.set_priority(handle, 0);
                    Gate::disarm();
                    r
                })
            };
            assert!(
                gate.wait_parked(LIMIT),
                "the changer never reached its pause point"
            );
            held.release();
            let start = std::time::Instant::now();
            let mut got = None;
            while got.is_none() && start.elapsed() < WINDOW {
                if let Poll::Ready(r) = poll_once(&mut b) {
                    got = Some(r.expect("granted"));
                }
                std::thread::yield_now();
            }
            let still_paused = gate.parked() == 1 && !paused.is_finished();
            assert!(
                got.is_some() && still_paused,
                "{b_id:?} granted within {WINDOW:?} while the changer is parked (granted: {}, \
                 still parked: {still_paused})",
                got.is_some()
            );
            assert!(
                poll_once(&mut a).is_pending(),
                "the lowered request went first"
            );
            gate.release();
            assert_eq!(paused.join().unwrap(), Ok(()), "the change was applied");
            got.unwrap().release();
            match poll_once(&mut a) {
                Poll::Ready(r) => r.expect("granted").release(),
                Poll::Pending => panic!("the changed request was not granted after the other"),
            }
        });
        let snap = h.sched.snapshot(ClassId(0)).unwrap();
        assert_eq!((snap.queue_depth, snap.cells_leased), (0, 0));
        assert!(h.ledger.usage().is_zero());
    });
}
