//! Timed loops and their statistics.
//!
//! Each benchmark is an assembly loop `tb_loop_NAME(n)` that runs its body
//! `n` times (the body ends with `decl %edi; jnz`, so the loop is included in
//! every figure, as in the design's path lengths). A batch is timed with a
//! fenced RDTSC on each side; the same loop timed with `n = 0` (the median of
//! several) is the timer-and-call overhead, subtracted from every batch, so
//! under icount `batch / n` is the body's exact instruction count.
//!
//! Each timed run is bracketed by two model snapshots (`crate::model`), so
//! under `--clock model` the host computes the same per-batch figures in
//! modelled cycles, misses and flushes.

use core::arch::asm;

use abi::layout::selector::CALL_GATE_FLOOR;
use abi::model::Snaps;
use abi::report::{write_bench, Figure, MARKER};
use abi::strings::COUNTS;
use abi::syscall::{fd, nr, CpuInfo, FEATURE_RDTSCP, FEATURE_SSE2, RDPMC_FIXED};

/// How RDTSC is ordered against the loop (Intel SDM Vol. 2B, RDTSC/RDTSCP).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fence {
    /// LFENCE before RDTSC; RDTSCP+LFENCE at the end where RDTSCP exists.
    Lfence { rdtscp: bool },
    /// No SSE2: CPUID serialises (slow, and a VM exit under a hypervisor).
    Cpuid,
}

impl Fence {
    pub fn for_cpu(info: &CpuInfo) -> Fence {
        if info.features & FEATURE_SSE2 != 0 {
            Fence::Lfence {
                rdtscp: info.features & FEATURE_RDTSCP != 0,
            }
        } else {
            Fence::Cpuid
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Fence::Lfence { rdtscp: true } => "lfence+rdtsc / rdtscp+lfence",
            Fence::Lfence { rdtscp: false } => "lfence+rdtsc",
            Fence::Cpuid => "cpuid+rdtsc",
        }
    }

    /// A fenced RDTSC before a timed region.
    #[inline(always)]
    pub fn start(self) -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: LFENCE/CPUID and RDTSC only read state; CR4.TSD is clear.
        unsafe {
            match self {
                Fence::Lfence { .. } => {
                    asm!("lfence", "rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack))
                }
                Fence::Cpuid => asm!(
                    "pushl %ebx", "xorl %eax, %eax", "cpuid", "rdtsc", "popl %ebx",
                    out("eax") lo, out("edx") hi, out("ecx") _, options(att_syntax)
                ),
            }
        }
        ((hi as u64) << 32) | lo as u64
    }

    /// A fenced RDTSC after a timed region.
    #[inline(always)]
    pub fn end(self) -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: as in start.
        unsafe {
            match self {
                Fence::Lfence { rdtscp: true } => asm!(
                    "rdtscp", "lfence", out("eax") lo, out("edx") hi, out("ecx") _,
                    options(nomem, nostack)
                ),
                _ => return self.start(),
            }
        }
        ((hi as u64) << 32) | lo as u64
    }
}

/// `tb_loop_NAME(n)`: `n` times BODY, with EBX, ECX, EDX set up for a
/// 1-byte write to the null device (harmless for the other calls).
macro_rules! timed_loop {
    ($name:literal, $body:expr $(, $op:ident = $kind:ident $val:expr)*) => {
        asm_fn!(
            $name,
            [
                "movl 20(%esp), %edi\n",
                "movl ${null_fd}, %ebx\n movl $tb_one_byte, %ecx\n movl $1, %edx\n",
                "testl %edi, %edi\n jz 8f\n",
                "9:\n", $body, "decl %edi\n jnz 9b\n",
                "8:
"
            ],
            null_fd = const fd::NULL
            $(, $op = $kind $val)*
        );
    };
}

/// The byte the write benchmarks send to the null device.
#[unsafe(no_mangle)]
static tb_one_byte: u8 = b'x';

timed_loop!("tb_loop_empty", "");
timed_loop!("tb_loop_floor_int80", "int $0x81\n");
timed_loop!("tb_loop_floor_callgate", "lcall ${gate}, $0\n", gate = const CALL_GATE_FLOOR);
// SYSEXIT returns to EDX with ESP = ECX: the floor stub hands over both.
timed_loop!(
    "tb_loop_floor_sysenter",
    "movl %esp, %ecx\n movl $1f, %edx\n sysenter\n1:\n"
);
timed_loop!("tb_loop_floor_syscall", "syscall\n");

