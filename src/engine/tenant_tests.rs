//! Per-tenant records against the sequential policy (one tenant: the same order), DRR deficit,
//! and the per-tenant inboxes.

use super::super::test_rng::Rng;
use super::*;
use crate::policy::{EntryMeta, Policy, PolicyConfig, Verdict};

const STARVE: u64 = 1_000;

fn meta(rng: &mut Rng, now: u64) -> Meta {
    Meta {
        priority: rng.below(4) as u8,
        deadline: if rng.below(3) == 0 {
            NO_DEADLINE
        } else {
            now + rng.below(5_000)
        },
        enqueued_at: now,
        weight: 1 + rng.below(3) as u32,
    }
}

/// One tenant, random inserts, cancellations and selections (taken or dropped) with a clock
/// that crosses the aging threshold: the record offers exactly the candidates the policy offers
/// (F13 heap order, F14 aging, F31 removal of any entry).
#[test]
fn f13_f14_tenant_record_offers_the_policys_candidates_for_one_tenant() {
    const SLOTS: u32 = 64;
    let mut compared = 0u32;
    // Under Miri (which checks the records' unsafe cells) a few seeds.
    let seeds: u64 = if cfg!(miri) { 2 } else { 200 };
    for seed in 1..=seeds {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut policy = Policy::new(PolicyConfig {
            capacity: SLOTS,
            max_tenants: 1,
            starvation_after: STARVE,
        })
        .unwrap();
        let tenants = Tenants::new(SLOTS, 1, STARVE);
        let mut free: Vec<u32> = (0..SLOTS).rev().collect();
        let mut queued: Vec<u32> = Vec::new();
        let mut now = 0u64;
        for _ in 0..200 {
            now += rng.below(300);
            match rng.below(10) {
                0..=4 if !free.is_empty() => {
                    let i = free.pop().unwrap();
                    let m = meta(&mut rng, now);
                    policy
                        .insert(
                            i,
                            EntryMeta {
                                tenant: 0,
                                priority: m.priority,
                                deadline: m.deadline,
                                enqueued_at: m.enqueued_at,
                                weight: m.weight,
                            },
                        )
                        .unwrap();
                    // SAFETY: slot `i` came off the free list: nobody else has it.
                    unsafe { tenants.stage(i, m) };
                    tenants.publish(0, i);
                    queued.push(i);
                }
                5 if !queued.is_empty() => {
                    let i = queued.swap_remove(rng.below(queued.len() as u64) as usize);
                    assert!(policy.remove(i));
                    // SAFETY: this test is the only thread.
                    let mut own = unsafe { tenants.owner(0) };
                    own.absorb();
                    own.unlink(i);
                    free.push(i);
                }
                _ => {
                    // SAFETY: this test is the only thread.
                    let mut own = unsafe { tenants.owner(0) };
                    own.absorb();
                    let take = rng.below(4) != 0;
                    let mut budget = 1;
                    let mut shown = None;
                    let got = policy.select(
                        now,
                        &mut |i| {
                            shown = Some(i);
                            if take {
                                Verdict::Take
                            } else {
                                Verdict::Drop
                            }
                        },
                        &mut budget,
                    );
                    let cand = own.candidate(now);
                    assert_eq!(cand, shown, "seed {seed}: candidates differ");
                    compared += 1;
                    if let Some(i) = cand {
                        own.unlink(i);
                        queued.retain(|&q| q != i);
                        free.push(i);
                        assert_eq!(got.is_some(), take);
                    }
                    assert_eq!(own.len() as usize, queued.len());
                }
            }
        }
    }
    assert!(
        cfg!(miri) || compared >= 10_000,
        "compared {compared} selections"
    );
}

