//! A deliberately naive model of the policy (linear scans over a `Vec`, a `VecDeque` ring) and
//! a property test that random operation sequences give identical outputs on both, step by step.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::super::*;
use super::Script;

/// One queued entry of the model.
#[derive(Clone, Copy, Debug)]
struct Entry {
    tenant: u32,
    priority: u8,
    deadline: u64,
    enqueued_at: u64,
    seq: u64,
}

/// The rules of the module docs, written as directly as possible.
struct Model {
    entries: Vec<Option<Entry>>,
    ring: VecDeque<u32>,
    weight: Vec<u32>,
    credits: Vec<u32>,
    next_seq: u64,
    starve: u64,
}

impl Model {
    fn new(cfg: PolicyConfig) -> Self {
        Self {
            entries: vec![None; cfg.capacity as usize],
            ring: VecDeque::new(),
            weight: vec![1; cfg.max_tenants as usize],
            credits: vec![0; cfg.max_tenants as usize],
            next_seq: 0,
            starve: cfg.starvation_after,
        }
    }

    fn count(&self, tenant: u32) -> usize {
        self.live().filter(|(_, e)| e.tenant == tenant).count()
    }

    fn live(&self) -> impl Iterator<Item = (u32, Entry)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.map(|e| (i as u32, e)))
    }

    fn insert(&mut self, index: u32, meta: EntryMeta) -> Result<u64, ()> {
        let free = matches!(self.entries.get(index as usize), Some(None));
        if !free || meta.tenant as usize >= self.weight.len() || meta.weight == 0 {
            return Err(());
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.entries[index as usize] = Some(Entry {
            tenant: meta.tenant,
            priority: meta.priority,
            deadline: meta.deadline,
            enqueued_at: meta.enqueued_at,
            seq,
        });
        self.weight[meta.tenant as usize] = meta.weight;
        if !self.ring.contains(&meta.tenant) {
            self.ring.push_back(meta.tenant);
        }
        Ok(seq)
    }

    /// F14 then F13: the oldest aged entry, else the best by (priority desc, deadline, seq).
    fn candidate(&self, tenant: u32, now: u64) -> u32 {
        let mine = || self.live().filter(|(_, e)| e.tenant == tenant);
        let aged = mine()
            .filter(|(_, e)| now.saturating_sub(e.enqueued_at) >= self.starve)
            .min_by_key(|(_, e)| e.seq);
        aged.or_else(|| {
            mine().min_by_key(|(_, e)| (core::cmp::Reverse(e.priority), e.deadline, e.seq))
        })
        .unwrap()
        .0
    }

    fn peek(&self, now: u64) -> Option<u32> {
        let t = self.ring.iter().copied().find(|&t| self.count(t) != 0)?;
        Some(self.candidate(t, now))
    }

    fn select(&mut self, now: u64, judge: &mut impl Judge, budget: &mut u32) -> Option<u32> {
        loop {
            let t = *self.ring.front()?;
            if self.count(t) == 0 {
                self.ring.pop_front();
                self.credits[t as usize] = 0;
                continue;
            }
            if *budget == 0 {
                return None;
            }
            let c = self.candidate(t, now);
            *budget -= 1;
            match judge.judge(c) {
                Verdict::Keep => return None,
                Verdict::Drop => self.entries[c as usize] = None,
                Verdict::Take => {
                    self.entries[c as usize] = None;
                    let t = t as usize;
                    if self.credits[t] == 0 {
                        self.credits[t] = self.weight[t];
                    }
                    self.credits[t] -= 1;
                    if self.count(t as u32) == 0 {
                        self.ring.pop_front();
                        self.credits[t] = 0;
                    } else if self.credits[t] == 0 {
                        self.ring.pop_front();
                        self.ring.push_back(t as u32);
                    }
                    return Some(c);
                }
            }
        }
    }

    fn expire(&mut self, now: u64, judge: &mut impl Judge, budget: &mut u32) -> usize {
        let mut removed = 0;
        while *budget != 0 {
            let Some((i, e)) = self
                .live()
                .filter(|(_, e)| e.deadline != NO_DEADLINE)
                .min_by_key(|(_, e)| (e.deadline, e.seq))
            else {
                break;
            };
            if e.deadline > now {
                break;
            }
            *budget -= 1;
            if judge.judge(i) == Verdict::Keep {
                break;
            }
            self.entries[i as usize] = None;
            removed += 1;
        }
        removed
    }

    fn remove(&mut self, index: u32) -> bool {
        matches!(
            self.entries.get_mut(index as usize).map(Option::take),
            Some(Some(_))
        )
    }

    fn set_priority(&mut self, index: u32, priority: u8, only_raise: bool) -> bool {
        match self.entries.get_mut(index as usize) {
            Some(Some(e)) if e.priority != priority && (!only_raise || priority > e.priority) => {
                e.priority = priority;
                true
            }
            _ => false,
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert {
        slot: u32,
        tenant: u32,
        priority: u8,
        deadline_in: Option<u64>,
        weight: u32,
    },
    Select {
        verdicts: Vec<Verdict>,
        budget: u32,
    },
    Expire {
        verdicts: Vec<Verdict>,
        budget: u32,
    },
    Remove(u32),
    Raise(u32, u8),
    SetPriority(u32, u8),
    Advance(u64),
}

const CAPACITY: u32 = 16;
const TENANTS: u32 = 4;
const STARVE: u64 = 100;

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![5 => Just(Verdict::Take), 3 => Just(Verdict::Drop), 1 => Just(Verdict::Keep)]
}

fn op() -> impl Strategy<Value = Op> {
    let slot = 0..CAPACITY + 2;
    prop_oneof![
        8 => (slot.clone(), 0..TENANTS + 1, 0u8..4, proptest::option::of(0u64..300), 0u32..4)
            .prop_map(|(slot, tenant, priority, deadline_in, weight)| Op::Insert {
                slot,
                tenant,
                priority,
                deadline_in,
                weight,
            }),
        5 => (proptest::collection::vec(verdict(), 0..6), 0u32..8)
            .prop_map(|(verdicts, budget)| Op::Select { verdicts, budget }),
        1 => (proptest::collection::vec(verdict(), 0..6), 0u32..8)
            .prop_map(|(verdicts, budget)| Op::Expire { verdicts, budget }),
        2 => slot.clone().prop_map(Op::Remove),
        1 => (slot.clone(), 0u8..5).prop_map(|(s, p)| Op::Raise(s, p)),
        1 => (slot, 0u8..5).prop_map(|(s, p)| Op::SetPriority(s, p)),
        2 => (0u64..80).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    #[test]
    fn policy_matches_naive_model(ops in proptest::collection::vec(op(), 1..200)) {
        let cfg = PolicyConfig { capacity: CAPACITY, max_tenants: TENANTS, starvation_after: STARVE };
        let mut p = Policy::new(cfg).unwrap();
        let mut m = Model::new(cfg);
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Insert { slot, tenant, priority, deadline_in, weight } => {
                    let meta = EntryMeta {
                        tenant,
                        priority,
                        deadline: deadline_in.map_or(NO_DEADLINE, |d| now + d),
                        enqueued_at: now,
                        weight,
                    };
                    prop_assert_eq!(p.insert(slot, meta).ok(), m.insert(slot, meta).ok());
                }
                Op::Select { verdicts, budget } => {
                    let (mut jp, mut jm) = (Script::new(&verdicts), Script::new(&verdicts));
                    let (mut bp, mut bm) = (budget, budget);
                    let got = p.select(now, &mut jp, &mut bp);
                    let want = m.select(now, &mut jm, &mut bm);
                    prop_assert_eq!((got, jp.shown, bp), (want, jm.shown, bm));
                }
                Op::Expire { verdicts, budget } => {
                    let (mut jp, mut jm) = (Script::new(&verdicts), Script::new(&verdicts));
                    let (mut bp, mut bm) = (budget, budget);
                    let got = p.expire(now, &mut jp, &mut bp);
                    let want = m.expire(now, &mut jm, &mut bm);
                    prop_assert_eq!((got, jp.shown, bp), (want, jm.shown, bm));
                }
                Op::Remove(slot) => prop_assert_eq!(p.remove(slot), m.remove(slot)),
                Op::Raise(slot, pr) => {
                    prop_assert_eq!(p.raise_priority(slot, pr), m.set_priority(slot, pr, true));
                }
                Op::SetPriority(slot, pr) => {
                    prop_assert_eq!(p.set_priority(slot, pr), m.set_priority(slot, pr, false));
                }
                Op::Advance(dt) => now += dt,
            }
            prop_assert_eq!(p.len(), m.live().count());
            prop_assert_eq!(p.queued_tenants(), m.ring.len());
            prop_assert_eq!(p.peek_tenant(), m.ring.front().copied());
            prop_assert_eq!(p.peek(now), m.peek(now));
            let next = m.live().filter(|(_, e)| e.deadline != NO_DEADLINE).map(|(_, e)| e.deadline).min();
            prop_assert_eq!(p.next_deadline(), next);
            for slot in 0..CAPACITY {
                let e = m.entries[slot as usize];
                prop_assert_eq!(p.sequence(slot), e.map(|e| e.seq));
                prop_assert_eq!(p.priority(slot), e.map(|e| e.priority));
            }
        }
    }
}
