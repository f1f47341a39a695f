//! The grant path: ring order, a differential test against the sequential policy for
//! single-threaded histories, churn with conservation, and F24 with a paused turn holder.

use super::super::test_rng::Rng;
use super::*;
use crate::policy::{EntryMeta, Policy, PolicyConfig, Verdict, NO_DEADLINE};
use std::cell::RefCell;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

const STARVE: u64 = 1_000;

fn plain(weight: u32) -> Meta {
    Meta {
        priority: 0,
        deadline: NO_DEADLINE,
        enqueued_at: 0,
        weight,
    }
}

/// Queues `n` requests of `tenant`, each of `weight`, at time 0; their slots in order.
fn queue(core: &Core, tenant: u32, n: u32, weight: u32, sink: &mut impl FnMut(u32)) -> Vec<u32> {
    (0..n)
        .map(|_| core.enqueue(tenant, plain(weight), 0, sink).unwrap())
        .collect()
}

/// The owner of the granted `index` takes it and gives its cell back (which runs the turn the
/// credit meets).
fn finish_grant(core: &Core, index: u32, sink: &mut impl FnMut(u32)) {
    assert!(core.take(index));
    core.release(0, sink);
}

/// One cell, held by tenant 1; then tenant 0 queues `dead` requests, cancelled (tombstones),
/// ahead of `live` ones, and tenant 1 queues one more; then the held cell comes back, and its
/// credit meets tenant 0's turn (what it grants goes to `got`). Returns the tombstones' slots,
/// the live ones', and tenant 1's.
fn tombstones_ahead_of_live(
    core: &Core,
    dead: u32,
    live: u32,
    got: &RefCell<Vec<u32>>,
) -> (Vec<u32>, Vec<u32>, u32) {
    let mut sink = |g| got.borrow_mut().push(g);
    let held = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    let dead = queue(core, 0, dead, 1, &mut sink);
    let live = queue(core, 0, live, 1, &mut sink);
    let other = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    for &i in &dead {
        assert!(core.cancel(i, 0, &mut sink));
    }
    assert_eq!(got.take(), [held]);
    finish_grant(core, held, &mut sink);
    (dead, live, other)
}

#[test]
fn f11_one_cell_grants_tenants_in_ring_order() {
    let core = Core::new(1, 16, 3, STARVE);
    let got = RefCell::new(Vec::new());
    let mut sink = |i| got.borrow_mut().push(i);
    let a0 = core.enqueue(0, plain(1), 0, &mut sink).unwrap();
    assert_eq!(
        *got.borrow(),
        [a0],
        "the first request takes the free cell at once"
    );
    // Tenant 0 left the ring with its last request granted; it joins again first.
    let a1 = core.enqueue(0, plain(1), 0, &mut sink).unwrap();
    let a2 = core.enqueue(0, plain(1), 0, &mut sink).unwrap();
    let b0 = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    let c0 = core.enqueue(2, plain(1), 0, &mut sink).unwrap();
    let b1 = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    for _ in 0..5 {
        core.release(0, &mut sink);
    }
    // After each grant a tenant with work left goes to the ring's tail.
    assert_eq!(*got.borrow(), [a0, a1, b0, c0, a2, b1]);
    core.release(0, &mut sink);
    assert_eq!(core.counters(), (1, 0));
    for i in got.take() {
        assert!(core.take(i));
        assert!(!core.take(i));
    }
}

/// DRR (F12) with one cell: a tenant of weight 2 is granted twice in a row (its round, cut
/// short by the busy cell, resumes ahead of the ring), then the others get their turn.
#[test]
fn f12_a_weighted_tenants_round_resumes_ahead_of_the_ring() {
    let core = Core::new(1, 16, 2, STARVE);
    let got = RefCell::new(Vec::new());
    let mut sink = |i| got.borrow_mut().push(i);
    let held = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    assert_eq!(got.take(), [held]);
    let a = queue(&core, 0, 3, 2, &mut sink);
    let b = queue(&core, 1, 2, 1, &mut sink);
    assert!(got.borrow().is_empty());
    for _ in 0..5 {
        core.release(0, &mut sink);
    }
    assert_eq!(*got.borrow(), [a[0], a[1], b[0], a[2], b[1]]);
}

