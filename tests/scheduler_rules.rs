//! SPEC section F, one or more tests per rule, each run on both engines.

#[macro_use]
mod common;

use common::*;
use fairway::admission::{Ledger, Limits};
use fairway::oracle::{Mechanism, SchedulerOn};
use fairway::pool::{CellPool, FixedCellPool, Lease, LeaseRequest, PoolCounters};
use fairway::{AdmittedRequest, CancellationToken, ClassId, Code, RequestId, Scheduler};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

both_engines!(
    f01_bad_config_fails_naming_the_field,
    f03_quarantine_never_borrows_or_grows,
    f04_foreign_permit_is_refused,
    f05_policy_comes_from_the_permit,
    f06_zero_capacity_class_denies_even_with_free_cell,
    f07_host_pools_are_validated,
    f08_mismatched_lease_is_refused_and_not_reused,
    f10_classes_are_independent,
    f11_tenants_take_turns_round_robin,
    f11_all_cancelled_tenant_is_skipped_at_its_turn,
    f12_weights_give_grants_per_turn,
    f13_priority_then_deadline_then_sequence,
    f14_aged_request_precedes_newer_work_of_its_tenant,
    f15_priority_flood_cannot_take_other_tenants_turns,
    f16_try_enqueue_never_waits,
    f17_release_racing_a_waiter_is_never_lost,
    f18_any_executor_drives_progress,
    f22_all_quarantined_fails_queued_and_new,
    f23_pull_mode_hands_jobs_to_executors_fairly,
    f30_stale_handle_is_refused,
    f31_cancel_deep_in_queue_touches_nothing_else,
    f32_token_cancel_wakes_and_keeps_first_reason,
    f33_cancel_of_unknown_or_finished_is_not_found,
    f34_token_of_another_request_is_refused,
    f35_wakers_run_outside_internal_locks,
    f40_enqueue_consumes_the_permit,
    f41_dropping_a_queued_future_refunds_everything,
    f42_granted_unaccepted_drop_returns_cell_then_quota,
    f43_assignment_exposes_read_accessors,
    f44_release_quarantine_and_drop_settle_pool_then_quota,
    f45_grant_returns_only_the_queue_reservation,
    f46_deadline_is_checked_in_queue_and_at_acceptance,
    f47_shutdown_fails_queued_and_keeps_accepted,
    f60_snapshot_reports_counters_and_waits,
    f62_pool_view_is_consistent,
    f64_manual_clock_drives_deadlines,
);

fn f01_bad_config_fails_naming_the_field<M: Mechanism>() {
    let ledger = Ledger::new(ledger_config(1, 4)).unwrap();
    let field = |r: Result<SchedulerOn<(), M>, fairway::Error>| {
        let e = r.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.reason(), "configuration");
        e.field().unwrap()
    };
    assert_eq!(
        field(Scheduler::<()>::builder(ledger.clone()).build_with::<M>()),
        "classes"
    );
    assert_eq!(
        field(
            Scheduler::<()>::builder(ledger.clone())
                .class(0, 4)
                .build_with::<M>()
        ),
        "cells"
    );
    assert_eq!(
        field(
            Scheduler::<()>::builder(ledger.clone())
                .class(1, 4)
                .class(1, 4)
                .build_with::<M>()
        ),
        "classes"
    );
    assert_eq!(
        field(
            Scheduler::<()>::builder(ledger.clone())
                .class(1, 4)
                .starvation_after(Duration::ZERO)
                .build_with::<M>()
        ),
        "starvation_after"
    );
    assert!(Scheduler::<()>::builder(ledger)
        .class(1, 4)
        .build_with::<M>()
        .is_ok());
    let mut cfg = ledger_config(1, 4);
    cfg.max_tenants = 0;
    assert_eq!(Ledger::new(cfg).unwrap_err().field(), Some("max_tenants"));
}

