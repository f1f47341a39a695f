//! loom model of the lock-free graph's all-or-none batch (SPEC D04) against an observer: the
//! batch submits keys 1 and 2 (2 depending on 1) while the observer submits key 2, then key 1,
//! one by one. In every interleaving either the batch admitted both (the observer's submits
//! both join its jobs, SPEC D02) or none (the observer admitted both), never one each, and
//! no node or edge is left behind by the refused side.

use super::lockfree::{LockFreeGraph, Work};
use super::loom_support::spec;
use super::{Admission, Bounds, Dependency, Gate, GraphEngine, JobKey};
use crate::error::Reason;
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;

#[test]
fn loom_graph_atomic_batch_is_never_seen_half_admitted() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(Bounds {
            // Two for the batch and two for the observer: a batch that will be refused may
            // hold its nodes for a moment.
            nodes: 4,
            edges: 1,
            keys: 4,
            max_deps: 1,
            first_gen: 0,
            first_key_gen: 0,
            reserve: (0, 0, 0),
            max_gen: crate::graph::Version::MAX_GENERATION,
        }));
        let batcher = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let d = [Dependency {
                    key: JobKey::new(1),
                    gate: Gate::OnSuccess,
                    pin: None,
                }];
                let mut nodes = Vec::new();
                match g.submit_batch(
                    &[spec(1, &[]), spec(2, &d)],
                    &[crate::graph::rules::NO_DEADLINE; 2],
                    &mut nodes,
                    &mut w,
                ) {
                    Ok(Admission::Admitted(())) => {
                        g.seal_batch(&nodes, &mut w);
                        let mut ready = Vec::new();
                        while let Some(r) = g.pop_ready(&mut w) {
                            ready.push(r.key.key.0);
                        }
                        // Key 2 waits for key 1: only 1 is ready.
                        assert_eq!(ready, vec![1]);
                        true
                    }
                    Err(e) if matches!(e.reason(), Reason::DuplicateKey) => {
                        assert!(nodes.is_empty());
                        false
                    }
                    other => panic!("{other:?}"),
                }
            })
        };
        let observer = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let probe = |k| {
                    let mut w = Work::default();
                    match g.submit(&spec(k, &[]), crate::graph::rules::NO_DEADLINE, &mut w) {
                        Ok(Admission::Admitted(_)) => true,
                        // The batch's job is live: the probe joins it (SPEC D02).
                        Ok(Admission::DedupeJoined(_)) => false,
                        other => panic!("{other:?}"),
                    }
                };
                let second = probe(2);
                (second, probe(1))
            })
        };
        let batched = batcher.join().unwrap();
        let observed = observer.join().unwrap();
        assert_eq!(observed, (!batched, !batched), "batch admitted {batched}");
        let o = g.occupancy();
        assert_eq!(o.nodes_used, 2, "the refused side holds no node");
        assert_eq!(o.edges_used, u32::from(batched));
        seen.hit(if batched {
            "batch-admitted"
        } else {
            "observer-admitted"
        });
    });
    eprintln!("atomic batch: {outcomes:?}");
    outcomes.assert_exactly(&["batch-admitted", "observer-admitted"]);
}
