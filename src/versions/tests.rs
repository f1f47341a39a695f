//! Unit tests of the version directory (SPEC V01–V04). Sizes shrink under Miri.

use super::*;

/// `(small, medium, large)` key counts: 250 / 3,000 / 10^5, or toy sizes under Miri.
const SIZES: [usize; 3] = if cfg!(miri) {
    [4, 16, 64]
} else {
    [250, 3_000, 100_000]
};

fn dir(keys: usize, versions: usize) -> VersionDirectory {
    VersionDirectory::builder()
        .keys(keys)
        .versions(versions)
        .root_epochs(8)
        .build()
        .unwrap()
}

fn present(incarnation: u64, generation: u64, hash: u64) -> Lookup {
    Lookup::Present {
        incarnation,
        generation,
        hash,
    }
}

fn absent(incarnation: u64, generation: u64) -> Lookup {
    Lookup::Absent {
        incarnation,
        generation,
    }
}

/// Consistency of the writer's bookkeeping: every record slot is free or reachable from a
/// head exactly once, retained records are exactly the reachable non-heads, and created -
/// reclaimed = used.
fn check_conservation(d: &VersionDirectory) {
    let w = d.lock();
    let mut seen = vec![false; d.store.len()];
    let mut reachable_old = 0;
    for h in d.heads.iter() {
        let mut at = h.load(Ordering::Relaxed);
        let mut first = true;
        while let Some((s, tag)) = unlink(at) {
            assert!(!seen[s], "record {s} reachable twice");
            assert_eq!(w.tags[s], tag, "stale link to {s}");
            seen[s] = true;
            if !first {
                reachable_old += 1;
            }
            first = false;
            at = d.store[s].older.load(Ordering::Relaxed);
        }
    }
    for &f in &w.free_versions {
        assert!(!seen[f as usize], "free record {f} is reachable");
        seen[f as usize] = true;
    }
    assert!(
        seen.iter().all(|&s| s),
        "a record is neither free nor reachable"
    );
    assert_eq!(reachable_old, w.retired.len());
    let used = (d.store.len() - w.free_versions.len()) as u64;
    assert_eq!(w.created - w.reclaimed, used);
}

#[test]
fn v01_capture_makes_the_same_accesses_at_any_key_count() {
    const CAPTURES: u64 = if cfg!(miri) { 10 } else { 100 };
    let mut per_size = Vec::new();
    for keys in SIZES {
        let d = dir(keys, keys + 16);
        let batch: Vec<Transition> = (0..keys as u64)
            .map(|key| Transition::Publish { key, hash: key })
            .collect();
        d.apply(&batch).unwrap();
        for k in 0..4 {
            d.advance(k).unwrap();
        }
        CAPTURE_STEPS.with(|c| c.set(0));
        for _ in 0..CAPTURES {
            let r = d.capture();
            drop(r);
        }
        per_size.push(CAPTURE_STEPS.with(|c| c.get()));
    }
    // Three shared-memory accesses per uncontended capture, whatever the key count.
    assert_eq!(per_size, vec![3 * CAPTURES; 3]);
}

#[test]
fn v02_root_never_sees_later_transitions() {
    let d = dir(8, 64);
    let r0 = d.capture();
    d.publish(1, 11).unwrap();
    let r1 = d.capture();
    d.advance(1).unwrap();
    let r2 = d.capture();
    d.publish(1, 12).unwrap();
    let r3 = d.capture();
    d.remove(1).unwrap();
    let r4 = d.capture();
    d.publish(1, 13).unwrap();
    let r5 = d.capture();
    let seen: Vec<Lookup> = [&r0, &r1, &r2, &r3, &r4, &r5]
        .iter()
        .map(|r| r.lookup(1).unwrap())
        .collect();
    assert_eq!(
        seen,
        vec![
            Lookup::Unknown,
            present(1, 0, 11),
            absent(1, 1),
            present(1, 1, 12),
            absent(1, 1),
            present(2, 0, 13),
        ]
    );
    assert_eq!(
        [r0.epoch(), r1.epoch(), r5.epoch()],
        [0, 1, 5],
        "one epoch per call"
    );
    // Later transitions of other keys change nothing either.
    d.publish(2, 20).unwrap();
    assert_eq!(r5.lookup(2).unwrap(), Lookup::Unknown);
    assert_eq!(d.capture().lookup(2).unwrap(), present(3, 0, 20));
}

