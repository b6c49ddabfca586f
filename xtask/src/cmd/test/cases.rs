//! The boots of `cargo xtask test`: each a machine (typed settings, no
//! emulator arguments), a command line, and what the kernel must print.

use std::time::Duration;

use abi::exit::Outcome;
use abi::report::{kind, Measure};

use crate::cmd::Emulator;
use crate::machine::qemu::{self, Threads};
use crate::machine::{self, bochs, AccelChoice, BootLog, Ending};
use crate::report::{self, Record};
use crate::results::Results;

/// Path-length targets under icount (loop included), full null round trip.
const PATH_LENGTH_LIMITS: &[(&str, f64)] = &[
    ("int80.null", 40.0),
    ("callgate.null", 40.0),
    ("sysenter.null", 52.0),
];

pub type Check = fn(&BootLog, &[Record]) -> Result<(), String>;

/// One boot and what it must show. A QEMU case boots under TCG with the
/// backend's default clock: icount, or the TSC when the CPUs run in
/// parallel (`threads: Threads::Multi`), which -icount cannot. A Bochs
/// case boots the GRUB image with the TSC (1 tick = 1 instruction).
pub struct Case {
    pub name: &'static str,
    /// The machine: QEMU or Bochs.
    pub emulator: Emulator,
    /// The kernel command line (`clock=` and `accel=` are added).
    pub cmdline: &'static str,
    /// CPU model (QEMU's or Bochs's names); `None`: the backend's default.
    pub cpu: Option<&'static str>,
    /// Number of CPUs.
    pub cpus: u32,
    /// How TCG runs the CPUs (QEMU only).
    pub threads: Threads,
    /// Start with the CPUs stopped: the surest hang there is (QEMU only).
    pub paused: bool,
    /// Boot through a GRUB image whose only entry has this command line.
    pub grub: bool,
    /// Seconds before the guest is called hung.
    pub timeout: u64,
    pub check: Check,
    /// Boot a second time and require identical results (timestamps aside).
    pub twice: bool,
    /// Boot this many times, each boot checked (races that show once in a
    /// while); `cargo xtask test --repeat-boots N` sets it for every case
    /// that repeats.
    pub repeat: u32,
}

/// What a case is unless it says otherwise: one CPU of the default model,
/// booted directly, 60 s.
const CASE: Case = Case {
    name: "",
    emulator: Emulator::Qemu,
    cmdline: "",
    cpu: None,
    cpus: 1,
    threads: Threads::Single,
    paused: false,
    grub: false,
    timeout: 60,
    check: |_, _| Err("the case has no check".into()),
    twice: false,
    repeat: 1,
};

/// How often the multi-threaded TCG boot of the cross-CPU tests repeats in
/// `cargo xtask test`: what fits the CI's time; `--repeat-boots 20` runs
/// the twenty.
pub const REPEATED_BOOTS: u32 = 5;

impl Case {
    /// The machine this case asks for.
    pub fn spec(&self) -> machine::Spec {
        let backend = match self.emulator {
            Emulator::Qemu => machine::BackendSpec::Qemu(qemu::Spec {
                accel: AccelChoice::Tcg,
                threads: self.threads,
                paused: self.paused,
            }),
            Emulator::Bochs => machine::BackendSpec::Bochs(bochs::Spec::default()),
        };
        machine::Spec {
            cpu: self.cpu.map(str::to_string),
            cpus: self.cpus,
            grub: self.grub,
            ..machine::Spec::new(backend, Duration::from_secs(self.timeout))
        }
    }
}