fn f03_quarantine_never_borrows_or_grows<M: Mechanism>() {
    let h = Harness::<M>::new(&[(2, 8), (1, 8)], 2);
    let mut held = h.occupy(2);
    held.pop().unwrap().quarantine("uncertain");
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(
        (
            s.cells_total,
            s.cells_quarantined,
            s.cells_available,
            s.cells_leased
        ),
        (2, 1, 0, 1)
    );
    // Class 1's free cell is never borrowed by class 0.
    let (mut f, _) = queue(&h, h.admit(1));
    held.pop().unwrap().release();
    match poll_once(&mut f) {
        Poll::Ready(Ok(a)) => a.release(),
        other => panic!("{other:?}"),
    }
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!((s.cells_total, s.cells_quarantined), (2, 1));
    assert_eq!(h.sched.snapshot(ClassId(1)).unwrap().cells_available, 1);
}

fn f04_foreign_permit_is_refused<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let twin = Ledger::new(ledger_config(1, 2)).unwrap();
    let id = RequestId(99);
    let permit = twin
        .admit(fairway::admission::AdmissionRequest::new(
            id,
            fairway::TenantId(0),
        ))
        .unwrap();
    let e = h
        .sched
        .try_enqueue(AdmittedRequest::new(permit, CancellationToken::new(id)))
        .unwrap_err()
        .error;
    assert_eq!(
        (e.code(), e.reason().as_str()),
        (Code::PermissionDenied, "foreign-admission")
    );
    assert!(
        twin.usage().is_zero(),
        "the refused permit was refunded to its own ledger"
    );
}

fn f05_policy_comes_from_the_permit<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 4);
    let a = h
        .sched
        .try_enqueue(h.admit_with(3, |r| r.priority(7).cpu_units(5).memory_units(6)))
        .unwrap();
    assert_eq!(a.tenant(), fairway::TenantId(3));
    assert_eq!(a.class(), ClassId(0));
    assert_eq!((a.cpu_units(), a.memory_units()), (5, 6));
    a.release();
}

fn f06_zero_capacity_class_denies_even_with_free_cell<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 0)], 2);
    let mut f = Box::pin(h.sched.enqueue(h.admit(0)));
    let e = match poll_once(&mut f) {
        Poll::Ready(Err(e)) => e,
        other => panic!("expected queue-full, got {other:?}"),
    };
    assert_eq!(
        (e.code(), e.reason().as_str()),
        (Code::ResourceExhausted, "queue-full")
    );
    drop(f);
    assert!(h.ledger.usage().is_zero());
}

/// A host pool wrapper that can misbehave.
struct HostPool {
    inner: FixedCellPool,
    capacity_lie: Option<u32>,
    lease_lie: bool,
    leased_at_start: bool,
}

impl CellPool for HostPool {
    fn class(&self) -> ClassId {
        self.inner.class()
    }
    fn capacity(&self) -> u32 {
        self.capacity_lie.unwrap_or(self.inner.capacity())
    }
    fn try_acquire_now(&self, req: &LeaseRequest) -> fairway::Result<Option<Lease>> {
        let lease = self.inner.try_acquire_now(req)?;
        if self.lease_lie {
            if let Some(l) = lease {
                let cell = l.cell();
                self.inner.release(l);
                let wrong = LeaseRequest {
                    request: RequestId(req.request.0 + 1),
                    ..*req
                };
                let l = self.inner.try_acquire_now(&wrong)?.unwrap();
                assert_eq!(l.cell(), cell);
                return Ok(Some(l));
            }
        }
        Ok(lease)
    }
    fn release(&self, lease: Lease) {
        self.inner.release(lease)
    }
    fn quarantine(&self, lease: Lease, reason: &'static str) {
        self.inner.quarantine(lease, reason)
    }
    fn subscribe_changes(&self, waker: &Waker) -> fairway::Result<()> {
        self.inner.subscribe_changes(waker)
    }
    fn counters(&self) -> PoolCounters {
        let mut c = self.inner.counters();
        if self.leased_at_start {
            c.leased += 1;
            c.available -= 1;
        }
        c
    }
}

fn host_pool(class: u16, cells: u32) -> HostPool {
    HostPool {
        inner: FixedCellPool::new(ClassId(class), cells).unwrap(),
        capacity_lie: None,
        lease_lie: false,
        leased_at_start: false,
    }
}

