//! Fuzz target: see `xtask::fuzzing::records`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    xtask::fuzzing::records(data);
});
