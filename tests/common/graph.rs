//! What the graph's rule tests share (`tests/graph_rules.rs`, `tests/graph_keys.rs`,
//! `tests/graph_callbacks.rs`): the macro that runs each generic test on both graph engines, and
//! the job-building helpers. Included with `#[path]`, so not every file uses every helper.
#![allow(dead_code)]

use fairway::graph::{
    Admission, Dependency, Gate, GraphEngine, JobHandle, JobId, JobKey, JobOutcome, JobSpec,
};
use fairway::oracle::GraphOn;
use fairway::{ClassId, Code, Reason, TenantId};

#[path = "bound.rs"]
mod bound;
#[allow(unused_imports)] // not every test file waits
pub use bound::{join_within, within, TEST_LIMIT};

/// Instantiates each generic rule test for the lock-free graph and the mutex graph, each
/// bounded by [`TEST_LIMIT`] (a hang fails naming the test).
#[allow(unused_macros)] // `tests/graph_callbacks.rs` runs its two tests by hand.
macro_rules! both_graphs {
    ($($name:ident),* $(,)?) => {
        mod lockfree {
            $( #[test] fn $name() {
                crate::graph_common::within(
                    crate::graph_common::TEST_LIMIT,
                    concat!("lockfree::", stringify!($name)),
                    super::$name::<fairway::oracle::LockFreeGraph>,
                );
            } )*
        }
        mod mutex {
            $( #[test] fn $name() {
                crate::graph_common::within(
                    crate::graph_common::TEST_LIMIT,
                    concat!("mutex::", stringify!($name)),
                    super::$name::<fairway::oracle::MutexGraph>,
                );
            } )*
        }
    };
}

/// The one class of the rule tests' graphs.
pub const CPU: ClassId = ClassId(0);

/// A dependency on `key` with `gate`.
pub fn dep(key: u64, gate: Gate) -> Dependency {
    Dependency {
        key: JobKey::new(key),
        gate,
        pin: None,
    }
}

/// A job of tenant 0, class [`CPU`], priority 0.
pub fn spec(key: u64, deps: &[Dependency]) -> JobSpec<'_> {
    JobSpec {
        key: JobKey::new(key),
        tenant: TenantId(0),
        class: CPU,
        priority: 0,
        deadline: None,
        deps,
    }
}

/// Submits [`spec`]`(key, deps)` and expects it admitted. The handle is the job's demand
/// (SPEC D31): the caller keeps it while the job should live (dropping it cancels a job
/// nothing else wants), or detaches it.
pub fn admit<E: GraphEngine>(g: &GraphOn<E>, key: u64, deps: &[Dependency]) -> JobHandle<E> {
    match g.submit(&spec(key, deps)).unwrap() {
        Admission::Admitted(h) => h,
        other => panic!("job {key} not admitted: {other:?}"),
    }
}

/// Runs every ready job of class [`CPU`] to success, in the order they come; returns their
/// ids (compare with `handle.id()`).
pub fn drain<E: GraphEngine>(g: &GraphOn<E>) -> Vec<JobId> {
    let mut ran = Vec::new();
    while let Some(job) = g.try_next(CPU) {
        ran.push(job.id());
        g.complete(job, JobOutcome::Succeeded).unwrap();
    }
    ran
}

/// The ids of `handles`, in order (to compare with what [`drain`] returns).
pub fn ids<E: GraphEngine>(handles: &[&JobHandle<E>]) -> Vec<JobId> {
    handles.iter().map(|h| h.id()).collect()
}

/// Whether `o` is a failure with `code` and `reason`.
pub fn failed_with(o: Option<JobOutcome>, code: Code, reason: Reason) -> bool {
    matches!(o, Some(JobOutcome::Failed(e)) if e.code() == code && e.reason() == reason)
}

/// Whether `o` is `cancelled / withdrawn` (SPEC D31: nothing wanted the job any more).
pub fn withdrawn(o: Option<JobOutcome>) -> bool {
    failed_with(o, Code::Cancelled, Reason::Withdrawn)
}

/// Whether `o` is `cancelled / dependency-cancelled` (SPEC D31: a gate met a cancelled
/// producer).
pub fn dependency_cancelled(o: Option<JobOutcome>) -> bool {
    failed_with(o, Code::Cancelled, Reason::DependencyCancelled)
}

/// Whether `o` is `cancelled / superseded`.
pub fn superseded(o: Option<JobOutcome>) -> bool {
    failed_with(o, Code::Cancelled, Reason::Superseded)
}
