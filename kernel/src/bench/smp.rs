//! `mode=smp`: what crosses CPUs, measured in one boot.
//!
//! (a) false sharing: every CPU hammers the lock word of its own turnstile,
//!     with the pools packed, 64-aligned and 128-aligned;
//!     and every CPU writing a word of its own 4, 64 and 4096 bytes from the
//!     next CPU's (one line, adjacent lines, different pages);
//! (b) lock hand-off ping-pong between two CPUs;
//! (c) the TLB: a local INVLPG against a full CR3 reload, and a remote
//!     shootdown by IPI;
//!
//! The fork experiment itself runs as a user program on real processes
//! (`prog=forktest`, `kernel/src/vm/pmap/` for the ways to reach another
//! address space).
//!
//! TCG does not model caches, and the icount clock counts instructions: the
//! report says so beside these figures.

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU32, Ordering};

use abi::cmdline::Clock;
use abi::layout::PAGE_SIZE;
use abi::model::{interrupt_marker, marker_disp, Snaps, SNAP_KERNEL};
use abi::report::{kind, Figure, Measure};

use crate::arch::idt::{self, Gate, GateKind};
use crate::arch::smp::{self, command};
use crate::arch::{apic, marker, paging};
use crate::sync::pool::Align;
use crate::task::turnstile;
use crate::{kprintln, record};

/// Batches per figure: each keeps every batch's total (its samples).
const BATCHES: usize = 8;
/// Lock/unlock pairs per CPU per false-sharing batch.
const HAMMER_OPS: u32 = 2_500;
/// Word writes per CPU per batch of the line-distance benchmark.
const LINE_WRITES: u32 = 1_000;
/// Calibration runs of the line-distance benchmark (no writes).
const LINE_CALIB_RUNS: u32 = 3;
/// The distances in bytes between two CPUs' words, with each figure's name
/// (`smp.lines.<name>`): one 64-byte line, adjacent 64-byte lines (one
/// 128-byte pair), different pages.
const LINE_STRIDES: [(u32, &str); 3] = [(4, "same"), (64, "adjacent"), (4096, "page")];
/// Bytes of each distance's own region of [`LINES`]: a word per CPU at the
/// largest stride.
const LINE_REGION: usize = abi::layout::MAX_CPUS * 4096;
/// The words the line-distance benchmark writes: one region per distance,
/// so each starts on lines no CPU has touched.
#[repr(C, align(4096))]
struct Lines([AtomicU32; LINE_STRIDES.len() * LINE_REGION / 4]);
static LINES: Lines = Lines([const { AtomicU32::new(0) }; LINE_STRIDES.len() * LINE_REGION / 4]);
/// The word of `cpu` at `stride` bytes per CPU, in the region of distance `k`.
fn line_word(k: usize, stride: u32, cpu: usize) -> &'static AtomicU32 {
    &LINES.0[(k * LINE_REGION + cpu * stride as usize) / 4]
}
/// One store the compiler keeps (a loop of relaxed stores to one atomic
/// may be folded into its last).
#[inline(always)]
fn write_word(w: &AtomicU32, v: u32) {
    // SAFETY: `as_ptr` points at a live, aligned static word; a volatile
    // store of a whole u32 races with no non-atomic access (only this CPU
    // writes its word, and nobody reads it).
    unsafe { w.as_ptr().write_volatile(v) };
}
/// The distance the APs write at (an index into LINE_STRIDES).
static LINE_K: AtomicU32 = AtomicU32::new(0);
/// Round trips per ping-pong batch.
const PINGS: u32 = 250;
/// Invalidations (or CR3 reloads) per TLB batch.
const TLB_ROUNDS: u32 = 250;
/// Remote shootdowns per batch.
const SHOOTDOWNS: u32 = 25;
/// The IPI vector of the TLB shootdown.
const VECTOR_SHOOTDOWN: u8 = 0xF1;
/// The page the shootdown drops from remote TLBs.
static SHOOT_ADDR: AtomicU32 = AtomicU32::new(0);
/// The word two CPUs hand back and forth.
static PING: AtomicU32 = AtomicU32::new(0);
static START: AtomicU32 = AtomicU32::new(0);
/// Each AP's "I wait for START" flag, each in a 128-byte block of its own.
#[repr(C, align(128))]
struct Flag(AtomicU32);
static READY: [Flag; abi::layout::MAX_CPUS] =
    [const { Flag(AtomicU32::new(0)) }; abi::layout::MAX_CPUS];

