//! The default program: every mechanism's floor and full round trips, a few
//! real calls, the baselines, and a macro workload, timed in one boot.
//! Prints a human table and the `bench`/`samples`/`macro` records.
#![no_std]
#![no_main]

use core::cell::Cell;
use core::fmt::Write as _;

use userland::abi::model::{Snaps, SNAP_USER};
use userland::abi::report::{kind, Escaped, Figure};
use userland::abi::syscall::{fd, nr, FEATURE_FIXED_PMC};
use userland::abi::Mechanism;
use userland::bench::{self, Fence, LoopFn, Summary};
use userland::{println, record, sys, Line};

const MAX: usize = abi_max();
const fn abi_max() -> usize {
    userland::abi::cmdline::MAX_BATCHES as usize
}

static mut SAMPLES: [u64; MAX] = [0; MAX];
static mut VALUES: [f64; MAX] = [0.0; MAX];
static mut SCRATCH: [f64; MAX] = [0.0; MAX];

/// The loops of one mechanism: floor, null, getpid, geteuid, write.
fn loops(m: Mechanism) -> [(&'static str, LoopFn); 5] {
    use userland::bench::*;
    match m {
        Mechanism::Int80 => [
            ("floor", tb_loop_floor_int80),
            ("null", tb_loop_int80_null),
            ("getpid", tb_loop_int80_getpid),
            ("geteuid", tb_loop_int80_geteuid),
            ("write1", tb_loop_int80_write),
        ],
        Mechanism::Sysenter => [
            ("floor", tb_loop_floor_sysenter),
            ("null", tb_loop_sysenter_null),
            ("getpid", tb_loop_sysenter_getpid),
            ("geteuid", tb_loop_sysenter_geteuid),
            ("write1", tb_loop_sysenter_write),
        ],
        Mechanism::CallGate => [
            ("floor", tb_loop_floor_callgate),
            ("null", tb_loop_callgate_null),
            ("getpid", tb_loop_callgate_getpid),
            ("geteuid", tb_loop_callgate_geteuid),
            ("write1", tb_loop_callgate_write),
        ],
        Mechanism::Syscall => [
            ("floor", tb_loop_floor_syscall),
            ("null", tb_loop_syscall_null),
            ("getpid", tb_loop_syscall_getpid),
            ("geteuid", tb_loop_syscall_geteuid),
            ("write1", tb_loop_syscall_write),
        ],
    }
}

struct Run {
    fence: Fence,
    /// The fixed counters are readable (instructions retired, core cycles);
    /// cleared when the kernel turns them off during the run.
    pmc: Cell<bool>,
    batches: usize,
    size: u32,
    tsc_hz: u64,
}

impl Run {
    /// Times `f`, prints its records, returns its summary (ticks per iteration).
    fn bench(&self, name: &str, mech: &str, path: &str, call: &str, f: LoopFn) -> Summary {
        // SAFETY: one thread; this buffer is used by one benchmark at a time.
        let samples = unsafe { buf(&raw mut SAMPLES, self.batches) };
        let snaps = bench::measure(self.fence, f, self.size, samples);
        let pmc = self.counters(f);
        bench::report(&Figure {
            counters: pmc,
            snaps: Some(snaps),
            ..Figure::per_op(name, mech, path, call, self.size, samples, self.tsc_hz)
        })
    }
}

impl Run {
    /// The counters' figures for `f`, if they are still on afterwards: a
    /// ring-3 RDPMC that faults makes the kernel turn them off and hand back
    /// zeros, and `cpuinfo` then says so.
    fn counters(&self, f: LoopFn) -> Option<(f64, f64)> {
        if !self.pmc.get() {
            return None;
        }
        let c = bench::counters(f, self.size);
        if sys::cpuinfo().features & FEATURE_FIXED_PMC != 0 {
            return Some(c);
        }
        self.pmc.set(false);
        println!("bench: perf counters went off during the run; the figures go on without them");
        None
    }
}

/// The first `n` elements of a static buffer.
///
/// # Safety
/// No other reference to the buffer may be live.
unsafe fn buf<T>(p: *mut [T; MAX], n: usize) -> &'static mut [T] {
    // SAFETY: `n <= MAX` (callers clamp it) and exclusivity is the caller's.
    unsafe { core::slice::from_raw_parts_mut(p as *mut T, n.min(MAX)) }
}