macro_rules! full_loops {
    ($($name:literal = $seq:expr, $nr:expr;)*) => {
        $( timed_loop!($name, concat!("movl ${nr}, %eax\n", $seq), nr = const $nr); )*
    };
}

full_loops! {
    "tb_loop_int80_null" = seq_int80!(), nr::NULL;
    "tb_loop_int80_getpid" = seq_int80!(), nr::GETPID;
    "tb_loop_int80_geteuid" = seq_int80!(), nr::GETEUID;
    "tb_loop_int80_write" = seq_int80!(), nr::WRITE;
    "tb_loop_sysenter_null" = seq_sysenter!(), nr::NULL;
    "tb_loop_sysenter_getpid" = seq_sysenter!(), nr::GETPID;
    "tb_loop_sysenter_geteuid" = seq_sysenter!(), nr::GETEUID;
    "tb_loop_sysenter_write" = seq_sysenter!(), nr::WRITE;
    "tb_loop_callgate_null" = seq_callgate!(), nr::NULL;
    "tb_loop_callgate_getpid" = seq_callgate!(), nr::GETPID;
    "tb_loop_callgate_geteuid" = seq_callgate!(), nr::GETEUID;
    "tb_loop_callgate_write" = seq_callgate!(), nr::WRITE;
    "tb_loop_syscall_null" = seq_syscall!(), nr::NULL;
    "tb_loop_syscall_getpid" = seq_syscall!(), nr::GETPID;
    "tb_loop_syscall_geteuid" = seq_syscall!(), nr::GETEUID;
    "tb_loop_syscall_write" = seq_syscall!(), nr::WRITE;
}

/// Where the pointer chase (`prog=chase`) stands: the next load's address,
/// kept between calls so each batch goes on around the cycle.
#[unsafe(no_mangle)]
pub static mut tb_chase_at: u32 = 0;

// tb_chase(n): n dependent loads `p = *p` from tb_chase_at, which then
// holds where the chase stopped. One load per iteration (with the loop).
asm_fn!(
    "tb_chase",
    [
        "movl 20(%esp), %edi\n",
        "movl tb_chase_at, %esi\n",
        "testl %edi, %edi\n jz 8f\n",
        "9:\n movl (%esi), %esi\n decl %edi\n jnz 9b\n",
        "8:\n movl %esi, tb_chase_at\n"
    ]
);

pub type LoopFn = unsafe extern "C" fn(u32);

/// The buffers the string loops (`prog=strings`) copy between.
#[unsafe(no_mangle)]
pub static mut tb_string_src: [u8; abi::strings::BUFFER] = [0; abi::strings::BUFFER];
#[unsafe(no_mangle)]
pub static mut tb_string_dst: [u8; abi::strings::BUFFER] = [0; abi::strings::BUFFER];

/// `tb_string_NAME(n)`: `n` times: ESI and EDI at the buffers, ECX =
/// COUNT, then BODY (one REP string instruction, or nothing). The string
/// instructions own ESI, EDI and ECX, so EBP counts the calls; DF is clear
/// (`cld` once, outside the loop: the overhead run at n = 0 subtracts it).
macro_rules! string_loop {
    ($name:literal, $body:literal, $count:expr) => {
        asm_fn!(
            $name,
            [
                "movl 20(%esp), %ebp\n cld\n",
                "testl %ebp, %ebp\n jz 8f\n",
                "9:\n movl $tb_string_src, %esi\n movl $tb_string_dst, %edi\n movl ${count}, %ecx\n",
                $body,
                "decl %ebp\n jnz 9b\n",
                "8:\n"
            ],
            count = const $count
        );
    };
}

string_loop!("tb_string_none", "", 0);
string_loop!("tb_string_movsb_0", "rep movsb\n", COUNTS[0]);
string_loop!("tb_string_movsb_1", "rep movsb\n", COUNTS[1]);
string_loop!("tb_string_movsb_2", "rep movsb\n", COUNTS[2]);
string_loop!("tb_string_movsb_3", "rep movsb\n", COUNTS[3]);
string_loop!("tb_string_movsl_0", "rep movsl\n", COUNTS[0]);
string_loop!("tb_string_movsl_1", "rep movsl\n", COUNTS[1]);
string_loop!("tb_string_movsl_2", "rep movsl\n", COUNTS[2]);
string_loop!("tb_string_movsl_3", "rep movsl\n", COUNTS[3]);

