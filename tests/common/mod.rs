//! Shared test harness: a ledger and a scheduler on a manual clock, request builders, and
//! polling helpers with counting wakers.
#![allow(dead_code, unused_macros)]

/// Instantiates each generic test `name::<M>()` for the engine (what `Scheduler` runs on) and
/// for the oracle's std-mutex twin, as `engine::name` and `oracle::name`, each bounded by
/// [`TEST_LIMIT`] (a hang fails naming the test).
macro_rules! both_engines {
    ($($name:ident),* $(,)?) => {
        mod engine {
            $( #[test] fn $name() {
                crate::common::within(
                    crate::common::TEST_LIMIT,
                    concat!("engine::", stringify!($name)),
                    super::$name::<fairway::oracle::Ring>,
                );
            } )*
        }
        mod oracle {
            $( #[test] fn $name() {
                crate::common::within(
                    crate::common::TEST_LIMIT,
                    concat!("oracle::", stringify!($name)),
                    super::$name::<fairway::oracle::Baseline>,
                );
            } )*
        }
    };
}

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
use fairway::oracle::{Mechanism, SchedulerOn};
use fairway::{
    AdmittedRequest, Assignment, CancellationToken, ClassId, Error, ManualClock, RequestId,
    Scheduler, TenantId,
};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

mod bound;
pub mod sched_ops;
#[allow(unused_imports)] // not every test file waits
pub use bound::{join_within, within, TEST_LIMIT};

/// A waker that counts its wakes.
#[derive(Default)]
pub struct CountingWaker(pub AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls `f` once with a fresh counting waker.
pub fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let w = Waker::from(Arc::new(CountingWaker::default()));
    Pin::new(f).poll(&mut Context::from_waker(&w))
}

/// Polls `f` once and expects a grant.
#[track_caller]
pub fn granted<F: Future<Output = Result<Assignment, Error>> + Unpin>(f: &mut F) -> Assignment {
    match poll_once(f) {
        Poll::Ready(Ok(a)) => a,
        Poll::Ready(Err(e)) => panic!("expected a grant, got {e}"),
        Poll::Pending => panic!("expected a grant, still pending"),
    }
}

/// Test set-up: `classes` (cells, queue capacity) and `tenants`.
pub struct Harness<M: Mechanism> {
    pub clock: Arc<ManualClock>,
    pub ledger: Ledger,
    pub sched: SchedulerOn<u64, M>,
    next_id: AtomicUsize,
}

pub fn ledger_config(classes: usize, tenants: u32) -> LedgerConfig {
    const NAMES: [&str; 4] = ["c0", "c1", "c2", "c3"];
    LedgerConfig::new(
        (0..classes).map(|i| ClassSpec::new(NAMES[i])).collect(),
        tenants,
    )
}

impl<M: Mechanism> Harness<M> {
    pub fn new(classes: &[(u32, u32)], tenants: u32) -> Self {
        Self::with_starvation(classes, tenants, Duration::from_secs(3600))
    }

    pub fn with_starvation(
        classes: &[(u32, u32)],
        tenants: u32,
        starvation_after: Duration,
    ) -> Self {
        let clock = Arc::new(ManualClock::new());
        let ledger =
            Ledger::with_clock(ledger_config(classes.len(), tenants), clock.clone()).unwrap();
        let mut b = Scheduler::builder(ledger.clone())
            .payload::<u64>()
            .starvation_after(starvation_after);
        for &(cells, cap) in classes {
            b = b.class(cells, cap);
        }
        let sched = b.build_with::<M>().unwrap();
        Self {
            clock,
            ledger,
            sched,
            next_id: AtomicUsize::new(1),
        }
    }

    pub fn fresh_id(&self) -> RequestId {
        RequestId(self.next_id.fetch_add(1, Ordering::Relaxed) as u64)
    }

    /// Admits a request built by `f` from a fresh id for `tenant` in class 0.
    pub fn admit_with(
        &self,
        tenant: u32,
        f: impl FnOnce(AdmissionRequest) -> AdmissionRequest,
    ) -> AdmittedRequest {
        let id = self.fresh_id();
        let permit = self
            .ledger
            .admit(f(
                AdmissionRequest::new(id, TenantId(tenant)).class(ClassId(0))
            ))
            .unwrap();
        AdmittedRequest::new(permit, CancellationToken::new(id))
    }

    pub fn admit(&self, tenant: u32) -> AdmittedRequest {
        self.admit_with(tenant, |r| r)
    }

    pub fn admit_prio(&self, tenant: u32, priority: u8) -> AdmittedRequest {
        self.admit_with(tenant, |r| r.priority(priority))
    }

    /// Takes every cell of class 0 on the fast path and returns the assignments.
    pub fn occupy(&self, cells: usize) -> Vec<Assignment> {
        (0..cells)
            .map(|_| self.sched.try_enqueue(self.admit(0)).expect("a free cell"))
            .collect()
    }

    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }
}

/// A queued request under test: its future and its request id.
pub type Pending<'a, M> = (Pin<Box<fairway::oracle::EnqueueOn<'a, u64, M>>>, RequestId);

/// Queues a request and checks it did not complete at once.
pub fn queue<'a, M: Mechanism>(h: &'a Harness<M>, req: AdmittedRequest) -> Pending<'a, M> {
    let id = req.permit().id();
    let mut f = Box::pin(h.sched.enqueue(req));
    assert!(
        poll_once(&mut f).is_pending(),
        "request {id:?} should have queued"
    );
    (f, id)
}

/// Polls every pending future once; returns the ids that completed, in `pending` order, and the
/// results.
pub fn poll_all<M: Mechanism>(
    pending: &mut Vec<Pending<'_, M>>,
) -> Vec<(RequestId, Result<Assignment, Error>)> {
    let mut done = Vec::new();
    let mut i = 0;
    while i < pending.len() {
        if let Poll::Ready(r) = poll_once(&mut pending[i].0) {
            let (_, id) = pending.remove(i);
            done.push((id, r));
        } else {
            i += 1;
        }
    }
    done
}

/// Releases `held` one at a time, recording which queued request each release granted.
/// Every granted assignment is itself released before the next step, so `held` cells cycle.
pub fn grant_order<M: Mechanism>(
    mut held: Assignment,
    pending: &mut Vec<Pending<'_, M>>,
) -> Vec<RequestId> {
    let mut order = Vec::new();
    loop {
        held.release();
        let mut done = poll_all(pending);
        match done.len() {
            0 => return order,
            1 => {
                let (id, r) = done.pop().unwrap();
                order.push(id);
                held = r.expect("granted");
            }
            n => panic!("one release granted {n} requests"),
        }
    }
}

/// Admits a token-less request with id `id` for `tenant` in class 0 of `ledger`.
pub fn admit_id(ledger: &Ledger, id: u64, tenant: u32) -> AdmittedRequest {
    let permit = ledger
        .admit(AdmissionRequest::new(RequestId(id), TenantId(tenant)))
        .unwrap();
    AdmittedRequest::without_token(permit)
}
