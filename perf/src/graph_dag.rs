//! The `graph` suite's whole-graph and key workloads (beside P8 and P9 in `graph.rs`): a whole
//! random DAG run through the scheduler, `advance` sweeping a key's live work, and `remove`
//! failing a key's waiters, key churn through the key table and the removal that compacts it,
//! each on both graph engines; the DAG beside a plain single-threaded topological walk (the
//! floor).

use fairway::oracle::GraphOn;
use std::time::{Duration, Instant};

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome, JobSpec,
};
use fairway::{ClassId, TenantId};
use fairway_bench_support::alloc::thread_allocs;
use fairway_bench_support::latency::Latency;
use fairway_bench_support::Measured;

const CPU: ClassId = ClassId(0);

/// Jobs in the whole-DAG workload.
pub const DAG_JOBS: usize = 100_000;
/// Jobs per layer: 100 layers.
const LAYER: usize = 1000;
/// Dependencies of every job outside the first layer (mean out-degree ≈ 4).
const DEGREE: usize = 4;

/// A random layered DAG: `deps[j]` are indices of earlier jobs (the previous layer), distinct.
pub struct Dag {
    deps: Vec<[u32; DEGREE]>,
    /// Jobs of the first layer have none.
    has_deps: Vec<bool>,
}

impl Dag {
    /// The fixed-seed DAG of the suite.
    pub fn new() -> Self {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut deps = Vec::with_capacity(DAG_JOBS);
        let mut has_deps = Vec::with_capacity(DAG_JOBS);
        for j in 0..DAG_JOBS {
            let layer = j / LAYER;
            if layer == 0 {
                deps.push([0; DEGREE]);
                has_deps.push(false);
                continue;
            }
            let base = (layer - 1) * LAYER;
            let mut d = [u32::MAX; DEGREE];
            let mut n = 0;
            while n < DEGREE {
                let c = (base + next() as usize % LAYER) as u32;
                if !d[..n].contains(&c) {
                    d[n] = c;
                    n += 1;
                }
            }
            deps.push(d);
            has_deps.push(true);
        }
        Self { deps, has_deps }
    }

    /// Jobs plus edges: the work one run does.
    pub fn size(&self) -> usize {
        DAG_JOBS + self.edges()
    }

    fn edges(&self) -> usize {
        self.has_deps.iter().filter(|&&h| h).count() * DEGREE
    }

    fn deps_of(&self, j: usize) -> &[u32] {
        if self.has_deps[j] {
            &self.deps[j]
        } else {
            &[]
        }
    }
}

impl Default for Dag {
    fn default() -> Self {
        Self::new()
    }
}

/// Repeats `once` (which returns the seconds of its timed part and the heap allocations made
/// in it, on every thread taking part) until `d` has passed, at least once; jobs plus edges per
/// second over the timed parts, allocations per job-or-edge.
fn repeat(size: usize, d: Duration, mut once: impl FnMut() -> (f64, u64)) -> Measured {
    let start = Instant::now();
    let (mut secs, mut allocs, mut runs) = (0.0, 0u64, 0u64);
    while runs == 0 || start.elapsed() < d {
        let (s, a) = once();
        secs += s;
        allocs += a;
        runs += 1;
    }
    let ops = (size as u64 * runs) as f64;
    Measured {
        ops_per_sec: ops / secs,
        latency: Latency::new(),
        allocs_per_op: allocs as f64 / ops,
        score: None,
    }
}

/// The floor: Kahn's topological walk of the DAG on one thread (in-degree counters and a
/// dependents list built outside the timed region).
pub fn topo_walk(dag: &Dag, d: Duration) -> Measured {
    // Dependents in CSR form.
    let mut count = vec![0u32; DAG_JOBS + 1];
    for j in 0..DAG_JOBS {
        for &p in dag.deps_of(j) {
            count[p as usize + 1] += 1;
        }
    }
    for i in 0..DAG_JOBS {
        count[i + 1] += count[i];
    }
    let mut fill = count.clone();
    let mut out = vec![0u32; dag.edges()];
    for j in 0..DAG_JOBS {
        for &p in dag.deps_of(j) {
            out[fill[p as usize] as usize] = j as u32;
            fill[p as usize] += 1;
        }
    }
    let indeg: Vec<u32> = (0..DAG_JOBS).map(|j| dag.deps_of(j).len() as u32).collect();
    repeat(dag.size(), d, || {
        let mut left = indeg.clone();
        let mut queue: Vec<u32> = Vec::with_capacity(DAG_JOBS);
        let (t, before) = (Instant::now(), thread_allocs());
        queue.extend((0..DAG_JOBS as u32).filter(|&j| left[j as usize] == 0));
        let mut head = 0;
        while head < queue.len() {
            let j = queue[head] as usize;
            head += 1;
            for &c in &out[count[j] as usize..count[j + 1] as usize] {
                left[c as usize] -= 1;
                if left[c as usize] == 0 {
                    queue.push(c);
                }
            }
        }
        let r = (t.elapsed().as_secs_f64(), thread_allocs() - before);
        assert_eq!(queue.len(), DAG_JOBS);
        r
    })
}

