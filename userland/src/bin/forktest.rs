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
//!
//! Under the model the share also says where each other CPU's part of
//! every batch lies in its user stream, so the host computes its overlap
//! with the boot CPU in modelled time (xtask's `results::overlap`). The
//! boot CPU's own snapshot count says which batch it times (two per
//! batch: odd past the timed regions' first, batch k is timed). A
//! forker's part of batch k runs from the snapshot it takes, between two
//! rounds, when it first sees batch k timed to the one it takes when it
//! first sees it no longer timed; a batch it never saw timed gets an
//! empty pair (two snapshots back to back), so every forker's stream
//! holds exactly two snapshots per batch ([`Parts`]).
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use userland::abi::layout::MAX_CPUS;
use userland::abi::model::{stream_key, Snaps, SNAP_USER};
use userland::abi::report::{kind, names, Figure, Measure};
use userland::abi::syscall::PRIO_USER;
use userland::bench::{self};
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
/// The boot CPU's first snapshot of its timed regions, as its forkers
/// work it out (0 until one has started).
static FIRST: AtomicU32 = AtomicU32::new(0);
/// Each other CPU's user-stream snapshot count when its forker started:
/// where its parts begin (the share record's `snap_first`).
static SNAP_FIRST: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];

/// The turns measurement: every CPU reads the TSC in a loop for this many
/// ticks of virtual time (under icount, instructions of all CPUs).
const TURN_WINDOW: u64 = 4_000_000;
/// A step between two reads longer than this is other CPUs' work: the run
/// of this CPU's instructions before it ended (one loop is some ten
/// instructions).
const TURN_GAP: u64 = 64;
/// log2 buckets of run lengths: 2^0 to 2^23 ticks.
const TURN_BUCKETS: usize = 24;
static TURN_GO: AtomicU32 = AtomicU32::new(0);
static TURN_DONE: AtomicU32 = AtomicU32::new(0);
static TURN_HIST: [[AtomicU32; TURN_BUCKETS]; MAX_CPUS] =
    [const { [const { AtomicU32::new(0) }; TURN_BUCKETS] }; MAX_CPUS];

fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: RDTSC reads a counter (the program checked the TSC exists).
    unsafe { core::arch::asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    ((hi as u64) << 32) | lo as u64
}

/// This CPU's runs for [`TURN_WINDOW`] ticks, from when CPU 0 says go:
/// the length of each stretch of its own instructions between two jumps
/// of the TSC, into its histogram.
fn measure_turns(cpu: usize) {
    while TURN_GO.load(Ordering::Acquire) == 0 {
        core::hint::spin_loop();
    }
    let start = rdtsc();
    let (mut last, mut run) = (start, start);
    let hist = &TURN_HIST[cpu % MAX_CPUS];
    let note = |len: u64| {
        let k = (63 - len.max(1).leading_zeros() as usize).min(TURN_BUCKETS - 1);
        hist[k].fetch_add(1, Ordering::Relaxed);
    };
    loop {
        let now = rdtsc();
        if now - last > TURN_GAP {
            note(last - run);
            run = now;
        }
        last = now;
        if now - start > TURN_WINDOW {
            break;
        }
    }
    note(last - run);
}

fn turn_measurer(_: u32) {
    measure_turns(threads::cpu() as usize);
    TURN_DONE.fetch_add(1, Ordering::Release);
}

/// How the CPUs' instructions interleave, before anything is timed: a
/// `turns` record per CPU (a histogram of its runs).
#[inline(never)]
fn report_turns(cpus: u32) {
    use core::fmt::Write;
    let mut started = 0;
    for c in 1..cpus {
        if threads::spawn_on(turn_measurer, c, PRIO_USER, c).is_ok() {
            started += 1;
        }
    }
    TURN_GO.store(1, Ordering::Release);
    measure_turns(0);
    while TURN_DONE.load(Ordering::Acquire) < started {
        threads::sleep(1);
    }
    for c in 0..(cpus as usize).min(MAX_CPUS) {
        let mut hist = userland::Line::new();
        let mut runs = 0u32;
        for (k, b) in TURN_HIST[c].iter().enumerate() {
            let n = b.load(Ordering::Relaxed);
            runs += n;
            let _ = write!(hist, "{}{n}", if k == 0 { "" } else { "," });
        }
        record!(kind::TURNS, "cpu" => c, "runs" => runs, "window" => TURN_WINDOW,
            "hist" => hist.as_str());
    }
}

/// One round: fork, the child exits at once, the parent reaps it.
#[inline(always)]
fn round() -> bool {
    match sys::fork() {
        Ok(0) => sys::exit(0),
        Ok(pid) => sys::waitpid(pid as i32, 0).is_ok(),
        Err(_) => false,
    }
}

/// A forker's parts of the boot CPU's batches in its CPU's user stream,
/// two snapshots per batch, in batch order: batch k's "open" when the
/// forker first sees k timed, its "close" when it first sees k no longer
/// timed, and an empty pair (two snapshots back to back) for a batch it
/// never saw timed. Only the parent's forker thread snapshots, between
/// rounds: a child exits at once.
struct Parts {
    /// The forker's CPU (not 0).
    cpu: usize,
    /// The boot CPU's first snapshot of its timed regions.
    first: u32,
    /// The batches the boot CPU times.
    batches: u32,
    /// The first batch with no snapshots yet.
    next: u32,
    /// Whether batch `next` is open (its first snapshot taken).
    open: bool,
}

impl Parts {
    /// The batch the boot CPU times now: between its two snapshots of
    /// that batch (its count odd past `first`).
    fn timed(&self) -> Option<u32> {
        let n = userland::model::next_seq().wrapping_sub(self.first);
        (n % 2 == 1 && n < 2 * self.batches).then_some(n / 2)
    }

