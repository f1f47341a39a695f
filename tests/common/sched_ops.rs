//! The scheduler's operation sequences and their interpreter, shared by the differential test
//! (`tests/differential.rs`, which generates them with proptest) and the scheduler fuzz target
//! (`fuzz/fuzz_targets/scheduler.rs`, which decodes them from libFuzzer's bytes): one run of a
//! sequence on an engine returns the log of everything it showed, and the two logs of the engine
//! and the oracle's mutex twin must be equal.
//!
//! Values are in the ranges the harness is built for: classes `0..2`, tenants `0..4`; indices
//! into the live futures and held assignments are taken modulo their number.

use super::{poll_once, Harness};
use fairway::oracle::Mechanism;
use fairway::{Assignment, ClassId};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

/// One step of a sequence.
#[derive(Debug, Clone)]
pub enum Op {
    Enqueue {
        class: u16,
        tenant: u32,
        priority: u8,
        deadline_ms: Option<u64>,
        weight: u32,
    },
    Submit {
        class: u16,
        tenant: u32,
        priority: u8,
    },
    TryEnqueue {
        class: u16,
        tenant: u32,
    },
    DropFuture(usize),
    CancelHandle(usize),
    CancelToken(usize),
    Release(usize),
    Quarantine(usize),
    TryNext(u16),
    Advance(u64),
    Shutdown,
    /// An in-place priority change (SPEC F36) of a queued future or pull-mode request.
    SetPriority(usize, u8),
    /// An in-place deadline change: `Some(ms)` from now, `None` back to the permit's own.
    SetDeadline(usize, Option<u64>),
}

type Fut<'a, M> = (
    Pin<Box<fairway::oracle::EnqueueOn<'a, u64, M>>>,
    fairway::CancellationToken,
    u64,
);

/// Runs `ops` and returns a log of every observable outcome.
pub fn run<M: Mechanism>(ops: &[Op]) -> Vec<String> {
    let h = Harness::<M>::with_starvation(&[(2, 6), (1, 3)], 4, Duration::from_millis(40));
    let mut log = Vec::new();
    let mut futures: Vec<Fut<'_, M>> = Vec::new();
    let mut held: Vec<(u64, Assignment)> = Vec::new();
    let mut pulls: Vec<(u64, fairway::RequestHandle)> = Vec::new();
    let mut next = 0u64;
    for op in ops {
        match *op {
            Op::Enqueue {
                class,
                tenant,
                priority,
                deadline_ms,
                weight,
            } => {
                next += 1;
                let req = h.admit_with(tenant, |r| {
                    let r = r.class(ClassId(class)).priority(priority).weight(weight);
                    match deadline_ms {
                        Some(ms) => r.deadline(Duration::from_millis(ms)),
                        None => r,
                    }
                });
                let token = req.token().unwrap().clone();
                futures.push((Box::pin(h.sched.enqueue(req)), token, next));
                log.push(format!("enqueue #{next}"));
            }
            Op::Submit {
                class,
                tenant,
                priority,
            } => {
                next += 1;
                let req = h.admit_with(tenant, |r| r.class(ClassId(class)).priority(priority));
                let r = h.sched.submit(req, next).map_err(|e| e.error);
                if let Ok(handle) = r {
                    pulls.push((next, handle));
                }
                log.push(format!("submit #{next}: {:?}", r.map(|_| ())));
            }
            Op::TryEnqueue { class, tenant } => {
                next += 1;
                let req = h.admit_with(tenant, |r| r.class(ClassId(class)));
                match h.sched.try_enqueue(req) {
                    Ok(a) => {
                        log.push(format!("try #{next}: cell {:?}/{:?}", a.class(), a.cell()));
                        held.push((next, a));
                    }
                    Err(e) => log.push(format!("try #{next}: {}", e.error)),
                }
            }
            Op::DropFuture(i) if !futures.is_empty() => {
                let (_, _, n) = futures.remove(i % futures.len());
                log.push(format!("drop #{n}"));
            }
            Op::CancelHandle(i) if !futures.is_empty() => {
                let (f, _, n) = &futures[i % futures.len()];
                let r = f.handle().map(|hd| h.sched.cancel(hd));
                log.push(format!("cancel #{n}: {r:?}"));
            }
            Op::CancelToken(i) if !futures.is_empty() => {
                let (_, t, n) = &futures[i % futures.len()];
                log.push(format!("cancel-token #{n}: {}", t.cancel("test")));
            }
            Op::Release(i) if !held.is_empty() => {
                let (n, a) = held.remove(i % held.len());
                log.push(format!("release #{n}"));
                a.release();
            }
            Op::Quarantine(i) if !held.is_empty() => {
                let (n, a) = held.remove(i % held.len());
                log.push(format!("quarantine #{n}"));
                a.quarantine("test");
            }
            Op::TryNext(class) => match h.sched.try_next(ClassId(class)).unwrap() {
                Some(job) => {
                    log.push(format!(
                        "next: #{} on {:?}",
                        job.payload,
                        job.assignment.cell()
                    ));
                    held.push((job.payload, job.assignment));
                }
                None => log.push("next: none".into()),
            },
            Op::Advance(ms) => h.advance(Duration::from_millis(ms)),
            Op::SetPriority(i, _) | Op::SetDeadline(i, _)
                if !futures.is_empty() || !pulls.is_empty() =>
            {
                let targets: Vec<(u64, Option<fairway::RequestHandle>)> = futures
                    .iter()
                    .map(|(f, _, n)| (*n, f.handle()))
                    .chain(pulls.iter().map(|&(n, hd)| (n, Some(hd))))
                    .collect();
                let (n, handle) = targets[i % targets.len()];
                let r = handle.map(|hd| match *op {
                    Op::SetPriority(_, p) => h.sched.set_priority(hd, p),
                    Op::SetDeadline(_, ms) => {
                        let at = ms.map(|ms| h.ledger.clock().now() + ms * 1_000_000);
                        h.sched.set_deadline(hd, at)
                    }
                    _ => unreachable!(),
                });
                log.push(format!("change #{n}: {r:?}"));
            }
            Op::Shutdown => {
                h.sched.shutdown();
                log.push("shutdown".into());
            }
            _ => {}
        }
        // Poll every live future, in order, and record what completed.
        let mut i = 0;
        while i < futures.len() {
            match poll_once(&mut futures[i].0) {
                Poll::Pending => i += 1,
                Poll::Ready(r) => {
                    let (_, _, n) = futures.remove(i);
                    match r {
                        Ok(a) => {
                            log.push(format!(
                                "  #{n} granted {:?}/{:?} after {:?}",
                                a.class(),
                                a.cell(),
                                a.waited()
                            ));
                            held.push((n, a));
                        }
                        Err(e) => log.push(format!("  #{n} failed: {e}")),
                    }
                }
            }
        }
        for c in 0..2 {
            let s = h.sched.snapshot(ClassId(c)).unwrap();
            log.push(format!(
                "  class {c}: avail {} leased {} quarantined {} depth {} grants {} cancels {} expired {} rejected {}",
                s.cells_available,
                s.cells_leased,
                s.cells_quarantined,
                s.queue_depth,
                s.grants,
                s.cancellations,
                s.expirations,
                s.rejections
            ));
        }
    }
    // Quiescence: end everything; every permit must be back.
    drop(futures);
    for (_, a) in held {
        a.release();
    }
    h.sched.shutdown();
    while h.sched.try_next(ClassId(0)).unwrap().is_some()
        || h.sched.try_next(ClassId(1)).unwrap().is_some()
    {}
    assert!(h.ledger.usage().is_zero(), "{:?}", h.ledger.usage());
    log
}
