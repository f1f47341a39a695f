use super::*;
use proptest::prelude::*;
use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

#[test]
fn empty_ring_pops_none_without_taking_positions() {
    let ring = Scq::new(4);
    for _ in 0..10 {
        assert_eq!(ring.pop(), None);
    }
    // A negative threshold answers "empty" before any fetch-add.
    assert_eq!(ring.head.load(Ordering::Relaxed), 8);
}

#[test]
fn capacities_out_of_range_are_refused() {
    assert_eq!(
        Scq::try_new(0).unwrap_err(),
        Error::configuration("capacity")
    );
    assert_eq!(
        Scq::try_new(Scq::MAX_CAPACITY + 1).unwrap_err(),
        Error::configuration("capacity")
    );
    assert!(Scq::try_new(1).is_ok());
}

#[test]
#[should_panic(expected = "scq index out of range")]
fn index_at_capacity_panics() {
    Scq::new(3).push(3);
}

#[test]
fn capacity_one_runs_many_cycles() {
    const ROUNDS: u64 = if cfg!(miri) { 200 } else { 10_000 };
    let ring = Scq::new(1);
    for _ in 0..ROUNDS {
        assert_eq!(ring.pop(), None);
        ring.push(0);
        assert_eq!(ring.pop(), Some(0));
    }
    assert_eq!(ring.pop(), None);
    // Each push and each successful pop took one position, about one cycle (2 entries) per
    // round, and the empty pops took none: the ring never runs away from its positions.
    let head = ring.head.load(Ordering::Relaxed);
    let tail = ring.tail.load(Ordering::Relaxed);
    assert!((2 + ROUNDS..=2 + 2 * ROUNDS + 1).contains(&head), "{head}");
    assert!(tail <= head + 1, "{tail} {head}");
}

#[test]
fn fifo_across_cycles_with_a_non_power_of_two_capacity() {
    // Capacity 5: n = 8, 16 entries, indices 0..5.
    let ring = Scq::new(5);
    let mut model = VecDeque::new();
    for round in 0..if cfg!(miri) { 60 } else { 500u32 } {
        let fill = round % 6;
        for i in 0..fill.min(5 - model.len() as u32) {
            let v = (round + i) % 5;
            ring.push(v);
            model.push_back(v);
        }
        let take = (round * 7) % 4;
        for _ in 0..take {
            assert_eq!(ring.pop(), model.pop_front());
        }
    }
    while let Some(v) = model.pop_front() {
        assert_eq!(ring.pop(), Some(v));
    }
    assert_eq!(ring.pop(), None);
}

#[test]
fn cycle_field_wraps_around() {
    // Start three cycles before the 38-bit cycle field wraps to 0, at capacity 1 (2 entries per
    // cycle) and capacity 3 (8 entries per cycle), and run through the wrap many times over.
    for cap in [1u32, 3] {
        let ring = Scq::starting_at(cap, CYCLE.max() - 2).unwrap();
        let mut model = VecDeque::new();
        for i in 0..if cfg!(miri) { 60 } else { 200u32 } {
            if i % 3 == 2 || model.len() == cap as usize {
                assert_eq!(ring.pop(), model.pop_front());
            } else {
                ring.push(i % cap);
                model.push_back(i % cap);
            }
        }
        assert!(
            ring.cycle(ring.head.load(Ordering::Relaxed)) < 200,
            "the cycle wrapped to small values"
        );
        while let Some(v) = model.pop_front() {
            assert_eq!(ring.pop(), Some(v));
        }
        assert_eq!(ring.pop(), None);
    }
}

#[test]
fn older_is_a_signed_distance_modulo_the_cycle_width() {
    let max = CYCLE.max();
    assert!(older(0, 1));
    assert!(!older(1, 0));
    assert!(!older(5, 5));
    assert!(older(max, 0));
    assert!(older(max - 3, 2));
    assert!(!older(2, max - 3));
}

#[test]
fn hundred_thousand_slots_fifo() {
    const N: u32 = if cfg!(miri) { 1_000 } else { 100_000 };
    let ring = Scq::new(N);
    for round in 0..2u32 {
        for i in 0..N {
            ring.push((i + round) % N);
        }
        for i in 0..N {
            assert_eq!(ring.pop(), Some((i + round) % N));
        }
        assert_eq!(ring.pop(), None);
    }
}

