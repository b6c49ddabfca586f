//! Machine-readable report records.
//!
//! The kernel prints a human table for people and, for machines, one record
//! per line:
//!
//! ```text
//! @@tb1 <kind> key=value key=value ...
//! ```
//!
//! `@@tb` is [`MARKER`], `1` is [`SCHEMA`]. Values are escaped with
//! [`Escaped`] (`%XX` for space, `%`, `=` and control bytes), so a record
//! always splits on spaces and on the first `=` of each word. A record that
//! carries many numbers (samples) lists them comma-separated in one value.
//! A record line may follow other text on the same line (a serial console
//! can interleave); the parser looks for the marker anywhere in the line.

use core::fmt;

/// Starts every record.
pub const MARKER: &str = "@@tb";
/// Bumped whenever a record's meaning changes.
pub const SCHEMA: u32 = 1;

/// Record kinds. Each names the keys it carries.
pub mod kind {
    /// `loader protocol cmdline mem_kib modules rev`.
    pub const BOOT: &str = "boot";
    /// `vendor brand family model stepping signature hypervisor tsc sep sse2
    /// invariant_tsc syscall perfmon`.
    pub const CPU: &str = "cpu";
    /// A warning about the command line: `text`.
    pub const WARN: &str = "warn";
    /// One entry mechanism: `name status` (`ok` or `unavailable`) and `reason`.
    pub const MECH: &str = "mech";
    /// One in-kernel or user test: `name result` (`pass`/`fail`) and `detail`.
    pub const TEST: &str = "test";
    /// The test summary: `passed failed`.
    pub const TESTS: &str = "tests";
    /// The hostile user suite's summary: `cases expected skipped`.
    pub const HOSTILE: &str = "hostile";
    /// The fuzzer's summary: `seed calls failures`, calls per mechanism
    /// (`int80 sysenter callgate syscall`), results (`ok` and one key per
    /// errno name) and `flagged` (calls entered with DF, AC or NT set).
    pub const FUZZ: &str = "fuzz";
    /// A CPU exception: `vector name mode error eip cs eflags eax ebx ecx edx
    /// esi edi ebp esp cr2`.
    pub const EXCEPTION: &str = "exception";
    /// A user task ended: `prog pid how` (`exit` or `fault`) `code`.
    pub const TASK: &str = "task";
    /// A mechanism's check from a user program: `name result detail`.
    pub const CHECK: &str = "check";
    /// The clock and its calibration: `clock tsc_hz timer_overhead loop
    /// interrupts batches batch_size perf`.
    pub const CLOCK: &str = "clock";
    /// One benchmark's summary, per call in clock ticks: `name mech path call
    /// n min p25 median mean p75 max sd outliers`.
    pub const BENCH: &str = "bench";
    /// One benchmark's per-batch values: `name batch_size values` (comma list
    /// of batch totals in ticks, timer overhead subtracted). Where the run
    /// took model snapshots also `stream snap_calib calib_runs snap_batches`
    /// (see `crate::model::Snaps`).
    pub const SAMPLES: &str = "samples";
    /// A macro workload: `mech ops ticks_per_op ops_per_s syscalls_per_op`.
    pub const MACRO: &str = "macro";
    /// A sync-object pool layout: `align ts_size ts_stride ts_per64
    /// ts_per128 sq_size sq_stride sq_per64 sq_per128`.
    pub const POOL: &str = "pool";
    /// Lock benchmarks for one pool alignment: `align unit uncontended
    /// contended sleep_wakeup lookup ebizzy_records_per_s ebizzy_records timeouts`.
    pub const LOCKS: &str = "locks";
    /// The CPUs of an SMP boot: `cpus found source`.
    pub const SMP: &str = "smp";
    /// One SMP figure: `name value unit`.
    pub const SMP_BENCH: &str = "smpbench";
    /// The last record of a boot: `status` (`success`, `failure`).
    pub const END: &str = "end";
}

/// Displays a string with `%XX` escapes for bytes that would break a record.
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("%00");
        }
        for &b in self.0.as_bytes() {
            if needs_escape(b) {
                write!(f, "%{b:02X}")?;
            } else {
                // Plain printable ASCII; multi-byte UTF-8 passes through whole.
                f.write_str(core::str::from_utf8(core::slice::from_ref(&b)).unwrap_or("?"))?;
            }
        }
        Ok(())
    }
}

fn needs_escape(b: u8) -> bool {
    b <= b' ' || b == b'%' || b == b'=' || b >= 0x7f
}

/// A `%` not followed by two hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadEscape;

/// Undoes [`Escaped`], feeding bytes to `push`. `%00` alone is the empty
/// string.
pub fn unescape(s: &str, push: &mut dyn FnMut(u8)) -> Result<(), BadEscape> {
    if s == "%00" {
        return Ok(());
    }
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or(BadEscape)?;
            push(u8::from_str_radix(hex, 16).map_err(|_| BadEscape)?);
            i += 3;
        } else {
            push(b[i]);
            i += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::{format, string::String, vec::Vec};

    fn round_trip(s: &str) -> String {
        let e = format!("{}", Escaped(s));
        assert!(!e.contains(' ') && !e.contains('='), "{e}");
        let mut v = Vec::new();
        unescape(&e, &mut |b| v.push(b)).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn escapes_round_trip() {
        for s in [
            "",
            "plain",
            "QEMU Virtual CPU version 2.5+",
            "a=b c%d\te",
            "  ",
        ] {
            assert_eq!(round_trip(s), s);
        }
    }

    #[test]
    fn bad_escape_is_an_error() {
        assert!(unescape("abc%4", &mut |_| ()).is_err());
        assert!(unescape("%zz", &mut |_| ()).is_err());
    }
}
