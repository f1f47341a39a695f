//! Rule tests for the policy, and a differential property test against a naive model.

use super::*;

mod model;

const STARVE: u64 = 1_000;

fn config(capacity: u32, max_tenants: u32) -> PolicyConfig {
    PolicyConfig {
        capacity,
        max_tenants,
        starvation_after: STARVE,
    }
}

fn policy(capacity: u32, max_tenants: u32) -> Policy {
    Policy::new(config(capacity, max_tenants)).unwrap()
}

fn meta(tenant: u32) -> EntryMeta {
    EntryMeta {
        tenant,
        priority: 0,
        deadline: NO_DEADLINE,
        enqueued_at: 0,
        weight: 1,
    }
}

/// A judge that answers from a script (then `Take` forever) and records what it was shown.
struct Script<'a> {
    verdicts: &'a [Verdict],
    shown: Vec<u32>,
}

impl<'a> Script<'a> {
    fn new(verdicts: &'a [Verdict]) -> Self {
        Self {
            verdicts,
            shown: Vec::new(),
        }
    }
}

impl Judge for Script<'_> {
    fn judge(&mut self, index: u32) -> Verdict {
        let v = self
            .verdicts
            .get(self.shown.len())
            .copied()
            .unwrap_or(Verdict::Take);
        self.shown.push(index);
        v
    }
}

/// Grants everything, one `select` per grant, at time `now`; returns the grant order.
fn drain(p: &mut Policy, now: u64) -> Vec<u32> {
    let mut out = Vec::new();
    while let Some(i) = p.select(now, &mut |_| Verdict::Take, &mut 64) {
        out.push(i);
    }
    out
}

fn take_one(p: &mut Policy, now: u64) -> Option<u32> {
    p.select(now, &mut |_| Verdict::Take, &mut 64)
}

#[test]
fn new_validates_config() {
    let ok = config(4, 2);
    assert!(Policy::new(ok).is_ok());
    assert!(Policy::new(PolicyConfig { capacity: 0, ..ok }).is_ok());
    for (bad, field) in [
        (
            PolicyConfig {
                capacity: u32::MAX,
                ..ok
            },
            "capacity",
        ),
        (
            PolicyConfig {
                max_tenants: 0,
                ..ok
            },
            "max_tenants",
        ),
        (
            PolicyConfig {
                max_tenants: u32::MAX,
                ..ok
            },
            "max_tenants",
        ),
        (
            PolicyConfig {
                starvation_after: 0,
                ..ok
            },
            "starvation_after",
        ),
    ] {
        let e = Policy::new(bad).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.field(), Some(field));
    }
}

#[test]
fn insert_rejects_bad_input_and_changes_nothing() {
    let mut p = policy(2, 2);
    let reason = |r: Result<u64, Error>| r.unwrap_err().reason();
    assert_eq!(reason(p.insert(2, meta(0))), "policy-slot");
    assert_eq!(reason(p.insert(0, meta(2))), "tenant-out-of-range");
    assert_eq!(
        reason(p.insert(
            0,
            EntryMeta {
                weight: 0,
                ..meta(0)
            }
        )),
        "zero-weight"
    );
    assert!(p.is_empty() && p.queued_tenants() == 0);
    assert_eq!(p.insert(0, meta(0)), Ok(0));
    assert_eq!(reason(p.insert(0, meta(1))), "policy-slot");
    assert_eq!(
        p.insert(1, meta(1)),
        Ok(1),
        "failed inserts use no sequence"
    );
    assert_eq!((p.len(), p.queued_tenants()), (2, 2));
}

#[test]
fn zero_capacity_refuses_every_insert() {
    let mut p = policy(0, 1);
    assert!(p.insert(0, meta(0)).is_err());
    assert_eq!(take_one(&mut p, 0), None);
}

#[test]
fn f11_new_tenant_joins_ring_tail() {
    let mut p = policy(8, 4);
    p.insert(0, meta(0)).unwrap();
    p.insert(1, meta(0)).unwrap();
    p.insert(2, meta(1)).unwrap();
    assert_eq!(p.peek_tenant(), Some(0));
    assert_eq!(take_one(&mut p, 0), Some(0)); // ring: 1, 0
    p.insert(3, meta(2)).unwrap(); // ring: 1, 0, 2
    assert_eq!(drain(&mut p, 0), [2, 1, 3]);
}

