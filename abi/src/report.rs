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
//!
//! Provenance: every record on the console is the kernel's. Ring 3's
//! console writes cannot hold the marker (the kernel prints each `@` in them
//! as [`USER_AT`]), and [`Escaped`] values never hold an `@`; a user
//! program's records go through the `record` system call, which checks
//! them ([`check_user_record`]) and tags them with the program, its
//! process and its thread ([`KEY_PROG`], [`KEY_PID`], [`KEY_TID`]).

use core::fmt;

/// Starts every record.
pub const MARKER: &str = "@@tb";
/// Bumped whenever a record's meaning changes.
pub const SCHEMA: u32 = 1;

/// What the kernel prints for each `@` a user program writes to the
/// console: the records' own escape, so no user line can hold a marker.
pub const USER_AT: &str = "%40";

/// The tags the kernel puts on a record it prints for a user program: the
/// program's name, the pid of the process and the tid of the thread that
/// made the call. A user record may not carry them. The `task` record
/// that ends the task says which pids its processes had
/// (`pid..=last_pid`), so a reader can check every record's pid.
pub const KEY_PROG: &str = "prog";
pub const KEY_PID: &str = "pid";
pub const KEY_TID: &str = "tid";

/// The kinds a user program may report through the `record` system call;
/// the rest (boot, cpu, test, task, end, ...) only the kernel writes.
pub const USER_KINDS: [&str; 9] = [
    kind::CHECK,
    kind::CLOCK,
    kind::BENCH,
    kind::SAMPLES,
    kind::SHARE,
    kind::MACRO,
    kind::FUZZ,
    kind::FUZZ_THREADS,
    kind::TURNS,
];

/// The longest record body the `record` system call takes (a `samples`
/// record of [`crate::cmdline::MAX_BATCHES`] batches fits with room).
pub const MAX_USER_RECORD: usize = 24 * 1024;

/// Why the kernel refused a user record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRecord {
    /// Empty, or longer than [`MAX_USER_RECORD`].
    Length,
    /// Not one of [`USER_KINDS`].
    Kind,
    /// A byte outside printable ASCII and single spaces, or an `@`.
    Byte,
    /// A word that is not `key=value` (key `[A-Za-z0-9_]+`, value non-empty
    /// without `=`), or an empty word (two spaces, a space at an end).
    Field,
    /// A key the kernel writes itself ([`KEY_PROG`], [`KEY_PID`],
    /// [`KEY_TID`]).
    Reserved,
    /// A value that does not unescape to UTF-8: a `%` that does not start
    /// an escape of two hex digits, or escapes of bytes that are no UTF-8
    /// (the host's reader would refuse the whole report).
    Escape,
}

/// A UTF-8 check fed one byte at a time, as RFC 3629 (and so
/// `core::str::from_utf8`) takes UTF-8: no overlong forms, no surrogates,
/// nothing past U+10FFFF.
#[derive(Default)]
struct Utf8 {
    /// Continuation bytes still due, and the range the next one must lie in.
    need: u8,
    lo: u8,
    hi: u8,
    bad: bool,
}

