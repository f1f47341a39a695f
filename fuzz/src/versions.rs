//! The version directory against its sequential model (`fairway_fuzz::versions_model`): libFuzzer's
//! bytes choose the sizes and counter limits (near the counters' ends too), then a sequence of
//! transitions (single calls and batches, valid or not), captures, root drops, lookups and
//! reclamation passes. After every step each call's result must be one the model allows, every
//! live root must read every key as the model says, and the store counts must match.
use super::versions_model::{Config, Counts, Expected, Model};
use super::{int, pick};
use arbitrary::Unstructured;
use fairway::versions::{Root, Transition, VersionDirectory};

const EPOCH_MAX: u64 = (1 << 48) - 1;

fn config(u: &mut Unstructured<'_>) -> Config {
    let first_epoch = pick(u, &[0, 0, EPOCH_MAX - 8]);
    let first_incarnation = pick(u, &[1, 1, u64::MAX - 4]);
    let incarnations = first_incarnation.saturating_add(int(u, 0..=12));
    let generations = int(u, 0..=6);
    Config {
        keys: int(u, 1..=24) as usize,
        versions: int(u, 1..=40) as usize,
        root_epochs: int(u, 2..=8) as usize,
        epoch_limit: (first_epoch + int(u, 0..=64)).min(EPOCH_MAX),
        incarnation_limit: pick(u, &[u64::MAX, incarnations]),
        generation_limit: pick(u, &[u64::MAX, generations]),
        first_epoch,
        first_incarnation,
    }
}

fn transition(u: &mut Unstructured<'_>, keys: usize) -> Transition {
    // Mostly keys in range, sometimes at or past the capacity.
    let key = int(u, 0..=keys as u64);
    match int(u, 0..=3) {
        0 => Transition::Advance(key),
        1 => Transition::Remove(key),
        _ => Transition::Publish {
            key,
            hash: int(u, 0..=3),
        },
    }
}

fn expect(step: usize, got: Result<u64, fairway::Error>, want: &Expected) {
    match (got, want) {
        (Ok(e), Expected::Epoch(w)) if e == *w => {}
        (Err(e), Expected::OneOf(allowed)) if allowed.contains(&(e.code(), e.reason())) => {}
        (got, want) => panic!("step {step}: the directory returned {got:?}, the model {want:?}"),
    }
}

/// Runs one input; panics on a disagreement.
pub fn check(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let c = config(&mut u);
    let dir = VersionDirectory::builder()
        .keys(c.keys)
        .versions(c.versions)
        .root_epochs(c.root_epochs)
        .counter_limits(c.epoch_limit, c.incarnation_limit, c.generation_limit)
        .first_counters(c.first_epoch, c.first_incarnation)
        .build()
        .expect("sizes in range build");
    let mut model = Model::new(c);
    let mut roots: Vec<(Root<'_>, u64)> = Vec::new();
    let mut step = 0;
    while !u.is_empty() && step < 400 {
        step += 1;
        match int(&mut u, 0..=9) {
            0..=2 => {
                let t = transition(&mut u, c.keys);
                let want = model.apply(&[t]);
                let got = match t {
                    Transition::Advance(k) => dir.advance(k),
                    Transition::Remove(k) => dir.remove(k),
                    Transition::Publish { key, hash } => dir.publish(key, hash),
                };
                expect(step, got, &want);
            }
            3 | 4 => {
                let n = int(&mut u, 0..=4);
                let batch: Vec<Transition> = (0..n).map(|_| transition(&mut u, c.keys)).collect();
                let want = model.apply(&batch);
                expect(step, dir.apply(&batch), &want);
            }
            5 | 6 if roots.len() < 8 => {
                let root = dir.capture();
                let epoch = model.capture();
                assert_eq!(
                    root.epoch(),
                    epoch,
                    "step {step}: captured at another epoch"
                );
                roots.push((root, epoch));
            }
            7 if !roots.is_empty() => {
                let i = int(&mut u, 0..=roots.len() as u64 - 1) as usize;
                let (root, epoch) = roots.swap_remove(i);
                drop(root);
                model.drop_root(epoch);
            }
            8 => {
                // Every record nobody can see was already freed: a pass finds nothing.
                assert_eq!(
                    dir.reclaim(),
                    0,
                    "step {step}: a pass found records to free"
                );
            }
            _ => {
                let key = int(&mut u, 0..=c.keys as u64 + 1);
                for (root, epoch) in &roots {
                    let got = root.lookup(key).map_err(|e| (e.code(), e.reason()));
                    assert_eq!(
                        got,
                        model.lookup(key, *epoch),
                        "step {step}: key {key} at {epoch}"
                    );
                }
            }
        }
        assert_eq!(dir.epoch(), model.epoch(), "step {step}: epoch");
        let o = dir.occupancy();
        let counts = Counts {
            named_keys: o.named_keys,
            versions_used: o.versions_used,
            retained: o.retained,
            root_epochs_used: o.root_epochs_used,
            created: o.created,
        };
        assert_eq!(counts, model.counts(), "step {step}: store counts");
    }
    // Every live root reads every key as the model says, then the store settles.
    for (root, epoch) in &roots {
        for key in 0..c.keys as u64 {
            assert_eq!(
                root.lookup(key).ok(),
                model.lookup(key, *epoch).ok(),
                "end: key {key}"
            );
        }
    }
    drop(roots);
    let o = dir.occupancy();
    assert_eq!(
        (o.retained, o.root_epochs_used),
        (0, 1),
        "roots dropped, records retained"
    );
}
