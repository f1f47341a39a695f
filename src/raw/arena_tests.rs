//! Unit tests of the arena, and of both engines' entry slots near generation exhaustion.

use super::*;
use crate::Code;
use proptest::prelude::*;

const QUEUED: u8 = 1;
const GRANTED: u8 = 2;
const CANCELLED: u8 = 3;

fn arena(capacity: usize) -> Arena<()> {
    Arena::new(capacity).unwrap()
}

#[test]
fn bad_capacity_or_generation_width_is_refused() {
    for capacity in [0, MAX_CAPACITY + 1] {
        let e = Arena::<()>::new(capacity).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(
            (e.reason().as_str(), e.field()),
            ("configuration", Some("capacity"))
        );
    }
    for bits in [0, MAX_GENERATION_BITS + 1] {
        let e = Arena::<()>::with_generation_bits(4, bits).unwrap_err();
        assert_eq!(e.field(), Some("generation_bits"));
    }
    assert!(Arena::<()>::with_generation_bits(1, 1).is_ok());
    assert!(Arena::<()>::with_generation_bits(1, MAX_GENERATION_BITS).is_ok());
    assert_eq!(MAX_CAPACITY, 1 << 24);
}

#[test]
fn alloc_hands_out_every_slot_once_then_none() {
    let a = arena(4);
    assert_eq!((a.capacity(), a.available()), (4, 4));
    let keys: Vec<Key> = (0..4).map(|_| a.alloc(QUEUED).unwrap()).collect();
    let indices: Vec<u32> = keys.iter().map(|k| k.index()).collect();
    assert_eq!(indices, [0, 1, 2, 3]);
    assert!(keys.iter().all(|k| k.generation() == 0));
    assert!(keys.iter().all(|&k| a.state(k) == Some(QUEUED)));
    assert_eq!(a.available(), 0);
    assert_eq!(a.alloc(QUEUED), None);
    for k in keys {
        a.free(k).unwrap();
    }
    assert_eq!(a.available(), 4);
}

#[test]
fn free_and_reuse_bumps_generation() {
    let a = arena(1);
    let k0 = a.alloc(QUEUED).unwrap();
    a.free(k0).unwrap();
    let k1 = a.alloc(GRANTED).unwrap();
    assert_eq!((k1.index(), k1.generation()), (0, 1));
    assert_eq!(a.state(k1), Some(GRANTED));
}

#[test]
fn f30_stale_key_is_refused() {
    let a = arena(1);
    let old = a.alloc(QUEUED).unwrap();
    a.free(old).unwrap();
    // Freed and not yet reused.
    assert_eq!(a.state(old), None);
    assert_eq!(a.update(old, |_| Some(GRANTED)), Err(Refused::Stale));
    assert_eq!(
        a.compare_exchange(old, QUEUED, GRANTED),
        Err(Refused::Stale)
    );
    // Reused: the old key still touches nothing.
    let new = a.alloc(QUEUED).unwrap();
    assert_eq!(new.index(), old.index());
    let mut called = false;
    let r = a.update(old, |_| {
        called = true;
        Some(CANCELLED)
    });
    assert_eq!(r, Err(Refused::Stale));
    assert!(!called, "f must not see another allocation's state");
    assert_eq!(
        a.compare_exchange(old, QUEUED, CANCELLED),
        Err(Refused::Stale)
    );
    assert_eq!(a.state(old), None);
    assert_eq!(a.free(old), Err(Refused::Stale), "double free is refused");
    assert_eq!(a.state(new), Some(QUEUED));
    assert_eq!(a.available(), 0);
}

