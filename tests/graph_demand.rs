//! SPEC D31: owned job handles and demand. Dropping a job's last handle withdraws its demand;
//! a job that nothing wants any more (no handle, no dependent still waiting on it, never
//! detached) is cancelled `cancelled / withdrawn`, its producers in turn when it was their last
//! demander; a running one is told through its token. On both graph engines.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::graph::{
    Admission, BatchHandle, Dependency, Gate, Graph, GraphEngine, JobHandle, JobId, JobKey,
    JobOutcome, JobSpec,
};
use fairway::oracle::GraphOn;
use fairway::{Code, Reason, TenantId};
use std::time::Duration;

#[macro_use]
#[path = "common/graph.rs"]
mod graph_common;
use graph_common::*;

both_graphs!(
    d31_chain_of_100_cancelled_from_its_root,
    d31_chain_of_100_after_a_cancelled_producer_ends_dependency_cancelled,
    d31_chain_of_100_after_a_failed_producer_ends_dependency_failed,
    d31_producer_left_without_demand_by_an_ended_dependent_is_withdrawn,
    d31_deduped_diamond_keeps_shared_node_while_a_demander_remains,
    d31_detached_job_runs_to_completion,
    d31_running_job_is_told_through_its_token,
    d31_resubmission_after_withdrawal_starts_a_new_job,
    d31_batch_handle_dropped_mid_run,
    d31_handle_dropped_inside_tokio_timeout,
    d31_shared_node_of_two_tenants_dags_runs_on_for_the_survivor_at_its_priority,
);

/// How long a wait inside a test may take before it counts as stuck (far above what any of
/// these waits needs).
const STUCK: Duration = Duration::from_secs(20);

/// A graph of two tenants, four cells, room for every test here.
fn graph<E: GraphEngine>() -> GraphOn<E> {
    let ledger = Ledger::new(
        LedgerConfig::new(vec![ClassSpec::new("cpu")], 2).tenant_limits(Limits::UNLIMITED),
    )
    .unwrap();
    Graph::builder(ledger)
        .class(4)
        .nodes(256)
        .edges(512)
        .keys(512)
        .build_with::<E>()
        .unwrap()
}

/// A job of `tenant`, class [`CPU`], priority 0.
fn job(key: u64, tenant: u32, deps: &[Dependency]) -> JobSpec<'_> {
    JobSpec {
        key: JobKey::new(key),
        tenant: TenantId(tenant),
        class: CPU,
        priority: 0,
        deadline: None,
        deps,
    }
}

fn failed() -> JobOutcome {
    JobOutcome::Failed(fairway::Error::new(Code::Internal, Reason::Failed))
}

fn dependency_failed(o: Option<JobOutcome>) -> bool {
    failed_with(o, Code::Unavailable, Reason::DependencyFailed)
}

/// `key`'s generation now.
fn generation<E: GraphEngine>(g: &GraphOn<E>, key: u64) -> u32 {
    g.version(JobKey::new(key))
        .unwrap_or_else(|| panic!("key {key} is not named"))
        .generation
}

/// The id is stale: its job was freed (it ended and nothing holds it).
fn assert_freed<E: GraphEngine>(g: &GraphOn<E>, id: JobId, what: &str) {
    match g.outcome(id) {
        Err(e) => assert_eq!(
            (e.code(), e.reason()),
            (Code::NotFound, Reason::StaleHandle),
            "{what}"
        ),
        Ok(o) => panic!("{what}: not freed, outcome {o:?}"),
    }
}

/// Nothing left in the graph: every store empty, no job in any state, no permit held, and no
/// executor gets a job.
fn assert_empty<E: GraphEngine>(g: &GraphOn<E>, what: &str) {
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
        (0, 0, 0, 0, 0),
        "{what}: {o:?}"
    );
    assert!(g.try_next(CPU).is_none(), "{what}: an executor got a job");
    // A withdrawn queued job's request is cancelled in the scheduler; its permit comes back
    // when the executor skips it (as for a superseded one, SPEC F31).
    assert!(
        g.ledger().usage().is_zero(),
        "{what}: a permit is still held"
    );
}

