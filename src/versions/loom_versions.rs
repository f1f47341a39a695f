//! loom models of the version directory: a capture and a lookup racing a transition; a lookup
//! walking past a record that is reclaimed and reused meanwhile; the drop of an old epoch's last
//! root racing a transition (the reclamation request must be served by one of the two).

use super::*;
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;

fn small() -> VersionDirectory {
    VersionDirectory::builder()
        .keys(2)
        .versions(4)
        .root_epochs(3)
        .build()
        .unwrap()
}

/// A capture and its lookup race `advance`: the answer matches the root's epoch, and once both
/// are done only the current record is left.
#[test]
fn loom_versions_capture_lookup_vs_transition() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let d = Arc::new(small());
        d.publish(0, 7).unwrap(); // epoch 1
        let reader = {
            let d = d.clone();
            loom::thread::spawn(move || {
                let r = d.capture();
                let got = r.lookup(0).unwrap();
                (r.epoch(), got)
            })
        };
        d.advance(0).unwrap(); // epoch 2
        let (epoch, got) = reader.join().unwrap();
        match epoch {
            1 => {
                assert_eq!(
                    got,
                    Lookup::Present {
                        incarnation: 1,
                        generation: 0,
                        hash: 7
                    }
                );
                seen.hit("before");
            }
            2 => {
                assert_eq!(
                    got,
                    Lookup::Absent {
                        incarnation: 1,
                        generation: 1
                    }
                );
                seen.hit("after");
            }
            e => panic!("root at epoch {e}"),
        }
        let occ = d.occupancy();
        assert_eq!(
            (occ.versions_used, occ.retained, occ.root_epochs_used),
            (1, 0, 1)
        );
    });
    outcomes.assert_exactly(&["before", "after"]);
}

/// An old root's lookup walks past a middle record while the middle root's drop reclaims it and
/// a publication of another key reuses its slot: the lookup still answers as of its epoch.
#[test]
fn loom_versions_lookup_vs_reclaim_and_reuse() {
    model(|| {
        let d = Arc::new(small());
        d.publish(0, 1).unwrap(); // epoch 1
        let old = d.capture();
        d.advance(0).unwrap(); // epoch 2
        let mid = d.capture();
        d.publish(0, 2).unwrap(); // epoch 3: 3 -> 2 -> 1, all three kept
        assert_eq!(d.occupancy().versions_used, 3);
        let (old_epoch, old_slot) = (old.epoch(), old.slot);
        let reader = {
            let d = d.clone();
            loom::thread::spawn(move || {
                // A root of the same epoch as `old` (kept alive by `old` in the main thread).
                let r = Root {
                    dir: &d,
                    epoch: old_epoch,
                    slot: old_slot,
                };
                let got = r.lookup(0).unwrap();
                core::mem::forget(r); // `old` holds the count
                got
            })
        };
        drop(mid); // frees the epoch-2 record
        d.publish(1, 9).unwrap(); // epoch 4: reuses that slot
        let got = reader.join().unwrap();
        drop(old);
        assert_eq!(
            got,
            Lookup::Present {
                incarnation: 1,
                generation: 0,
                hash: 1
            }
        );
        let occ = d.occupancy();
        assert_eq!(occ.versions_used, 2, "once `old` is gone: one record a key");
    });
}

/// The last root of an old epoch is dropped while a transition holds the writer lock: whichever
/// way they interleave, the retained record is reclaimed without any further call.
#[test]
fn loom_versions_root_drop_vs_transition() {
    model(|| {
        let d = Arc::new(small());
        d.publish(0, 1).unwrap(); // epoch 1
        let r = d.capture();
        let (epoch, slot) = (r.epoch(), r.slot);
        // The dropping thread takes over this root's count.
        core::mem::forget(r);
        d.advance(0).unwrap(); // epoch 2: the epoch-1 record is retained for the root
        assert_eq!(d.occupancy().retained, 1);
        let dropper = {
            let d = d.clone();
            loom::thread::spawn(move || {
                drop(Root {
                    dir: &d,
                    epoch,
                    slot,
                })
            })
        };
        d.publish(1, 5).unwrap(); // epoch 3, another key
        dropper.join().unwrap();
        let occ = d.occupancy();
        assert_eq!(
            (occ.versions_used, occ.retained, occ.root_epochs_used),
            (2, 0, 1)
        );
    });
}
