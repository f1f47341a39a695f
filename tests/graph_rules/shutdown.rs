//! The graph's shutdown (SPEC D02's `shutdown` error layer; F47 for the scheduler under it),
//! run on both graph engines (the `both_graphs!` list in `graph_rules.rs` names them).

use super::*;

fn shut_down(o: Option<JobOutcome>) -> bool {
    matches!(o, Some(JobOutcome::Failed(e)) if e.reason() == Reason::Shutdown
        && e.code() == Code::Unavailable)
}

/// Shutting down while jobs run, queue and wait gives every job exactly one outcome: queued
/// jobs and jobs that become ready afterwards end `unavailable / shutdown`, jobs waiting for a
/// key that has no producer end `dependency-failed`, the running job completes as usual. Then
/// every node and edge slot is free, occupancy is zero and the ledger holds nothing; new work
/// is refused with `unavailable / shutdown`.
pub(crate) fn d02_shutdown_gives_every_job_exactly_one_outcome<E: GraphEngine>() {
    let g = Graph::builder(ledger(Limits::UNLIMITED))
        .class(1)
        .nodes(16)
        .edges(16)
        .keys(64)
        .build_with::<E>()
        .unwrap();
    let r = admit(&g, 1, &[]);
    let running = g.try_next(CPU).expect("the one cell");
    assert_eq!(running.id(), r.id());
    // The cell is taken: these two stay queued in the scheduler.
    let q1 = admit(&g, 2, &[]);
    let q2 = admit(&g, 3, &[]);
    let after_r = admit(&g, 4, &[dep(1, Gate::OnSuccess)]);
    let after_q1 = admit(&g, 5, &[dep(2, Gate::Sequential)]);
    let admitted_q2 = admit(&g, 6, &[dep(3, Gate::OnAdmission)]); // ready, queued too
    let no_producer = admit(&g, 7, &[dep(99, Gate::Sequential)]);
    let chained = admit(&g, 8, &[dep(7, Gate::OnSuccess)]);
    let on_admission = admit(&g, 9, &[dep(98, Gate::OnAdmission)]);
    assert!(!g.ledger().usage().is_zero());
    g.shutdown();
    g.shutdown(); // idempotent
    assert!(g.is_shutdown());
    // New work is refused; the executor gets nothing more.
    assert_eq!(
        g.submit(&spec(20, &[])).unwrap_err().reason(),
        Reason::Shutdown
    );
    assert_eq!(
        g.submit_batch_atomic(&[spec(21, &[])], None)
            .unwrap_err()
            .reason(),
        Reason::Shutdown
    );
    assert_eq!(
        g.discover(&running, &[dep(22, Gate::Sequential)])
            .unwrap_err()
            .reason(),
        Reason::Shutdown
    );
    assert!(g.try_next(CPU).is_none());
    for h in [&q1, &q2, &after_q1, &admitted_q2] {
        assert!(shut_down(g.outcome(h).unwrap()), "{h:?}");
    }
    for h in [&no_producer, &chained, &on_admission] {
        assert!(dependency_failed(g.outcome(h).unwrap()), "{h:?}");
    }
    // The running job runs on; its dependent is refused when it becomes ready.
    assert_eq!(g.outcome(&after_r).unwrap(), None);
    g.complete(running, JobOutcome::Succeeded).unwrap();
    assert_eq!(g.outcome(&r).unwrap(), Some(JobOutcome::Succeeded));
    assert!(shut_down(g.outcome(&after_r).unwrap()));
    let all = [
        r,
        q1,
        q2,
        after_r,
        after_q1,
        admitted_q2,
        no_producer,
        chained,
        on_admission,
    ];
    assert_eq!(g.wait_batch(&all).unwrap().len(), all.len());
    // Every job ended; dropping the handles frees them (SPEC D31).
    let ids: Vec<JobId> = all.iter().map(JobHandle::id).collect();
    drop(all);
    for h in ids {
        assert_eq!(g.outcome(h).unwrap_err().reason(), Reason::StaleHandle);
    }
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
        (0, 0, 0, 0, 0),
        "{o:?}"
    );
    assert!(g.ledger().usage().is_zero());
}

/// A shutdown wakes what waits on the graph: `wait_batch` on jobs that end by it, and a
/// submitter waiting for room, which gets `unavailable / shutdown`.
pub(crate) fn d02_shutdown_wakes_waiters_and_waiting_submitters<E: GraphEngine>() {
    let g = builder(Limits::UNLIMITED)
        .nodes(1)
        .build_with::<E>()
        .unwrap();
    let w = admit(&g, 1, &[dep(9, Gate::OnSuccess)]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let submitter = {
        let g = g.clone();
        rt.spawn(async move { g.submit_waiting(&spec(2, &[])).await })
    };
    let waiter = {
        let g = g.clone();
        // The waiter holds the handle (the job's demand) and drops it once it has the outcome.
        std::thread::spawn(move || g.wait_batch(&[w]))
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(!submitter.is_finished() && !waiter.is_finished());
    g.shutdown();
    let t = std::time::Instant::now();
    while !submitter.is_finished() {
        assert!(
            t.elapsed() < TEST_LIMIT,
            "the waiting submitter was not woken by the shutdown"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let e = rt.block_on(submitter).unwrap().unwrap_err();
    assert_eq!(e.reason(), Reason::Shutdown);
    let out = join_within(waiter, TEST_LIMIT, "wait_batch woken by the shutdown").unwrap();
    assert!(dependency_failed(Some(out[0])));
    assert_eq!(g.occupancy().nodes_used, 0);
}