fn graph<E: GraphEngine>(nodes: u32, edges: u32, keys: u32, cells: u32) -> GraphOn<E> {
    graph_with::<E>(nodes, edges, keys, cells, (0, 0, 0))
}

/// [`graph`] with `reserve` (nodes, edges, keys) backed at build (SPEC D51).
fn graph_with<E: GraphEngine>(
    nodes: u32,
    edges: u32,
    keys: u32,
    cells: u32,
    reserve: (u32, u32, u32),
) -> GraphOn<E> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    Graph::builder(ledger)
        .class(cells)
        .nodes(nodes)
        .edges(edges)
        .keys(keys)
        .reserve(reserve.0, reserve.1, reserve.2)
        .max_deps(DEGREE as u32)
        .build_with::<E>()
        .unwrap()
}

fn spec(key: u64, deps: &[Dependency]) -> JobSpec<'_> {
    JobSpec {
        key: JobKey::new(key),
        tenant: TenantId((key % 4) as u32),
        class: CPU,
        priority: 0,
        deadline: None,
        deps,
    }
}

fn admit<E: GraphEngine>(g: &GraphOn<E>, key: u64, deps: &[Dependency]) -> JobHandle<E> {
    match g.submit(&spec(key, deps)) {
        Ok(Admission::Admitted(h)) => h,
        other => panic!("not admitted: {other:?}"),
    }
}

/// The whole DAG through the graph: one thread submits every job (topological order) while
/// `threads` executors pull and complete them; timed from the first submit to the last
/// completion. Building the graph and collecting the outcomes are outside.
pub fn whole_dag<E: GraphEngine>(dag: &Dag, threads: usize, d: Duration) -> Measured {
    use std::sync::atomic::{AtomicUsize, Ordering};
    repeat(dag.size(), d, || {
        let (nodes, edges) = (DAG_JOBS as u32, (dag.edges() + 1024) as u32);
        // Reserved (SPEC D51): a host that runs DAGs of this size keeps its stores backed, and
        // the row times the run, not the stores' first growth (the growth row does).
        let g = graph_with::<E>(nodes, edges, 1 << 18, threads as u32, (nodes, edges, nodes));
        let done = AtomicUsize::new(0);
        let allocs = std::sync::atomic::AtomicU64::new(0);
        let (secs, handles) = std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    // A thread's first graph call registers it with the epoch collector
                    // (SPEC D51): one allocation in the thread's life, not per job; these
                    // executor threads live for one run.
                    let _ = g.occupancy();
                    let before = thread_allocs();
                    while done.load(Ordering::Relaxed) < DAG_JOBS {
                        match g.try_next(CPU) {
                            Some(job) => {
                                g.complete(job, JobOutcome::Succeeded).unwrap();
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                    allocs.fetch_add(thread_allocs() - before, Ordering::Relaxed);
                });
            }
            let mut handles = Vec::with_capacity(DAG_JOBS);
            let mut deps = Vec::with_capacity(DEGREE);
            let (t, before) = (Instant::now(), thread_allocs());
            for j in 0..DAG_JOBS {
                deps.clear();
                deps.extend(dag.deps_of(j).iter().map(|&p| Dependency {
                    key: JobKey::new(u64::from(p)),
                    gate: Gate::OnSuccess,
                    pin: None,
                }));
                handles.push(admit(&g, j as u64, &deps));
            }
            while done.load(Ordering::Relaxed) < DAG_JOBS {
                std::thread::yield_now();
            }
            allocs.fetch_add(thread_allocs() - before, Ordering::Relaxed);
            (t.elapsed().as_secs_f64(), handles)
        });
        // Each outcome is read, then its handle dropped (which frees the job).
        for h in handles {
            assert!(g.outcome(&h).unwrap().unwrap().is_success());
        }
        (secs, allocs.into_inner())
    })
}

/// Keys advanced (or removed) per timed batch, by jobs each key has.
fn batch(jobs: usize) -> usize {
    (4096 / jobs.max(1)).clamp(8, 256)
}