/// With cells free while a turn runs (released by other threads), a weighted tenant's turn
/// takes them for its round; here a single thread frees them first by holding the class empty.
#[test]
fn f12_a_turn_takes_free_credits_for_its_round() {
    let core = Core::new(3, 16, 2, STARVE);
    let got = RefCell::new(Vec::new());
    let mut sink = |i| got.borrow_mut().push(i);
    let a = core.enqueue(0, plain(3), 0, &mut sink).unwrap();
    assert_eq!(got.take(), [a]);
    // Tenant 0's next enqueues each find a free credit at announce.
    let a1 = core.enqueue(0, plain(3), 0, &mut sink).unwrap();
    let a2 = core.enqueue(0, plain(3), 0, &mut sink).unwrap();
    assert_eq!(got.take(), [a1, a2]);
    assert_eq!(core.counters(), (0, 0));
}

/// The ring engine and the sequential policy (driven as the baseline engine drives it: after
/// every operation, grant while a cell is free and something is queued) produce the same grant
/// order for single-threaded histories of enqueues (random tenants, priorities, deadlines and a
/// clock crossing the aging threshold, DRR weights 1 to 3), cancellations and releases.
#[test]
fn q02_ring_grant_order_matches_the_policy_for_one_thread() {
    const SLOTS: u32 = 96;
    // `FAIRWAY_DIFF_CASES` histories by hand (as `tests/differential.rs`); 150 by default.
    let seeds: u64 = std::env::var("FAIRWAY_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(miri) { 3 } else { 150 });
    let mut ops = 0u32;
    for seed in 1..=seeds {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let cells = 1 + rng.below(4) as u32;
        let tenants = 1 + rng.below(6) as u32;
        let core = Core::new(cells, SLOTS, tenants, STARVE);
        let mut policy = Policy::new(PolicyConfig {
            capacity: SLOTS,
            max_tenants: tenants,
            starvation_after: STARVE,
        })
        .unwrap();
        let mut free = cells;
        let mut queued: Vec<u32> = Vec::new();
        let mut held: Vec<u32> = Vec::new();
        let mut now = 0u64;
        for _ in 0..100 {
            now += rng.below(200);
            let mut ring = Vec::new();
            match rng.below(10) {
                0..=5 if queued.len() < (SLOTS / 2) as usize => {
                    let tenant = rng.below(u64::from(tenants)) as u32;
                    let meta = Meta {
                        priority: rng.below(3) as u8,
                        deadline: if rng.below(2) == 0 {
                            NO_DEADLINE
                        } else {
                            now + rng.below(3_000)
                        },
                        enqueued_at: now,
                        weight: 1 + rng.below(3) as u32,
                    };
                    let i = core
                        .enqueue(tenant, meta, now, &mut |g| ring.push(g))
                        .unwrap();
                    policy
                        .insert(
                            i,
                            EntryMeta {
                                tenant,
                                priority: meta.priority,
                                deadline: meta.deadline,
                                enqueued_at: meta.enqueued_at,
                                weight: meta.weight,
                            },
                        )
                        .unwrap();
                    queued.push(i);
                }
                6 if !queued.is_empty() => {
                    let i = queued[rng.below(queued.len() as u64) as usize];
                    assert!(core.cancel(i, now, &mut |g| ring.push(g)));
                    assert!(policy.remove(i));
                    queued.retain(|&q| q != i);
                }
                _ if !held.is_empty() => {
                    let i = held.swap_remove(rng.below(held.len() as u64) as usize);
                    assert!(core.take(i));
                    core.release(now, &mut |g| ring.push(g));
                    free += 1;
                }
                _ => {}
            }
            // Pollers run the turns a call handed back at its F25 bound.
            while core.help(now, &mut |g| ring.push(g)) {}
            let mut model = Vec::new();
            while free > 0 {
                let mut budget = u32::MAX;
                match policy.select(now, &mut |_| Verdict::Take, &mut budget) {
                    Some(i) => {
                        model.push(i);
                        free -= 1;
                    }
                    None => break,
                }
            }
            assert_eq!(ring, model, "seed {seed}: grant orders differ");
            for &g in &ring {
                assert_eq!(core.state(g), GRANTED);
                queued.retain(|&q| q != g);
                held.push(g);
            }
            ops += 1;
        }
        assert_eq!(core.counters().0, u64::from(free));
    }
    assert!(cfg!(miri) || ops >= 10_000, "{ops} operations compared");
}

/// Threads enqueue for many tenants, cancel some, and release what they are granted (taking
/// the grant first); weights vary. Conservation: every request ends granted or cancelled,
/// exactly once; at the end every cell is free, no tenant is ready, and every slot is free again.
fn churn(cells: u32, tenants: u32, threads: u32, per: u32) {
    let slots = threads * 64 + cells;
    // The engine's sizing: slots = 2 * queue capacity + cells, a tenant capped at the queue
    // capacity.
    let core = Arc::new(Core::new(cells, slots, tenants, STARVE).with_tenant_cap(threads * 32));
    let granted = Arc::new(AtomicUsize::new(0));
    let cancelled = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|th| {
            let (core, granted, cancelled) = (core.clone(), granted.clone(), cancelled.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(u64::from(th) * 7919 + 1);
                let mut mine: Vec<u32> = Vec::new();
                let mut grants: Vec<u32> = Vec::new();
                let mut enqueued = 0u32;
                for _ in 0..per {
                    let t = rng.below(u64::from(tenants)) as u32;
                    let w = 1 + rng.below(3) as u32;
                    let mut sink = |g| grants.push(g);
                    while mine.len() >= 32 {
                        let i = mine.swap_remove(0);
                        if core.cancel(i, 0, &mut sink) {
                            cancelled.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // `Full` happens: see the refusal note below.
                    if let Ok(i) = core.enqueue(t, plain(w), 0, &mut sink) {
                        mine.push(i);
                        enqueued += 1;
                    }
                    // Poll: run a turn another call handed back (F18, F25).
                    core.help(0, &mut |g| grants.push(g));
                    // Release what was granted here (grants of any thread's requests).
                    while let Some(g) = grants.pop() {
                        assert!(core.take(g), "a grant is taken once");
                        granted.fetch_add(1, Ordering::Relaxed);
                        let mut more = Vec::new();
                        core.release(0, &mut |x| more.push(x));
                        grants.extend(more);
                    }
                }
                for i in mine {
                    if core.cancel(i, 0, &mut |g| grants.push(g)) {
                        cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                }
                loop {
                    while let Some(g) = grants.pop() {
                        assert!(core.take(g));
                        granted.fetch_add(1, Ordering::Relaxed);
                        core.release(0, &mut |x| grants.push(x));
                    }
                    if !core.help(0, &mut |g| grants.push(g)) {
                        break;
                    }
                }
                enqueued
            })
        })
        .collect();
    let enqueued: u32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    // Turns handed back after the last thread's last look: run them here.
    let mut late = Vec::new();
    loop {
        while let Some(g) = late.pop() {
            assert!(core.take(g));
            granted.fetch_add(1, Ordering::Relaxed);
            core.release(0, &mut |x| late.push(x));
        }
        if !core.help(0, &mut |g| late.push(g)) {
            break;
        }
    }
    // Refusals: while a thread that owns a tenant's turn is descheduled, the tenant's new
    // requests wait in its inbox and this workload cancels them there; their tombstones hold
    // slots until the owner runs again, up to the tenant's cap, and that tenant is refused
    // meanwhile (docs/ring-engine.md). With 8 tenants 71-95 % were enqueued in three runs on
    // two loaded cores (28-47 % without the cap); with 10^4 tenants, all.
    assert!(
        enqueued >= threads * per / 10,
        "{enqueued} of {} enqueued",
        threads * per
    );
    assert_eq!(
        granted.load(Ordering::Relaxed) + cancelled.load(Ordering::Relaxed),
        enqueued as usize,
        "every request ends granted or cancelled exactly once"
    );
    assert_eq!(core.counters(), (u64::from(cells), 0));
    // Every tenant went idle with its tombstones unlinked: every slot is free again.
    for i in 0..slots {
        assert_eq!(core.state(i), VACANT, "slot {i}");
    }
}

#[test]
fn multi_thread_ring_churn_conserves_requests_and_cells() {
    churn(4, 8, 4, if cfg!(miri) { 30 } else { 20_000 });
}

#[test]
fn multi_thread_ring_churn_at_ten_thousand_tenants_and_a_thousand_cells() {
    churn(1_000, 10_000, 4, if cfg!(miri) { 30 } else { 10_000 });
}

/// SPEC F24 on the grant path: a thread paused while it holds tenant 0's turn (after the claim,
/// before the grant) delays tenant 0 only; another tenant's request is granted at once on
/// another cell, within 100 ms, by the enqueuing thread itself.
#[cfg(feature = "pause-points")]
#[test]
fn f24_ring_turn_holder_paused_other_tenant_granted_within_100ms() {
    use crate::raw::pause::Gate;
    use std::time::{Duration, Instant};
    let core = Arc::new(Core::new(2, 16, 2, STARVE));
    let gate = Gate::new("ring.turn_owned");
    let paused = {
        let (core, gate) = (core.clone(), gate.clone());
        std::thread::spawn(move || {
            gate.arm();
            let mut got = Vec::new();
            core.enqueue(0, plain(1), 0, &mut |g| got.push(g)).unwrap();
            got
        })
    };
    assert!(gate.wait_parked(Duration::from_secs(10)));
    let start = Instant::now();
    let mut got = Vec::new();
    let b = core.enqueue(1, plain(1), 0, &mut |g| got.push(g)).unwrap();
    assert_eq!(
        got,
        [b],
        "the other tenant is granted while tenant 0's owner is paused"
    );
    assert!(start.elapsed() < Duration::from_millis(100));
    // Tenant 0's second request waits for its paused owner; it is not lost.
    let a1 = core.enqueue(0, plain(1), 0, &mut |g| got.push(g)).unwrap();
    assert_eq!(got, [b]);
    assert!(core.take(b));
    core.release(0, &mut |g| got.push(g));
    assert_eq!(got, [b], "tenant 0 is owned: the credit stays free");
    gate.release();
    // The owner grants the first request and sees the second: tenant 0 goes back to the ring,
    // where it meets the free credit. That next turn is within the owner's pass (F25): it grants
    // the second request too, and nothing is left for a poller.
    let first = paused.join().unwrap();
    assert_eq!(first.len(), 2);
    assert_eq!(core.state(a1), GRANTED);
    assert!(!core.help(0, &mut |g| got.push(g)));
}

/// SPEC F24 at `ring.announce`: a producer stopped after publishing its request in tenant 0's
/// inbox, before announcing it, delays nobody: another tenant is granted within 100 ms, and a
/// second producer of tenant 0 announces the tenant, whose turn grants the stopped producer's
/// request first (it was published first).
#[cfg(feature = "pause-points")]
#[test]
fn f24_ring_producer_paused_before_announcing_delays_nobody() {
    use crate::raw::pause::Gate;
    use std::time::{Duration, Instant};
    let core = Arc::new(Core::new(2, 16, 2, STARVE));
    let gate = Gate::new("ring.announce");
    let paused = {
        let (core, gate) = (core.clone(), gate.clone());
        std::thread::spawn(move || {
            gate.arm();
            let mut got = Vec::new();
            let i = core.enqueue(0, plain(1), 0, &mut |g| got.push(g)).unwrap();
            (i, got)
        })
    };
    assert!(gate.wait_parked(Duration::from_secs(10)));
    let start = Instant::now();
    let got = RefCell::new(Vec::new());
    let mut sink = |g| got.borrow_mut().push(g);
    let b = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    assert_eq!(*got.borrow(), [b], "another tenant is granted at once");
    assert!(start.elapsed() < Duration::from_millis(100));
    let a1 = core.enqueue(0, plain(1), 0, &mut sink).unwrap();
    let granted = got.borrow()[1];
    assert_ne!(
        granted, a1,
        "the stopped producer's request, published first, goes first"
    );
    assert_eq!(core.state(granted), GRANTED);
    assert_eq!(core.state(a1), QUEUED);
    gate.release();
    let (a0, theirs) = paused.join().unwrap();
    assert_eq!(a0, granted);
    assert!(
        theirs.is_empty(),
        "its late announcement found the tenant handled"
    );
    // The late announcement left tenant 0 in the ring (a stale turn at worst): the next credit
    // grants a1.
    finish_grant(&core, b, &mut sink);
    assert_eq!(core.state(a1), GRANTED);
}

/// SPEC F24 at `ring.cancel_marked`: a canceller stopped between marking tenant 0's only
/// request cancelled and lowering the tenant's live count. The turn that meets the tombstone
/// ends the tenant (nothing linked) instead of requeuing it turn after turn on the stale count,
/// and another tenant is granted within 100 ms.
#[cfg(feature = "pause-points")]
#[test]
fn f24_ring_canceller_paused_after_marking_delays_nobody() {
    use crate::raw::pause::Gate;
    use std::time::{Duration, Instant};
    let core = Arc::new(Core::new(1, 16, 2, STARVE));
    let got = RefCell::new(Vec::new());
    let mut sink = |g| got.borrow_mut().push(g);
    let held = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    let a = core.enqueue(0, plain(1), 0, &mut sink).unwrap();
    let gate = Gate::new("ring.cancel_marked");
    let paused = {
        let (core, gate) = (core.clone(), gate.clone());
        std::thread::spawn(move || {
            gate.arm();
            core.cancel(a, 0, &mut |_| {})
        })
    };
    assert!(gate.wait_parked(Duration::from_secs(10)));
    let start = Instant::now();
    let b = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    finish_grant(&core, held, &mut sink);
    // The release ran tenant 0's turn (the tombstone) and, within its pass (F25), the turn its
    // credit met: tenant 1's. Nothing is left for a poller.
    assert!(!core.help(0, &mut sink));
    assert_eq!(
        *got.borrow(),
        [held, b],
        "tenant 1 is granted past the tombstone"
    );
    assert!(start.elapsed() < Duration::from_millis(100));
    assert_eq!(core.state(a), VACANT, "the tombstone's slot is free");
    gate.release();
    assert!(paused.join().unwrap());
    assert_eq!(core.counters(), (0, 0));
}

/// SPEC F25: a call runs the turns its own turn's end hands on within one F19-sized pass (64
/// candidates across them), then hands the next back. Seventy tenants holding only a tombstone
/// each wait ahead of a live request: the release drops 64 of them (one stale turn each) and
/// hands the next turn back; one help drops the other 6 and grants the live request.
#[test]
#[cfg_attr(
    miri,
    ignore = "a minute under Miri; counts candidates on paths other tests take"
)]
fn f25_a_call_offers_at_most_64_candidates_across_turns_and_hands_the_next_back() {
    let core = Core::new(1, 160, 72, STARVE);
    let got = RefCell::new(Vec::new());
    let mut sink = |g| got.borrow_mut().push(g);
    let held = core.enqueue(71, plain(1), 0, &mut sink).unwrap();
    for t in 0..70 {
        let i = core.enqueue(t, plain(1), 0, &mut sink).unwrap();
        assert!(
            core.cancel(i, 0, &mut sink),
            "tenant {t}'s request waits: cancel leaves a tombstone"
        );
    }
    let live = core.enqueue(70, plain(1), 0, &mut sink).unwrap();
    assert_eq!(got.take(), [held]);
    finish_grant(&core, held, &mut sink);
    assert!(got.borrow().is_empty(), "64 stale turns, nothing granted");
    assert_eq!(
        core.counters(),
        (1, 7),
        "tenants 64..=70 ready beside the handed-back credit"
    );
    assert!(core.help(0, &mut sink));
    assert_eq!(got.take(), [live]);
    assert!(!core.help(0, &mut sink));
    assert_eq!(core.counters(), (0, 0));
}

