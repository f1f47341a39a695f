//! A small build-system-like DAG on a thread pool in pull mode.
//!
//! Two classes of cells (`io` for fetching, `cpu` for compiling), a shared dependency (the
//! toolchain both compiles need), one supersede (a source file changes after its compile was
//! submitted: `advance` retires the old job and a new one is submitted at the next
//! generation; the link, which already waited on the old compile, follows the key to the new
//! one), one failure (the linter) that gates the packaging job depending on it, and
//! one dedupe (a second client asks for the test run while it is live and joins it: the tests
//! run once, and both handles see the one outcome). Then, on a second graph, an urgent
//! request pulls its dependency forward: the dependency inherits the request's priority and
//! runs ahead of the backlog it was queued behind. Last, on a third graph, a stale request is
//! dropped: its handle was the only demand on a subtree of three jobs, and all three are
//! cancelled without running; the request that replaces it is awaited on tokio.
//!
//! Run with `cargo run --example dag`.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{Admission, Dependency, Gate, Graph, JobHandle, JobKey, JobOutcome, JobSpec};
use fairway::{ClassId, Code, Error, Reason, TenantId};
use std::collections::HashMap;
use std::time::Duration;

const IO: ClassId = ClassId(0);
const CPU: ClassId = ClassId(1);

/// Runs the example (public so that `tests/examples.rs` runs it as a test too).
pub fn main() -> Result<(), Error> {
    let ledger = Ledger::new(LedgerConfig::new(
        vec![ClassSpec::new("io"), ClassSpec::new("cpu")],
        1,
    ))?;
    // Two io cells and two cpu cells.
    let graph = Graph::builder(ledger).class(2).class(2).build()?;

    let names: HashMap<u64, &str> = [
        (1, "fetch toolchain"),
        (2, "fetch sources"),
        (10, "compile a"),
        (11, "compile b"),
        (20, "link"),
        (21, "test"),
        (30, "lint"),
        (31, "package"),
    ]
    .into_iter()
    .collect();

    // Executors: a pool of threads per class, each pulling ready jobs of its class.
    let mut pool = Vec::new();
    for (class, threads) in [(IO, 2), (CPU, 2)] {
        for _ in 0..threads {
            let graph = graph.clone();
            let names = names.clone();
            pool.push(std::thread::spawn(move || {
                while let Some(job) = graph.next_blocking(class) {
                    let key = job.key().key.0;
                    let name = names[&key];
                    std::thread::sleep(Duration::from_millis(20));
                    let outcome = if key == 30 {
                        println!("  {name}: found a problem");
                        JobOutcome::Failed(Error::new(Code::Internal, Reason::Failed))
                    } else {
                        JobOutcome::Succeeded
                    };
                    let version = graph.witness(&job).version();
                    match graph.complete(job, outcome) {
                        Ok(()) => println!(
                            "  {name} (generation {}): result recorded",
                            version.generation
                        ),
                        Err(e) => println!("  {name}: result dropped ({e})"),
                    }
                }
            }));
        }
    }

    let submit = |key: u64, class: ClassId, deps: &[(u64, Gate)]| -> Result<JobHandle, Error> {
        let deps: Vec<Dependency> = deps
            .iter()
            .map(|&(k, gate)| Dependency::on(JobKey::new(k), gate))
            .collect();
        match graph.submit(&JobSpec {
            key: JobKey::new(key),
            tenant: TenantId(0),
            class,
            priority: 0,
            deadline: None,
            deps: &deps,
        })? {
            Admission::Admitted(h) | Admission::DedupeJoined(h) => Ok(h),
            Admission::Backpressured => unreachable!("the default bounds are far larger"),
        }
    };

    let mut jobs = Vec::new();
    // The compiles wait for the toolchain (shared) and the sources; submitted before them,
    // they wait for producers that do not exist yet.
    let compile_a = submit(10, CPU, &[(1, Gate::OnSuccess), (2, Gate::OnSuccess)])?;
    let old_compile_b = submit(11, CPU, &[(1, Gate::OnSuccess), (2, Gate::OnSuccess)])?;
    // The link depends on key 11's current producer: the compile of b submitted just above.
    let link = submit(20, CPU, &[(10, Gate::OnSuccess), (11, Gate::OnSuccess)])?;
    // Source b changed: supersede its compile and submit it again at the new generation. The
    // link follows key 11 to the new compile and keeps waiting; it is not failed.
    let v = graph.advance(JobKey::new(11))?;
    println!(
        "compile b superseded; key 11 is now at generation {}; the link waits for it",
        v.generation
    );
    let compile_b = submit(11, CPU, &[(1, Gate::OnSuccess), (2, Gate::OnSuccess)])?;
    let test = submit(21, CPU, &[(20, Gate::OnSuccess)])?;
    // Another client wants the same test run: the job is live (waiting), so it joins it.
    let Admission::DedupeJoined(test_again) = graph.submit(&JobSpec {
        key: JobKey::new(21),
        tenant: TenantId(0),
        class: CPU,
        priority: 0,
        deadline: None,
        deps: &[],
    })?
    else {
        unreachable!("the test job is live")
    };
    println!("a second request for the tests joined the live job");
    // The linter reads the sources; packaging needs a clean lint.
    let lint = submit(30, CPU, &[(2, Gate::OnSuccess)])?;
    let package = submit(31, CPU, &[(21, Gate::OnSuccess), (30, Gate::OnSuccess)])?;
    // The producers everything waits on.
    let toolchain = submit(1, IO, &[])?;
    let sources = submit(2, IO, &[])?;
    jobs.extend([
        (1, toolchain),
        (2, sources),
        (10, compile_a),
        (11, old_compile_b),
        (11, compile_b),
        (20, link),
        (21, test),
        (21, test_again),
        (30, lint),
        (31, package),
    ]);

    let (keys, handles): (Vec<u64>, Vec<JobHandle>) = jobs.into_iter().unzip();
    let outcomes = graph.wait_batch(&handles)?;
    // Everything has ended: stop the executors.
    graph.scheduler().shutdown();
    for t in pool {
        t.join().expect("executor panicked");
    }

    println!("outcomes:");
    for (key, outcome) in keys.iter().zip(&outcomes) {
        let what = match outcome {
            JobOutcome::Succeeded => "succeeded".to_string(),
            JobOutcome::Failed(e) => format!("failed ({e})"),
        };
        println!("  {:<16} {what}", names[key]);
    }
    assert!(matches!(outcomes[3], JobOutcome::Failed(e) if e.reason() == Reason::Superseded));
    // The link followed key 11 to the new compile and succeeded with it.
    assert!(outcomes[4].is_success() && outcomes[5].is_success() && outcomes[6].is_success());
    assert!(
        outcomes[7].is_success() && outcomes[7] == outcomes[6],
        "one test run, one outcome"
    );
    assert!(matches!(outcomes[9], JobOutcome::Failed(e) if e.reason() == Reason::DependencyFailed));
    // Every job has ended: dropping the handles frees every node slot.
    drop(handles);
    println!("occupancy at the end: {:?}", graph.occupancy());
    assert_eq!(graph.occupancy().nodes_used, 0);
    urgent_pulls_its_dependency_forward()?;
    a_dropped_request_cancels_its_subtree()
}

