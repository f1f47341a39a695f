//! SPEC section D, keys: versions, supersede, stale completions, witnesses, removal (D01,
//! D20–D24). Every test runs on both graph engines.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::graph::{
    Admission, Gate, Graph, GraphBuilder, GraphEngine, JobKey, JobOutcome, Version,
};
use fairway::oracle::GraphOn;
use fairway::{Code, Error, Reason};

#[macro_use]
#[path = "common/graph.rs"]
mod graph_common;
use graph_common::*;

both_graphs!(
    d01_keys_have_incarnations_and_generations_ordered_incarnation_first,
    d01_stage_tags_are_separate_keys,
    d20_advance_supersedes_waiting_and_queued_work,
    d33_dependents_of_superseded_work_follow_the_key_to_the_new_generation,
    d20_running_job_is_signalled_and_its_completion_is_stale,
    d20_advance_sweeps_only_backward,
    d21_stale_completion_publishes_nothing_and_frees_every_reservation,
    d21_completion_racing_advance_is_accepted_or_stale_never_half_applied,
    d22_exhausted_generation_refuses_advance_and_never_wraps,
    d23_witness_of_removed_or_recreated_key_is_refused_even_at_the_same_generation,
    d23_witness_is_current_only_at_the_current_generation,
    d24_remove_fails_waiters_cancels_work_and_frees_storage,
    d24_remove_of_a_running_job_makes_its_completion_stale,
    d24_reset_retires_every_key_at_scale,
    d24_bad_key_operations_are_typed_errors_and_change_nothing,
    d20_d23_atomic_batch_jobs_carry_versions_and_are_superseded,
    d20_superseded_queued_job_is_not_ended_again_by_a_shutdown,
);

fn builder(limits: Limits) -> GraphBuilder {
    let ledger =
        Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4).tenant_limits(limits))
            .unwrap();
    // Small under Miri, which interprets every slot's set-up.
    let n = if cfg!(miri) { 64 } else { 2048 };
    Graph::builder(ledger)
        .class(4)
        .nodes(n)
        .edges(2 * n)
        .keys(2 * n)
}

fn graph<E: GraphEngine>() -> GraphOn<E> {
    builder(Limits::UNLIMITED).build_with::<E>().unwrap()
}

/// Whether `o` is `unavailable / dependency-failed`.
fn dependency_failed(o: Option<JobOutcome>) -> bool {
    failed_with(o, Code::Unavailable, Reason::DependencyFailed)
}

fn key(k: u64) -> JobKey {
    JobKey::new(k)
}

fn d01_keys_have_incarnations_and_generations_ordered_incarnation_first<E: GraphEngine>() {
    let g = graph::<E>();
    assert_eq!(g.version(key(1)), None);
    let a = admit(&g, 1, &[dep(2, Gate::OnSuccess)]);
    let v1 = g.version(key(1)).unwrap();
    // A key named only as a dependency exists too, with its own incarnation.
    let v2 = g.version(key(2)).unwrap();
    assert_eq!((v1.generation, v2.generation), (0, 0));
    assert_ne!(v1.incarnation, v2.incarnation);
    let v1b = g.advance(key(1)).unwrap();
    assert_eq!(
        v1b,
        Version {
            incarnation: v1.incarnation,
            generation: 1
        }
    );
    assert!(v1b > v1);
    assert!(superseded(g.outcome(&a).unwrap()));
    g.advance(key(1)).unwrap();
    g.remove(key(1)).unwrap();
    assert_eq!(g.version(key(1)), None);
    // Re-created: a new incarnation, generations restart at 0, and it orders after every
    // version of the old one although its generation is lower.
    let b = admit(&g, 1, &[]);
    let v1c = g.version(key(1)).unwrap();
    assert_eq!(v1c.generation, 0);
    assert!(v1c.incarnation > v1.incarnation);
    assert!(v1c > v1b);
    assert_eq!(drain(&g), vec![b.id()]);
    // Incarnations are process-unique: another graph's keys never reuse one.
    let other = graph::<E>();
    let _held = admit(&other, 1, &[]);
    assert_ne!(other.version(key(1)).unwrap().incarnation, v1c.incarnation);
    assert_ne!(other.version(key(1)).unwrap().incarnation, v1.incarnation);
}