fn f07_host_pools_are_validated<M: Mechanism>() {
    let ledger = Ledger::new(ledger_config(2, 2)).unwrap();
    let build = |pools: Vec<Arc<dyn CellPool>>| {
        Scheduler::<()>::builder(ledger.clone())
            .class(2, 4)
            .class(1, 4)
            .pools(pools)
            .build_with::<M>()
    };
    let topology = |r: Result<SchedulerOn<(), M>, fairway::Error>| {
        let e = r.unwrap_err();
        assert_eq!(
            (e.code(), e.reason().as_str()),
            (Code::InvalidArgument, "pool-topology")
        );
    };
    // Missing class, duplicate class, wrong capacity, a cell already leased.
    topology(build(vec![Arc::new(host_pool(0, 2))]));
    topology(build(vec![
        Arc::new(host_pool(0, 2)),
        Arc::new(host_pool(0, 2)),
    ]));
    topology(build(vec![
        Arc::new(host_pool(0, 3)),
        Arc::new(host_pool(1, 1)),
    ]));
    topology(build(vec![
        Arc::new(HostPool {
            leased_at_start: true,
            ..host_pool(0, 2)
        }),
        Arc::new(host_pool(1, 1)),
    ]));
    // Any order is fine.
    assert!(build(vec![Arc::new(host_pool(1, 1)), Arc::new(host_pool(0, 2))]).is_ok());
}

fn f08_mismatched_lease_is_refused_and_not_reused<M: Mechanism>() {
    let ledger = Ledger::new(ledger_config(1, 2)).unwrap();
    let pool = Arc::new(HostPool {
        lease_lie: true,
        ..host_pool(0, 2)
    });
    let sched = Scheduler::<()>::builder(ledger.clone())
        .class(2, 4)
        .pools(vec![pool.clone()])
        .build_with::<M>()
        .unwrap();
    let id = RequestId(1);
    let permit = ledger
        .admit(fairway::admission::AdmissionRequest::new(
            id,
            fairway::TenantId(0),
        ))
        .unwrap();
    let e = sched
        .try_enqueue(AdmittedRequest::new(permit, CancellationToken::new(id)))
        .unwrap_err()
        .error;
    assert_eq!(
        (e.code(), e.reason().as_str()),
        (Code::Internal, "pool-lease-mismatch")
    );
    let c = pool.counters();
    assert_eq!(
        (c.quarantined, c.available),
        (1, 1),
        "the mismatched cell is never marked reusable"
    );
    assert!(ledger.usage().is_zero());
}

fn f10_classes_are_independent<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8), (1, 8)], 2);
    let _held = h.occupy(1);
    let id = h.fresh_id();
    let p = h
        .ledger
        .admit(
            fairway::admission::AdmissionRequest::new(id, fairway::TenantId(0)).class(ClassId(1)),
        )
        .unwrap();
    let a = h
        .sched
        .try_enqueue(AdmittedRequest::new(p, CancellationToken::new(id)))
        .expect("class 1 is free");
    a.release();
}

fn f11_tenants_take_turns_round_robin<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 64)], 4);
    let held = h.occupy(1).pop().unwrap();
    // Tenant 1 arrives with three, then 2 with two, then 3 with one.
    let mut pending: Vec<_> = [1, 1, 1, 2, 2, 3]
        .iter()
        .map(|&t| queue(&h, h.admit(t)))
        .collect();
    let ids: Vec<_> = pending.iter().map(|p| p.1).collect();
    let order = grant_order(held, &mut pending);
    // Turns: 1, 2, 3, 1, 2, 1 — new tenants join the tail, served tenants rotate to it.
    assert_eq!(order, vec![ids[0], ids[3], ids[5], ids[1], ids[4], ids[2]]);
}

fn f11_all_cancelled_tenant_is_skipped_at_its_turn<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 64)], 4);
    let held = h.occupy(1).pop().unwrap();
    let mut pending: Vec<_> = [1, 2, 3, 1, 3]
        .iter()
        .map(|&t| queue(&h, h.admit(t)))
        .collect();
    let ids: Vec<_> = pending.iter().map(|p| p.1).collect();
    // Cancel all of tenant 2's work.
    drop(pending.remove(1));
    let order = grant_order(held, &mut pending);
    assert_eq!(order, vec![ids[0], ids[2], ids[3], ids[4]]);
}