/// An urgent request pulls its dependency forward (SPEC D30): one cpu cell, busy; a backlog
/// of five jobs queued, then `docs`, all at priority 0; then an urgent `hotfix` (priority 9)
/// that needs `docs`. `docs` inherits priority 9 and is re-ordered in the scheduler in place:
/// it runs next, ahead of the backlog it queued behind, and the hotfix one job later.
fn urgent_pulls_its_dependency_forward() -> Result<(), Error> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
    let graph = Graph::builder(ledger).class(1).build()?;
    let submit = |key: u64, priority: u8, deps: &[Dependency]| -> Result<JobHandle, Error> {
        match graph.submit(&JobSpec {
            key: JobKey::new(key),
            tenant: TenantId(0),
            class: ClassId(0),
            priority,
            deadline: None,
            deps,
        })? {
            Admission::Admitted(h) => Ok(h),
            other => unreachable!("{other:?}"),
        }
    };
    // Every handle is held until the end: a dropped handle would withdraw its job.
    let mut backlog = vec![submit(100, 0, &[])?];
    let busy = graph.try_next(ClassId(0)).expect("the cell is free");
    for key in 101..=105 {
        backlog.push(submit(key, 0, &[])?);
    }
    let docs = submit(200, 0, &[])?;
    let hotfix = submit(300, 9, &[Dependency::on(JobKey::new(200), Gate::OnSuccess)])?;
    let (priority, _) = graph.effective(&docs)?;
    println!("docs inherits priority {priority} from the hotfix that waits on it");
    assert_eq!(priority, 9);
    graph.complete(busy, JobOutcome::Succeeded)?;
    let mut order = Vec::new();
    while let Some(job) = graph.try_next(ClassId(0)) {
        order.push(job.key().key.0);
        graph.complete(job, JobOutcome::Succeeded)?;
    }
    println!("run order after the busy job: {order:?}");
    // `docs` goes first. The hotfix becomes ready when `docs` completes; the cell `docs` gives
    // back is granted before the hotfix is queued, so one job of the backlog runs in between.
    assert_eq!(order, [200, 101, 300, 102, 103, 104, 105]);
    assert!(hotfix.outcome().is_some_and(|o| o.is_success()));
    assert!(docs.outcome().is_some_and(|o| o.is_success()));
    assert!(backlog
        .iter()
        .all(|h| h.outcome() == Some(JobOutcome::Succeeded)));
    Ok(())
}