    /// Empty pairs for every batch before `batch` that has none (the
    /// count's page made this process's own first: a pair is empty).
    fn skip_to(&mut self, batch: u32) {
        if self.next < batch {
            userland::model::own_count_on(self.cpu);
        }
        while self.next < batch {
            userland::model::snap_on(self.cpu);
            userland::model::snap_on(self.cpu);
            self.next += 1;
        }
    }

    /// Closes the open batch.
    fn close(&mut self) {
        if self.open {
            userland::model::snap_on(self.cpu);
            self.open = false;
            self.next += 1;
        }
    }

    /// Between two rounds: closes the open batch if the boot CPU no longer
    /// times it, and opens the batch it times if that has no snapshots yet.
    fn step(&mut self) {
        let timed = self.timed();
        if timed != Some(self.next) {
            self.close();
        }
        if let Some(k) = timed.filter(|&k| k >= self.next && !self.open) {
            self.skip_to(k);
            userland::model::snap_on(self.cpu);
            self.open = true;
        }
    }

    /// At the end: closes an open batch, and gives every batch it never
    /// saw an empty pair.
    fn finish(&mut self) {
        self.close();
        self.skip_to(self.batches);
    }
}

/// Another CPU's forker: rounds until told to stop.
fn forker(_: u32) {
    let me = threads::cpu();
    RAN.fetch_or(1 << me, Ordering::Relaxed);
    let cpu = me as usize % MAX_CPUS;
    // The boot CPU's timed regions follow its calibration's, two
    // snapshots each, and nothing snapshots before those: its count
    // starts at 0 in this program (`main`'s `calib`). Worked out here,
    // not passed, so that `main` is the one-CPU program's to the
    // instruction; the host checks it against the samples record.
    let first = 2 * CALIB_RUNS as u32;
    FIRST.store(first, Ordering::Relaxed);
    SNAP_FIRST[cpu].store(userland::model::next_seq_on(cpu), Ordering::Relaxed);
    let mut parts = Parts {
        cpu,
        first,
        batches: (sys::cpuinfo().batches as usize).clamp(1, MAX_BATCHES) as u32,
        next: 0,
        open: false,
    };
    while STOP.load(Ordering::Relaxed) == 0 {
        parts.step();
        if !round() {
            break;
        }
        if TIMING.load(Ordering::Relaxed) == 1 {
            TIMED_ROUNDS[me as usize % MAX_CPUS].fetch_add(1, Ordering::Relaxed);
        }
    }
    parts.finish();
    DONE.fetch_add(1, Ordering::Release);
}

/// The `share` record of `forktest.fork_exit` on `cpus` CPUs: the rounds
/// each CPU finished while CPU 0 timed its own (`timed`, counted), CPU 0's first,
/// and where each CPU's part of every batch lies in its user stream: CPU
/// 0's timed regions, two snapshots each, and each other CPU's [`Parts`]
/// (none for a CPU whose forker did not run; no snapshots named when no
/// forker ran).
/// Out of line: its buffers stay out of `main`'s frame, whose stack pages
/// every fork copies or shares.
#[inline(never)]
fn report_share(cpus: u32, timed: u32) {
    use core::fmt::Write;
    let ran = RAN.load(Ordering::Relaxed);
    let (mut list, mut firsts, mut per) = (
        userland::Line::new(),
        userland::Line::new(),
        userland::Line::new(),
    );
    let _ = write!(list, "{timed}");
    let _ = write!(firsts, "{}", FIRST.load(Ordering::Relaxed));
    let _ = write!(per, "2");
    for c in 1..(cpus as usize).min(MAX_CPUS) {
        let _ = write!(list, ",{}", TIMED_ROUNDS[c].load(Ordering::Relaxed));
        let (first, n) = match ran & (1 << c) {
            0 => (0, 0),
            _ => (SNAP_FIRST[c].load(Ordering::Relaxed), 2),
        };
        let _ = write!(firsts, ",{first}");
        let _ = write!(per, ",{n}");
    }
    if ran == 0 {
        record!(kind::SHARE, "name" => names::FORKTEST_FORK_EXIT, "work" => "rounds",
            "per_cpu" => list.as_str());
    } else {
        record!(kind::SHARE, "name" => names::FORKTEST_FORK_EXIT, "work" => "rounds",
            "per_cpu" => list.as_str(), "stream" => stream_key(SNAP_USER),
            "snap_first" => firsts.as_str(), "snap_per_batch" => per.as_str());
    }
}

#[unsafe(no_mangle)]
extern "C" fn main(_arg: u32) -> i32 {
    let (info, fence, batches, _) = userland::timing_start!("forktest", MAX_BATCHES, else 0);
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
    record!(kind::CLOCK, "clock" => info.clock_key(),
        "tsc_hz" => info.tsc_hz, "timer_overhead" => overhead, "batches" => batches,
        "batch_size" => ROUNDS);
    let cpus = info.cpus.max(1);
    if cpus > 1 {
        report_turns(cpus);
    }
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
    // The rounds CPU 0 finished while timed, counted as they end (the
    // share record's first count: work done, not work planned).
    let mut done = 0u32;
    // Only where there are forkers to count: on one CPU the store would
    // map this program's first .bss page (demand-zero, else untouched), and
    // every fork would then share one more page.
    if started > 0 {
        TIMING.store(1, Ordering::Relaxed);
    }
    for v in samples[..batches].iter_mut() {
        *v = bench::timed_region(fence, || {
            for _ in 0..ROUNDS {
                let r = round();
                ok &= r;
                done += r as u32;
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
        report_share(cpus, done);
    }
    println!(
        "forktest: fork_exit {pages} pages: median {:.1}, min {:.1} {unit} per round",
        s.median, s.min
    );
    0
}