fn f12_weights_give_grants_per_turn<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 64)], 4);
    let held = h.occupy(1).pop().unwrap();
    let mut pending = Vec::new();
    for _ in 0..4 {
        pending.push(queue(&h, h.admit_with(1, |r| r.weight(3))));
    }
    for _ in 0..4 {
        pending.push(queue(&h, h.admit(2)));
    }
    let tenant_of: std::collections::HashMap<_, _> = pending
        .iter()
        .enumerate()
        .map(|(i, p)| (p.1, if i < 4 { 1 } else { 2 }))
        .collect();
    let order: Vec<u32> = grant_order(held, &mut pending)
        .into_iter()
        .map(|id| tenant_of[&id])
        .collect();
    assert_eq!(order, vec![1, 1, 1, 2, 1, 2, 2, 2]);
}

fn f13_priority_then_deadline_then_sequence<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 64)], 2);
    let held = h.occupy(1).pop().unwrap();
    let reqs = [
        h.admit_with(1, |r| r.priority(1)),
        h.admit_with(1, |r| r.priority(1).deadline(Duration::from_secs(50))),
        h.admit_with(1, |r| r.priority(5)),
        h.admit_with(1, |r| r.priority(1).deadline(Duration::from_secs(10))),
        h.admit_with(1, |r| r.priority(1)),
    ];
    let mut pending: Vec<_> = reqs.into_iter().map(|r| queue(&h, r)).collect();
    let ids: Vec<_> = pending.iter().map(|p| p.1).collect();
    let order = grant_order(held, &mut pending);
    assert_eq!(order, vec![ids[2], ids[3], ids[1], ids[0], ids[4]]);
}

fn f14_aged_request_precedes_newer_work_of_its_tenant<M: Mechanism>() {
    let h = Harness::<M>::with_starvation(&[(1, 64)], 2, Duration::from_millis(100));
    let held = h.occupy(1).pop().unwrap();
    let old = queue(&h, h.admit_prio(1, 0));
    h.advance(Duration::from_millis(150));
    let mut pending = vec![old];
    for _ in 0..3 {
        pending.push(queue(&h, h.admit_prio(1, 9)));
    }
    let ids: Vec<_> = pending.iter().map(|p| p.1).collect();
    let order = grant_order(held, &mut pending);
    assert_eq!(order[0], ids[0], "the aged low-priority request goes first");
}

fn f15_priority_flood_cannot_take_other_tenants_turns<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 64)], 2);
    let held = h.occupy(1).pop().unwrap();
    let mut pending = Vec::new();
    for _ in 0..6 {
        pending.push(queue(&h, h.admit_prio(1, 255)));
    }
    for _ in 0..3 {
        pending.push(queue(&h, h.admit_prio(0, 0)));
    }
    let low: Vec<_> = pending[6..].iter().map(|p| p.1).collect();
    let order = grant_order(held, &mut pending);
    let positions: Vec<_> = low
        .iter()
        .map(|id| order.iter().position(|o| o == id).unwrap())
        .collect();
    assert_eq!(positions, vec![1, 3, 5], "tenant 0 gets every other turn");
}

fn f16_try_enqueue_never_waits<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1);
    let err = h.sched.try_enqueue(h.admit(1)).unwrap_err();
    assert_eq!(
        (err.error.code(), err.error.reason().as_str()),
        (Code::Unavailable, "no-capacity")
    );
    let back = err.request.expect("the request is given back");
    drop(held);
    // The quarantined cell (dropped assignment) is gone; the class is now dead.
    let e = h.sched.try_enqueue(back).unwrap_err().error;
    assert_eq!(e.reason(), "all-cells-quarantined");
}

