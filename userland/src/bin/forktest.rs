//! forktest (`prog=forktest`): lmbench's `lat_proc fork` loop, the
//! micro-benchmark of the pmap experiment. The parent holds `fork_pages=`
//! touched pages of heap; each round forks, the child exits at once, the
//! parent waits for it. One figure, `forktest.fork_exit`: clock ticks per
//! round (fork + the child's exit + the parent's wait and reap), timed in
//! batches like every other benchmark.
//!
//! With several CPUs (`--smp N`) one forking thread runs on every CPU, all
//! in this one process, as the fork experiment's MP kernel ran one forktest
//! per CPU: what a fork changes in this process's page tables (the
//! alternate slot of `pmap=apte`, the write protection of `fork=cow`) must
//! then be shot down on the others. The figure is the boot CPU's rounds,
//! timed while the others fork; `cpus` names every CPU that forked, and
//! its `share` record how many rounds each CPU finished while the boot CPU
//! was timed. Under icount QEMU runs one CPU at a time in long turns, so
//! the others may finish few or none: the share says so, and xtask flags
//! a figure one CPU did nearly alone.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use userland::abi::layout::MAX_CPUS;
use userland::abi::model::{Snaps, SNAP_USER};
use userland::abi::report::{kind, names, Figure, Measure};
use userland::abi::syscall::{CpuInfo, FEATURE_TSC, PRIO_USER};
use userland::bench::{self, Fence};
use userland::{println, record, sys, threads};

/// Rounds per timed batch.
const ROUNDS: u32 = 8;
/// Batches at most (`batches=` caps it lower).
const MAX_BATCHES: usize = 64;
/// Empty timed regions for the timer's calibration.
const CALIB_RUNS: usize = 16;

/// Where the other CPUs' forkers ran (bit per CPU), and how many are done.
static RAN: AtomicU32 = AtomicU32::new(0);
static STOP: AtomicU32 = AtomicU32::new(0);
static DONE: AtomicU32 = AtomicU32::new(0);
/// Set while the boot CPU's batches are timed.
static TIMING: AtomicU32 = AtomicU32::new(0);
/// The rounds each other CPU's forker finished while `TIMING` was set.
static TIMED_ROUNDS: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];

/// One round: fork, the child exits at once, the parent reaps it.
#[inline(always)]
fn round() -> bool {
    match sys::fork() {
        Ok(0) => sys::exit(0),
        Ok(pid) => sys::waitpid(pid as i32, 0).is_ok(),
        Err(_) => false,
    }
}

/// Another CPU's forker: rounds until told to stop.
fn forker(_: u32) {
    let me = threads::cpu();
    RAN.fetch_or(1 << me, Ordering::Relaxed);
    while STOP.load(Ordering::Relaxed) == 0 {
        if !round() {
            break;
        }
        if TIMING.load(Ordering::Relaxed) == 1 {
            TIMED_ROUNDS[me as usize % MAX_CPUS].fetch_add(1, Ordering::Relaxed);
        }
    }
    DONE.fetch_add(1, Ordering::Release);
}

/// The `share` record of `forktest.fork_exit` on `cpus` CPUs: the rounds
/// each CPU finished while CPU 0 timed its `timed` rounds, CPU 0's first.
/// Out of line: its buffer stays out of `main`'s frame, whose stack pages
/// every fork copies or shares.
#[inline(never)]
fn report_share(cpus: u32, timed: u32) {
    let mut list = userland::Line::new();
    let _ = core::fmt::Write::write_fmt(&mut list, format_args!("{timed}"));
    for r in TIMED_ROUNDS.iter().take(cpus as usize).skip(1) {
        let _ =
            core::fmt::Write::write_fmt(&mut list, format_args!(",{}", r.load(Ordering::Relaxed)));
    }
    record!(kind::SHARE, "name" => names::FORKTEST_FORK_EXIT, "work" => "rounds",
        "per_cpu" => list.as_str());
}

