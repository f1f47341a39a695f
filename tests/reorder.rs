//! SPEC F36: a queued request changed in place (`Scheduler::set_priority`, `set_deadline`),
//! each test on the engine and on the oracle.

#[macro_use]
mod common;

use common::*;
use fairway::oracle::Mechanism;
use fairway::{ClassId, Code, RequestId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

both_engines!(
    f36_raised_priority_goes_first_within_its_tenant,
    f36_lowered_then_restored_priority_keeps_its_sequence,
    f36_tightened_deadline_reorders_and_expires_on_time,
    f36_deadline_never_relaxes_past_the_permits_own,
    f36_deadline_tightened_into_the_past_expires_now,
    f36_too_late_after_the_grant_and_after_the_end,
    f36_foreign_and_bad_handles_are_refused,
    f36_a_change_never_crosses_tenants_or_adds_a_turn,
    f36_a_change_keeps_the_request_s_place_for_aging,
    f36_changes_deep_in_a_queue_of_10_000,
    f36_pull_mode_requests_change_in_place,
    f36_changes_racing_grants_lose_nothing,
    f36_the_waiting_future_changes_its_own_request,
    f36_ten_thousand_tenants_each_changed_in_place,
);

/// Grants one at a time through `held`, polling only the request `expect` says is next, and
/// checks each release granted exactly that one (keeps deep queues linear).
fn drain_in_order<M: Mechanism>(
    mut held: fairway::Assignment,
    pending: &mut HashMap<RequestId, Pending<'_, M>>,
    expect: &[RequestId],
) {
    for id in expect {
        held.release();
        let f = pending.get_mut(id).expect("a pending request");
        held = match poll_once(&mut f.0) {
            Poll::Ready(Ok(a)) => a,
            other => panic!("{id:?} should have been granted next: {other:?}"),
        };
        pending.remove(id);
    }
    held.release();
}

fn f36_raised_priority_goes_first_within_its_tenant<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let mut pending: Vec<_> = (0..4).map(|_| queue(&h, h.admit(1))).collect();
    let ids: Vec<_> = pending.iter().map(|p| p.1).collect();
    h.sched
        .set_priority(pending[2].0.handle().unwrap(), 5)
        .unwrap();
    let order = grant_order(held, &mut pending);
    assert_eq!(order, vec![ids[2], ids[0], ids[1], ids[3]]);
    assert!(h.ledger.usage().is_zero());
}

fn f36_lowered_then_restored_priority_keeps_its_sequence<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let mut pending: Vec<_> = (0..3).map(|_| queue(&h, h.admit_prio(1, 3))).collect();
    let ids: Vec<_> = pending.iter().map(|p| p.1).collect();
    let first = pending[0].0.handle().unwrap();
    h.sched.set_priority(first, 0).unwrap();
    // Lowered: behind the others. Back to 3: ahead again, by its original sequence.
    h.sched.set_priority(first, 3).unwrap();
    h.sched.set_priority(first, 3).unwrap();
    let order = grant_order(held, &mut pending);
    assert_eq!(
        order, ids,
        "the request kept its arrival order among equals"
    );

    let held = h.occupy(1).pop().unwrap();
    let mut pending: Vec<_> = (0..3).map(|_| queue(&h, h.admit_prio(1, 3))).collect();
    let ids: Vec<_> = pending.iter().map(|p| p.1).collect();
    h.sched
        .set_priority(pending[0].0.handle().unwrap(), 0)
        .unwrap();
    let order = grant_order(held, &mut pending);
    assert_eq!(order, vec![ids[1], ids[2], ids[0]]);
}

fn f36_tightened_deadline_reorders_and_expires_on_time<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let a = queue(&h, h.admit(1));
    let mut b = queue(&h, h.admit(1));
    let c = queue(&h, h.admit(1));
    let now = h.ledger.clock().now();
    // `c` gets a deadline (finite sorts before none), `b` an earlier one still.
    h.sched
        .set_deadline(c.0.handle().unwrap(), Some(now + 50_000_000_000))
        .unwrap();
    h.sched
        .set_deadline(b.0.handle().unwrap(), Some(now + 1_000_000_000))
        .unwrap();
    // `b`'s deadline passes while every cell is busy: it expires, and its owner hears it.
    h.advance(Duration::from_millis(1_500));
    match poll_once(&mut b.0) {
        Poll::Ready(Err(e)) => assert_eq!(e.code(), Code::DeadlineExceeded),
        other => panic!("the tightened deadline did not expire the request: {other:?}"),
    }
    drop(b);
    let snap = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(snap.expirations, 1);
    let (ia, ic) = (a.1, c.1);
    let mut pending: Vec<_> = vec![a, c];
    let order = grant_order(held, &mut pending);
    assert_eq!(
        order,
        vec![ic, ia],
        "a deadline set in place orders its request first"
    );
    assert!(h.ledger.usage().is_zero());
}