fn f17_release_racing_a_waiter_is_never_lost<M: Mechanism>() {
    const ROUNDS: usize = if cfg!(miri) { 5 } else { 2_000 };
    let h = Harness::<M>::new(&[(1, 8)], 2);
    for _ in 0..ROUNDS {
        let held = h.occupy(1).pop().unwrap();
        let req = h.admit(1);
        std::thread::scope(|s| {
            s.spawn(move || held.release());
            let a = h
                .sched
                .enqueue_blocking(req)
                .expect("granted after the release");
            a.release();
        });
    }
    assert!(h.ledger.usage().is_zero());
}

fn f18_any_executor_drives_progress<M: Mechanism>() {
    let h = Arc::new(Harness::<M>::new(&[(2, 64)], 4));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..64u32 {
            let h = h.clone();
            tasks.push(tokio::spawn(async move {
                let a = h.sched.enqueue(h.admit(i % 4)).await.unwrap();
                tokio::task::yield_now().await;
                a.release();
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    // And the crate's own blocking adapter on plain threads.
    std::thread::scope(|s| {
        for t in 0..4 {
            let h = &h;
            s.spawn(move || {
                for _ in 0..50 {
                    h.sched.enqueue_blocking(h.admit(t)).unwrap().release();
                }
            });
        }
    });
    assert!(h.ledger.usage().is_zero());
}

fn f22_all_quarantined_fails_queued_and_new<M: Mechanism>() {
    let h = Harness::<M>::new(&[(2, 8)], 2);
    let mut held = h.occupy(2);
    let (mut f, _) = queue(&h, h.admit(1));
    held.pop().unwrap().quarantine("a");
    assert!(poll_once(&mut f).is_pending(), "one usable cell remains");
    held.pop().unwrap().quarantine("b");
    match poll_once(&mut f) {
        Poll::Ready(Err(e)) => assert_eq!(
            (e.code(), e.reason().as_str()),
            (Code::Unavailable, "all-cells-quarantined")
        ),
        other => panic!("{other:?}"),
    }
    let mut g = Box::pin(h.sched.enqueue(h.admit(1)));
    assert!(
        matches!(poll_once(&mut g), Poll::Ready(Err(e)) if e.reason() == "all-cells-quarantined")
    );
    drop((f, g));
    assert!(h.ledger.usage().is_zero());
}

fn f23_pull_mode_hands_jobs_to_executors_fairly<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 64)], 4);
    assert!(h.sched.try_next(ClassId(0)).unwrap().is_none());
    for (payload, tenant) in [(10, 1), (11, 1), (20, 2)] {
        h.sched.submit(h.admit(tenant), payload).unwrap();
    }
    let job = h.sched.try_next(ClassId(0)).unwrap().expect("a job");
    assert_eq!(job.payload, 10);
    assert!(
        h.sched.try_next(ClassId(0)).unwrap().is_none(),
        "one cell: the next job waits for it"
    );
    job.assignment.release();
    // Tenant 1 left the ring when its only queued job was granted and re-joined behind nobody
    // with its second job, so it is next; tenant 2 arrived after.
    let j2 = h.sched.next_blocking(ClassId(0)).unwrap().unwrap();
    assert_eq!(j2.payload, 11);
    j2.assignment.release(); // grants job 20 to the executors' ready queue
                             // Both modes on one scheduler: a waiting future and a pull executor share the class.
    let (mut f, _) = queue(&h, h.admit(3));
    let j3 = h
        .sched
        .try_next(ClassId(0))
        .unwrap()
        .expect("tenant 2's job");
    assert_eq!(j3.payload, 20);
    j3.assignment.release();
    match poll_once(&mut f) {
        Poll::Ready(Ok(a)) => a.release(),
        other => panic!("{other:?}"),
    }
    // Cancelling a submitted job refunds it.
    let _held = h.occupy(1);
    let handle = h.sched.submit(h.admit(1), 30).unwrap();
    h.sched.cancel(handle).unwrap();
    drop(_held);
    assert!(h.ledger.usage().is_zero());
}

fn f30_stale_handle_is_refused<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let (mut f, _) = queue(&h, h.admit(1));
    let handle = f.handle().unwrap();
    held.release();
    let a = granted(&mut f);
    // The slot is reused by a new request; the old handle must not cancel it.
    let held = a;
    let (mut g, _) = queue(&h, h.admit(1));
    assert_eq!(h.sched.cancel(handle).unwrap_err().code(), Code::NotFound);
    held.release();
    assert!(matches!(poll_once(&mut g), Poll::Ready(Ok(_))));
}

