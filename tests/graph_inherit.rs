//! SPEC D30: inheritance of urgency through the graph, on both graph engines.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::graph::{Admission, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome, JobSpec};
use fairway::oracle::GraphOn;
use fairway::{Clock, ManualClock, TenantId};
use std::sync::Arc;
use std::time::Duration;

#[macro_use]
#[path = "common/graph.rs"]
mod graph_common;
use graph_common::*;

both_graphs!(
    d30_urgent_demander_reorders_a_queued_producer_within_its_tenant,
    d30_inherited_deadline_relaxes_when_the_demander_leaves,
    d30_departure_drops_to_the_remaining_demander_and_fairness_holds,
    d30_fan_in_of_1000_and_a_chain_of_10000,
    d30_effective_values_are_visible_and_flow_only_upstream,
);

const SEC: u64 = 1_000_000_000;

fn graph_on<E: GraphEngine>(
    tenants: u32,
    cells: u32,
    nodes: u32,
    clock: Arc<ManualClock>,
) -> GraphOn<E> {
    let ledger = Ledger::with_clock(
        LedgerConfig::new(vec![ClassSpec::new("cpu")], tenants).tenant_limits(Limits::UNLIMITED),
        clock,
    )
    .unwrap();
    Graph::builder(ledger)
        .class(cells)
        .nodes(nodes)
        .edges(nodes)
        .keys(nodes * 2)
        .build_with::<E>()
        .unwrap()
}

fn job(
    key: u64,
    tenant: u32,
    priority: u8,
    deadline: Option<u64>,
    deps: &[fairway::graph::Dependency],
) -> JobSpec<'_> {
    JobSpec {
        key: JobKey::new(key),
        tenant: TenantId(tenant),
        class: CPU,
        priority,
        deadline: deadline.map(Duration::from_secs),
        deps,
    }
}

fn put<E: GraphEngine>(g: &GraphOn<E>, spec: &JobSpec<'_>) -> JobHandle<E> {
    match g.submit(spec).unwrap() {
        Admission::Admitted(h) => h,
        other => panic!("not admitted: {other:?}"),
    }
}

/// (a) A low-priority job queued behind others of its tenant is granted next once an urgent
/// demander arrives.
fn d30_urgent_demander_reorders_a_queued_producer_within_its_tenant<E: GraphEngine>() {
    let g = graph_on::<E>(1, 1, 64, Arc::new(ManualClock::new()));
    let busy = put(&g, &job(1, 0, 0, None, &[]));
    let running = g.try_next(CPU).expect("the cell is free");
    assert_eq!(running.id(), busy.id());
    let _a = put(&g, &job(2, 0, 5, None, &[]));
    let _b = put(&g, &job(3, 0, 5, None, &[]));
    let low = put(&g, &job(4, 0, 0, None, &[]));
    assert_eq!(g.effective(&low).unwrap(), (0, None));
    let on_low = [dep(4, Gate::OnSuccess)];
    let urgent = put(&g, &job(10, 0, 9, None, &on_low));
    assert_eq!(
        g.effective(&low).unwrap(),
        (9, None),
        "inherited from its demander"
    );
    g.complete(running, JobOutcome::Succeeded).unwrap();
    let next = g.try_next(CPU).expect("queued work");
    assert_eq!(
        next.id(),
        low.id(),
        "the raised job is granted next within its tenant"
    );
    g.complete(next, JobOutcome::Succeeded).unwrap();
    drain(&g);
    assert_eq!(g.outcome(&urgent).unwrap(), Some(JobOutcome::Succeeded));
}