/// Runs `f` on `rt` for at most `limit` (the timer is made inside the runtime).
fn timed<F: std::future::IntoFuture>(
    rt: &tokio::runtime::Runtime,
    limit: Duration,
    f: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    rt.block_on(async move { tokio::time::timeout(limit, f).await })
}

/// Submits `spec` and expects it admitted as a new job (not a join).
fn put<E: GraphEngine>(g: &GraphOn<E>, spec: &JobSpec<'_>) -> JobHandle<E> {
    match g.submit(spec).unwrap() {
        Admission::Admitted(h) => h,
        other => panic!("job {:?} not admitted as a new job: {other:?}", spec.key),
    }
}

/// Jobs 0..100 on keys `base + i`, job i + 1 after job i `OnSuccess`; none runs (no executor
/// pulls). Every handle but the last job's is dropped right after its job's dependent exists:
/// each of them is still wanted, by its dependent. Cancelling the last job (the chain's root
/// of demand) withdraws it, and the withdrawal runs up the chain: every job ends and is freed,
/// job 0's permit (it was queued) comes back, and no executor ever gets one of them.
fn d31_chain_of_100_cancelled_from_its_root<E: GraphEngine>() {
    let g = graph::<E>();
    let base = 1000u64;
    let deps: Vec<[Dependency; 1]> = (0..100).map(|i| [dep(base + i, Gate::OnSuccess)]).collect();
    let mut handles = vec![put(&g, &job(base, 0, &[]))];
    for i in 1..100u64 {
        handles.push(put(&g, &job(base + i, 0, &deps[i as usize - 1])));
    }
    let ids: Vec<JobId> = handles.iter().map(JobHandle::id).collect();
    let last = handles.pop().expect("100 jobs");
    // The upstream handles go; their dependents keep them.
    drop(handles);
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.edges_used), (100, 99), "{o:?}");
    assert_eq!((o.waiting, o.ready + o.running), (99, 1), "{o:?}");
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(
            g.outcome(id).unwrap(),
            None,
            "job {i} ended while its dependent still wants it"
        );
    }
    assert!(
        !g.ledger().usage().is_zero(),
        "job 0 is queued with its permit"
    );
    // The root of demand goes: everything is withdrawn.
    assert!(
        last.cancel(),
        "the cancel of the last job cancelled nothing"
    );
    for (i, &id) in ids.iter().enumerate() {
        assert_freed(&g, id, &format!("job {i} of the cancelled chain"));
    }
    assert_empty(&g, "after the chain's root of demand was cancelled");
    // Every key names a cancelled job: a submission of its identity starts a new job.
    for i in [0u64, 50, 99] {
        let before = generation(&g, base + i);
        let d = if i == 0 {
            &[][..]
        } else {
            &deps[i as usize - 1][..]
        };
        let again = put(&g, &job(base + i, 0, d));
        assert_eq!(generation(&g, base + i), before + 1, "key of job {i}");
        drop(again);
    }
}