fn f31_cancel_deep_in_queue_touches_nothing_else<M: Mechanism>() {
    const DEPTH: usize = if cfg!(miri) { 16 } else { 4096 };
    let h = Harness::<M>::new(&[(1, DEPTH as u32 + 1)], 2);
    let held = h.occupy(1).pop().unwrap();
    let mut pending: Vec<_> = (0..DEPTH).map(|_| queue(&h, h.admit(1))).collect();
    let victim = pending[DEPTH / 2].0.handle().unwrap();
    h.sched.cancel(victim).unwrap();
    let cancelled_id = pending[DEPTH / 2].1;
    assert!(
        matches!(poll_once(&mut pending[DEPTH / 2].0), Poll::Ready(Err(e)) if e.code() == Code::Cancelled)
    );
    drop(pending.remove(DEPTH / 2));
    // Every other request is granted in arrival order: releasing the cell grants exactly the
    // next one (polling only that one keeps the test linear in depth).
    let mut held = held;
    for (f, id) in &mut pending {
        assert_ne!(*id, cancelled_id);
        held.release();
        held = match poll_once(f) {
            Poll::Ready(Ok(a)) => a,
            other => panic!("{id:?} should be next: {other:?}"),
        };
    }
    held.release();
    assert_eq!(h.sched.snapshot(ClassId(0)).unwrap().queue_depth, 0);
}

fn f32_token_cancel_wakes_and_keeps_first_reason<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let _held = h.occupy(1);
    let req = h.admit(1);
    let token = req.token().unwrap().clone();
    let mut f = Box::pin(h.sched.enqueue(req));
    let w = Arc::new(CountingWaker::default());
    let waker = Waker::from(w.clone());
    assert!(f
        .as_mut()
        .poll(&mut std::task::Context::from_waker(&waker))
        .is_pending());
    assert!(token.cancel("client-gone"));
    assert!(!token.cancel("again"));
    assert!(
        w.0.load(Ordering::SeqCst) >= 1,
        "cancellation wakes the waiter"
    );
    match poll_once(&mut f) {
        Poll::Ready(Err(e)) => assert_eq!(
            (e.code(), e.reason().as_str()),
            (Code::Cancelled, "client-gone")
        ),
        other => panic!("{other:?}"),
    }
    drop(f);
    drop(_held);
    assert!(h.ledger.usage().is_zero());
}

fn f33_cancel_of_unknown_or_finished_is_not_found<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let (mut f, _) = queue(&h, h.admit(1));
    let handle = f.handle().unwrap();
    held.release();
    let a = granted(&mut f);
    // Finished (granted): not-found, and the executing cell is untouched.
    assert_eq!(h.sched.cancel(handle).unwrap_err().code(), Code::NotFound);
    assert_eq!(h.sched.snapshot(ClassId(0)).unwrap().cells_leased, 1);
    a.release();
}

fn f34_token_of_another_request_is_refused<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let (permit, _) = h.admit(1).into_parts();
    let e = h
        .sched
        .try_enqueue(AdmittedRequest::new(
            permit,
            CancellationToken::new(RequestId(12345)),
        ))
        .unwrap_err();
    assert_eq!(
        (e.error.code(), e.error.reason().as_str()),
        (Code::InvalidArgument, "cancellation-identity")
    );
    assert!(h.ledger.usage().is_zero());
}

/// A waker that calls back into the scheduler when woken: it would deadlock (or panic on a
/// re-entrant std mutex) if woken while the scheduler held an internal lock.
struct ReentrantWaker<M: Mechanism> {
    sched: SchedulerOn<u64, M>,
    wakes: AtomicUsize,
}

impl<M: Mechanism> std::task::Wake for ReentrantWaker<M> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let _ = self.sched.snapshot(ClassId(0)).unwrap();
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}

