//! `cargo xtask test`: host unit tests, then real boots of the real kernel in
//! QEMU (TCG is enough), each checked against what the kernel printed.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use abi::exit::Outcome;
use abi::report::kind;
use anyhow::{Context, Result};
use clap::Args;

use crate::kbuild::{self, Artifacts};
use crate::qemu::{self, Accel, Boot, BootLog, Ending};
use crate::report::{self, Record};
use crate::results::Results;

/// Path-length targets under icount (loop included), full null round trip.
const PATH_LENGTH_LIMITS: &[(&str, f64)] = &[
    ("int80.null", 40.0),
    ("callgate.null", 40.0),
    ("sysenter.null", 52.0),
];
use crate::{iso, preflight};

#[derive(Args)]
pub struct TestArgs {
    /// Only the host unit tests.
    #[arg(long, conflicts_with = "boots_only")]
    host_only: bool,
    /// Only the QEMU boots.
    #[arg(long)]
    boots_only: bool,
    /// Only boot tests whose name contains this.
    #[arg(long)]
    filter: Option<String>,
}

type Check = fn(&BootLog, &[Record]) -> Result<(), String>;

/// One boot and what it must show.
struct Case {
    name: &'static str,
    cpu: Option<&'static str>,
    cmdline: &'static str,
    /// Boot through a GRUB image whose only entry has this command line.
    grub: bool,
    timeout: u64,
    extra: &'static [&'static str],
    check: Check,
    /// Boot a second time and require identical results (timestamps aside).
    twice: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "SMP under multi-threaded TCG: 4 CPUs in parallel, the same checks",
        cpu: None,
        cmdline: "mode=smp",
        grub: false,
        timeout: 120,
        extra: &["-smp", "4", "-accel", "tcg,thread=multi"],
        check: |log, r| smp_check(log, r, "4"),
        twice: false,
    },
    Case {
        name: "SMP: 2 CPUs started from the MADT; benchmarks; a wake-up and a mutex hand-off across CPUs",
        cpu: None,
        cmdline: "mode=smp",
        grub: false,
        timeout: 120,
        extra: &["-smp", "2"],
        check: |log, r| smp_check(log, r, "2"),
        twice: false,
    },
    Case {
        name: "SMP: 4 CPUs started from the MADT; benchmarks; a wake-up and a mutex hand-off across CPUs",
        cpu: None,
        cmdline: "mode=smp",
        grub: false,
        timeout: 120,
        extra: &["-smp", "4"],
        check: |log, r| smp_check(log, r, "4"),
        twice: false,
    },
    Case {
        name: "pool_align=packed on the command line lays the pools out packed",
        cpu: None,
        cmdline: "mode=run pool_align=packed batches=1 batch_size=16",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            succeeded(log)?;
            let p = one(r, kind::POOL)?;
            match (p.get("align"), p.get("ts_stride"), p.get("ts_per128")) {
                (Some("packed"), Some("24"), Some("6")) => Ok(()),
                other => Err(format!("pool record {other:?}")),
            }
        },
        twice: false,
    },
    Case {
        name: "locks: turnstile/sleepqueue benchmarks for pool alignments 128, 64 and packed in one boot",
        cpu: None,
        cmdline: "mode=run prog=locks",
        grub: false,
        timeout: 120,
        extra: &[],
        check: |log, r| {
            succeeded(log)?;
            let pools: Vec<_> = report::of_kind(r, kind::POOL).collect();
            // The boot's own layout first, then the program's three.
            let per128: Vec<&str> = pools.iter().skip(1).filter_map(|p| p.get("ts_per128")).collect();
            if per128 != ["1", "2", "6"] {
                return Err(format!("turnstiles per 128-byte block {per128:?}, expected 1, 2, 6"));
            }
            let locks: Vec<_> = report::of_kind(r, kind::LOCKS).collect();
            if locks.len() != 3 {
                return Err(format!("{} lock benchmark records, expected 3", locks.len()));
            }
            for l in locks {
                for k in ["uncontended", "contended", "sleep_wakeup", "lookup", "ebizzy_records_per_s"] {
                    let v: f64 = l.get(k).and_then(|v| v.parse().ok()).unwrap_or(0.0);
                    if v <= 0.0 {
                        return Err(format!("{k} is {v} for align {:?}", l.get("align")));
                    }
                }
            }
            contains(log, "TCG does not model caches")
        },
        twice: false,
    },
    Case {
        name: "kernel and user tests on qemu32 (Intel: no AMD syscall)",
        cpu: None,
        cmdline: "mode=test",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            all_tests_pass(log, r, 20)?;
            mech(r, "syscall", "unavailable")?;
            mech(r, "sysenter", "ok")?;
            reason_mentions(r, "syscall", "Intel")
        },
        twice: false,
    },
    Case {
        name: "icount path lengths: full null round trip <= 40 (int 0x80, call gate), <= 52 (sysenter)",
        cpu: None,
        cmdline: "mode=run batches=4 batch_size=256",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            succeeded(log)?;
            let res = Results::from_records(r, "test", "qemu").map_err(|e| e.to_string())?;
            for (name, limit) in PATH_LENGTH_LIMITS {
                let b = res.bench(name).ok_or_else(|| format!("no {name} benchmark"))?;
                // Exact under icount: every batch the same, an integer per call.
                if b.min != b.max || b.median.fract() != 0.0 {
                    return Err(format!("{name} is not exact under icount: {:?}", b.samples));
                }
                if b.median > *limit {
                    return Err(format!("{name} takes {} instructions, the limit is {limit}", b.median));
                }
            }
            Ok(())
        },
        twice: false,
    },
    Case {
        name: "icount: two boots give identical records; samples match the configured batches",
        cpu: None,
        cmdline: "mode=run batches=5 batch_size=64",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            succeeded(log)?;
            let res = Results::from_records(r, "test", "qemu").map_err(|e| e.to_string())?;
            if res.benches.len() < 16 {
                return Err(format!("only {} benchmarks", res.benches.len()));
            }
            for b in &res.benches {
                if b.samples.len() != 5 || b.n != 5 || b.batch_size != 64 {
                    return Err(format!("{}: {} samples of {}", b.name, b.samples.len(), b.batch_size));
                }
            }
            Ok(())
        },
        twice: true,
    },
    Case {
        name: "kernel and user tests on pentium (no SEP: sysenter skipped)",
        cpu: Some("pentium"),
        cmdline: "mode=test",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            all_tests_pass(log, r, 20)?;
            mech(r, "sysenter", "unavailable")?;
            mech(r, "syscall", "unavailable")
        },
        twice: false,
    },
    Case {
        name: "kernel and user tests on phenom (AMD syscall/sysret in 32-bit mode)",
        cpu: Some("phenom"),
        cmdline: "mode=test",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            all_tests_pass(log, r, 20)?;
            mech(r, "syscall", "ok")?;
            let syscall_checks = report::of_kind(r, kind::CHECK)
                .filter(|c| c.get("mech") == Some("syscall") && c.get("result") == Some("pass"))
                .count();
            if syscall_checks < 20 {
                return Err(format!("only {syscall_checks} syscall checks passed"));
            }
            Ok(())
        },
        twice: false,
    },
    Case {
        name: "run: the benchmark table has every mechanism, its floor and the macro mix",
        cpu: None,
        cmdline: "mode=run batches=4 batch_size=256",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            succeeded(log)?;
            for m in ["int 0x80", "sysenter", "call gate"] {
                for call in [" floor ", " null ", " getpid ", " geteuid ", " write1 "] {
                    if !log.serial.lines().any(|l| l.starts_with(m) && l.contains(call)) {
                        return Err(format!("the table has no{call}row for {m}"));
                    }
                }
                if !log.serial.lines().any(|l| l.starts_with("macro mix") && l.contains(m)) {
                    return Err(format!("no macro mix line for {m}"));
                }
            }
            contains(log, "syscall    unavailable on this CPU")?;
            end(r, "success")
        },
        twice: false,
    },
    Case {
        name: "GRUB image: Multiboot 2 and the command line from grub.cfg",
        cpu: None,
        cmdline: "mode=run prog=bench entry=int80,sysenter,callgate,syscall",
        grub: true,
        timeout: 120,
        extra: &[],
        check: |log, r| {
            succeeded(log)?;
            let b = one(r, kind::BOOT)?;
            if b.get("protocol") != Some("mb2") {
                return Err(format!("protocol is {:?}, not mb2", b.get("protocol")));
            }
            let c = b.get("cmdline").unwrap_or("");
            if !c.starts_with("mode=run prog=bench entry=int80,sysenter,callgate,syscall") {
                return Err(format!("command line {c:?} is not grub.cfg's"));
            }
            if !b.get("loader").unwrap_or("").contains("GRUB") {
                return Err(format!("loader is {:?}", b.get("loader")));
            }
            Ok(())
        },
        twice: false,
    },
    Case {
        name: "bad command line: warnings name the valid keys, the boot goes on",
        cpu: None,
        cmdline: "mode=run colour=blue batches=zero",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            succeeded(log)?;
            let warns = report::of_kind(r, kind::WARN).count();
            if warns != 2 {
                return Err(format!("{warns} warnings, expected 2"));
            }
            contains(log, "valid keys: mode prog")?;
            contains(log, "batches=zero is not valid")
        },
        twice: false,
    },
    Case {
        name: "missing program: a clear message and a failure status",
        cpu: None,
        cmdline: "mode=run prog=nosuch",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, _| {
            outcome(log, Outcome::Failure)?;
            contains(
                log,
                "no program 'nosuch' among the boot modules: bench utest faults",
            )
        },
        twice: false,
    },
    Case {
        name: "kernel stack overflow is reported by the #DF task",
        cpu: None,
        cmdline: "crash=overflow",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            outcome(log, Outcome::Exception(8))?;
            contains(log, "#DF double fault")?;
            contains(log, "kernel stack overflow")?;
            exception(r, 8, "kernel")
        },
        twice: false,
    },
    Case {
        name: "kernel #BP is reported",
        cpu: None,
        cmdline: "crash=bp",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| kernel_exception(log, r, 3),
        twice: false,
    },
    Case {
        name: "kernel #UD is reported",
        cpu: None,
        cmdline: "crash=ud",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| kernel_exception(log, r, 6),
        twice: false,
    },
    Case {
        name: "kernel #DE is reported",
        cpu: None,
        cmdline: "crash=de",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| kernel_exception(log, r, 0),
        twice: false,
    },
    Case {
        name: "kernel #PF is reported with CR2",
        cpu: None,
        cmdline: "crash=pf",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            kernel_exception(log, r, 14)?;
            let e = one(r, kind::EXCEPTION)?;
            match e.get("cr2") {
                Some("0xc0000000") => Ok(()),
                other => Err(format!("CR2 is {other:?}, expected 0xc0000000")),
            }
        },
        twice: false,
    },
    Case {
        name: "kernel panic prints its location and message",
        cpu: None,
        cmdline: "crash=panic",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, _| {
            outcome(log, Outcome::Panic)?;
            contains(log, "kernel panic at kernel/src/main.rs")?;
            contains(log, "deliberate panic")
        },
        twice: false,
    },
    Case {
        name: "a triple fault is told apart from a verdict",
        cpu: None,
        cmdline: "crash=triple",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, _| {
            outcome(log, Outcome::ResetOrTripleFault)?;
            if !log.verdict().contains("triple fault") {
                return Err(log.verdict());
            }
            Ok(())
        },
        twice: false,
    },
    Case {
        name: "a hung guest is killed at the timeout",
        cpu: None,
        cmdline: "mode=run",
        grub: false,
        timeout: 2,
        // -S: the CPU never starts, the surest hang there is.
        extra: &["-S"],
        check: |log, _| match log.ending {
            Ending::TimedOut(_) if log.verdict().contains("hung") => Ok(()),
            _ => Err(format!("not a timeout: {}", log.verdict())),
        },
        twice: false,
    },
    // The CPU matrix: test mode on every i386 model QEMU has (qemu32,
    // pentium and phenom are the test boots above). Correct means the
    // features detected, unavailable mechanisms skipped with a reason, the
    // hostile suite all as expected, no crash. The fuzzer boots follow.
    Case {
        name: "cpu matrix: 486 (no TSC, no SEP): tests and the hostile suite",
        cpu: Some("486"),
        cmdline: "mode=test",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            matrix(log, r, "GenuineIntel", "4", ["ok", "unavailable", "ok", "unavailable"])?;
            match one(r, kind::CPU)?.get("tsc") {
                Some("false") => Ok(()),
                other => Err(format!("the 486 model reports tsc={other:?}")),
            }
        },
        twice: false,
    },
    Case {
        name: "cpu matrix: 486 runs the benchmark program, which says it cannot time",
        cpu: Some("486"),
        cmdline: "mode=run prog=bench",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| {
            succeeded(log)?;
            contains(log, "no TSC")?;
            end(r, "success")
        },
        twice: false,
    },
    Case {
        name: "cpu matrix: pentium2 (SEP): tests and the hostile suite",
        cpu: Some("pentium2"),
        cmdline: "mode=test",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| matrix(log, r, "GenuineIntel", "6", ["ok", "ok", "ok", "unavailable"]),
        twice: false,
    },
    Case {
        name: "cpu matrix: pentium3: tests and the hostile suite",
        cpu: Some("pentium3"),
        cmdline: "mode=test",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| matrix(log, r, "GenuineIntel", "6", ["ok", "ok", "ok", "unavailable"]),
        twice: false,
    },
    Case {
        name: "cpu matrix: coreduo: tests and the hostile suite",
        cpu: Some("coreduo"),
        cmdline: "mode=test",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| matrix(log, r, "GenuineIntel", "6", ["ok", "ok", "ok", "unavailable"]),
        twice: false,
    },
    Case {
        name: "cpu matrix: core2duo: tests and the hostile suite",
        cpu: Some("core2duo"),
        cmdline: "mode=test",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| matrix(log, r, "GenuineIntel", "6", ["ok", "ok", "ok", "unavailable"]),
        twice: false,
    },
    Case {
        name: "fuzzer: 50,000 seeded calls (seed=7), every result right, 0 kernel faults",
        cpu: None,
        cmdline: "mode=run prog=fuzz fuzz_calls=50000 seed=7",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| fuzz_clean(log, r, 50_000, &["int80", "sysenter", "callgate"]),
        twice: false,
    },
    Case {
        name: "fuzzer on 486: 20,000 calls through int 0x80 and the call gate",
        cpu: Some("486"),
        cmdline: "mode=run prog=fuzz fuzz_calls=20000 seed=9",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| fuzz_clean(log, r, 20_000, &["int80", "callgate"]),
        twice: false,
    },
    Case {
        name: "fuzzer on phenom: 20,000 calls, AMD syscall among the mechanisms",
        cpu: Some("phenom"),
        cmdline: "mode=run prog=fuzz fuzz_calls=20000 seed=8",
        grub: false,
        timeout: 60,
        extra: &[],
        check: |log, r| fuzz_clean(log, r, 20_000, &["int80", "sysenter", "callgate", "syscall"]),
        twice: false,
    },
];

