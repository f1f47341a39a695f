//! The two single-operation targets, measured here too so that the main job reports every
//! PERF.md target (criterion's `pool` and `cancel` benches measure the same operations):
//!
//! * **P2**: one cell taken and given back, `FixedCellPool::try_acquire_now` + `release`, against
//!   tokio's `Semaphore::try_acquire` + drop of the permit.
//! * **P7**: cancel by handle at queue depth 4096 against depth 1, on the lock-free engine: the
//!   class's only cell is held, `depth` requests wait behind it, and one operation cancels a
//!   queued request picked at random, polls its future (which resolves to the cancellation and
//!   refunds the permit) and enqueues a replacement under the same id, so the depth stays put.
//!
//! Both run their variants interleaved, one batch each per repetition, and report the median of
//! same-repetition ratios.

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::pool::{CellPool, FixedCellPool, LeaseRequest};
use fairway::{
    AdmittedRequest, CancellationToken, ClassId, LockFree, RequestId, Scheduler, TenantId,
};

use super::sched::Rng;

/// Median of `xs` (NaN when empty).
fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Nanoseconds per call of `op`, over batches of `batch` calls until `run_for` has passed.
fn ns_per_op(run_for: Duration, batch: u64, mut op: impl FnMut(u64)) -> f64 {
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < run_for {
        for i in 0..batch {
            op(done + i);
        }
        done += batch;
    }
    start.elapsed().as_nanos() as f64 / done as f64
}

/// One target's result: the median nanoseconds of each variant and the median ratio.
#[derive(Debug, Clone, Copy)]
pub struct Pair {
    /// The numerator's median ns/op (fairway; depth 4096 for P7).
    pub ns: f64,
    /// The denominator's median ns/op (tokio; depth 1 for P7).
    pub base_ns: f64,
    /// Median of same-repetition ratios `ns / base_ns`.
    pub ratio: f64,
}

fn pair(samples: &[(f64, f64)]) -> Pair {
    Pair {
        ns: median(samples.iter().map(|s| s.0).collect()),
        base_ns: median(samples.iter().map(|s| s.1).collect()),
        ratio: median(samples.iter().map(|s| s.0 / s.1).collect()),
    }
}

/// P2: `FixedCellPool` against tokio's `Semaphore`, one thread, one cell.
pub fn pool(reps: usize, run_for: Duration) -> Pair {
    let fixed = FixedCellPool::new(ClassId(0), 1).expect("one cell");
    let sem = tokio::sync::Semaphore::new(1);
    let fixed_op = |id: u64| {
        let req = LeaseRequest {
            request: RequestId(id),
            class: ClassId(0),
            cpu_units: 0,
            memory_units: 0,
        };
        let lease = fixed
            .try_acquire_now(&req)
            .expect("healthy pool")
            .expect("the cell is free");
        black_box(lease.cell());
        fixed.release(lease);
    };
    let sem_op = |_: u64| drop(black_box(sem.try_acquire().expect("the permit is free")));
    // Warm-up, then interleaved repetitions.
    ns_per_op(run_for / 4, 1024, fixed_op);
    ns_per_op(run_for / 4, 1024, sem_op);
    let samples: Vec<(f64, f64)> = (0..reps)
        .map(|_| {
            (
                ns_per_op(run_for, 1024, fixed_op),
                ns_per_op(run_for, 1024, sem_op),
            )
        })
        .collect();
    pair(&samples)
}

/// A lock-free scheduler of one cell and a queue of 4096, with `depth` requests waiting behind
/// the held cell; runs cancel + replace for `run_for` and returns ns/op.
fn cancel_at(depth: usize, run_for: Duration) -> f64 {
    const TENANTS: u32 = 16;
    let ledger = Ledger::new(LedgerConfig {
        classes: vec![ClassSpec::new("cells")],
        max_tenants: TENANTS,
        tenant_limits: Limits::UNLIMITED,
    })
    .expect("valid ledger");
    let sched = Scheduler::builder(ledger.clone())
        .payload::<u64>()
        .class(1, 4096)
        .build_with::<LockFree>()
        .expect("valid scheduler");
    // Id `k` belongs to queue slot `k`; id `depth` to the held request. Tokens are reused.
    let tokens: Vec<CancellationToken> = (0..=depth as u64)
        .map(|i| CancellationToken::new(RequestId(i)))
        .collect();
    let request = |i: u64, id: u64| {
        let req = AdmissionRequest::new(RequestId(id), TenantId((i % u64::from(TENANTS)) as u32))
            .class(ClassId(0))
            .priority(((i / u64::from(TENANTS)) % 4) as u8);
        let permit = ledger.admit(req).expect("unlimited ledger");
        AdmittedRequest::new(permit, tokens[id as usize].clone())
    };
    let mut cx = Context::from_waker(Waker::noop());
    let held = sched
        .try_enqueue(request(0, depth as u64))
        .expect("the cell is free");
    let mut queued: Vec<_> = (0..depth)
        .map(|k| sched.enqueue(request(k as u64 + 1, k as u64)))
        .collect();
    for q in &mut queued {
        assert!(
            Pin::new(q).poll(&mut cx).is_pending(),
            "the only cell is held"
        );
    }
    let mut pick = Rng(0x9E37_79B9_7F4A_7C15);
    let ns = ns_per_op(run_for, 256, |i| {
        // Which queued request to cancel next.
        let k = (pick.next() % depth as u64) as usize;
        let slot = &mut queued[k];
        let handle = slot.handle().expect("queued");
        sched
            .cancel(handle)
            .expect("queued requests can be cancelled");
        assert!(matches!(
            Pin::new(&mut *slot).poll(&mut cx),
            Poll::Ready(Err(_))
        ));
        *slot = sched.enqueue(request(i, k as u64));
        assert!(Pin::new(&mut *slot).poll(&mut cx).is_pending());
    });
    drop(queued);
    held.release();
    ns
}

/// P7: cancel + replace at depth 4096 against depth 1 on the lock-free engine.
pub fn cancel(reps: usize, run_for: Duration) -> Pair {
    cancel_at(1, run_for / 4);
    cancel_at(4096, run_for / 4);
    let samples: Vec<(f64, f64)> = (0..reps)
        .map(|_| (cancel_at(4096, run_for), cancel_at(1, run_for)))
        .collect();
    pair(&samples)
}