fn f35_wakers_run_outside_internal_locks<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let w = Arc::new(ReentrantWaker {
        sched: h.sched.clone(),
        wakes: AtomicUsize::new(0),
    });
    let waker = Waker::from(w.clone());
    let mut f = Box::pin(h.sched.enqueue(h.admit(1)));
    assert!(f
        .as_mut()
        .poll(&mut std::task::Context::from_waker(&waker))
        .is_pending());
    held.release();
    assert_eq!(w.wakes.load(Ordering::SeqCst), 1);
    let mut g = Box::pin(h.sched.enqueue(h.admit(1)));
    assert!(g
        .as_mut()
        .poll(&mut std::task::Context::from_waker(&waker))
        .is_pending());
    h.sched.shutdown();
    assert!(w.wakes.load(Ordering::SeqCst) >= 2);
}

fn f40_enqueue_consumes_the_permit<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let a = h.sched.enqueue_blocking(h.admit(1)).unwrap();
    assert_eq!(
        h.ledger.usage().classes[0].concurrency,
        1,
        "the assignment carries the quota"
    );
    a.release();
    assert!(h.ledger.usage().is_zero());
}

fn f41_dropping_a_queued_future_refunds_everything<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1);
    let (f, _) = queue(&h, h.admit(1));
    assert_eq!(h.ledger.usage().tenants[1].queue_slots, 1);
    drop(f);
    assert!(h.ledger.usage().tenants[1].is_zero());
    assert_eq!(h.sched.snapshot(ClassId(0)).unwrap().queue_depth, 0);
    drop(held);
}

fn f42_granted_unaccepted_drop_returns_cell_then_quota<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let (f, _) = queue(&h, h.admit(1));
    held.release(); // grants the queued request; its future is never polled again
    assert_eq!(h.sched.snapshot(ClassId(0)).unwrap().cells_leased, 1);
    drop(f);
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!((s.cells_available, s.cells_leased), (1, 0));
    assert!(h.ledger.usage().is_zero());
}

fn f43_assignment_exposes_read_accessors<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let (mut f, id) = queue(&h, h.admit(1));
    h.advance(Duration::from_millis(7));
    held.release();
    let a = granted(&mut f);
    assert_eq!(a.request_id(), id);
    assert_eq!(a.cell(), fairway::CellId(0));
    assert_eq!(a.waited(), Duration::from_millis(7));
    a.release();
}

fn f44_release_quarantine_and_drop_settle_pool_then_quota<M: Mechanism>() {
    let h = Harness::<M>::new(&[(3, 8)], 2);
    let mut held = h.occupy(3);
    held.pop().unwrap().release();
    held.pop().unwrap().quarantine("uncertain");
    drop(held.pop().unwrap());
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(
        (s.cells_available, s.cells_quarantined, s.cells_leased),
        (1, 2, 0)
    );
    assert!(h.ledger.usage().is_zero());
}

fn f45_grant_returns_only_the_queue_reservation<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let a = h
        .sched
        .try_enqueue(h.admit_with(1, |r| r.cpu_units(3).memory_units(4)))
        .unwrap();
    let u = h.ledger.usage().tenants[1];
    assert_eq!(
        (u.queue_slots, u.concurrency, u.cpu_units, u.memory_units),
        (0, 1, 3, 4)
    );
    a.release();
}