/// An SMP boot: `n` CPUs from the MADT, every figure, the forktest samples.
fn smp_check(log: &BootLog, r: &[Record], n: &str) -> Result<(), String> {
    succeeded(log)?;
    let s = one(r, kind::SMP)?;
    if s.get("cpus") != Some(n) || s.get("source") != Some("acpi-madt") {
        return Err(format!("smp record {:?}", s.fields));
    }
    let names: Vec<&str> = report::of_kind(r, kind::SMP_BENCH)
        .filter_map(|b| b.get("name"))
        .collect();
    for want in [
        "false sharing, pool 128",
        "ping-pong round trip",
        "shootdown by IPI (remote, acked)",
        "forktest, switch CR3 to edit",
    ] {
        if !names.contains(&want) {
            return Err(format!("no {want:?} figure"));
        }
    }
    let cross: Vec<_> = report::of_kind(r, kind::TEST).collect();
    if cross.len() != 2 || cross.iter().any(|t| t.get("result") != Some("pass")) {
        return Err(format!(
            "threads across CPUs: {:?}",
            cross
                .iter()
                .map(|t| (t.get("name"), t.get("result")))
                .collect::<Vec<_>>()
        ));
    }
    let res = Results::from_records(r, "smp", "qemu").map_err(|e| e.to_string())?;
    for b in ["forktest.window", "forktest.cr3"] {
        if res.bench(b).is_none_or(|x| x.samples.len() != 32) {
            return Err(format!("{b}: no benchmark with 32 samples"));
        }
    }
    contains(log, "TCG does not model caches")
}

