//! loom model of the fast-path publication of a job's key (SPEC D02): a submit that finds its key
//! free sets up its node (claims, state) and then publishes the key with one CAS; a second
//! submit of the same identity that reads the key live must find the node set up, or it takes
//! the job for gone and starts over.

use super::index::Found;
use super::{gen_of, low_of, Join, LockFreeGraph, Work, K_LIVE};
use crate::graph::loom_support::{bounds, spec};
use crate::graph::{rules, Admission, GraphEngine, JobKey, NodeRef};
use crate::sync::model::{model, Outcomes};
use crate::sync::{Arc, Ordering};

/// One look at key 1, as a joining submit makes it: the index, the key's state, then one claim
/// on the node the state names.
fn look(g: &LockFreeGraph) -> &'static str {
    let Found::Key(r) = g.find(rules::ident(JobKey::new(1))) else {
        return "absent";
    };
    // Acquire: as a joining submit's load (pairs with the publication).
    let st = g.key(r).state.load(Ordering::Acquire);
    if !g.state_valid(r, st) || st & 0xff != K_LIVE {
        return "not-live";
    }
    let node = NodeRef {
        idx: low_of(st) >> 8,
        gen: gen_of(st),
    };
    match g.join_node(node) {
        Join::Joined => "joined",
        other => panic!(
            "the key names a live job but its node reads {other:?}: the key's publication did \
             not carry the node's set-up"
        ),
    }
}

/// One thread submits key 1; the other looks once. Whenever the key reads live, the claim is
/// taken on a node whose claims word the submitter set up.
#[test]
fn loom_graph_a_joiner_that_sees_the_key_live_finds_the_node_set_up() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(2, 1, 2)));
        let submitter = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                match g.submit(&spec(1, &[]), crate::graph::rules::NO_DEADLINE, &mut w) {
                    Ok(Admission::Admitted(n)) => n,
                    other => panic!("the only submit was not admitted: {other:?}"),
                }
            })
        };
        let looker = {
            let g = g.clone();
            loom::thread::spawn(move || look(&g))
        };
        submitter.join().unwrap();
        let look = looker.join().unwrap();
        assert_eq!(g.occupancy().nodes_used, 1, "one job, joined or not");
        seen.hit(look);
    });
    eprintln!("{outcomes:?}");
    outcomes.assert_exactly(&["absent", "not-live", "joined"]);
}
