//! fairway-perf: side-by-side comparison.
fn main() {}