fn succeeded(log: &BootLog) -> Result<(), String> {
    outcome(log, Outcome::Success)
}

fn outcome(log: &BootLog, want: Outcome) -> Result<(), String> {
    if log.ending == Ending::Exited(want) {
        Ok(())
    } else {
        Err(format!("expected {want:?}; {}", log.verdict()))
    }
}

fn contains(log: &BootLog, text: &str) -> Result<(), String> {
    if log.serial.contains(text) {
        Ok(())
    } else {
        Err(format!("the serial log does not say {text:?}"))
    }
}

fn one<'a>(r: &'a [Record], k: &'a str) -> Result<&'a Record, String> {
    report::of_kind(r, k)
        .next()
        .ok_or_else(|| format!("no {k} record"))
}

fn end(r: &[Record], status: &str) -> Result<(), String> {
    match one(r, kind::END)?.get("status") {
        Some(s) if s == status => Ok(()),
        other => Err(format!("end status {other:?}, expected {status}")),
    }
}

fn mech(r: &[Record], name: &str, status: &str) -> Result<(), String> {
    let m = report::of_kind(r, kind::MECH)
        .find(|m| m.get("name") == Some(name))
        .ok_or_else(|| format!("no mech record for {name}"))?;
    match m.get("status") {
        Some(s) if s == status => Ok(()),
        other => Err(format!("{name} is {other:?}, expected {status}")),
    }
}