impl Utf8 {
    fn push(&mut self, b: u8) {
        if self.bad {
            return;
        }
        if self.need > 0 {
            if (self.lo..=self.hi).contains(&b) {
                (self.need, self.lo, self.hi) = (self.need - 1, 0x80, 0xBF);
            } else {
                self.bad = true;
            }
            return;
        }
        (self.need, self.lo, self.hi) = match b {
            0x00..=0x7F => (0, 0x80, 0xBF),
            0xC2..=0xDF => (1, 0x80, 0xBF),
            0xE0 => (2, 0xA0, 0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
            0xED => (2, 0x80, 0x9F),
            0xF0 => (3, 0x90, 0xBF),
            0xF1..=0xF3 => (3, 0x80, 0xBF),
            0xF4 => (3, 0x80, 0x8F),
            _ => {
                self.bad = true;
                return;
            }
        };
    }

    fn valid(&self) -> bool {
        !self.bad && self.need == 0
    }
}

/// Checks a user record's body, `kind key=value ...` without the marker
/// and without a newline; returns its kind. Pure, so the host tests it.
pub fn check_user_record(body: &[u8]) -> Result<&str, BadRecord> {
    if body.is_empty() || body.len() > MAX_USER_RECORD {
        return Err(BadRecord::Length);
    }
    if body
        .iter()
        .any(|&b| !(b' '..=b'~').contains(&b) || b == b'@')
    {
        return Err(BadRecord::Byte);
    }
    // Printable ASCII: valid UTF-8.
    let text = core::str::from_utf8(body).map_err(|_| BadRecord::Byte)?;
    let mut words = text.split(' ');
    let k = words.next().unwrap_or("");
    let Some(&k) = USER_KINDS.iter().find(|&&u| u == k) else {
        return Err(BadRecord::Kind);
    };
    for w in words {
        let (key, value) = w.split_once('=').ok_or(BadRecord::Field)?;
        let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !key_ok || value.is_empty() || value.contains('=') {
            return Err(BadRecord::Field);
        }
        if key == KEY_PROG || key == KEY_PID || key == KEY_TID {
            return Err(BadRecord::Reserved);
        }
        let mut utf8 = Utf8::default();
        unescape(value, &mut |b| utf8.push(b)).map_err(|_| BadRecord::Escape)?;
        if !utf8.valid() {
            return Err(BadRecord::Escape);
        }
    }
    Ok(k)
}

/// Record kinds. Each names the keys it carries.
pub mod kind {
    /// `loader protocol cmdline mem_kib modules rev`.
    pub const BOOT: &str = "boot";
    /// The settings that shape every figure, as the kernel applied them
    /// (not as the command line asked): `pmap fork cpus turn` (the CPUs
    /// that started; the turn pacer's grain, 0 where it does not run).
    pub const SETTINGS: &str = "settings";
    /// `vendor brand family model stepping signature hypervisor tsc sep sse2
    /// rdtscp invariant_tsc syscall pae apic perfmon counters`.
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
    /// The fuzzer's threads phase (`fuzz_threads=`): `seed calls threads
    /// cpu_mask failures` (`calls`: the workers' calls, all made;
    /// `cpu_mask`: bit n set when a worker ran on CPU n),
    /// `cross` (bytes a read gave that no pipe its descriptor named could
    /// hold), `torn` (bytes that were no whole message), `checked`
    /// (messages read and traced to their pipe), `unresolved` (messages
    /// whose descriptor history was no longer kept), the calls by kind
    /// (`pipe close dup2 read write sbrk fork`), the results that were an
    /// errno (`EBADF EPIPE EFAULT EMFILE ENFILE EAGAIN ENOMEM`), `janitor`
    /// (the main thread's closes meanwhile), `ticks` and `ms` (the
    /// phase's TSC ticks, and in milliseconds by the kernel's TSC rate).
    pub const FUZZ_THREADS: &str = "fuzz_threads";
    /// A CPU exception: `vector name mode error eip cs eflags eax ebx ecx edx
    /// esi edi ebp esp cr2`.
    pub const EXCEPTION: &str = "exception";
    /// The architectural performance counters: `status` (`on`, `n/a`, or
    /// `off` when a ring-3 RDPMC faulted during the run and the kernel
    /// turned them off) and `reason` (empty when on).
    pub const PERF: &str = "perf";
    /// A user task ended: `prog pid how` (`exit` or `fault`) `code`, and
    /// `last_pid`: its processes had the pids `pid..=last_pid` (its first
    /// process, pid 1 in the comments, has `pid`; its forks the next ones).
    /// Then the kernel's own counts around the task: `frames_before
    /// frames_after` (the frame allocator's frames in use before the
    /// program loaded and after every process's memory went back),
    /// `pages_before pages_after` (user pages, likewise) and `pipes_left`
    /// (pipes still open when the task ended, closed by the kernel).
    pub const TASK: &str = "task";
    /// A mechanism's check from a user program: `name result detail`.
    pub const CHECK: &str = "check";
    /// The clock and its calibration: `clock tsc_hz`, and what the program
    /// that prints it knows of `fence timer_overhead interrupts batches
    /// batch_size perf`. Every benchmark program prints one before its
    /// `bench` records.
    pub const CLOCK: &str = "clock";
    /// One benchmark's summary: `name mech path call measure [unit] n min p25
    /// median mean p75 max sd outliers [instructions cycles]`. Written by
    /// [`write_bench`] only; see [`Figure`] for what each key means and
    /// [`names`] for the naming scheme.
    pub const BENCH: &str = "bench";
    /// One benchmark's per-batch values: `name batch_size values` (comma list
    /// of batch totals in clock ticks; where the program calibrates its timer,
    /// the timer overhead is subtracted). Follows its `bench` record. Where
    /// the run took model snapshots also `stream snap_calib calib_runs
    /// snap_batches` (see `crate::model::Snaps`).
    pub const SAMPLES: &str = "samples";
    /// Each CPU's share of a multi-CPU benchmark's work: `name work
    /// per_cpu` (`work` names what was counted, e.g. `records`; `per_cpu`
    /// is a comma list, CPU 0 first, summed over every batch). Follows its
    /// `bench` record. Under icount QEMU runs one vCPU at a time in long
    /// turns, so work the CPUs race for is divided by its schedule: the
    /// share says how.
    pub const SHARE: &str = "share";
    /// A macro workload: `mech ops batches ticks_per_op ops_per_s
    /// syscalls_per_op`, and where its model snapshots are
    /// (`abi::model::Snaps`: `stream snap_calib calib_runs snap_batches`;
    /// one batch is `ops` operations).
    pub const MACRO: &str = "macro";
    /// A sync-object pool layout: `align ts_size ts_stride ts_per64
    /// ts_per128 sq_size sq_stride sq_per64 sq_per128`.
    pub const POOL: &str = "pool";
    /// The CPUs of an SMP boot: `cpus found source`.
    pub const SMP: &str = "smp";
    /// How the CPUs of a multi-CPU boot interleave: `cpus grain`, the turn
    /// pacer's grain in instructions (`turn=`; 0: off, the machine's own
    /// interleaving).
    pub const TURN: &str = "turn";
    /// How one CPU's instructions came in runs (a user program measures
    /// it, forktest on several CPUs): `cpu runs window hist`, `hist` a comma
    /// list of counts of runs of `[2^k, 2^(k+1))` ticks, k from 0 (a run
    /// ends where the TSC, virtual time under icount, jumped: other CPUs
    /// ran).
    pub const TURNS: &str = "turns";
    /// What the turn pacer cost, at the end of a paced boot: `interrupts`
    /// and `parked` (comma lists, CPU 0 first: the pacer's interrupts each
    /// CPU took, and the `pause`s it ran while parked).
    pub const PACER: &str = "pacer";
    /// On several CPUs, after each task's `task` record: what each CPU did
    /// in it, counted by the kernel: `prog forks shootdowns_sent
    /// shootdowns_taken` (comma lists, CPU 0 first; a request is one target
    /// CPU asked to flush, sent by the initiator and taken by the target).
    pub const WORK: &str = "work";
    /// The last record of a boot: `status` (`success`, `failure`).
    pub const END: &str = "end";
}

/// Benchmark names: `<group>.<figure>[.<variant>]`, lower case, words joined
/// by `_`. The group is the program or kernel module that measures it; the
/// variant, where there is one, is the pool layout (`128`, `64`, `packed`)
/// or the mechanism's call. docs/reference.md lists every name.
pub mod names {
    /// The system-call loops of the `bench` program: `<mechanism>.<call>`
    /// (`int80.null`, `sysenter.floor`, ...) and `loop`.
    pub const LOOP: &str = "loop";
    /// The `locks` program: `locks.<figure>.<layout>`. With more than one
    /// CPU also the cross-CPU figures [`CONTENDED_SMP`], [`SLEEP_WAKEUP_SMP`]
    /// and the user-level false sharing, `locks.<FALSE_SHARING_*>.<layout>`.
    pub const LOCKS: &str = "locks";
    /// The `locks` program's ebizzy-like workload: `ebizzy.<layout>`; with
    /// more than one CPU also `ebizzy.smp.<layout>` (one searcher per CPU,
    /// records/s of all; its [`kind::SHARE`] record says how many records
    /// each CPU's searcher found).
    pub const EBIZZY: &str = "ebizzy";
    /// `locks.contended_smp.<layout>`: the contended hand-off between
    /// threads on CPUs 0 and 1.
    pub const CONTENDED_SMP: &str = "contended_smp";
    /// `locks.sleep_wakeup_smp.<layout>`: the sleep/wakeup round trip
    /// between a thread on CPU 0 and one on CPU 1.
    pub const SLEEP_WAKEUP_SMP: &str = "sleep_wakeup_smp";
    /// `ebizzy.smp.<layout>`: every CPU's searcher together.
    pub const EBIZZY_SMP: &str = "smp";
    /// User-level false sharing: one thread per CPU increments its own
    /// counter; the counters in one 64-byte line, in adjacent 64-byte
    /// lines, and 128 bytes apart (increments of every CPU per second).
    pub const FALSE_SHARING_LINE: &str = "false_sharing_line";
    pub const FALSE_SHARING_ADJACENT: &str = "false_sharing_adjacent";
    pub const FALSE_SHARING_APART: &str = "false_sharing_apart";
    /// `mode=smp`: `smp.false_sharing.<layout>`, `smp.lines.<same|adjacent|page>`, `smp.pingpong`,
    /// `smp.tlb.<invlpg|cr3|shootdown>`.
    pub const SMP: &str = "smp";
    /// `mode=smp`'s forktest analog: `forktest.<window|cr3>`.
    pub const FORKTEST: &str = "forktest";
    /// The forktest program's figure: one fork + exit + wait round.
    pub const FORKTEST_FORK_EXIT: &str = "forktest.fork_exit";
    /// The pointer chase (`prog=chase`): `chase.<KiB>k`, one load per call.
    pub const CHASE: &str = "chase";
    /// The string-instruction counts (`prog=strings`): `string.<op>.<ecx>`
    /// and `string.none` (`abi::strings`), one instruction per call.
    pub const STRING: &str = "string";
    /// The pool layouts as they appear in names (`abi::cmdline`'s
    /// `pool_align` values).
    pub const LAYOUTS: [&str; 3] = ["128", "64", "packed"];
    /// The calls the `bench` program times through each mechanism
    /// (`<mechanism>.<call>`).
    pub const CALLS: [&str; 5] = ["floor", "null", "getpid", "geteuid", "write1"];
    /// The macro mix's group: `macro.<mechanism>` (host-side name).
    pub const MACRO: &str = "macro";
    /// Every group a metric's name starts with, besides the mechanisms.
    pub const GROUPS: [&str; 16] = [
        LOOP,
        LOCKS,
        EBIZZY,
        SMP,
        FORKTEST,
        CHASE,
        STRING,
        MACRO,
        // The lmbench program's rows (`crate::lmbench`).
        "lat_syscall",
        "lat_sig",
        "lat_proc",
        "lat_ctx",
        "lat_pipe",
        "lat_pagefault",
        "bw_pipe",
        "smack",
    ];
}

/// What a benchmark's values are, so that readers know which way is better.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Measure {
    /// Clock ticks per operation (per call, per round trip): lower is better.
    #[default]
    PerOp,
    /// Operations per second (the record's `unit` names them, e.g.
    /// `records/s`): higher is better.
    Throughput,
}