fn f36_deadline_never_relaxes_past_the_permits_own<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let _held = h.occupy(1);
    let (mut f, _) = queue(&h, h.admit_with(1, |r| r.deadline(Duration::from_secs(10))));
    let handle = f.handle().unwrap();
    let now = h.ledger.clock().now();
    h.sched
        .set_deadline(handle, Some(now + 1_000_000_000))
        .unwrap();
    // Relaxed far past the permit's 10 s: clamped to it.
    h.sched
        .set_deadline(handle, Some(now + 100_000_000_000))
        .unwrap();
    h.advance(Duration::from_secs(5));
    assert!(
        poll_once(&mut f).is_pending(),
        "relaxing back to the permit's deadline did not hold"
    );
    h.advance(Duration::from_secs(6));
    match poll_once(&mut f) {
        Poll::Ready(Err(e)) => assert_eq!(e.code(), Code::DeadlineExceeded),
        other => panic!("relaxed past the permit's own deadline: {other:?}"),
    }
    // `None` restores the permit's own.
    let (mut g, _) = queue(&h, h.admit_with(1, |r| r.deadline(Duration::from_secs(10))));
    let handle = g.handle().unwrap();
    let now = h.ledger.clock().now();
    h.sched
        .set_deadline(handle, Some(now + 1_000_000_000))
        .unwrap();
    h.sched.set_deadline(handle, None).unwrap();
    h.advance(Duration::from_secs(2));
    assert!(
        poll_once(&mut g).is_pending(),
        "`None` did not restore the own deadline"
    );
}

fn f36_deadline_tightened_into_the_past_expires_now<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let (mut f, _) = queue(&h, h.admit(1));
    let now = h.ledger.clock().now();
    h.sched
        .set_deadline(f.handle().unwrap(), Some(now.saturating_sub(1)))
        .unwrap();
    match poll_once(&mut f) {
        Poll::Ready(Err(e)) => assert_eq!(e.code(), Code::DeadlineExceeded),
        other => panic!("{other:?}"),
    }
    drop(f);
    assert_eq!(h.sched.snapshot(ClassId(0)).unwrap().queue_depth, 0);
    held.release();
    assert!(h.ledger.usage().is_zero());
}

fn f36_too_late_after_the_grant_and_after_the_end<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let (mut f, _) = queue(&h, h.admit(1));
    let handle = f.handle().unwrap();
    held.release();
    // Granted, not yet taken: too late.
    let e = h.sched.set_priority(handle, 9).unwrap_err();
    assert_eq!(
        (e.code(), e.reason().as_str()),
        (Code::NotFound, "too-late")
    );
    let e = h.sched.set_deadline(handle, Some(0)).unwrap_err();
    assert_eq!(
        (e.code(), e.reason().as_str()),
        (Code::NotFound, "too-late")
    );
    let a = granted(&mut f);
    // Taken, its slot free or reused: still too late.
    let e = h.sched.set_priority(handle, 9).unwrap_err();
    assert_eq!(
        (e.code(), e.reason().as_str()),
        (Code::NotFound, "too-late")
    );
    // The granted request was not touched: it runs, and a cancelled one is not revived.
    assert_eq!(h.sched.snapshot(ClassId(0)).unwrap().cells_leased, 1);
    let (mut g, _) = queue(&h, h.admit(1));
    let gh = g.handle().unwrap();
    h.sched.cancel(gh).unwrap();
    assert_eq!(
        h.sched.set_priority(gh, 1).unwrap_err().code(),
        Code::NotFound
    );
    assert!(matches!(poll_once(&mut g), Poll::Ready(Err(e)) if e.code() == Code::Cancelled));
    a.release();
    assert!(h.ledger.usage().is_zero());
}

fn f36_foreign_and_bad_handles_are_refused<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let other = Harness::<M>::new(&[(1, 8)], 2);
    let _held = h.occupy(1);
    let (f, _) = queue(&h, h.admit(1));
    let e = other
        .sched
        .set_priority(f.handle().unwrap(), 1)
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert_eq!(e.reason().as_str(), "foreign-handle");
}