/// A producer cancelled before its dependents exist: a chain of 100 whose first job depends
/// `OnSuccess` on it ends `cancelled / dependency-cancelled` from end to end (the flow is
/// transitive: a dependency-cancelled producer is a cancelled producer), while a `Sequential`
/// dependent of the chain still runs and an `OnAdmission` one of the (queued, so admitted)
/// producer too.
fn d31_chain_of_100_after_a_cancelled_producer_ends_dependency_cancelled<E: GraphEngine>() {
    let g = graph::<E>();
    let base = 1000u64;
    let p = put(&g, &job(base, 0, &[]));
    let p_id = p.id();
    assert!(
        p.cancel(),
        "the producer's only handle went: it is withdrawn"
    );
    assert_freed(&g, p_id, "the withdrawn producer");
    assert_empty(&g, "after the producer was withdrawn");
    // The chain 1..100, submitted from its end, so each job waits on a key with no producer
    // until the next is submitted; job 1 last, on the cancelled producer.
    let deps: Vec<[Dependency; 1]> = (0..100).map(|i| [dep(base + i, Gate::OnSuccess)]).collect();
    let mut chain: Vec<JobHandle<E>> = (2..100u64)
        .rev()
        .map(|i| put(&g, &job(base + i, 0, &deps[i as usize - 1])))
        .collect();
    chain.reverse(); // job 2 first
    assert_eq!(g.occupancy().waiting, 98);
    let after_chain = [dep(base + 99, Gate::Sequential)];
    let seq = put(&g, &job(5000, 0, &after_chain));
    let first = put(&g, &job(base + 1, 0, &deps[0]));
    assert!(
        dependency_cancelled(first.outcome()),
        "job 1 on the cancelled producer: {:?}",
        first.outcome()
    );
    for (i, h) in chain.iter().enumerate() {
        assert!(
            dependency_cancelled(h.outcome()),
            "job {} of the chain: {:?}",
            i + 2,
            h.outcome()
        );
    }
    // Admission-gated on the producer, which was queued (admitted) when it was cancelled.
    let on_admission = [dep(base, Gate::OnAdmission)];
    let adm = put(&g, &job(6000, 0, &on_admission));
    let mut ran = drain(&g);
    ran.sort_by_key(|id| format!("{id:?}"));
    let mut want = ids(&[&seq, &adm]);
    want.sort_by_key(|id| format!("{id:?}"));
    assert_eq!(
        ran, want,
        "only the Sequential and OnAdmission dependents run"
    );
    assert_eq!(seq.outcome(), Some(JobOutcome::Succeeded));
    assert_eq!(adm.outcome(), Some(JobOutcome::Succeeded));
    drop((chain, first, seq, adm));
    assert_empty(&g, "after the chain");
}

/// The contrast: a chain of 100 whose first job *fails* (its handles all kept) ends
/// `dependency-failed`, never `dependency-cancelled`.
fn d31_chain_of_100_after_a_failed_producer_ends_dependency_failed<E: GraphEngine>() {
    let g = graph::<E>();
    let base = 1000u64;
    let deps: Vec<[Dependency; 1]> = (0..100).map(|i| [dep(base + i, Gate::OnSuccess)]).collect();
    let mut handles = vec![put(&g, &job(base, 0, &[]))];
    for i in 1..100u64 {
        handles.push(put(&g, &job(base + i, 0, &deps[i as usize - 1])));
    }
    let r = g.try_next(CPU).expect("job 0 is ready");
    assert_eq!(r.id(), handles[0].id());
    g.complete(r, failed()).unwrap();
    assert!(
        matches!(handles[0].outcome(), Some(JobOutcome::Failed(e)) if e.reason() == Reason::Failed)
    );
    for (i, h) in handles.iter().enumerate().skip(1) {
        assert!(dependency_failed(h.outcome()), "job {i}: {:?}", h.outcome());
    }
    drop(handles);
    assert_empty(&g, "after the failed chain");
}