/// SPEC F19 and F25 inside one turn: a tenant with 70 tombstones ahead of its live requests
/// (62 of them, so the amortised compaction, which waits until tombstones exceed the live
/// entries by 8, does not run) offers 64 candidates in its first turn, all tombstones, and
/// keeps its place at the head; the next turn drops the other 6 and grants the first live one.
#[test]
#[cfg_attr(
    miri,
    ignore = "a minute under Miri; counts candidates on paths other tests take"
)]
fn f25_a_turn_offers_at_most_64_candidates() {
    let core = Core::new(1, 256, 2, STARVE);
    let got = RefCell::new(Vec::new());
    let mut sink = |g| got.borrow_mut().push(g);
    let (dead, live, waiting) = tombstones_ahead_of_live(&core, 70, 62, &got);
    assert!(
        got.borrow().is_empty(),
        "64 tombstones offered, nothing granted"
    );
    assert_eq!(
        core.counters(),
        (1, 2),
        "tenant 0 handed back ahead of tenant 1"
    );
    assert!(core.help(0, &mut sink));
    assert_eq!(got.take(), [live[0]]);
    assert_eq!(core.state(waiting), QUEUED);
    for &i in &dead {
        assert_eq!(core.state(i), VACANT, "every tombstone's slot is free");
    }
}

