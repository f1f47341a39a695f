//! The version directory's rules (SPEC V01–V04) through the public API, at sizes past toy ones
//! and under concurrent transitions and captures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use fairway::versions::{Lookup, Root, Transition, VersionDirectory};
use fairway::{Code, Reason};
use fairway_bench_support::alloc::{count, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

const BIG: u64 = 100_000;

fn present(incarnation: u64, generation: u64, hash: u64) -> Lookup {
    Lookup::Present {
        incarnation,
        generation,
        hash,
    }
}

#[test]
fn v01_capture_is_independent_of_key_count_at_100k_keys() {
    // Capture cost itself is timed by `fairway-perf --suite versions` (P12) and counted per
    // access by the unit test `v01_capture_makes_the_same_accesses_at_any_key_count`; here the
    // capture at 10^5 keys must be as cheap as at 250 within a wide margin (a walk of the keys
    // would be about 400 times slower).
    let time_captures = |keys: u64| {
        let d = VersionDirectory::builder()
            .keys(keys as usize)
            .versions(keys as usize + 8)
            .build()
            .unwrap();
        let batch: Vec<Transition> = (0..keys)
            .map(|key| Transition::Publish { key, hash: key })
            .collect();
        d.apply(&batch).unwrap();
        let mut best = u128::MAX;
        for _ in 0..20 {
            let t = Instant::now();
            for _ in 0..2_000 {
                drop(std::hint::black_box(d.capture()));
            }
            best = best.min(t.elapsed().as_nanos());
        }
        best
    };
    let small = time_captures(250);
    let big = time_captures(BIG);
    assert!(
        big < small * 20 + 200_000,
        "capture at 10^5 keys took {big} ns per 2,000, at 250 keys {small} ns"
    );
}

#[test]
fn v02_three_answers_at_100k_keys_and_no_later_transition_seen() {
    let d = VersionDirectory::builder()
        .keys(BIG as usize)
        .versions(2 * BIG as usize + 8)
        .build()
        .unwrap();
    // Even keys present, every third advanced afterwards; odd keys never named.
    let publish: Vec<Transition> = (0..BIG)
        .step_by(2)
        .map(|key| Transition::Publish { key, hash: !key })
        .collect();
    d.apply(&publish).unwrap();
    let advance: Vec<Transition> = (0..BIG).step_by(6).map(Transition::Advance).collect();
    d.apply(&advance).unwrap();
    let root = d.capture();
    // Later: remove every even key, publish every odd one.
    let later: Vec<Transition> = (0..BIG)
        .map(|key| {
            if key % 2 == 0 {
                Transition::Remove(key)
            } else {
                Transition::Publish { key, hash: key }
            }
        })
        .collect();
    d.apply(&later).unwrap();
    for key in 0..BIG {
        let incarnation = key / 2 + 1;
        let want = if key % 2 == 1 {
            Lookup::Unknown
        } else if key % 6 == 0 {
            Lookup::Absent {
                incarnation,
                generation: 1,
            }
        } else {
            present(incarnation, 0, !key)
        };
        assert_eq!(root.lookup(key).unwrap(), want, "key {key}");
    }
    let now = d.capture();
    assert_eq!(
        now.lookup(6).unwrap(),
        Lookup::Absent {
            incarnation: 4,
            generation: 1
        }
    );
    assert_eq!(now.lookup(7).unwrap(), present(BIG / 2 + 4, 0, 7));
    assert_eq!(
        root.lookup(BIG).unwrap_err().reason(),
        Reason::KeyRange,
        "past the capacity"
    );
    drop(root);
    let occ = d.occupancy();
    assert_eq!(
        (occ.versions_used, occ.named_keys),
        (BIG as usize, BIG as usize)
    );
}

/// Writers move pairs of keys `(2i, 2i + 1)` together, one batch each time (publish both with
/// the same hash, advance both, now and then remove both; each pair has one writer); readers
/// capture roots, keep some for a while, and check that within a root both keys of a pair always
/// agree (same kind and generation, consecutive incarnations, same hash, the hash made for that
/// generation), and that a root's answers never change. A torn batch breaks the pair agreement;
/// a record reused under a reader breaks the hash or the stability check.
#[test]
fn v03_concurrent_batches_and_captures_never_show_a_torn_state() {
    const PAIRS: u64 = 8;
    const KEEP: usize = 4;
    let d = VersionDirectory::builder()
        .keys(2 * PAIRS as usize)
        // Current records plus, per kept root, one retained record a key.
        .versions(2 * PAIRS as usize * (2 * KEEP + 4))
        .root_epochs(2 * KEEP + 4)
        .build()
        .unwrap();
    let rounds: u64 = if cfg!(debug_assertions) { 600 } else { 20_000 };
    let writers_done = AtomicU64::new(0);
    // Every thread starts together, so the readers overlap the writers even on a loaded machine.
    let start = std::sync::Barrier::new(4);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (d, writers_done, start) = (&d, &writers_done, &start);
            s.spawn(move || {
                start.wait();
                // Per owned pair: `None` when not live, else (generation, published?).
                let mut state = vec![None::<(u64, bool)>; PAIRS as usize];
                for round in 0..rounds {
                    for pair in (w..PAIRS).step_by(2) {
                        let (a, b) = (2 * pair, 2 * pair + 1);
                        let st = &mut state[pair as usize];
                        let batch = match *st {
                            None | Some((_, false)) => {
                                let g = st.map_or(0, |(g, _)| g);
                                *st = Some((g, true));
                                let hash = g << 32 | (round & 0xffff);
                                vec![
                                    Transition::Publish { key: a, hash },
                                    Transition::Publish { key: b, hash },
                                ]
                            }
                            Some((_, true)) if round % 7 == 3 => {
                                *st = None;
                                vec![Transition::Remove(a), Transition::Remove(b)]
                            }
                            Some((g, true)) => {
                                *st = Some((g + 1, false));
                                vec![Transition::Advance(a), Transition::Advance(b)]
                            }
                        };
                        d.apply(&batch).unwrap();
                    }
                }
                writers_done.fetch_add(1, Ordering::Release);
            });
        }
        for _ in 0..2 {
            let (d, writers_done, start) = (&d, &writers_done, &start);
            s.spawn(move || {
                start.wait();
                let mut kept = std::collections::VecDeque::new();
                let mut last_epoch = 0;
                let began = std::time::Instant::now();
                loop {
                    let done = writers_done.load(Ordering::Acquire) == 2;
                    // A writer that panicked never counts itself done: fail, do not spin on.
                    assert!(
                        began.elapsed() < std::time::Duration::from_secs(120),
                        "v03: {} of 2 writers done after 120 s",
                        writers_done.load(Ordering::Acquire)
                    );
                    let root = d.capture();
                    assert!(root.epoch() >= last_epoch, "epochs went back");
                    last_epoch = root.epoch();
                    let answers: Vec<Lookup> =
                        (0..2 * PAIRS).map(|k| root.lookup(k).unwrap()).collect();
                    check_pairs(&answers);
                    kept.push_back((root, answers));
                    if kept.len() > KEEP {
                        let (old, then) = kept.pop_front().unwrap();
                        let again: Vec<Lookup> =
                            (0..2 * PAIRS).map(|k| old.lookup(k).unwrap()).collect();
                        assert_eq!(again, then, "a root's answers changed");
                    }
                    if done {
                        break;
                    }
                }
            });
        }
    });
    let occ = d.occupancy();
    assert_eq!(
        occ.versions_used, occ.named_keys,
        "every root dropped: one record a key"
    );
    assert_eq!(occ.retained, 0);
    assert_eq!(occ.created - occ.reclaimed, occ.versions_used as u64);
}