/// Job 0's only demander is job 1 (job 0's handle dropped), which also depends on job X. X
/// fails: job 1 is doomed, but it ends only once every gate has resolved (SPEC D10), so it
/// still waits on job 0 and job 0 is still wanted. Then job 1 ends before job 0 (its key
/// advances: superseded), and job 0, queued and left without demand, is withdrawn: its
/// permit comes back and no executor gets it. Its key names a cancelled job: a late
/// `OnSuccess` dependent ends `dependency-cancelled` (and its dependents after it), a
/// `Sequential` one runs, and the identity submitted again is a new job.
fn d31_producer_left_without_demand_by_an_ended_dependent_is_withdrawn<E: GraphEngine>() {
    let g = graph::<E>();
    let x = put(&g, &job(100, 0, &[]));
    let zero = put(&g, &job(0, 0, &[]));
    let zero_id = zero.id();
    let deps = [dep(0, Gate::OnSuccess), dep(100, Gate::OnSuccess)];
    let one = put(&g, &job(1, 0, &deps));
    drop(zero);
    assert_eq!(
        g.outcome(zero_id).unwrap(),
        None,
        "job 0 is still wanted by job 1"
    );
    let r = g.try_next(CPU).expect("X is granted first");
    assert_eq!(r.id(), x.id());
    g.complete(r, failed()).unwrap();
    assert_eq!(one.outcome(), None, "job 1 still waits on job 0's gate");
    assert_eq!(
        g.outcome(zero_id).unwrap(),
        None,
        "job 0 is still wanted by the doomed job 1"
    );
    // Job 1 ends before job 0: superseded.
    g.advance(JobKey::new(1)).unwrap();
    assert!(superseded(one.outcome()), "{:?}", one.outcome());
    assert_freed(&g, zero_id, "job 0, withdrawn when its last demander ended");
    assert!(g.try_next(CPU).is_none(), "withdrawn job 0 was handed out");
    assert!(
        g.ledger().usage().is_zero(),
        "withdrawn job 0's permit was not given back"
    );
    assert_eq!(g.occupancy().nodes_used, 2, "X and job 1, held");
    // Late dependents of the cancelled job 0. `l2` waits on `l1`'s key first, so the flow
    // reaches it when `l1` ends.
    let on_l1 = [dep(11, Gate::OnSuccess)];
    let l2 = put(&g, &job(12, 0, &on_l1));
    let on_zero = [dep(0, Gate::OnSuccess)];
    let l1 = put(&g, &job(11, 0, &on_zero));
    assert!(dependency_cancelled(l1.outcome()), "{:?}", l1.outcome());
    assert!(dependency_cancelled(l2.outcome()), "{:?}", l2.outcome());
    let seq = put(&g, &job(13, 1, &[dep(0, Gate::Sequential)]));
    assert_eq!(drain(&g), vec![seq.id()]);
    assert_eq!(seq.outcome(), Some(JobOutcome::Succeeded));
    // The identity again: a new job, one generation on.
    let before = generation(&g, 0);
    let again = put(&g, &job(0, 0, &[]));
    assert_eq!(generation(&g, 0), before + 1);
    assert_eq!(drain(&g), vec![again.id()]);
    assert_eq!(again.outcome(), Some(JobOutcome::Succeeded));
    drop((x, one, l1, l2, seq, again));
    assert_empty(&g, "at the end");
}

/// A shared job S (its own handle dropped) with two dependents of two tenants keeps living
/// while one of them still wants it: dropping A's handle cancels A only; dropping B's then
/// cancels B and S. Likewise for a job submitted twice (the second a dedupe join): it lives
/// while one of its two handles does.
fn d31_deduped_diamond_keeps_shared_node_while_a_demander_remains<E: GraphEngine>() {
    let g = graph::<E>();
    let s = put(&g, &job(1, 0, &[]));
    let s_id = s.id();
    let on_s = [dep(1, Gate::OnSuccess)];
    let a = put(&g, &job(2, 0, &on_s));
    let b = put(&g, &job(3, 1, &on_s));
    let (a_id, b_id) = (a.id(), b.id());
    assert!(!s.cancel(), "S is still wanted by A and B");
    assert_eq!(g.outcome(s_id).unwrap(), None);
    assert_eq!(g.occupancy().edges_used, 2);
    // A goes: A is withdrawn (it was waiting), S stays for B.
    assert!(a.cancel(), "A had only its handle");
    assert_freed(&g, a_id, "A");
    assert_eq!(
        g.outcome(s_id).unwrap(),
        None,
        "S cancelled while B wants it"
    );
    assert_eq!(g.outcome(b_id).unwrap(), None);
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.waiting), (2, 1), "{o:?}");
    // B goes: B and S are withdrawn; S's permit (it was queued) comes back.
    drop(b);
    assert_freed(&g, b_id, "B");
    assert_freed(&g, s_id, "S, left without demanders");
    assert_empty(&g, "after the diamond's demanders went");

    // The dedupe-joiner version.
    let first = put(&g, &job(10, 1, &[]));
    let joiner = match g.submit(&job(10, 1, &[])).unwrap() {
        Admission::DedupeJoined(h) => h,
        other => panic!("the second submit of a live identity must join: {other:?}"),
    };
    assert_eq!(joiner, first);
    let id = first.id();
    assert_eq!(g.occupancy().nodes_used, 1);
    assert!(!first.cancel(), "the joiner still wants the job");
    assert_eq!(g.outcome(id).unwrap(), None);
    assert_eq!(joiner.outcome(), None);
    assert_eq!(g.occupancy().ready + g.occupancy().running, 1);
    assert!(joiner.cancel(), "the last handle's cancel cancels the job");
    assert_freed(&g, id, "the twice-submitted job");
    assert_empty(&g, "after both handles of the joined job went");
}

