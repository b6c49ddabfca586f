//! Fuzz target: see `xtask::fuzzing::ministat`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    xtask::fuzzing::ministat(data);
});
