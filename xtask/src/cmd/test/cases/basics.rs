//! One CPU under QEMU: the kernel and user tests, the records, the path
//! lengths and the benchmark table, the GRUB image, the command line.

use abi::exit::Outcome;
use abi::report::kind;

use crate::machine::qemu::Threads;
use crate::machine::BootLog;
use crate::report::{self, Record};
use crate::results::Results;

use super::case::{Case, CASE};
use super::checks::{
    all_tests_pass, check_passed, contains, end, mech, one, outcome, succeeded, test_is,
    test_passed,
};

/// The `locks` program's checks docs/threads.md names, each of which the
/// one-CPU test boot must see pass.
const LOCKS_CHECKS_THE_BOOK_NAMES: &[&str] = &[
    "a low-priority owner inherits its waiter's priority",
    "the owner gives the priority back when it unlocks",
    "turnstile hands the mutex to the most urgent waiter first",
    "sleepqueue wakes in the order of sleeping",
    "stress: 4 threads x 300 locked increments, none lost",
    "thread pool exhaustion gives EAGAIN, not a panic",
    "locking a mutex it owns gives EDEADLK",
    "unlocking a mutex it does not own gives EPERM",
];

/// On one CPU the tests across CPUs are skipped, each with its record: the
/// kernel's task ending everywhere and the `locks` checks across CPUs.
fn skipped_alone(r: &[Record]) -> Result<(), String> {
    use abi::syscall::locks_arg::ACROSS_SKIPPED;
    test_is(r, "smp: a task ends everywhere", "skip")?;
    let across: Vec<(&str, &str)> = report::of_kind(r, kind::CHECK)
        .filter(|c| c.get("mech") == Some("locks"))
        .filter_map(|c| Some((c.get("name")?, c.get("result")?)))
        .filter(|(n, _)| n.starts_with("across CPUs"))
        .collect();
    let want: Vec<(&str, &str)> = ACROSS_SKIPPED.iter().map(|&n| (n, "skip")).collect();
    if across != want {
        return Err(format!(
            "the locks checks across CPUs on one CPU: {across:?}, expected each skipped"
        ));
    }
    Ok(())
}

/// Path-length targets under icount (loop included), full null round trip.
pub(crate) const PATH_LENGTH_LIMITS: &[(&str, f64)] = &[
    ("int80.null", 40.0),
    ("callgate.null", 40.0),
    ("sysenter.null", 52.0),
];