/// A dropped handle cancels the work only it wanted (SPEC D31). A language server gets a
/// request (key 3) that needs a type check (2), which needs a parse (1). The client keeps
/// only the request's handle: the parse and the check are wanted by their dependents. The
/// user types before anything ran, the request goes stale and its handle is dropped: the
/// request, then the check and the parse it leaves without demand, are cancelled; nothing
/// runs and every node, edge and permit is back. The new request, at the keys' next
/// generation, is awaited on tokio while an executor task runs the jobs.
fn a_dropped_request_cancels_its_subtree() -> Result<(), Error> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
    let graph = Graph::builder(ledger.clone()).class(1).build()?;
    let submit = |key: u64, deps: &[Dependency]| -> Result<JobHandle, Error> {
        match graph.submit(&JobSpec {
            key: JobKey::new(key),
            tenant: TenantId(0),
            class: ClassId(0),
            priority: 0,
            deadline: None,
            deps,
        })? {
            Admission::Admitted(h) => Ok(h),
            other => unreachable!("{other:?}"),
        }
    };
    // Top-down, as demand arrives: the request first (it waits for a check that has no
    // producer yet), then the check (it adopts the waiting request as its dependent), then
    // the parse. The check's and the parse's handles go at once: their dependents want them.
    let tree = || -> Result<JobHandle, Error> {
        let request = submit(3, &[Dependency::on(JobKey::new(2), Gate::OnSuccess)])?;
        drop(submit(
            2,
            &[Dependency::on(JobKey::new(1), Gate::OnSuccess)],
        )?);
        drop(submit(1, &[])?);
        Ok(request)
    };
    let stale = tree()?;
    println!("request submitted: {:?}", graph.occupancy());
    assert_eq!(graph.occupancy().nodes_used, 3);
    // The user typed: the request is stale.
    drop(stale);
    println!("request dropped: {:?}", graph.occupancy());
    assert_eq!(graph.occupancy().nodes_used, 0);
    assert_eq!(graph.occupancy().edges_used, 0);
    assert!(graph.try_next(ClassId(0)).is_none(), "nothing left to run");
    // The parse's request left the scheduler; its permit is back once a pass went by it (the
    // look above: a cancelled entry is skipped by the next turn of its tenant).
    assert!(ledger.usage().is_zero(), "the parse's permit is back");

    // The new request: a new job per key, at the next generation. Submitted bottom-up this
    // time, holding each handle until its dependent is linked: a new dependent on a key whose
    // job was withdrawn would meet that cancelled job (and fail `dependency-cancelled`).
    let parse = submit(1, &[])?;
    let check = submit(2, &[Dependency::on(JobKey::new(1), Gate::OnSuccess)])?;
    let fresh = submit(3, &[Dependency::on(JobKey::new(2), Gate::OnSuccess)])?;
    drop((parse, check));
    assert_eq!(graph.version(JobKey::new(1)).map(|v| v.generation), Some(1));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a runtime");
    let outcome = runtime.block_on(async {
        let executor = graph.clone();
        let pool = tokio::spawn(async move {
            for _ in 0..3 {
                let job = executor.next(ClassId(0)).await.expect("three jobs");
                executor.complete(job, JobOutcome::Succeeded).expect("live");
            }
        });
        // The handle is the future of the request's outcome.
        let outcome = tokio::time::timeout(Duration::from_secs(10), fresh)
            .await
            .expect("the request ends");
        pool.await.expect("the executor task");
        outcome
    });
    println!("the new request: {outcome:?}");
    assert_eq!(outcome, JobOutcome::Succeeded);
    assert_eq!(graph.occupancy().nodes_used, 0);
    Ok(())
}