/// A batch of keys is set up (untimed), then advanced back to back (timed as one interval, so
/// the clock's cost is not in the figure).
///
/// `advance` of a key whose live job has `jobs - 1` waiting dependents (`jobs` jobs end in the
/// sweep: the superseded producer, its dependents `dependency-failed`); `jobs == 0`: the key's
/// job has finished, the advance only bumps the generation. One op is one `advance`.
pub fn advance<E: GraphEngine>(jobs: usize, d: Duration) -> Measured {
    let b = batch(jobs);
    let per = jobs.max(1);
    let (start, mut secs, mut ops, mut allocs) = (Instant::now(), 0.0, 0u64, 0u64);
    while ops == 0 || start.elapsed() < d {
        let g = graph::<E>((b * per + 8) as u32, (b * per + 8) as u32, 1 << 16, 4);
        let missing = 1 << 40;
        // Every job's handle is held across the timed advances (the jobs stay wanted and, the
        // finished ones, unfreed) and dropped after them, untimed.
        let mut held = Vec::with_capacity(b * per);
        for k in 0..b {
            let p = (k * per) as u64;
            if jobs == 0 {
                held.push(admit(&g, p, &[]));
                let job = g.try_next(CPU).unwrap();
                g.complete(job, JobOutcome::Succeeded).unwrap();
            } else {
                // Waiting on a key without a producer, so nothing runs. Its dependents name
                // its version, so the advance that supersedes it ends them too (an unpinned
                // dependent would wait for the key's next job instead).
                held.push(admit(&g, p, &[dep(missing)]));
                let pinned = Dependency {
                    pin: g.version(JobKey::new(p)),
                    ..dep(p)
                };
                for i in 1..per as u64 {
                    held.push(admit(&g, p + i, &[pinned]));
                }
            }
        }
        let (t, before) = (Instant::now(), thread_allocs());
        for k in 0..b {
            g.advance(JobKey::new((k * per) as u64)).unwrap();
        }
        secs += t.elapsed().as_secs_f64();
        allocs += thread_allocs() - before;
        ops += b as u64;
        assert_eq!(g.occupancy().waiting, 0);
        drop(held);
    }
    Measured {
        ops_per_sec: ops as f64 / secs,
        latency: Latency::new(),
        allocs_per_op: allocs as f64 / ops as f64,
        score: None,
    }
}

/// `remove` of a key without a producer that `waiters` jobs wait on (each fails `unavailable
/// / removed`). One op is one `remove`.
pub fn remove<E: GraphEngine>(waiters: usize, d: Duration) -> Measured {
    let b = batch(waiters);
    let (start, mut secs, mut ops, mut allocs) = (Instant::now(), 0.0, 0u64, 0u64);
    while ops == 0 || start.elapsed() < d {
        let n = (b * (waiters + 1) + 8) as u32;
        let g = graph::<E>(n, n, 1 << 16, 4);
        // The waiters' handles are held across the timed removals, dropped after them.
        let mut held = Vec::with_capacity(b * waiters);
        for k in 0..b {
            let key = (k * (waiters + 1)) as u64;
            for i in 1..=waiters as u64 {
                held.push(admit(&g, key + i, &[dep(key)]));
            }
        }
        let (t, before) = (Instant::now(), thread_allocs());
        for k in 0..b {
            g.remove(JobKey::new((k * (waiters + 1)) as u64)).unwrap();
        }
        secs += t.elapsed().as_secs_f64();
        allocs += thread_allocs() - before;
        ops += b as u64;
        assert_eq!(g.occupancy().waiting, 0);
        assert_eq!(g.occupancy().edges_used, 0);
        drop(held);
    }
    Measured {
        ops_per_sec: ops as f64 / secs,
        latency: Latency::new(),
        allocs_per_op: allocs as f64 / ops as f64,
        score: None,
    }
}

fn dep(key: u64) -> Dependency {
    Dependency {
        key: JobKey::new(key),
        gate: Gate::OnSuccess,
        pin: None,
    }
}

/// Key slots of the key-churn workload's table.
const CHURN_TABLE: u32 = 1024;

/// Key churn, as a build system makes it: one op submits a job on a new key, runs it, collects
/// its outcome and removes the key. 256 ops back to back are one timed interval. The table
/// holds 1024 keys, so every 1024 ops have recycled it whole, and the lock-free graph's index
/// (2048 cells) compacts every 512 removals, inside the timed region.
pub fn key_churn<E: GraphEngine>(d: Duration) -> Measured {
    const BATCH: u64 = 256;
    let g = graph::<E>(64, 64, CHURN_TABLE, 4);
    let (start, mut secs, mut ops, mut allocs) = (Instant::now(), 0.0, 0u64, 0u64);
    let mut key = 0u64;
    while ops == 0 || start.elapsed() < d {
        let (t, before) = (Instant::now(), thread_allocs());
        for _ in 0..BATCH {
            key += 1;
            let h = match g.submit(&spec(key, &[])) {
                Ok(Admission::Admitted(h)) => h,
                other => panic!("key {key} not admitted: {other:?}"),
            };
            let job = g.try_next(CPU).expect("the job is ready");
            g.complete(job, JobOutcome::Succeeded).unwrap();
            // The outcome is read and the handle dropped: that frees the node.
            g.outcome(&h).unwrap();
            drop(h);
            g.remove(JobKey::new(key)).unwrap();
        }
        secs += t.elapsed().as_secs_f64();
        allocs += thread_allocs() - before;
        ops += BATCH;
    }
    assert_eq!(g.occupancy().keys_used, 0);
    Measured {
        ops_per_sec: ops as f64 / secs,
        latency: Latency::new(),
        allocs_per_op: allocs as f64 / ops as f64,
        score: None,
    }
}

