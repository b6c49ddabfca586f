//! A seeded system-call fuzzer: `fuzz_calls=` calls (default 50,000) from a
//! xorshift PRNG seeded by `seed=` (kernel command line; the same seed gives
//! the same calls). Each call picks:
//!
//! - a mechanism among the usable ones that `entry=` selects;
//! - a number: a valid one (never `exit`, never `trace`, which prints a
//!   page per call) or one the table lacks (one past it, huge, negative);
//! - arguments: for pointer arguments a (pointer, length) pair of a known
//!   kind (this program's writable scratch buffer, its read-only data,
//!   kernel memory, unmapped pages, ranges that wrap past 4 GiB or straddle
//!   the stack's top or its guard page, huge lengths, zero lengths); for
//!   the rest values from a pool of edge cases and random words;
//! - EFLAGS bits among DF, AC and NT to enter with (never TF: a set TF ends
//!   the task by design).
//!
//! After each call it checks the result against a model of the kernel (the
//! exact value or errno, the ring buffer's contents, what cpuinfo copied
//! out), that the six argument registers came back unchanged, and that the
//! flags came back as they were at entry, with IF on. On anything else it
//! prints the seed, the call's number, mechanism, system-call number,
//! arguments and flags, and exits with status 1.
//!
//! Every system call but `exit`, `thread_exit` and `trace` is called, each
//! with hostile arguments and a model of its result: threads (creation
//! with arguments it must refuse; the pool filled until EAGAIN once per
//! run), the user mutex (`umtx_lock`/`unlock` on the main thread's own word,
//! misaligned and bad words, EDEADLK, EPERM), `sleep`, `sleep_on` with
//! timeouts, `wakeup` (of channels nobody sleeps on, among them the numbers
//! a kernel might use for channels of its own), `pool_align` (EBUSY while
//! other threads live), `lookup_bench` (EINVAL past its bound), `record`
//! (bodies the kernel must refuse), `getprio`, `gettid`.
//!
//! Several threads: the calls run in rounds of [`ROUND_CALLS`]; in a crowd
//! round (the first, then one in two) one to three helper threads make
//! their own checked calls meanwhile, contend for a shared mutex around a
//! read-yield-write of a counter (which must come out exact), and sleep on a
//! channel without timeout until the main thread wakes them (`wakeup` must
//! count them) and sees each gone (`getprio` gives ESRCH).
//!
//! Calls that would touch memory outside the scratch buffer are never
//! valid ones (so the fuzzer cannot overwrite itself), valid writes to the
//! console are sent to the null device instead, valid `record` bodies are
//! never sent, `sleep` and `sleep_on` only get short timeouts (a long one is
//! a hang of the program's own making), and `entry_floor` never turns a
//! fast entry's floor on (its floor does no work: the next call's return
//! would jump to a random address).
//!
//! Threads against each other: with `fuzz_threads=N` the program first
//! runs a phase of N calls in which worker threads on every CPU race
//! `pipe`, `close`, `dup2`, `read`, `write`, `sbrk` and `fork` on shared
//! descriptors and the shared heap; every result must be one the race
//! allows, and no byte may come out of a pipe its reader's descriptor
//! never named (`race.rs` says how that is traced). It reports a
//! `fuzz_threads` record; the kernel's `task` record then gives the frames
//! and user pages in use before and after the task.
//!
//! The program in parts, each in its file: `args.rs` (the PRNG and the
//! arguments a call gets), `model.rs` (the model of the kernel: what each
//! call must return), `rounds.rs` (the helper threads, the pool filled,
//! the nap) and `race.rs` (the threads phase); this file keeps the summary,
//! the main loop and the report of a failure. The parts are included into this one module, not made
//! modules of their own: one module is one codegen unit, so the compiled
//! program, and with it every icount figure it gives, stays as one file
//! made it.
#![no_std]
#![no_main]

use core::fmt::Write as _;

use core::sync::atomic::{AtomicU32, Ordering::SeqCst};
use userland::abi::cases::eflags::{self, HOSTILE, IF};
use userland::abi::layout::{
    KERNEL_MAP_END, PAGE_SIZE, USER_BASE, USER_HEAP_BASE, USER_HEAP_MAX, USER_STACK_SIZE,
    USER_STACK_TOP, USER_TOP,
};

use userland::abi::report::{check_user_record, kind, MAX_USER_RECORD};
use userland::abi::syscall::{
    argsum, decode, errno, fd, nr, CpuInfo, DEFAULT_EUID, FEATURE_TSC, LOOKUP_BENCH_MAX,
    MAX_THREADS, PRIO_MAX, PRIO_USER,
};
use userland::abi::Mechanism;
use userland::flagged::{self, After};
use userland::threads::{self, Umtx};
use userland::{println, record, sys, Line};

