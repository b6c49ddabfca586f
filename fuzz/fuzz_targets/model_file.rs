//! Fuzz target: see `xtask::fuzzing::model_file`. The serial log of the
//! model boot whose plugin file seeds the corpus is the boot the fuzzed
//! files are merged into.
#![no_main]

const LOG: &str = include_str!("../seeds/model_file.serial.log");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    xtask::fuzzing::model_file(data, LOG);
});
