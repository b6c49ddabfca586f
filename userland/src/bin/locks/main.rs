//! Turnstiles and sleepqueues from ring 3: with argument 1 the tests
//! (priority propagation, wake-up order, a stress with no lost wake-ups,
//! pool exhaustion, EDEADLK; with more than one CPU also across CPUs),
//! with 2 and 3 a task that ends while its threads run on other CPUs, with
//! 4 one that single-steps on every CPU at once
//! (`abi::syscall::locks_arg`), otherwise the benchmarks for each pool
//! alignment in one boot.
//!
//! The program in parts, each in its file: `lock_tests.rs` (the tests),
//! `benches.rs` (the benchmarks on one CPU and their timing), `across.rs`
//! (the figures across CPUs and false sharing) and `ending.rs` (a task
//! that ends, or single-steps, while its threads run elsewhere); this file
//! keeps the entry and the helpers they share. The parts are included
//! into this one module, not made modules of their own: one module is one
//! codegen unit, so the compiled program, and with it every icount figure
//! it gives, stays as one file made it.
#![no_std]
#![no_main]

use core::fmt::Write as _;
use core::sync::atomic::{AtomicU32, Ordering::SeqCst};

use userland::abi::model::{Snaps, SNAP_USER};
use userland::abi::report::{kind, names, Figure, Measure};
use userland::abi::syscall::{
    errno, locks_arg, nr, CpuInfo, FEATURE_TSC, MAX_THREADS, POOL_ALIGN_EVERY,
};
use userland::abi::Mechanism;
use userland::bench::{self, Fence};
use userland::threads::{self, Umtx};
use userland::{println, record, sys, Line};

#[unsafe(no_mangle)]
extern "C" fn main(arg: u32) -> i32 {
    match arg {
        locks_arg::TESTS => tests(),
        locks_arg::END_EXIT => end_elsewhere(false),
        locks_arg::END_FAULT => end_elsewhere(true),
        locks_arg::END_STEP => step_everywhere(),
        _ => benches(),
    }
}

/// How many CPUs run (threads may be created on `0..cpus()`).
fn cpus() -> u32 {
    sys::cpuinfo().cpus.max(1)
}

/// The CPUs threads of the running figure ran on (bit n: CPU n).
static RAN_ON: AtomicU32 = AtomicU32::new(0);

/// Notes the caller's CPU in RAN_ON; returns its slot in `WORK`.
fn note_cpu() -> usize {
    let c = threads::cpu();
    RAN_ON.fetch_or(1 << c, SeqCst);
    (c as usize).min(WORK.len() - 1)
}

/// Brackets a thread's part of a cross-CPU batch with user-stream
/// snapshots (its first and its last), on a CPU other than 0 (`slot`, as
/// [`note_cpu`] gives it): the host compares their modelled clocks with
/// CPU 0's timed region (the overlap). CPU 0's part is the timed region
/// itself, whose pairs no other snapshot may split.
fn part_snap(slot: usize) {
    if slot != 0 {
        userland::model::snap_on(slot);
    }
}

/// Where each CPU's part of every batch of a cross-CPU figure lies in its
/// user stream (the share record's `snap_first` and `snap_per_batch`):
/// CPU 0's timed regions, two snapshots each, and on each other CPU of
/// the figure the two [`part_snap`]s of its one thread per batch.
struct Parts {
    first: [u32; 8],
    per_batch: [u32; 8],
}

impl Parts {
    /// CPU 0's timed regions from its snapshot `first`, and the next
    /// snapshots on each other CPU of `cpus` (a mask), read between
    /// figures, when no thread works there.
    fn new(first: u32, cpus: u32) -> Parts {
        let mut p = Parts {
            first: [0; 8],
            per_batch: [0; 8],
        };
        p.first[0] = first;
        p.per_batch[0] = 2;
        for c in 1..8 {
            if cpus & (1 << c) != 0 {
                p.first[c] = userland::model::next_seq_on(c);
                p.per_batch[c] = 2;
            }
        }
        p
    }
}

/// The operations each CPU's threads did in the running cross-CPU figure
/// (slot n: CPU n), added by each thread when its work is done: the
/// figure's `share` record.
static WORK: [AtomicU32; 8] = [const { AtomicU32::new(0) }; 8];

static FAILED: AtomicU32 = AtomicU32::new(0);

fn check(name: &str, ok: bool, got: u32) {
    if !ok {
        FAILED.fetch_add(1, SeqCst);
        println!("locks: FAIL {} (got {})", name, got);
    }
    record!(kind::CHECK, "mech" => "locks", "name" => Esc(name),
        "result" => if ok { "pass" } else { "fail" }, "got" => got);
}

/// A check that cannot run here (one CPU for a check across CPUs):
/// printed and recorded as skipped, never as passed.
fn skip(name: &str, why: &str) {
    println!("locks: SKIP {name}: {why}");
    record!(kind::CHECK, "mech" => "locks", "name" => Esc(name),
        "result" => "skip", "got" => 0);
}

/// `check` with a prefix on the name ("across CPUs: ...").
fn checkp(prefix: &str, name: &str, ok: bool, got: u32) {
    let mut l = Line::new();
    let _ = write!(l, "{prefix}{name}");
    check(l.as_str(), ok, got);
}

struct Esc<'a>(&'a str);
impl core::fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        userland::abi::report::Escaped(self.0).fmt(f)
    }
}

/// The channel finished threads wake their creator on.
const CHAN_DONE: u32 = 0x0d0e;

/// A thread's last act: count itself done and wake the joiner.
fn finished() {
    DONE.fetch_add(1, SeqCst);
    threads::wakeup(CHAN_DONE, true);
}

/// Waits until `done` reaches `n`. The timeout covers the gap between the
/// check and the sleep, where a wake-up could come too early.
fn join(done: &AtomicU32, n: u32) {
    let mut rounds = 0;
    while done.load(SeqCst) < n && rounds < 10_000 {
        let _ = threads::sleep_on(CHAN_DONE, 2);
        rounds += 1;
    }
}

include!("lock_tests.rs");

include!("benches.rs");

include!("across.rs");

include!("ending.rs");