fn reason_mentions(r: &[Record], name: &str, word: &str) -> Result<(), String> {
    let m = report::of_kind(r, kind::MECH).find(|m| m.get("name") == Some(name));
    match m.and_then(|m| m.get("reason")) {
        Some(why) if why.contains(word) => Ok(()),
        other => Err(format!("{name}'s reason {other:?} does not mention {word}")),
    }
}

fn exception(r: &[Record], vector: u8, mode: &str) -> Result<(), String> {
    let e = one(r, kind::EXCEPTION)?;
    let v = vector.to_string();
    if e.get("vector") == Some(v.as_str()) && e.get("mode") == Some(mode) {
        for k in [
            "eip", "cs", "eflags", "eax", "ebx", "ecx", "edx", "esi", "edi", "ebp", "esp", "cr2",
        ] {
            if e.get(k).is_none() {
                return Err(format!("the exception record lacks {k}"));
            }
        }
        Ok(())
    } else {
        Err(format!("exception record {:?}", e.fields))
    }
}

fn kernel_exception(log: &BootLog, r: &[Record], vector: u8) -> Result<(), String> {
    outcome(log, Outcome::Exception(vector))?;
    contains(log, abi::exit::vector_name(vector))?;
    exception(r, vector, "kernel")
}

fn all_tests_pass(log: &BootLog, r: &[Record], at_least: usize) -> Result<(), String> {
    let failed: Vec<_> = report::of_kind(r, kind::TEST)
        .filter(|t| !matches!(t.get("result"), Some("pass") | Some("skip")))
        .map(|t| {
            format!(
                "{} ({})",
                t.get("name").unwrap_or("?"),
                t.get("detail").unwrap_or("")
            )
        })
        .collect();
    if !failed.is_empty() {
        return Err(format!("kernel tests failed: {}", failed.join("; ")));
    }
    let checks_failed: Vec<_> = report::of_kind(r, kind::CHECK)
        .filter(|c| c.get("result") == Some("fail"))
        .map(|c| {
            format!(
                "{}: {}",
                c.get("mech").unwrap_or("?"),
                c.get("name").unwrap_or("?")
            )
        })
        .collect();
    if !checks_failed.is_empty() {
        return Err(format!("user checks failed: {}", checks_failed.join("; ")));
    }
    let passed = report::of_kind(r, kind::TEST).count();
    if passed < at_least {
        return Err(format!(
            "only {passed} tests ran, expected at least {at_least}"
        ));
    }
    succeeded(log)?;
    end(r, "success")
}

