//! Churn with key operations under load, on both graph engines (SPEC D20–D24): submitters
//! race executors while another thread advances and removes keys at random. Duplicate keys
//! are refused, completions of superseded or removed work are refused as stale. At the end
//! (`reset`, then the executors drain) every admitted job has exactly one outcome, every node
//! and edge slot is free, occupancy is zero, the ledger holds nothing and the graph's stale
//! count equals the completions the executors saw refused.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome, JobSpec,
};
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
const CPU: ClassId = ClassId(0);

fn churn<E: GraphEngine>(end_with_shutdown: bool) {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    let g: Graph<E> = Graph::builder(ledger)
        .class(4)
        .nodes(4096)
        .edges(16384)
        .keys(1024)
        .max_deps(4)
        .build_with()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let refused_stale = Arc::new(AtomicU64::new(0));
    let handles = Arc::new(Mutex::new(Vec::<JobHandle>::new()));
    // Outcomes collected while the churn runs (freeing node slots for more jobs).
    let collected = Arc::new(Mutex::new(Vec::<JobOutcome>::new()));
    let (advances, removes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));

    let executors: Vec<_> = (0..2)
        .map(|_| {
            let (g, stop, refused) = (g.clone(), stop.clone(), refused_stale.clone());
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
                            if let Err(e) = g.complete(job, outcome) {
                                assert!(matches!(e.reason(), Reason::Superseded | Reason::Removed));
                                refused.fetch_add(1, Ordering::Relaxed);
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
            let collected = collected.clone();
            std::thread::spawn(move || {
                let mut mine: Vec<JobHandle> = Vec::new();
                let mut taken = Vec::new();
                for i in 0..6000u64 {
                    if i % 256 == 255 {
                        mine.retain(|h| match g.take_outcome(*h).unwrap() {
                            Some(o) => {
                                taken.push(o);
                                false
                            }
                            None => true,
                        });
                    }
                    let x = mix(t << 32 | i);
                    let key = x % KEYS;
                    let deps: Vec<Dependency> = (0..x >> 8 & 3)
                        .map(|j| Dependency {
                            key: JobKey::new(mix(x ^ j) % KEYS),
                            gate: match (x >> (12 + j)) % 3 {
                                0 => Gate::Sequential,
                                1 => Gate::OnSuccess,
                                _ => Gate::OnAdmission,
                            },
                        })
                        .filter(|d| d.key != JobKey::new(key))
                        .collect();
                    let spec = JobSpec {
                        key: JobKey::new(key),
                        tenant: TenantId((x % 4) as u32),
                        class: CPU,
                        priority: 0,
                        deps: &deps,
                    };
                    for _attempt in 0..2 {
                        match g.submit(&spec) {
                            Ok(Admission::Admitted(h)) => {
                                mine.push(h);
                                break;
                            }
                            Ok(Admission::Backpressured) => std::thread::yield_now(),
                            Ok(Admission::DedupeJoined(_)) => unreachable!(),
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
        s.join().unwrap();
    }
    stop.store(true, Ordering::Release);
    churner.join().unwrap();
    // Jobs still waiting on keys nobody will produce: retire everything, or shut down (which
    // fails them, and ends what is queued).
    if end_with_shutdown {
        g.shutdown();
    } else {
        g.reset();
    }
    for e in executors {
        e.join().unwrap();
    }
    // Quiescent: every job has exactly one outcome.
    let handles = std::mem::take(&mut *handles.lock().unwrap());
    let (mut ok, mut superseded, mut removed, mut other, mut shut) = (0, 0, 0, 0, 0);
    let mut tally = |o: Option<JobOutcome>| match o {
        Some(JobOutcome::Succeeded) => ok += 1,
        Some(JobOutcome::Failed(e)) if e.reason() == Reason::Superseded => superseded += 1,
        Some(JobOutcome::Failed(e)) if e.reason() == Reason::Removed => removed += 1,
        Some(JobOutcome::Failed(e)) if e.reason() == Reason::Shutdown => shut += 1,
        Some(JobOutcome::Failed(_)) => other += 1,
        None => panic!("a job without an outcome at quiescence"),
    };
    let early = std::mem::take(&mut *collected.lock().unwrap());
    let jobs = handles.len() + early.len();
    for o in early {
        tally(Some(o));
    }
    for h in &handles {
        tally(g.take_outcome(*h).unwrap());
        // Taken once: the handle is stale now.
        assert_eq!(g.outcome(*h).unwrap_err().reason(), Reason::StaleHandle);
    }
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
        (0, 0, 0, 0, 0),
        "{o:?}"
    );
    assert!(g.ledger().usage().is_zero());
    assert_eq!(g.stale_completions(), refused_stale.load(Ordering::Relaxed));
    eprintln!(
        "{jobs} jobs: succeeded {ok}, superseded {superseded}, removed {removed}, other failures \
         {other}, shutdown {shut}; {} advances, {} removes, {} stale completions",
        advances.load(Ordering::Relaxed),
        removes.load(Ordering::Relaxed),
        g.stale_completions()
    );
    // Removed outcomes depend on timing (a removed key's job has often ended already).
    assert!(ok > 0 && superseded > 0);
    assert!(jobs > 5000, "too few jobs admitted: {jobs}");
    assert!(advances.load(Ordering::Relaxed) > 0 && removes.load(Ordering::Relaxed) > 0);
}

#[test]
fn d20_d24_churn_with_keys_advancing_and_removed_conserves_every_job_lockfree() {
    churn::<fairway::LockFreeGraph>(false);
}

#[test]
fn d20_d24_churn_with_keys_advancing_and_removed_conserves_every_job_mutex() {
    churn::<fairway::MutexGraph>(false);
}

#[test]
fn d20_d24_churn_with_keys_advancing_then_shutdown_conserves_every_job_lockfree() {
    churn::<fairway::LockFreeGraph>(true);
}

#[test]
fn d20_d24_churn_with_keys_advancing_then_shutdown_conserves_every_job_mutex() {
    churn::<fairway::MutexGraph>(true);
}
