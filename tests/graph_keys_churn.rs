//! Churn with key operations under load, on both graph engines (SPEC D20–D24): submitters
//! race executors while another thread advances and removes keys at random. Duplicate keys
//! are refused, completions of superseded or removed work are refused as stale. At the end
//! (`reset`, then the executors drain) every admitted job has exactly one outcome, every node
//! and edge slot is free, occupancy is zero, the ledger holds nothing and the graph's stale
//! count equals the completions the executors saw refused.
//!
//! The key-churn variants name a new key for every job, as a build system does, in a key table
//! of 64 slots, and retire each key eight jobs later: some 190 times the table's size in keys
//! pass through it, and none may be refused for a full table once old keys are removed. After
//! the reset every key slot is free (D24).
//!
//! Demand departs too (SPEC D31): a submitter drops one job's handle in twelve right after its
//! submission (withdrawn unless a dependent still waits on it, or it ended already) and detaches
//! one in twelve; their completions may be refused `cancelled / withdrawn` (not a stale
//! completion). At quiescence every job kept has one outcome, every job is either kept, detached
//! or withdrawn, and once the kept handles are dropped nothing is left.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome, JobSpec,
};
use fairway::oracle::GraphOn;
use fairway::{ClassId, Code, Error, Reason, TenantId};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

const KEYS: u64 = 256;

#[path = "common/bound.rs"]
mod bound;
use bound::join_within;

/// How long a thread of the churn may run.
const LIMIT: std::time::Duration = bound::TEST_LIMIT;
const CPU: ClassId = ClassId(0);

/// Keys of the key-churn variant's table.
const CHURN_TABLE: u32 = 64;