/// (b) A deadline inherited by a queued producer, relaxed when its demander is removed or
/// superseded: the producer then outlives the demander's deadline.
fn d30_inherited_deadline_relaxes_when_the_demander_leaves<E: GraphEngine>() {
    let clock = Arc::new(ManualClock::new());
    let g = graph_on::<E>(1, 1, 64, clock.clone());
    let now = clock.now();
    let _busy = put(&g, &job(1, 0, 0, None, &[]));
    let running = g.try_next(CPU).expect("the cell is free");
    let p = put(&g, &job(2, 0, 0, None, &[]));
    let on_p = [dep(2, Gate::OnSuccess)];
    let d1 = put(&g, &job(3, 0, 0, Some(10), &on_p));
    assert_eq!(g.effective(&p).unwrap(), (0, Some(now + 10 * SEC)));
    let d2 = put(&g, &job(4, 0, 0, Some(5), &on_p));
    assert_eq!(g.effective(&p).unwrap(), (0, Some(now + 5 * SEC)));
    // The tighter demander is superseded: back to the other's deadline.
    g.advance(JobKey::new(4)).unwrap();
    assert!(g.outcome(&d2).unwrap().is_some());
    assert_eq!(g.effective(&p).unwrap(), (0, Some(now + 10 * SEC)));
    // The other is removed: back to none.
    g.remove(JobKey::new(3)).unwrap();
    assert!(g.outcome(&d1).unwrap().is_some());
    assert_eq!(g.effective(&p).unwrap(), (0, None));
    // Past both deadlines, the producer still runs: its request was relaxed in place.
    clock.advance(Duration::from_secs(20));
    g.complete(running, JobOutcome::Succeeded).unwrap();
    let next = g.try_next(CPU).expect("the producer is still queued");
    assert_eq!(next.id(), p.id());
    g.complete(next, JobOutcome::Succeeded).unwrap();
    assert_eq!(g.outcome(&p).unwrap(), Some(JobOutcome::Succeeded));
}

/// (c) Two demanders from different tenants; the higher leaves and the job drops to the
/// other's priority, while a third tenant's share of grants stays fair throughout (grants
/// while it is raised, and after).
fn d30_departure_drops_to_the_remaining_demander_and_fairness_holds<E: GraphEngine>() {
    let g = graph_on::<E>(3, 1, 512, Arc::new(ManualClock::new()));
    // Every tenant backlogged with 60 jobs; tenant 0's first 12 at priority 10 (ahead of the
    // raised job while it is raised), the next 10 at 8, the rest at 5.
    let mut tenant_of = std::collections::HashMap::new();
    // Every handle is kept: a dropped one would cancel its job (SPEC D31).
    let mut kept = Vec::new();
    for i in 0..60u64 {
        for t in 0..3u32 {
            let prio = match (t, i) {
                (0, 0..12) => 10,
                (0, 12..22) => 8,
                _ => 5,
            };
            let h = put(&g, &job(1000 + i * 3 + u64::from(t), t, prio, None, &[]));
            tenant_of.insert(h.id(), t);
            kept.push(h);
        }
    }
    let p = put(&g, &job(1, 0, 0, None, &[]));
    tenant_of.insert(p.id(), 0);
    let on_p = [dep(1, Gate::OnSuccess)];
    let _high = put(&g, &job(2, 1, 9, None, &on_p));
    let low = put(&g, &job(3, 2, 7, None, &on_p));
    tenant_of.insert(low.id(), 2);
    assert_eq!(g.effective(&p).unwrap().0, 9);
    let mut grants = Vec::new();
    let mut tenant0 = Vec::new();
    let run = |n: usize, grants: &mut Vec<u32>, tenant0: &mut Vec<_>| {
        for _ in 0..n {
            let job = g.try_next(CPU).expect("backlogged");
            let t = tenant_of[&job.id()];
            grants.push(t);
            if t == 0 {
                tenant0.push(job.id());
            }
            g.complete(job, JobOutcome::Succeeded).unwrap();
        }
    };
    // Grants while the job is raised (tenant 0 gets its priority-10 jobs), then the higher
    // demander leaves, then the rest.
    run(30, &mut grants, &mut tenant0);
    assert_eq!(g.effective(&p).unwrap().0, 9, "still raised");
    g.remove(JobKey::new(2)).unwrap();
    assert_eq!(
        g.effective(&p).unwrap().0,
        7,
        "down to the remaining demander"
    );
    run(120, &mut grants, &mut tenant0);
    let at = tenant0.iter().position(|&h| h == p.id());
    assert_eq!(
        at,
        Some(22),
        "after tenant 0's priority-10 and priority-8 jobs, before its priority-5 ones"
    );
    // Tenant 2's grants over any window of 3k grants are within one of k.
    for k in 1..=10 {
        for w in grants.windows(3 * k) {
            let mine = w.iter().filter(|&&t| t == 2).count() as i64;
            assert!(
                (mine - k as i64).abs() <= 1,
                "window of {}: {mine} grants",
                3 * k
            );
        }
    }
}

