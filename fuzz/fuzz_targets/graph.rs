//! libFuzzer's entry for `fairway_fuzz::graph` (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fairway_fuzz::graph::check(data));
