//! loom model of the graph's ready hand-off against a shutdown: a producer completes, which
//! makes its dependent ready and hands it to the scheduler (ledger permit, pull-mode submit),
//! while another thread shuts the graph down. In every interleaving the dependent ends exactly
//! once, `unavailable / shutdown` — refused before its permit, refused by the shut scheduler,
//! or queued and then taken back from the scheduler — and afterwards no slot, queue entry or
//! permit is left.

use super::loom_support::spec;
use super::{Admission, Dependency, Gate, Graph, JobKey, JobOutcome};
use crate::admission::{ClassSpec, Ledger, LedgerConfig};
use crate::error::Reason;
use crate::ids::ClassId;
use crate::sync::model::{model_deep, Outcomes};

#[test]
fn loom_graph_ready_hand_off_races_shutdown() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model_deep(move || {
        let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1)).unwrap();
        let g = Graph::builder(ledger)
            .class(1)
            .nodes(2)
            .edges(1)
            .keys(4)
            .max_deps(1)
            .build()
            .unwrap();
        let Ok(Admission::Admitted(p)) = g.submit(&spec(1, &[])) else {
            panic!("producer not admitted");
        };
        let running = g.try_next(ClassId(0)).expect("a free cell");
        let after = [Dependency {
            key: JobKey::new(1),
            gate: Gate::Sequential,
            pin: None,
        }];
        let Ok(Admission::Admitted(d)) = g.submit(&spec(2, &after)) else {
            panic!("dependent not admitted");
        };
        let completer = {
            let g = g.clone();
            crate::sync::model::spawn_deep(move || {
                g.complete(running, JobOutcome::Succeeded).unwrap();
                // Whether the dependent was queued by this hand-off before the shutdown.
                g.scheduler().queue_depth(ClassId(0)).unwrap()
            })
        };
        let stopper = {
            let g = g.clone();
            crate::sync::model::spawn_deep(move || g.shutdown())
        };
        let queued_after_complete = completer.join().unwrap();
        stopper.join().unwrap();
        assert_eq!(g.outcome(&p).unwrap(), Some(JobOutcome::Succeeded));
        let ended = g.outcome(&d).unwrap();
        assert!(
            matches!(ended, Some(JobOutcome::Failed(e)) if matches!(e.reason(), Reason::Shutdown)),
            "{ended:?}"
        );
        // The outcomes are collected: each read, then its one handle dropped, which frees the
        // job (its id is stale from then on).
        let (p_id, d_id) = (p.id(), d.id());
        assert!(p.outcome().is_some());
        drop(p);
        assert!(d.outcome().is_some());
        drop(d);
        assert!(g.outcome(p_id).is_err(), "the producer was not freed");
        assert!(g.outcome(d_id).is_err(), "the dependent was not freed");
        let o = g.occupancy();
        assert_eq!(
            (o.nodes_used, o.edges_used, o.waiting, o.ready, o.running),
            (0, 0, 0, 0, 0)
        );
        assert!(g.ledger().usage().is_zero());
        assert_eq!(g.scheduler().queue_depth(ClassId(0)).unwrap(), 0);
        seen.hit(if queued_after_complete > 0 {
            "queued-then-taken-back"
        } else {
            "refused-at-hand-off"
        });
    });
    eprintln!("hand-off vs shutdown: {outcomes:?}");
    outcomes.assert_exactly(&["queued-then-taken-back", "refused-at-hand-off"]);
}