/// (d) 1,000 demanders on one producer, the most urgent leaving one by one; a chain of 10^4
/// whose root is raised from the far end.
fn d30_fan_in_of_1000_and_a_chain_of_10000<E: GraphEngine>() {
    let clock = Arc::new(ManualClock::new());
    let g = graph_on::<E>(1, 1, 12_000, clock.clone());
    let now = clock.now();
    // The producer waits on a key that has no producer, so it stays put.
    let never = [dep(999_999, Gate::Sequential)];
    let p = put(&g, &job(1, 0, 0, None, &never));
    let on_p = [dep(1, Gate::Sequential)];
    // Demander i: priority i / 4 and deadline 2000 - i seconds, so later ones are more urgent.
    // Their handles are kept: each leaves by its key's removal, not by a drop (SPEC D31).
    let demanders: Vec<_> = (0..1000u64)
        .map(|i| put(&g, &job(10 + i, 0, (i / 4) as u8, Some(2000 - i), &on_p)))
        .collect();
    assert_eq!(g.effective(&p).unwrap(), (249, Some(now + 1001 * SEC)));
    for i in (0..1000u64).rev() {
        g.remove(JobKey::new(10 + i)).unwrap();
        let want = if i == 0 {
            (0, None)
        } else {
            (((i - 1) / 4) as u8, Some(now + (2000 - (i - 1)) * SEC))
        };
        assert_eq!(g.effective(&p).unwrap(), want, "after demander {i} left");
    }
    drop(demanders);
    // A chain: job k depends on k - 1, the root waits for a missing key. Every link's handle
    // is kept (a link dropped before its dependent exists would be cancelled).
    let base = 100_000u64;
    let root = put(&g, &job(base, 0, 0, None, &never));
    let links: Vec<_> = (0..9_999u64)
        .map(|k| [dep(base + k, Gate::OnSuccess)])
        .collect();
    let chain: Vec<_> = links
        .iter()
        .enumerate()
        .map(|(k, d)| put(&g, &job(base + k as u64 + 1, 0, 0, None, d)))
        .collect();
    assert_eq!(g.effective(&root).unwrap(), (0, None));
    let end = [dep(base + 9_999, Gate::OnSuccess)];
    let far = put(&g, &job(base + 10_000, 0, 7, Some(3), &end));
    assert_eq!(
        g.effective(&root).unwrap(),
        (7, Some(now + 3 * SEC)),
        "raised from the far end"
    );
    g.remove(JobKey::new(base + 10_000)).unwrap();
    assert_eq!(g.effective(&root).unwrap(), (0, None), "dropped back");
    drop(far);
    // The chain goes when its handles do (SPEC D31): the last link's drop cancels it, and the
    // cancellation runs up the 10^4 links; the root stays, wanted by its own handle.
    drop(chain);
    assert_eq!(
        root.outcome(),
        None,
        "the root is still wanted by its handle"
    );
    let o = g.occupancy();
    assert_eq!(
        (o.nodes_used, o.waiting),
        (2, 2),
        "only the producer and the root are left"
    );
    drop(root);
    assert_eq!(g.occupancy().nodes_used, 1, "the root's drop cancelled it");
}

/// (e) Effective values through the accessor: a joiner raises the job, a job submitted later
/// on a raised producer inherits nothing, and completion of the demander after its producer
/// changes nothing.
fn d30_effective_values_are_visible_and_flow_only_upstream<E: GraphEngine>() {
    let g = graph_on::<E>(1, 1, 64, Arc::new(ManualClock::new()));
    let never = [dep(999, Gate::Sequential)];
    let p = put(&g, &job(1, 0, 1, None, &never));
    let on_p = [dep(1, Gate::OnSuccess)];
    let d = put(&g, &job(2, 0, 6, None, &on_p));
    assert_eq!(g.effective(&p).unwrap().0, 6);
    let later = put(&g, &job(3, 0, 2, None, &on_p));
    assert_eq!(
        g.effective(&later).unwrap().0,
        2,
        "nothing flows downstream"
    );
    assert_eq!(g.effective(&d).unwrap().0, 6);
    // A joiner of the demander with priority 8 raises it and, through it, the producer.
    let _joiner = match g.submit(&job(2, 0, 8, None, &on_p)).unwrap() {
        Admission::DedupeJoined(h) => {
            assert_eq!(h, d);
            h
        }
        other => panic!("expected a join: {other:?}"),
    };
    assert_eq!(g.effective(&d).unwrap().0, 8);
    assert_eq!(g.effective(&p).unwrap().0, 8);
    // Transitive: the producer's own producer, submitted last, inherits from both.
    let _first = put(&g, &job(999, 0, 0, None, &[]));
    assert_eq!(g.effective(&p).unwrap().0, 8);
    drain(&g);
    assert_eq!(g.outcome(&d).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.effective(&p).unwrap().0, 8, "frozen once ended");
}