pub const CASES: &[Case] = &[
    Case {
        name: "SMP user threads under multi-threaded TCG, repeated: 4 CPUs in parallel, the cross-CPU lock tests and task ends, nothing lost, no hang",
        // Only the tests with threads in their names: the locks tests
        // (across CPUs too), the task ending everywhere, the kernel threads.
        cmdline: "mode=test test=threads",
        timeout: 30,
        cpus: 4,
        threads: Threads::Multi,
        repeat: REPEATED_BOOTS,
        check: |log, r| smp_user_check(log, r, 4, 3),
        ..CASE
    },
    Case {
        name: "kernel and user tests on 2 CPUs (icount): locks across CPUs, a task ending everywhere, the hostile suite on CPU 1",
        cmdline: "mode=test",
        timeout: 120,
        cpus: 2,
        check: |log, r| {
            all_tests_pass(log, r, abi::cases::FAULT_CASES.len())?;
            hostile_on(r, 1)?;
            smp_user_check(log, r, 2, 3)
        },
        ..CASE
    },
    Case {
        name: "kernel and user tests on 4 CPUs (icount): locks across CPUs, a task ending everywhere, the hostile suite on CPU 3",
        cmdline: "mode=test",
        timeout: 120,
        cpus: 4,
        check: |log, r| {
            all_tests_pass(log, r, abi::cases::FAULT_CASES.len())?;
            hostile_on(r, 3)?;
            smp_user_check(log, r, 4, 3)
        },
        ..CASE
    },
    Case {
        name: "phenom on 2 CPUs (icount): AMD syscall, sysenter, int 0x80 and the call gate from every CPU, the hostile suite on CPU 1",
        cpu: Some("phenom"),
        cmdline: "mode=test",
        timeout: 120,
        cpus: 2,
        check: |log, r| {
            all_tests_pass(log, r, abi::cases::FAULT_CASES.len())?;
            mech(r, "syscall", "ok")?;
            hostile_on(r, 1)?;
            smp_user_check(log, r, 2, 3)?;
            let every = "across CPUs: every usable mechanism enters and returns on every CPU";
            match report::of_kind(r, kind::CHECK).find(|c| c.get("name") == Some(every)) {
                // Four mechanisms on each of two CPUs.
                Some(c) if c.get("result") == Some("pass") && c.get("got") == Some("8") => Ok(()),
                other => Err(format!("check {every:?}: {:?}", other.map(|c| &c.fields))),
            }
        },
        ..CASE
    },
    Case {
        name: "fuzzer on 2 CPUs: 50,000 seeded calls (seed=7), every result right, 0 kernel faults, helpers on both CPUs",
        cmdline: "mode=run prog=fuzz fuzz_calls=50000 seed=7",
        cpus: 2,
        check: |log, r| {
            fuzz_clean(log, r, 50_000, &["int80", "sysenter", "callgate"])?;
            // The helpers' CPUs, a mask: both.
            match one(r, kind::FUZZ)?.get("helper_cpus") {
                Some("3") => Ok(()),
                other => Err(format!("the helpers ran on CPUs {other:?} (mask), not on both")),
            }
        },
        ..CASE
    },
    Case {
        name: "locks on 2 CPUs (icount): hand-off, sleep/wakeup, ebizzy per CPU and false sharing across CPUs, each record naming its CPUs",
        cmdline: "mode=run prog=locks",
        timeout: 120,
        cpus: 2,
        check: |log, r| locks_across(log, r, 2, &abi::report::names::LAYOUTS),
        ..CASE
    },
    Case {
        name: "locks on 4 CPUs (icount, pool_align=128): the cross-CPU figures on every CPU",
        cmdline: "mode=run prog=locks pool_align=128",
        timeout: 120,
        cpus: 4,
        check: |log, r| locks_across(log, r, 4, &["128"]),
        ..CASE
    },
    Case {
        name: "SMP under multi-threaded TCG: 4 CPUs in parallel, the same checks",
        cmdline: "mode=smp",
        timeout: 120,
        cpus: 4,
        threads: Threads::Multi,
        // Multi-threaded TCG cannot count instructions: the TSC runs.
        check: |log, r| smp_check(log, r, "4", TCG_TSC),
        ..CASE
    },
    Case {
        name: "SMP: 2 CPUs started from the MADT; benchmarks; a wake-up and a mutex hand-off across CPUs",
        cmdline: "mode=smp",
        timeout: 120,
        cpus: 2,
        check: |log, r| smp_check(log, r, "2", ICOUNT),
        ..CASE
    },
    Case {
        name: "SMP: 4 CPUs started from the MADT; benchmarks; a wake-up and a mutex hand-off across CPUs",
        cmdline: "mode=smp",
        timeout: 120,
        cpus: 4,
        check: |log, r| smp_check(log, r, "4", ICOUNT),
        ..CASE
    },
    Case {
        name: "pool_align=packed on the command line lays the pools out packed",
        cmdline: "mode=run pool_align=packed batches=1 batch_size=16",
        check: |log, r| {
            succeeded(log)?;
            let p = one(r, kind::POOL)?;
            match (p.get("align"), p.get("ts_stride"), p.get("ts_per128")) {
                (Some("packed"), Some("24"), Some("6")) => Ok(()),
                other => Err(format!("pool record {other:?}")),
            }
        },
        ..CASE
    },
    Case {
        name: "locks: turnstile/sleepqueue benchmarks for pool alignments 128, 64 and packed in one boot",
        cmdline: "mode=run prog=locks",
        timeout: 120,
        check: |log, r| {
            succeeded(log)?;
            let pools: Vec<_> = report::of_kind(r, kind::POOL).collect();
            // The boot's own layout first, then the program's three.
            let per128: Vec<&str> = pools.iter().skip(1).filter_map(|p| p.get("ts_per128")).collect();
            if per128 != ["1", "2", "6"] {
                return Err(format!("turnstiles per 128-byte block {per128:?}, expected 1, 2, 6"));
            }
            let res = Results::from_records(r, "locks", "qemu").map_err(|e| e.to_string())?;
            clock_is(&res, ICOUNT)?;
            for layout in abi::report::names::LAYOUTS {
                for fig in LOCK_FIGURES {
                    has_bench(&res, &format!("locks.{fig}.{layout}"), LOCK_BATCHES, Measure::PerOp)?;
                }
                has_bench(&res, &format!("ebizzy.{layout}"), LOCK_BATCHES, Measure::Throughput)?;
            }
            if res.benches.len() != 3 * (LOCK_FIGURES.len() + 1) {
                return Err(format!("{} benchmarks, expected {}", res.benches.len(), 3 * (LOCK_FIGURES.len() + 1)));
            }
            contains(log, "TCG does not model caches")?;
            // The table whole: its header, its units, its three rows, with
            // no kernel line among them.
            table_in_order(log, "align     uncontended", &["", "128 ", "64 ", "packed "])
        },
        ..CASE
    },
    Case {
        name: "locks with pool_align=packed: the one layout the command line names",
        cmdline: "mode=run prog=locks pool_align=packed",
        timeout: 120,
        check: |log, r| {
            succeeded(log)?;
            let res = Results::from_records(r, "locks", "qemu").map_err(|e| e.to_string())?;
            let names: Vec<&str> = res.benches.iter().map(|b| b.name.as_str()).collect();
            let want = ["locks.uncontended.packed", "locks.contended.packed", "locks.sleep_wakeup.packed", "locks.lookup.packed", "ebizzy.packed"];
            if names != want {
                return Err(format!("benchmarks {names:?}, expected {want:?}"));
            }
            Ok(())
        },
        ..CASE
    },
    Case {
        name: "forged records: a user program's console lines are never records, its record calls come tagged",
        cmdline: "mode=run prog=rogue",
        check: |log, r| {
            succeeded(log)?;
            end(r, "success")?;
            // Each forged line is on the console, escaped, and none is a record.
            contains(log, "%40%40tb1 bench oops")?;
            contains(log, "%40%40tb1 bench name=split")?;
            let res = Results::from_records(r, "test", "qemu").map_err(|e| e.to_string())?;
            let forged = [kind::CLOCK, kind::BENCH, kind::SAMPLES];
            if !res.benches.is_empty() || forged.iter().any(|k| report::of_kind(r, k).next().is_some()) {
                return Err(format!("a forged record was taken: {:?}", res.benches));
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
        name: "kernel and user tests on qemu32 (Intel: no AMD syscall)",
        cmdline: "mode=test",
        check: |log, r| {
            all_tests_pass(log, r, 20)?;
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
        name: "kernel and user tests on pentium (no SEP: sysenter skipped)",
        cpu: Some("pentium"),
        cmdline: "mode=test",
        check: |log, r| {
            all_tests_pass(log, r, 20)?;
            mech(r, "sysenter", "unavailable")?;
            mech(r, "syscall", "unavailable")
        },
        ..CASE
    },
    Case {
        name: "kernel and user tests on phenom (AMD syscall/sysret in 32-bit mode)",
        cpu: Some("phenom"),
        cmdline: "mode=test",
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
    Case {
        name: "kernel stack overflow is reported by the #DF task",
        cmdline: "crash=overflow",
        check: |log, r| {
            outcome(log, Outcome::Exception(8))?;
            contains(log, "#DF double fault")?;
            contains(log, "kernel stack overflow")?;
            exception(r, 8, "kernel")
        },
        ..CASE
    },
    Case {
        name: "kernel #BP is reported",
        cmdline: "crash=bp",
        check: |log, r| kernel_exception(log, r, 3),
        ..CASE
    },
    Case {
        name: "kernel #UD is reported",
        cmdline: "crash=ud",
        check: |log, r| kernel_exception(log, r, 6),
        ..CASE
    },
    Case {
        name: "kernel #DE is reported",
        cmdline: "crash=de",
        check: |log, r| kernel_exception(log, r, 0),
        ..CASE
    },
    Case {
        name: "kernel #PF is reported with CR2",
        cmdline: "crash=pf",
        check: kernel_pf_with_cr2,
        ..CASE
    },
    Case {
        name: "kernel panic prints its location and message",
        cmdline: "crash=panic",
        check: |log, _| {
            outcome(log, Outcome::Panic)?;
            contains(log, "kernel panic at kernel/src/main.rs")?;
            contains(log, "deliberate panic")
        },
        ..CASE
    },
    Case {
        name: "a triple fault is told apart from a verdict",
        cmdline: "crash=triple",
        check: triple_fault,
        ..CASE
    },
    Case {
        name: "a hung guest is killed at the timeout",
        cmdline: "mode=run",
        timeout: 2,
        // -S: the CPU never starts, the surest hang there is.
        paused: true,
        check: |log, _| timed_out(log, "hung"),
        ..CASE
    },
    // The CPU matrix: test mode on every i386 model QEMU has (qemu32,
    // pentium and phenom are the test boots above). Correct means the
    // features detected, unavailable mechanisms skipped with a reason, the
    // hostile suite all as expected, no crash. The fuzzer boots follow.
    Case {
        name: "cpu matrix: 486 (no TSC, no SEP): tests and the hostile suite",
        cpu: Some("486"),
        cmdline: "mode=test",
        check: |log, r| {
            matrix(log, r, "GenuineIntel", "4", ["ok", "unavailable", "ok", "unavailable"])?;
            match one(r, kind::CPU)?.get("tsc") {
                Some("false") => Ok(()),
                other => Err(format!("the 486 model reports tsc={other:?}")),
            }
        },
        ..CASE
    },
    Case {
        name: "cpu matrix: 486 runs the benchmark program, which says it cannot time",
        cpu: Some("486"),
        cmdline: "mode=run prog=bench",
        check: |log, r| {
            succeeded(log)?;
            contains(log, "no TSC")?;
            end(r, "success")
        },
        ..CASE
    },
    Case {
        name: "cpu matrix: pentium2 (SEP): tests and the hostile suite",
        cpu: Some("pentium2"),
        cmdline: "mode=test",
        check: |log, r| matrix(log, r, "GenuineIntel", "6", ["ok", "ok", "ok", "unavailable"]),
        ..CASE
    },
    Case {
        name: "cpu matrix: pentium3: tests and the hostile suite",
        cpu: Some("pentium3"),
        cmdline: "mode=test",
        check: |log, r| matrix(log, r, "GenuineIntel", "6", ["ok", "ok", "ok", "unavailable"]),
        ..CASE
    },
    Case {
        name: "cpu matrix: coreduo: tests and the hostile suite",
        cpu: Some("coreduo"),
        cmdline: "mode=test",
        check: |log, r| matrix(log, r, "GenuineIntel", "6", ["ok", "ok", "ok", "unavailable"]),
        ..CASE
    },
    Case {
        name: "cpu matrix: core2duo: tests and the hostile suite",
        cpu: Some("core2duo"),
        cmdline: "mode=test",
        check: |log, r| matrix(log, r, "GenuineIntel", "6", ["ok", "ok", "ok", "unavailable"]),
        ..CASE
    },
    Case {
        name: "fuzzer: 50,000 seeded calls (seed=7), every result right, 0 kernel faults",
        cmdline: "mode=run prog=fuzz fuzz_calls=50000 seed=7",
        check: |log, r| fuzz_clean(log, r, 50_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on 486: 20,000 calls through int 0x80 and the call gate",
        cpu: Some("486"),
        cmdline: "mode=run prog=fuzz fuzz_calls=20000 seed=9",
        check: |log, r| fuzz_clean(log, r, 20_000, &["int80", "callgate"]),
        ..CASE
    },
    // The fuzzer on the rest of the CPU matrix, short (5,000 calls, every
    // system call, a crowd round of helper threads among them).
    Case {
        name: "fuzzer on pentium (no SEP): 5,000 calls",
        cpu: Some("pentium"),
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=11",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on pentium2: 5,000 calls",
        cpu: Some("pentium2"),
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=12",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on pentium3: 5,000 calls",
        cpu: Some("pentium3"),
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=13",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on coreduo: 5,000 calls",
        cpu: Some("coreduo"),
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=14",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on core2duo: 5,000 calls",
        cpu: Some("core2duo"),
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=15",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer with 2 CPUs: 5,000 calls",
        cpus: 2,
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=16",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on phenom: 20,000 calls, AMD syscall among the mechanisms",
        cpu: Some("phenom"),
        cmdline: "mode=run prog=fuzz fuzz_calls=20000 seed=8",
        check: |log, r| fuzz_clean(log, r, 20_000, &["int80", "sysenter", "callgate", "syscall"]),
        ..CASE
    },
    // Bochs: the same kernel on a second x86 implementation, booted through
    // GRUB with no exit device, on real CPUs' CPUID (docs/machines.md says
    // where Bochs and QEMU differ). The agreement check (agreement.rs)
    // runs beside these.
    Case {
        // Two CPUs: the user threads run on both (the locks tests across
        // CPUs, a task ending everywhere); the other two models run one.
        name: "bochs p4_prescott_celeron_336 (SEP) on 2 CPUs: tests, the hostile suite, user threads on both CPUs",
        emulator: Emulator::Bochs,
        cpu: Some("p4_prescott_celeron_336"),
        cpus: 2,
        cmdline: "mode=test",
        timeout: BOCHS_TIMEOUT,
        check: |log, r| {
            matrix(log, r, "GenuineIntel", "15", ["ok", "ok", "ok", "unavailable"])?;
            smp_user_check(log, r, 2, 3)
        },
        ..CASE
    },
    Case {
        name: "bochs amd_k6_2_chomper (AMD SYSCALL in 32-bit mode, no SEP): tests and the hostile suite",
        emulator: Emulator::Bochs,
        cpu: Some("amd_k6_2_chomper"),
        cmdline: "mode=test",
        timeout: BOCHS_TIMEOUT,
        check: |log, r| matrix(log, r, "AuthenticAMD", "5", ["ok", "unavailable", "ok", "ok"]),
        ..CASE
    },
    Case {
        name: "bochs core2_penryn_t9600: tests and the hostile suite",
        emulator: Emulator::Bochs,
        cpu: Some("core2_penryn_t9600"),
        cmdline: "mode=test",
        timeout: BOCHS_TIMEOUT,
        check: |log, r| matrix(log, r, "GenuineIntel", "6", ["ok", "ok", "ok", "unavailable"]),
        ..CASE
    },
    // Bochs's Core 2 and Sandy Bridge models advertise architectural
    // counters (leaf 0xA v2 and v3) and do not implement them: the check in
    // ring 0 must find that out and the benchmark run without them.
    Case {
        name: "bochs core2_penryn_t9600: the benchmark runs whole; perf counters on, or n/a and why",
        emulator: Emulator::Bochs,
        cpu: Some("core2_penryn_t9600"),
        cmdline: "mode=run batches=4 batch_size=256",
        timeout: BOCHS_TIMEOUT,
        check: bench_with_counters_or_reason,
        ..CASE
    },
    Case {
        name: "bochs corei7_sandy_bridge_2600k: the benchmark runs whole; perf counters on, or n/a and why",
        emulator: Emulator::Bochs,
        cpu: Some("corei7_sandy_bridge_2600k"),
        cmdline: "mode=run batches=4 batch_size=256",
        timeout: BOCHS_TIMEOUT,
        check: bench_with_counters_or_reason,
        ..CASE
    },
    Case {
        name: "bochs SMP: 2 p4_prescott_celeron_336 CPUs from the MADT; benchmarks; a wake-up and a mutex hand-off across CPUs",
        emulator: Emulator::Bochs,
        cpu: Some("p4_prescott_celeron_336"),
        cpus: 2,
        cmdline: "mode=smp",
        timeout: BOCHS_TIMEOUT,
        check: |log, r| smp_check_on(log, r, "2", BOCHS_TSC, "Bochs does not model caches"),
        ..CASE
    },
    Case {
        // Bochs's CPUs take turns of a few instructions: a round trip that
        // could lose a wake-up does so here (216 timeouts, before it waited
        // for a sleeper); one lost now would hang the boot.
        name: "bochs locks on 2 CPUs (pool_align=128): the cross-CPU figures on both CPUs, no wake-up lost",
        emulator: Emulator::Bochs,
        cpu: Some("p4_prescott_celeron_336"),
        cpus: 2,
        cmdline: "mode=run prog=locks pool_align=128",
        timeout: BOCHS_TIMEOUT,
        check: |log, r| locks_across_on(log, r, 2, &["128"], BOCHS_TSC),
        ..CASE
    },
    Case {
        name: "bochs: a triple fault is told apart from a verdict (no exit device)",
        emulator: Emulator::Bochs,
        cmdline: "crash=triple",
        timeout: BOCHS_TIMEOUT,
        check: triple_fault,
        ..CASE
    },
    Case {
        name: "bochs: kernel #PF is reported with CR2, the verdict read from the serial line",
        emulator: Emulator::Bochs,
        cmdline: "crash=pf",
        timeout: BOCHS_TIMEOUT,
        check: kernel_pf_with_cr2,
        ..CASE
    },
    Case {
        name: "bochs: a guest with no verdict is stopped at the timeout",
        emulator: Emulator::Bochs,
        cmdline: "mode=run",
        // The BIOS alone takes longer than this.
        timeout: 1,
        check: |log, _| timed_out(log, "Bochs was killed"),
        ..CASE
    },
];

/// A test boot on `n` CPUs: every test passed (the cross-CPU locks checks
/// and the task ending everywhere among them; `at_least` of the latter
/// kinds: lending both ways and the stress).
fn smp_user_check(log: &BootLog, r: &[Record], n: u32, at_least: usize) -> Result<(), String> {
    // The user checks first: they say which one failed, the test only that
    // the program reported failures.
    let failed: Vec<String> = report::of_kind(r, kind::CHECK)
        .filter(|c| c.get("result") == Some("fail"))
        .map(|c| {
            format!(
                "{} (got {})",
                c.get("name").unwrap_or("?"),
                c.get("got").unwrap_or("?")
            )
        })
        .collect();
    if !failed.is_empty() {
        return Err(format!("user checks failed: {}", failed.join("; ")));
    }
    all_tests_pass(log, r, 1)?;
    let across: Vec<&Record> = report::of_kind(r, kind::CHECK)
        .filter(|c| c.get("name").is_some_and(|n| n.starts_with("across CPUs")))
        .collect();
    if across.len() < at_least {
        return Err(format!("only {} cross-CPU checks ran", across.len()));
    }
    let stress = format!("across CPUs: {} threads on {n} CPUs", 2 * n);
    if !across.iter().any(|c| {
        c.get("name").is_some_and(|x| x.starts_with(&stress)) && c.get("result") == Some("pass")
    }) {
        return Err(format!("no passing check {stress:?}..."));
    }
    let ended = report::of_kind(r, kind::TEST)
        .find(|t| {
            t.get("name")
                .is_some_and(|x| x.starts_with("smp: a task ends everywhere"))
        })
        .ok_or("the task-ending test did not run")?;
    if ended.get("result") != Some("pass") {
        return Err(format!("task-ending test: {:?}", ended.get("detail")));
    }
    contains(log, &format!("smp: {n} CPU(s) started"))
}

/// A `locks` boot on `n` CPUs: the cross-CPU figures for each layout, each
/// with its samples and the CPUs it ran on.
fn locks_across(log: &BootLog, r: &[Record], n: u32, layouts: &[&str]) -> Result<(), String> {
    locks_across_on(log, r, n, layouts, ICOUNT)
}

/// [`locks_across`] on a machine of clock `clock`.
fn locks_across_on(
    log: &BootLog,
    r: &[Record],
    n: u32,
    layouts: &[&str],
    clock: (&str, &str),
) -> Result<(), String> {
    use abi::report::names;
    succeeded(log)?;
    let res = Results::from_records(r, "locks", "qemu").map_err(|e| e.to_string())?;
    clock_is(&res, clock)?;
    let every: Vec<u32> = (0..n).collect();
    for layout in layouts {
        let on = |name: String, m: Measure, cpus: &[u32]| -> Result<(), String> {
            has_bench(&res, &name, LOCK_BATCHES, m)?;
            let b = res.bench(&name).ok_or_else(|| format!("no {name}"))?;
            if b.cpus != cpus {
                return Err(format!(
                    "{name} ran on CPUs {:?}, expected {cpus:?}",
                    b.cpus
                ));
            }
            Ok(())
        };
        for fig in [names::CONTENDED_SMP, names::SLEEP_WAKEUP_SMP] {
            on(format!("locks.{fig}.{layout}"), Measure::PerOp, &[0, 1])?;
        }
        for fig in [
            names::FALSE_SHARING_LINE,
            names::FALSE_SHARING_ADJACENT,
            names::FALSE_SHARING_APART,
        ] {
            on(format!("locks.{fig}.{layout}"), Measure::Throughput, &every)?;
        }
        on(format!("ebizzy.smp.{layout}"), Measure::Throughput, &every)?;
        for c in 0..n {
            on(format!("ebizzy.cpu{c}.{layout}"), Measure::Throughput, &[c])?;
        }
        // The figures of one CPU say so too.
        on(format!("locks.contended.{layout}"), Measure::PerOp, &[0])?;
    }
    contains(log, &format!("across {n} CPUs: contended"))
}

/// Seconds before a Bochs case is called hung: its boots take 15 to 40 s
/// on an idle 2-CPU machine (BIOS and GRUB included).
const BOCHS_TIMEOUT: u64 = 240;

/// A boot asked for on the command line (`cargo xtask test --emulator E
/// --cpu MODEL --smp N`): `mode=test` must pass every test and the hostile
/// suite, `mode=smp` must start `cpus` CPUs and pass the SMP checks.
pub fn model_case(
    emulator: Emulator,
    cpu: Option<&str>,
    cpus: u32,
    cmdline: &str,
    art: &crate::kbuild::Artifacts,
    dir: &std::path::Path,
) -> Result<(), String> {
    let base = Case {
        emulator,
        cpus,
        timeout: BOCHS_TIMEOUT,
        ..CASE
    };
    let spec = machine::Spec {
        cpu: cpu.map(str::to_string),
        ..base.spec()
    };
    let m = machine::Machine::build(&spec, art, cmdline, dir).map_err(|e| format!("{e:#}"))?;
    let log = m.boot(&mut |_| {}).map_err(|e| format!("{e:#}"))?;
    let r = report::parse_log(&log.serial).map_err(|e| e.to_string())?;
    let checked = if cmdline == "mode=smp" {
        let (clock, note) = match emulator {
            Emulator::Qemu => (ICOUNT, "TCG does not model caches"),
            Emulator::Bochs => (BOCHS_TSC, "Bochs does not model caches"),
        };
        smp_check_on(&log, &r, &cpus.to_string(), clock, note)
    } else {
        all_tests_pass(&log, &r, 20).and_then(|()| hostile_all_expected(&log, &r))
    };
    checked.map_err(|e| format!("{e}\n{}", log.explain(20)))
}

/// An SMP boot under TCG: `n` CPUs from the MADT, every figure, the
/// forktest samples.
fn smp_check(log: &BootLog, r: &[Record], n: &str, clock: (&str, &str)) -> Result<(), String> {
    smp_check_on(log, r, n, clock, "TCG does not model caches")
}

/// An SMP boot: `n` CPUs from the MADT, every figure in `clock`, the
/// forktest samples, and the emulator's `note` beside the figures.
fn smp_check_on(
    log: &BootLog,
    r: &[Record],
    n: &str,
    clock: (&str, &str),
    note: &str,
) -> Result<(), String> {
    succeeded(log)?;
    let s = one(r, kind::SMP)?;
    if s.get("cpus") != Some(n) || s.get("source") != Some("acpi-madt") {
        return Err(format!("smp record {:?}", s.fields));
    }
    let res = Results::from_records(r, "smp", "qemu").map_err(|e| e.to_string())?;
    clock_is(&res, clock)?;
    for layout in abi::report::names::LAYOUTS {
        has_bench(
            &res,
            &format!("smp.false_sharing.{layout}"),
            SMP_BATCHES,
            Measure::Throughput,
        )?;
    }
    for b in [
        "smp.pingpong",
        "smp.tlb.invlpg",
        "smp.tlb.cr3",
        "smp.tlb.shootdown",
    ] {
        has_bench(&res, b, SMP_BATCHES, Measure::PerOp)?;
    }
    for b in ["forktest.window", "forktest.cr3"] {
        has_bench(&res, b, FORKS, Measure::PerOp)?;
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
    contains(log, note)?;
    // The speed-up table whole, its row naming the emulator the note names.
    let emulator = note.split(' ').next().unwrap_or("");
    table_in_order(log, "system         kernel   benchmark", &[emulator])
}

/// The line starting with `header` is followed at once by lines starting
/// with each of `rows`, in order: a table printed whole.
fn table_in_order(log: &BootLog, header: &str, rows: &[&str]) -> Result<(), String> {
    let lines: Vec<&str> = log.serial.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(header))
        .ok_or_else(|| format!("no table headed {header:?}"))?;
    for (i, want) in rows.iter().enumerate() {
        let got = lines.get(at + 1 + i).copied().unwrap_or("");
        if !got.starts_with(want) {
            return Err(format!(
                "table {header:?}: line {} is {got:?}, expected a row starting {want:?}",
                i + 1
            ));
        }
    }
    Ok(())
}

/// The lock benchmarks' figures per layout (`locks.<figure>.<layout>`).
const LOCK_FIGURES: [&str; 4] = ["uncontended", "contended", "sleep_wakeup", "lookup"];
/// Batches per figure of the `locks` program and of `mode=smp`.
const LOCK_BATCHES: usize = 8;
const SMP_BATCHES: usize = 8;
/// Address spaces built per forktest strategy.
const FORKS: usize = 32;

/// A run's clock and unit: most test boots count instructions.
const ICOUNT: (&str, &str) = ("icount", "instructions");
/// The TSC under TCG, which follows the host's clock.
const TCG_TSC: (&str, &str) = ("tsc", "TCG ticks");
/// The TSC under Bochs, which counts instructions.
const BOCHS_TSC: (&str, &str) = ("tsc", "Bochs ticks");

/// A results file's run-wide clock and unit.
fn clock_is(res: &Results, want: (&str, &str)) -> Result<(), String> {
    if (res.clock.as_str(), res.unit.as_str()) != want {
        return Err(format!("clock {:?}, unit {:?}", res.clock, res.unit));
    }
    Ok(())
}

/// A benchmark with `n` samples, a positive median, and the right measure.
fn has_bench(res: &Results, name: &str, n: usize, m: Measure) -> Result<(), String> {
    let b = res
        .bench(name)
        .ok_or_else(|| format!("no benchmark {name}"))?;
    let unit_ok = match m {
        Measure::PerOp => b.unit == res.unit,
        Measure::Throughput => b.unit.ends_with("/s"),
    };
    if b.samples.len() != n || b.n != n || b.median <= 0.0 || b.measure != m || !unit_ok {
        return Err(format!(
            "{name}: {} samples (n={}), median {}, measure {:?}, unit {:?}; expected {n} samples, {:?}",
            b.samples.len(),
            b.n,
            b.median,
            b.measure,
            b.unit,
            m
        ));
    }
    Ok(())
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
fn bench_with_counters_or_reason(log: &BootLog, r: &[Record]) -> Result<(), String> {
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

/// The kernel's deliberate #PF (`crash=pf`) reported, with the address it
/// touched in CR2.
fn kernel_pf_with_cr2(log: &BootLog, r: &[Record]) -> Result<(), String> {
    kernel_exception(log, r, 14)?;
    match one(r, kind::EXCEPTION)?.get("cr2") {
        Some("0xc0000000") => Ok(()),
        other => Err(format!("CR2 is {other:?}, expected 0xc0000000")),
    }
}

/// A triple fault (`crash=triple`): the machine reset, and the verdict
/// says it was a triple fault rather than a kernel verdict.
fn triple_fault(log: &BootLog, _: &[Record]) -> Result<(), String> {
    outcome(log, Outcome::ResetOrTripleFault)?;
    if !log.verdict().contains("triple fault") {
        return Err(log.verdict());
    }
    Ok(())
}

/// The guest was stopped at the timeout, and the verdict says `why`.
fn timed_out(log: &BootLog, why: &str) -> Result<(), String> {
    match log.ending {
        Ending::TimedOut(_) if log.verdict().contains(why) => Ok(()),
        _ => Err(format!("not a timeout: {}", log.verdict())),
    }
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
    hostile_all_expected(log, r)?;
    selectors_16bit(log)
}

/// Every register dump shows segment registers as 16-bit selectors
/// (`CS 0x001b`, `DS 0x0023 ES 0x0023`): the CPU need not write the upper
/// half of the 32-bit slot it saves one in, so printing the slot would show
/// whatever was there before (Bochs left `ES 0x40000023`).
fn selectors_16bit(log: &BootLog) -> Result<(), String> {
    for line in log.serial.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            let is_dump = matches!(pair[0], "CS" | "DS" | "ES") && pair[1].starts_with("0x");
            if is_dump && pair[1].len() != "0x0000".len() {
                return Err(format!(
                    "a register dump shows {} {}: not a 16-bit selector",
                    pair[0], pair[1]
                ));
            }
        }
    }
    Ok(())
}

/// The hostile suite ran on CPU `cpu` (with several CPUs, the last: an AP)
/// and every case there came out as expected.
fn hostile_on(r: &[Record], cpu: u32) -> Result<(), String> {
    let h = one(r, kind::HOSTILE)?;
    let n = abi::cases::FAULT_CASES.len().to_string();
    if h.get("cpu") != Some(cpu.to_string().as_str()) || h.get("expected") != Some(n.as_str()) {
        return Err(format!(
            "hostile suite: {:?}, expected {n} of {n} on CPU {cpu}",
            h.fields
        ));
    }
    Ok(())
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
    // Several threads: helpers ran their calls, and the pool was filled.
    for k in ["helpers", "helper_calls", "exhausted"] {
        if f.get(k).unwrap_or("0") == "0" {
            return Err(format!("the fuzzer's {k} is 0: {:?}", f.fields));
        }
    }
    // The record came through the record call, tagged with the program.
    if f.get(abi::report::KEY_PROG) != Some("fuzz") {
        return Err(format!(
            "the fuzz record is not tagged prog=fuzz: {:?}",
            f.fields
        ));
    }
    end(r, "success")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_of(serial: &str) -> BootLog {
        BootLog {
            backend: "QEMU",
            ending: Ending::Exited(Outcome::Success),
            serial: serial.into(),
            stderr: String::new(),
            wall: Duration::ZERO,
        }
    }

    #[test]
    fn selectors_must_be_16_bit() {
        let ok = "  EIP 0x40001000  CS 0x001b  EFLAGS 0x00000202\n  ESI 0  DS 0x0023 ES 0x0023\ncpu: new CS:EIP = 0x0008:0x1\n [0x1] CS     = 0x0000001b";
        assert!(selectors_16bit(&log_of(ok)).is_ok());
        let bad = "  ESI 0x0  EDI 0x0  EBP 0x0  DS 0x0023 ES 0x40000023";
        let e = selectors_16bit(&log_of(bad)).unwrap_err();
        assert!(e.contains("ES 0x40000023"), "{e}");
    }
    use crate::kbuild::Artifacts;
    use crate::machine::{Clock, Loader, Machine};

    #[test]
    fn every_case_is_a_machine() {
        let art = Artifacts {
            kernel: "/k/kernel".into(),
            programs: vec![],
        };
        for c in CASES
            .iter()
            .filter(|c| !c.grub && c.emulator == Emulator::Qemu)
        {
            let m = Machine::build(&c.spec(), &art, c.cmdline, std::path::Path::new("/x"))
                .unwrap_or_else(|e| panic!("{}: {e:#}", c.name));
            assert!(m.cmdline.starts_with(c.cmdline), "{}", c.name);
            assert_eq!(m.loader, Loader::Direct);
            let want = if c.threads == Threads::Multi {
                Clock::Tsc
            } else {
                Clock::Icount
            };
            assert_eq!(m.clock, want, "{}", c.name);
        }
        // Bochs cases boot the GRUB image (built at boot time), on the TSC.
        for c in CASES.iter().filter(|c| c.emulator == Emulator::Bochs) {
            let spec = c.spec();
            assert!(
                matches!(spec.backend, machine::BackendSpec::Bochs(_)),
                "{}",
                c.name
            );
            assert!(c.name.starts_with("bochs"), "{}", c.name);
            assert!(!c.paused && c.threads == Threads::Single, "{}", c.name);
        }
        let names: std::collections::BTreeSet<_> = CASES.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), CASES.len(), "two cases share a name");
    }
}