/// One CPU under QEMU: the tests on each model, the records, path lengths
/// and the benchmark table, the GRUB image and the command line.
pub(super) const BASICS: &[Case] = &[
    Case {
        name: "forged records: a user program's console lines are never records, its record calls come tagged, its clock record cannot relabel the boot",
        cmdline: "mode=run prog=rogue",
        check: |log, r| {
            succeeded(log)?;
            end(r, "success")?;
            // Each forged line is on the console, escaped, and none is a record.
            contains(log, "%40%40tb1 bench oops")?;
            contains(log, "%40%40tb1 bench name=split")?;
            // No console line became a record: no bench or samples at all,
            // and no clock record without the kernel's tag.
            let untagged = |k| report::of_kind(r, k).filter(|x: &&Record| x.get(abi::report::KEY_PROG).is_none()).count();
            if [kind::CLOCK, kind::BENCH, kind::SAMPLES].iter().any(|k| untagged(k) > 0)
                || report::of_kind(r, kind::BENCH).next().is_some()
            {
                return Err("a forged record was taken".into());
            }
            // The program's own clock record (the record call, tagged)
            // says clock=tsc on this icount boot: the host decides the
            // clock, so the report is refused, naming the record.
            match Results::from_records(r, "test", "qemu") {
                Ok(_) => return Err("a program's clock=tsc record relabelled an icount boot".into()),
                Err(e) if e.to_string().contains("program rogue's clock record says clock=tsc, but the host booted clock=icount") => {}
                Err(e) => return Err(format!("refused, but not for the clock record: {e}")),
            }
            if report::of_kind(r, kind::END).count() != 1 {
                return Err("a forged end record was taken".into());
            }
            // The one record the program made through the record call, tagged.
            let c = one(r, kind::CHECK)?;
            match (c.get(abi::report::KEY_PROG), c.get("result")) {
                (Some("rogue"), Some("pass")) => Ok(()),
                other => Err(format!("check record {other:?}")),
            }
        },
        ..CASE
    },
    Case {
        name: "kernel and user tests on qemu32 (Intel: no AMD syscall), the tests across CPUs skipped on its one",
        cmdline: "mode=test",
        check: |log, r| {
            all_tests_pass(log, r, 20)?;
            // What docs/threads.md says the `locks` program's tests hold.
            for name in LOCKS_CHECKS_THE_BOOK_NAMES {
                check_passed(r, "locks", name)?;
            }
            // And the kernel tests hazards.md and hostile.md name.
            for name in [
                "kernel: pools keep 128-byte objects apart",
                "kernel: user-pointer checks refuse bad ranges",
                "kernel: a trap held off by MOV SS onto any exception stub is resumed",
            ] {
                test_passed(r, name)?;
            }
            skipped_alone(r)?;
            mech(r, "syscall", "unavailable")?;
            mech(r, "sysenter", "ok")?;
            reason_mentions(r, "syscall", "Intel")?;
            // TCG has no PMU: the counters are n/a, and the boot says why.
            perf(r, &[("n/a", "CPUID leaf 0xA reports no architectural performance monitoring")])
        },
        ..CASE
    },
    Case {
        name: "icount path lengths: full null round trip <= 40 (int 0x80, call gate), <= 52 (sysenter)",
        cmdline: "mode=run batches=4 batch_size=256",
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
        ..CASE
    },
    Case {
        name: "icount: two boots give identical records; samples match the configured batches",
        cmdline: "mode=run batches=5 batch_size=64",
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
        ..CASE
    },
    Case {
        name: "kernel and user tests on pentium (no SEP: sysenter skipped) under pmap=apte fork=cow",
        cpu: Some("pentium"),
        cmdline: "mode=test pmap=apte fork=cow",
        check: |log, r| {
            all_tests_pass(log, r, 20)?;
            mech(r, "sysenter", "unavailable")?;
            mech(r, "syscall", "unavailable")
        },
        ..CASE
    },
    Case {
        name: "kernel and user tests on phenom (AMD syscall/sysret in 32-bit mode) under pmap=cr3 fork=copy",
        cpu: Some("phenom"),
        cmdline: "mode=test pmap=cr3 fork=copy",
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
        ..CASE
    },
    Case {
        name: "run: the benchmark table has every mechanism, its floor and the macro mix",
        cmdline: "mode=run batches=4 batch_size=256",
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
            // Each column names its unit; "vs int 0x80" is a time ratio in
            // the table and in the macro lines alike.
            contains(log, "insns      insns  time ratio   time ratio")?;
            if !log.serial.lines().filter(|l| l.starts_with("macro mix")).all(|l| l.ends_with(" vs int 0x80")) {
                return Err("a macro mix line without its time ratio to int 0x80".into());
            }
            end(r, "success")
        },
        ..CASE
    },
    Case {
        name: "run with the TSC under TCG: every figure says TCG ticks, none says cycles",
        cmdline: "mode=run batches=2 batch_size=16",
        // Multi-threaded TCG cannot count instructions: the TSC runs.
        threads: Threads::Multi,
        check: |log, r| {
            succeeded(log)?;
            for want in ["TCG ticks per iteration", "TCG ticks/op", "TCG ticks  time ratio"] {
                contains(log, want)?;
            }
            if let Some(l) = log.serial.lines().find(|l| l.contains("cycles per") || l.contains("cycles/op")) {
                return Err(format!("a TCG figure called cycles: {l:?}"));
            }
            end(r, "success")
        },
        ..CASE
    },
    Case {
        name: "perf counters: pmc=pretend makes ring-3 RDPMC fault; counters go off, the run goes on",
        cmdline: "mode=run pmc=pretend batches=4 batch_size=256",
        check: |log, r| {
            succeeded(log)?;
            perf(r, &[("on", "pmc=pretend"), ("off", "RDPMC (ECX 0x40000000) raised #GP in ring 3")])?;
            contains(log, "the run goes on without them")?;
            let res = Results::from_records(r, "test", "qemu").map_err(|e| e.to_string())?;
            bench_figures_without_counters(&res)?;
            end(r, "success")
        },
        ..CASE
    },
    Case {
        name: "GRUB image: Multiboot 2 and the command line from grub.cfg",
        cmdline: "mode=run prog=bench entry=int80,sysenter,callgate,syscall",
        grub: true,
        timeout: 120,
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
        ..CASE
    },
    Case {
        name: "bad command line: warnings name the valid keys, the boot goes on",
        cmdline: "mode=run colour=blue batches=zero",
        check: |log, r| {
            succeeded(log)?;
            let warns = report::of_kind(r, kind::WARN).count();
            if warns != 2 {
                return Err(format!("{warns} warnings, expected 2"));
            }
            contains(log, "valid keys: mode prog")?;
            contains(log, "batches=zero is not valid")
        },
        ..CASE
    },
    Case {
        name: "missing program: a clear message and a failure status",
        cmdline: "mode=run prog=nosuch",
        check: |log, _| {
            outcome(log, Outcome::Failure)?;
            contains(
                log,
                "no program 'nosuch' among the boot modules: bench utest faults",
            )
        },
        ..CASE
    },
];