#[test]
fn f11_tenant_with_work_rotates_to_tail_after_its_turn() {
    let mut p = policy(8, 3);
    for (i, t) in [(0, 0), (1, 0), (2, 0), (3, 1), (4, 2), (5, 2)] {
        p.insert(i, meta(t)).unwrap();
    }
    assert_eq!(drain(&mut p, 0), [0, 3, 4, 1, 5, 2]);
}

#[test]
fn f11_emptied_tenant_leaves_and_keeps_no_state() {
    let mut p = policy(8, 2);
    p.insert(
        0,
        EntryMeta {
            weight: 2,
            ..meta(0)
        },
    )
    .unwrap();
    p.insert(1, meta(1)).unwrap();
    // Tenant 0's only entry is taken with one of its two credits left: it leaves at once.
    assert_eq!(take_one(&mut p, 0), Some(0));
    assert_eq!(p.queued_tenants(), 1);
    assert_eq!(p.tenant_len(0), 0);
    // It comes back as a newcomer behind tenant 1, with a fresh turn of two credits.
    p.insert(
        2,
        EntryMeta {
            weight: 2,
            ..meta(0)
        },
    )
    .unwrap();
    p.insert(
        3,
        EntryMeta {
            weight: 2,
            ..meta(0)
        },
    )
    .unwrap();
    p.insert(
        4,
        EntryMeta {
            weight: 2,
            ..meta(0)
        },
    )
    .unwrap();
    assert_eq!(take_one(&mut p, 0), Some(1));
    p.insert(5, meta(1)).unwrap();
    assert_eq!(drain(&mut p, 0), [2, 3, 5, 4]);
    assert_eq!((p.len(), p.queued_tenants()), (0, 0));
}

#[test]
fn f11_all_cancelled_tenant_is_skipped_at_its_turn() {
    let mut p = policy(8, 3);
    p.insert(0, meta(0)).unwrap();
    p.insert(1, meta(1)).unwrap();
    p.insert(2, meta(2)).unwrap();
    p.insert(3, meta(0)).unwrap();
    assert!(p.remove(1));
    assert!(!p.remove(1));
    // Tenant 1 keeps its position until its turn.
    assert_eq!(p.queued_tenants(), 3);
    assert_eq!(take_one(&mut p, 0), Some(0));
    assert_eq!(p.peek_tenant(), Some(1));
    assert_eq!(p.peek(0), Some(2));
    // At its turn it is skipped and leaves.
    assert_eq!(take_one(&mut p, 0), Some(2));
    assert_eq!(p.queued_tenants(), 1);
    assert_eq!(drain(&mut p, 0), [3]);
}

#[test]
fn f11_refilled_before_its_turn_keeps_the_position() {
    let mut p = policy(8, 3);
    p.insert(0, meta(0)).unwrap();
    p.insert(1, meta(1)).unwrap();
    p.insert(2, meta(2)).unwrap();
    assert!(p.remove(1));
    p.insert(3, meta(1)).unwrap();
    assert_eq!(drain(&mut p, 0), [0, 3, 2]);
}

#[test]
fn f12_weights_give_grants_per_turn() {
    let mut p = policy(16, 2);
    for i in 0..5 {
        p.insert(
            i,
            EntryMeta {
                weight: 3,
                ..meta(0)
            },
        )
        .unwrap();
        p.insert(5 + i, meta(1)).unwrap();
    }
    let tenants: Vec<u32> = drain(&mut p, 0)
        .iter()
        .map(|&i| u32::from(i >= 5))
        .collect();
    assert_eq!(tenants, [0, 0, 0, 1, 0, 0, 1, 1, 1, 1]);
}

