//! Misuse (SPEC Q-section hardening): bad input a host can pass to the scheduler, the graph and
//! the version directory gets a typed error — never a panic, a hang or a silent acceptance —
//! and changes nothing. Each row asserts the code and the reason (and the field, for
//! configuration errors). Also the decided edge cases: a `Duration::MAX` deadline is accepted
//! as "no deadline in practice"; a graph of `max_deps(0)` and a version directory of `keys(0)`
//! are refused at build; restoring a cell id past its class is a range error.

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{Admission, Dependency, Gate, Graph, JobKey, JobOutcome, JobSpec, WorkKey};
use fairway::versions::VersionDirectory;
use fairway::{
    AdmittedRequest, CancellationToken, CellId, ClassId, Code, Error, Reason, RequestId, Scheduler,
    TenantId,
};
use std::future::Future;
use std::time::Duration;

thread_local! {
    /// Rows asserted by the test running on this thread (each test has a thread of its own).
    static ROWS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Prints `MISUSE product=<product> rows=<n>` for the CI summary when the test passes (run with
/// `--nocapture` to see it).
struct Tally(&'static str);

impl Drop for Tally {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            println!("MISUSE product={} rows={}", self.0, ROWS.get());
        }
    }
}

#[track_caller]
fn row<T: std::fmt::Debug>(what: &str, r: Result<T, Error>, code: Code, reason: Reason) {
    ROWS.set(ROWS.get() + 1);
    match r {
        Err(e) => assert_eq!(
            (e.code(), e.reason()),
            (code, reason),
            "{what}: wrong error {e}"
        ),
        Ok(v) => panic!("{what}: accepted ({v:?}), expected {code:?} / {reason}"),
    }
}

/// A configuration at a limit, accepted.
#[track_caller]
fn accepted<T>(what: &str, r: Result<T, Error>) {
    ROWS.set(ROWS.get() + 1);
    if let Err(e) = r {
        panic!("{what}: refused at its limit: {e}");
    }
}

#[track_caller]
fn config_row<T: std::fmt::Debug>(what: &str, r: Result<T, Error>, field: &str) {
    ROWS.set(ROWS.get() + 1);
    match r {
        Err(e) => {
            assert_eq!(
                (e.code(), e.reason(), e.field()),
                (Code::InvalidArgument, Reason::Configuration, Some(field)),
                "{what}: wrong error {e}"
            );
        }
        Ok(v) => panic!("{what}: accepted ({v:?}), expected a configuration error on {field}"),
    }
}

fn ledger(classes: usize, tenants: u32) -> Ledger {
    const NAMES: [&str; 4] = ["c0", "c1", "c2", "c3"];
    Ledger::new(LedgerConfig::new(
        (0..classes).map(|i| ClassSpec::new(NAMES[i])).collect(),
        tenants,
    ))
    .unwrap()
}

fn admitted(l: &Ledger, id: u64, tenant: u32, class: u16) -> AdmittedRequest {
    let permit = l
        .admit(AdmissionRequest::new(RequestId(id), TenantId(tenant)).class(ClassId(class)))
        .unwrap();
    AdmittedRequest::new(permit, CancellationToken::new(RequestId(id)))
}

#[test]
fn q06_misuse_ledger_configuration_and_admission() {
    let _tally = Tally("ledger");
    config_row(
        "no classes",
        Ledger::new(LedgerConfig::new(vec![], 1)),
        "classes",
    );
    config_row(
        "zero tenants",
        Ledger::new(LedgerConfig::new(vec![ClassSpec::new("a")], 0)),
        "max_tenants",
    );
    let l = ledger(1, 2);
    row(
        "tenant past max_tenants",
        l.admit(AdmissionRequest::new(RequestId(1), TenantId(2))),
        Code::InvalidArgument,
        Reason::Tenant,
    );
    row(
        "unknown class",
        l.admit(AdmissionRequest::new(RequestId(2), TenantId(0)).class(ClassId(1))),
        Code::InvalidArgument,
        Reason::Class,
    );
    assert!(
        l.usage().is_zero(),
        "a refused admission reserved something"
    );
}

#[test]
fn q06_misuse_scheduler_configuration_and_calls() {
    let _tally = Tally("scheduler");
    let l = ledger(2, 2);
    config_row(
        "a class of zero cells",
        Scheduler::builder(l.clone())
            .class(0, 8)
            .class(1, 8)
            .build()
            .map(drop),
        "cells",
    );
    config_row(
        "fewer classes than the ledger",
        Scheduler::builder(l.clone()).class(1, 8).build().map(drop),
        "classes",
    );
    let s = Scheduler::builder(l.clone())
        .payload::<u32>()
        .class(2, 8)
        .class(1, 8)
        .build()
        .unwrap();
    // Restores: out of range, not quarantined, unknown class.
    row(
        "restore past the class",
        s.restore_cell(ClassId(0), CellId(2)),
        Code::InvalidArgument,
        Reason::CellRange,
    );
    row(
        "restore of a free cell",
        s.restore_cell(ClassId(0), CellId(0)),
        Code::InvalidArgument,
        Reason::CellNotQuarantined,
    );
    row(
        "restore in an unknown class",
        s.restore_cell(ClassId(9), CellId(0)),
        Code::InvalidArgument,
        Reason::Class,
    );
    row(
        "observers of an unknown class",
        s.quarantined_cells(ClassId(9)).map(|c| c.count()),
        Code::InvalidArgument,
        Reason::Class,
    );
    row(
        "pull from an unknown class",
        s.try_next(ClassId(9)).map(|j| j.is_some()),
        Code::InvalidArgument,
        Reason::Class,
    );
    // A `Duration::MAX` deadline: accepted, it never expires, the request is granted.
    let far = l
        .admit(AdmissionRequest::new(RequestId(10), TenantId(0)).deadline(Duration::MAX))
        .unwrap();
    assert_eq!(far.deadline(), Some(u64::MAX));
    let a = s
        .try_enqueue(AdmittedRequest::new(
            far,
            CancellationToken::new(RequestId(10)),
        ))
        .expect("a Duration::MAX deadline is no deadline in practice");
    a.release();
    // After shutdown: new requests are refused with the shutdown error, nothing is reserved.
    s.shutdown();
    let e = s
        .submit(admitted(&l, 11, 0, 0), 1)
        .map(|_| ())
        .unwrap_err()
        .error;
    assert_eq!(
        (e.code(), e.reason()),
        (Code::Unavailable, Reason::Shutdown)
    );
    let e = s.try_enqueue(admitted(&l, 12, 1, 1)).unwrap_err().error;
    assert_eq!(
        (e.code(), e.reason()),
        (Code::Unavailable, Reason::Shutdown)
    );
    assert!(l.usage().is_zero(), "{:?}", l.usage());
}

fn graph() -> Graph {
    Graph::builder(ledger(1, 2))
        .class(2)
        .nodes(16)
        .edges(16)
        .keys(32)
        .max_deps(4)
        .build()
        .unwrap()
}

fn job(key: u64, deps: &[Dependency]) -> JobSpec<'_> {
    JobSpec {
        key: JobKey::new(key),
        tenant: TenantId(0),
        class: ClassId(0),
        priority: 0,
        deadline: None,
        deps,
    }
}