fn d01_stage_tags_are_separate_keys<E: GraphEngine>() {
    let g = graph::<E>();
    let s0 = JobKey::staged(7, 0);
    let s1 = JobKey::staged(7, 1);
    let mut sp = spec(0, &[]);
    sp.key = s0;
    let Admission::Admitted(a) = g.submit(&sp).unwrap() else {
        panic!()
    };
    sp.key = s1;
    let Admission::Admitted(b) = g.submit(&sp).unwrap() else {
        panic!()
    };
    assert_ne!(
        g.version(s0).unwrap().incarnation,
        g.version(s1).unwrap().incarnation
    );
    assert_eq!(g.advance(s1).unwrap().generation, 1);
    assert_eq!(g.version(s0).unwrap().generation, 0);
    assert!(superseded(g.outcome(&b).unwrap()));
    assert_eq!(drain(&g), vec![a.id()]);
    assert_eq!(g.outcome(&a).unwrap(), Some(JobOutcome::Succeeded));
}

fn d20_advance_supersedes_waiting_and_queued_work<E: GraphEngine>() {
    let g = graph::<E>();
    // Waiting: its producer (key 100) does not exist yet.
    let waiting = admit(&g, 1, &[dep(100, Gate::OnSuccess)]);
    // Queued: in the scheduler, holding its ledger permit.
    let queued = admit(&g, 2, &[]);
    assert_eq!(g.occupancy().waiting, 1);
    assert_eq!(g.occupancy().ready, 1);
    g.advance(key(1)).unwrap();
    g.advance(key(2)).unwrap();
    // Both ended in the same step, before any executor looked.
    assert!(superseded(g.outcome(&waiting).unwrap()));
    assert!(superseded(g.outcome(&queued).unwrap()));
    let occ = g.occupancy();
    assert_eq!((occ.waiting, occ.ready, occ.running), (0, 0, 0));
    // The waiting job's parked edge on key 100 was freed with it.
    assert_eq!(occ.edges_used, 0);
    // The queued job never runs; its permit comes back when the executor skips it.
    assert!(drain(&g).is_empty());
    assert!(g.ledger().usage().is_zero());
    // The keys take new jobs at the new generation.
    let w2 = admit(&g, 1, &[]);
    let q2 = admit(&g, 2, &[]);
    let mut ran = drain(&g);
    ran.sort_by_key(|h| format!("{h:?}"));
    let mut want = ids(&[&w2, &q2]);
    want.sort_by_key(|h| format!("{h:?}"));
    assert_eq!(ran, want);
    let handles = [waiting, queued, w2, q2];
    for h in &handles {
        g.outcome(h).unwrap().unwrap();
    }
    // Ended, and their handles dropped: freed.
    drop(handles);
    assert_eq!(g.occupancy().nodes_used, 0);
}

fn d33_dependents_of_superseded_work_follow_the_key_to_the_new_generation<E: GraphEngine>() {
    let g = graph::<E>();
    let a = admit(&g, 1, &[dep(100, Gate::OnSuccess)]);
    let on_success = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    let sequential = admit(&g, 3, &[dep(1, Gate::Sequential)]);
    let on_admission = admit(&g, 4, &[dep(1, Gate::OnAdmission)]);
    g.advance(key(1)).unwrap();
    assert!(superseded(g.outcome(&a).unwrap()));
    // A superseded producer meets no gate (SPEC D21), but its dependents are not failed:
    // they depend on key 1's current producer and wait for the next generation's (D33).
    for h in [&on_success, &sequential, &on_admission] {
        assert_eq!(g.outcome(h).unwrap(), None, "{h:?} did not follow key 1");
    }
    // A's edge on key 100 went with it; the three followers' edges wait on key 1.
    let occ = g.occupancy();
    assert_eq!((occ.waiting, occ.edges_used), (3, 3));
    // A dependent submitted after the advance waits for the new generation's producer too.
    let later = admit(&g, 5, &[dep(1, Gate::OnSuccess)]);
    assert_eq!(g.outcome(&later).unwrap(), None);
    assert!(drain(&g).is_empty());
    let a2 = admit(&g, 1, &[]);
    let ran = drain(&g);
    assert_eq!(ran.len(), 5, "{ran:?}");
    for h in [&a2, &on_success, &sequential, &on_admission, &later] {
        assert!(ran.contains(&h.id()), "{h:?} did not run: {ran:?}");
        assert_eq!(g.outcome(h).unwrap(), Some(JobOutcome::Succeeded));
    }
    let end_dependents = ids(&[&on_success, &sequential, &later]);
    let first_end_dependent = ran.iter().position(|h| end_dependents.contains(h)).unwrap();
    assert!(
        ran.iter().position(|h| *h == a2.id()).unwrap() < first_end_dependent,
        "a dependent on key 1's end ran before key 1's job: {ran:?}"
    );
    assert_eq!(g.occupancy().edges_used, 0);
}