/// SPEC F24 with a cap on the slots one tenant holds: tenant 0's turn holder is stopped at
/// `ring.turn_owned`; tenant 0's producers keep enqueuing and cancelling (the tombstones stay
/// in the tenant's inbox until the owner runs). Tenant 0 is refused once it holds its cap
/// (`queue_capacity` of `2 * queue_capacity + cells` slots); tenant 1's requests still find
/// slots and are granted within 100 ms.
#[cfg(feature = "pause-points")]
#[test]
fn f24_ring_stopped_owners_tenant_holds_at_most_its_cap_of_slots() {
    use crate::raw::pause::Gate;
    use std::time::{Duration, Instant};
    const QCAP: u32 = 32;
    const CELLS: u32 = 2;
    let core = Arc::new(Core::new(CELLS, 2 * QCAP + CELLS, 2, STARVE).with_tenant_cap(QCAP));
    let gate = Gate::new("ring.turn_owned");
    let paused = {
        let (core, gate) = (core.clone(), gate.clone());
        std::thread::spawn(move || {
            gate.arm();
            let mut got = Vec::new();
            core.enqueue(0, plain(1), 0, &mut |g| got.push(g)).unwrap();
            got
        })
    };
    assert!(gate.wait_parked(Duration::from_secs(10)));
    let mut sink = |_| {};
    // The paused owner's first request holds one of tenant 0's slots.
    let mut cancelled = 0;
    while let Ok(i) = core.enqueue(0, plain(1), 0, &mut sink) {
        assert!(core.cancel(i, 0, &mut sink));
        cancelled += 1;
        assert!(cancelled < QCAP, "tenant 0 refused at its cap");
    }
    assert_eq!(cancelled, QCAP - 1);
    let start = Instant::now();
    for _ in 0..QCAP {
        let mut got = Vec::new();
        let b = core.enqueue(1, plain(1), 0, &mut |g| got.push(g)).unwrap();
        assert_eq!(got, [b], "tenant 1 finds a slot and the free cell");
        finish_grant(&core, b, &mut sink);
    }
    assert!(start.elapsed() < Duration::from_millis(100));
    gate.release();
    assert_eq!(paused.join().unwrap().len(), 1);
    while core.help(0, &mut sink) {}
    // The owner ran: tenant 0's tombstones are unlinked and it may enqueue again.
    assert!(core.enqueue(0, plain(1), 0, &mut sink).is_ok());
}

