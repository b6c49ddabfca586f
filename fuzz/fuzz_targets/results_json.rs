//! Fuzz target: see `xtask::fuzzing::results_json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    xtask::fuzzing::results_json(data);
});
