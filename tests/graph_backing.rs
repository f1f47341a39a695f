//! SPEC D51: bounded is not preallocated. The graph's node, edge and key stores and its key
//! index are sized by the configured maxima but back only what is in use, growing as use grows;
//! a steady state allocates nothing; `reset()` and `shrink_to_fit()` give backing memory back;
//! `occupancy()` reports used, backing and maximum of every store. Past the maxima, submissions
//! are refused `Backpressured` as before (SPEC D05). Each test runs on both graph engines.
//!
//! The counting allocator below counts, per thread, the allocations made and the bytes left
//! live, so a test counts only what its own thread does.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::graph::{
    Admission, Gate, Graph, GraphEngine, JobHandle, JobId, JobOutcome, Occupancy, Task,
};
use fairway::oracle::GraphOn;
use fairway::{ClassConfig, Code, Reason, Scheduler};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Mutex;

#[macro_use]
#[path = "common/graph.rs"]
mod graph_common;
use graph_common::*;

both_graphs!(
    d51_occupancy_reports_used_backing_and_maximum,
    d51_grows_to_a_burst_of_10e6_jobs_and_back_through_reset,
    d51_backpressured_unchanged_at_the_maxima,
    d51_a_stale_handle_after_a_shrink_reads_gone,
    d51_regrown_slots_never_alias_a_stale_handle,
    d51_warmed_steady_state_allocates_nothing,
    d51_build_bytes_at_10e6_nodes,
);

/// Counts, per thread, the allocations made and the bytes live.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

