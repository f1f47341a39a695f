//! A scheduler fixture shared by the scheduler and cancel benches, generic over the engine.
//!
//! Tokens are created once and reused (a token allocates its shared state), so timed loops
//! measure scheduling, not the allocator: admission and enqueue of a reused token allocate
//! nothing (`tests/alloc.rs`).

use std::time::Duration;

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::{
    AdmittedRequest, Baseline, CancellationToken, ClassId, LockFree, Mechanism, ParkingLotMutex,
    RequestId, Scheduler, StdMutex, TenantId,
};

use super::Backend;

/// Tenants every fixture admits requests for.
pub const TENANTS: u32 = 16;

/// A scheduler engine under test, with its label in criterion's report.
pub trait Engine: Mechanism {
    /// Label in criterion's report.
    const NAME: &'static str;
}

impl Engine for LockFree {
    const NAME: &'static str = "lock-free";
}

impl Engine for Baseline<StdMutex> {
    const NAME: &'static str = "std Mutex baseline";
}

impl Engine for Baseline<ParkingLotMutex> {
    const NAME: &'static str = "parking_lot baseline";
}

/// A ledger of [`TENANTS`] unlimited tenants, one class, and a scheduler of engine `M` on it.
pub struct Fixture<M: Mechanism> {
    /// The ledger the scheduler is bound to.
    pub ledger: Ledger,
    /// The scheduler (payloads are `u64`, for the pull mode).
    pub sched: Scheduler<u64, M>,
    /// Token `i` belongs to `RequestId(i)`; reused once its request has ended.
    tokens: Vec<CancellationToken>,
}

impl<M: Engine> Backend for Fixture<M> {
    fn name() -> &'static str {
        M::NAME
    }
}

impl<M: Mechanism> Fixture<M> {
    /// `cells` cells, a queue bound of `queue_capacity`, and `ids` reusable request ids.
    pub fn new(cells: u32, queue_capacity: u32, ids: u64) -> Self {
        let ledger = Ledger::new(LedgerConfig {
            classes: vec![ClassSpec::new("cpu")],
            max_tenants: TENANTS,
            tenant_limits: Limits::UNLIMITED,
        })
        .expect("ledger");
        let sched = Scheduler::builder(ledger.clone())
            .payload::<u64>()
            .class(cells, queue_capacity)
            .build_with::<M>()
            .expect("scheduler");
        let tokens = (0..ids)
            .map(|i| CancellationToken::new(RequestId(i)))
            .collect();
        Self {
            ledger,
            sched,
            tokens,
        }
    }

    /// The number of reusable request ids.
    pub fn ids(&self) -> u64 {
        self.tokens.len() as u64
    }

    /// Admits request number `i` under id `id` (below [`ids`](Self::ids)): tenant `i % 16`, a
    /// priority cycling over 0..4 and, for every third request, a deadline far in the future (so
    /// it orders the queue but never expires).
    pub fn request(&self, i: u64, id: u64) -> AdmittedRequest {
        let tenant = (i % u64::from(TENANTS)) as u32;
        let mut req = AdmissionRequest::new(RequestId(id), TenantId(tenant))
            .class(ClassId(0))
            .priority(((i / u64::from(TENANTS)) % 4) as u8);
        if i.is_multiple_of(3) {
            req = req.deadline(Duration::from_secs(3600));
        }
        let permit = self.ledger.admit(req).expect("admission");
        AdmittedRequest::new(permit, self.tokens[id as usize].clone())
    }
}