impl Measure {
    pub const ALL: [Measure; 2] = [Measure::PerOp, Measure::Throughput];

    pub fn key(self) -> &'static str {
        match self {
            Measure::PerOp => "per_op",
            Measure::Throughput => "throughput",
        }
    }

    pub fn from_key(k: &str) -> Option<Measure> {
        Measure::ALL.into_iter().find(|m| m.key() == k)
    }

    pub fn higher_is_better(self) -> bool {
        self == Measure::Throughput
    }
}

/// One benchmark's figures as a guest reports them: every batch's total in
/// clock ticks, and how to read it.
#[derive(Clone, Copy, Debug)]
pub struct Figure<'a> {
    /// See [`names`].
    pub name: &'a str,
    /// Free-form grouping for tables: the mechanism for the system-call
    /// loops; otherwise the group of the name (`locks`, `smp`).
    pub mech: &'a str,
    pub path: &'a str,
    pub call: &'a str,
    pub measure: Measure,
    /// A throughput's unit (`records/s`, `ops/s`). Per-operation figures
    /// leave it empty: their unit is the clock's (instructions, cycles).
    pub unit: &'a str,
    /// Operations per batch.
    pub batch_size: u32,
    /// Every batch's total in clock ticks.
    pub samples: &'a [u64],
    /// Clock ticks per second, to turn a batch into a throughput.
    pub tsc_hz: u64,
    /// Instructions retired and core cycles per operation from the
    /// architectural counters, where the CPU has them.
    pub counters: Option<(f64, f64)>,
    /// The CPUs the benchmark's threads ran on, bit `n` for CPU `n` (as the
    /// `cpu` system call told each thread); 0 when not known. Written as
    /// `cpus=0,1`, so a reader sees the work crossed CPUs.
    pub cpus: u32,
    /// Where the figure's model snapshots are (`--clock model`), when the
    /// guest took them around its batches.
    pub snaps: Option<crate::model::Snaps>,
}