#[test]
fn v03_a_batch_is_seen_whole_or_not_at_all() {
    let d = dir(8, 64);
    d.apply(&[
        Transition::Publish { key: 0, hash: 1 },
        Transition::Publish { key: 1, hash: 2 },
    ])
    .unwrap();
    let before = d.capture();
    let e = d
        .apply(&[Transition::Remove(0), Transition::Advance(1)])
        .unwrap();
    let after = d.capture();
    assert_eq!(e, 2);
    assert_eq!(
        (before.lookup(0).unwrap(), before.lookup(1).unwrap()),
        (present(1, 0, 1), present(2, 0, 2))
    );
    assert_eq!(
        (after.lookup(0).unwrap(), after.lookup(1).unwrap()),
        (absent(1, 0), absent(2, 1))
    );
}

#[test]
fn v03_refused_batch_changes_nothing() {
    let d = dir(4, 64);
    d.publish(0, 1).unwrap();
    let e = d.epoch();
    let err = |r: Result<u64, Error>| r.unwrap_err();
    assert_eq!(
        err(d.apply(&[Transition::Advance(0), Transition::Advance(9)])).reason(),
        Reason::KeyRange
    );
    assert_eq!(
        err(d.apply(&[Transition::Advance(0), Transition::Advance(0)])).code(),
        Code::InvalidArgument
    );
    assert_eq!(
        err(d.apply(&[Transition::Advance(0), Transition::Remove(2)])).code(),
        Code::NotFound
    );
    assert_eq!(err(d.publish(0, 5)).code(), Code::AlreadyExists);
    assert_eq!(d.epoch(), e);
    assert_eq!(d.capture().lookup(0).unwrap(), present(1, 0, 1));
    // The refused batches left no marks: the same keys go through now.
    d.apply(&[
        Transition::Advance(0),
        Transition::Publish { key: 2, hash: 3 },
    ])
    .unwrap();
    assert_eq!(d.capture().lookup(0).unwrap(), absent(1, 1));
    assert_eq!(d.occupancy().versions_used, 2);
    check_conservation(&d);
}

#[test]
fn v04_record_retained_exactly_while_a_root_sees_it() {
    let d = dir(4, 64);
    d.publish(0, 1).unwrap(); // epoch 1
    d.advance(0).unwrap(); // epoch 2: the epoch-1 record goes at once (no root)
    assert_eq!(d.occupancy().versions_used, 1);
    let r2 = d.capture();
    d.publish(0, 2).unwrap(); // epoch 3: the epoch-2 record is visible to r2
    d.advance(0).unwrap(); // epoch 4: the epoch-3 record is visible to nobody
    let occ = d.occupancy();
    assert_eq!((occ.versions_used, occ.retained), (2, 1));
    assert_eq!(r2.lookup(0).unwrap(), absent(1, 1));
    let r2b = r2.clone();
    drop(r2);
    assert_eq!(d.occupancy().versions_used, 2, "a clone still holds it");
    assert_eq!(r2b.lookup(0).unwrap(), absent(1, 1));
    drop(r2b);
    // The drop of the last root ran the pass itself.
    let occ = d.occupancy();
    assert_eq!((occ.versions_used, occ.retained), (1, 0));
    assert_eq!(occ.root_epochs_used, 1);
    assert_eq!(occ.created - occ.reclaimed, 1);
    check_conservation(&d);
}

/// Retained records, read under the raw writer lock: a read that serves no request.
fn retained_raw(d: &VersionDirectory) -> usize {
    d.writer.lock().unwrap().retired.len()
}

