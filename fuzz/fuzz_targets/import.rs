//! Fuzz target: see `xtask::fuzzing::import`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    xtask::fuzzing::import(data);
});