unsafe extern "C" {
    pub fn tb_string_none(n: u32);
    fn tb_string_movsb_0(n: u32);
    fn tb_string_movsb_1(n: u32);
    fn tb_string_movsb_2(n: u32);
    fn tb_string_movsb_3(n: u32);
    fn tb_string_movsl_0(n: u32);
    fn tb_string_movsl_1(n: u32);
    fn tb_string_movsl_2(n: u32);
    fn tb_string_movsl_3(n: u32);
}

/// The string loops, by `abi::strings::OPS` and then `COUNTS`.
pub const STRING_LOOPS: [[LoopFn; COUNTS.len()]; abi::strings::OPS.len()] = [
    [
        tb_string_movsb_0,
        tb_string_movsb_1,
        tb_string_movsb_2,
        tb_string_movsb_3,
    ],
    [
        tb_string_movsl_0,
        tb_string_movsl_1,
        tb_string_movsl_2,
        tb_string_movsl_3,
    ],
];

unsafe extern "C" {
    pub fn tb_loop_empty(n: u32);
    pub fn tb_loop_floor_int80(n: u32);
    pub fn tb_loop_floor_callgate(n: u32);
    pub fn tb_loop_floor_sysenter(n: u32);
    pub fn tb_loop_floor_syscall(n: u32);
    pub fn tb_loop_int80_null(n: u32);
    pub fn tb_loop_int80_getpid(n: u32);
    pub fn tb_loop_int80_geteuid(n: u32);
    pub fn tb_loop_int80_write(n: u32);
    pub fn tb_loop_sysenter_null(n: u32);
    pub fn tb_loop_sysenter_getpid(n: u32);
    pub fn tb_loop_sysenter_geteuid(n: u32);
    pub fn tb_loop_sysenter_write(n: u32);
    pub fn tb_loop_callgate_null(n: u32);
    pub fn tb_loop_callgate_getpid(n: u32);
    pub fn tb_loop_callgate_geteuid(n: u32);
    pub fn tb_loop_callgate_write(n: u32);
    pub fn tb_loop_syscall_null(n: u32);
    pub fn tb_loop_syscall_getpid(n: u32);
    pub fn tb_loop_syscall_geteuid(n: u32);
    pub fn tb_loop_syscall_write(n: u32);
    pub fn tb_chase(n: u32);
}

/// How many times [`overhead`] times the empty batch (it takes the median).
pub const OVERHEAD_RUNS: usize = 15;

/// One timed run of `f(n)`: a model snapshot, the fenced timer, the loop,
/// the timer, a snapshot. Every run (calibration or batch) goes through
/// this one function, so the instructions between the snapshots differ only
/// by the loop's iterations, and the calibration subtracts the rest from
/// the model's figures exactly as from the ticks. The snapshots lie outside
/// the timer pair: the tick figures do not see them.
#[inline(never)]
fn timed(fence: Fence, f: LoopFn, n: u32) -> u64 {
    crate::model::snap();
    let t0 = fence.start();
    // SAFETY: the loop functions preserve the C ABI registers and stack.
    unsafe { f(n) };
    let t = fence.end().wrapping_sub(t0);
    crate::model::snap();
    t
}

/// One timed region of any code: a model snapshot, the fenced timer, `f`,
/// the timer, a snapshot, as [`timed`] does for the loop functions. A
/// program that times closures calibrates with `timed_region(fence, || {})`
/// and reports the calibration's snapshots with its figures.
#[inline(always)]
pub fn timed_region(fence: Fence, f: impl FnOnce()) -> u64 {
    crate::model::snap();
    let t0 = fence.start();
    f();
    let t = fence.end().wrapping_sub(t0);
    crate::model::snap();
    t
}

/// Times `f(0)` [`OVERHEAD_RUNS`] times: the fixed cost of one timed batch.
pub fn overhead(fence: Fence, f: LoopFn) -> u64 {
    let mut t = [0u64; OVERHEAD_RUNS];
    for v in t.iter_mut() {
        *v = timed(fence, f, 0);
    }
    t.sort_unstable();
    t[t.len() / 2]
}

/// Runs `batches` timed batches of `size` iterations of `f` (after one
/// warm-up batch); writes each batch's ticks, overhead subtracted, and
/// returns where its model snapshots are.
pub fn measure(fence: Fence, f: LoopFn, size: u32, out: &mut [u64]) -> Snaps {
    let calib = crate::model::next_seq();
    let over = overhead(fence, f);
    // SAFETY: as in `timed`.
    unsafe { f(size) };
    let batches = crate::model::next_seq();
    for v in out.iter_mut() {
        *v = timed(fence, f, size).saturating_sub(over);
    }
    Snaps {
        stream: abi::model::SNAP_USER,
        calib,
        calib_runs: OVERHEAD_RUNS as u32,
        batches,
    }
}