/// A float with four decimals in a record.
struct F(f64);

impl core::fmt::Display for F {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:.4}", self.0)
    }
}

/// One operation of the macro workload: a request through a kernel ring
/// buffer (write 64 bytes, read them back), a getpid and a yield.
fn macro_op(m: Mechanism, buf: &mut [u8; 64]) {
    let p = buf.as_mut_ptr() as u32;
    sys::call(m, nr::WRITE, [fd::RING, p, 64, 0, 0, 0]);
    sys::call(m, nr::READ, [fd::RING, p, 64, 0, 0, 0]);
    sys::call(m, nr::GETPID, [0; 6]);
    sys::call(m, nr::YIELD, [0; 6]);
}
const MACRO_SYSCALLS_PER_OP: u32 = 4;

#[unsafe(no_mangle)]
extern "C" fn main(_arg: u32) -> i32 {
    let (info, fence, batches, size) = userland::timing_start!("bench", MAX, else {
        record!(kind::CLOCK, "clock" => "none", "tsc_hz" => 0);
        0
    });
    let clock = info.clock_key();
    let run = Run {
        fence,
        pmc: Cell::new(info.features & FEATURE_FIXED_PMC != 0),
        batches,
        size,
        tsc_hz: info.tsc_hz,
    };
    // Every figure in the clock's unit: under tsc on TCG, TCG ticks.
    let unit = info.unit();
    let bochs = info.emulated == userland::abi::syscall::EMULATOR_BOCHS;
    // Baselines: the timer (a fenced RDTSC pair around an empty call) and the loop.
    let timer = bench::overhead(run.fence, userland::bench::tb_loop_empty);
    record!(kind::CLOCK, "clock" => clock, "fence" => Esc(run.fence.describe()),
        "tsc_hz" => info.tsc_hz, "timer_overhead" => timer, "batches" => run.batches,
        "batch_size" => run.size, "interrupts" => "masked",
        "perf" => if run.pmc.get() { "fixed-counters" } else { "n/a" });
    println!(
        "bench: clock={} ({} per tick{}{}{}), {} batches x {} calls, fence {}, timer+call overhead {} ticks per batch (subtracted), interrupts masked, perf counters {}",
        clock,
        // Bochs's TSC ticks are instructions: say so, never "cycles".
        if clock == "icount" || bochs { "1 instruction" } else if info.emulated == userland::abi::syscall::EMULATOR_TCG { "1 TCG tick" } else { "1 cycle" },
        if bochs { "; " } else if clock == "icount" || info.emulated == userland::abi::syscall::EMULATOR_TCG { "; TCG: emulator figures, not cycles" } else { "" },
        if bochs { userland::abi::syscall::BOCHS_TICK } else { "" },
        if bochs { ", emulator figures, not cycles" } else { "" },
        run.batches,
        run.size,
        run.fence.describe(),
        timer,
        if run.pmc.get() { "on (instructions retired, core cycles)" } else { "n/a" }
    );
    let lp = run.bench(
        "loop",
        "none",
        "baseline",
        "empty",
        userland::bench::tb_loop_empty,
    );

    // floor/full medians per mechanism, for the ratios.
    let mut table: [[f64; 5]; 4] = [[0.0; 5]; 4];
    let mut mins: [[f64; 5]; 4] = [[0.0; 5]; 4];
    for m in Mechanism::ALL {
        if !info.wanted(m) {
            continue;
        }
        for (i, (call, f)) in loops(m).into_iter().enumerate() {
            let select = i == 0 && matches!(m, Mechanism::Sysenter | Mechanism::Syscall);
            if select {
                sys::call(Mechanism::Int80, nr::ENTRY_FLOOR, [m as u32, 1, 0, 0, 0, 0]);
            }
            let path = if i == 0 { "floor" } else { "full" };
            let mut name = Line::new();
            let _ = write!(name, "{}.{}", m.key(), call);
            let s = run.bench(name.as_str(), m.key(), path, call, f);
            if select {
                sys::call(Mechanism::Int80, nr::ENTRY_FLOOR, [m as u32, 0, 0, 0, 0, 0]);
            }
            table[m as usize][i] = s.median;
            mins[m as usize][i] = s.min;
        }
    }

    println!();
    println!(
        "{:<10} {:<8} {:>10} {:>10} {:>11} {:>12}",
        "entry", "call", "median", "min", "full/floor", "vs int 0x80"
    );
    // Each column's unit; both ratios are time over time (below 1: faster).
    println!(
        "{:<10} {:<8} {:>10} {:>10} {:>11} {:>12}",
        "",
        "",
        short_unit(unit),
        short_unit(unit),
        "time ratio",
        "time ratio"
    );
    for m in Mechanism::ALL {
        if !info.has(m) {
            println!("{:<10} unavailable on this CPU", m.title());
            continue;
        }
        if !info.wanted(m) {
            continue;
        }
        for (i, (call, _)) in loops(m).into_iter().enumerate() {
            let med = table[m as usize][i];
            let mut ratio = Line::new();
            if i == 1 && table[m as usize][0] > 0.0 {
                let _ = write!(ratio, "{:.2}x", med / table[m as usize][0]);
            }
            let mut vs = Line::new();
            let base = table[Mechanism::Int80 as usize][i];
            if info.wanted(Mechanism::Int80) && base > 0.0 {
                let _ = write!(vs, "{:.2}", med / base);
            }
            println!(
                "{:<10} {:<8} {:>10.2} {:>10.2} {:>11} {:>12}",
                m.title(),
                call,
                med,
                mins[m as usize][i],
                ratio.as_str(),
                vs.as_str()
            );
        }
    }
    println!(
        "{:<10} {:<8} {:>10.2}   ({} per iteration: decl + jnz)",
        "loop", "empty", lp.median, unit
    );

    // The macro workload: how much of a micro gain survives in a mix.
    println!();
    let mut base_ticks = 0.0;
    for m in Mechanism::ALL {
        if !info.wanted(m) {
            continue;
        }
        let ops = (run.size / MACRO_SYSCALLS_PER_OP).max(1);
        let mut req = [0u8; 64];
        macro_op(m, &mut req);
        let batches = run.batches.min(16);
        // SAFETY: one thread; the buffers are free between benchmarks.
        let (values, scratch) = unsafe {
            (
                buf(&raw mut VALUES, batches),
                buf(&raw mut SCRATCH, batches),
            )
        };
        // The model's calibration: empty timed regions, whose snapshots the
        // host subtracts from each batch's (the ticks stay as they are).
        let calib = userland::model::next_seq();
        for _ in 0..bench::OVERHEAD_RUNS {
            bench::timed_region(run.fence, || {});
        }
        let first = userland::model::next_seq();
        for v in values.iter_mut() {
            let t = bench::timed_region(run.fence, || {
                for _ in 0..ops {
                    macro_op(m, &mut req);
                }
            });
            *v = t as f64 / ops as f64;
        }
        let snaps = Snaps {
            stream: SNAP_USER,
            calib,
            calib_runs: bench::OVERHEAD_RUNS as u32,
            batches: first,
        };
        let s = bench::summarize(values, scratch);
        let per_s = if s.median > 0.0 {
            info.tsc_hz as f64 / s.median
        } else {
            0.0
        };
        if m == Mechanism::Int80 {
            base_ticks = s.median;
        }
        record!(kind::MACRO, "mech" => m.key(), "ops" => ops, "batches" => batches,
            "ticks_per_op" => F(s.median), "ops_per_s" => F(per_s),
            "syscalls_per_op" => MACRO_SYSCALLS_PER_OP; snaps);
        // As in the table above: this mix's time over int 0x80's.
        let mut vs = Line::new();
        if base_ticks > 0.0 {
            let _ = write!(vs, "{:.2} vs int 0x80", s.median / base_ticks);
        }
        println!(
            "macro mix  {:<9} {:>12.0} ops/s{}  {:>9.1} {}/op  {}",
            m.title(),
            per_s,
            if clock == "icount" {
                " (virtual: 1 insn = 1 ns)"
            } else {
                ""
            },
            s.median,
            unit,
            vs.as_str()
        );
    }
    0
}

/// A unit short enough for a table column.
fn short_unit(unit: &str) -> &str {
    match unit {
        "instructions" => "insns",
        u => u,
    }
}

/// A string value escaped for a record.
struct Esc<'a>(&'a str);

impl core::fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        Escaped(self.0).fmt(f)
    }
}