/// A cancel on a tenant that is still idle (its producers published and have not announced)
/// owns it with a cleanup turn, which holds no cell credit: it unlinks the tombstone and grants
/// nothing, even with a live request of the tenant absorbed beside it; that request waits for
/// a credit. (Two producers stopped at `ring.announce` keep the tenant idle.)
#[cfg(feature = "pause-points")]
#[test]
fn f24_ring_cleanup_turn_of_a_cancel_grants_nothing() {
    use crate::raw::pause::Gate;
    use std::time::Duration;
    let core = Arc::new(Core::new(1, 8, 2, STARVE));
    let mut sink = |_| {};
    let held = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    let gate = Gate::new("ring.announce");
    let producer = |core: Arc<Core>, gate: Gate| {
        std::thread::spawn(move || {
            gate.arm();
            let mut got = Vec::new();
            let i = core.enqueue(0, plain(1), 0, &mut |g| got.push(g)).unwrap();
            (i, got)
        })
    };
    let p1 = producer(core.clone(), gate.clone());
    assert!(gate.wait_parked(Duration::from_secs(10)));
    let p2 = producer(core.clone(), gate.clone());
    let t = std::time::Instant::now();
    while gate.parked() < 2 {
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::yield_now();
    }
    // The two staged slots: the ones not held and not free are QUEUED.
    let queued: Vec<u32> = (0..8).filter(|&i| core.state(i) == QUEUED).collect();
    assert_eq!(queued.len(), 2);
    assert!(core.cancel(queued[0], 0, &mut sink));
    let other = queued[1];
    assert_eq!(
        core.state(other),
        QUEUED,
        "no credit: the cleanup turn grants nothing"
    );
    assert_eq!(
        core.state(queued[0]),
        VACANT,
        "the tombstone is unlinked and freed"
    );
    gate.release();
    let (a, ga) = p1.join().unwrap();
    let (b, gb) = p2.join().unwrap();
    assert!(ga.is_empty() && gb.is_empty());
    assert_eq!([a, b].iter().filter(|&&i| i == other).count(), 1);
    assert!(core.take(held));
    let mut got = Vec::new();
    core.release(0, &mut |g| got.push(g));
    while core.help(0, &mut |g| got.push(g)) {}
    assert_eq!(got, [other]);
    assert_eq!(core.counters(), (0, 0));
}