/// A detached job runs with no handle: an executor still gets it, it completes, and its node
/// is freed at its end. A detached producer is not cancelled when its only dependent goes.
/// Its key, unlike a cancelled job's, is then taken (`duplicate-key`).
fn d31_detached_job_runs_to_completion<E: GraphEngine>() {
    let g = graph::<E>();
    let h = put(&g, &job(1, 0, &[]));
    let id = h.id();
    h.detach();
    assert_eq!(g.occupancy().nodes_used, 1);
    assert_eq!(g.outcome(id).unwrap(), None);
    let r = g.try_next(CPU).expect("the detached job is handed out");
    assert_eq!(r.id(), id);
    assert!(!r.is_cancelled(), "a detached job is wanted");
    g.complete(r, JobOutcome::Succeeded).unwrap();
    assert_freed(&g, id, "the detached job after its end");
    assert_empty(&g, "after the detached job");
    let e = g.submit(&job(1, 0, &[])).unwrap_err();
    assert_eq!(
        e.reason(),
        Reason::DuplicateKey,
        "the key's job ended: taken"
    );

    // A detached producer whose dependent is dropped runs on.
    let p = put(&g, &job(2, 0, &[]));
    let p_id = p.id();
    p.detach();
    let on_p = [dep(2, Gate::OnSuccess)];
    let d = put(&g, &job(3, 1, &on_p));
    let d_id = d.id();
    assert!(d.cancel());
    assert_freed(&g, d_id, "the dropped dependent");
    assert_eq!(
        g.outcome(p_id).unwrap(),
        None,
        "the detached producer lives"
    );
    assert_eq!(drain(&g), vec![p_id]);
    assert_freed(&g, p_id, "the detached producer after its end");
    assert_empty(&g, "at the end");
}