fn reason_mentions(r: &[Record], name: &str, word: &str) -> Result<(), String> {
    let m = report::of_kind(r, kind::MECH).find(|m| m.get("name") == Some(name));
    match m.and_then(|m| m.get("reason")) {
        Some(why) if why.contains(word) => Ok(()),
        other => Err(format!("{name}'s reason {other:?} does not mention {word}")),
    }
}

/// The boot's `perf` records, in order: each one's status, and a text its
/// reason starts with.
fn perf(r: &[Record], want: &[(&str, &str)]) -> Result<(), String> {
    let got: Vec<_> = report::of_kind(r, kind::PERF)
        .map(|p| (p.get("status").unwrap_or(""), p.get("reason").unwrap_or("")))
        .collect();
    let matches = got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|((s, why), (ws, wwhy))| s == ws && why.starts_with(wwhy));
    if matches {
        Ok(())
    } else {
        Err(format!("perf records {got:?}, expected {want:?}"))
    }
}

/// Every figure of the `bench` program is there (each mechanism's five
/// calls, where usable, and the loop), none with counter figures.
fn bench_figures_without_counters(res: &Results) -> Result<(), String> {
    bench_figures(res, false)
}

/// Every figure of the `bench` program is there (each mechanism's five
/// calls, where usable, and the loop), and each has counter figures if
/// `counters`, none otherwise.
fn bench_figures(res: &Results, counters: bool) -> Result<(), String> {
    let floors = res.benches.iter().filter(|b| b.path == "floor").count();
    let full = res.benches.iter().filter(|b| b.path == "full").count();
    if floors == 0 || full != 4 * floors || res.bench("loop").is_none() {
        return Err(format!(
            "{floors} floors, {full} full paths and loop {:?}",
            res.bench("loop").map(|b| &b.name)
        ));
    }
    let has = |b: &crate::results::Bench| b.instructions.is_some() && b.cycles.is_some();
    match res.benches.iter().find(|b| has(b) != counters) {
        Some(b) if counters => Err(format!(
            "{} has no counter figures although the counters are on",
            b.name
        )),
        Some(b) => Err(format!(
            "{} has counter figures although the counters are off",
            b.name
        )),
        None => Ok(()),
    }
}

/// A `bench` run on a CPU whose CPUID offers architectural counters: the
/// run succeeds with every figure; the boot's one `perf` record says `on`
/// (and every figure has counter figures) or `n/a` with a reason from the
/// check in ring 0 (not from CPUID, which offered them); no ring-3 fault
/// turned them off.
pub(super) fn bench_with_counters_or_reason(log: &BootLog, r: &[Record]) -> Result<(), String> {
    succeeded(log)?;
    let offered = one(r, kind::CPU)?
        .get("perfmon")
        .and_then(|v| v.parse::<u8>().ok());
    if offered.is_none_or(|v| v < 2) {
        return Err(format!(
            "CPUID leaf 0xA version {offered:?}: this case needs a CPU that offers fixed counters"
        ));
    }
    let res = Results::from_records(r, "test", log.backend).map_err(|e| e.to_string())?;
    let perf: Vec<_> = res
        .perf
        .iter()
        .map(|p| (p.status.as_str(), p.reason.as_str()))
        .collect();
    match perf.as_slice() {
        [("on", "")] => bench_figures(&res, true)?,
        [("n/a", why)]
            if ["RDPMC", "WRMSR", "fixed counter"]
                .iter()
                .any(|w| why.starts_with(w)) =>
        {
            contains(log, &format!("perf counters n/a: {why}"))?;
            bench_figures(&res, false)?;
        }
        other => {
            return Err(format!(
                "perf records {other:?}: expected on, or n/a from the ring-0 check"
            ))
        }
    }
    end(r, "success")
}