#[test]
fn f12_shares_match_weights_over_window() {
    const GRANTS: usize = if cfg!(miri) { 120 } else { 6_000 };
    let weights = [1u32, 2, 3, 1];
    let sum: u32 = weights.iter().sum();
    let mut p = policy(64, weights.len() as u32);
    let owner = |i: u32| i / 16;
    for (t, &w) in weights.iter().enumerate() {
        for k in 0..4 {
            let m = EntryMeta {
                weight: w,
                ..meta(t as u32)
            };
            p.insert(t as u32 * 16 + k, m).unwrap();
        }
    }
    let mut grants = Vec::with_capacity(GRANTS);
    for _ in 0..GRANTS {
        let i = take_one(&mut p, 0).unwrap();
        grants.push(owner(i));
        // Saturated backlog: the granted slot is queued again at once.
        let m = EntryMeta {
            weight: weights[owner(i) as usize],
            ..meta(owner(i))
        };
        p.insert(i, m).unwrap();
    }
    for k in [1usize, 3, 10] {
        let window = sum as usize * k;
        for w in grants.windows(window) {
            for (t, &weight) in weights.iter().enumerate() {
                let got = w.iter().filter(|&&o| o == t as u32).count() as i64;
                let want = (weight as usize * k) as i64;
                assert!(
                    (got - want).abs() <= i64::from(weight),
                    "{t}: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn f13_priority_then_deadline_then_sequence() {
    let mut p = policy(8, 1);
    let m = |priority, deadline| EntryMeta {
        priority,
        deadline,
        ..meta(0)
    };
    p.insert(0, m(1, NO_DEADLINE)).unwrap();
    p.insert(1, m(1, 500)).unwrap();
    p.insert(2, m(1, 100)).unwrap();
    p.insert(3, m(2, NO_DEADLINE)).unwrap();
    p.insert(4, m(1, 100)).unwrap();
    p.insert(5, m(0, 1)).unwrap();
    p.insert(6, m(1, NO_DEADLINE)).unwrap();
    assert_eq!(drain(&mut p, 0), [3, 2, 4, 1, 0, 6, 5]);
}

#[test]
fn f14_aged_request_precedes_newer() {
    let mut p = policy(8, 1);
    let m = |priority, enqueued_at| EntryMeta {
        priority,
        enqueued_at,
        ..meta(0)
    };
    p.insert(0, m(0, 0)).unwrap();
    p.insert(1, m(5, 100)).unwrap();
    p.insert(2, m(9, 200)).unwrap();
    p.insert(3, m(9, 300)).unwrap();
    // Nothing aged yet: rank order.
    assert_eq!(take_one(&mut p, 999), Some(2));
    // Entry 0 has waited 1000: it precedes every newer entry, whatever their priority.
    assert_eq!(take_one(&mut p, 1_000), Some(0));
    // Entry 1 aged, entry 3 not.
    assert_eq!(take_one(&mut p, 1_100), Some(1));
    p.insert(4, m(0, 400)).unwrap();
    p.insert(5, m(1, 500)).unwrap();
    // Both remaining older entries aged: the oldest sequence wins over higher priority.
    assert_eq!(drain(&mut p, 5_000), [3, 4, 5]);
}

#[test]
fn f14_aging_never_crosses_tenants() {
    let mut p = policy(8, 2);
    p.insert(
        0,
        EntryMeta {
            enqueued_at: 500,
            ..meta(1)
        },
    )
    .unwrap();
    p.insert(
        1,
        EntryMeta {
            enqueued_at: 500,
            ..meta(1)
        },
    )
    .unwrap();
    p.insert(2, meta(0)).unwrap(); // joins behind tenant 1, aged by now = 2000
    assert_eq!(drain(&mut p, 2_000), [0, 2, 1]);
}

#[test]
fn f15_priority_flood_cannot_take_other_tenants_turns() {
    let mut p = policy(128, 2);
    for i in 0..100 {
        p.insert(
            i,
            EntryMeta {
                priority: 255,
                ..meta(0)
            },
        )
        .unwrap();
    }
    for i in 100..110 {
        p.insert(i, meta(1)).unwrap();
    }
    let order = drain(&mut p, 0);
    let tenants: Vec<u32> = order.iter().map(|&i| u32::from(i >= 100)).collect();
    for pair in tenants[..20].chunks(2) {
        assert_eq!(pair, [0, 1]);
    }
}

#[test]
fn f19_pass_is_bounded_to_64_candidates() {
    let mut p = policy(128, 4);
    for i in 0..100 {
        p.insert(
            i,
            EntryMeta {
                deadline: 10,
                ..meta(i % 4)
            },
        )
        .unwrap();
    }
    let drops = [Verdict::Drop; 100];
    let mut judge = Script::new(&drops);
    let mut budget = 64;
    assert_eq!(p.select(0, &mut judge, &mut budget), None);
    assert_eq!((judge.shown.len(), budget, p.len()), (64, 0, 36));
    let mut judge = Script::new(&drops);
    let mut budget = 30;
    assert_eq!(p.expire(10, &mut judge, &mut budget), 30);
    assert_eq!((judge.shown.len(), budget, p.len()), (30, 0, 6));
}

#[test]
fn drop_offers_the_same_tenants_next_candidate_then_moves_on() {
    let mut p = policy(8, 2);
    p.insert(0, meta(0)).unwrap();
    p.insert(1, meta(0)).unwrap();
    p.insert(2, meta(1)).unwrap();
    let mut judge = Script::new(&[Verdict::Drop, Verdict::Drop, Verdict::Take]);
    assert_eq!(p.select(0, &mut judge, &mut 64), Some(2));
    assert_eq!(judge.shown, [0, 1, 2]);
    assert!(p.is_empty() && p.queued_tenants() == 0);
}

#[test]
fn keep_changes_nothing() {
    let mut p = policy(8, 2);
    p.insert(
        0,
        EntryMeta {
            weight: 2,
            ..meta(0)
        },
    )
    .unwrap();
    p.insert(1, meta(0)).unwrap();
    p.insert(2, meta(1)).unwrap();
    let mut judge = Script::new(&[Verdict::Keep]);
    let mut budget = 64;
    assert_eq!(p.select(0, &mut judge, &mut budget), None);
    assert_eq!((judge.shown.as_slice(), budget, p.len()), (&[0][..], 63, 3));
    // The turn had not started: the weight of a later insert still applies to it.
    p.insert(
        3,
        EntryMeta {
            weight: 3,
            ..meta(0)
        },
    )
    .unwrap();
    assert_eq!(drain(&mut p, 0), [0, 1, 3, 2]);
}

#[test]
fn f21_sequence_exhaustion_fails() {
    let mut p = Policy::with_first_sequence(config(4, 1), u64::MAX - 2).unwrap();
    assert_eq!(p.insert(0, meta(0)), Ok(u64::MAX - 2));
    assert_eq!(p.insert(1, meta(0)), Ok(u64::MAX - 1));
    let e = p.insert(2, meta(0)).unwrap_err();
    assert_eq!(
        (e.code(), e.reason().as_str()),
        (Code::Unavailable, "sequence-exhausted")
    );
    assert!(!p.contains(2));
    assert_eq!(p.len(), 2);
    assert_eq!(drain(&mut p, 0), [0, 1]);
}

#[test]
fn f31_remove_is_independent_of_depth() {
    const DEPTH: u32 = if cfg!(miri) { 64 } else { 4096 };
    let mut p = policy(DEPTH, 1);
    for i in 0..DEPTH {
        // Distinct priorities and deadlines so the order is not just insertion order.
        let m = EntryMeta {
            priority: (i % 7) as u8,
            deadline: u64::from(DEPTH - i),
            ..meta(0)
        };
        p.insert(i, m).unwrap();
    }
    let victims = [DEPTH - 1, DEPTH / 2, 0, DEPTH / 3];
    for v in victims {
        assert!(p.remove(v));
        assert!(!p.contains(v));
    }
    let order = drain(&mut p, 0);
    let mut expected: Vec<u32> = (0..DEPTH).filter(|i| !victims.contains(i)).collect();
    expected.sort_by_key(|&i| (core::cmp::Reverse(i % 7), DEPTH - i));
    assert_eq!(order, expected);
}

#[test]
fn d30_raise_priority_reorders_queued() {
    let mut p = policy(8, 1);
    for i in 0..5 {
        p.insert(i, meta(0)).unwrap();
    }
    assert!(p.raise_priority(3, 4));
    assert!(!p.raise_priority(3, 2), "never lowers");
    assert!(!p.raise_priority(7, 9), "not queued");
    assert!(p.raise_priority(1, 4));
    assert_eq!(p.priority(3), Some(4));
    assert_eq!(drain(&mut p, 0), [1, 3, 0, 2, 4]);
}

#[test]
fn d30_set_priority_drops_back() {
    let mut p = policy(8, 1);
    for i in 0..4 {
        p.insert(
            i,
            EntryMeta {
                priority: 5,
                ..meta(0)
            },
        )
        .unwrap();
    }
    assert!(p.set_priority(2, 9));
    assert_eq!(p.peek(0), Some(2));
    assert!(p.set_priority(2, 5));
    assert!(!p.set_priority(2, 5));
    assert!(p.set_priority(0, 1));
    assert_eq!(drain(&mut p, 0), [1, 2, 3, 0]);
}

#[test]
fn f46_expire_sweeps_only_expired_entries_in_deadline_order() {
    let mut p = policy(8, 3);
    let m = |tenant, deadline| EntryMeta {
        deadline,
        ..meta(tenant)
    };
    p.insert(0, m(0, 300)).unwrap();
    p.insert(1, m(1, 100)).unwrap();
    p.insert(2, m(2, NO_DEADLINE)).unwrap();
    p.insert(3, m(0, 200)).unwrap();
    p.insert(4, m(2, 200)).unwrap();
    p.insert(5, m(1, 400)).unwrap();
    assert_eq!(p.next_deadline(), Some(100));
    let mut judge = Script::new(&[Verdict::Drop; 8]);
    assert_eq!(p.expire(250, &mut judge, &mut 64), 3);
    assert_eq!(judge.shown, [1, 3, 4]);
    assert_eq!(p.next_deadline(), Some(300));
    // Keep stops the sweep and leaves the entry.
    let mut judge = Script::new(&[Verdict::Keep]);
    assert_eq!(p.expire(1_000, &mut judge, &mut 64), 0);
    assert!(p.contains(0));
    // Expired tenants keep their ring positions (lazy removal).
    assert_eq!(p.queued_tenants(), 3);
    assert_eq!(drain(&mut p, 0), [0, 5, 2]);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 128 }))]

    /// Deep single-tenant heaps: random removals and priority changes at any depth keep the
    /// drained order equal to a sort of what is left.
    #[test]
    fn heap_order_survives_random_removals_and_reprioritisation(
        keys in proptest::collection::vec((0u8..6, proptest::option::of(0u64..50)), 1..300),
        edits in proptest::collection::vec((0usize..300, 0u8..3, 0u8..6), 0..300),
    ) {
        let n = keys.len() as u32;
        let mut p = policy(n, 1);
        let mut live: Vec<Option<(u8, u64, u32)>> = Vec::new();
        for (i, &(priority, deadline)) in keys.iter().enumerate() {
            let deadline = deadline.unwrap_or(NO_DEADLINE);
            p.insert(i as u32, EntryMeta { priority, deadline, ..meta(0) }).unwrap();
            live.push(Some((priority, deadline, i as u32)));
        }
        for (slot, kind, priority) in edits {
            let slot = slot % keys.len();
            let Some(entry) = live[slot].as_mut() else { continue };
            match kind {
                0 => {
                    proptest::prop_assert!(p.remove(slot as u32));
                    live[slot] = None;
                }
                1 => {
                    let raised = p.raise_priority(slot as u32, priority);
                    proptest::prop_assert_eq!(raised, priority > entry.0);
                    entry.0 = entry.0.max(priority);
                }
                _ => {
                    proptest::prop_assert_eq!(p.set_priority(slot as u32, priority), priority != entry.0);
                    entry.0 = priority;
                }
            }
        }
        let mut want: Vec<_> = live.into_iter().flatten().collect();
        want.sort_by_key(|&(pr, d, i)| (core::cmp::Reverse(pr), d, i));
        let want: Vec<u32> = want.into_iter().map(|(_, _, i)| i).collect();
        proptest::prop_assert_eq!(drain(&mut p, 0), want);
    }
}

#[test]
fn f20_selection_visits_only_queued_tenants() {
    // A million possible tenants (fewer under Miri), two with work: a pass shows the judge
    // exactly the queued entries, and the ring holds exactly the two active tenants.
    let tenants = if cfg!(miri) { 1_000 } else { 1_000_000 };
    let mut p = policy(8, tenants);
    p.insert(0, meta(tenants - 1)).unwrap();
    p.insert(1, meta(7)).unwrap();
    assert_eq!(p.queued_tenants(), 2);
    let mut judge = Script::new(&[]);
    let mut budget = 64;
    assert_eq!(p.select(0, &mut judge, &mut budget), Some(0));
    assert_eq!(p.select(0, &mut judge, &mut budget), Some(1));
    assert_eq!(p.select(0, &mut judge, &mut budget), None);
    assert_eq!(judge.shown, vec![0, 1]);
    assert_eq!(budget, 62, "only the two live candidates were shown");
    assert_eq!(
        p.queued_tenants(),
        0,
        "served tenants leave and keep no state"
    );
}