/// An AP's side of the start barrier: it says it waits, then waits.
fn wait_start(cpu: usize) {
    READY[cpu].0.store(1, Ordering::Release);
    while START.load(Ordering::Acquire) == 0 {
        core::hint::spin_loop();
    }
}

/// Posts `command` to every AP of `n` and returns once each waits for
/// START: their wake-up (the reschedule IPI, its delivery) stays out of
/// the timed region, which then starts every CPU at once.
fn post_all(n: usize, command: u32, arg: u32) {
    START.store(0, Ordering::Release);
    for cpu in 1..n {
        READY[cpu].0.store(0, Ordering::Relaxed);
        smp::post(cpu, command, arg);
    }
    for cpu in 1..n {
        while READY[cpu].0.load(Ordering::Acquire) == 0 {
            core::hint::spin_loop();
        }
    }
}

fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: RDTSC reads a counter; mode=smp needs a TSC (checked by run).
    unsafe { asm!("lfence", "rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    ((hi as u64) << 32) | lo as u64
}

global_asm!(
    r#"
    .pushsection .text.ipi, "ax"
    .global ipi_shootdown_entry
    /* The shootdown IPI: on an AP, in ring 0 (APs run no user code). The
       marker tells the model a delivery of this vector happened here. */
ipi_shootdown_entry:
    nopl {entry}(%eax)
    pushal
    cld
    call {handler}
    popal
    iret
    .popsection
    "#,
    handler = sym shootdown,
    entry = const marker_disp(interrupt_marker(VECTOR_SHOOTDOWN)),
    options(att_syntax)
);

unsafe extern "C" {
    static ipi_shootdown_entry: u8;
}

/// The shootdown's work on its target: two snapshots per IPI, whose
/// numbers CPU 0 had the target reserve before the figure
/// ([`command::RESERVE_SNAPS`]), so each is one instruction here.
extern "C" fn shootdown() {
    marker::snap_reserved();
    paging::invlpg(SHOOT_ADDR.load(Ordering::Relaxed));
    marker::snap_reserved();
    smp::this_cpu().ipis.fetch_add(1, Ordering::Release);
    apic::eoi();
}

/// What an AP does with a posted command. Each benchmark command brackets
/// the AP's part of a batch with two kernel-stream snapshots (its first
/// and last instruction of the work), reserved before the AP says it is
/// ready (for the ping-pong, by a [`command::RESERVE_SNAPS`] before the
/// figure): the model's clocks at them are what the host compares with
/// CPU 0's timed region (the `share` record's `snap_first`).
fn worker(cpu: usize, c: u32, arg: u32) {
    match c {
        command::HAMMER => {
            marker::reserve(cpu, 2);
            wait_start(cpu);
            marker::snap_reserved();
            let lock = turnstile::spin(cpu);
            for _ in 0..arg {
                lock.lock();
                lock.unlock();
            }
            marker::snap_reserved();
        }
        command::LINES => {
            marker::reserve(cpu, 2);
            wait_start(cpu);
            marker::snap_reserved();
            let k = LINE_K.load(Ordering::Relaxed) as usize;
            let word = line_word(k, LINE_STRIDES[k].0, cpu);
            for i in 0..arg {
                write_word(word, i);
            }
            marker::snap_reserved();
        }
        command::PONG => {
            // Its two snapshots per batch were reserved before the figure.
            marker::snap_reserved();
            for _ in 0..arg {
                while PING.load(Ordering::Acquire) != 1 {
                    core::hint::spin_loop();
                }
                PING.store(0, Ordering::Release);
            }
            marker::snap_reserved();
        }
        command::RESERVE_SNAPS => {
            marker::reserve(cpu, arg);
        }
        _ => {}
    }
}

/// `f` with the scheduler lock, which guards the sync-object pools (held
/// only around the call: the APs take it to look for threads).
fn with_sched_lock<R>(f: impl FnOnce() -> R) -> R {
    let _g = crate::task::sched::locked();
    f()
}

/// The human line of one figure: its median, its unit, a note.
fn show(title: &str, value: f64, unit: &str, note: &str) {
    kprintln!("  {:<34} {:>14.1} {}{}", title, value, unit, note);
}

/// How the figures of one boot are reported: the clock's facts every
/// record needs.
struct Reporter {
    tsc_hz: u64,
    /// The clock's unit, for the human lines of per-operation figures.
    unit: &'static str,
}

impl Reporter {
    /// Reports figure `name` (`ops` operations per batch) and shows its
    /// median; returns the median.
    #[allow(clippy::too_many_arguments)]
    fn figure(
        &self,
        name: &str,
        call: &str,
        measure: Measure,
        title: &str,
        ops: u32,
        samples: &[u64],
        snaps: Snaps,
        note: &str,
        cpus: u32,
    ) -> f64 {
        let (group, path) = split_name(name);
        let unit = match measure {
            Measure::PerOp => "",
            Measure::Throughput => "ops/s",
        };
        let s = super::report(&Figure {
            name,
            mech: group,
            path,
            call,
            measure,
            unit,
            batch_size: ops,
            samples,
            tsc_hz: self.tsc_hz,
            counters: None,
            cpus,
            snaps: Some(snaps),
        });
        show(
            title,
            s.median,
            if unit.is_empty() { self.unit } else { unit },
            note,
        );
        s.median
    }

    /// Ticks per operation: lower is better.
    fn per_op(&self, name: &str, call: &str, title: &str, ops: u32, data: (&[u64], Snaps)) -> f64 {
        self.per_op_on(0, name, call, title, ops, data)
    }

    /// [`Reporter::per_op`] of a figure that ran on CPUs `cpus` (a mask).
    fn per_op_on(
        &self,
        cpus: u32,
        name: &str,
        call: &str,
        title: &str,
        ops: u32,
        (samples, snaps): (&[u64], Snaps),
    ) -> f64 {
        self.figure(
            name,
            call,
            Measure::PerOp,
            title,
            ops,
            samples,
            snaps,
            "",
            cpus,
        )
    }

    /// A per-operation figure of CPUs 0 and 1, then its `share` record:
    /// `done[c]` operations of kind `work` on CPU c, 0 on the other CPUs
    /// of the machine's `n`, and where each CPU's snapshots of its part lie
    /// (`parts`).
    #[allow(clippy::too_many_arguments)]
    fn per_op_two_cpus(
        &self,
        name: &str,
        call: &str,
        title: &str,
        ops: u32,
        data: (&[u64], Snaps),
        work: &str,
        done: [u64; 2],
        n: usize,
        parts: &Parts,
    ) -> f64 {
        let mut per_cpu = [0u64; abi::layout::MAX_CPUS];
        per_cpu[..2].copy_from_slice(&done);
        let m = self.per_op_on(0b11, name, call, title, ops, data);
        share(name, work, &per_cpu[..n], parts);
        m
    }
}

/// Where each CPU's part of every batch of a multi-CPU figure lies in its
/// kernel stream: CPU c's part of batch i runs from its snapshot
/// `first[c] + per_batch[c] * i` to the last of its `per_batch[c]`
/// snapshots of that batch. CPU 0's part is the timed region (its pair);
/// a CPU the figure did not use has `per_batch` 0.
struct Parts {
    first: [u32; abi::layout::MAX_CPUS],
    per_batch: [u32; abi::layout::MAX_CPUS],
}

impl Parts {
    /// CPU 0's timed regions from snapshot `first0` on, and the next
    /// `per_batch` snapshots of each AP of `aps` per batch, from the ones
    /// they will take next (read while they are idle).
    fn new(first0: u32, aps: core::ops::Range<usize>, per_batch: u32) -> Parts {
        let mut p = Parts {
            first: [0; abi::layout::MAX_CPUS],
            per_batch: [0; abi::layout::MAX_CPUS],
        };
        p.first[0] = first0;
        p.per_batch[0] = 2;
        for c in aps {
            p.first[c] = marker::snap_seq_of(c);
            p.per_batch[c] = per_batch;
        }
        p
    }
}

/// Reports the `share` record of figure `name`: `per_cpu[c]` operations of
/// kind `work` done on CPU c over every batch, CPU 0 first, 0 included.
/// Each count is what that CPU finished: its own loop's for CPU 0, for an
/// AP the commands it answered done (or, for shootdowns, the IPIs it
/// acknowledged), counted outside the timed regions. `parts`: where each
/// CPU's part of each batch lies in its kernel stream (`snap_first`,
/// `snap_per_batch`), from which the host computes, under the model, how
/// much of CPU 0's timed region each other CPU's part overlapped.
fn share(name: &str, work: &str, per_cpu: &[u64], parts: &Parts) {
    use crate::console::{List, Text};
    let n = per_cpu.len();
    record!(kind::SHARE, "name" => name, "work" => work,
        "per_cpu" => Text(List(|| per_cpu.iter())),
        "stream" => abi::model::stream_key(SNAP_KERNEL),
        "snap_first" => Text(List(|| parts.first[..n].iter())),
        "snap_per_batch" => Text(List(|| parts.per_batch[..n].iter())));
}

/// The mask of CPUs `0..n`.
fn mask(n: usize) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// `smp.tlb.cr3` → (`smp`, `tlb`).
fn split_name(name: &str) -> (&str, &str) {
    let mut parts = name.split('.');
    let group = parts.next().unwrap_or("");
    (group, parts.next().unwrap_or(""))
}

/// One timed region: a kernel-stream model snapshot, the timer, `f`, the
/// timer, a snapshot (the snapshots lie outside the timer pair).
fn timed(f: impl FnOnce()) -> u64 {
    marker::snap();
    let t0 = rdtsc();
    f();
    let t = rdtsc().wrapping_sub(t0);
    marker::snap();
    t
}

/// Where the snapshots of a figure whose first batch began at this CPU's
/// kernel-stream snapshot `first` are: one [`timed`] pair per batch, no
/// calibration (the kernel's figures subtract none).
fn snaps_from(first: u32) -> Snaps {
    Snaps {
        stream: SNAP_KERNEL,
        calib: 0,
        calib_runs: 0,
        batches: first,
    }
}

/// Times `BATCHES` batches of `f`; each sample is one batch's ticks.
fn batches(mut f: impl FnMut()) -> ([u64; BATCHES], Snaps) {
    let first = marker::snap_seq();
    let mut out = [0u64; BATCHES];
    for v in out.iter_mut() {
        *v = timed(&mut f);
    }
    (out, snaps_from(first))
}

/// Runs the SMP benchmarks; true when they ran. `layout`: the pool layout
/// the command line named (`pool_align=`), the only one false sharing then
/// measures; `None` measures all three. `emulated`: the emulator the host
/// named (`abi::syscall::EMULATOR_*`).
///
/// Never inlined: the timed loops' code (and so their instruction counts)
/// must not depend on how much of the caller the compiler folds in.
#[inline(never)]
pub fn run(tsc_hz: u64, clock_icount: bool, emulated: u32, layout: Option<Align>) -> bool {
    let cpus = smp::cpus();
    kprintln!(
        "smp: {} CPU(s) running, {} found via {}",
        cpus.started,
        cpus.count,
        cpus.source.key()
    );
    record!(kind::SMP, "cpus" => cpus.started, "found" => cpus.count, "source" => cpus.source.key());
    if tsc_hz == 0 {
        kprintln!("smp: no TSC, nothing can be timed");
        return false;
    }
    let clock = if clock_icount {
        Clock::Icount
    } else {
        Clock::Tsc
    };
    record!(kind::CLOCK, "clock" => clock.key(), "fence" => "lfence+rdtsc", "tsc_hz" => tsc_hz);
    let unit = if clock_icount {
        "instructions"
    } else {
        abi::syscall::tsc_unit(emulated)
    };
    let rep = Reporter { tsc_hz, unit };
    let bochs = emulated == abi::syscall::EMULATOR_BOCHS;
    if bochs {
        kprintln!("smp: Bochs does not model caches ({}): false sharing and TLB costs need real hardware or real KVM", abi::syscall::BOCHS_TICK);
    } else if emulated != abi::syscall::EMULATOR_NONE || clock_icount {
        kprintln!("smp: TCG does not model caches; icount counts instructions: false sharing and TLB costs need `--clock model`, real hardware or real KVM");
    }
    smp::set_worker(worker);
    idt::set(
        VECTOR_SHOOTDOWN,
        Gate::new(
            &raw const ipi_shootdown_entry as u32,
            GateKind::Interrupt,
            0,
        ),
    );
    let n = cpus.started;
    kprintln!("smp: medians of {BATCHES} batches");

    // (a) False sharing.
    kprintln!("(a) false sharing: each CPU locks and unlocks its own turnstile's word");
    let every = [Align::Packed, Align::A64, Align::A128];
    let named = [layout.unwrap_or(Align::A128)];
    let layouts: &[Align] = if layout.is_some() { &named } else { &every };
    for &a in layouts {
        with_sched_lock(|| turnstile::set_align(a));
        let mut samples = [0u64; BATCHES];
        let mut done = [0u64; abi::layout::MAX_CPUS];
        let first = marker::snap_seq();
        let parts = Parts::new(first, 1..n, 2);
        for v in samples.iter_mut() {
            post_all(n, command::HAMMER, HAMMER_OPS);
            *v = timed(|| {
                START.store(1, Ordering::Release);
                let lock = turnstile::spin(0);
                for _ in 0..HAMMER_OPS {
                    lock.lock();
                    lock.unlock();
                }
                for cpu in 1..n {
                    smp::wait_done(cpu);
                }
            })
            .max(1);
            // Every CPU finished its lock/unlock pairs (the APs said done).
            for d in done[..n].iter_mut() {
                *d += u64::from(HAMMER_OPS);
            }
        }
        let (_, _, _, per128) = with_sched_lock(turnstile::layout);
        let mut name = Name::new();
        name.push("smp.false_sharing.");
        name.push(a.key());
        let mut title = Name::new();
        title.push("false sharing, pool ");
        title.push(a.key());
        rep.figure(
            name.as_str(),
            a.key(),
            Measure::Throughput,
            title.as_str(),
            n as u32 * HAMMER_OPS,
            &samples,
            snaps_from(first),
            if per128 > 1 {
                "  (objects share 128-byte blocks)"
            } else {
                ""
            },
            if n >= 2 { mask(n) } else { 0 },
        );
        if n >= 2 {
            share(name.as_str(), "lock_pairs", &done[..n], &parts);
        }
    }
    with_sched_lock(|| turnstile::set_align(layout.unwrap_or(Align::A128)));
    if n >= 2 {
        lines(&rep, n);
    }

    // (b) Ping-pong between CPU 0 and CPU 1.
    if n >= 2 {
        let mut samples = [0u64; BATCHES];
        let first = marker::snap_seq();
        let parts = Parts::new(first, 1..2, 2);
        smp::post(1, command::RESERVE_SNAPS, 2 * BATCHES as u32);
        smp::wait_done(1);
        for v in samples.iter_mut() {
            PING.store(0, Ordering::Release);
            smp::post(1, command::PONG, PINGS);
            *v = timed(|| {
                for _ in 0..PINGS {
                    PING.store(1, Ordering::Release);
                    while PING.load(Ordering::Acquire) != 0 {
                        core::hint::spin_loop();
                    }
                }
            });
            smp::wait_done(1);
        }
        kprintln!("(b) lock hand-off between CPU 0 and CPU 1");
        // Each round trip is one hand-off by each CPU; CPU 1 said done
        // after all of its own in every batch.
        let handoffs = (BATCHES as u64) * u64::from(PINGS);
        rep.per_op_two_cpus(
            "smp.pingpong",
            "-",
            "ping-pong round trip",
            PINGS,
            (&samples, snaps_from(first)),
            "handoffs",
            [handoffs, handoffs],
            n,
            &parts,
        );
    } else {
        kprintln!("(b) ping-pong needs 2 CPUs: boot with --smp 2");
    }

    // (c) TLB.
    kprintln!("(c) TLB");
    let probe = crate::boot::entry::stacks().kernel_top - PAGE_SIZE;
    let (samples, snaps) = batches(|| {
        for _ in 0..TLB_ROUNDS {
            paging::invlpg(probe);
            // SAFETY: a mapped kernel page; the read refills the TLB entry.
            unsafe { (probe as *const u32).read_volatile() };
        }
    });
    rep.per_op(
        "smp.tlb.invlpg",
        "invlpg",
        "invlpg + refill (local)",
        TLB_ROUNDS,
        (&samples, snaps),
    );
    let (samples, snaps) = batches(|| {
        for _ in 0..TLB_ROUNDS {
            // SAFETY: the same directory again.
            unsafe { paging::load_cr3(paging::directory_address()) };
            // SAFETY: as above.
            unsafe { (probe as *const u32).read_volatile() };
        }
    });
    rep.per_op(
        "smp.tlb.cr3",
        "cr3",
        "CR3 reload + refill (local)",
        TLB_ROUNDS,
        (&samples, snaps),
    );
    if n >= 2 {
        SHOOT_ADDR.store(probe, Ordering::Relaxed);
        let target = smp::percpu(1);
        let id = target.apic_id as u8;
        let acked_before = target.ipis.load(Ordering::Acquire);
        // Two snapshots per IPI on the target, counted there before.
        let parts = Parts::new(marker::snap_seq(), 1..2, 2 * SHOOTDOWNS);
        smp::post(1, command::RESERVE_SNAPS, 2 * SHOOTDOWNS * BATCHES as u32);
        smp::wait_done(1);
        let (samples, snaps) = batches(|| {
            let acked = target.ipis.load(Ordering::Acquire);
            for i in 0..SHOOTDOWNS {
                paging::invlpg(probe);
                apic::send_ipi(id, VECTOR_SHOOTDOWN);
                while target.ipis.load(Ordering::Acquire) < acked + i + 1 {
                    core::hint::spin_loop();
                }
            }
        });
        // CPU 0 sent the shootdowns; CPU 1's handler counted the ones it took.
        let sent = (BATCHES as u64) * u64::from(SHOOTDOWNS);
        let taken = u64::from(
            target
                .ipis
                .load(Ordering::Acquire)
                .wrapping_sub(acked_before),
        );
        rep.per_op_two_cpus(
            "smp.tlb.shootdown",
            "shootdown",
            "shootdown by IPI (remote, acked)",
            SHOOTDOWNS,
            (&samples, snaps),
            "shootdowns",
            [sent, taken],
            n,
            &parts,
        );
    } else {
        kprintln!("  a remote shootdown needs 2 CPUs: boot with --smp 2");
    }

    n < 2 || cross_cpu_tests()
}
/// Every CPU writes a word of its own, its neighbours' `stride` bytes
/// away, for each distance of [`LINE_STRIDES`]: what a cache-coherent
/// machine pays for sharing a line, a 128-byte pair, or nothing.
fn lines(rep: &Reporter, n: usize) {
    kprintln!("    each CPU writes its own word, 4 / 64 / 4096 bytes from the next CPU's");
    for (k, &(stride, key)) in LINE_STRIDES.iter().enumerate() {
        LINE_K.store(k as u32, Ordering::Relaxed);
        let mine = line_word(k, stride, 0);
        // One run: post the writes, start them together, wait for all.
        let run = |writes: u32| {
            post_all(n, command::LINES, writes);
            timed(|| {
                START.store(1, Ordering::Release);
                for i in 0..writes {
                    write_word(mine, i);
                }
                for cpu in 1..n {
                    smp::wait_done(cpu);
                }
            })
            .max(1)
        };
        // The model's calibration: the same hand-shake without writes
        // (its coherence misses are the command and done words').
        let calib = marker::snap_seq();
        for _ in 0..LINE_CALIB_RUNS {
            run(0);
        }
        let first = marker::snap_seq();
        let parts = Parts::new(first, 1..n, 2);
        let mut samples = [0u64; BATCHES];
        let mut done = [0u64; abi::layout::MAX_CPUS];
        for v in samples.iter_mut() {
            *v = run(LINE_WRITES);
            // Every CPU finished its writes (the APs said done).
            for d in done[..n].iter_mut() {
                *d += u64::from(LINE_WRITES);
            }
        }
        let mut name = Name::new();
        name.push("smp.lines.");
        name.push(key);
        let mut title = Name::new();
        title.push("words ");
        title.push(match stride {
            4 => "4 bytes apart",
            64 => "64 bytes apart",
            _ => "4096 bytes apart",
        });
        rep.figure(
            name.as_str(),
            key,
            Measure::Throughput,
            title.as_str(),
            n as u32 * LINE_WRITES,
            &samples,
            Snaps {
                stream: SNAP_KERNEL,
                calib,
                calib_runs: LINE_CALIB_RUNS,
                batches: first,
            },
            "",
            mask(n),
        );
        share(name.as_str(), "writes", &done[..n], &parts);
    }
}

/// Threads on different CPUs: a sleeper on CPU 0 woken from CPU 1, and a
/// mutex owned on CPU 0 that a more urgent thread on CPU 1 waits for (its
/// priority lent across CPUs, the hand-off waking CPU 1).
fn cross_cpu_tests() -> bool {
    use core::sync::atomic::AtomicU32;

    use crate::task::mutex::Mutex;
    use crate::task::sched::{self, State};
    use crate::task::sleepqueue;

    const CHAN: u32 = 0xc0c0;
    const GO: u32 = 0xc0c1;
    static STAGE: AtomicU32 = AtomicU32::new(0);
    static WOKE_ON: AtomicU32 = AtomicU32::new(99);
    static WAKER_ON: AtomicU32 = AtomicU32::new(99);
    static M: Mutex = Mutex::new();
    static LENT: AtomicU32 = AtomicU32::new(0);
    static BACK: AtomicU32 = AtomicU32::new(0);
    static GOT_ON: AtomicU32 = AtomicU32::new(99);
    static LEFT: AtomicU32 = AtomicU32::new(0);

    fn finished() {
        if LEFT.fetch_sub(1, Ordering::SeqCst) == 1 {
            let _g = sched::locked();
            sched::make_ready(0);
        }
    }
    extern "C" fn sleeper(_: u32) {
        STAGE.store(1, Ordering::SeqCst);
        sleepqueue::sleep(CHAN, 0);
        WOKE_ON.store(sched::cpu() as u32, Ordering::SeqCst);
        finished();
    }
    extern "C" fn waker(_: u32) {
        WAKER_ON.store(sched::cpu() as u32, Ordering::SeqCst);
        // Until the sleeper is asleep (a wakeup before it would be lost).
        while sleepqueue::wakeup(CHAN, false) == 0 {
            core::hint::spin_loop();
        }
        finished();
    }
    extern "C" fn owner(_: u32) {
        let _ = M.lock();
        STAGE.store(2, Ordering::SeqCst);
        sleepqueue::sleep(GO, 0);
        LENT.store(
            sched::prio_of(sched::current_index()) as u32,
            Ordering::SeqCst,
        );
        M.unlock();
        BACK.store(
            sched::prio_of(sched::current_index()) as u32,
            Ordering::SeqCst,
        );
        finished();
    }
    extern "C" fn waiter(_: u32) {
        while STAGE.load(Ordering::SeqCst) != 2 {
            core::hint::spin_loop();
        }
        let _ = M.lock();
        GOT_ON.store(sched::cpu() as u32, Ordering::SeqCst);
        M.unlock();
        finished();
    }

    /// Two threads `LEFT` counts down, each `(entry, priority)`: `on0` on
    /// CPU 0, `on1` on CPU 1. The scheduler lock stays held (the guard)
    /// until the caller lets it go; `None`, said, when no thread is left.
    fn spawn_pair(
        on0: (extern "C" fn(u32), u32),
        on1: (extern "C" fn(u32), u32),
    ) -> Option<sched::Guard> {
        LEFT.store(2, Ordering::SeqCst);
        let g = sched::locked();
        let a = sched::spawn_kernel_on(0, on0.0, 0, on0.1);
        let b = sched::spawn_kernel_on(1, on1.0, 0, on1.1);
        if a.is_err() || b.is_err() {
            kprintln!("  no threads left");
            return None;
        }
        Some(g)
    }

    kprintln!("(e) threads across CPUs");
    // A sleeper on CPU 0, woken by a thread on CPU 1.
    {
        let Some(_g) = spawn_pair((sleeper, 10), (waker, 10)) else {
            return false;
        };
        sched::block(State::WaitingForTask);
    }
    let t1 = WOKE_ON.load(Ordering::SeqCst) == 0 && WAKER_ON.load(Ordering::SeqCst) == 1;
    report_test("a thread on CPU 1 wakes one asleep on CPU 0", t1);
    // A mutex owned on CPU 0, wanted by a more urgent thread on CPU 1.
    if spawn_pair((owner, 20), (waiter, 5)).is_none() {
        return false;
    }
    // Wait (on CPU 0, with interrupts for the reschedule IPI) until the
    // owner sleeps with the mutex and the waiter has blocked on it.
    let owner_lent = loop {
        let _g = sched::locked();
        let lent = (0..abi::syscall::MAX_THREADS).any(|i| {
            let t = sched::thread(i);
            t.state == State::Sleeping && t.prio == 5
        });
        if lent {
            break true;
        }
        if STAGE.load(Ordering::SeqCst) == 2 && LEFT.load(Ordering::SeqCst) == 0 {
            break false;
        }
        sched::nap(1);
    };
    {
        let _g = sched::locked();
        sleepqueue::wakeup(GO, true);
        if LEFT.load(Ordering::SeqCst) != 0 {
            sched::block(State::WaitingForTask);
        }
    }
    let t2 = owner_lent
        && LENT.load(Ordering::SeqCst) == 5
        && BACK.load(Ordering::SeqCst) == 20
        && GOT_ON.load(Ordering::SeqCst) == 1;
    report_test(
        "a waiter on CPU 1 lends its priority to the owner on CPU 0 and gets the mutex",
        t2,
    );
    t1 && t2
}

fn report_test(name: &str, ok: bool) {
    kprintln!("{} {name}", if ok { "PASS" } else { "FAIL" });
    record!(kind::TEST, "name" => name, "result" => if ok { "pass" } else { "fail" }, "detail" => "");
}

/// A figure's name or title, built from parts.
type Name = crate::console::Line<64>;