/// A CPU-matrix boot in test mode: every test passed, the CPU record has
/// this vendor and family, the mechanisms (int80, sysenter, callgate,
/// syscall) have these statuses and each unavailable one a reason, and the
/// hostile suite ran whole and all as expected.
fn matrix(
    log: &BootLog,
    r: &[Record],
    vendor: &str,
    family: &str,
    mechs: [&str; 4],
) -> Result<(), String> {
    all_tests_pass(log, r, abi::cases::FAULT_CASES.len())?;
    let c = one(r, kind::CPU)?;
    if c.get("vendor") != Some(vendor) || c.get("family") != Some(family) {
        return Err(format!(
            "cpu record {:?} family {:?}, expected {vendor} family {family}",
            c.get("vendor"),
            c.get("family")
        ));
    }
    for (m, status) in abi::Mechanism::ALL.iter().zip(mechs) {
        mech(r, m.key(), status)?;
    }
    for m in report::of_kind(r, kind::MECH) {
        if m.get("status") == Some("unavailable") && m.get("reason").unwrap_or("").is_empty() {
            return Err(format!(
                "{:?} is unavailable without a reason",
                m.get("name")
            ));
        }
    }
    hostile_all_expected(log, r)
}

/// The hostile suite's summary: every case of the table ran, all as expected.
fn hostile_all_expected(log: &BootLog, r: &[Record]) -> Result<(), String> {
    let h = one(r, kind::HOSTILE)?;
    let n = abi::cases::FAULT_CASES.len().to_string();
    if h.get("cases") != Some(n.as_str()) || h.get("expected") != Some(n.as_str()) {
        return Err(format!(
            "hostile suite: {:?}, expected {n} of {n}",
            h.fields
        ));
    }
    contains(log, &format!("hostile: {n} cases, {n} as expected"))
}