fn f36_a_change_never_crosses_tenants_or_adds_a_turn<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 16)], 3);
    let held = h.occupy(1).pop().unwrap();
    let mut pending = Vec::new();
    for _ in 0..3 {
        pending.push(queue(&h, h.admit(1)));
    }
    for _ in 0..3 {
        pending.push(queue(&h, h.admit(2)));
    }
    let tenant_of: HashMap<RequestId, u32> = pending
        .iter()
        .enumerate()
        .map(|(i, p)| (p.1, if i < 3 { 1 } else { 2 }))
        .collect();
    let raised = pending[5].1;
    // Tenant 2's last request at the highest priority, twice, and a lowered one of tenant 1.
    h.sched
        .set_priority(pending[5].0.handle().unwrap(), 255)
        .unwrap();
    h.sched
        .set_priority(pending[5].0.handle().unwrap(), 255)
        .unwrap();
    h.sched
        .set_priority(pending[0].0.handle().unwrap(), 0)
        .unwrap();
    let order = grant_order(held, &mut pending);
    let tenants: Vec<u32> = order.iter().map(|id| tenant_of[id]).collect();
    assert_eq!(
        tenants,
        vec![1, 2, 1, 2, 1, 2],
        "the turns changed: {order:?}"
    );
    assert_eq!(order[1], raised, "the raised request leads its own tenant");
}

fn f36_a_change_keeps_the_request_s_place_for_aging<M: Mechanism>() {
    let h = Harness::<M>::with_starvation(&[(1, 8)], 2, Duration::from_secs(1));
    let held = h.occupy(1).pop().unwrap();
    let mut pending: Vec<_> = (0..3).map(|_| queue(&h, h.admit(1))).collect();
    let ids: Vec<_> = pending.iter().map(|p| p.1).collect();
    h.sched
        .set_priority(pending[2].0.handle().unwrap(), 9)
        .unwrap();
    // Everything aged: the oldest goes first (F14), the raised one did not become older.
    h.advance(Duration::from_secs(2));
    let order = grant_order(held, &mut pending);
    assert_eq!(order, ids, "aged requests go oldest first: {order:?}");
}

fn f36_changes_deep_in_a_queue_of_10_000<M: Mechanism>() {
    const DEPTH: u32 = if cfg!(miri) { 40 } else { 10_000 };
    let h = Harness::<M>::new(&[(1, DEPTH + 1)], 2);
    let held = h.occupy(1).pop().unwrap();
    let mut pending = HashMap::new();
    let mut model: Vec<(u8, usize, RequestId)> = Vec::new();
    let mut handles = Vec::new();
    for seq in 0..DEPTH as usize {
        let p = queue(&h, h.admit(1));
        handles.push((p.0.handle().unwrap(), p.1));
        model.push((0, seq, p.1));
        pending.insert(p.1, p);
    }
    // 1,000 changes (a tenth of the queue), a deterministic scatter of slots and priorities,
    // some raised and lowered again.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..DEPTH / 10 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % u64::from(DEPTH)) as usize;
        let p = (x >> 32) as u8 % 8;
        h.sched.set_priority(handles[i].0, p).unwrap();
        model[i].0 = p;
    }
    model.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let expect: Vec<_> = model.iter().map(|m| m.2).collect();
    drain_in_order(held, &mut pending, &expect);
    assert!(pending.is_empty());
    assert!(h.ledger.usage().is_zero());
}

fn f36_pull_mode_requests_change_in_place<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let mut handles = Vec::new();
    for n in 0..4u64 {
        handles.push(h.sched.submit(h.admit(1), n).map_err(|e| e.error).unwrap());
    }
    h.sched.set_priority(handles[3], 7).unwrap();
    h.sched.set_priority(handles[1], 6).unwrap();
    let mut got = Vec::new();
    let mut held = held;
    for _ in 0..4 {
        held.release();
        let job = h.sched.try_next(ClassId(0)).unwrap().expect("granted");
        got.push(job.payload);
        held = job.assignment;
    }
    held.release();
    assert_eq!(got, vec![3, 1, 0, 2]);
    assert!(h.ledger.usage().is_zero());
}