#[test]
fn remap_is_a_permutation() {
    let caps: &[u32] = if cfg!(miri) {
        &[1, 2, 3, 8, 9]
    } else {
        &[1, 2, 3, 4, 5, 8, 9, 100, 1000]
    };
    for &cap in caps {
        let ring = Scq::new(cap);
        let base = ring.entries.as_ptr() as usize;
        let size = ring.entries.len();
        let mut seen = vec![false; size];
        for p in 0..size as u64 {
            let at = (ring.entry(p) as *const AtomicU64 as usize - base) / 8;
            assert!(!seen[at], "capacity {cap}: entry {at} twice");
            seen[at] = true;
            if size >= 16 && p > 0 {
                // Consecutive positions are on different 64-byte lines.
                let prev = (ring.entry(p - 1) as *const AtomicU64 as usize - base) / 8;
                assert_ne!(
                    prev / 8,
                    at / 8,
                    "capacity {cap}: positions {p} and {}",
                    p - 1
                );
            }
        }
    }
}

/// A push stopped between taking its position and writing its entry does not stop a consumer:
/// the consumer passes the position and takes the next push's index; the stopped push, resumed,
/// finds its position passed and takes another (SPEC F24, the ring window).
#[test]
fn f24_scq_consumer_passes_a_stalled_push_position() {
    let ring = Scq::new(4);
    let stalled = ring.take_tail();
    ring.push(2);
    ring.push(3);
    assert_eq!(ring.pop(), Some(2));
    assert_eq!(ring.pop(), Some(3));
    assert_eq!(ring.pop(), None);
    // Resumed: its position was passed, so it cannot write there.
    assert!(!ring.try_place(stalled, 1));
    ring.push(1);
    assert_eq!(ring.pop(), Some(1));
    assert_eq!(ring.pop(), None);
}

/// A pop stopped after taking a position that was already written leaves that one index
/// unreachable until it resumes, and nothing else: later indices keep flowing, and a full
/// cycle later pushes skip the entry it still holds.
#[test]
fn f24_scq_stalled_pop_position_blocks_no_other_index() {
    let ring = Scq::new(2);
    ring.push(0);
    // A pop takes position of index 0 and stops.
    let stalled = ring.head.fetch_add(1, Ordering::SeqCst);
    for _ in 0..if cfg!(miri) { 20 } else { 100 } {
        ring.push(1);
        assert_eq!(ring.pop(), Some(1));
    }
    assert_eq!(ring.pop(), None);
    // Resumed, the stopped pop still finds its index.
    assert_eq!(ring.take_or_pass(stalled), Some(0));
    assert_eq!(ring.pop(), None);
    ring.push(0);
    ring.push(1);
    assert_eq!(ring.pop(), Some(0));
    assert_eq!(ring.pop(), Some(1));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    /// An entry packs and unpacks to itself, the bottom index included.
    #[test]
    fn entry_round_trips(cycle in 0..=CYCLE.max(), safe: bool, index in 0..=BOTTOM) {
        let e = Entry { cycle, safe, index };
        prop_assert_eq!(Entry::unpack(e.pack()), e);
    }

    /// Single-threaded, the ring is a bounded FIFO (pushes beyond capacity are not made: that
    /// is the caller's contract).
    #[test]
    fn matches_vecdeque_model(
        cap in 1u32..=9,
        ops in proptest::collection::vec(proptest::option::of(any::<u32>()), 0..300),
    ) {
        let ring = Scq::new(cap);
        let mut model = VecDeque::new();
        for op in ops {
            match op {
                Some(v) if model.len() < cap as usize => {
                    ring.push(v % cap);
                    model.push_back(v % cap);
                }
                _ => prop_assert_eq!(ring.pop(), model.pop_front()),
            }
        }
        while let Some(v) = model.pop_front() {
            prop_assert_eq!(ring.pop(), Some(v));
        }
        prop_assert_eq!(ring.pop(), None);
    }
}

const ROUNDS: usize = if cfg!(miri) { 30 } else { 20_000 };