/// The last root of an old epoch is dropped while another thread holds the writer lock (as
/// `occupancy` does): the drop's `try_lock` fails and leaves a request. Releasing the lock
/// serves it: the record is freed with no further call. The state is forced: the lock is held
/// across the whole drop.
#[test]
fn v04_a_root_dropped_while_the_writer_lock_is_held_is_reclaimed_when_it_is_released() {
    let d = dir(4, 64);
    d.publish(0, 1).unwrap();
    let r = d.capture();
    d.advance(0).unwrap();
    assert_eq!(retained_raw(&d), 1);
    let held = d.lock();
    std::thread::scope(|s| {
        s.spawn(move || drop(r)).join().unwrap();
    });
    assert_eq!(
        d.want_reclaim.load(Ordering::Relaxed),
        1,
        "the drop found the lock taken and left a request"
    );
    drop(held);
    assert_eq!(
        retained_raw(&d),
        0,
        "the lock holder released the lock without serving the dropped root's request"
    );
    check_conservation(&d);
}

/// The same through the public API: the drop of the last root races `occupancy` in a loop;
/// afterwards nothing is retained, with no further call.
#[test]
fn v04_a_root_dropped_during_occupancy_is_reclaimed_with_no_further_call() {
    let rounds = if cfg!(miri) { 3 } else { 500 };
    for round in 0..rounds {
        let d = dir(4, 64);
        d.publish(0, 1).unwrap();
        let r = d.capture();
        d.advance(0).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::black_box(d.occupancy());
                }
            });
            s.spawn(|| {
                drop(r);
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            });
        });
        assert_eq!(
            retained_raw(&d),
            0,
            "round {round}: a record no root sees is kept"
        );
    }
}

#[test]
fn v04_middle_record_goes_while_older_and_newer_roots_stay() {
    let d = dir(2, 64);
    d.publish(0, 1).unwrap();
    let old = d.capture(); // sees (1, 0, 1)
    d.advance(0).unwrap();
    let mid = d.capture(); // sees absent(1, 1)
    d.publish(0, 2).unwrap();
    let new = d.capture(); // sees (1, 1, 2)
    d.advance(0).unwrap(); // current: absent(1, 2)
    assert_eq!(d.occupancy().versions_used, 4);
    drop(mid);
    assert_eq!(
        d.occupancy().versions_used,
        3,
        "only the middle record went"
    );
    assert_eq!(old.lookup(0).unwrap(), present(1, 0, 1));
    assert_eq!(new.lookup(0).unwrap(), present(1, 1, 2));
    check_conservation(&d);
    drop(old);
    drop(new);
    assert_eq!(d.occupancy().versions_used, 1);
    check_conservation(&d);
}

#[test]
fn v04_exhaustion_is_typed_and_recovers_when_roots_drop() {
    let d = dir(2, 4);
    d.publish(0, 0).unwrap();
    let mut roots = Vec::new();
    let mut refused = None;
    for i in 0..8 {
        roots.push(d.capture());
        let r = if i % 2 == 0 {
            d.advance(0)
        } else {
            d.publish(0, i)
        };
        if let Err(e) = r {
            refused = Some(e);
            break;
        }
    }
    let e = refused.expect("four records cannot hold eight live roots' views");
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert_eq!(e.reason(), "versions-retained");
    assert_eq!(d.occupancy().versions_used, 4);
    roots.clear();
    assert_eq!(d.occupancy().versions_used, 1);
    d.advance(0).unwrap();
    check_conservation(&d);
}

#[test]
fn v04_root_epochs_exhaustion_is_typed() {
    let d = VersionDirectory::builder()
        .keys(2)
        .versions(64)
        .root_epochs(3)
        .build()
        .unwrap();
    d.publish(0, 0).unwrap();
    let a = d.capture();
    d.advance(0).unwrap();
    let b = d.capture();
    d.publish(0, 1).unwrap();
    let e = d.advance(0).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::ResourceExhausted, Reason::RootEpochs)
    );
    assert_eq!(d.capture().lookup(0).unwrap(), present(1, 1, 1));
    drop(a);
    d.advance(0).unwrap();
    assert_eq!(b.lookup(0).unwrap(), absent(1, 1));
}