fn d20_running_job_is_signalled_and_its_completion_is_stale<E: GraphEngine>() {
    let g = graph::<E>();
    let a = admit(&g, 1, &[]);
    let dependent = admit(&g, 2, &[dep(1, Gate::Sequential)]);
    let job = g.try_next(CPU).unwrap();
    assert_eq!(job.id(), a.id());
    assert!(g.is_current(&job));
    g.advance(key(1)).unwrap();
    // Signalled: the body can see it no longer counts.
    assert!(!g.is_current(&job));
    assert_eq!(g.outcome(&a).unwrap(), None);
    assert_eq!(g.stale_completions(), 0);
    let e = g.complete(job, JobOutcome::Succeeded).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::Cancelled, Reason::Superseded)
    );
    assert_eq!(g.stale_completions(), 1);
    // Its success was not published: it ended superseded and released nobody; its
    // dependent followed key 1 at the advance (SPEC D33) and waits for the next generation.
    assert!(superseded(g.outcome(&a).unwrap()));
    assert_eq!(g.outcome(&dependent).unwrap(), None);
    assert!(drain(&g).is_empty());
    let occ = g.occupancy();
    assert_eq!((occ.running, occ.waiting, occ.edges_used), (0, 1, 1));
    assert!(g.ledger().usage().is_zero());
    let a2 = admit(&g, 1, &[]);
    assert_eq!(drain(&g), ids(&[&a2, &dependent]));
    let occ = g.occupancy();
    assert_eq!((occ.running, occ.waiting, occ.edges_used), (0, 0, 0));
}

fn d20_advance_sweeps_only_backward<E: GraphEngine>() {
    let g = graph::<E>();
    let old = admit(&g, 1, &[]);
    assert_eq!(drain(&g), vec![old.id()]);
    // A finished job keeps its outcome; the advance does not rewrite history.
    g.advance(key(1)).unwrap();
    assert_eq!(g.outcome(&old).unwrap(), Some(JobOutcome::Succeeded));
    // Work of the new generation, and of other keys, is untouched by the advance that
    // preceded it, and by an advance of another key.
    let new = admit(&g, 1, &[]);
    let other = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    g.advance(key(3)).unwrap_err();
    let three = admit(&g, 3, &[]);
    g.advance(key(3)).unwrap();
    assert!(superseded(g.outcome(&three).unwrap()));
    assert_eq!(g.outcome(&new).unwrap(), None);
    let ran = drain(&g);
    assert_eq!(ran, ids(&[&new, &other]));
    assert_eq!(g.outcome(&other).unwrap(), Some(JobOutcome::Succeeded));
    // A second advance with nothing live only bumps the generation.
    assert_eq!(g.advance(key(1)).unwrap().generation, 2);
    assert_eq!(g.outcome(&new).unwrap(), Some(JobOutcome::Succeeded));
}