/// A running job whose only handle goes is told (`is_cancelled`, `cancelled().await`) and
/// runs on; its completion is refused `cancelled / withdrawn`, publishes nothing, and frees
/// it; its key's identity submitted again (while it runs or after) is a new job. `advance`
/// and `remove` of a running job's key tell it too.
fn d31_running_job_is_told_through_its_token<E: GraphEngine>() {
    let g = graph::<E>();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let h = put(&g, &job(1, 0, &[]));
    let r = g.try_next(CPU).expect("job 1 is ready");
    assert_eq!(r.id(), h.id());
    assert!(!r.is_cancelled());
    // Not told yet: the token's future stays pending.
    assert!(
        timed(&rt, Duration::from_millis(20), r.cancelled()).is_err(),
        "told before its handle went"
    );
    let stale_before = g.stale_completions();
    drop(h);
    assert!(r.is_cancelled(), "the running job was not told");
    timed(&rt, STUCK, r.cancelled())
        .expect("cancelled() never resolved after the last handle went");
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.running), (1, 1), "it runs on: {o:?}");
    let e = g.complete(r, JobOutcome::Succeeded).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::Cancelled, Reason::Withdrawn),
        "completion of a withdrawn job"
    );
    assert_eq!(
        g.stale_completions(),
        stale_before,
        "a withdrawn completion is not stale"
    );
    assert_empty(&g, "after the withdrawn job's completion");
    // Its end was published like a failure: a late OnSuccess dependent is dependency-cancelled.
    let late = put(&g, &job(9, 0, &[dep(1, Gate::OnSuccess)]));
    assert!(dependency_cancelled(late.outcome()), "{:?}", late.outcome());
    drop(late);
    let before = generation(&g, 1);
    let again = put(&g, &job(1, 0, &[]));
    assert_eq!(generation(&g, 1), before + 1);
    drop(again);

    // Woken while awaiting: another thread drops the handle.
    let h = put(&g, &job(2, 0, &[]));
    let r = g.try_next(CPU).expect("job 2 is ready");
    let dropper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        drop(h);
    });
    timed(&rt, STUCK, r.cancelled())
        .expect("cancelled() was not woken by the drop on another thread");
    join_within(dropper, STUCK, "the thread dropping job 2's handle");
    // The identity submitted while the withdrawn job still runs: a new job, not a join.
    let before = generation(&g, 2);
    let new = put(&g, &job(2, 0, &[]));
    assert_eq!(generation(&g, 2), before + 1);
    assert_ne!(new.id(), r.id());
    let e = g.complete(r, JobOutcome::Succeeded).unwrap_err();
    assert_eq!(e.code(), Code::Cancelled, "{e:?}");
    assert_eq!(e.reason(), Reason::Withdrawn, "{e:?}");
    assert_eq!(drain(&g), vec![new.id()]);
    assert_eq!(new.outcome(), Some(JobOutcome::Succeeded));
    drop(new);
    assert_empty(&g, "after job 2");

    // `advance` tells a running job too (it is superseded; its completion is stale).
    let h = put(&g, &job(3, 0, &[]));
    let r = g.try_next(CPU).expect("job 3 is ready");
    assert!(!r.is_cancelled());
    g.advance(JobKey::new(3)).unwrap();
    assert!(r.is_cancelled(), "advance did not tell the running job");
    timed(&rt, STUCK, r.cancelled()).expect("cancelled() never resolved after the advance");
    let e = g.complete(r, JobOutcome::Succeeded).unwrap_err();
    assert_eq!(e.reason(), Reason::Superseded, "{e:?}");
    assert!(superseded(h.outcome()), "{:?}", h.outcome());
    drop(h);

    // And `remove`.
    let h = put(&g, &job(4, 0, &[]));
    let r = g.try_next(CPU).expect("job 4 is ready");
    g.remove(JobKey::new(4)).unwrap();
    assert!(r.is_cancelled(), "remove did not tell the running job");
    assert!(g.complete(r, JobOutcome::Succeeded).is_err());
    assert!(
        failed_with(h.outcome(), Code::Cancelled, Reason::Removed),
        "{:?}",
        h.outcome()
    );
    drop(h);
    assert_empty(&g, "at the end");
}

/// A withdrawn identity submitted again is admitted as a new job (not joined, not
/// `duplicate-key`) one generation on, and runs; for a queued job, a waiting one, and one
/// withdrawn by the cascade from its dependent. At the graph's last generation the
/// resubmission gets the advance's error.
fn d31_resubmission_after_withdrawal_starts_a_new_job<E: GraphEngine>() {
    let g = graph::<E>();
    // Queued.
    let h = put(&g, &job(1, 0, &[]));
    let (old, before) = (h.id(), generation(&g, 1));
    assert!(h.cancel());
    let new = match g.submit(&job(1, 0, &[])) {
        Ok(Admission::Admitted(h)) => h,
        other => panic!("a withdrawn identity again must be a new job: {other:?}"),
    };
    assert_eq!(generation(&g, 1), before + 1);
    assert_ne!(new.id(), old);
    assert_eq!(drain(&g), vec![new.id()]);
    assert_eq!(new.outcome(), Some(JobOutcome::Succeeded));
    // Its job ended now (succeeded): the identity is taken.
    let e = g.submit(&job(1, 0, &[])).unwrap_err();
    assert_eq!(e.reason(), Reason::DuplicateKey);
    drop(new);

    // Waiting (on a key with no producer), and its producer-less dependency: withdrawn by the
    // dependent's drop.
    let never = [dep(99, Gate::OnSuccess)];
    let p = put(&g, &job(2, 0, &never));
    let on_p = [dep(2, Gate::OnSuccess)];
    let d = put(&g, &job(3, 0, &on_p));
    drop(p);
    let (g2, g3) = (generation(&g, 2), generation(&g, 3));
    assert!(d.cancel(), "the dependent's cancel cancels it");
    assert_eq!(
        g.occupancy().nodes_used,
        0,
        "the cascade withdrew the producer"
    );
    let p = put(&g, &job(2, 0, &[]));
    let d = put(&g, &job(3, 0, &on_p));
    assert_eq!((generation(&g, 2), generation(&g, 3)), (g2 + 1, g3 + 1));
    assert_eq!(drain(&g), ids(&[&p, &d]));
    drop((p, d));
    assert_empty(&g, "after the resubmitted pair");

    // At the last generation: the resubmission is refused as `advance` would be.
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1)).unwrap();
    let small = Graph::builder(ledger)
        .class(1)
        .nodes(4)
        .max_generation(1)
        .build_with::<E>()
        .unwrap();
    let h = put(&small, &job(5, 0, &[]));
    assert!(h.cancel());
    let h = put(&small, &job(5, 0, &[]));
    assert_eq!(generation(&small, 5), 1);
    assert!(h.cancel());
    let e = small.submit(&job(5, 0, &[])).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::ResourceExhausted, Reason::GenerationExhausted)
    );
    assert_eq!(small.occupancy().nodes_used, 0);
}