/// F11/F12 with F25's candidate bound: a turn whose 64th candidate is the grant that ends its
/// DRR round sends the tenant to the ring's tail like any ended round, not ahead of the ring.
#[test]
#[cfg_attr(
    miri,
    ignore = "a minute under Miri; counts candidates on paths other tests take"
)]
fn f25_a_round_ending_on_the_last_candidate_goes_to_the_tail() {
    let core = Core::new(1, 200, 2, STARVE);
    let got = RefCell::new(Vec::new());
    let mut sink = |g| got.borrow_mut().push(g);
    // 63 tombstones, then 56 live requests (enough that compaction does not run).
    let (_, live, other) = tombstones_ahead_of_live(&core, 63, 56, &got);
    assert_eq!(
        got.take(),
        [live[0]],
        "63 tombstones dropped, the 64th candidate granted"
    );
    finish_grant(&core, live[0], &mut sink);
    while core.help(0, &mut sink) {}
    assert_eq!(got.take(), [other], "tenant 1 next: tenant 0's round ended");
}

/// The rare compaction of tenants waiting in the ring: their tombstones are unlinked and their
/// slots freed without a credit, and the tenants keep their order.
#[test]
fn compaction_frees_the_tombstones_of_tenants_waiting_in_the_ring() {
    let core = Core::new(1, 16, 3, STARVE);
    let got = RefCell::new(Vec::new());
    let mut sink = |g| got.borrow_mut().push(g);
    let held = core.enqueue(2, plain(1), 0, &mut sink).unwrap();
    let a_live = core.enqueue(0, plain(1), 0, &mut sink).unwrap();
    for _ in 0..4 {
        let i = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
        assert!(core.cancel(i, 0, &mut sink));
    }
    let b_live = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    assert_eq!(got.take(), [held]);
    assert_eq!(core.compact_waiting(), 4);
    assert_eq!(core.counters(), (0, 2));
    finish_grant(&core, held, &mut sink);
    assert_eq!(got.take(), [a_live], "tenant 0 first, as before");
    finish_grant(&core, a_live, &mut sink);
    assert_eq!(got.take(), [b_live]);
}

