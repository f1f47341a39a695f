//! Set-up shared by the graph's loom models: small bounds, a job of tenant 0, class 0, and the
//! collection of an ended job's outcome as its owned handle makes it (SPEC D31).

use super::{Bounds, Dependency, GraphEngine, JobKey, JobOutcome, JobSpec, NodeRef};
use crate::error::Error;
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
        reserve: (0, 0, 0),
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

/// What a handle of the ended job on `node` does when its owner reads the outcome and drops
/// it (SPEC D31; what `take_outcome` did): a peek at the outcome, then the claim given back
/// (the last one frees the slot). The peek's result; the release must not have cancelled
/// anything (the job had ended).
pub(super) fn collect<E: GraphEngine>(g: &E, node: NodeRef) -> Result<Option<JobOutcome>, Error> {
    let out = g.outcome(node, false)?;
    let mut w = E::Work::default();
    let cancelled = g.release(node, false, &mut w)?;
    assert!(!cancelled, "collecting an outcome cancelled the job");
    Ok(out)
}