impl<'a> Figure<'a> {
    /// A per-operation figure: `samples`, each a batch of `batch_size`
    /// operations in clock ticks (`tsc_hz` a second), in the clock's own
    /// unit; no counters, CPUs or snapshots (a caller adds those with `..`).
    pub fn per_op(
        name: &'a str,
        mech: &'a str,
        path: &'a str,
        call: &'a str,
        batch_size: u32,
        samples: &'a [u64],
        tsc_hz: u64,
    ) -> Figure<'a> {
        Figure {
            name,
            mech,
            path,
            call,
            measure: Measure::PerOp,
            unit: "",
            batch_size,
            samples,
            tsc_hz,
            counters: None,
            cpus: 0,
            snaps: None,
        }
    }
}

impl Figure<'_> {
    /// One batch's value: ticks per operation, or operations per second.
    pub fn value(&self, ticks: u64) -> f64 {
        let ops = self.batch_size.max(1) as f64;
        match self.measure {
            Measure::PerOp => ticks as f64 / ops,
            Measure::Throughput if ticks == 0 => 0.0,
            Measure::Throughput => ops * self.tsc_hz as f64 / ticks as f64,
        }
    }

    /// The summary of every batch's value. `vals` and `scratch` must be at
    /// least as long as the samples.
    pub fn summarize(&self, vals: &mut [f64], scratch: &mut [f64]) -> crate::stats::Summary {
        let n = self.samples.len().min(vals.len());
        for (v, t) in vals.iter_mut().zip(self.samples) {
            *v = self.value(*t);
        }
        crate::stats::summarize(&mut vals[..n], scratch)
    }
}