fn f46_deadline_is_checked_in_queue_and_at_acceptance<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let (mut queued, _) = queue(
        &h,
        h.admit_with(1, |r| r.deadline(Duration::from_millis(10))),
    );
    h.advance(Duration::from_millis(20));
    // Failed at the next poll after the deadline...
    assert!(
        matches!(poll_once(&mut queued), Poll::Ready(Err(e)) if e.code() == Code::DeadlineExceeded)
    );
    // ...or by the next dispatch pass.
    let (mut q2, _) = queue(
        &h,
        h.admit_with(1, |r| r.deadline(Duration::from_millis(10))),
    );
    let (mut q3, q3_id) = queue(&h, h.admit(1));
    h.advance(Duration::from_millis(20));
    held.release();
    // One expired at its poll above, one in the dispatch pass.
    assert_eq!(h.sched.snapshot(ClassId(0)).unwrap().expirations, 2);
    assert!(
        matches!(poll_once(&mut q2), Poll::Ready(Err(e)) if e.code() == Code::DeadlineExceeded)
    );
    let a = match poll_once(&mut q3) {
        Poll::Ready(Ok(a)) => a,
        other => panic!("{q3_id:?} {other:?}"),
    };
    // At acceptance: granted, then the deadline passes before the owner polls.
    let (mut q4, _) = queue(
        &h,
        h.admit_with(1, |r| r.deadline(Duration::from_millis(10))),
    );
    a.release();
    h.advance(Duration::from_millis(20));
    assert!(
        matches!(poll_once(&mut q4), Poll::Ready(Err(e)) if e.code() == Code::DeadlineExceeded)
    );
    assert_eq!(
        h.sched.snapshot(ClassId(0)).unwrap().cells_available,
        1,
        "the unaccepted cell went back"
    );
    drop((queued, q2, q3, q4));
    assert!(h.ledger.usage().is_zero());
}

fn f47_shutdown_fails_queued_and_keeps_accepted<M: Mechanism>() {
    let h = Harness::<M>::new(&[(2, 8)], 2);
    let mut held = h.occupy(2);
    let (mut q, _) = queue(&h, h.admit(1));
    let (mut granted_unaccepted, _) = queue(&h, h.admit(1));
    h.sched.cancel(q.handle().unwrap()).unwrap();
    let _ = poll_once(&mut q);
    let (mut q, _) = queue(&h, h.admit(1));
    held.pop().unwrap().release(); // grants `granted_unaccepted`, first in line; never accepted
    h.sched.shutdown();
    let results = [poll_once(&mut granted_unaccepted), poll_once(&mut q)];
    for r in results {
        match r {
            Poll::Ready(Err(e)) => {
                assert_eq!(
                    (e.code(), e.reason().as_str()),
                    (Code::Unavailable, "shutdown")
                )
            }
            other => panic!("{other:?}"),
        }
    }
    let e = h.sched.try_enqueue(h.admit(1)).unwrap_err().error;
    assert_eq!(e.reason(), "shutdown");
    // The accepted assignment still owns its cell and quota.
    assert_eq!(h.ledger.usage().classes[0].concurrency, 1);
    assert_eq!(h.sched.snapshot(ClassId(0)).unwrap().cells_leased, 1);
    held.pop().unwrap().release();
    drop((q, granted_unaccepted));
    assert!(h.ledger.usage().is_zero());
}

fn f60_snapshot_reports_counters_and_waits<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 4);
    let held = h.occupy(1).pop().unwrap();
    let (mut a, _) = queue(&h, h.admit(1));
    let (b, _) = queue(&h, h.admit(2));
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(s.queue_depth, 2);
    drop(b);
    h.advance(Duration::from_millis(3));
    held.release();
    let got = granted(&mut a);
    h.advance(Duration::from_millis(2));
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!((s.grants, s.cancellations, s.queue_depth), (2, 1, 0));
    assert_eq!(s.wait_max, Duration::from_millis(3));
    assert_eq!(s.wait_histogram.len(), 2);
    assert!(s.oldest_lease_age.unwrap() >= Duration::from_millis(2));
    got.release();
}

fn f62_pool_view_is_consistent<M: Mechanism>() {
    let h = Harness::<M>::new(&[(4, 8)], 2);
    let mut held = h.occupy(3);
    held.pop().unwrap().quarantine("x");
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(
        s.cells_available + s.cells_leased + s.cells_quarantined,
        s.cells_total
    );
}

fn f64_manual_clock_drives_deadlines<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let _held = h.occupy(1);
    let (mut f, _) = queue(&h, h.admit_with(1, |r| r.deadline(Duration::from_secs(1))));
    h.advance(Duration::from_millis(999));
    assert!(poll_once(&mut f).is_pending());
    h.advance(Duration::from_millis(1));
    assert!(poll_once(&mut f).is_ready());
}

#[test]
fn f01_limits_unlimited_default() {
    assert_eq!(Limits::default(), Limits::UNLIMITED);
}