fn note(allocs: u64, grow: usize, shrink: usize) {
    // `try_with`: the thread-locals may already be gone while a thread is torn down.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + allocs));
    let _ = LIVE.try_with(|c| c.set(c.get() + grow as i64 - shrink as i64));
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are thread-local cells.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(1, layout.size(), 0);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(1, layout.size(), 0);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(0, 0, layout.size());
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(1, new_size, layout.size());
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f`; returns its result, the allocations it made on this thread and the bytes it left
/// live.
fn measured<R>(f: impl FnOnce() -> R) -> (R, u64, i64) {
    let (a, l) = (ALLOCS.with(Cell::get), LIVE.with(Cell::get));
    let r = f();
    (r, ALLOCS.with(Cell::get) - a, LIVE.with(Cell::get) - l)
}

/// What the tests expect of each engine beyond the shared rule.
trait Engine: GraphEngine {
    /// Whether a warmed steady state makes no allocation at all. The lock-free engine's
    /// per-job path allocates nothing (SPEC Q03, D51). The mutex twin (the oracle) builds its
    /// operations' work lists on the heap; what it shares with the rule is that its stores do
    /// not grow: a steady state leaves no byte more live and no more backing.
    const ALLOCATION_FREE: bool;
}

impl Engine for fairway::oracle::LockFreeGraph {
    const ALLOCATION_FREE: bool = true;
}

impl Engine for fairway::oracle::MutexGraph {
    const ALLOCATION_FREE: bool = false;
}

/// The maxima of the large graphs: 10^6 nodes, 4 * 10^6 edges, 2^20 keys.
const BIG_NODES: u32 = 1_000_000;
const BIG_EDGES: u32 = 4_000_000;
const BIG_KEYS: u32 = 1 << 20;

/// Graphs of 10^6 nodes also build a scheduler whose queue holds 10^6 requests (sized at
/// build, SPEC F02): one such graph at a time, so that the suite's memory stays bounded.
static BIG: Mutex<()> = Mutex::new(());

fn ledger() -> Ledger {
    Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1).tenant_limits(Limits::UNLIMITED))
        .unwrap()
}

fn sized<E: GraphEngine>(nodes: u32, edges: u32, keys: u32) -> GraphOn<E> {
    Graph::builder(ledger())
        .class(4)
        .nodes(nodes)
        .edges(edges)
        .keys(keys)
        .build_with::<E>()
        .unwrap()
}

fn big<E: GraphEngine>() -> GraphOn<E> {
    sized::<E>(BIG_NODES, BIG_EDGES, BIG_KEYS)
}

/// `used <= backing <= total` for every store, and the index within its most.
#[track_caller]
fn check_bounds(o: &fairway::graph::Occupancy, what: &str) {
    assert!(
        o.nodes_used <= o.nodes_backing && o.nodes_backing <= o.nodes_total,
        "{what}: nodes {o:?}"
    );
    assert!(
        o.edges_used <= o.edges_backing && o.edges_backing <= o.edges_total,
        "{what}: edges {o:?}"
    );
    assert!(
        o.keys_used <= o.keys_backing && o.keys_backing <= o.keys_total,
        "{what}: keys {o:?}"
    );
    assert!(o.index_cells <= o.index_cells_max, "{what}: index {o:?}");
}

/// The backing of every store and of the index.
fn backing(o: &fairway::graph::Occupancy) -> [u32; 4] {
    [
        o.nodes_backing,
        o.edges_backing,
        o.keys_backing,
        o.index_cells,
    ]
}

/// Runs every ready job to success; returns how many ran.
fn run_all<E: GraphEngine>(g: &GraphOn<E>) -> usize {
    let mut ran = 0;
    while let Some(job) = g.try_next(CPU) {
        g.complete(job, JobOutcome::Succeeded).unwrap();
        ran += 1;
    }
    ran
}

/// SPEC D50, D51: a fresh graph of large maxima backs a small part of them and uses nothing;
/// once N jobs are in, `used == N <= backing <= total`.
fn d51_occupancy_reports_used_backing_and_maximum<E: Engine>() {
    let _big = BIG.lock().unwrap_or_else(|e| e.into_inner());
    let g = big::<E>();
    let fresh = g.occupancy();
    check_bounds(&fresh, "fresh");
    assert_eq!(
        (fresh.nodes_total, fresh.edges_total, fresh.keys_total),
        (BIG_NODES, BIG_EDGES, BIG_KEYS),
        "the maxima as configured"
    );
    assert_eq!(
        (fresh.nodes_used, fresh.edges_used, fresh.keys_used),
        (0, 0, 0)
    );
    assert!(
        fresh.nodes_backing * 16 < fresh.nodes_total,
        "nodes backed far below the maximum: {fresh:?}"
    );
    assert!(
        fresh.edges_backing * 16 < fresh.edges_total,
        "edges backed far below the maximum: {fresh:?}"
    );
    assert!(
        fresh.keys_backing * 16 < fresh.keys_total,
        "keys backed far below the maximum: {fresh:?}"
    );
    // 1,000 jobs, every other one on its predecessor: 1,000 nodes, 500 edges, 1,000 keys.
    const N: u32 = 1_000;
    let mut held = Vec::new();
    for k in 0..N {
        let deps = if k % 2 == 1 {
            vec![dep(u64::from(k - 1), Gate::OnSuccess)]
        } else {
            Vec::new()
        };
        held.push(admit(&g, u64::from(k), &deps));
        let o = g.occupancy();
        check_bounds(&o, "while submitting");
        assert_eq!(o.nodes_used, k + 1);
    }
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.keys_used),
        (N, N / 2, N),
        "{o:?}"
    );
    assert!(o.nodes_backing >= N && o.edges_backing >= N / 2 && o.keys_backing >= N);
    assert_eq!(run_all(&g), N as usize);
    drop(held);
    let o = g.occupancy();
    check_bounds(&o, "after the run");
    assert_eq!((o.nodes_used, o.edges_used), (0, 0));
}

/// The burst of [`d51_grows_to_a_burst_of_10e6_jobs_and_back_through_reset`]: 10^6 jobs, in
/// every build (in a debug build on two cores it takes about 10 s on the lock-free engine and
/// 16 s on the mutex twin).
const BURST: u32 = 1_000_000;

/// SPEC D51: a burst of [`BURST`] jobs (10^6), every fourth on its
/// predecessor, grows every store as it comes; occupancy stays within `used <= backing <=
/// total` at each step. Once every job ran and its handle went, nothing shrinks on its own;
/// `reset()` gives the stores back to what they backed right after build.
fn d51_grows_to_a_burst_of_10e6_jobs_and_back_through_reset<E: Engine>() {
    let _big = BIG.lock().unwrap_or_else(|e| e.into_inner());
    let g = big::<E>();
    let fresh = g.occupancy();
    check_bounds(&fresh, "fresh");
    let step = BURST / 10;
    let mut held = Vec::with_capacity(BURST as usize);
    let mut edges = 0;
    for k in 0..BURST {
        let on = [dep(u64::from(k.wrapping_sub(1)), Gate::OnSuccess)];
        let deps: &[_] = if k % 4 == 3 {
            edges += 1;
            &on
        } else {
            &[]
        };
        held.push(admit(&g, u64::from(k), deps));
        if (k + 1) % step == 0 {
            let o = g.occupancy();
            check_bounds(&o, "during the burst");
            assert_eq!(
                (o.nodes_used, o.edges_used, o.keys_used),
                (k + 1, edges, k + 1),
                "after {} jobs",
                k + 1
            );
        }
    }
    let peak = g.occupancy();
    assert!(
        backing(&peak)[..3]
            .iter()
            .zip(&backing(&fresh)[..3])
            .all(|(p, f)| p > f),
        "every store grew: fresh {fresh:?}, peak {peak:?}"
    );
    assert_eq!(run_all(&g), BURST as usize);
    for h in &held {
        assert_eq!(h.outcome(), Some(JobOutcome::Succeeded));
    }
    drop(held);
    let done = g.occupancy();
    check_bounds(&done, "after the run");
    assert_eq!(
        (done.nodes_used, done.edges_used, done.keys_used),
        (0, 0, BURST)
    );
    assert_eq!(
        backing(&done),
        backing(&peak),
        "nothing shrinks on its own (only reset and shrink_to_fit do)"
    );
    g.reset();
    let after = g.occupancy();
    check_bounds(&after, "after reset");
    assert_eq!(
        (after.nodes_used, after.edges_used, after.keys_used),
        (0, 0, 0)
    );
    assert_eq!(
        backing(&after),
        backing(&fresh),
        "reset gives the stores back to their size at build: fresh {fresh:?}, after {after:?}"
    );
    eprintln!(
        "{}: backing (nodes, edges, keys, index cells) fresh {:?}, at the peak {:?}, after the \
         run {:?}, after reset {:?}",
        std::any::type_name::<E>(),
        backing(&fresh),
        backing(&peak),
        backing(&done),
        backing(&after)
    );
    // The graph serves again after the shrink.
    let h = admit(&g, 0, &[]);
    assert_eq!(run_all(&g), 1);
    assert_eq!(h.outcome(), Some(JobOutcome::Succeeded));
}

/// What a refusal must leave as it was (SPEC D02): everything but the backing, which a
/// refused submission may have grown on its way to the store that refused it (memory held
/// for the next submission, never past a maximum).
fn used(o: Occupancy) -> Occupancy {
    Occupancy {
        nodes_backing: 0,
        edges_backing: 0,
        keys_backing: 0,
        index_cells: 0,
        index_cells_max: 0,
        ..o
    }
}

/// SPEC D05, D51: at each store's maximum (past its first segment) the next submission that
/// needs room there is refused `Backpressured` with nothing changed, and the store is then
/// backed whole.
fn d51_backpressured_unchanged_at_the_maxima<E: Engine>() {
    let (nodes, edges, keys) = (100, 300, 128);
    // Nodes: 100 jobs.
    let g = sized::<E>(nodes, edges, keys);
    let held: Vec<_> = (0..100).map(|k| admit(&g, k, &[])).collect();
    let full = g.occupancy();
    assert_eq!(
        (full.nodes_used, full.nodes_backing, full.nodes_total),
        (100, 100, 100)
    );
    assert_eq!(g.submit(&spec(100, &[])).unwrap(), Admission::Backpressured);
    assert_eq!(used(g.occupancy()), used(full), "a refusal changes nothing");
    assert_eq!(run_all(&g), 100);
    drop(held);
    // Room again once the jobs are collected.
    let h = admit(&g, 100, &[]);
    assert_eq!(run_all(&g), 1);
    drop(h);

    // Edges: 75 jobs of 4 dependencies each on keys without a producer.
    let g = sized::<E>(nodes, edges, keys);
    let on: Vec<_> = (1_000..1_004).map(|k| dep(k, Gate::Sequential)).collect();
    let held: Vec<_> = (0..75).map(|k| admit(&g, k, &on)).collect();
    let full = g.occupancy();
    assert_eq!(
        (full.edges_used, full.edges_backing, full.edges_total),
        (300, 300, 300)
    );
    assert_eq!(
        g.submit(&spec(75, &on[..1])).unwrap(),
        Admission::Backpressured
    );
    assert_eq!(used(g.occupancy()), used(full), "a refusal changes nothing");
    // A job needing no edge still has room.
    let free = admit(&g, 76, &[]);
    assert_eq!(g.occupancy().nodes_used, 76);
    drop((held, free));

    // Keys: 64 jobs, each on a key of its own without a producer: 128 keys.
    let g = sized::<E>(nodes, edges, keys);
    let held: Vec<_> = (0..64)
        .map(|k| admit(&g, k, &[dep(10_000 + k, Gate::Sequential)]))
        .collect();
    let full = g.occupancy();
    assert_eq!(
        (full.keys_used, full.keys_backing, full.keys_total),
        (128, 128, 128)
    );
    assert_eq!(g.submit(&spec(64, &[])).unwrap(), Admission::Backpressured);
    assert_eq!(used(g.occupancy()), used(full), "a refusal changes nothing");
    // A job of a key named already still has room (a dependency's key gets its producer).
    let producer = admit(&g, 10_000, &[]);
    assert_eq!(g.occupancy().keys_used, 128);
    drop((held, producer));
}

/// Submits `n` jobs of keys `base..base + n`, runs them to success, reads and drops their
/// handles (every slot is freed); returns their ids.
fn burst_and_free<E: GraphEngine>(g: &GraphOn<E>, base: u64, n: u64) -> Vec<JobId> {
    let held: Vec<JobHandle<E>> = (base..base + n).map(|k| admit(g, k, &[])).collect();
    assert_eq!(run_all(g), n as usize);
    let ids = held.iter().map(JobHandle::id).collect();
    for h in &held {
        assert_eq!(g.outcome(h).unwrap(), Some(JobOutcome::Succeeded));
    }
    drop(held);
    assert_eq!(g.occupancy().nodes_used, 0);
    ids
}

/// Whether `r` is what a collected job's id reads: `not-found / stale-handle`.
fn gone(r: Result<Option<JobOutcome>, fairway::Error>) -> bool {
    matches!(r, Err(e) if e.code() == Code::NotFound && e.reason() == Reason::StaleHandle)
}

/// SPEC D51 (with D02): the id of a job freed before a shrink, whose slot's segment the shrink
/// gave back, reads `not-found / stale-handle`, as any collected job's id does.
fn d51_a_stale_handle_after_a_shrink_reads_gone<E: Engine>() {
    let g = sized::<E>(10_000, 10_000, 16_384);
    let fresh = g.occupancy();
    let ids = burst_and_free(&g, 0, 2_000);
    // Collected: gone before the shrink too.
    assert!(ids.iter().all(|&id| gone(g.outcome(id))));
    let before = g.occupancy();
    assert!(before.nodes_backing >= 2_000);
    g.shrink_to_fit();
    let after = g.occupancy();
    check_bounds(&after, "after the shrink");
    assert_eq!(
        after.nodes_backing, fresh.nodes_backing,
        "the shrink gave the burst's segments back: before {before:?}, after {after:?}"
    );
    assert!(after.nodes_backing < 2_000);
    // The last job's slot, and every other one, whether its segment is still backed or not.
    for (i, &id) in ids.iter().enumerate().rev() {
        assert!(gone(g.outcome(id)), "job {i}: {:?}", g.outcome(id));
    }
}

/// SPEC D51: slots backed again after a shrink start at a generation no stale id holds, so an
/// old id never reads a new job (pending or ended), over several bursts and shrinks.
fn d51_regrown_slots_never_alias_a_stale_handle<E: Engine>() {
    let g = sized::<E>(10_000, 10_000, 16_384);
    let mut old = Vec::new();
    for round in 0..4u64 {
        old.extend(burst_and_free(&g, round * 10_000, 1_000));
        g.shrink_to_fit();
        // Regrown: new jobs, pending.
        let held: Vec<_> = (0..1_000)
            .map(|k| admit(&g, round * 10_000 + 5_000 + k, &[]))
            .collect();
        assert_eq!(g.occupancy().nodes_used, 1_000);
        for h in &held {
            assert!(!old.contains(&h.id()), "round {round}: an id was reused");
        }
        for &id in &old {
            assert!(gone(g.outcome(id)), "round {round}: {:?}", g.outcome(id));
        }
        // Ended, failed: an old id still reads neither their outcome nor anything else.
        while let Some(job) = g.try_next(CPU) {
            let failed = fairway::Error::new(Code::Internal, Reason::Failed);
            g.complete(job, JobOutcome::Failed(failed)).unwrap();
        }
        for &id in &old {
            assert!(gone(g.outcome(id)), "round {round}: {:?}", g.outcome(id));
        }
        old.extend(held.iter().map(JobHandle::id));
        drop(held);
        g.shrink_to_fit();
    }
}

/// SPEC D51: warmed to its working size by one round, the graph allocates nothing over many
/// rounds of the same size (submit, run, complete, drop the handles, remove the keys, which
/// the next round names again): growth happens only at a new high-water mark. On the mutex
/// twin, which allocates its work lists, no byte more stays live and nothing more is backed.
fn d51_warmed_steady_state_allocates_nothing<E: Engine>() {
    let g = sized::<E>(1_000, 4_000, 4_096);
    // The handles' vector is the test's, not the graph's: reserved once, outside the count.
    let mut held: Vec<JobHandle<E>> = Vec::with_capacity(300);
    // 300 jobs (past a first segment), every third on its predecessor.
    let mut round = || {
        for k in 0..300u64 {
            let on = [dep(k.wrapping_sub(1), Gate::OnSuccess)];
            let deps: &[_] = if k % 3 == 2 { &on } else { &[] };
            match g.submit(&spec(k, deps)).unwrap() {
                Admission::Admitted(h) => held.push(h),
                other => panic!("job {k}: {other:?}"),
            }
        }
        while let Some(job) = g.try_next(CPU) {
            g.complete(job, JobOutcome::Succeeded).unwrap();
        }
        for h in &held {
            assert_eq!(h.outcome(), Some(JobOutcome::Succeeded));
        }
        held.clear();
        for k in 0..300u64 {
            g.remove(fairway::graph::JobKey::new(k)).unwrap();
        }
    };
    round();
    let warm = g.occupancy();
    let ((), allocs, live) = measured(|| {
        for _ in 0..50 {
            round();
        }
    });
    let o = g.occupancy();
    eprintln!(
        "{}: 50 warmed rounds of 300 jobs: {allocs} allocations, {live} bytes left live",
        std::any::type_name::<E>()
    );
    assert_eq!(
        (o.nodes_used, o.edges_used, o.keys_used),
        (0, 0, 0),
        "{o:?}"
    );
    assert_eq!(backing(&o), backing(&warm), "a steady state grows nothing");
    // At most zero: memory retired during the warm-up (an index array the key table grew
    // out of) may come back from the epoch collector while the rounds run.
    assert!(
        live <= 0,
        "a steady state leaves nothing more live: {live} bytes"
    );
    if E::ALLOCATION_FREE {
        assert_eq!(allocs, 0, "allocations in a warmed steady state");
    }
}

/// SPEC D51: the bytes a graph of maxima 10^6 nodes, 4 * 10^6 edges and 2^20 keys holds right
/// after build, less those of a scheduler built alone with the same class and a queue of 10^6
/// (which its own rule F02 sizes at build): the graph's own part. Everything the graph holds
/// beyond its scheduler counts (its stores, its key index, and any table sized by the node
/// maximum). It must stay within 1 MB.
fn d51_build_bytes_at_10e6_nodes<E: Engine>() {
    let _big = BIG.lock().unwrap_or_else(|e| e.into_inner());
    let (ledger_a, ledger_b) = (ledger(), ledger());
    let (sched, _, sched_bytes) = measured(|| {
        Scheduler::builder(ledger_a)
            .payload::<Task>()
            .classes([ClassConfig::new(4, BIG_NODES)])
            .build()
            .unwrap()
    });
    drop(sched);
    let (g, _, graph_bytes) = measured(|| {
        Graph::builder(ledger_b)
            .class(4)
            .nodes(BIG_NODES)
            .edges(BIG_EDGES)
            .keys(BIG_KEYS)
            .build_with::<E>()
            .unwrap()
    });
    let own = graph_bytes - sched_bytes;
    eprintln!(
        "{}: graph built {graph_bytes} bytes live, its scheduler alone {sched_bytes}: the \
         graph's own part {own} bytes",
        std::any::type_name::<E>()
    );
    let o = g.occupancy();
    check_bounds(&o, "fresh");
    assert!(
        own <= 1 << 20,
        "the graph's own part at build: {own} bytes (over 1 MB); {o:?}"
    );
}
