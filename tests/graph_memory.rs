//! SPEC D51: the memory a burst grew comes back — through `reset()` to what the graph held at
//! build, and all of it when the graph is dropped — once the epoch collector has run the
//! deferred frees of the retired segments. Alone in its binary: the live-byte count is global,
//! and a deferred free can run on any thread that pins.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::graph::{Admission, Dependency, Gate, Graph, JobKey, JobOutcome, JobSpec};
use fairway::{ClassId, TenantId};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

/// Counts the bytes live, over every thread.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counter is an atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Relaxed: a tally read by the one test of this binary.
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// Lets the epoch collector run what was deferred: pins, flushes and unpins until the live
/// bytes stop above `target` no longer (at most `rounds` times); returns the last count.
fn settle(target: i64, rounds: u32) -> i64 {
    for _ in 0..rounds {
        if live() <= target {
            break;
        }
        crossbeam_epoch::pin().flush();
    }
    live()
}

fn spec(key: u64, deps: &[Dependency]) -> JobSpec<'_> {
    JobSpec {
        key: JobKey::new(key),
        tenant: TenantId(0),
        class: ClassId(0),
        priority: 0,
        deadline: None,
        deps,
    }
}

/// Submits `n` jobs (every other one on its predecessor), runs them all and drops their
/// handles.
fn burst(g: &Graph, n: u64) {
    let mut held = Vec::with_capacity(n as usize);
    for k in 0..n {
        let on = [Dependency {
            key: JobKey::new(k.wrapping_sub(1)),
            gate: Gate::OnSuccess,
            pin: None,
        }];
        let deps: &[Dependency] = if k % 2 == 1 { &on } else { &[] };
        match g.submit(&spec(k, deps)).unwrap() {
            Admission::Admitted(h) => held.push(h),
            other => panic!("job {k}: {other:?}"),
        }
    }
    while let Some(job) = g.try_next(ClassId(0)) {
        g.complete(job, JobOutcome::Succeeded).unwrap();
    }
    assert!(held
        .iter()
        .all(|h| h.outcome() == Some(JobOutcome::Succeeded)));
    drop(held);
}

#[test]
fn d51_memory_a_burst_grew_comes_back_through_reset_and_drop() {
    let ledger = Ledger::new(
        LedgerConfig::new(vec![ClassSpec::new("cpu")], 1).tenant_limits(Limits::UNLIMITED),
    )
    .unwrap();
    // (Most of what a graph holds at build is its scheduler's queue, fixed at build by F02:
    // about 1 KB per node slot.) The collector's own state (its queue of deferred frees keeps its last node, one bag of
    // deferred calls) is brought to what the end of the test leaves: one whole cycle of a
    // small graph first.
    {
        let g = Graph::builder(ledger.clone())
            .class(4)
            .nodes(1_000)
            .edges(1_000)
            .keys(1 << 12)
            .build()
            .unwrap();
        burst(&g, 1_000);
        g.reset();
        drop(g);
    }
    for _ in 0..1_000 {
        crossbeam_epoch::pin().flush();
    }
    let before = live();
    let g = Graph::builder(ledger)
        .class(4)
        .nodes(200_000)
        .edges(400_000)
        .keys(1 << 18)
        .build()
        .unwrap();
    let built = live();
    const BURST: u64 = 100_000;
    burst(&g, BURST);
    let peak = live();
    assert!(
        peak > built + (BURST as i64) * 64,
        "the burst grew the stores: built {built} B, peak {peak} B"
    );
    g.reset();
    // The index's array and the stores' segments go through the collector; what the graph
    // still holds is what it held at build (the per-node side tables keep their high-water
    // mark: see the deviations).
    let after_reset = settle(built, 100_000);
    let o = g.occupancy();
    eprintln!(
        "bytes: before build {before}, built {built}, peak {peak}, after reset {after_reset}; {o:?}"
    );
    assert!(
        (after_reset - built) * 8 < peak - built,
        "reset gave most of the burst back: built {built} B, peak {peak} B, after {after_reset} B"
    );
    drop(g);
    let after_drop = settle(before, 100_000);
    // At most what was live before: the collector may have given back some of its own state
    // meanwhile (at most one node of its queue: a bag of 64 deferred calls, about 2 KiB),
    // smaller than any segment of the graph's (the smallest is 4 KiB).
    assert!(
        after_drop <= before,
        "every byte of the graph came back once it was dropped: {after_drop} B live, {before} B before (built {built} B, peak {peak} B)"
    );
    assert!(
        before - after_drop <= 4096,
        "the collector gave back more than its queue's own state: {after_drop} B, {before} B"
    );
}