fn d21_stale_completion_publishes_nothing_and_frees_every_reservation<E: GraphEngine>() {
    // One permit for the tenant: a reservation not given back would block the next job.
    let g = builder(Limits::UNLIMITED.concurrency(1))
        .build_with::<E>()
        .unwrap();
    let a = admit(&g, 1, &[]);
    let d = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    let job = g.try_next(CPU).unwrap();
    // A dependency discovered while it runs parks an edge on a key without a producer.
    g.discover(&job, &[dep(50, Gate::Sequential)]).unwrap();
    assert_eq!(g.occupancy().edges_used, 2);
    g.advance(key(1)).unwrap();
    let e = g.complete(job, JobOutcome::Succeeded).unwrap_err();
    assert_eq!(e.reason(), Reason::Superseded);
    assert_eq!(g.stale_completions(), 1);
    assert!(superseded(g.outcome(&a).unwrap()));
    // D follows key 1 (SPEC D33): its one edge now waits on the key; the stale job's
    // discovered edge was freed.
    assert_eq!(g.outcome(&d).unwrap(), None);
    let occ = g.occupancy();
    assert_eq!(
        (occ.edges_used, occ.running, occ.waiting, occ.ready),
        (1, 0, 1, 0)
    );
    assert!(g.ledger().usage().is_zero());
    // The discovered key's later producer releases nobody from the stale job; the one permit
    // serves the next jobs.
    let p = admit(&g, 50, &[]);
    assert_eq!(drain(&g), vec![p.id()]);
    let a2 = admit(&g, 1, &[]);
    assert_eq!(drain(&g), ids(&[&a2, &d]));
    assert_eq!(g.outcome(&a2).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.outcome(&d).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.stale_completions(), 1);
}

fn d21_completion_racing_advance_is_accepted_or_stale_never_half_applied<E: GraphEngine>() {
    let (mut accepted, mut stale) = (0u32, 0u32);
    for round in 0..300u64 {
        let g = graph::<E>();
        let a = admit(&g, 1, &[]);
        let d = admit(&g, 2, &[dep(1, Gate::Sequential)]);
        let job = g.try_next(CPU).unwrap();
        let g2 = g.clone();
        let t = std::thread::spawn(move || {
            if round % 2 == 0 {
                std::thread::yield_now();
            }
            g2.complete(job, JobOutcome::Succeeded)
        });
        g.advance(key(1)).unwrap();
        let r = t.join().unwrap();
        drain(&g);
        match r {
            Ok(()) => {
                accepted += 1;
                assert_eq!(g.outcome(&a).unwrap(), Some(JobOutcome::Succeeded));
                assert_eq!(g.outcome(&d).unwrap(), Some(JobOutcome::Succeeded));
                assert_eq!(g.stale_completions(), 0);
            }
            Err(e) => {
                stale += 1;
                assert_eq!(e.reason(), Reason::Superseded);
                assert!(superseded(g.outcome(&a).unwrap()));
                // D followed key 1 (SPEC D33): the next generation's job releases it.
                assert_eq!(g.outcome(&d).unwrap(), None);
                assert_eq!(g.stale_completions(), 1);
                let a2 = admit(&g, 1, &[]);
                assert_eq!(drain(&g), ids(&[&a2, &d]));
                assert_eq!(g.outcome(&d).unwrap(), Some(JobOutcome::Succeeded));
            }
        }
        let occ = g.occupancy();
        assert_eq!(
            (occ.running, occ.waiting, occ.ready, occ.edges_used),
            (0, 0, 0, 0)
        );
        assert!(g.ledger().usage().is_zero());
        assert_eq!(g.version(key(1)).unwrap().generation, 1);
    }
    assert_eq!(accepted + stale, 300);
}