/// Writes a benchmark's `bench` and `samples` records (two lines). Every
/// guest-side emitter goes through here, so the format lives in one place.
pub fn write_bench(out: &mut dyn fmt::Write, f: &Figure, s: &crate::stats::Summary) -> fmt::Result {
    write!(
        out,
        "{MARKER}{SCHEMA} {} name={} mech={} path={} call={} measure={}",
        kind::BENCH,
        Escaped(f.name),
        Escaped(f.mech),
        Escaped(f.path),
        Escaped(f.call),
        f.measure.key()
    )?;
    if !f.unit.is_empty() {
        write!(out, " unit={}", Escaped(f.unit))?;
    }
    write!(
        out,
        " n={} min={:.4} p25={:.4} median={:.4} mean={:.4} p75={:.4} max={:.4} sd={:.4} outliers={}",
        s.n, s.min, s.p25, s.median, s.mean, s.p75, s.max, s.sd, s.outliers
    )?;
    match f.counters {
        Some((i, c)) => write!(out, " instructions={i:.4} cycles={c:.4}")?,
        None => out.write_str(" instructions=n/a cycles=n/a")?,
    }
    if f.cpus != 0 {
        out.write_str(" cpus=")?;
        let mut first = true;
        for c in (0..u32::BITS).filter(|c| f.cpus & (1 << c) != 0) {
            write!(out, "{}{c}", if first { "" } else { "," })?;
            first = false;
        }
    }
    write!(
        out,
        "\n{MARKER}{SCHEMA} {} name={} batch_size={}",
        kind::SAMPLES,
        Escaped(f.name),
        f.batch_size
    )?;
    if let Some(snaps) = f.snaps {
        write!(out, "{snaps}")?;
    }
    out.write_str(" values=")?;
    for (i, v) in f.samples.iter().enumerate() {
        write!(out, "{}{v}", if i == 0 { "" } else { "," })?;
    }
    out.write_str("\n")
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

/// Space, `%`, `=`, control bytes, non-ASCII, and `@` (so no value can
/// hold a marker).
fn needs_escape(b: u8) -> bool {
    b <= b' ' || b == b'%' || b == b'=' || b == b'@' || b >= 0x7f
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
    fn bench_records() {
        let f = Figure {
            name: "ebizzy.128",
            mech: "locks",
            path: "ebizzy",
            call: "128",
            measure: Measure::Throughput,
            unit: "records/s",
            batch_size: 1000,
            samples: &[2_000_000, 4_000_000],
            tsc_hz: 1_000_000_000,
            counters: None,
            cpus: 0b11,
            snaps: None,
        };
        let (mut v, mut s) = ([0.0; 2], [0.0; 2]);
        let sum = f.summarize(&mut v, &mut s);
        assert_eq!((sum.min, sum.max, sum.n), (250_000.0, 500_000.0, 2));
        let mut out = String::new();
        write_bench(&mut out, &f, &sum).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("@@tb1 bench name=ebizzy.128 mech=locks path=ebizzy call=128 measure=throughput unit=records/s n=2 min=250000.0000"), "{}", lines[0]);
        assert!(lines[0].ends_with(" instructions=n/a cycles=n/a cpus=0,1"));
        assert_eq!(
            lines[1],
            "@@tb1 samples name=ebizzy.128 batch_size=1000 values=2000000,4000000"
        );
        let per_op = Figure {
            measure: Measure::PerOp,
            unit: "",
            snaps: Some(crate::model::Snaps {
                stream: crate::model::SNAP_KERNEL,
                calib: 0,
                calib_runs: 0,
                batches: 7,
            }),
            ..f
        };
        assert_eq!(per_op.value(2_000_000), 2000.0);
        let mut out = String::new();
        write_bench(&mut out, &per_op, &sum).unwrap();
        assert_eq!(
            out.lines().nth(1).unwrap(),
            "@@tb1 samples name=ebizzy.128 batch_size=1000 stream=kernel snap_calib=0 calib_runs=0 snap_batches=7 values=2000000,4000000"
        );
        assert_eq!(Measure::from_key("throughput"), Some(Measure::Throughput));
        assert!(Measure::Throughput.higher_is_better() && !Measure::PerOp.higher_is_better());
    }

    #[test]
    fn utf8_check_agrees_with_core() {
        let check = |bytes: &[u8]| {
            let mut u = Utf8::default();
            bytes.iter().for_each(|&b| u.push(b));
            assert_eq!(u.valid(), core::str::from_utf8(bytes).is_ok(), "{bytes:x?}");
        };
        for a in 0..=255u8 {
            check(&[a]);
            for b in 0..=255u8 {
                check(&[a, b]);
            }
        }
        // Three and four bytes: every lead byte, the continuation bytes'
        // edges and a spread between.
        let edges = [0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF];
        for a in 0xC0..=0xFFu8 {
            for b in edges {
                for c in edges {
                    check(&[a, b, c]);
                    for d in edges {
                        check(&[a, b, c, d]);
                    }
                }
            }
        }
    }

    #[test]
    fn user_records_are_checked() {
        let ok = b"bench name=int80.null mech=int80 n=4 median=36.0000";
        assert_eq!(check_user_record(ok), Ok("bench"));
        assert_eq!(check_user_record(b"check"), Ok("check"));
        assert_eq!(check_user_record(b"check detail=a%20b%00"), Ok("check"));
        assert_eq!(
            check_user_record(b"check detail=%C3%A9t%C3%A9"),
            Ok("check")
        );
        for (body, why) in [
            (&b""[..], BadRecord::Length),
            (b"end status=success", BadRecord::Kind),
            (b"test name=x result=pass", BadRecord::Kind),
            (b"@@tb1 bench oops", BadRecord::Byte),
            (b"bench name=a@b", BadRecord::Byte),
            (b"bench name=x\n@@tb1", BadRecord::Byte),
            (b"bench name=x\n", BadRecord::Byte),
            (b"bench oops", BadRecord::Field),
            (b"bench  name=x", BadRecord::Field),
            (b"bench name=x ", BadRecord::Field),
            (b"bench name=", BadRecord::Field),
            (b"bench na-me=x", BadRecord::Field),
            (b"bench a=b=c", BadRecord::Field),
            (b"bench prog=bench", BadRecord::Reserved),
            (b"check detail=%zz", BadRecord::Escape),
            (b"check detail=ab%4", BadRecord::Escape),
            (b"check detail=%", BadRecord::Escape),
            (b"check detail=%FF", BadRecord::Escape),
            (b"check detail=%C3", BadRecord::Escape),
            (b"check detail=%ED%A0%80", BadRecord::Escape),
            (b"clock pid=1", BadRecord::Reserved),
            (b"bench name=x tid=3", BadRecord::Reserved),
        ] {
            assert_eq!(
                check_user_record(body),
                Err(why),
                "{:?}",
                std::str::from_utf8(body)
            );
        }
        let long = [b'x'; MAX_USER_RECORD + 1];
        assert_eq!(check_user_record(&long), Err(BadRecord::Length));
        // What write_bench writes is a valid body once the marker is cut.
        let f = Figure {
            name: "a b@c",
            mech: "m",
            path: "p",
            call: "c",
            measure: Measure::PerOp,
            unit: "",
            batch_size: 4,
            samples: &[1, 2],
            tsc_hz: 1,
            counters: None,
            cpus: 0b11,
            snaps: Some(crate::model::Snaps {
                stream: crate::model::SNAP_USER,
                calib: 2,
                calib_runs: 3,
                batches: 4,
            }),
        };
        let (mut v, mut s) = ([0.0; 2], [0.0; 2]);
        let sum = f.summarize(&mut v, &mut s);
        let mut out = String::new();
        write_bench(&mut out, &f, &sum).unwrap();
        for line in out.lines() {
            let body = line.strip_prefix("@@tb1 ").unwrap();
            assert!(check_user_record(body.as_bytes()).is_ok(), "{body}");
        }
    }

    #[test]
    fn bad_escape_is_an_error() {
        assert!(unescape("abc%4", &mut |_| ()).is_err());
        assert!(unescape("%zz", &mut |_| ()).is_err());
    }
}