/// A fuzzer boot: success, the fuzz record says `calls` calls, no
/// failure, and each of `mechs` was used.
fn fuzz_clean(log: &BootLog, r: &[Record], calls: u32, mechs: &[&str]) -> Result<(), String> {
    succeeded(log)?;
    let f = one(r, kind::FUZZ)?;
    let calls = calls.to_string();
    if f.get("calls") != Some(calls.as_str()) || f.get("failures") != Some("0") {
        return Err(format!("fuzz record {:?}", f.fields));
    }
    for m in mechs {
        if f.get(m).unwrap_or("0") == "0" {
            return Err(format!("the fuzzer never used {m}: {:?}", f.fields));
        }
    }
    if f.get("flagged").unwrap_or("0") == "0" {
        return Err("no call entered with DF, AC or NT set".into());
    }
    end(r, "success")
}

fn boot_case(c: &Case, art: &Artifacts, dir: &Path) -> Result<BootLog> {
    // Multi-threaded TCG (CPUs in parallel host threads) cannot take
    // -icount: such a case runs on the TSC clock.
    let mttcg = c.extra.iter().any(|e| e.contains("thread=multi"));
    let clock = if mttcg { "tsc" } else { "icount" };
    let cmdline = format!("{} clock={clock} accel=tcg", c.cmdline);
    let mut boot = Boot {
        kernel: art.kernel.clone(),
        modules: art.programs.clone(),
        cmdline: cmdline.clone(),
        cdrom: None,
        cpu: c.cpu.map(str::to_string),
        smp: 1,
        accel: Accel::Tcg,
        icount: !mttcg,
        memory_mib: 128,
        timeout: Duration::from_secs(c.timeout),
        extra: c.extra.iter().map(|s| s.to_string()).collect(),
    };
    if c.grub {
        let entry = iso::Entry {
            title: "i386 testbed (test)".into(),
            cmdline: c.cmdline.to_string(),
            multiboot2: true,
        };
        boot.cdrom = Some(iso::build(art, &[entry], 0, &dir.join("test.iso"))?);
    }
    qemu::run(&boot, &mut |_| {})
}

/// `cargo xtask bench` end to end, small: two variants by command line, two
/// boots each, and the three exports.
fn bench_smoke(root: &Path) -> Result<()> {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        b: crate::compare::BenchArgs,
    }
    let out = root.join("target/xtask/bench-test");
    let _ = std::fs::remove_dir_all(&out);
    let cli = Cli::try_parse_from([
        "bench",
        "-n",
        "2",
        "--accel",
        "tcg",
        "--clock",
        "icount",
        "--variant",
        "a=entry=int80",
        "--variant",
        "b=entry=sysenter",
        "--append",
        "batches=3 batch_size=64",
        "--out",
        out.to_str().context("path")?,
        "--save-baseline",
        "smoke",
    ])?;
    crate::compare::bench(cli.b)?;
    let mut found = 0;
    for e in std::fs::read_dir(&out)? {
        let p = e?.path();
        match p.extension().and_then(|x| x.to_str()) {
            Some("md") => {
                let md = std::fs::read_to_string(&p)?;
                anyhow::ensure!(
                    md.contains("| null | 24 | 46 |"),
                    "unexpected Markdown:\n{md}"
                );
                found += 1;
            }
            Some("json") | Some("csv") => found += 1,
            _ => {}
        }
    }
    anyhow::ensure!(
        found == 3,
        "expected JSON, CSV and Markdown exports, found {found} files"
    );
    anyhow::ensure!(
        out.join("baselines/smoke.json").is_file(),
        "the baseline was not saved"
    );
    Ok(())
}