#[unsafe(no_mangle)]
extern "C" fn main(_arg: u32) -> i32 {
    let info: CpuInfo = sys::cpuinfo();
    if info.features & FEATURE_TSC == 0 {
        println!("forktest: this CPU has no TSC: nothing can be timed");
        return 0;
    }
    let fence = Fence::for_cpu(&info);
    let batches = (info.batches as usize).clamp(1, MAX_BATCHES);
    let pages = info.fork_pages.max(1);
    // The parent's memory: `pages` pages of heap, each touched (written),
    // so each is mapped, private and dirty at every fork.
    let Ok(heap) = sys::sbrk((pages * 4096) as i32) else {
        println!("forktest: no room for {pages} pages of heap");
        return 1;
    };
    for p in 0..pages {
        // SAFETY: the heap just grown; one word per page.
        unsafe { ((heap + p * 4096) as *mut u32).write_volatile(p) };
    }
    // The timer around nothing: its overhead, and the model's calibration.
    let calib = userland::model::next_seq();
    let mut empty = [0u64; CALIB_RUNS];
    for v in empty.iter_mut() {
        *v = bench::timed_region(fence, || {});
    }
    empty.sort_unstable();
    let overhead = empty[CALIB_RUNS / 2];
    record!(kind::CLOCK, "clock" => if info.clock == 1 { "icount" } else { "tsc" },
        "tsc_hz" => info.tsc_hz, "timer_overhead" => overhead, "batches" => batches,
        "batch_size" => ROUNDS);
    let cpus = info.cpus.max(1);
    let mut started = 0;
    for c in 1..cpus {
        if threads::spawn_on(forker, c, PRIO_USER, c).is_ok() {
            started += 1;
        }
    }
    let unit = info.unit();
    println!(
        "forktest: fork + exit + wait, the parent holding {pages} touched pages; {batches} batches of {ROUNDS} rounds on CPU 0, {} CPU(s) forking; {unit} per round",
        started + 1
    );
    // A warm-up batch (the first fork makes the page tables the rest reuse).
    for _ in 0..ROUNDS {
        if !round() {
            println!("forktest: fork failed");
            return 1;
        }
    }
    let first = userland::model::next_seq();
    let mut samples = [0u64; MAX_BATCHES];
    let mut ok = true;
    // Only where there are forkers to count: on one CPU the store would
    // map this program's first .bss page (demand-zero, else untouched), and
    // every fork would then share one more page.
    if started > 0 {
        TIMING.store(1, Ordering::Relaxed);
    }
    for v in samples[..batches].iter_mut() {
        *v = bench::timed_region(fence, || {
            for _ in 0..ROUNDS {
                ok &= round();
            }
        })
        .saturating_sub(overhead);
    }
    if started > 0 {
        TIMING.store(0, Ordering::Relaxed);
    }
    STOP.store(1, Ordering::Relaxed);
    // Wait by sleeping, not yielding: under icount QEMU runs one CPU at a
    // time, and a CPU spinning on `yield` may keep the others from running.
    while DONE.load(Ordering::Acquire) < started {
        threads::sleep(1);
    }
    if !ok {
        println!("forktest: a fork or a wait failed while timed");
        return 1;
    }
    let mut call = userland::Line::new();
    let _ = core::fmt::Write::write_fmt(&mut call, format_args!("{pages}p"));
    let s = bench::report(&Figure {
        name: names::FORKTEST_FORK_EXIT,
        mech: names::FORKTEST,
        path: "fork_exit",
        call: call.as_str(),
        measure: Measure::PerOp,
        unit: "",
        batch_size: ROUNDS,
        samples: &samples[..batches],
        tsc_hz: info.tsc_hz,
        counters: None,
        snaps: Some(Snaps {
            stream: SNAP_USER,
            calib,
            calib_runs: CALIB_RUNS as u32,
            batches: first,
        }),
        cpus: 1 | RAN.load(Ordering::Relaxed),
    });
    if cpus > 1 {
        report_share(cpus, batches as u32 * ROUNDS);
    }
    println!(
        "forktest: fork_exit {pages} pages: median {:.1}, min {:.1} {unit} per round",
        s.median, s.min
    );
    0
}
