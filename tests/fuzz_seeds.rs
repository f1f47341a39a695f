//! The fuzz targets' seed corpora replayed under `cargo test` on stable (SPEC Q07): each input in
//! `fuzz/seeds/<target>/` goes through the same check libFuzzer runs (`fuzz/src/<target>.rs`), so
//! an input that once exposed a bug stays a regression test without the nightly toolchain.

#[allow(dead_code, unused_imports, unused_macros, clippy::all)]
#[path = "../fuzz/src/lib.rs"]
mod fuzz;

use std::path::PathBuf;

/// Runs `check` on every seed of `target`; returns how many there were. A failing seed is named.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the seed corpus {} cannot be read: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "the seed corpus of {target} is empty");
    for seed in &seeds {
        let data = std::fs::read(seed).expect("a seed file");
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            panic!(
                "seed {} of the {target} target fails (replay it with \
                 `cargo +nightly fuzz run -a {target} {}`)",
                seed.display(),
                seed.display()
            );
        }
    }
    println!("SEEDS target={target} inputs={}", seeds.len());
    seeds.len()
}

#[test]
fn q07_the_config_seeds_replay_clean() {
    replay("config", fuzz::config::check);
}

#[test]
fn q07_the_scheduler_seeds_replay_clean() {
    replay("scheduler", fuzz::scheduler::check);
}

#[test]
fn q07_the_graph_seeds_replay_clean() {
    replay("graph", fuzz::graph::check);
}

#[test]
fn q07_the_versions_seeds_replay_clean() {
    replay("versions", fuzz::versions::check);
}