fn d22_exhausted_generation_refuses_advance_and_never_wraps<E: GraphEngine>() {
    let e = builder(Limits::UNLIMITED)
        .max_generation(Version::MAX_GENERATION + 1)
        .build_with::<E>()
        .unwrap_err();
    assert_eq!(e.reason(), Reason::Configuration);
    // A narrow width, so the limit is reached inside the test.
    let g = builder(Limits::UNLIMITED)
        .max_generation(3)
        .build_with::<E>()
        .unwrap();
    let _first = admit(&g, 1, &[]);
    for want in 1..=3 {
        assert_eq!(g.advance(key(1)).unwrap().generation, want);
    }
    let live = admit(&g, 1, &[dep(9, Gate::OnSuccess)]);
    let before = (g.version(key(1)), g.occupancy());
    let e = g.advance(key(1)).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::ResourceExhausted, Reason::GenerationExhausted)
    );
    // Refused: nothing moved, the live job is untouched, the counter did not wrap to 0.
    assert_eq!((g.version(key(1)), g.occupancy()), before);
    assert_eq!(g.outcome(&live).unwrap(), None);
    assert!(g.advance(key(1)).is_err());
    assert_eq!(g.version(key(1)).unwrap().generation, 3);
    // A re-created key starts again at 0.
    g.remove(key(1)).unwrap();
    let _recreated = admit(&g, 1, &[]);
    assert_eq!(g.advance(key(1)).unwrap().generation, 1);
    // The full 24-bit width on a default graph: far from exhausted.
    let d = graph::<E>();
    let _held = admit(&d, 1, &[]);
    for _ in 0..1000 {
        d.advance(key(1)).unwrap();
    }
    assert_eq!(d.version(key(1)).unwrap().generation, 1000);
}

fn d23_witness_of_removed_or_recreated_key_is_refused_even_at_the_same_generation<
    E: GraphEngine,
>() {
    let g = graph::<E>();
    let _first = admit(&g, 1, &[]);
    let job = g.try_next(CPU).unwrap();
    let w = g.witness(&job);
    assert_eq!(w.key(), key(1));
    assert_eq!(w.version(), g.version(key(1)).unwrap());
    g.check_witness(&w).unwrap();
    g.complete(job, JobOutcome::Succeeded).unwrap();
    // Still current after completing: nothing changed the key.
    g.check_witness(&w).unwrap();
    g.remove(key(1)).unwrap();
    let e = g.check_witness(&w).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::NotFound, Reason::StaleWitness)
    );
    // Re-created at the same generation (0): still refused, the incarnation differs.
    let _second = admit(&g, 1, &[]);
    assert_eq!(
        g.version(key(1)).unwrap().generation,
        w.version().generation
    );
    assert_eq!(
        g.check_witness(&w).unwrap_err().reason(),
        Reason::StaleWitness
    );
    let job2 = g.try_next(CPU).unwrap();
    let w2 = g.witness(&job2);
    g.check_witness(&w2).unwrap();
    // Another graph refuses it as foreign.
    let other = graph::<E>();
    assert_eq!(
        other.check_witness(&w2).unwrap_err().reason(),
        Reason::ForeignHandle
    );
    g.complete(job2, JobOutcome::Succeeded).unwrap();
}

fn d23_witness_is_current_only_at_the_current_generation<E: GraphEngine>() {
    let g = graph::<E>();
    let _old = admit(&g, 1, &[]);
    let job = g.try_next(CPU).unwrap();
    let w = g.witness(&job);
    g.advance(key(1)).unwrap();
    assert_eq!(
        g.check_witness(&w).unwrap_err().reason(),
        Reason::StaleWitness
    );
    assert!(g.complete(job, JobOutcome::Succeeded).is_err());
    let _new = admit(&g, 1, &[]);
    let job = g.try_next(CPU).unwrap();
    let w1 = g.witness(&job);
    assert_eq!(w1.version().generation, 1);
    assert!(w1.version() > w.version());
    g.check_witness(&w1).unwrap();
    g.complete(job, JobOutcome::Succeeded).unwrap();
    g.check_witness(&w1).unwrap();
    assert!(g.check_witness(&w).is_err());
}