#[test]
fn counters_stop_at_their_limits_without_wrapping() {
    let d = VersionDirectory::builder()
        .keys(4)
        .versions(16)
        .counter_limits(6, 2, 1)
        .build()
        .unwrap();
    d.publish(0, 0).unwrap(); // epoch 1, incarnation 1
    d.advance(0).unwrap(); // generation 1 = the limit
    let e = d.advance(0).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::ResourceExhausted, Reason::GenerationExhausted)
    );
    d.publish(1, 0).unwrap(); // incarnation 2 = the limit
    let e = d.publish(2, 0).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::Unavailable, Reason::SequenceExhausted)
    );
    d.remove(1).unwrap(); // epoch 4
    d.remove(0).unwrap(); // epoch 5
    d.publish(0, 0).unwrap_err();
    d.advance(1).unwrap_err();
    let e6 = d.apply(&[]).unwrap();
    assert_eq!(e6, 5, "an empty batch takes no epoch");
    let r = d.capture();
    let d2 = VersionDirectory::builder()
        .keys(1)
        .versions(4)
        .counter_limits(2, 9, 9)
        .build()
        .unwrap();
    d2.publish(0, 0).unwrap();
    d2.advance(0).unwrap();
    let e = d2.publish(0, 1).unwrap_err();
    assert_eq!(e.reason(), Reason::SequenceExhausted);
    assert_eq!(d2.epoch(), 2);
    assert_eq!(r.lookup(0).unwrap(), absent(1, 1));
}

#[test]
fn builder_refuses_out_of_range_sizes() {
    let b = VersionDirectory::builder;
    assert_eq!(
        b().versions(0).build().unwrap_err().field(),
        Some("versions")
    );
    assert_eq!(
        b().root_epochs(1).build().unwrap_err().field(),
        Some("root_epochs")
    );
    assert_eq!(
        b().root_epochs(70_000).build().unwrap_err().field(),
        Some("root_epochs")
    );
    // A directory of no keys is refused, not built to refuse every lookup.
    assert_eq!(b().keys(0).build().unwrap_err().field(), Some("keys"));
    let d = b().keys(1).versions(4).build().unwrap();
    assert_eq!(
        d.capture().lookup(1).unwrap_err().reason(),
        Reason::KeyRange
    );
}

#[test]
fn v04_churn_reclaims_every_record_once() {
    // A deterministic walk of transitions with roots taken and dropped out of order.
    let keys = 6u64;
    let d = dir(keys as usize, 48);
    let mut roots: Vec<(Root<'_>, Vec<Lookup>)> = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let steps = if cfg!(miri) { 60 } else { 3_000 };
    for _ in 0..steps {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = x % keys;
        match (x >> 8) % 6 {
            0 => {
                let _ = d.advance(key);
            }
            1 => {
                let _ = d.remove(key);
            }
            2 | 3 => {
                let _ = d.publish(key, x >> 16);
            }
            4 if roots.len() < 5 => {
                let r = d.capture();
                let view = (0..keys).map(|k| r.lookup(k).unwrap()).collect();
                roots.push((r, view));
            }
            _ if !roots.is_empty() => {
                let (r, view) = roots.swap_remove((x >> 20) as usize % roots.len());
                let now: Vec<Lookup> = (0..keys).map(|k| r.lookup(k).unwrap()).collect();
                assert_eq!(now, view, "a root's answers changed");
            }
            _ => {}
        }
    }
    check_conservation(&d);
    roots.clear();
    let occ = d.occupancy();
    assert_eq!(
        occ.versions_used, occ.named_keys,
        "steady state: one record a key"
    );
    assert_eq!(occ.retained, 0);
    assert_eq!(occ.root_epochs_used, 1);
    check_conservation(&d);
}

#[test]
fn directory_and_roots_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<VersionDirectory>();
    send_sync::<Root<'static>>();
    send_sync::<OwnedRoot>();
    send_sync::<Lookup>();
}

#[test]
fn v04_owned_root_moves_to_another_thread_and_holds_its_records() {
    let d = std::sync::Arc::new(dir(2, 16));
    d.publish(0, 1).unwrap();
    let root = d.capture_owned();
    let copy = root.clone();
    d.advance(0).unwrap();
    assert_eq!(d.occupancy().versions_used, 2);
    let seen = std::thread::spawn(move || root.lookup(0).unwrap())
        .join()
        .unwrap();
    assert_eq!(seen, present(1, 0, 1));
    assert_eq!(d.occupancy().versions_used, 2, "the clone still holds it");
    assert_eq!(copy.epoch(), 1);
    drop(copy);
    assert_eq!(d.occupancy().versions_used, 1);
    check_conservation(&d);
}