pub fn run(a: TestArgs) -> Result<i32> {
    let root = kbuild::root();
    let mut passed = 0;
    let mut failed = 0;
    if !a.boots_only {
        println!("== host unit tests (cargo test -p abi -p xtask)");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(cargo)
            .args(["test", "-p", "abi", "-p", "xtask"])
            .current_dir(&root)
            .status()?
            .success();
        if ok {
            passed += 1;
        } else {
            failed += 1;
            println!("FAIL host unit tests");
        }
    }
    if !a.host_only {
        preflight::ensure_tools()?;
        println!("== building the kernel and the user programs");
        let art = kbuild::build(true)?;
        let dir = root.join("target/xtask");
        std::fs::create_dir_all(&dir)?;
        println!("== boots under QEMU TCG (clock=icount)");
        for c in CASES {
            if a.filter.as_deref().is_some_and(|f| !c.name.contains(f)) {
                continue;
            }
            let t = Instant::now();
            let result = boot_case(c, &art, &dir)
                .map_err(|e| format!("{e:#}"))
                .and_then(|log| {
                    let records = report::parse_log(&log.serial).map_err(|e| e.to_string())?;
                    (c.check)(&log, &records).map_err(|e| format!("{e}\n{}", log.explain(20)))?;
                    if c.twice {
                        let again = boot_case(c, &art, &dir).map_err(|e| format!("{e:#}"))?;
                        let first = Results::from_log(&log.serial, "a", "qemu")
                            .map_err(|e| e.to_string())?;
                        let second = Results::from_log(&again.serial, "a", "qemu")
                            .map_err(|e| e.to_string())?;
                        if first.without_timestamp() != second.without_timestamp() {
                            return Err("the second boot's results differ from the first".into());
                        }
                    }
                    Ok(())
                });
            match result {
                Ok(()) => {
                    passed += 1;
                    println!("PASS {} ({:.1} s)", c.name, t.elapsed().as_secs_f64());
                }
                Err(e) => {
                    failed += 1;
                    println!("FAIL {}: {e}", c.name);
                }
            }
        }
        println!("== boots under the model clock (QEMU TCG, icount, the model plugin)");
        for (name, r) in crate::modeltest::self_tests(&art, &dir, a.filter.as_deref()) {
            match r {
                Ok(()) => {
                    passed += 1;
                    println!("PASS {name}");
                }
                Err(e) => {
                    failed += 1;
                    println!("FAIL {name}: {e}");
                }
            }
        }
    }
    if !a.host_only && a.filter.as_deref().is_none_or(|f| "bench".contains(f)) {
        let t = Instant::now();
        match bench_smoke(&root) {
            Ok(()) => {
                passed += 1;
                println!(
                    "PASS bench: two variants interleaved, compared and exported ({:.1} s)",
                    t.elapsed().as_secs_f64()
                );
            }
            Err(e) => {
                failed += 1;
                println!("FAIL bench: {e:#}");
            }
        }
    }
    if !a.host_only && a.filter.as_deref().is_none_or(|f| "docs".contains(f)) {
        // The outputs docs/*.md show must still be what the commands print.
        let t = Instant::now();
        match crate::teach::docs_stale(true) {
            Ok(stale) if stale.is_empty() => {
                passed += 1;
                println!(
                    "PASS docs: every output block matches the code ({:.1} s)",
                    t.elapsed().as_secs_f64()
                );
            }
            Ok(stale) => {
                failed += 1;
                println!(
                    "FAIL docs: stale output blocks (run `cargo xtask docs`):\n  {}",
                    stale.join("\n  ")
                );
            }
            Err(e) => {
                failed += 1;
                println!("FAIL docs: {e:#}");
            }
        }
    }
    if !a.host_only {
        for (name, r) in crate::teach::self_tests(a.filter.as_deref()) {
            match r {
                Ok(()) => {
                    passed += 1;
                    println!("PASS {name}");
                }
                Err(e) => {
                    failed += 1;
                    println!("FAIL {name}: {e}");
                }
            }
        }
    }
    println!("testbed: {passed} passed, {failed} failed");
    Ok(if failed == 0 { 0 } else { 1 })
}