fn d24_remove_fails_waiters_cancels_work_and_frees_storage<E: GraphEngine>() {
    let g = graph::<E>();
    // Waiters on a key with no producer.
    let w1 = admit(&g, 1, &[dep(10, Gate::OnSuccess)]);
    let w2 = admit(
        &g,
        2,
        &[dep(10, Gate::Sequential), dep(11, Gate::OnSuccess)],
    );
    // A queued producer with a waiting dependent.
    let q = admit(&g, 20, &[]);
    let qd = admit(&g, 21, &[dep(20, Gate::Sequential)]);
    assert_eq!(g.occupancy().edges_used, 4);
    g.remove(key(10)).unwrap();
    assert!(failed_with(
        g.outcome(&w1).unwrap(),
        Code::Unavailable,
        Reason::Removed
    ));
    // `w2` failed one gate and still waits for its other one (as with any failed gate).
    assert_eq!(g.outcome(&w2).unwrap(), None);
    assert_eq!(g.occupancy().edges_used, 2);
    g.remove(key(11)).unwrap();
    assert!(failed_with(
        g.outcome(&w2).unwrap(),
        Code::Unavailable,
        Reason::Removed
    ));
    g.remove(key(20)).unwrap();
    assert!(failed_with(
        g.outcome(&q).unwrap(),
        Code::Cancelled,
        Reason::Removed
    ));
    assert!(dependency_failed(g.outcome(&qd).unwrap()));
    // Every edge is back.
    let occ = g.occupancy();
    assert_eq!((occ.edges_used, occ.waiting, occ.ready), (0, 0, 0));
    assert_eq!(g.version(key(10)), None);
    assert!(drain(&g).is_empty());
    assert!(g.ledger().usage().is_zero());
    let handles = [w1, w2, q, qd];
    for h in &handles {
        g.outcome(h).unwrap().unwrap();
    }
    drop(handles);
    assert_eq!(g.occupancy().nodes_used, 0);
    // A removed key is unknown until named again.
    assert_eq!(g.remove(key(10)).unwrap_err().reason(), Reason::UnknownKey);
    let again = admit(&g, 10, &[]);
    assert_eq!(drain(&g), vec![again.id()]);
}

fn d24_remove_of_a_running_job_makes_its_completion_stale<E: GraphEngine>() {
    let g = graph::<E>();
    let a = admit(&g, 1, &[]);
    let job = g.try_next(CPU).unwrap();
    g.remove(key(1)).unwrap();
    assert!(!g.is_current(&job));
    let e = g.complete(job, JobOutcome::Succeeded).unwrap_err();
    assert_eq!((e.code(), e.reason()), (Code::Cancelled, Reason::Removed));
    assert_eq!(g.stale_completions(), 1);
    assert!(failed_with(
        g.outcome(&a).unwrap(),
        Code::Cancelled,
        Reason::Removed
    ));
    assert_eq!(g.occupancy().running, 0);
}

fn d24_reset_retires_every_key_at_scale<E: GraphEngine>() {
    let g = builder(Limits::UNLIMITED)
        .nodes(4096)
        .edges(8192)
        .keys(16384)
        .build_with::<E>()
        .unwrap();
    // 1000 chains of three: a root waiting on a missing key, two dependents.
    let mut handles = Vec::new();
    for c in 0..1000u64 {
        let base = 10 + c * 4;
        handles.push(admit(&g, base, &[dep(5_000_000 + c, Gate::OnSuccess)]));
        handles.push(admit(&g, base + 1, &[dep(base, Gate::Sequential)]));
        handles.push(admit(&g, base + 2, &[dep(base + 1, Gate::OnAdmission)]));
    }
    // And some queued and one running.
    for k in 0..50u64 {
        handles.push(admit(&g, 9_000_000 + k, &[]));
    }
    let running = g.try_next(CPU).unwrap();
    assert_eq!(g.occupancy().waiting, 3000);
    g.reset();
    for h in &handles {
        if h.id() == running.id() {
            continue;
        }
        assert!(
            failed_with(g.outcome(h).unwrap(), Code::Cancelled, Reason::Removed),
            "{:?}",
            g.outcome(h)
        );
    }
    let occ = g.occupancy();
    assert_eq!((occ.edges_used, occ.waiting, occ.ready), (0, 0, 0));
    assert!(g.complete(running, JobOutcome::Succeeded).is_err());
    assert_eq!(g.stale_completions(), 1);
    assert!(drain(&g).is_empty());
    assert!(g.ledger().usage().is_zero());
    for c in 0..1000u64 {
        assert_eq!(g.version(key(10 + c * 4)), None);
        assert_eq!(g.version(key(5_000_000 + c)), None);
    }
    for h in &handles {
        g.outcome(h).unwrap().unwrap();
    }
    drop(handles);
    assert_eq!(g.occupancy().nodes_used, 0);
    // Usable again.
    let h = admit(&g, 10, &[]);
    assert_eq!(drain(&g), vec![h.id()]);
}