#[test]
fn f30_key_from_foreign_u64_is_refused() {
    let a = Arena::<()>::with_generation_bits(2, 4).unwrap();
    let live = a.alloc(QUEUED).unwrap();
    assert_eq!(Key::from_u64(live.to_u64()), live);
    let out_of_range = Key::from_u64(Key { index: 2, ..live }.to_u64());
    let too_wide = Key::from_u64(
        Key {
            generation: 16,
            ..live
        }
        .to_u64(),
    );
    for k in [out_of_range, too_wide] {
        assert_eq!(a.state(k), None);
        assert_eq!(a.update(k, Some), Err(Refused::Stale));
        assert_eq!(a.compare_exchange(k, QUEUED, GRANTED), Err(Refused::Stale));
        assert_eq!(a.free(k), Err(Refused::Stale));
    }
    assert_eq!(a.state(live), Some(QUEUED));
}

#[test]
fn f21_generation_exhaustion_retires_slot() {
    let a = Arena::<()>::with_generation_bits(2, 2).unwrap();
    let mut keys = Vec::new();
    for generation in 0..4 {
        let k = a.alloc(QUEUED).unwrap();
        assert_eq!((k.index(), k.generation()), (0, generation));
        a.free(k).unwrap();
        keys.push(k);
    }
    // Generation 3 was the last: slot 0 is retired, never wrapped back to generation 0.
    assert_eq!(a.retired(), 1);
    assert_eq!(a.available(), 1);
    let k = a.alloc(QUEUED).unwrap();
    assert_eq!((k.index(), k.generation()), (1, 0));
    assert_eq!(a.alloc(QUEUED), None);
    for old in keys {
        assert_eq!(a.state(old), None);
        assert_eq!(a.free(old), Err(Refused::Stale));
    }
}

#[test]
fn drop_bits_frees_with_the_last_holder_bit() {
    const A: u8 = 0x10;
    const B: u8 = 0x20;
    let a = arena(1);
    let k = a.alloc(QUEUED | A | B).unwrap();
    assert_eq!(a.drop_bits(k, A, A | B), Ok(false));
    assert_eq!(a.state(k), Some(QUEUED | B));
    // Dropping a bit that is already clear changes nothing but is not an error.
    assert_eq!(a.drop_bits(k, A, A | B), Ok(false));
    assert_eq!(a.drop_bits(k, B, A | B), Ok(true));
    assert_eq!(a.state(k), None, "freed: the key is stale");
    assert_eq!(a.drop_bits(k, B, A | B), Err(Refused::Stale));
    let k1 = a.alloc(GRANTED).unwrap();
    assert_eq!((k1.index(), k1.generation()), (0, 1));
}

#[test]
fn f21_drop_bits_retires_an_exhausted_slot() {
    let a = Arena::<()>::with_generation_bits(1, 1).unwrap();
    for generation in 0..2 {
        let k = a.alloc(QUEUED | 0x10).unwrap();
        assert_eq!(k.generation(), generation);
        assert_eq!(a.drop_bits(k, 0x10, 0x10), Ok(true));
    }
    assert_eq!(a.retired(), 1);
    assert_eq!(a.alloc(QUEUED), None);
}

#[test]
fn update_applies_or_rejects_with_current_state() {
    let a = arena(2);
    let k = a.alloc(QUEUED).unwrap();
    assert_eq!(a.update(k, |s| Some(s + 1)), Ok((QUEUED, GRANTED)));
    assert_eq!(
        a.update(k, |s| (s == QUEUED).then_some(CANCELLED)),
        Err(Refused::Rejected(GRANTED))
    );
    assert_eq!(
        a.compare_exchange(k, QUEUED, CANCELLED),
        Err(Refused::Rejected(GRANTED))
    );
    assert_eq!(a.compare_exchange(k, GRANTED, CANCELLED), Ok(()));
    assert_eq!(a.state(k), Some(CANCELLED));
}

#[test]
fn key_round_trips_through_u64() {
    for (index, generation) in [
        (0, 0),
        (1, 2),
        (MAX_CAPACITY as u32 - 1, MAX_GENERATION),
        (7, 1 << 31),
    ] {
        let k = Key { index, generation };
        assert_eq!(Key::from_u64(k.to_u64()), k);
    }
    assert_eq!(
        Key {
            index: 1,
            generation: 2
        }
        .to_u64(),
        2 << 24 | 1
    );
}