pub use abi::stats::{summarize, Summary};

/// The most batches one figure keeps.
pub const MAX_SAMPLES: usize = abi::cmdline::MAX_BATCHES as usize;

static mut VALUES: [f64; MAX_SAMPLES] = [0.0; MAX_SAMPLES];
static mut SCRATCH: [f64; MAX_SAMPLES] = [0.0; MAX_SAMPLES];

/// Room for one record body: a `samples` record of the most batches.
const RECORD_CAPACITY: usize = abi::report::MAX_USER_RECORD;
static mut RECORD: [u8; RECORD_CAPACITY] = [0; RECORD_CAPACITY];

/// A record stream (`write_bench`'s lines) to the kernel: each line, its
/// marker cut, goes out as one `record` system call.
struct Records<'a> {
    buf: &'a mut [u8; RECORD_CAPACITY],
    len: usize,
}

impl core::fmt::Write for Records<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for piece in s.split_inclusive('\n') {
            let (text, end) = match piece.strip_suffix('\n') {
                Some(t) => (t, true),
                None => (piece, false),
            };
            let n = text.len().min(RECORD_CAPACITY - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&text.as_bytes()[..n]);
            self.len += n;
            if end {
                // Cut the marker and schema (`@@tb1 `): the kernel writes its own.
                let line = &self.buf[..self.len];
                let body = match line.iter().position(|&b| b == b' ') {
                    Some(i) if line.starts_with(MARKER.as_bytes()) => &line[i + 1..],
                    _ => line,
                };
                crate::submit_record(body);
                self.len = 0;
            }
        }
        Ok(())
    }
}

/// Summarises a figure and reports it: its `bench` and `samples` records
/// (`abi::report::write_bench`), through the `record` system call, which
/// checks each and tags it with this program. Every figure a user program
/// measures leaves through here. Call it from one thread at a time.
pub fn report(f: &Figure) -> Summary {
    let f = Figure {
        samples: &f.samples[..f.samples.len().min(MAX_SAMPLES)],
        ..*f
    };
    // SAFETY: the buffers are used only here, and reports come from one
    // thread at a time (the contract above).
    let (vals, scratch) = unsafe { (&mut *(&raw mut VALUES), &mut *(&raw mut SCRATCH)) };
    let s = f.summarize(vals, scratch);
    // SAFETY: as for the value buffers.
    let buf = unsafe { &mut *(&raw mut RECORD) };
    let mut out = Records { buf, len: 0 };
    let _ = write_bench(&mut out, &f, &s);
    s
}

/// RDPMC of fixed counter `i`.
#[inline(always)]
fn rdpmc_fixed(i: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: only called when the kernel offered the fixed counters
    // (FEATURE_FIXED_PMC); should RDPMC fault anyway, the kernel turns them
    // off and resumes after it with EDX:EAX = 0 (`cpuinfo` then says so).
    unsafe {
        asm!("rdpmc", in("ecx") RDPMC_FIXED | i, out("eax") lo, out("edx") hi, options(nomem, nostack))
    };
    ((hi as u64) << 32) | lo as u64
}

/// Instructions retired and core cycles per iteration of `f`, from the
/// architectural fixed counters: the median of 5 batches of `size`, with
/// the same loop at zero iterations subtracted.
pub fn counters(f: LoopFn, size: u32) -> (f64, f64) {
    let once = |n: u32| {
        let (i0, c0) = (rdpmc_fixed(0), rdpmc_fixed(1));
        // SAFETY: as in `measure`.
        unsafe { f(n) };
        (
            rdpmc_fixed(0).wrapping_sub(i0),
            rdpmc_fixed(1).wrapping_sub(c0),
        )
    };
    let (bi, bc) = once(0);
    let mut v = [(0u64, 0u64); 5];
    for x in v.iter_mut() {
        let (i, c) = once(size);
        *x = (i.saturating_sub(bi), c.saturating_sub(bc));
    }
    let mut ins = v.map(|x| x.0);
    let mut cyc = v.map(|x| x.1);
    ins.sort_unstable();
    cyc.sort_unstable();
    (ins[2] as f64 / size as f64, cyc[2] as f64 / size as f64)
}