include!("args.rs");

include!("model.rs");

/// The flag names, for reports.
struct Flags(u32);

impl core::fmt::Display for Flags {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.0 & HOSTILE == 0 {
            return f.write_str("none");
        }
        let mut sep = "";
        for bit in [eflags::DF, eflags::AC, eflags::NT] {
            if self.0 & bit != 0 {
                write!(f, "{sep}{}", eflags::name(bit))?;
                sep = "|";
            }
        }
        Ok(())
    }
}

/// Counters for the summary.
#[derive(Default)]
struct Stats {
    per_mech: [u32; 4],
    ok: u32,
    /// EFAULT, EBADF, EINVAL, ENOSYS.
    errnos: [u32; 4],
    flagged: u32,
    /// Helper threads started by the crowd rounds.
    helpers: u32,
}

const COUNTED: [i32; 4] = [errno::EFAULT, errno::EBADF, errno::EINVAL, errno::ENOSYS];

include!("rounds.rs");

include!("race.rs");

/// Checks one call's outcome against its plan (result, registers, flags).
fn judge(p: &Plan, a: &After) -> Result<(), &'static str> {
    let result_ok = match p.want {
        Want::Pid => decode(a.eax).is_ok_and(|pid| pid > 0),
        w => a.eax == w.raw(),
    };
    if !result_ok {
        Err("wrong result")
    } else if a.args() != p.args {
        Err("an argument register changed")
    } else if a.eflags & HOSTILE != p.flags {
        Err("EFLAGS did not come back as they went in")
    } else if a.eflags & IF == 0 {
        Err("IF is off after the return")
    } else {
        Ok(())
    }
}