/// A trivially correct sequential arena: per slot a generation and a state, and a LIFO stack
/// of free indices (the free list's order is observable, so the model pins it down).
#[derive(Debug)]
struct Model {
    generation: Vec<u64>,
    state: Vec<u8>,
    stack: Vec<u32>,
    max_generation: u64,
    retired: usize,
}

impl Model {
    fn new(capacity: usize, bits: u32) -> Self {
        Self {
            generation: vec![0; capacity],
            state: vec![FREE; capacity],
            stack: (0..capacity as u32).rev().collect(),
            max_generation: u64::MAX >> (64 - bits),
            retired: 0,
        }
    }

    fn live(&self, k: Key) -> Option<usize> {
        let i = k.index as usize;
        (self.generation[i] == k.generation && self.state[i] != FREE).then_some(i)
    }

    fn alloc(&mut self, s: u8) -> Option<Key> {
        let i = self.stack.pop()?;
        self.state[i as usize] = s;
        Some(Key {
            index: i,
            generation: self.generation[i as usize],
        })
    }

    fn free(&mut self, k: Key) -> Result<(), Refused> {
        let i = self.live(k).ok_or(Refused::Stale)?;
        self.state[i] = FREE;
        if self.generation[i] == self.max_generation {
            self.retired += 1;
        } else {
            self.generation[i] += 1;
            self.stack.push(i as u32);
        }
        Ok(())
    }

    fn update(&mut self, k: Key, to: Option<u8>) -> Result<(u8, u8), Refused> {
        let i = self.live(k).ok_or(Refused::Stale)?;
        let old = self.state[i];
        let new = to.ok_or(Refused::Rejected(old))?;
        self.state[i] = new;
        Ok((old, new))
    }

    fn compare_exchange(&mut self, k: Key, from: u8, to: u8) -> Result<(), Refused> {
        let i = self.live(k).ok_or(Refused::Stale)?;
        if self.state[i] != from {
            return Err(Refused::Rejected(self.state[i]));
        }
        self.state[i] = to;
        Ok(())
    }
}

#[derive(Debug, Clone)]
enum Op {
    Alloc(u8),
    /// Operations through some key handed out so far (live or stale).
    Free(prop::sample::Index),
    Update(prop::sample::Index, Option<u8>),
    CompareExchange(prop::sample::Index, u8, u8),
    State(prop::sample::Index),
}