/// The pair invariant of the V03 test.
fn check_pairs(answers: &[Lookup]) {
    for pair in answers.chunks(2) {
        match (pair[0], pair[1]) {
            (Lookup::Unknown, Lookup::Unknown) => {}
            (
                Lookup::Absent {
                    incarnation: i0,
                    generation: g0,
                },
                Lookup::Absent {
                    incarnation: i1,
                    generation: g1,
                },
            ) => assert!(i1 == i0 + 1 && g0 == g1, "torn pair {pair:?}"),
            (
                Lookup::Present {
                    incarnation: i0,
                    generation: g0,
                    hash: h0,
                },
                Lookup::Present {
                    incarnation: i1,
                    generation: g1,
                    hash: h1,
                },
            ) => {
                assert!(i1 == i0 + 1 && g0 == g1 && h0 == h1, "torn pair {pair:?}");
                assert_eq!(h0 >> 32, g0, "hash of another generation {pair:?}");
            }
            other => panic!("torn pair {other:?}"),
        }
    }
}

#[test]
fn v04_roots_retain_100k_records_and_memory_returns_when_dropped() {
    let d = VersionDirectory::builder()
        .keys(BIG as usize)
        .versions(2 * BIG as usize)
        .build()
        .unwrap();
    let all = |f: fn(u64) -> Transition| (0..BIG).map(f).collect::<Vec<_>>();
    d.apply(&all(|key| Transition::Publish { key, hash: key }))
        .unwrap();
    let root = d.capture();
    d.apply(&all(Transition::Advance)).unwrap();
    let occ = d.occupancy();
    assert_eq!(
        (occ.versions_used, occ.retained),
        (2 * BIG as usize, BIG as usize)
    );
    // Full: one more transition finds nothing a live root cannot see.
    let e = d.publish(0, 1).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::ResourceExhausted, Reason::VersionsRetained)
    );
    assert_eq!(e.to_string(), "resource-exhausted / versions-retained");
    assert_eq!(root.lookup(BIG - 1).unwrap(), present(BIG, 0, BIG - 1));
    drop(root);
    let occ = d.occupancy();
    assert_eq!((occ.versions_used, occ.retained), (BIG as usize, 0));
    assert_eq!(occ.reclaimed, BIG);
    d.publish(0, 1).unwrap();
}

