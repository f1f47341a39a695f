//! libFuzzer's entry for `fairway_fuzz::config` (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fairway_fuzz::config::check(data));