#[unsafe(no_mangle)]
extern "C" fn main(_arg: u32) -> i32 {
    let info = sys::cpuinfo();
    let seed = info.seed;
    let calls = info.fuzz_calls;
    let end_of_image = scratch() + SCRATCH_SIZE as u32;
    if end_of_image > IMAGE_LIMIT {
        println!("fuzz: the program is larger than its model assumes");
        return 1;
    }
    let mut mechs = [Mechanism::Int80; 4];
    let mut n_mechs = 0;
    for m in Mechanism::ALL {
        if info.wanted(m) {
            mechs[n_mechs] = m;
            n_mechs += 1;
        }
    }
    if n_mechs == 0 {
        println!("fuzz: no usable mechanism selected (entry=)");
        return 1;
    }
    let mechs = &mechs[..n_mechs];
    let mut names = Line::new();
    for m in mechs {
        let _ = write!(names, " {}", m.key());
    }
    println!(
        "fuzz: seed {seed}, {calls} calls through{}, flags among DF AC NT",
        names.as_str()
    );

    let mut model = Model {
        ring: [0; fd::RING_SIZE],
        head: 0,
        len: 0,
        pid: sys::call(Mechanism::Int80, nr::GETPID, [0; 6]),
        usable: info.mechanisms,
        info,
        tid: threads::gettid(),
        crowd: false,
        umtx_mine: false,
    };
    PID.store(model.pid, SeqCst);
    let mut mask = 0;
    for m in mechs {
        mask |= 1 << *m as u32;
    }
    MECH_MASK.store(mask, SeqCst);
    let mut rng = Rng::new(seed);
    let mut stats = Stats::default();
    let has_tsc = info.features & FEATURE_TSC != 0;
    let start = if has_tsc { rdtsc() } else { 0 };
    let stop = |why: &str| {
        println!("fuzz: FAILED (seed {seed}): {why}");
        record!(kind::FUZZ, "seed" => seed, "calls" => calls, "failures" => 1,
            "why" => userland::abi::report::Escaped(why));
        1
    };
    if info.fuzz_threads > 0 {
        if let Err(why) = race_phase(
            seed,
            info.fuzz_threads,
            info.cpus.max(1),
            has_tsc,
            info.tsc_hz,
        ) {
            return stop(why);
        }
    }
    if let Err(why) = nap_unwakeable() {
        return stop(why);
    }
    let exhausted = match exhaust() {
        Ok(n) => n,
        Err(why) => return stop(why),
    };
    let mut round = Round::SOLO;
    for i in 0..calls {
        if i % ROUND_CALLS == 0 {
            if let Err(why) = round.end(&mut model) {
                return stop(why);
            }
            round = match Round::start(&mut rng, &mut model, i == 0) {
                Ok(r) => r,
                Err(why) => return stop(why),
            };
            stats.helpers += round.n;
        }
        let p = model.plan(&mut rng, mechs);
        let a = flagged::call(p.mech, p.nr, p.args, p.flags);
        if p.nr == nr::FORK && a.eax == 0 {
            // The child: only the calling thread, in a copy of memory.
            sys::exit(FORK_CHILD_EXIT);
        }
        stats.per_mech[p.mech as usize] += 1;
        stats.flagged += (p.flags != 0) as u32;
        match COUNTED.iter().position(|&e| a.eax == (-e) as u32) {
            Some(k) => stats.errnos[k] += 1,
            None => stats.ok += 1,
        }
        let umtx = if model.umtx_mine { model.tid } else { 0 };
        let verdict = judge(&p, &a).and_then(|()| {
            if MAIN_UMTX.load(SeqCst) != umtx {
                Err("the umtx word is not what the model says")
            } else {
                model.check_out(&p)
            }
        });
        let verdict = verdict.and_then(|()| match p.want {
            // The child exits at once with its code: reap it.
            Want::Pid => match sys::waitpid(a.eax as i32, 0) {
                Ok((pid, status))
                    if pid == a.eax
                        && userland::abi::syscall::wait::exit_code(status)
                            == Some(FORK_CHILD_EXIT) =>
                {
                    Ok(())
                }
                _ => Err("the forked child did not exit with its code"),
            },
            _ => Ok(()),
        });
        if let Err(why) = verdict {
            report_failure(seed, i, &p, &a, why);
            return 1;
        }
    }
    if let Err(why) = round.end(&mut model) {
        return stop(why);
    }
    let ticks = if has_tsc { rdtsc() - start } else { 0 };
    let [efault, ebadf, einval, enosys] = stats.errnos;
    if has_tsc && calls > 0 {
        // Under icount one tick is one guest instruction.
        let clock = if info.clock == 1 {
            "instructions"
        } else {
            "TSC ticks"
        };
        println!(
            "fuzz: {ticks} {clock} in all, {} per call (generation and checks included)",
            ticks / calls.max(1) as u64
        );
    }
    println!(
        "fuzz: {calls} calls, 0 failures: int80 {}, sysenter {}, callgate {}, syscall {}; \
         {} values, EFAULT {efault}, EBADF {ebadf}, EINVAL {einval}, ENOSYS {enosys}; {} with DF/AC/NT set",
        stats.per_mech[0], stats.per_mech[1], stats.per_mech[2], stats.per_mech[3], stats.ok, stats.flagged
    );
    record!(kind::FUZZ, "seed" => seed, "calls" => calls, "failures" => 0,
        "int80" => stats.per_mech[0], "sysenter" => stats.per_mech[1],
        "callgate" => stats.per_mech[2], "syscall" => stats.per_mech[3],
        "ok" => stats.ok, "EFAULT" => efault, "EBADF" => ebadf, "EINVAL" => einval,
        "ENOSYS" => enosys, "flagged" => stats.flagged, "ticks" => ticks,
        "helpers" => stats.helpers, "helper_calls" => HELPER_MADE.load(SeqCst),
        "exhausted" => exhausted, "helper_cpus" => HELPER_CPUS.load(SeqCst));
    0
}

/// The time-stamp counter (ring 3 may read it: CR4.TSD is clear).
fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: RDTSC only reads the counter; the caller checked FEATURE_TSC.
    unsafe { core::arch::asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    (hi as u64) << 32 | lo as u64
}

fn report_failure(seed: u32, i: u32, p: &Plan, a: &After, why: &str) {
    println!("fuzz: FAILED at call {i} (seed {seed}): {why}");
    println!(
        "fuzz:   {} {} (nr {:#x}) args [{:#x}, {:#x}, {:#x}, {:#x}, {:#x}, {:#x}] flags {}",
        p.mech.title(),
        nr::name(p.nr),
        p.nr,
        p.args[0],
        p.args[1],
        p.args[2],
        p.args[3],
        p.args[4],
        p.args[5],
        Flags(p.flags)
    );
    println!(
        "fuzz:   expected {:#x}, got {:#x}; registers after: ebx {:#x} ecx {:#x} edx {:#x} esi {:#x} edi {:#x} ebp {:#x} eflags {:#x}",
        p.want.raw(),
        a.eax,
        a.ebx,
        a.ecx,
        a.edx,
        a.esi,
        a.edi,
        a.ebp,
        a.eflags
    );
    println!(
        "fuzz:   again: cargo xtask run --prog fuzz --append \"seed={seed} fuzz_calls={}\"",
        i + 1
    );
    record!(kind::FUZZ, "seed" => seed, "calls" => i + 1, "failures" => 1,
        "mech" => p.mech.key(), "nr" => p.nr, "why" => userland::abi::report::Escaped(why));
}
