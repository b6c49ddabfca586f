//! The string-instruction counts (`prog=strings`): one REP-prefixed string
//! instruction per call, `rep movsb` and `rep movsl` with ECX set to each of
//! `abi::strings::COUNTS` just before it, and the same call without it
//! (`string.none`), timed like every other benchmark. A call's figure less
//! the bare call's is what the clock counts for one REP string instruction:
//! the architecture retires it as one instruction whatever ECX is (the
//! perf counters say so where the kernel offers them); Bochs's TSC counts
//! its iterations, QEMU's icount one more (docs/machines.md).
#![no_std]
#![no_main]

use core::fmt::Write as _;

use userland::abi::report::{kind, names, Figure};
use userland::abi::strings::{COUNTS, NONE, OPS};
use userland::abi::syscall::FEATURE_FIXED_PMC;
use userland::bench::{self, tb_string_none, Fence, LoopFn, STRING_LOOPS};
use userland::{println, record, sys, Line};

const MAX_BATCHES: usize = userland::abi::cmdline::MAX_BATCHES as usize;
static mut SAMPLES: [u64; MAX_BATCHES] = [0; MAX_BATCHES];

/// One figure: its median and min, and instructions retired per call when
/// the counters are on.
struct Fig {
    median: f64,
    min: f64,
    retired: Option<f64>,
}

struct Run {
    fence: Fence,
    batches: usize,
    size: u32,
    tsc_hz: u64,
    /// The fixed counters are readable; cleared if the kernel turns them off.
    pmc: bool,
}

impl Run {
    fn time(&mut self, name: &str, path: &str, call: &str, f: LoopFn) -> Fig {
        // SAFETY: one thread; the buffer serves one figure at a time, and
        // `batches <= MAX_BATCHES`.
        let samples =
            unsafe { core::slice::from_raw_parts_mut(&raw mut SAMPLES as *mut u64, self.batches) };
        let snaps = bench::measure(self.fence, f, self.size, samples);
        let mut counters = None;
        if self.pmc {
            let c = bench::counters(f, self.size);
            if sys::cpuinfo().features & FEATURE_FIXED_PMC != 0 {
                counters = Some(c);
            } else {
                self.pmc = false;
                println!("strings: perf counters went off during the run; going on without them");
            }
        }
        let s = bench::report(&Figure {
            counters,
            snaps: Some(snaps),
            ..Figure::per_op(
                name,
                names::STRING,
                path,
                call,
                self.size,
                samples,
                self.tsc_hz,
            )
        });
        Fig {
            median: s.median,
            min: s.min,
            retired: counters.map(|c| c.0),
        }
    }
}

#[unsafe(no_mangle)]
extern "C" fn main(_arg: u32) -> i32 {
    let (info, fence, batches, size) = userland::timing_start!("strings", MAX_BATCHES, else 1);
    let mut run = Run {
        fence,
        batches,
        size,
        tsc_hz: info.tsc_hz,
        pmc: info.features & FEATURE_FIXED_PMC != 0,
    };
    let unit = info.unit();
    record!(kind::CLOCK, "clock" => info.clock_key(),
        "tsc_hz" => info.tsc_hz, "batches" => run.batches, "batch_size" => run.size);
    println!(
        "strings: one REP string instruction per call, ECX set just before it; {} batches x {} calls; {unit} per call",
        run.batches, run.size
    );
    let mut name = Line::new();
    let _ = write!(name, "{}.{NONE}", names::STRING);
    let bare = run.time(name.as_str(), NONE, NONE, tb_string_none);
    println!(
        "{:<14} {:>10} {:>10} {:>10}{}",
        "call",
        "median",
        "min",
        "less bare",
        if run.pmc {
            "  instructions retired, less bare"
        } else {
            ""
        }
    );
    println!(
        "{:<14} {:>10.2} {:>10.2}",
        "bare (set-up)", bare.median, bare.min
    );
    for (op, loops) in OPS.iter().zip(STRING_LOOPS) {
        for (ecx, f) in COUNTS.iter().zip(loops) {
            let mut name = Line::new();
            let _ = write!(name, "{}.{op}.{ecx}", names::STRING);
            let mut call = Line::new();
            let _ = write!(call, "{ecx}");
            let x = run.time(name.as_str(), op, call.as_str(), f);
            let mut label = Line::new();
            let _ = write!(label, "rep {op} {ecx}");
            let mut retired = Line::new();
            if let (Some(r), Some(b)) = (x.retired, bare.retired) {
                let _ = write!(retired, "  {:>10.2}", r - b);
            }
            println!(
                "{:<14} {:>10.2} {:>10.2} {:>10.2}{}",
                label.as_str(),
                x.median,
                x.min,
                x.median - bare.median,
                retired.as_str()
            );
        }
    }
    0
}
