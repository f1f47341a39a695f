//! Unit tests of the in-place change on the engine's core (SPEC F36): the notice path, the
//! grant CAS that fails on a pending change, sizes past one turn's candidates, and aging.
//! They also run under Miri (the node accesses of `reorder` and `relink`).

use super::super::{Core, Meta, Wanted, GRANTED, QUEUED};
use crate::policy::NO_DEADLINE;

fn meta(priority: u8, enqueued_at: u64) -> Meta {
    Meta {
        priority,
        deadline: NO_DEADLINE,
        enqueued_at,
        weight: 1,
    }
}

/// One cell, held by tenant 1's request, so tenant 0's requests queue.
struct Bench {
    core: Core,
    granted: Vec<u32>,
}

impl Bench {
    fn new(slots: u32, starvation_after: u64) -> (Bench, u32) {
        let mut b = Bench {
            core: Core::new(1, slots, 2, starvation_after),
            granted: Vec::new(),
        };
        let held = b.enqueue(1, meta(0, 0));
        assert_eq!(b.granted, [held]);
        b.granted.clear();
        (b, held)
    }

    fn enqueue(&mut self, tenant: u32, meta: Meta) -> u32 {
        let granted = &mut self.granted;
        self.core
            .enqueue(tenant, meta, 0, &mut |i| granted.push(i))
            .unwrap()
    }

    fn change(&mut self, index: u32, wanted: Wanted) -> bool {
        let i = self.core.try_ref(self.core.handle(index)).expect("held");
        let granted = &mut self.granted;
        let ok = self
            .core
            .change(i, wanted, 0, &mut |g| granted.push(g))
            .is_ok();
        self.core.unref(i);
        ok
    }

    /// Takes the last grant (frees its slot) and releases its cell at `now`: the next grant.
    fn cycle(&mut self, taken: u32, now: u64) -> Option<u32> {
        assert!(self.core.take(taken));
        let before = self.granted.len();
        let granted = &mut self.granted;
        self.core.release(now, &mut |i| granted.push(i));
        assert!(self.granted.len() <= before + 1);
        self.granted.get(before).copied()
    }
}

fn priority(p: u8) -> Wanted {
    Wanted {
        priority: Some(p),
        deadline: None,
    }
}

#[test]
fn f36_core_a_notice_reorders_at_the_next_turn() {
    let (mut b, held) = Bench::new(8, u64::MAX);
    let q: Vec<u32> = (0..4).map(|_| b.enqueue(0, meta(0, 0))).collect();
    assert!(b.change(q[2], priority(5)));
    assert!(b.change(q[3], priority(5)));
    assert!(
        b.change(q[3], priority(4)),
        "a second change before the first is applied"
    );
    let mut order = Vec::new();
    let mut last = held;
    while let Some(g) = b.cycle(last, 0) {
        order.push(g);
        last = g;
    }
    assert_eq!(order, [q[2], q[3], q[0], q[1]]);
    for i in q {
        assert!(b.core.change_quiet(i, 0), "slot {i} kept by a notice");
    }
}

#[test]
fn f36_core_a_grant_cas_that_meets_a_pending_change_applies_it() {
    let (mut b, held) = Bench::new(8, u64::MAX);
    let older = b.enqueue(0, meta(0, 0));
    let lowered = b.enqueue(0, meta(1, 0));
    // Only the CAS (as a changer stopped before its notice): the order does not show it yet,
    // so the turn offers `lowered` first and its grant CAS fails on `CHANGED`.
    let i = b.core.try_ref(b.core.handle(lowered)).unwrap();
    assert!(b.core.mark_changed(i, priority(0)).is_ok());
    assert_eq!(
        b.cycle(held, 0),
        Some(older),
        "the pending change was not applied"
    );
    assert_eq!(b.core.state(lowered), QUEUED, "the turn applied the change");
    // The notice comes late: it finds the change applied and only lets its reference go.
    let tenant = b.core.post_notice(i).expect("posted");
    assert!(
        b.core.turns.touch(tenant).is_none(),
        "the tenant is in the ring"
    );
    b.core.unref(i);
    assert_eq!(b.cycle(older, 0), Some(lowered));
    assert_eq!(b.core.state(lowered), GRANTED);
    assert!(b.core.take(lowered));
    assert!(b.core.change_quiet(lowered, 0));
}

#[test]
fn f36_core_200_changes_in_one_tenant_past_one_turn_s_candidates() {
    const N: u32 = if cfg!(miri) { 70 } else { 200 };
    let (mut b, held) = Bench::new(N + 2, u64::MAX);
    let q: Vec<u32> = (0..N).map(|_| b.enqueue(0, meta(0, 0))).collect();
    // Reverse the order: the newest highest.
    for (k, &i) in q.iter().enumerate() {
        assert!(b.change(i, priority((k % 251) as u8)));
    }
    let mut order = Vec::new();
    let mut last = held;
    while let Some(g) = b.cycle(last, 0) {
        order.push(g);
        last = g;
    }
    let mut expect = q.clone();
    expect.reverse();
    assert_eq!(order, expect);
}

#[test]
fn f36_core_a_change_keeps_the_fifo_place_for_aging() {
    // Aging after 10 ns: at `now = 100` every request has aged, and the oldest goes first
    // whatever its priority (F14); a change moves a request in the heap, not in the FIFO.
    let (mut b, held) = Bench::new(8, 10);
    let a = b.enqueue(0, meta(0, 1));
    let c = b.enqueue(0, meta(0, 2));
    let d = b.enqueue(0, meta(0, 3));
    assert!(b.change(d, priority(9)));
    // Also through the relink path.
    let i = b.core.try_ref(b.core.handle(a)).unwrap();
    assert!(b.core.mark_changed(i, priority(3)).is_ok());
    let g1 = b.cycle(held, 100).unwrap();
    let g2 = b.cycle(g1, 100).unwrap();
    let g3 = b.cycle(g2, 100).unwrap();
    assert_eq!([g1, g2, g3], [a, c, d], "aged requests go oldest first");
    // The late notice: the tenant went idle, so the touch gives a cleanup turn that takes it.
    let t = b.core.post_notice(i).expect("posted");
    let granted = &mut b.granted;
    let turn = b.core.turns.touch(t).expect("the tenant is idle");
    b.core.run(turn, 100, &mut |g| granted.push(g));
    b.core.unref(i);
    assert!(b.core.take(g3));
    for s in [a, c, d] {
        assert!(b.core.change_quiet(s, 0), "slot {s} kept");
    }
}
