//! What the graph's rule tests share (`tests/graph_rules.rs`, `tests/graph_keys.rs`,
//! `tests/graph_callbacks.rs`): the macro that runs each generic test on both graph engines, and
//! the job-building helpers. Included with `#[path]`, so not every file uses every helper.
#![allow(dead_code)]

use fairway::graph::{Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobSpec};
use fairway::{ClassId, TenantId};

/// Instantiates each generic rule test for the lock-free graph and the mutex graph.
#[allow(unused_macros)] // `tests/graph_callbacks.rs` runs its two tests by hand.
macro_rules! both_graphs {
    ($($name:ident),* $(,)?) => {
        mod lockfree {
            $( #[test] fn $name() { super::$name::<fairway::LockFreeGraph>(); } )*
        }
        mod mutex {
            $( #[test] fn $name() { super::$name::<fairway::MutexGraph>(); } )*
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
        deps,
    }
}

/// Submits [`spec`]`(key, deps)` and expects it admitted.
pub fn admit<E: GraphEngine>(g: &Graph<E>, key: u64, deps: &[Dependency]) -> JobHandle {
    match g.submit(&spec(key, deps)).unwrap() {
        Admission::Admitted(h) => h,
        other => panic!("job {key} not admitted: {other:?}"),
    }
}