fn churn<E: GraphEngine>(end_with_shutdown: bool, key_churn: bool) {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    let g: GraphOn<E> = Graph::builder(ledger)
        .class(4)
        .nodes(4096)
        .edges(16384)
        .keys(if key_churn { CHURN_TABLE } else { 1024 })
        .max_deps(4)
        .build_with()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let refused_stale = Arc::new(AtomicU64::new(0));
    // Completions refused because the job's demand departed (SPEC D31).
    let refused_withdrawn = Arc::new(AtomicU64::new(0));
    let handles = Arc::new(Mutex::new(Vec::<JobHandle<E>>::new()));
    // Outcomes collected while the churn runs (freeing node slots for more jobs).
    let collected = Arc::new(Mutex::new(Vec::<JobOutcome>::new()));
    let joins = Arc::new(Mutex::new(Vec::<JobHandle<E>>::new()));
    // Jobs whose handle was dropped right away, and detached ones.
    let (dropped, detached) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (advances, removes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    // Submissions refused for a full table (key churn: there must be none).
    let full = Arc::new(AtomicU64::new(0));

    let executors: Vec<_> = (0..2)
        .map(|_| {
            let (g, stop, refused) = (g.clone(), stop.clone(), refused_stale.clone());
            let withdrawn = refused_withdrawn.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                loop {
                    match g.try_next(CPU) {
                        Some(job) => {
                            n += 1;
                            let outcome = if mix(n).is_multiple_of(9) {
                                JobOutcome::Failed(Error::new(Code::Internal, Reason::Failed))
                            } else {
                                JobOutcome::Succeeded
                            };
                            match g.complete(job, outcome) {
                                Ok(()) => {}
                                Err(e) if e.reason() == Reason::Withdrawn => {
                                    withdrawn.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) => {
                                    assert!(
                                        matches!(e.reason(), Reason::Superseded | Reason::Removed),
                                        "{e}"
                                    );
                                    refused.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        None if stop.load(Ordering::Acquire) => {
                            let o = g.occupancy();
                            if o.ready == 0 && o.running == 0 && o.waiting == 0 {
                                return;
                            }
                            std::thread::yield_now();
                        }
                        None => std::thread::yield_now(),
                    }
                }
            })
        })
        .collect();
    let submitters: Vec<_> = (0..2u64)
        .map(|t| {
            let (g, handles, advances) = (g.clone(), handles.clone(), advances.clone());
            let (collected, removes, full) = (collected.clone(), removes.clone(), full.clone());
            let joins = joins.clone();
            let (dropped, detached) = (dropped.clone(), detached.clone());
            std::thread::spawn(move || {
                let mut mine: Vec<JobHandle<E>> = Vec::new();
                let mut taken = Vec::new();
                let limit = std::time::Instant::now() + std::time::Duration::from_secs(120);
                for i in 0..6000u64 {
                    if i % 256 == 255 {
                        // Collect what ended: read the outcome, drop the handle (frees it).
                        mine.retain(|h| match g.outcome(h).unwrap() {
                            Some(o) => {
                                taken.push(o);
                                false
                            }
                            None => true,
                        });
                    }
                    let x = mix(t << 32 | i);
                    // Key churn: a new key per job, depending on the thread's last few.
                    let key = if key_churn { t << 32 | i } else { x % KEYS };
                    let dep_key = |j: u64| {
                        if key_churn {
                            t << 32 | i.saturating_sub(1 + (mix(x ^ j) % 4))
                        } else {
                            mix(x ^ j) % KEYS
                        }
                    };
                    if key_churn && i >= 8 && g.remove(JobKey::new(t << 32 | (i - 8))).is_ok() {
                        removes.fetch_add(1, Ordering::Relaxed);
                    }
                    let deps: Vec<Dependency> = (0..x >> 8 & 3)
                        .map(|j| Dependency {
                            key: JobKey::new(dep_key(j)),
                            gate: match (x >> (12 + j)) % 3 {
                                0 => Gate::Sequential,
                                1 => Gate::OnSuccess,
                                _ => Gate::OnAdmission,
                            },
                            pin: None,
                        })
                        .filter(|d| d.key != JobKey::new(key))
                        .collect();
                    let spec = JobSpec {
                        key: JobKey::new(key),
                        tenant: TenantId((x % 4) as u32),
                        class: CPU,
                        priority: 0,
                        deadline: None,
                        deps: &deps,
                    };
                    for _attempt in 0..2 {
                        assert!(
                            std::time::Instant::now() < limit,
                            "a submitter stuck at job {i}: {:?}",
                            g.occupancy()
                        );
                        match g.submit(&spec) {
                            // Demand departs at once: dropped (withdrawn unless something
                            // still waits on it) or detached (runs on with no handle).
                            Ok(Admission::Admitted(h)) if mix(x ^ 0xd31).is_multiple_of(12) => {
                                dropped.fetch_add(1, Ordering::Relaxed);
                                drop(h);
                                break;
                            }
                            Ok(Admission::Admitted(h)) if mix(x ^ 0xd31) % 12 == 1 => {
                                detached.fetch_add(1, Ordering::Relaxed);
                                h.detach();
                                break;
                            }
                            Ok(Admission::Admitted(h)) => {
                                mine.push(h);
                                break;
                            }
                            Ok(Admission::Backpressured) => {
                                if g.occupancy().keys_used == g.occupancy().keys_total {
                                    full.fetch_add(1, Ordering::Relaxed);
                                }
                                std::thread::yield_now()
                            }
                            // The key has a live job (SPEC D02): keep the joiner's claim
                            // (collected at quiescence), then as below.
                            Ok(Admission::DedupeJoined(h)) => {
                                joins.lock().unwrap().push(h);
                                if g.advance(spec.key).is_ok() {
                                    advances.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            // The key has a job: its input "changed", supersede and retry.
                            Err(e) if e.reason() == Reason::DuplicateKey => {
                                if g.advance(spec.key).is_ok() {
                                    advances.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            Err(e) => {
                                assert_eq!(e.reason(), Reason::Cycle, "{e}");
                                break;
                            }
                        }
                    }
                }
                handles.lock().unwrap().extend(mine);
                collected.lock().unwrap().extend(taken);
            })
        })
        .collect();
    let churner = {
        let (g, stop) = (g.clone(), stop.clone());
        let (advances, removes) = (advances.clone(), removes.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) {
                i += 1;
                let x = mix(i ^ 0xc0ffee);
                let key = JobKey::new(x % KEYS);
                if x.is_multiple_of(5) {
                    if g.remove(key).is_ok() {
                        removes.fetch_add(1, Ordering::Relaxed);
                    }
                } else if g.advance(key).is_ok() {
                    advances.fetch_add(1, Ordering::Relaxed);
                }
                if i.is_multiple_of(16) {
                    std::thread::yield_now();
                }
            }
        })
    };
    for s in submitters {
        join_within(s, LIMIT, "a submitter");
    }
    stop.store(true, Ordering::Release);
    join_within(churner, LIMIT, "the churner");
    // Jobs still waiting on keys nobody will produce: retire everything, or shut down (which
    // fails them, and ends what is queued).
    if end_with_shutdown {
        g.shutdown();
    } else {
        g.reset();
    }
    for e in executors {
        join_within(e, LIMIT, "an executor draining after the reset or shutdown");
    }
    // Quiescent: every job has exactly one outcome.
    let handles = std::mem::take(&mut *handles.lock().unwrap());
    let (mut ok, mut superseded, mut removed, mut other, mut shut) = (0, 0, 0, 0, 0);
    let mut tally = |o: Option<JobOutcome>| match o {
        Some(JobOutcome::Succeeded) => ok += 1,
        Some(JobOutcome::Failed(e)) if e.reason() == Reason::Superseded => superseded += 1,
        Some(JobOutcome::Failed(e)) if e.reason() == Reason::Removed => removed += 1,
        Some(JobOutcome::Failed(e)) if e.reason() == Reason::Shutdown => shut += 1,
        // A handle is demand: a job kept is never withdrawn.
        Some(JobOutcome::Failed(e)) if e.reason() == Reason::Withdrawn => {
            panic!("a kept job was withdrawn")
        }
        Some(JobOutcome::Failed(_)) => other += 1,
        None => panic!("a job without an outcome at quiescence"),
    };
    // Joiners first: each sees its job's outcome, and gives back one claim of it.
    let joins = std::mem::take(&mut *joins.lock().unwrap());
    for h in joins {
        assert!(
            g.outcome(&h).unwrap().is_some(),
            "a joiner without an outcome"
        );
        drop(h);
    }
    let early = std::mem::take(&mut *collected.lock().unwrap());
    let jobs = handles.len() + early.len();
    for o in early {
        tally(Some(o));
    }
    for h in handles {
        tally(g.outcome(&h).unwrap());
        // Its last handle dropped: the job is freed, its id stale.
        let id = h.id();
        drop(h);
        assert_eq!(g.outcome(id).unwrap_err().reason(), Reason::StaleHandle);
    }
    let (dropped, detached) = (
        dropped.load(Ordering::Relaxed),
        detached.load(Ordering::Relaxed),
    );
    let jobs_kept = jobs;
    let jobs = jobs + dropped as usize + detached as usize;
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
        (0, 0, 0, 0, 0),
        "{o:?}"
    );
    assert!(g.ledger().usage().is_zero());
    assert_eq!(g.stale_completions(), refused_stale.load(Ordering::Relaxed));
    if !end_with_shutdown {
        // Every key removed by the reset: every key slot is free.
        assert_eq!(o.keys_used, 0, "{o:?}");
    }
    if key_churn {
        let removed_keys = removes.load(Ordering::Relaxed);
        assert!(
            removed_keys > 10 * u64::from(CHURN_TABLE),
            "only {removed_keys} keys churned"
        );
        assert_eq!(
            full.load(Ordering::Relaxed),
            0,
            "a key refused for a full table"
        );
    }
    eprintln!(
        "{jobs} jobs ({jobs_kept} kept, {dropped} dropped at once, {detached} detached): \
         succeeded {ok}, superseded {superseded}, removed {removed}, other failures {other}, \
         shutdown {shut}; {} advances, {} removes, {} stale completions, {} completions \
         refused withdrawn",
        advances.load(Ordering::Relaxed),
        removes.load(Ordering::Relaxed),
        g.stale_completions(),
        refused_withdrawn.load(Ordering::Relaxed)
    );
    assert!(dropped > 0 && detached > 0);
    // Removed outcomes depend on timing (a removed key's job has often ended already).
    assert!(ok > 0 && (superseded > 0 || key_churn));
    assert!(jobs > 5000, "too few jobs admitted: {jobs}");
    // (The churner's keys are not the key-churn variant's: it only removes there.)
    assert!(
        (advances.load(Ordering::Relaxed) > 0 || key_churn) && removes.load(Ordering::Relaxed) > 0
    );
}

#[test]
fn d20_d24_churn_with_keys_advancing_and_removed_conserves_every_job_lockfree() {
    churn::<fairway::oracle::LockFreeGraph>(false, false);
}

#[test]
fn d20_d24_churn_with_keys_advancing_and_removed_conserves_every_job_mutex() {
    churn::<fairway::oracle::MutexGraph>(false, false);
}

#[test]
fn d20_d24_churn_with_keys_advancing_then_shutdown_conserves_every_job_lockfree() {
    churn::<fairway::oracle::LockFreeGraph>(true, false);
}

#[test]
fn d20_d24_churn_with_keys_advancing_then_shutdown_conserves_every_job_mutex() {
    churn::<fairway::oracle::MutexGraph>(true, false);
}

#[test]
fn d24_key_churn_never_fills_the_table_and_frees_every_slot_lockfree() {
    churn::<fairway::oracle::LockFreeGraph>(false, true);
}

#[test]
fn d24_key_churn_never_fills_the_table_and_frees_every_slot_mutex() {
    churn::<fairway::oracle::MutexGraph>(false, true);
}
