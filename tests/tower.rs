//! The fair tower layer (SPEC X04), through its public API: a request admitted through a class,
//! the cell held for the inner call and released when it ends or is dropped, queueing until the
//! deadline or shedding at once, typed rejections and their statuses, and a `poll_ready` that
//! reserves nothing.
#![cfg(feature = "tower")]

use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::tower::{FairError, FairLayer, Overload};
use fairway::{ClassId, Reason, Scheduler, TenantId};
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tower::{Layer, Service, ServiceExt};

/// Turns a wait that never ends into a failure naming what it waited for.
const LIMIT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug)]
struct Req {
    tenant: u32,
    tag: u32,
    priority: u8,
    class: u16,
}

fn req(tenant: u32, tag: u32) -> Req {
    Req {
        tenant,
        tag,
        priority: 0,
        class: 0,
    }
}

/// An inner service whose calls record their tag on entry, then wait for a gate permit.
#[derive(Clone)]
struct Gated {
    entered: Arc<Mutex<Vec<u32>>>,
    gate: Arc<Semaphore>,
}

impl Gated {
    fn new() -> Self {
        Self {
            entered: Arc::default(),
            gate: Arc::new(Semaphore::new(0)),
        }
    }

    fn entered(&self) -> Vec<u32> {
        self.entered.lock().unwrap().clone()
    }