/// `threads` threads each pop an index and push it back `ROUNDS` times, on a ring that starts
/// holding every index once. Checks conservation (every index is in the ring exactly once at the
/// end) and, where at most `threads` indices can be out of the ring and more than that are in
/// it, that no pop ever reports empty (the ring is linearisable).
fn circulate(capacity: u32, threads: usize) {
    let ring = Arc::new(Scq::new(capacity));
    for i in 0..capacity {
        ring.push(i);
    }
    let never_empty = capacity as usize > threads;
    let popped = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (ring, popped) = (ring.clone(), popped.clone());
            std::thread::spawn(move || {
                let mut done = 0;
                while done < ROUNDS {
                    match ring.pop() {
                        Some(i) => {
                            assert!(i < capacity);
                            ring.push(i);
                            done += 1;
                        }
                        None => {
                            assert!(!never_empty, "a pop found a ring empty that never was");
                            std::thread::yield_now();
                        }
                    }
                }
                popped.fetch_add(done, Ordering::Relaxed);
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(popped.load(Ordering::Relaxed), threads * ROUNDS);
    let mut seen = vec![false; capacity as usize];
    while let Some(i) = ring.pop() {
        assert!(!seen[i as usize], "index {i} duplicated");
        seen[i as usize] = true;
    }
    assert!(seen.iter().all(|&s| s), "an index was lost");
}

#[test]
fn multi_thread_circulation_conserves_indices() {
    circulate(64, 4);
}

#[test]
fn capacity_one_multi_thread_circulation_conserves_the_index() {
    circulate(1, 3);
}

/// Producers push disjoint ranges of indices, each index once, in increasing order, holding at
/// most `window` indices in the ring between them (a credit counter); consumers pop until all
/// are taken. Every pushed index is popped exactly once, and each consumer sees each producer's
/// indices in increasing order.
#[test]
fn multi_thread_producers_consumers_pop_every_push_once_in_order() {
    const PRODUCERS: usize = 3;
    const CONSUMERS: usize = 3;
    const PER: usize = if cfg!(miri) { 30 } else { 30_000 };
    const TOTAL: usize = PRODUCERS * PER;
    let window = 16usize;
    let ring = Arc::new(Scq::new(TOTAL as u32));
    let credits = Arc::new(AtomicUsize::new(window));
    let taken = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (ring, credits) = (ring.clone(), credits.clone());
            std::thread::spawn(move || {
                for seq in 0..PER {
                    while credits
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_sub(1))
                        .is_err()
                    {
                        std::thread::yield_now();
                    }
                    ring.push((p * PER + seq) as u32);
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (ring, credits, taken) = (ring.clone(), credits.clone(), taken.clone());
            std::thread::spawn(move || {
                let mut last = [None::<usize>; PRODUCERS];
                let mut got = Vec::new();
                while taken.load(Ordering::Relaxed) < TOTAL {
                    match ring.pop() {
                        Some(i) => {
                            taken.fetch_add(1, Ordering::Relaxed);
                            credits.fetch_add(1, Ordering::AcqRel);
                            let (p, seq) = (i as usize / PER, i as usize % PER);
                            assert!(last[p].is_none_or(|l| l < seq), "per-producer FIFO");
                            last[p] = Some(seq);
                            got.push(i);
                        }
                        None => std::thread::yield_now(),
                    }
                }
                got
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let mut seen = vec![false; TOTAL];
    for c in consumers {
        for i in c.join().unwrap() {
            assert!(!seen[i as usize], "index {i} popped twice");
            seen[i as usize] = true;
        }
    }
    assert!(seen.iter().all(|&s| s), "a pushed index was never popped");
    assert_eq!(ring.pop(), None);
}

/// The same window with the pause point: a producer thread parked inside `push` (position
/// taken, entry not written) while other threads push and pop.
#[cfg(feature = "pause-points")]
#[test]
fn f24_scq_producer_parked_at_its_claimed_position_blocks_no_consumer() {
    use crate::raw::pause::Gate;
    use std::time::Duration;
    let ring = Arc::new(Scq::new(8));
    let gate = Gate::new("scq.push.claimed");
    let parked = {
        let (ring, gate) = (ring.clone(), gate.clone());
        std::thread::spawn(move || {
            gate.arm();
            ring.push(7);
        })
    };
    assert!(gate.wait_parked(Duration::from_secs(10)));
    for round in 0..if cfg!(miri) { 50 } else { 1000u32 } {
        ring.push(round % 7);
        ring.push((round + 1) % 7);
        assert_eq!(ring.pop(), Some(round % 7));
        assert_eq!(ring.pop(), Some((round + 1) % 7));
    }
    assert_eq!(ring.pop(), None);
    assert_eq!(gate.parked(), 1);
    gate.release();
    parked.join().unwrap();
    assert_eq!(ring.pop(), Some(7));
    assert_eq!(ring.pop(), None);
}

/// A consumer parked after taking a head position while other threads push and pop.
#[cfg(feature = "pause-points")]
#[test]
fn f24_scq_consumer_parked_at_its_claimed_position_blocks_no_other() {
    use crate::raw::pause::Gate;
    use std::time::Duration;
    let ring = Arc::new(Scq::new(8));
    ring.push(5);
    let gate = Gate::new("scq.pop.claimed");
    let parked = {
        let (ring, gate) = (ring.clone(), gate.clone());
        std::thread::spawn(move || {
            gate.arm();
            ring.pop()
        })
    };
    assert!(gate.wait_parked(Duration::from_secs(10)));
    for round in 0..if cfg!(miri) { 50 } else { 1000u32 } {
        ring.push(round % 5);
        assert_eq!(ring.pop(), Some(round % 5));
    }
    gate.release();
    assert_eq!(parked.join().unwrap(), Some(5));
    assert_eq!(ring.pop(), None);
}