/// After the compaction, a round cut short by a busy cell still resumes ahead of every tenant
/// the compaction requeued (F12): they go back to the ring, not to the front queue.
#[test]
fn compaction_keeps_a_cut_short_round_ahead_of_the_requeued_tenants() {
    let core = Core::new(1, 32, 3, STARVE);
    let got = RefCell::new(Vec::new());
    let mut sink = |g| got.borrow_mut().push(g);
    let held = core.enqueue(2, plain(1), 0, &mut sink).unwrap();
    let a0 = core.enqueue(0, plain(2), 0, &mut sink).unwrap();
    let a1 = core.enqueue(0, plain(2), 0, &mut sink).unwrap();
    let dead = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    let b0 = core.enqueue(1, plain(1), 0, &mut sink).unwrap();
    assert!(core.cancel(dead, 0, &mut sink));
    assert_eq!(got.take(), [held]);
    assert_eq!(core.compact_waiting(), 1);
    finish_grant(&core, held, &mut sink);
    assert_eq!(got.take(), [a0]);
    finish_grant(&core, a0, &mut sink);
    assert_eq!(got.take(), [a1], "tenant 0's round of two resumes first");
    finish_grant(&core, a1, &mut sink);
    assert_eq!(got.take(), [b0]);
}

/// The per-tenant slot cap at its boundary (SPEC F24: a stopped owner's tenant holds at most its
/// cap): with no vacancy to spare (a reserve as large as the store), a tenant gets exactly `cap`
/// slots and the next is refused; with a reserve of 0 the cap gives way.
#[test]
fn f24_ring_tenant_cap_refuses_exactly_at_the_cap() {
    for cap in [1, 3, 64, 65] {
        let core = Core::new(1, 2 * cap + 4, 2, STARVE).with_tenant_cap(cap);
        let taken: Vec<u32> = (0..cap)
            .map(|i| {
                core.alloc(0, 1, u32::MAX)
                    .unwrap_or_else(|_| panic!("slot {i} of a cap of {cap} refused"))
            })
            .collect();
        assert!(
            core.alloc(0, 1, u32::MAX).is_err(),
            "a tenant at its cap of {cap} got slot {}",
            cap + 1
        );
        // Another tenant is not held by tenant 0's cap.
        let other = core.alloc(1, 1, u32::MAX).expect("tenant 1 under its cap");
        core.unref(other);
        // With vacancy to spare beyond the reserve, the cap gives way.
        assert!(
            core.alloc(0, 1, 0).is_ok(),
            "a tenant at its cap of {cap} refused while slots are spare"
        );
        drop(taken);
    }
}