fn d24_bad_key_operations_are_typed_errors_and_change_nothing<E: GraphEngine>() {
    let g = graph::<E>();
    let a = admit(&g, 1, &[dep(2, Gate::OnSuccess)]);
    let before = (
        g.occupancy(),
        g.version(key(1)),
        g.version(key(2)),
        g.outcome(&a).unwrap(),
    );
    let unknown = |e: Error| (e.code(), e.reason()) == (Code::NotFound, Reason::UnknownKey);
    assert!(unknown(g.advance(key(3)).unwrap_err()));
    assert!(unknown(g.remove(key(3)).unwrap_err()));
    assert!(unknown(g.advance(JobKey::staged(1, 1)).unwrap_err()));
    assert_eq!(
        (
            g.occupancy(),
            g.version(key(1)),
            g.version(key(2)),
            g.outcome(&a).unwrap()
        ),
        before
    );
    g.remove(key(2)).unwrap();
    assert!(unknown(g.advance(key(2)).unwrap_err()));
    assert!(unknown(g.remove(key(2)).unwrap_err()));
    assert!(failed_with(
        g.outcome(&a).unwrap(),
        Code::Unavailable,
        Reason::Removed
    ));
}

fn d20_d23_atomic_batch_jobs_carry_versions_and_are_superseded<E: GraphEngine>() {
    let g = graph::<E>();
    // Key 2 exists at generation 1 before the batch.
    let _old = admit(&g, 2, &[]);
    drain(&g);
    g.advance(key(2)).unwrap();
    let after = [dep(1, Gate::OnSuccess)];
    let batch = [spec(3, &after), spec(1, &[]), spec(2, &[])];
    let Admission::Admitted(h) = g.submit_batch_atomic(&batch, None).unwrap() else {
        panic!("room for the batch")
    };
    // Supersede the batch's key 1: its dependent in the batch follows the key (SPEC D33).
    g.advance(key(1)).unwrap();
    assert!(superseded(g.outcome(&h[1]).unwrap()));
    assert_eq!(g.outcome(&h[0]).unwrap(), None);
    let job = g.try_next(CPU).unwrap();
    assert_eq!(job.id(), h[2].id());
    // The batch's job runs at its key's current version.
    let w = g.witness(&job);
    assert_eq!(w.version(), g.version(key(2)).unwrap());
    assert_eq!(w.version().generation, 1);
    g.check_witness(&w).unwrap();
    g.complete(job, JobOutcome::Succeeded).unwrap();
    assert_eq!(g.outcome(&h[2]).unwrap(), Some(JobOutcome::Succeeded));
    let one = admit(&g, 1, &[]);
    assert_eq!(drain(&g), ids(&[&one, &h[0]]));
}

fn d20_superseded_queued_job_is_not_ended_again_by_a_shutdown<E: GraphEngine>() {
    let g = graph::<E>();
    let a = admit(&g, 1, &[]);
    let b = admit(&g, 2, &[]);
    assert_eq!(g.occupancy().ready, 2);
    g.advance(key(1)).unwrap();
    assert!(superseded(g.outcome(&a).unwrap()));
    // The shutdown hands both payloads back: `b` ends `shutdown`, `a` keeps its one outcome.
    g.shutdown();
    assert!(superseded(g.outcome(&a).unwrap()));
    assert!(failed_with(
        g.outcome(&b).unwrap(),
        Code::Unavailable,
        Reason::Shutdown
    ));
    let o = g.occupancy();
    assert_eq!((o.waiting, o.ready, o.running), (0, 0, 0));
    assert!(g.ledger().usage().is_zero());
    for h in [&a, &b] {
        g.outcome(h).unwrap().unwrap();
    }
    drop((a, b));
    assert_eq!(g.occupancy().nodes_used, 0);
}