    /// Waits until `n` calls have entered the inner service.
    async fn until_entered(&self, n: usize, what: &str) {
        let start = Instant::now();
        while self.entered.lock().unwrap().len() < n {
            assert!(
                start.elapsed() < LIMIT,
                "{what}: only {:?} of {n} calls entered the inner service",
                self.entered()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

impl Service<Req> for Gated {
    type Response = u32;
    type Error = Infallible;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<u32, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        self.entered.lock().unwrap().push(req.tag);
        let gate = Arc::clone(&self.gate);
        Box::pin(async move {
            gate.acquire().await.unwrap().forget();
            Ok(req.tag)
        })
    }
}

fn scheduler(classes: &[u32], queue: u32, tenant_limits: Limits) -> (Ledger, Scheduler) {
    let specs = (0..classes.len())
        .map(|i| ClassSpec::new(["a", "b", "c"][i]))
        .collect();
    let ledger =
        Ledger::new(LedgerConfig::new(specs, 10_000).tenant_limits(tenant_limits)).unwrap();
    let mut builder = Scheduler::builder(ledger.clone());
    for &cells in classes {
        builder = builder.class(cells, queue);
    }
    (ledger, builder.build().unwrap())
}

fn layer(scheduler: &Scheduler, overload: Overload, deadline: Option<Duration>) -> FairLayer<Req> {
    FairLayer::builder(scheduler.clone())
        .tenant(|r: &Req| TenantId(r.tenant))
        .priority(|r: &Req| r.priority)
        .class(|r: &Req| ClassId(r.class))
        .deadline(move |_| deadline)
        .overload(overload)
        .build()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

async fn bounded<F: Future>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(LIMIT, f).await {
        Ok(out) => out,
        Err(_) => panic!("{what} did not finish within {LIMIT:?}"),
    }
}

fn rejection<E: std::fmt::Debug>(out: Result<u32, FairError<E>>) -> fairway::tower::Rejection {
    match out {
        Err(FairError::Rejected(r)) => r,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn x04_the_cell_is_held_for_the_inner_call_and_released_when_it_completes() {
    runtime().block_on(async {
        let (ledger, sched) = scheduler(&[2], 16, Limits::UNLIMITED);
        let inner = Gated::new();
        let svc = layer(&sched, Overload::Queue, None).layer(inner.clone());
        let call = tokio::spawn(svc.oneshot(req(1, 7)));
        inner.until_entered(1, "the first call").await;
        assert_eq!(
            sched.available_cells(ClassId(0)).unwrap(),
            1,
            "the call holds a cell"
        );
        assert!(!ledger.usage().is_zero(), "the call holds its quota");
        inner.gate.add_permits(1);
        let out = bounded("the gated call", call).await.unwrap();
        assert_eq!(out.unwrap(), 7);
        assert_eq!(
            sched.available_cells(ClassId(0)).unwrap(),
            2,
            "the cell came back"
        );
        assert!(ledger.usage().is_zero(), "the quota came back");
        assert_eq!(sched.snapshot(ClassId(0)).unwrap().cells_quarantined, 0);
    });
}

#[test]
fn x04_a_dropped_call_releases_its_cell_and_a_dropped_queued_call_withdraws() {
    runtime().block_on(async {
        // The class's drop policy is the default, quarantine: the layer releases explicitly.
        let (ledger, sched) = scheduler(&[1], 16, Limits::UNLIMITED);
        let inner = Gated::new();
        let svc = layer(&sched, Overload::Queue, None).layer(inner.clone());
        let running = tokio::spawn(svc.clone().oneshot(req(1, 1)));
        inner.until_entered(1, "the running call").await;
        let mut queued = Box::pin(svc.clone().oneshot(req(2, 2)));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(queued.as_mut().poll(&mut cx).is_pending());
        assert_eq!(
            sched.queue_depth(ClassId(0)).unwrap(),
            1,
            "the second call is queued"
        );

        drop(queued);
        assert_eq!(
            sched.queue_depth(ClassId(0)).unwrap(),
            0,
            "the dropped call withdrew"
        );
        running.abort();
        let _ = bounded("the aborted call", running).await;
        let snap = sched.snapshot(ClassId(0)).unwrap();
        assert_eq!(
            snap.cells_quarantined, 0,
            "a dropped call releases, not quarantines"
        );
        assert_eq!(snap.cells_available, 1, "the aborted call's cell came back");
        assert_eq!(
            snap.cancellations + snap.rejections,
            1,
            "the withdrawal was counted once"
        );
        assert!(ledger.usage().is_zero(), "every quota came back");
    });
}

#[test]
fn x04_poll_ready_reserves_nothing() {
    runtime().block_on(async {
        let (ledger, sched) = scheduler(&[1], 4, Limits::UNLIMITED);
        let inner = Gated::new();
        let svc = layer(&sched, Overload::Queue, None).layer(inner.clone());
        let running = tokio::spawn(svc.clone().oneshot(req(1, 1)));
        inner
            .until_entered(1, "the call that takes the only cell")
            .await;
        let usage = ledger.usage();
        // Every cell and queue slot in use or not, readiness is immediate and takes nothing.
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..10_000 {
            let mut s = svc.clone();
            assert!(matches!(s.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        }
        assert_eq!(ledger.usage(), usage, "poll_ready took quota");
        assert_eq!(
            sched.queue_depth(ClassId(0)).unwrap(),
            0,
            "poll_ready queued"
        );
        assert_eq!(sched.available_cells(ClassId(0)).unwrap(), 0);
        inner.gate.add_permits(1);
        bounded("the running call", running).await.unwrap().unwrap();
        assert_eq!(sched.available_cells(ClassId(0)).unwrap(), 1);
        assert!(ledger.usage().is_zero());
    });
}

#[test]
fn x04_shedding_refuses_at_once_with_503_when_no_cell_is_free() {
    runtime().block_on(async {
        let (ledger, sched) = scheduler(&[1], 16, Limits::UNLIMITED);
        let inner = Gated::new();
        let svc = layer(&sched, Overload::Shed, None).layer(inner.clone());
        let running = tokio::spawn(svc.clone().oneshot(req(1, 1)));
        inner
            .until_entered(1, "the call that takes the only cell")
            .await;
        let shed = rejection(bounded("a shed call", svc.clone().oneshot(req(2, 2))).await);
        assert_eq!(shed.error().reason(), Reason::NoCapacity);
        assert_eq!(shed.status(), 503);
        assert_eq!(
            inner.entered(),
            vec![1],
            "a shed call reached the inner service"
        );
        inner.gate.add_permits(2);
        bounded("the running call", running).await.unwrap().unwrap();
        // With the cell free again the same call is served.
        assert_eq!(svc.oneshot(req(2, 3)).await.unwrap(), 3);
        assert!(ledger.usage().is_zero());
    });
}

#[test]
fn x04_a_queued_request_is_refused_504_when_its_deadline_passes() {
    runtime().block_on(async {
        let (ledger, sched) = scheduler(&[1], 16, Limits::UNLIMITED);
        let inner = Gated::new();
        let running = tokio::spawn(
            layer(&sched, Overload::Queue, None)
                .layer(inner.clone())
                .oneshot(req(1, 1)),
        );
        inner
            .until_entered(1, "the call that takes the only cell")
            .await;
        let svc = layer(&sched, Overload::Queue, Some(Duration::from_millis(30)));
        let start = Instant::now();
        let late = rejection(
            bounded(
                "a call past its deadline",
                svc.layer(inner.clone()).oneshot(req(2, 2)),
            )
            .await,
        );
        let waited = start.elapsed();
        assert_eq!(late.error().reason(), Reason::DeadlineExceeded);
        assert_eq!(late.status(), 504);
        assert!(
            waited >= Duration::from_millis(30),
            "refused before its deadline: {waited:?}"
        );
        assert_eq!(
            sched.queue_depth(ClassId(0)).unwrap(),
            0,
            "the expired call stayed queued"
        );
        assert_eq!(inner.entered(), vec![1]);
        inner.gate.add_permits(1);
        bounded("the running call", running).await.unwrap().unwrap();
        assert!(ledger.usage().is_zero());
    });
}

#[test]
fn x04_a_tenant_over_its_own_quota_is_refused_429_and_others_are_served() {
    runtime().block_on(async {
        let (ledger, sched) = scheduler(&[2], 16, Limits::UNLIMITED.concurrency(1));
        let inner = Gated::new();
        let svc = layer(&sched, Overload::Queue, None).layer(inner.clone());
        let first = tokio::spawn(svc.clone().oneshot(req(1, 1)));
        inner.until_entered(1, "tenant 1's first call").await;
        let over =
            rejection(bounded("tenant 1's second call", svc.clone().oneshot(req(1, 2))).await);
        assert_eq!(over.error().reason(), Reason::TenantConcurrency);
        assert_eq!(over.status(), 429);
        let other = tokio::spawn(svc.clone().oneshot(req(2, 3)));
        inner.until_entered(2, "tenant 2's call").await;
        inner.gate.add_permits(2);
        assert_eq!(bounded("tenant 1", first).await.unwrap().unwrap(), 1);
        assert_eq!(bounded("tenant 2", other).await.unwrap().unwrap(), 3);
        assert!(ledger.usage().is_zero());
    });
}

#[test]
fn x04_a_quiet_tenant_is_served_ahead_of_a_flooding_tenants_backlog() {
    runtime().block_on(async {
        let (ledger, sched) = scheduler(&[1], 1_024, Limits::UNLIMITED);
        let inner = Gated::new();
        let svc = layer(&sched, Overload::Queue, None).layer(inner.clone());
        let mut calls = vec![tokio::spawn(svc.clone().oneshot(req(1, 0)))];
        inner.until_entered(1, "the flooder's first call").await;
        // 500 of the flooder's requests queue, then one of the quiet tenant's.
        for tag in 1..=500 {
            calls.push(tokio::spawn(svc.clone().oneshot(req(1, tag))));
        }
        tokio::task::yield_now().await;
        calls.push(tokio::spawn(svc.clone().oneshot(req(2, 9_999))));
        while sched.queue_depth(ClassId(0)).unwrap() < 501 {
            tokio::task::yield_now().await;
        }
        // Let two calls finish: the quiet tenant's request takes the second free cell at the
        // latest (the first may already be promised to the flooder's turn).
        inner.gate.add_permits(2);
        inner
            .until_entered(3, "two grants after the flood queued")
            .await;
        let entered = inner.entered();
        assert!(
            entered[1..3].contains(&9_999),
            "the quiet tenant waited behind the flood: grants {:?}",
            &entered[..3]
        );
        inner.gate.add_permits(10_000);
        for call in calls {
            bounded("the flood's calls", call).await.unwrap().unwrap();
        }
        assert!(ledger.usage().is_zero());
    });
}

#[test]
fn x04_priority_orders_a_tenants_own_requests_and_class_routes() {
    runtime().block_on(async {
        let (ledger, sched) = scheduler(&[1, 1], 16, Limits::UNLIMITED);
        let inner = Gated::new();
        let svc = layer(&sched, Overload::Queue, None).layer(inner.clone());
        let hold = tokio::spawn(svc.clone().oneshot(req(1, 0)));
        inner.until_entered(1, "the call holding class 0").await;
        let low = tokio::spawn(svc.clone().oneshot(Req {
            priority: 1,
            ..req(1, 1)
        }));
        tokio::task::yield_now().await;
        let high = tokio::spawn(svc.clone().oneshot(Req {
            priority: 9,
            ..req(1, 2)
        }));
        tokio::task::yield_now().await;
        // Class 1 has its own free cell: served while class 0 is full.
        let other_class = tokio::spawn(svc.clone().oneshot(Req {
            class: 1,
            ..req(3, 3)
        }));
        inner.until_entered(2, "the class-1 call").await;
        assert_eq!(inner.entered()[1], 3);
        assert_eq!(sched.available_cells(ClassId(1)).unwrap(), 0);
        inner.gate.add_permits(1);
        inner
            .until_entered(3, "the first queued call of class 0")
            .await;
        assert_eq!(
            inner.entered()[2],
            2,
            "the higher priority went first within the tenant"
        );
        inner.gate.add_permits(10);
        for call in [hold, low, high, other_class] {
            bounded("the calls", call).await.unwrap().unwrap();
        }
        assert!(ledger.usage().is_zero());
    });
}

#[test]
fn x04_an_inner_error_passes_through_and_releases_the_cell() {
    runtime().block_on(async {
        let (ledger, sched) = scheduler(&[1], 16, Limits::UNLIMITED);
        let svc = layer(&sched, Overload::Queue, None).layer(tower::service_fn(|_: Req| async {
            Err::<u32, &str>("inner failed")
        }));
        match svc.oneshot(req(1, 1)).await {
            Err(FairError::Inner(e)) => assert_eq!(e, "inner failed"),
            other => panic!("expected the inner error, got {other:?}"),
        }
        assert_eq!(sched.available_cells(ClassId(0)).unwrap(), 1);
        assert!(ledger.usage().is_zero());
    });
}

#[test]
fn x04_a_stopped_scheduler_refuses_with_503() {
    runtime().block_on(async {
        let (ledger, sched) = scheduler(&[1], 16, Limits::UNLIMITED);
        let svc = layer(&sched, Overload::Queue, None).layer(Gated::new());
        sched.shutdown();
        let refused = rejection(bounded("a call after shutdown", svc.oneshot(req(1, 1))).await);
        assert_eq!(refused.status(), 503);
        assert_eq!(refused.error().reason(), Reason::Shutdown);
        assert!(ledger.usage().is_zero());
    });
}

#[cfg(feature = "http")]
#[test]
fn x04_rejections_map_to_http_statuses_and_responses() {
    runtime().block_on(async {
        let (_, sched) = scheduler(&[1], 16, Limits::UNLIMITED.concurrency(1));
        let inner = Gated::new();
        let svc = layer(&sched, Overload::Shed, None).layer(inner.clone());
        let running = tokio::spawn(svc.clone().oneshot(req(1, 1)));
        inner
            .until_entered(1, "the call that takes the only cell")
            .await;
        let tenant = rejection(svc.clone().oneshot(req(1, 2)).await);
        assert_eq!(tenant.status_code(), http::StatusCode::TOO_MANY_REQUESTS);
        let full = rejection(svc.clone().oneshot(req(2, 3)).await);
        assert_eq!(full.status_code(), http::StatusCode::SERVICE_UNAVAILABLE);
        let response: http::Response<String> = full.to_response();
        assert_eq!(response.status(), 503);
        assert_eq!(response.body(), "unavailable / no-capacity");
        inner.gate.add_permits(1);
        bounded("the running call", running).await.unwrap().unwrap();
    });
}
