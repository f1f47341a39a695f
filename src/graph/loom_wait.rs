//! loom models of the graph's two wait/wake handshakes: a thread in `wait_batch` against the
//! job's completion (register as a sleeper → fence → check the outcome, against end → fence →
//! read the sleepers → notify), and a waiting submitter against an operation that frees room
//! (register the waker → fence → try, against free → fence → read the waiter count → wake) —
//! once with a completion and a collected outcome freeing the node, once with a refused submit
//! that took the free node and gave it back. In every interleaving the waiter returns (loom
//! fails a model whose waiter is never woken as a deadlock), and each model reaches both the
//! interleaving where the waiter found its answer at once and the one where it had to wait.

use super::loom_support::spec;
use super::{Admission, Dependency, Gate, Graph, JobKey, JobOutcome};
use crate::admission::{ClassSpec, Ledger, LedgerConfig};
use crate::ids::ClassId;
use crate::sync::model::{model_deep, Outcomes};
use crate::sync::{Arc, AtomicBool, Ordering};
use core::future::Future;
use core::pin::Pin;
use core::task::Context;

fn graph(nodes: u32, edges: u32) -> Graph {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1)).unwrap();
    Graph::builder(ledger)
        .class(1)
        .nodes(nodes)
        .edges(edges)
        .keys(4)
        .max_deps(1)
        .build()
        .unwrap()
}

/// Polls `f` to completion with loom's `block_on`, counting the polls.
fn block_on_counting<F: Future>(f: F) -> (F::Output, u32) {
    let mut f = Box::pin(f);
    let mut polls = 0;
    let out = loom::future::block_on(core::future::poll_fn(|cx: &mut Context<'_>| {
        polls += 1;
        Pin::as_mut(&mut f).poll(cx)
    }));
    (out, polls)
}

#[test]
fn loom_graph_wait_batch_against_completion() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model_deep(move || {
        let g = graph(1, 1);
        let Ok(Admission::Admitted(a)) = g.submit(&spec(1, &[])) else {
            panic!("not admitted");
        };
        let running = g.try_next(ClassId(0)).expect("a free cell");
        let completer = {
            let g = g.clone();
            crate::sync::model::spawn_deep(move || {
                g.complete(running, JobOutcome::Succeeded).unwrap()
            })
        };
        let ended_first = g.outcome(&a).unwrap().is_some();
        assert_eq!(g.wait_batch(&[a]).unwrap(), [JobOutcome::Succeeded]);
        // The handle went with the array: the ended job was freed.
        completer.join().unwrap();
        assert_eq!(g.occupancy().nodes_used, 0);
        seen.hit(if ended_first { "ended-first" } else { "waited" });
    });
    eprintln!("wait_batch vs complete: {outcomes:?}");
    outcomes.assert_exactly(&["ended-first", "waited"]);
}

#[test]
fn loom_graph_waiting_submit_against_freed_room() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model_deep(move || {
        let g = graph(1, 1);
        let Ok(Admission::Admitted(a)) = g.submit(&spec(1, &[])) else {
            panic!("not admitted");
        };
        let running = g.try_next(ClassId(0)).expect("a free cell");
        let freed = Arc::new(AtomicBool::new(false));
        let freer = {
            let (g, freed) = (g.clone(), freed.clone());
            crate::sync::model::spawn_deep(move || {
                g.complete(running, JobOutcome::Succeeded).unwrap();
                assert_eq!(g.outcome(&a).unwrap(), Some(JobOutcome::Succeeded));
                // Its one handle dropped: the ended job's node is freed.
                drop(a);
                freed.store(true, Ordering::SeqCst);
            })
        };
        let second = spec(2, &[]);
        let (out, polls) = block_on_counting(g.submit_waiting(&second));
        let b = out.expect("admitted once the node is free");
        freer.join().unwrap();
        assert!(freed.load(Ordering::SeqCst));
        let r = g.try_next(ClassId(0)).expect("the second job is ready");
        assert_eq!(r.id(), b.id());
        g.complete(r, JobOutcome::Succeeded).unwrap();
        assert_eq!(g.outcome(&b).unwrap(), Some(JobOutcome::Succeeded));
        drop(b);
        assert_eq!(g.occupancy().nodes_used, 0);
        seen.hit(if polls == 1 { "first-try" } else { "waited" });
    });
    eprintln!("waiting submit vs freed room: {outcomes:?}");
    outcomes.assert_exactly(&["first-try", "waited"]);
}

#[test]
fn loom_graph_waiting_submit_against_a_refused_submit() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model_deep(move || {
        // Two nodes and one edge: the producer and its dependent take the edge; one node is
        // free. A plain submit of a job with a dependency takes that node, finds no edge, gives
        // the node back and is refused — while a waiting submit of a job without dependencies
        // may look exactly then.
        let g = graph(3, 1);
        // Both handles are held: the jobs stay wanted.
        let Ok(Admission::Admitted(_producer)) = g.submit(&spec(1, &[])) else {
            panic!("producer not admitted");
        };
        let on_1 = [Dependency {
            key: JobKey::new(1),
            gate: Gate::Sequential,
            pin: None,
        }];
        let Ok(Admission::Admitted(_dependent)) = g.submit(&spec(2, &on_1)) else {
            panic!("dependent not admitted");
        };
        let refused = {
            let g = g.clone();
            crate::sync::model::spawn_deep(move || {
                let on_1 = [Dependency {
                    key: JobKey::new(1),
                    gate: Gate::Sequential,
                    pin: None,
                }];
                assert!(matches!(
                    g.submit(&spec(3, &on_1)),
                    Ok(Admission::Backpressured)
                ));
            })
        };
        let free = spec(0, &[]);
        let (out, polls) = block_on_counting(g.submit_waiting(&free));
        let _admitted =
            out.expect("admitted: the node is free once the refused submit gave it back");
        refused.join().unwrap();
        assert_eq!(g.occupancy().nodes_used, 3);
        seen.hit(if polls == 1 { "first-try" } else { "waited" });
    });
    eprintln!("waiting submit vs refused submit: {outcomes:?}");
    outcomes.assert_exactly(&["first-try", "waited"]);
}
