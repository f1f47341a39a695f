//! Set-up shared by the graph's loom models: small bounds and a job of tenant 0, class 0.

use super::{Bounds, Dependency, JobKey, JobSpec};
use crate::ids::{ClassId, TenantId};

/// Bounds of `nodes` nodes, `edges` edges and `keys` keys; one dependency per job, generations
/// from 0 to their largest.
pub(super) fn bounds(nodes: u32, edges: u32, keys: u32) -> Bounds {
    Bounds {
        nodes,
        edges,
        keys,
        max_deps: 1,
        max_gen: crate::graph::Version::MAX_GENERATION,
        first_gen: 0,
        first_key_gen: 0,
    }
}

/// A job on `key` of tenant 0 in class 0, priority 0, with `deps`.
pub(super) fn spec(key: u64, deps: &[Dependency]) -> JobSpec<'_> {
    JobSpec {
        key: JobKey::new(key),
        tenant: TenantId(0),
        class: ClassId(0),
        priority: 0,
        deadline: None,
        deps,
    }
}