/// A freed slot moves its generation on (SPEC F30): the handle it had before is refused, and
/// the slot taken again carries a new handle — on a one-slot store, so the reuse is certain,
/// over many reuses.
#[test]
fn f30_ring_a_freed_slot_moves_its_generation_on() {
    let core = Core::new(1, 1, 1, STARVE);
    let mut seen = std::collections::HashSet::new();
    for round in 0..1_000 {
        let index = core.alloc(0, 1, 0).expect("the one slot is free");
        let handle = core.handle(index);
        assert!(
            seen.insert(handle),
            "round {round}: handle {handle:#x} issued twice"
        );
        assert!(
            core.is_current(handle),
            "round {round}: a held slot's own handle"
        );
        core.unref(index);
        assert!(
            !core.is_current(handle),
            "round {round}: a freed slot still answers to its old handle {handle:#x}"
        );
        assert!(
            core.try_ref(handle).is_none(),
            "round {round}: a stale handle took a reference"
        );
    }
}

/// The cap's reserve at its boundary (SPEC F24): a tenant at its cap gets a slot only while
/// more than the caller's reserve is free — with exactly the reserve free it is refused, with
/// one more it is not.
#[test]
fn f24_ring_a_capped_tenant_leaves_exactly_the_reserve_free() {
    for cap in [1, 3, 64, 65] {
        let slots = 2 * cap + 4;
        let core = Core::new(1, slots, 2, STARVE).with_tenant_cap(cap);
        let taken: Vec<u32> = (0..cap)
            .map(|_| core.alloc(0, 1, u32::MAX).unwrap())
            .collect();
        let free = slots - cap;
        assert!(
            core.alloc(0, 1, free).is_err(),
            "cap {cap}: a tenant at its cap took a slot with only the reserve of {free} free"
        );
        let extra = core.alloc(0, 1, free - 1).unwrap_or_else(|_| {
            panic!(
                "cap {cap}: refused with {free} free over a reserve of {}",
                free - 1
            )
        });
        core.unref(extra);
        for i in taken {
            core.unref(i);
        }
    }
}

/// References at the count's limit (SPEC F30): a slot takes references up to its count's
/// capacity and refuses the next one — the count never carries into the generation, so the
/// holders' handle stays current.
#[test]
fn f30_ring_a_reference_past_the_count_limit_is_refused() {
    let core = Core::new(1, 2, 1, STARVE);
    let index = core.alloc(0, 1, 0).unwrap();
    let handle = core.handle(index);
    let limit = REF_MASK as u32;
    for n in 1..limit {
        assert_eq!(
            core.try_ref(handle),
            Some(index),
            "reference {} refused",
            n + 1
        );
    }
    assert_eq!(
        core.try_ref(handle),
        None,
        "a reference past the {limit} the count holds"
    );
    assert!(
        core.is_current(handle),
        "the count carried into the generation"
    );
    for _ in 0..limit {
        core.unref(index);
    }
    assert!(
        !core.is_current(handle),
        "the last reference freed the slot"
    );
}

/// A cancelled backlog costs its tenant's next turn one pass (SPEC F31, amortised): 1,000
/// tombstones ahead of one live request — past a turn's 64 candidates — are compacted by the
/// turn the released cell meets, which grants the live request on that same release, frees
/// every tombstone's slot and leaves nothing of tenant 0 linked.
#[test]
fn f31_ring_a_cancelled_backlog_is_compacted_by_the_next_turn() {
    const DEAD: u32 = 1_000;
    let core = Core::new(1, DEAD + 8, 2, STARVE);
    let got = RefCell::new(Vec::new());
    let (_, live, _) = tombstones_ahead_of_live(&core, DEAD, 1, &got);
    assert_eq!(
        got.take(),
        live,
        "the release behind {DEAD} tombstones granted nothing: they were offered one by one"
    );
    let vacant = (0..DEAD + 8).filter(|&i| core.state(i) == VACANT).count() as u32;
    assert!(
        vacant >= DEAD,
        "{} tombstones' slots still held after the turn",
        DEAD - vacant
    );
}
