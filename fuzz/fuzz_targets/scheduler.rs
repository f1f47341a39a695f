//! libFuzzer's entry for `fairway_fuzz::scheduler` (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fairway_fuzz::scheduler::check(data));