#[test]
fn q06_misuse_graph_configuration() {
    let _tally = Tally("graph-config");
    let b = || Graph::builder(ledger(1, 2)).class(1);
    config_row("nodes 0", b().nodes(0).build().map(drop), "nodes");
    config_row("edges 0", b().edges(0).build().map(drop), "edges");
    config_row("keys 0", b().keys(0).build().map(drop), "keys");
    config_row("max_deps 0", b().max_deps(0).build().map(drop), "max_deps");
    config_row(
        "max_deps 1,025",
        b().max_deps(1025).build().map(drop),
        "max_deps",
    );
    b().max_deps(1024)
        .build()
        .expect("max_deps 1,024 is the limit, accepted");
}

#[test]
fn q06_misuse_graph_calls() {
    let _tally = Tally("graph");
    let g = graph();
    let before = g.occupancy();
    let dep = |k| Dependency::on(JobKey::new(k), Gate::OnSuccess);
    row(
        "key past WorkKey::MAX",
        g.submit(&job(WorkKey::MAX + 1, &[])),
        Code::InvalidArgument,
        Reason::KeyRange,
    );
    row(
        "dependency key past WorkKey::MAX",
        g.submit(&job(1, &[dep(WorkKey::MAX + 1)])),
        Code::InvalidArgument,
        Reason::KeyRange,
    );
    row(
        "more dependencies than max_deps",
        g.submit(&job(1, &[dep(2), dep(3), dep(4), dep(5), dep(6)])),
        Code::InvalidArgument,
        Reason::TooManyDependencies,
    );
    row(
        "a job depending on itself",
        g.submit(&job(1, &[dep(1)])),
        Code::InvalidArgument,
        Reason::Cycle,
    );
    let mut bad_class = job(1, &[]);
    bad_class.class = ClassId(5);
    row(
        "unknown class",
        g.submit(&bad_class),
        Code::InvalidArgument,
        Reason::Class,
    );
    let mut bad_tenant = job(1, &[]);
    bad_tenant.tenant = TenantId(2);
    row(
        "tenant past the ledger",
        g.submit(&bad_tenant),
        Code::InvalidArgument,
        Reason::Tenant,
    );
    assert_eq!(g.occupancy(), before, "a refused submit changed the graph");
    // Key operations on keys never named.
    row(
        "advance of an unknown key",
        g.advance(JobKey::new(40)),
        Code::NotFound,
        Reason::UnknownKey,
    );
    row(
        "remove of an unknown key",
        g.remove(JobKey::new(40)),
        Code::NotFound,
        Reason::UnknownKey,
    );
    // A pin the key has not reached.
    let Admission::Admitted(h) = g.submit(&job(7, &[])).unwrap() else {
        panic!("admitted")
    };
    let mut ahead = g.version(JobKey::new(7)).unwrap();
    ahead.generation += 1;
    row(
        "a pin ahead of its key",
        g.submit(&job(
            8,
            &[Dependency::pinned(JobKey::new(7), Gate::OnSuccess, ahead)],
        )),
        Code::InvalidArgument,
        Reason::UnknownVersion,
    );
    // Stale and foreign handles (SPEC D31: a job is freed when it ended and its last handle
    // was dropped; its id is stale from then on).
    let r = g.try_next(ClassId(0)).unwrap();
    g.complete(r, JobOutcome::Succeeded).unwrap();
    assert_eq!(g.outcome(&h).unwrap(), Some(JobOutcome::Succeeded));
    let freed = h.id();
    drop(h);
    row(
        "the id of a job that ended and whose handle was dropped",
        g.outcome(freed),
        Code::NotFound,
        Reason::StaleHandle,
    );
    row(
        "the urgency of a freed job",
        g.effective(freed),
        Code::NotFound,
        Reason::StaleHandle,
    );
    let other = graph();
    let Admission::Admitted(foreign) = other.submit(&job(1, &[])).unwrap() else {
        panic!("admitted")
    };
    let Admission::DedupeJoined(joiner) = other.submit(&job(1, &[])).unwrap() else {
        panic!("joined")
    };
    row(
        "another graph's handle",
        g.outcome(&foreign),
        Code::PermissionDenied,
        Reason::ForeignHandle,
    );
    row(
        "another graph's job id",
        g.outcome(foreign.id()),
        Code::PermissionDenied,
        Reason::ForeignHandle,
    );
    row(
        "wait_batch naming another graph's handle",
        g.wait_batch(std::slice::from_ref(&foreign)),
        Code::PermissionDenied,
        Reason::ForeignHandle,
    );
    // Owned handles cannot repeat (the old duplicate-handle refusal is gone): two handles of
    // one job (the submitter's and a joiner's) in one `wait_batch` are each read.
    let r = other.try_next(ClassId(0)).unwrap();
    other.complete(r, JobOutcome::Succeeded).unwrap();
    let both = [foreign, joiner];
    let read = other.wait_batch(&both);
    assert!(
        matches!(&read, Ok(o) if *o == [JobOutcome::Succeeded; 2]),
        "{read:?}"
    );
    accepted("wait_batch naming two handles of one job", read);
    drop(both);
    assert_eq!(other.occupancy().nodes_used, 0);
    // A job that nothing wants any more is withdrawn (SPEC D31): a running one is told, its
    // completion is refused `cancelled / withdrawn`, and a dependent that linked to it meanwhile
    // fails `cancelled / dependency-cancelled` on its `OnSuccess` gate.
    let Admission::Admitted(p) = g.submit(&job(30, &[])).unwrap() else {
        panic!("admitted")
    };
    let running = g.try_next(ClassId(0)).unwrap();
    assert_eq!(running.key(), JobKey::new(30));
    drop(p);
    assert!(running.is_cancelled(), "its last handle was dropped");
    let Admission::Admitted(late) = g.submit(&job(31, &[dep(30)])).unwrap() else {
        panic!("admitted")
    };
    row(
        "complete of a running job nothing wants any more",
        g.complete(running, JobOutcome::Succeeded),
        Code::Cancelled,
        Reason::Withdrawn,
    );
    let as_result = |o: Option<JobOutcome>| match o {
        Some(JobOutcome::Failed(e)) => Err(e),
        other => Ok(other),
    };
    row(
        "an OnSuccess dependent of a withdrawn job",
        as_result(g.outcome(&late).unwrap()),
        Code::Cancelled,
        Reason::DependencyCancelled,
    );
    drop(late);
    assert_eq!(g.occupancy().nodes_used, 0, "{:?}", g.occupancy());
    // After shutdown.
    g.shutdown();
    row(
        "submit after shutdown",
        g.submit(&job(20, &[])),
        Code::Unavailable,
        Reason::Shutdown,
    );
}