fn op() -> impl Strategy<Value = Op> {
    let state = 1u8..=4;
    let key = any::<prop::sample::Index>();
    prop_oneof![
        3 => state.clone().prop_map(Op::Alloc),
        2 => key.clone().prop_map(Op::Free),
        2 => (key.clone(), proptest::option::of(state.clone()))
            .prop_map(|(k, s)| Op::Update(k, s)),
        2 => (key.clone(), state.clone(), state)
            .prop_map(|(k, a, b)| Op::CompareExchange(k, a, b)),
        1 => key.prop_map(Op::State),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    #[test]
    fn f30_arena_matches_sequential_model(
        capacity in 1usize..=5,
        bits in prop_oneof![Just(MAX_GENERATION_BITS), 1u32..=3],
        ops in proptest::collection::vec(op(), 0..if cfg!(miri) { 40 } else { 80 }),
    ) {
        let arena = Arena::<()>::with_generation_bits(capacity, bits).unwrap();
        let mut model = Model::new(capacity, bits);
        let mut keys: Vec<Key> = Vec::new();
        for op in ops {
            let pick = |i: prop::sample::Index| keys[i.index(keys.len())];
            match op {
                Op::Alloc(s) => {
                    let got = arena.alloc(s);
                    prop_assert_eq!(got, model.alloc(s));
                    keys.extend(got);
                }
                Op::Free(i) if !keys.is_empty() => {
                    let k = pick(i);
                    prop_assert_eq!(arena.free(k), model.free(k));
                }
                Op::Update(i, to) if !keys.is_empty() => {
                    let k = pick(i);
                    prop_assert_eq!(arena.update(k, |_| to), model.update(k, to));
                }
                Op::CompareExchange(i, from, to) if !keys.is_empty() => {
                    let k = pick(i);
                    prop_assert_eq!(
                        arena.compare_exchange(k, from, to),
                        model.compare_exchange(k, from, to)
                    );
                }
                Op::State(i) if !keys.is_empty() => {
                    let k = pick(i);
                    prop_assert_eq!(arena.state(k), model.live(k).map(|i| model.state[i]));
                }
                _ => {}
            }
            prop_assert_eq!(arena.available(), model.stack.len());
            prop_assert_eq!(arena.retired(), model.retired);
        }
    }
}

/// Per-slot value for the stress tests: which thread believes it owns the slot (0 = none).
#[derive(Default)]
struct Owner(AtomicUsize);

/// Claims slot `k` for thread `me` in the slot's own value, checking that nobody held it.
fn claim(arena: &Arena<Owner>, k: Key, me: usize) {
    let prev = arena.get(k.index()).0.swap(me, Relaxed);
    assert_eq!(prev, 0, "slot {} owned by {prev} and {me}", k.index());
}

fn release(arena: &Arena<Owner>, k: Key, me: usize) {
    let prev = arena.get(k.index()).0.swap(0, Relaxed);
    assert_eq!(prev, me, "slot {} stolen from {me} by {prev}", k.index());
}

const THREADS: usize = 4;
const ITERS: usize = if cfg!(miri) { 50 } else { 50_000 };

#[test]
fn concurrent_alloc_free_never_shares_a_slot() {
    let arena = Arena::<Owner>::new(3).unwrap();
    std::thread::scope(|s| {
        for t in 1..=THREADS {
            let arena = &arena;
            s.spawn(move || {
                let me_state = t as u8;
                let mut held: Vec<Key> = Vec::with_capacity(2);
                for i in 0..ITERS {
                    if held.len() < 2 && i % 3 != 2 {
                        if let Some(k) = arena.alloc(me_state) {
                            claim(arena, k, t);
                            held.push(k);
                        }
                    } else if let Some(k) = held.pop() {
                        // Our state is still there and only we can move it.
                        assert_eq!(arena.state(k), Some(me_state));
                        arena.compare_exchange(k, me_state, me_state + 100).unwrap();
                        assert_eq!(arena.state(k), Some(me_state + 100));
                        release(arena, k, t);
                        arena.free(k).unwrap();
                        assert_eq!(arena.state(k), None);
                    }
                }
                for k in held {
                    release(arena, k, t);
                    arena.free(k).unwrap();
                }
            });
        }
    });
    assert_eq!((arena.available(), arena.retired()), (3, 0));
    let mut indices: Vec<u32> = (0..3).map(|_| arena.alloc(1).unwrap().index()).collect();
    indices.sort_unstable();
    assert_eq!(indices, [0, 1, 2]);
}

#[test]
fn f21_concurrent_exhaustion_retires_every_slot_once() {
    const CAPACITY: usize = 16;
    const BITS: u32 = 2;
    let arena = Arena::<Owner>::with_generation_bits(CAPACITY, BITS).unwrap();
    let total = std::thread::scope(|s| {
        let handles: Vec<_> = (1..=THREADS)
            .map(|t| {
                let arena = &arena;
                s.spawn(move || {
                    let mut allocations = 0usize;
                    while let Some(k) = arena.alloc(1) {
                        claim(arena, k, t);
                        allocations += 1;
                        release(arena, k, t);
                        arena.free(k).unwrap();
                    }
                    allocations
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum::<usize>()
    });
    // A thread stops at the first None, which may come while others still hold slots; the
    // rest are drained here.
    let mut rest = 0;
    while let Some(k) = arena.alloc(1) {
        rest += 1;
        arena.free(k).unwrap();
    }
    assert_eq!(total + rest, CAPACITY << BITS);
    assert_eq!((arena.retired(), arena.available()), (CAPACITY, 0));
}

/// F21 with the default width: a slot is reused past generation 2^32 - 1 (where 32-bit
/// generations retired it) and keeps its keys exact there.
#[test]
fn f21_generation_continues_past_2_pow_32() {
    let _first = start_generations_at(u64::from(u32::MAX) - 1);
    let a = arena(1);
    let mut old = Vec::new();
    for step in 0..8u64 {
        let k = a.alloc(QUEUED).expect("the slot stays in service");
        assert_eq!(k.generation(), u64::from(u32::MAX) - 1 + step);
        assert_eq!(Key::from_u64(k.to_u64()), k);
        assert_eq!(a.state(k), Some(QUEUED));
        a.free(k).unwrap();
        old.push(k);
    }
    assert_eq!(a.retired(), 0);
    let live = a.alloc(GRANTED).unwrap();
    for k in old {
        assert_eq!(a.state(k), None, "a stale key past 2^32 is refused");
        assert_eq!(a.free(k), Err(Refused::Stale));
    }
    assert_eq!(a.state(live), Some(GRANTED));
}

/// F21 at the widest generation: the last generation is handed out once, then the slot
/// retires; its generation never wraps back, so no earlier key is ever live again.
#[test]
fn f21_widest_generation_exhaustion_retires_without_wrapping() {
    let _first = start_generations_at(MAX_GENERATION - 1);
    let a = arena(2);
    let mut keys = Vec::new();
    // Slot 0 then slot 1 (LIFO): each gives its last two generations, then retires.
    for _ in 0..4 {
        let k = a.alloc(QUEUED).unwrap();
        assert!(k.generation() >= MAX_GENERATION - 1);
        assert_eq!(Key::from_u64(k.to_u64()), k);
        a.free(k).unwrap();
        keys.push(k);
    }
    assert_eq!(a.retired(), 2);
    assert_eq!(a.alloc(QUEUED), None);
    for k in keys {
        assert_eq!(a.state(k), None);
        assert_eq!(a.update(k, Some), Err(Refused::Stale));
    }
}

/// F21/F30 at non-default widths (a packing bug can hide behind the default): for each width,
/// a slot at the top index starts two generations before exhaustion; its keys round-trip
/// through `u64` exactly, a key one generation too wide is refused, and the slot retires after
/// its last generation.
#[test]
fn f21_narrow_widths_pack_and_exhaust_exactly() {
    const CAPACITY: usize = 100_000;
    for bits in [
        1,
        7,
        20,
        31,
        32,
        33,
        MAX_GENERATION_BITS - 1,
        MAX_GENERATION_BITS,
    ] {
        let max = u64::MAX >> (64 - bits);
        let _first = start_generations_at(max.saturating_sub(1));
        let a = Arena::<()>::with_generation_bits(CAPACITY, bits).unwrap();
        let keys: Vec<Key> = (0..CAPACITY).map(|_| a.alloc(QUEUED).unwrap()).collect();
        let top = keys[CAPACITY - 1];
        assert_eq!(top.index(), CAPACITY as u32 - 1);
        assert_eq!(top.generation(), max.saturating_sub(1));
        assert_eq!(Key::from_u64(top.to_u64()), top, "{bits} bits");
        if bits < MAX_GENERATION_BITS {
            let too_wide = Key {
                generation: max + 1,
                ..top
            };
            assert_eq!(Key::from_u64(too_wide.to_u64()), too_wide);
            assert_eq!(a.state(too_wide), None, "{bits} bits");
        }
        assert_eq!(a.state(top), Some(QUEUED));
        for k in keys {
            a.free(k).unwrap();
        }
        // Every slot has its last generation left.
        let mut handed = 0;
        while let Some(k) = a.alloc(GRANTED) {
            assert_eq!(k.generation(), max);
            a.free(k).unwrap();
            handed += 1;
        }
        assert_eq!(handed, CAPACITY, "{bits} bits");
        assert_eq!(a.retired(), CAPACITY, "{bits} bits");
    }
}

/// Sizes past toy: 10^5 slots are each handed out once, freed, and handed out again with
/// the next generation.
#[test]
fn hundred_thousand_slots_each_once_per_generation() {
    const CAPACITY: usize = 100_000;
    let a = arena(CAPACITY);
    let keys: Vec<Key> = (0..CAPACITY).map(|_| a.alloc(QUEUED).unwrap()).collect();
    assert_eq!(a.alloc(QUEUED), None);
    let mut seen = vec![false; CAPACITY];
    for k in &keys {
        assert!(!std::mem::replace(&mut seen[k.index() as usize], true));
        assert_eq!(k.generation(), 0);
    }
    for k in keys.iter().rev() {
        a.free(*k).unwrap();
    }
    assert_eq!(a.available(), CAPACITY);
    for k in keys {
        let again = a.alloc(GRANTED).unwrap();
        assert_eq!(
            again.index(),
            k.index(),
            "LIFO: freed in reverse, popped in order"
        );
        assert_eq!(again.generation(), 1);
        assert_eq!(a.state(k), None);
    }
}

/// F21 through the scheduler, on both engines: with every entry slot started just below
/// 2^32, requests keep queueing and cancelling past it (with 32-bit generations the slots
/// retired there and `enqueue` failed `queue-full` below capacity).
mod engines {
    use crate::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
    use crate::{
        AdmittedRequest, Baseline, CancellationToken, ClassId, Code, LockFree, Mechanism,
        RequestId, Scheduler, StdMutex, TenantId,
    };
    use core::future::Future;
    use core::pin::pin;
    use core::task::{Context, Poll, Waker};

    fn reuse_past_2_pow_32<M: Mechanism>() {
        let _first = super::start_generations_at(u64::from(u32::MAX) - 2);
        let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("c")], 2)).unwrap();
        // One cell and one queue slot: three entry slots in all, reused on every request.
        let sched = Scheduler::<()>::builder(ledger.clone())
            .class(1, 1)
            .build_with::<M>()
            .unwrap();
        let admit = |id: u64| {
            let permit = ledger
                .admit(AdmissionRequest::new(RequestId(id), TenantId(0)).class(ClassId(0)))
                .unwrap();
            AdmittedRequest::new(permit, CancellationToken::new(RequestId(id)))
        };
        let held = sched.try_enqueue(admit(1)).unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        for id in 2..40 {
            let mut f = pin!(sched.enqueue(admit(id)));
            assert!(f.as_mut().poll(&mut cx).is_pending(), "request {id} queues");
            let handle = f.handle().expect("queued");
            sched.cancel(handle).unwrap();
            match f.as_mut().poll(&mut cx) {
                Poll::Ready(Err(e)) => assert_eq!(e.code(), Code::Cancelled, "{e}"),
                other => panic!("request {id}: {other:?}"),
            }
            assert_eq!(sched.cancel(handle).unwrap_err().code(), Code::NotFound);
        }
        held.release();
        let a = sched.try_enqueue(admit(100)).unwrap();
        a.release();
        assert!(ledger.usage().is_zero());
    }

    #[test]
    fn f21_entry_slots_reused_past_2_pow_32_lockfree() {
        reuse_past_2_pow_32::<LockFree>();
    }

    #[test]
    fn f21_entry_slots_reused_past_2_pow_32_baseline() {
        reuse_past_2_pow_32::<Baseline<StdMutex>>();
    }
}