/// Pull-mode requests of four tenants on two cells, drained by two executors while a third
/// thread changes priorities and deadlines at random: every change is applied or refused as
/// `not-found` (too late, or the request gone), every payload is delivered exactly once, and
/// everything comes back.
fn f36_changes_racing_grants_lose_nothing<M: Mechanism>() {
    const N: u64 = if cfg!(miri) { 40 } else { 4_000 };
    let h = Arc::new(Harness::<M>::new(&[(2, N as u32)], 4));
    let handles: Vec<_> = (0..N)
        .map(|n| {
            h.sched
                .submit(h.admit(1 + (n % 3) as u32), n)
                .map_err(|e| e.error)
                .unwrap()
        })
        .collect();
    let seen = Arc::new(Mutex::new(vec![0u8; N as usize]));
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // Changes applied so far; the executors start once some were (so the race is not over
    // before it began), and then race the rest.
    let applied = Arc::new(AtomicUsize::new(0));
    let executors: Vec<_> = (0..2)
        .map(|_| {
            let (h, seen, done, applied) = (h.clone(), seen.clone(), done.clone(), applied.clone());
            std::thread::spawn(move || {
                while applied.load(Ordering::SeqCst) < 64 {
                    std::thread::yield_now();
                }
                while done.load(Ordering::SeqCst) < N as usize {
                    match h.sched.try_next(ClassId(0)).unwrap() {
                        Some(job) => {
                            seen.lock().unwrap()[job.payload as usize] += 1;
                            done.fetch_add(1, Ordering::SeqCst);
                            job.assignment.release();
                        }
                        None => std::thread::yield_now(),
                    }
                }
            })
        })
        .collect();
    let changer = {
        let (h, stop, count) = (h.clone(), stop.clone(), applied.clone());
        std::thread::spawn(move || {
            let (mut applied, mut refused) = (0u64, 0u64);
            let mut x: u64 = 7;
            while !stop.load(Ordering::SeqCst) {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let handle = handles[(x >> 33) as usize % handles.len()];
                let r = if x & 1 == 0 {
                    h.sched.set_priority(handle, (x >> 8) as u8)
                } else {
                    h.sched.set_deadline(handle, None)
                };
                match r {
                    Ok(()) => {
                        applied += 1;
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) if e.code() == Code::NotFound => refused += 1,
                    Err(e) => panic!("a change failed unexpectedly: {e}"),
                }
            }
            (applied, refused)
        })
    };
    for e in executors {
        join_within(
            e,
            Duration::from_secs(60),
            "an executor draining while changes race",
        );
    }
    stop.store(true, Ordering::SeqCst);
    let (applied, refused) = join_within(changer, Duration::from_secs(60), "the changer");
    assert!(
        applied >= 64 && refused > 0,
        "applied {applied}, refused {refused}"
    );
    let seen = seen.lock().unwrap();
    let wrong: Vec<_> = seen.iter().enumerate().filter(|(_, &c)| c != 1).collect();
    assert!(
        wrong.is_empty(),
        "payloads delivered other than once: {:?}",
        &wrong[..wrong.len().min(8)]
    );
    let snap = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!((snap.queue_depth, snap.cells_leased), (0, 0));
    assert!(h.ledger.usage().is_zero());
}

fn f36_the_waiting_future_changes_its_own_request<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let mut pending: Vec<_> = (0..3).map(|_| queue(&h, h.admit(1))).collect();
    let ids: Vec<_> = pending.iter().map(|p| p.1).collect();
    pending[2].0.set_priority(4).unwrap();
    let now = h.ledger.clock().now();
    pending[1]
        .0
        .set_deadline(Some(now + 1_000_000_000))
        .unwrap();
    let order = grant_order(held, &mut pending);
    assert_eq!(order, vec![ids[2], ids[1], ids[0]]);
    // Granted and taken: the future is done, and says so.
    let held = h.occupy(1).pop().unwrap();
    let (mut f, _) = queue(&h, h.admit(1));
    held.release();
    let a = granted(&mut f);
    let e = f.set_priority(1).unwrap_err();
    assert_eq!(
        (e.code(), e.reason().as_str()),
        (Code::NotFound, "too-late")
    );
    a.release();
}

/// 10^4 tenants (past one bitmap word and the ring's small sizes), each with two requests
/// queued; the second of every tenant is raised. Grants take the tenants in turn, as without
/// the changes (F11, F15), and inside every tenant the raised request goes first.
fn f36_ten_thousand_tenants_each_changed_in_place<M: Mechanism>() {
    const TENANTS: u32 = if cfg!(miri) { 40 } else { 10_000 };
    let h = Harness::<M>::new(&[(1, 2 * TENANTS + 1)], TENANTS + 1);
    let held = h.occupy(1).pop().unwrap();
    let mut pending = HashMap::new();
    let mut firsts = Vec::new();
    let mut seconds = Vec::new();
    for t in 1..=TENANTS {
        let a = queue(&h, h.admit(t));
        let b = queue(&h, h.admit(t));
        firsts.push(a.1);
        seconds.push((b.0.handle().unwrap(), b.1));
        pending.insert(a.1, a);
        pending.insert(b.1, b);
    }
    for &(handle, _) in &seconds {
        h.sched.set_priority(handle, 1).unwrap();
    }
    // Round robin over the tenants in arrival order, twice: each tenant's raised request at
    // its first turn, its other one at its second.
    let expect: Vec<RequestId> = seconds.iter().map(|s| s.1).chain(firsts).collect();
    drain_in_order(held, &mut pending, &expect);
    assert!(h.ledger.usage().is_zero());
}