#[test]
fn q06_misuse_version_directory() {
    let _tally = Tally("versions");
    let b = VersionDirectory::builder;
    config_row("keys 0", b().keys(0).build().map(drop), "keys");
    config_row("versions 0", b().versions(0).build().map(drop), "versions");
    config_row(
        "root_epochs 1",
        b().root_epochs(1).build().map(drop),
        "root_epochs",
    );
    let d = b().keys(4).versions(16).build().unwrap();
    row(
        "publish past the key capacity",
        d.publish(4, 1),
        Code::InvalidArgument,
        Reason::KeyRange,
    );
    row(
        "advance of a key never published",
        d.advance(0),
        Code::NotFound,
        Reason::UnknownKey,
    );
    let root = d.capture();
    row(
        "lookup past the key capacity",
        root.lookup(4),
        Code::InvalidArgument,
        Reason::KeyRange,
    );
}

/// Every configuration limit at 0 or 1, at its maximum and one past it (SPEC Q06): the limits the
/// builders document are accepted, one past each is refused naming the field. Maxima whose
/// build would allocate gigabytes are checked through `Builder::footprint`, which validates
/// without allocating.
#[test]
fn q06_configs_at_and_past_every_limit() {
    use fairway::graph::Version;
    use fairway::ClassConfig;
    let _tally = Tally("limits");
    // The ledger.
    let specs = |n: usize| -> Vec<ClassSpec> {
        (0..n)
            .map(|i| ClassSpec::new(Box::leak(format!("c{i}").into_boxed_str())))
            .collect()
    };
    accepted("one tenant", Ledger::new(LedgerConfig::new(specs(1), 1)));
    config_row(
        "max_tenants past the limit",
        Ledger::new(LedgerConfig::new(specs(1), LedgerConfig::MAX_TENANTS + 1)),
        "max_tenants",
    );
    config_row(
        "65,537 classes",
        Ledger::new(LedgerConfig::new(specs(65_537), 1)),
        "classes",
    );
    config_row(
        "two classes of one name",
        Ledger::new(LedgerConfig::new(
            vec![ClassSpec::new("a"), ClassSpec::new("a")],
            1,
        )),
        "classes.name",
    );
    // The scheduler.
    let l = ledger(1, 2);
    let b = |cells, queue| Scheduler::builder(l.clone()).class(cells, queue);
    accepted("one cell, one queue slot", b(1, 1).build().map(drop));
    accepted(
        "the most cells",
        b(ClassConfig::MAX_CELLS, 1).footprint().map(drop),
    );
    config_row(
        "one cell past the most",
        b(ClassConfig::MAX_CELLS + 1, 1).footprint().map(drop),
        "cells",
    );
    config_row(
        "one cell past the most, built",
        b(ClassConfig::MAX_CELLS + 1, 1).build().map(drop),
        "cells",
    );
    accepted(
        "the largest queue",
        b(1, ClassConfig::MAX_QUEUE_CAPACITY).footprint().map(drop),
    );
    config_row(
        "one queue slot past the largest",
        b(1, ClassConfig::MAX_QUEUE_CAPACITY + 1)
            .footprint()
            .map(drop),
        "queue_capacity",
    );
    config_row(
        "one queue slot past the largest, built",
        b(1, ClassConfig::MAX_QUEUE_CAPACITY + 1).build().map(drop),
        "queue_capacity",
    );
    config_row(
        "starvation after zero",
        b(1, 1).starvation_after(Duration::ZERO).build().map(drop),
        "starvation_after",
    );
    config_row(
        "more classes than the ledger",
        b(1, 1).class(1, 1).build().map(drop),
        "classes",
    );
    // The graph.
    let g = || Graph::builder(ledger(1, 2)).class(1);
    accepted(
        "one node, one edge, one key, one dependency",
        g().nodes(1).edges(1).keys(1).max_deps(1).build().map(drop),
    );
    config_row(
        "nodes past 2^23",
        g().nodes((1 << 23) + 1).build().map(drop),
        "nodes",
    );
    config_row(
        "edges past 2^30",
        g().edges((1 << 30) + 1).build().map(drop),
        "edges",
    );
    config_row(
        "keys past 2^30",
        g().keys((1 << 30) + 1).build().map(drop),
        "keys",
    );
    accepted(
        "the largest generation",
        g().max_generation(Version::MAX_GENERATION)
            .build()
            .map(drop),
    );
    config_row(
        "a generation past the largest",
        g().max_generation(Version::MAX_GENERATION + 1)
            .build()
            .map(drop),
        "max_generation",
    );
    // The version directory.
    let v = VersionDirectory::builder;
    accepted(
        "one key, one version",
        v().keys(1).versions(1).build().map(drop),
    );
    config_row(
        "keys past 2^32",
        v().keys((1 << 32) + 1).build().map(drop),
        "keys",
    );
    config_row(
        "versions at 2^32 - 1",
        v().versions((1 << 32) - 1).build().map(drop),
        "versions",
    );
    accepted("two root epochs", v().root_epochs(2).build().map(drop));
    accepted(
        "65,535 root epochs",
        v().root_epochs(65_535).build().map(drop),
    );
    config_row(
        "65,536 root epochs",
        v().root_epochs(65_536).build().map(drop),
        "root_epochs",
    );
}