/// Key slots of the compaction workload: an index of 2^17 cells.
pub const COMPACT_TABLE: u32 = 1 << 16;

/// The removal that compacts the key table's index: a graph whose 2^16 key slots are filled
/// (each key's job finished and collected, untimed) has its keys removed one by one; the one
/// `remove` during which the index compacts (the 32768th on the lock-free graph: a quarter of
/// its 2^17 cells are tombstones; about 32768 live entries are rewritten) is timed alone. On
/// the mutex graph, which has no index to compact, the same removal is timed. One op is that
/// one `remove`. `compacts`: the engine compacts (checked).
pub fn key_compaction<E: GraphEngine>(compacts: bool, d: Duration) -> Measured {
    let (start, mut secs, mut ops, mut allocs) = (Instant::now(), 0.0, 0u64, 0u64);
    let mut lat = Latency::new();
    while ops == 0 || start.elapsed() < d {
        let g = graph::<E>(64, 64, COMPACT_TABLE, 4);
        let n = u64::from(COMPACT_TABLE);
        for key in 0..n {
            let h = admit(&g, key, &[]);
            let job = g.try_next(CPU).expect("the job is ready");
            g.complete(job, JobOutcome::Succeeded).unwrap();
            g.outcome(&h).unwrap();
            drop(h);
        }
        let at = u64::from(COMPACT_TABLE) * 2 / 4;
        for key in 0..at - 1 {
            g.remove(JobKey::new(key)).unwrap();
        }
        let compactions = g.key_compactions();
        let (t, before) = (Instant::now(), thread_allocs());
        g.remove(JobKey::new(at - 1)).unwrap();
        let took = t.elapsed();
        allocs += thread_allocs() - before;
        secs += took.as_secs_f64();
        lat.record(took.as_nanos() as u64);
        ops += 1;
        assert_eq!(
            g.key_compactions(),
            compactions + u64::from(compacts),
            "the timed removal compacts"
        );
    }
    Measured {
        ops_per_sec: ops as f64 / secs,
        latency: lat,
        allocs_per_op: allocs as f64 / ops as f64,
        score: None,
    }
}

/// Jobs of one burst of the growth workload.
pub const GROWTH_JOBS: u64 = 1_000_000;

/// The cost of growing the stores (SPEC D51): one burst of [`GROWTH_JOBS`] submits, each job
/// depending on the one before (the first on a key without producer, so every job waits and
/// none reaches the scheduler), into a graph whose stores hold only their first segments
/// (`warm` false), or into the same graph after an equal burst was cancelled and its keys
/// removed, its stores grown to the high-water mark (`warm`). Timed: the submits; the set-up,
/// the cancellation (the handles dropped, last job first) and the removals are outside.
pub fn growth<E: GraphEngine>(warm: bool, d: Duration) -> Measured {
    let n = GROWTH_JOBS;
    // Keys: one burst's and its gate, twice over for the warmed graph's removed ones.
    let g = || graph::<E>(n as u32 + 64, n as u32 + 64, 1 << 21, 4);
    let burst = |g: &GraphOn<E>, base: u64| -> (f64, u64, Vec<JobHandle<E>>) {
        let mut held = Vec::with_capacity(n as usize);
        let (t, before) = (Instant::now(), thread_allocs());
        for i in 0..n {
            held.push(admit(g, base + i + 1, &[dep(base + i)]));
        }
        (t.elapsed().as_secs_f64(), thread_allocs() - before, held)
    };
    let cancel = |g: &GraphOn<E>, mut held: Vec<JobHandle<E>>| {
        while let Some(h) = held.pop() {
            drop(h);
        }
        assert_eq!(g.occupancy().nodes_used, 0, "every job cancelled and freed");
    };
    repeat(n as usize, d, || {
        let g = g();
        let base = if warm {
            let (_, _, held) = burst(&g, 0);
            cancel(&g, held);
            for k in 0..=n {
                g.remove(JobKey::new(k)).unwrap();
            }
            n + 1
        } else {
            0
        };
        let backing = g.occupancy().nodes_backing;
        let (secs, allocs, held) = burst(&g, base);
        // Only the empty graph's burst grows its stores (and allocates).
        if warm {
            assert_eq!(
                g.occupancy().nodes_backing,
                backing,
                "the warmed stores did not grow"
            );
        }
        cancel(&g, held);
        (secs, allocs)
    })
}
