//! loom models of the arena: slot exclusivity and reuse, stale keys racing a free, and the free
//! list's ABA case.
//!
//! Slots hold a loom `UnsafeCell` that every owner writes; loom reports any two accesses not
//! ordered by happens-before, so the models also check that the free list hands a slot over with
//! everything its previous owner did.

use super::{Arena, Key, Refused};
use crate::sync::model::{model, Outcomes};
use crate::sync::{Arc, UnsafeCell};

/// A slot value only the slot's owner touches.
struct Owned(UnsafeCell<usize>);

impl Default for Owned {
    fn default() -> Self {
        Self(UnsafeCell::new(0))
    }
}

// SAFETY: the cell is accessed only by the thread that currently owns the slot (between `alloc`
// and `free`), which is what these models check: loom fails on any access not ordered after the
// previous owner's.
unsafe impl Sync for Owned {}

/// Writes `who` into the slot `key` names, as its owner.
fn touch(arena: &Arena<Owned>, key: Key, who: usize) {
    arena.get(key.index()).0.with_mut(|p| {
        // SAFETY: the caller owns the allocation `key` names (see `Owned`).
        unsafe { *p = who }
    });
}

/// Checks that `held` are distinct live slots and that every other slot is still allocatable.
fn check_conservation(arena: &Arena<Owned>, held: &[Key]) {
    assert_eq!(arena.available(), arena.capacity() - held.len());
    let mut indices: Vec<u32> = held.iter().map(|k| k.index()).collect();
    while let Some(k) = arena.alloc(1) {
        indices.push(k.index());
    }
    indices.sort_unstable();
    let all: Vec<u32> = (0..arena.capacity() as u32).collect();
    assert_eq!(indices, all, "a slot was lost or handed out twice");
}

/// Two threads each allocate, write and free on a 2-slot arena: they never hold the same slot at
/// once, a reused slot carries its previous owner's writes, and both slots are back at the end.
#[test]
fn alloc_free_two_threads_never_share_a_slot() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let arena = Arc::new(Arena::<Owned>::new(2).unwrap());
        let threads: Vec<_> = (1..=2)
            .map(|who| {
                let arena = arena.clone();
                loom::thread::spawn(move || {
                    let k = arena.alloc(1).unwrap();
                    touch(&arena, k, who);
                    arena.free(k).unwrap();
                    k
                })
            })
            .collect();
        let keys: Vec<Key> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        seen.hit(if keys[0].index() == keys[1].index() {
            "same-slot-in-turn"
        } else {
            "different-slots"
        });
        check_conservation(&arena, &[]);
    });
    outcomes.assert_exactly(&["different-slots", "same-slot-in-turn"]);
}

/// One thread acts through a key while another frees it and reallocates the same slot (capacity
/// 1): the action lands before the free or is refused; it never touches the new generation.
fn stale_key_races_free_and_realloc(act: fn(&Arena<Owned>, Key) -> Result<(), Refused>) {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let arena = Arc::new(Arena::<Owned>::new(1).unwrap());
        let old = arena.alloc(1).unwrap();
        let actor = {
            let arena = arena.clone();
            loom::thread::spawn(move || {
                let r = act(&arena, old);
                (r, arena.state(old))
            })
        };
        let freer = {
            let arena = arena.clone();
            loom::thread::spawn(move || {
                arena.free(old).unwrap();
                arena.alloc(1).unwrap()
            })
        };
        let (r, after) = actor.join().unwrap();
        let new = freer.join().unwrap();
        assert_eq!(new.index(), old.index());
        assert_eq!(new.generation(), old.generation() + 1);
        assert_eq!(arena.state(new), Some(1), "the new allocation was acted on");
        match r {
            Ok(()) => seen.hit("acted-before-free"),
            Err(Refused::Stale) => {
                assert_eq!(after, None, "refused, yet the key looked live later");
                seen.hit("refused-stale");
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    });
    outcomes.assert_exactly(&["acted-before-free", "refused-stale"]);
}

#[test]
fn f30_stale_update_racing_free_and_realloc() {
    stale_key_races_free_and_realloc(|arena, k| arena.update(k, |s| Some(s + 1)).map(drop));
}

#[test]
fn f30_stale_compare_exchange_racing_free_and_realloc() {
    stale_key_races_free_and_realloc(|arena, k| arena.compare_exchange(k, 1, 2));
}

/// The free list's ABA case, reachable with two threads on a 2-slot arena (list `0 -> 1`):
/// A pops (reads head `0` and `next[0] = 1`); B pops `0`, pops `1`, pushes `0` back. A's CAS must
/// fail (the tag moved) and retry, taking `0` with the list left empty — an untagged head would
/// install `1`, which B holds. Every interleaving must conserve the slots.
#[test]
fn aba_pop_racing_pop_pop_push_is_refused() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let arena = Arc::new(Arena::<Owned>::new(2).unwrap());
        let a = {
            let arena = arena.clone();
            loom::thread::spawn(move || {
                let k = arena.alloc(1);
                if let Some(k) = k {
                    touch(&arena, k, 1);
                }
                k
            })
        };
        let b = {
            let arena = arena.clone();
            loom::thread::spawn(move || {
                let first = arena.alloc(1).unwrap();
                touch(&arena, first, 2);
                let second = arena.alloc(1);
                if let Some(k) = second {
                    touch(&arena, k, 2);
                }
                arena.free(first).unwrap();
                (first, second)
            })
        };
        let a = a.join().unwrap();
        let (first, second) = b.join().unwrap();
        let held: Vec<Key> = a.into_iter().chain(second).collect();
        check_conservation(&arena, &held);
        seen.hit(match a {
            None => "a-found-empty",
            Some(k) if k.index() == first.index() => "a-took-freed-slot",
            Some(_) => "a-first",
        });
    });
    outcomes.assert_exactly(&["a-first", "a-found-empty", "a-took-freed-slot"]);
}

/// Two holders drop their reference bits at once (`drop_bits`): exactly one frees, the slot
/// comes back exactly once, and whichever thread frees and reuses the slot is ordered after
/// holder A's write (loom reports a write not ordered before the next owner's).
#[test]
fn drop_bits_last_holder_frees_once() {
    const A: u8 = 0x10;
    const B: u8 = 0x20;
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let arena = Arc::new(Arena::<Owned>::new(1).unwrap());
        let k = arena.alloc(1 | A | B).unwrap();
        let threads: Vec<_> = [(1, A), (2, B)]
            .into_iter()
            .map(|(who, bit)| {
                let arena = arena.clone();
                loom::thread::spawn(move || {
                    // Holder A writes the value before letting go (shared holders never write
                    // at once; B only drops its bit).
                    if bit == A {
                        touch(&arena, k, who);
                    }
                    let freed = arena.drop_bits(k, bit, A | B).unwrap();
                    if freed {
                        // The new owner writes too: ordered after both holders.
                        let again = arena.alloc(1).unwrap();
                        touch(&arena, again, 10 + who);
                        arena.free(again).unwrap();
                    }
                    freed
                })
            })
            .collect();
        let freed: Vec<bool> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(freed.iter().filter(|&&f| f).count(), 1, "exactly one frees");
        assert_eq!(arena.state(k), None);
        check_conservation(&arena, &[]);
        seen.hit(if freed[0] {
            "first-frees"
        } else {
            "second-frees"
        });
    });
    outcomes.assert_exactly(&["first-frees", "second-frees"]);
}