#[test]
fn v04_counters_at_their_real_ends_refuse_without_wrapping() {
    let epoch_max = (1u64 << 48) - 1;
    let d = VersionDirectory::builder()
        .keys(4)
        .first_counters(epoch_max - 2, u64::MAX - 1)
        .build()
        .unwrap();
    d.publish(0, 1).unwrap();
    d.publish(1, 2).unwrap();
    assert_eq!(d.epoch(), epoch_max);
    let e = d.advance(0).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::Unavailable, Reason::SequenceExhausted)
    );
    let r = d.capture();
    assert_eq!(r.epoch(), epoch_max);
    assert_eq!(r.lookup(0).unwrap(), present(u64::MAX - 1, 0, 1));
    assert_eq!(r.lookup(1).unwrap(), present(u64::MAX, 0, 2));

    let d = VersionDirectory::builder()
        .keys(4)
        .first_counters(0, u64::MAX)
        .build()
        .unwrap();
    d.publish(0, 1).unwrap();
    let e = d.publish(1, 1).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::Unavailable, Reason::SequenceExhausted)
    );
    d.remove(0).unwrap();
    assert_eq!(
        d.publish(0, 1).unwrap_err().reason(),
        Reason::SequenceExhausted,
        "incarnations never wrap"
    );
    assert_eq!(
        d.capture().lookup(0).unwrap(),
        Lookup::Absent {
            incarnation: u64::MAX,
            generation: 0
        }
    );
}

/// Q03 for the directory: after one warm-up round, captures, lookups, transitions (single and
/// batched), root drops and the reclamation they trigger allocate nothing.
#[test]
fn q03_versions_steady_state_allocates_nothing() {
    let ops: u64 = if cfg!(debug_assertions) {
        50_000
    } else {
        1_000_000
    };
    let d = VersionDirectory::builder()
        .keys(64)
        .versions(512)
        .root_epochs(8)
        .build()
        .unwrap();
    fn round<'d>(d: &'d VersionDirectory, i: u64, kept: &mut Vec<Root<'d>>) {
        let key = i % 64;
        let r = d.capture();
        let seen = r.lookup(key).unwrap();
        match seen {
            Lookup::Present { .. } => d.advance(key).map(drop).unwrap(),
            _ => d.publish(key, i).map(drop).unwrap(),
        }
        if i.is_multiple_of(97) {
            let other = (key + 1) % 64;
            let _ = d.apply(&[
                Transition::Remove(other),
                Transition::Advance((key + 2) % 64),
            ]);
        }
        if i.is_multiple_of(5) {
            kept.push(r);
        }
        if kept.len() > 4 {
            kept.remove(0);
        }
        std::hint::black_box(seen);
    }
    let mut kept = Vec::with_capacity(8);
    for i in 0..1_000 {
        round(&d, i, &mut kept);
    }
    let n = count(|| {
        for i in 0..ops {
            round(&d, i, &mut kept);
        }
    });
    assert_eq!(n, 0, "{n} allocations in {ops} rounds");
    drop(kept);
    let occ = d.occupancy();
    assert_eq!(occ.versions_used, occ.named_keys);
}
