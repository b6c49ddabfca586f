//! The pointer chase (`prog=chase`): a cyclic chain of dependent loads, one
//! every `abi::model::chase::STRIDE` bytes, over each working set of
//! `abi::model::chase::SETS`, timed like every other benchmark (one load per
//! call). Under `--clock model` its misses show the profile's cache
//! geometry: a working set that fits L1 misses nothing after the warm-up
//! batch; one between L1 and L2 misses L1 on every load and L2 never.
#![no_std]
#![no_main]

use core::fmt::Write as _;

use userland::abi::model::chase::{SETS, STRIDE};
use userland::abi::report::{kind, names, Figure};
use userland::bench::{self, tb_chase, tb_chase_at};
use userland::{println, record, Line};

/// The largest working set.
const MAX_SET: usize = max_set();
const fn max_set() -> usize {
    let mut m = 0;
    let mut i = 0;
    while i < SETS.len() {
        if SETS[i] as usize > m {
            m = SETS[i] as usize;
        }
        i += 1;
    }
    m
}

/// The chain's memory, page-aligned so a working set covers whole pages.
#[repr(C, align(4096))]
struct Arena([u8; MAX_SET]);
static mut ARENA: Arena = Arena([0; MAX_SET]);

/// Links the first `bytes` of the arena into one cycle, one word every
/// STRIDE bytes, each pointing at the next; the chase starts at the first.
fn build_chain(bytes: u32) {
    let base = &raw mut ARENA as u32;
    let n = bytes / STRIDE;
    for i in 0..n {
        let here = base + i * STRIDE;
        let next = base + ((i + 1) % n) * STRIDE;
        // SAFETY: `here` lies inside the arena (i < bytes / STRIDE and
        // bytes <= MAX_SET); one thread.
        unsafe { (here as *mut u32).write_volatile(next) };
    }
    // SAFETY: one thread; the loop function reads it only when called.
    unsafe { (&raw mut tb_chase_at).write_volatile(base) };
}

const MAX_BATCHES: usize = userland::abi::cmdline::MAX_BATCHES as usize;
static mut SAMPLES: [u64; MAX_BATCHES] = [0; MAX_BATCHES];

#[unsafe(no_mangle)]
extern "C" fn main(_arg: u32) -> i32 {
    let (info, fence, batches, size) = userland::timing_start!("chase", MAX_BATCHES, else 1);
    let unit = info.unit();
    record!(kind::CLOCK, "clock" => info.clock_key(),
        "tsc_hz" => info.tsc_hz, "batches" => batches, "batch_size" => size);
    println!(
        "chase: dependent loads every {STRIDE} bytes, {batches} batches x {size} loads, {unit} per load"
    );
    println!("{:<12} {:>10} {:>10}", "working set", "median", "min");
    for bytes in SETS {
        build_chain(bytes);
        // SAFETY: one thread; the buffer serves one working set at a time,
        // and `batches <= MAX_BATCHES`.
        let samples =
            unsafe { core::slice::from_raw_parts_mut(&raw mut SAMPLES as *mut u64, batches) };
        let snaps = bench::measure(fence, tb_chase, size, samples);
        let mut name = Line::new();
        let _ = write!(name, "{}.{}k", names::CHASE, bytes >> 10);
        let mut call = Line::new();
        let _ = write!(call, "{}k", bytes >> 10);
        let s = bench::report(&Figure {
            snaps: Some(snaps),
            ..Figure::per_op(
                name.as_str(),
                names::CHASE,
                "load",
                call.as_str(),
                size,
                samples,
                info.tsc_hz,
            )
        });
        println!("{:<12} {:>10.2} {:>10.2}", call.as_str(), s.median, s.min);
    }
    0
}
