//! Builder and configuration validation: libFuzzer's bytes choose a ledger, a scheduler, a graph
//! and a version directory configuration, each value small or at a documented limit (0, 1, the
//! maximum, one past it). Every refusal must be `invalid-argument / configuration` naming a
//! field; a scheduler's footprint must be accepted exactly when every value is in its documented
//! range, and then it must build on both engines (when small enough to allocate here), while a
//! refused footprint must be the build's refusal too;
//! the graph and the version directory must build exactly when every value is in its documented
//! range.
use super::{int, pick, size};
use arbitrary::Unstructured;
use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{Graph, Version};
use fairway::oracle::{Baseline, Ring};
use fairway::versions::VersionDirectory;
use fairway::{ClassConfig, Code, Error, Reason, Scheduler};
use std::time::Duration;

/// What this target allocates at most for one build.
const BUILD_BYTES: u64 = 16 << 20;

fn refused(what: &str, e: &Error) {
    assert!(
        e.code() == Code::InvalidArgument
            && e.reason() == Reason::Configuration
            && e.field().is_some(),
        "{what}: refused with {e:?}, not a configuration error naming its field"
    );
}

fn ledger(u: &mut Unstructured<'_>) -> Option<Ledger> {
    const NAMES: [&str; 4] = ["c0", "c1", "c2", "c1"];
    let classes = int(u, 0..=4) as usize;
    let max = LedgerConfig::MAX_TENANTS;
    let tenants = size(u, 64, &[0, 1, max, max + 1, u32::MAX]);
    let config = LedgerConfig::new(
        (0..classes).map(|i| ClassSpec::new(NAMES[i])).collect(),
        tenants,
    );
    let valid = classes > 0 && classes < 4 && tenants > 0 && tenants <= max;
    if config.footprint_bytes() > BUILD_BYTES {
        return None;
    }
    match Ledger::new(config) {
        Ok(l) => {
            assert!(
                valid,
                "a ledger of {classes} classes (a name twice past 3) and {tenants} tenants built"
            );
            Some(l)
        }
        Err(e) => {
            refused("ledger", &e);
            assert!(
                !valid,
                "a valid ledger ({classes} classes, {tenants} tenants) was refused: {e:?}"
            );
            None
        }
    }
}

fn scheduler(u: &mut Unstructured<'_>, ledger: Ledger) {
    let classes: Vec<(u32, u32)> = (0..int(u, 0..=4))
        .map(|_| {
            let cells = size(
                u,
                40,
                &[0, 1, ClassConfig::MAX_CELLS, ClassConfig::MAX_CELLS + 1],
            );
            let max = ClassConfig::MAX_QUEUE_CAPACITY;
            (cells, size(u, 40, &[0, 1, max, max + 1, u32::MAX]))
        })
        .collect();
    let after = pick(
        u,
        &[
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(5),
            Duration::MAX,
        ],
    );
    let builder = || {
        let b = Scheduler::builder(ledger.clone()).payload::<u64>();
        classes
            .iter()
            .fold(b, |b, &(cells, cap)| b.class(cells, cap))
            .starvation_after(after)
    };
    let in_range = !classes.is_empty()
        && classes.len() == ledger.class_count()
        && classes.iter().all(|&(cells, cap)| {
            (1..=ClassConfig::MAX_CELLS).contains(&cells) && cap <= ClassConfig::MAX_QUEUE_CAPACITY
        })
        && !after.is_zero();
    let footprint = builder().footprint();
    assert_eq!(
        footprint.is_ok(),
        in_range,
        "classes {classes:?} on a ledger of {} classes, starvation after {after:?}: {footprint:?}",
        ledger.class_count()
    );
    match footprint {
        Err(e) => {
            refused("scheduler footprint", &e);
            let built = builder().build().map(drop);
            assert_eq!(
                built.err(),
                Some(e),
                "footprint and build disagree on a refusal"
            );
        }
        Ok(f) if f.bytes <= BUILD_BYTES => {
            let engine = builder().build_with::<Ring>().map(drop);
            let oracle = builder().build_with::<Baseline>().map(drop);
            assert!(
                engine.is_ok() && oracle.is_ok(),
                "a configuration whose footprint ({f:?}) was accepted did not build: {engine:?} / {oracle:?}"
            );
        }
        Ok(_) => {}
    }
}

fn graph(u: &mut Unstructured<'_>, ledger: Ledger) {
    let cells = int(u, 1..=4) as u32;
    let nodes = size(u, 64, &[0, 1, 1 << 23, (1 << 23) + 1]);
    let edges = size(u, 64, &[0, 1, 1 << 30, (1 << 30) + 1]);
    let keys = size(u, 64, &[0, 1, 1 << 30, (1 << 30) + 1]);
    let max_deps = size(u, 8, &[0, 1, 1024, 1025]);
    let max_gen = size(
        u,
        8,
        &[
            Version::MAX_GENERATION,
            Version::MAX_GENERATION.saturating_add(1),
        ],
    );
    let in_range = (1..=1 << 23).contains(&nodes)
        && (1..=1 << 30).contains(&edges)
        && (1..=1 << 30).contains(&keys)
        && (1..=1024).contains(&max_deps)
        && max_gen <= Version::MAX_GENERATION;
    let small = nodes <= 4096 && edges <= 1 << 16 && keys <= 1 << 16;
    if in_range && !small {
        return;
    }
    let classes = ledger.class_count();
    let mut b = Graph::builder(ledger);
    for _ in 0..classes {
        b = b.class(cells);
    }
    let built = b
        .nodes(nodes)
        .edges(edges)
        .keys(keys)
        .max_deps(max_deps)
        .max_generation(max_gen)
        .build();
    match built {
        Ok(_) => assert!(in_range, "a graph out of range built"),
        Err(e) => {
            refused("graph", &e);
            assert!(!in_range, "a graph in range was refused: {e:?}");
        }
    }
}

fn versions(u: &mut Unstructured<'_>) {
    let keys = size(u, 64, &[0, 1, u32::MAX]) as usize;
    let keys = if int(u, 0..=7) == 0 {
        (u32::MAX as usize) + 2
    } else {
        keys
    };
    let versions = size(u, 64, &[0, 1, u32::MAX - 2, u32::MAX - 1, u32::MAX]) as usize;
    let root_epochs = size(u, 8, &[0, 1, 2, 65_535, 65_536]) as usize;
    let first_epoch = pick(u, &[0, 3, 7]);
    let epoch_limit = pick(u, &[u64::MAX, 5]);
    let in_range = (1..=(u32::MAX as usize) + 1).contains(&keys)
        && (1..u32::MAX as usize).contains(&versions)
        && (2..=65_535).contains(&root_epochs)
        && first_epoch <= epoch_limit;
    if in_range && (keys > 4096 || versions > 4096) {
        return;
    }
    let built = VersionDirectory::builder()
        .keys(keys)
        .versions(versions)
        .root_epochs(root_epochs)
        .counter_limits(epoch_limit, u64::MAX, u64::MAX)
        .first_counters(first_epoch, 1)
        .build();
    match built {
        Ok(_) => assert!(
            in_range,
            "a directory out of range built ({keys}, {versions}, {root_epochs})"
        ),
        Err(e) => {
            refused("version directory", &e);
            assert!(!in_range, "a directory in range was refused: {e:?}");
        }
    }
}

/// Runs one input; panics on a disagreement.
pub fn check(data: &[u8]) {
    let mut u = Unstructured::new(data);
    if let Some(l) = ledger(&mut u) {
        scheduler(&mut u, l.clone());
        graph(&mut u, l);
    }
    versions(&mut u);
}