/// DRR (F12): a turn's credits are the weight at its first grant; a later insert's weight
/// applies from the next round.
#[test]
fn f12_tenant_deficit_is_fixed_at_the_rounds_first_grant() {
    let tenants = Tenants::new(8, 2, STARVE);
    let m = |weight| Meta {
        priority: 0,
        deadline: NO_DEADLINE,
        enqueued_at: 0,
        weight,
    };
    // SAFETY: single thread; the slots are fresh.
    unsafe { tenants.stage(0, m(3)) };
    tenants.publish(1, 0);
    // SAFETY: single thread.
    let mut own = unsafe { tenants.owner(1) };
    own.absorb();
    assert!(!own.mid_round());
    assert!(own.charge(), "first of three");
    // SAFETY: single thread; slot 1 is fresh.
    unsafe { tenants.stage(1, m(1)) };
    tenants.publish(1, 1);
    own.absorb();
    assert!(own.mid_round());
    assert!(
        own.charge(),
        "second of three: the new weight waits for the next round"
    );
    assert!(!own.charge(), "third ends the round");
    assert!(!own.mid_round());
    assert!(!own.charge(), "the next round has weight 1");
    own.charge();
    own.end_round();
    assert!(!own.mid_round());
}

/// Each tenant's inbox yields its own slots in publication order, at 10^4 tenants and 10^5
/// slots, published interleaved across tenants.
#[test]
fn f13_tenant_inboxes_keep_publication_order_per_tenant_at_ten_thousand_tenants() {
    const TENANTS: u32 = 10_000;
    const SLOTS: u32 = 100_000;
    let tenants = Tenants::new(SLOTS, TENANTS, STARVE);
    for i in 0..SLOTS {
        // SAFETY: single thread; each slot is staged once.
        unsafe {
            tenants.stage(
                i,
                Meta {
                    priority: 0,
                    deadline: NO_DEADLINE,
                    enqueued_at: u64::from(i),
                    weight: 1,
                },
            )
        };
        let first = tenants.publish(i % TENANTS, i);
        assert_eq!(first, i < TENANTS);
    }
    for t in 0..TENANTS {
        assert!(tenants.inbox_nonempty(t));
        // SAFETY: single thread.
        let mut own = unsafe { tenants.owner(t) };
        assert_eq!(own.absorb(), SLOTS / TENANTS);
        assert!(!tenants.inbox_nonempty(t));
        let mut expect = t;
        // Same priority, no deadline: FIFO (sequence) order.
        while let Some(i) = own.candidate(0) {
            assert_eq!(i, expect);
            own.unlink(i);
            expect += TENANTS;
        }
        assert_eq!(expect, t + SLOTS);
    }
}

/// Producers on several threads publish to a few tenants at once: every slot reaches its
/// tenant exactly once, and each producer's slots in its own order.
#[test]
fn tenant_inboxes_take_concurrent_publications_exactly_once() {
    const THREADS: u32 = 4;
    const PER: u32 = if cfg!(miri) { 50 } else { 5_000 };
    const TENANTS: u32 = 8;
    let tenants = Tenants::new(THREADS * PER, TENANTS, STARVE);
    std::thread::scope(|s| {
        for th in 0..THREADS {
            let tenants = &tenants;
            s.spawn(move || {
                for k in 0..PER {
                    let i = th * PER + k;
                    // SAFETY: slot `i` belongs to this thread alone until published.
                    unsafe {
                        tenants.stage(
                            i,
                            Meta {
                                priority: 0,
                                deadline: NO_DEADLINE,
                                enqueued_at: 0,
                                weight: 1,
                            },
                        )
                    };
                    tenants.publish(k % TENANTS, i);
                }
            });
        }
    });
    let mut seen = vec![false; (THREADS * PER) as usize];
    for t in 0..TENANTS {
        // SAFETY: the producers have joined.
        let mut own = unsafe { tenants.owner(t) };
        own.absorb();
        let mut last = [None::<u32>; THREADS as usize];
        while let Some(i) = own.candidate(0) {
            assert!(!std::mem::replace(&mut seen[i as usize], true));
            assert_eq!(i % PER % TENANTS, t);
            let th = (i / PER) as usize;
            assert!(last[th].is_none_or(|l| l < i), "per-producer order");
            last[th] = Some(i);
            own.unlink(i);
        }
    }
    assert!(seen.iter().all(|&s| s));
}