/// An atomic batch of 6 (2 sources, 3 middle jobs, 1 sink), one source run to success and one
/// job running, its handle dropped: the running job is told, the queued and waiting ones end
/// at once, and nothing more reaches an executor; once the running one completes, the graph
/// is empty and every permit back.
fn d31_batch_handle_dropped_mid_run<E: GraphEngine>() {
    let g = graph::<E>();
    let (on_1, on_12, seq_2) = (
        [dep(1, Gate::OnSuccess)],
        [dep(1, Gate::OnSuccess), dep(2, Gate::OnSuccess)],
        [dep(2, Gate::Sequential)],
    );
    let sink = [
        dep(10, Gate::OnSuccess),
        dep(11, Gate::OnSuccess),
        dep(12, Gate::OnSuccess),
    ];
    // The sink first: a batch may list its jobs in any order.
    let batch = [
        job(20, 0, &sink),
        job(1, 0, &[]),
        job(2, 1, &[]),
        job(10, 0, &on_1),
        job(11, 1, &on_12),
        job(12, 1, &seq_2),
    ];
    let bh: BatchHandle<E> = match g.submit_batch_atomic(&batch, None).unwrap() {
        Admission::Admitted(b) => b,
        other => panic!("batch not admitted: {other:?}"),
    };
    let ids = bh.ids();
    assert_eq!(ids.len(), 6);
    // Source 1 runs to success, then one more job starts: source 2 or job 10 (both ready).
    let r = g.try_next(CPU).expect("a source is ready");
    let first = r.key();
    assert!(
        first == JobKey::new(1) || first == JobKey::new(2),
        "{first:?}"
    );
    g.complete(r, JobOutcome::Succeeded).unwrap();
    let running = g.try_next(CPU).expect("a second job is ready");
    assert!(!running.is_cancelled());
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.running), (6, 1), "{o:?}");
    drop(bh);
    assert!(running.is_cancelled(), "the running job was not told");
    assert!(
        g.try_next(CPU).is_none(),
        "a job of the dropped batch reached an executor"
    );
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.waiting, o.ready, o.running),
        (1, 0, 0, 1),
        "only the running job is left: {o:?}"
    );
    for (i, &id) in ids.iter().enumerate() {
        if id != running.id() {
            assert_freed(&g, id, &format!("job {i} of the dropped batch"));
        }
    }
    let running_id = running.id();
    let e = g.complete(running, JobOutcome::Succeeded).unwrap_err();
    assert_eq!(e.reason(), Reason::Withdrawn, "{e:?}");
    assert_freed(&g, running_id, "the running job after its completion");
    assert_empty(&g, "after the dropped batch's running job completed");
}