/// Foreign, mismatched, duplicate and stale inputs to the scheduler, and every entry point after
/// shutdown (SPEC Q06): each is a typed error, the ledger keeps nothing reserved, and the
/// request a stale handle once named is not touched.
#[test]
fn q06_misuse_scheduler_handles_identities_and_after_shutdown() {
    let _tally = Tally("scheduler-handles");
    let (l1, l2) = (ledger(1, 2), ledger(1, 2));
    let build = |l: &Ledger| {
        Scheduler::builder(l.clone())
            .payload::<u32>()
            .class(1, 8)
            .build()
            .unwrap()
    };
    let (s1, s2) = (build(&l1), build(&l2));
    row(
        "a permit of another ledger",
        s1.try_enqueue(admitted(&l2, 1, 0, 0))
            .map(drop)
            .map_err(|e| e.error),
        Code::PermissionDenied,
        Reason::ForeignAdmission,
    );
    row(
        "a permit of another ledger, pull mode",
        s1.submit(admitted(&l2, 2, 0, 0), 0).map_err(|e| e.error),
        Code::PermissionDenied,
        Reason::ForeignAdmission,
    );
    let permit = l1
        .admit(AdmissionRequest::new(RequestId(3), TenantId(0)))
        .unwrap();
    row(
        "a token of another request",
        s1.try_enqueue(AdmittedRequest::new(
            permit,
            CancellationToken::new(RequestId(4)),
        ))
        .map(drop)
        .map_err(|e| e.error),
        Code::InvalidArgument,
        Reason::CancellationIdentity,
    );
    // One cell, held: what follows queues.
    let held = s1.try_enqueue(admitted(&l1, 5, 0, 0)).unwrap();
    let queued = s1.submit(admitted(&l1, 6, 1, 0), 60).unwrap();
    row(
        "the id of a request still queued",
        s1.submit(admitted(&l1, 6, 1, 0), 61).map_err(|e| e.error),
        Code::AlreadyExists,
        Reason::DuplicateRequest,
    );
    row(
        "the id of a request still running",
        s1.try_enqueue(admitted(&l1, 5, 1, 0))
            .map(drop)
            .map_err(|e| e.error),
        Code::AlreadyExists,
        Reason::DuplicateRequest,
    );
    row(
        "a handle of another scheduler",
        s2.cancel(queued),
        Code::PermissionDenied,
        Reason::ForeignHandle,
    );
    // The queued job is granted and run: its handle is stale now.
    held.release();
    let job = s1.try_next(ClassId(0)).unwrap().expect("the queued job");
    job.assignment.release();
    let later = s1.submit(admitted(&l1, 7, 1, 0), 70).unwrap();
    row(
        "a handle of a request that ran",
        s1.cancel(queued),
        Code::NotFound,
        Reason::UnknownRequest,
    );
    let next = s1
        .try_next(ClassId(0))
        .unwrap()
        .expect("the stale cancel touched nothing");
    assert_eq!(next.payload, 70);
    next.assignment.release();
    row(
        "a handle of a request that ran, twice",
        s1.cancel(later),
        Code::NotFound,
        Reason::UnknownRequest,
    );
    // After shutdown every entry point answers `unavailable / shutdown`, and gives back what
    // it was handed where it has a way to.
    s1.shutdown();
    row(
        "try_enqueue after shutdown",
        s1.try_enqueue(admitted(&l1, 8, 0, 0))
            .map(drop)
            .map_err(|e| e.error),
        Code::Unavailable,
        Reason::Shutdown,
    );
    row(
        "enqueue_blocking after shutdown",
        s1.enqueue_blocking(admitted(&l1, 9, 0, 0)).map(drop),
        Code::Unavailable,
        Reason::Shutdown,
    );
    row(
        "submit_blocking after shutdown",
        s1.submit_blocking(admitted(&l1, 10, 0, 0), 1)
            .map(drop)
            .map_err(|e| e.error),
        Code::Unavailable,
        Reason::Shutdown,
    );
    let mut waiting = s1.submit_async(admitted(&l1, 11, 0, 0), 2);
    let polled = std::pin::Pin::new(&mut waiting)
        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
    match polled {
        std::task::Poll::Ready(r) => row(
            "submit_async after shutdown",
            r.map(drop).map_err(|e| e.error),
            Code::Unavailable,
            Reason::Shutdown,
        ),
        std::task::Poll::Pending => panic!("submit_async after shutdown: still waiting"),
    }
    assert!(
        s1.try_next(ClassId(0)).unwrap().is_none(),
        "nothing is delivered after shutdown"
    );
    assert!(l1.usage().is_zero(), "{:?}", l1.usage());
    assert!(l2.usage().is_zero(), "{:?}", l2.usage());
}

/// Witnesses (SPEC Q06, D23): one of another graph is `permission-denied / foreign-handle`; one
/// whose key was advanced or removed is `not-found / stale-witness`.
#[test]
fn q06_misuse_graph_witnesses() {
    let _tally = Tally("graph-witnesses");
    let (g, other) = (graph(), graph());
    // Held: a job whose handle is dropped is withdrawn (SPEC D31).
    let _job = g.submit(&job(1, &[])).unwrap();
    let running = g.try_next(ClassId(0)).unwrap();
    let w = g.witness(&running);
    g.check_witness(&w).expect("a running job's own witness");
    row(
        "another graph's witness",
        other.check_witness(&w),
        Code::PermissionDenied,
        Reason::ForeignHandle,
    );
    g.advance(JobKey::new(1)).unwrap();
    row(
        "a witness of a superseded version",
        g.check_witness(&w),
        Code::NotFound,
        Reason::StaleWitness,
    );
    let _ = g.complete(running, JobOutcome::Succeeded);
    g.remove(JobKey::new(1)).unwrap();
    row(
        "a witness of a removed key",
        g.check_witness(&w),
        Code::NotFound,
        Reason::StaleWitness,
    );
}