/// A handle awaited under `tokio::time::timeout` on a job no executor runs: the timeout
/// elapses and drops the future, which is the handle, so the job is cancelled and its
/// identity may start again. And a handle awaited in a task while another task runs the job
/// resolves to its outcome.
fn d31_handle_dropped_inside_tokio_timeout<E: GraphEngine>() {
    let g = graph::<E>();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let h = put(&g, &job(1, 0, &[]));
    let before = generation(&g, 1);
    let out = timed(&rt, Duration::from_millis(20), h);
    assert!(out.is_err(), "no executor ran the job, yet: {out:?}");
    assert_empty(&g, "after the timed-out handle was dropped");
    let again = put(&g, &job(1, 0, &[]));
    assert_eq!(generation(&g, 1), before + 1);
    drop(again);
    assert_empty(&g, "after the resubmitted job's handle went");

    // Awaited while another task runs the job.
    let h = put(&g, &job(2, 0, &[]));
    let id = h.id();
    let waiter = rt.spawn(async move { tokio::time::timeout(STUCK, h).await });
    let exec = {
        let g = g.clone();
        rt.spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let r = tokio::time::timeout(STUCK, g.next(CPU))
                .await
                .expect("the executor got no job")
                .expect("the scheduler is open");
            assert_eq!(r.id(), id);
            g.complete(r, JobOutcome::Succeeded).unwrap();
        })
    };
    let out = rt
        .block_on(waiter)
        .unwrap()
        .expect("the awaited handle did not resolve after the job completed");
    assert_eq!(out, JobOutcome::Succeeded);
    rt.block_on(exec).unwrap();
    assert_freed(&g, id, "the awaited job, its handle gone");

    // `(&mut handle).await` keeps the handle; the job is freed when it goes.
    let mut h = put(&g, &job(3, 0, &[]));
    let r = g.try_next(CPU).expect("job 3 is ready");
    g.complete(r, failed()).unwrap();
    let out = timed(&rt, STUCK, &mut h).expect("an ended job's handle did not resolve");
    assert!(matches!(out, JobOutcome::Failed(e) if e.reason() == Reason::Failed));
    assert_eq!(h.outcome(), Some(out));
    drop(h);
    assert_empty(&g, "at the end");
}

/// The second measure: a deduped job S shared by two DAGs of different tenants. DAG A
/// (tenant 0) submits S and its root (priority 9) on S; DAG B (tenant 1) submits S again (a
/// join) and its root (priority 2) on S. S runs. Dropping A's handles (its root, and its claim
/// on S) leaves S running for B, not told to stop, its effective priority back to B's root's.
/// Dropping B's handles then withdraws S: it is told, and its completion ends it `withdrawn`.
fn d31_shared_node_of_two_tenants_dags_runs_on_for_the_survivor_at_its_priority<E: GraphEngine>() {
    let g = graph::<E>();
    let s_a = put(&g, &job(1, 0, &[]));
    let on_s = [Dependency::on(JobKey::new(1), Gate::OnSuccess)];
    let root_a = put(
        &g,
        &JobSpec {
            priority: 9,
            ..job(10, 0, &on_s)
        },
    );
    let Admission::DedupeJoined(s_b) = g.submit(&job(1, 1, &[])).unwrap() else {
        panic!("S is live: B joins it")
    };
    let root_b = put(
        &g,
        &JobSpec {
            priority: 2,
            ..job(20, 1, &on_s)
        },
    );
    assert_eq!(
        g.effective(&s_a).unwrap().0,
        9,
        "S inherits A's root's priority"
    );
    let running = g.try_next(CPU).expect("S is ready");
    assert_eq!(running.key(), JobKey::new(1));
    // A goes: its root is withdrawn, S keeps running for B.
    assert!(root_a.cancel(), "A's root had no other demander");
    drop(s_a);
    assert!(!running.is_cancelled(), "B still wants S");
    assert_eq!(
        g.effective(running.id()).unwrap().0,
        2,
        "S runs on at the survivor's priority"
    );
    // B goes: S is wanted by nobody.
    drop(root_b);
    assert!(!running.is_cancelled(), "B's claim on S still holds it");
    drop(s_b);
    assert!(running.is_cancelled(), "nothing wants S any more");
    let e = g.complete(running, JobOutcome::Succeeded).unwrap_err();
    assert_eq!(e.reason(), Reason::Withdrawn);
    assert_empty(&g, "after the shared job's withdrawal");
}
