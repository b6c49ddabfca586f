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
#![no_std]
#![no_main]

use core::fmt::Write as _;

use core::sync::atomic::{AtomicU32, Ordering::SeqCst};
use userland::abi::cases::eflags::{self, HOSTILE, IF};
use userland::abi::layout::{
    KERNEL_MAP_END, PAGE_SIZE, USER_BASE, USER_STACK_SIZE, USER_STACK_TOP, USER_TOP,
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

/// xorshift32 (Marsaglia 2003): period 2^32 - 1, never 0.
struct Rng(u32);

impl Rng {
    fn new(seed: u32) -> Rng {
        // Spread the seed's bits (small seeds give poor first outputs
        // otherwise); murmur3's finaliser, then make sure it is not 0.
        let mut x = seed ^ 0x9e37_79b9;
        x ^= x >> 16;
        x = x.wrapping_mul(0x85eb_ca6b);
        x ^= x >> 13;
        x = x.wrapping_mul(0xc2b2_ae35);
        x ^= x >> 16;
        Rng(if x == 0 { 0x6d2b_79f5 } else { x })
    }
    fn next(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }
    /// Uniform in `0..n` (n > 0), by multiply-shift.
    fn below(&mut self, n: u32) -> u32 {
        ((self.next() as u64 * n as u64) >> 32) as u32
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u32) as usize]
    }
}

/// Writable memory the calls may use; only its first half is ever the start
/// of a valid range, so any valid range (at most [`MAX_SMALL`] bytes, or a
/// cpuinfo) ends inside it.
const SCRATCH_SIZE: usize = 8192;
const MAX_SMALL: u32 = 4096;
#[repr(C, align(4096))]
struct Scratch([u8; SCRATCH_SIZE]);
static mut SCRATCH: Scratch = Scratch([0; SCRATCH_SIZE]);
/// Read-only memory the calls may read.
static READ_ONLY: [u8; 256] = {
    let mut b = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        b[i] = (i as u8).wrapping_mul(37).wrapping_add(11);
        i += 1;
    }
    b
};
/// Everything this program maps lies below this (checked at start), so a
/// range starting between here and the stack's guard page is unmapped.
const IMAGE_LIMIT: u32 = USER_BASE + (16 << 20);
const STACK_BOTTOM: u32 = USER_STACK_TOP - USER_STACK_SIZE;

fn scratch() -> u32 {
    (&raw mut SCRATCH) as u32
}

/// What a (pointer, length) pair is, as the kernel's checks must see it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Range {
    /// Inside the scratch buffer: readable and writable.
    Writable,
    /// Inside the read-only data: readable only.
    ReadOnly,
    /// Touches memory the user may not use (some byte unmapped, in the
    /// kernel, above user space, or the range wraps): EFAULT.
    Bad,
    /// Length 0: never checked, never touched.
    Empty,
}

impl Range {
    fn readable(self) -> bool {
        self != Range::Bad
    }
    fn writable(self) -> bool {
        matches!(self, Range::Writable | Range::Empty)
    }
}

/// A length for a range that is bad anyway: small, a page or more, or huge.
fn any_len(r: &mut Rng) -> u32 {
    match r.below(6) {
        0 => 1 + r.below(16),
        1 => 1 + r.below(MAX_SMALL),
        2 => PAGE_SIZE + r.below(1 << 20),
        3 => u32::MAX - r.below(16),
        4 => 0x8000_0000 + r.below(0x1000),
        _ => r.next() | 1,
    }
}

/// A (pointer, length) pair and its kind; `fixed` forces the length (cpuinfo
/// copies one `CpuInfo` whatever its length argument says).
fn range(r: &mut Rng, fixed: Option<u32>) -> (u32, u32, Range) {
    let small = |r: &mut Rng| match r.below(4) {
        0 => r.below(MAX_SMALL + 1),
        _ => r.below(65),
    };
    let len_of = |r: &mut Rng, dflt: &dyn Fn(&mut Rng) -> u32| fixed.unwrap_or_else(|| dflt(r));
    let (ptr, len, kind) = match r.below(16) {
        0..=4 => {
            let len = len_of(r, &small);
            (scratch() + r.below(MAX_SMALL), len, Range::Writable)
        }
        5 | 6 => {
            let off = r.below(128);
            let len = len_of(r, &|r: &mut Rng| r.below(129));
            let len = len.min(256 - off);
            (READ_ONLY.as_ptr() as u32 + off, len, Range::ReadOnly)
        }
        7 => {
            let p = r.pick(&[0, 4, 0xfff, 0x1000, 0x10_0000, KERNEL_MAP_END - 4]);
            let p = if r.below(2) == 0 {
                p
            } else {
                r.below(USER_BASE)
            };
            (p, len_of(r, &any_len), Range::Bad)
        }
        8 => {
            let p = IMAGE_LIMIT + r.below(STACK_BOTTOM - PAGE_SIZE - IMAGE_LIMIT);
            (p, len_of(r, &any_len), Range::Bad)
        }
        9 => {
            let p = USER_TOP + r.below(u32::MAX - USER_TOP);
            (p, len_of(r, &any_len), Range::Bad)
        }
        10 => {
            // The end wraps past 4 GiB.
            let len = len_of(r, &|r: &mut Rng| 0x100 + r.below(0x1000));
            let p = 0u32.wrapping_sub(1 + r.below(len.max(2) - 1));
            (p, len, Range::Bad)
        }
        11 | 12 => {
            // Straddles a mapped/unmapped boundary: the stack's top (above
            // it nothing is mapped), or its bottom (below it the guard page).
            let edge = if r.below(2) == 0 {
                USER_STACK_TOP
            } else {
                STACK_BOTTOM
            };
            let len = len_of(r, &|r: &mut Rng| 2 + r.below(64)).max(2);
            let before = 1 + r.below(len - 1);
            (edge - before, len, Range::Bad)
        }
        13 => {
            // From the scratch buffer, too long: runs into unmapped pages
            // past the program or beyond user space, or overflows.
            let len = fixed.unwrap_or_else(|| match r.below(3) {
                0 => u32::MAX,
                1 => (16 << 20) + r.below(0x1000_0000),
                _ => 0x8000_0000 + r.below(0x4000_0000),
            });
            let kind = if fixed.is_some() {
                Range::Writable
            } else {
                Range::Bad
            };
            (scratch() + r.below(MAX_SMALL), len, kind)
        }
        14 => {
            // Zero length: any pointer at all.
            let p = r.next();
            return match fixed {
                Some(l) => (p & 0x3fff_ffff, l, Range::Bad),
                None => (p, 0, Range::Empty),
            };
        }
        _ => {
            // A random word, kept away from what this program maps.
            let mut p = r.next();
            if (USER_BASE..IMAGE_LIMIT).contains(&p) || (STACK_BOTTOM..USER_STACK_TOP).contains(&p)
            {
                p &= 0x3fff_ffff;
            }
            (p, len_of(r, &any_len), Range::Bad)
        }
    };
    if len == 0 {
        (ptr, 0, Range::Empty)
    } else {
        (ptr, len, kind)
    }
}

/// Argument values for registers a call does not read, or reads as numbers.
fn word(r: &mut Rng) -> u32 {
    match r.below(4) {
        0 => r.pick(&[
            0,
            1,
            2,
            3,
            4,
            u32::MAX,
            0x7fff_ffff,
            0x8000_0000,
            USER_BASE,
            USER_TOP,
            USER_STACK_TOP,
            0x0010_0000,
        ]),
        1 => r.below(256),
        _ => r.next(),
    }
}

/// A file descriptor: the five that exist, or not.
fn any_fd(r: &mut Rng) -> u32 {
    match r.below(8) {
        0..=5 => r.below(6),
        6 => r.pick(&[99, 0x8000_0000, u32::MAX]),
        _ => r.next(),
    }
}

/// Numbers the table has that the fuzzer calls: all but EXIT and
/// THREAD_EXIT (they end the caller) and TRACE (it prints a page per call).
/// THREAD_CREATE is called here with arguments it must refuse; the rounds
/// ([`Round`]) create the threads.
const VALID: [u32; 20] = [
    nr::NULL,
    nr::WRITE,
    nr::READ,
    nr::GETPID,
    nr::GETEUID,
    nr::YIELD,
    nr::CPUINFO,
    nr::ENTRY_FLOOR,
    nr::ARGSUM,
    nr::SLEEP,
    nr::THREAD_CREATE,
    nr::UMTX_LOCK,
    nr::UMTX_UNLOCK,
    nr::SLEEP_ON,
    nr::WAKEUP,
    nr::POOL_ALIGN,
    nr::GETTID,
    nr::GETPRIO,
    nr::LOOKUP_BENCH,
    nr::RECORD,
];

/// The main thread's own user mutex word: the model knows its value (0 or
/// the main thread's tid); no other thread touches it.
static MAIN_UMTX: AtomicU32 = AtomicU32::new(0);

/// Channels the helpers sleep on: their own (with a timeout) and the one
/// they wait on at the end of a round. The main thread's channels avoid
/// them, so its `wakeup` wakes nobody.
const HELPER_CHAN: u32 = 0x4845_4c00;
const DONE_CHAN: u32 = 0x444f_4e45;

/// A channel for the main thread: any word but the helpers'. Often one
/// of the numbers a kernel might use for a channel of its own (the old
/// `sleep` used `0xfffff000 | thread`): `sleep` must not be woken by them.
fn main_chan(r: &mut Rng) -> u32 {
    let c = match r.below(4) {
        0 => 0xffff_f000 + r.below(MAX_THREADS as u32),
        _ => word(r),
    };
    if c == DONE_CHAN || (HELPER_CHAN..HELPER_CHAN + MAX_THREADS as u32).contains(&c) {
        c ^ 0x0100_0000
    } else {
        c
    }
}

/// What the kernel must return.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Value(u32),
    Errno(i32),
}

impl Want {
    fn raw(self) -> u32 {
        match self {
            Want::Value(v) => v,
            Want::Errno(e) => (-e) as u32,
        }
    }
}

/// The fuzzer's picture of the kernel: the ring buffer's contents.
struct Model {
    ring: [u8; fd::RING_SIZE],
    head: usize,
    len: usize,
    pid: u32,
    usable: u32,
    info: CpuInfo,
    /// The main thread's tid.
    tid: u32,
    /// Helper threads are alive (a crowd round): `pool_align` is -EBUSY,
    /// and a turnstile may exist, so `lookup_bench` gets counts it refuses.
    crowd: bool,
    /// The main thread owns [`MAIN_UMTX`] (the word holds its tid).
    umtx_mine: bool,
}

/// One generated call and what it must give.
struct Plan {
    mech: Mechanism,
    nr: u32,
    args: [u32; 6],
    flags: u32,
    want: Want,
    /// For reads and cpuinfo: where the kernel writes and how much must
    /// match (checked after the call).
    out: Option<(u32, usize)>,
}

impl Model {
    fn ring_push(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(fd::RING_SIZE - self.len);
        for &b in &bytes[..n] {
            self.ring[(self.head + self.len) % fd::RING_SIZE] = b;
            self.len += 1;
        }
        n
    }

    /// Plans one call, updating the model as the kernel must update itself.
    fn plan(&mut self, r: &mut Rng, mechs: &[Mechanism]) -> Plan {
        let mech = r.pick(mechs);
        let flags = r.next() & HOSTILE;
        let mut args = [word(r), word(r), word(r), word(r), word(r), word(r)];
        let number = if r.below(4) != 0 {
            r.pick(&VALID)
        } else {
            match r.below(4) {
                0 => nr::COUNT + r.below(16),
                1 => u32::MAX - r.below(16),
                2 => 0x8000_0000 | r.next(),
                _ => nr::COUNT + r.below(u32::MAX - nr::COUNT),
            }
        };
        let mut out = None;
        let want = match number {
            nr::NULL | nr::YIELD => Want::Value(0),
            nr::GETPID => Want::Value(self.pid),
            nr::GETEUID => Want::Value(DEFAULT_EUID),
            nr::ARGSUM => Want::Value(argsum(args)),
            nr::WRITE => {
                let (p, len, kind) = range(r, None);
                let mut fdn = any_fd(r);
                // Nothing reaches the console: valid writes to it go to the null device.
                if (fdn == fd::STDOUT || fdn == fd::STDERR) && kind != Range::Bad {
                    fdn = fd::NULL;
                }
                args[0] = fdn;
                args[1] = p;
                args[2] = len;
                if !kind.readable() {
                    Want::Errno(errno::EFAULT)
                } else {
                    match fdn {
                        fd::STDOUT | fd::STDERR | fd::NULL => Want::Value(len),
                        fd::RING => {
                            // SAFETY: a readable range of this program's own
                            // memory (or empty), as the kernel reads it.
                            let bytes = unsafe { user_bytes(p, len) };
                            Want::Value(self.ring_push(bytes) as u32)
                        }
                        _ => Want::Errno(errno::EBADF),
                    }
                }
            }
            nr::READ => {
                let (p, len, kind) = range(r, None);
                let fdn = any_fd(r);
                args[0] = fdn;
                args[1] = p;
                args[2] = len;
                if !kind.writable() {
                    Want::Errno(errno::EFAULT)
                } else {
                    match fdn {
                        fd::STDIN | fd::NULL => Want::Value(0),
                        fd::RING => {
                            let n = (len as usize).min(self.len);
                            out = Some((p, n));
                            Want::Value(n as u32)
                        }
                        _ => Want::Errno(errno::EBADF),
                    }
                }
            }
            nr::CPUINFO => {
                let size = core::mem::size_of::<CpuInfo>() as u32;
                let (p, _, kind) = range(r, Some(size));
                let len = match r.below(4) {
                    0 => r.below(size),
                    1 => size,
                    2 => size + r.below(64),
                    _ => r.next(),
                };
                args[0] = p;
                args[1] = len;
                if len < size {
                    Want::Errno(errno::EINVAL)
                } else if kind != Range::Writable {
                    Want::Errno(errno::EFAULT)
                } else {
                    out = Some((p, size as usize));
                    Want::Value(0)
                }
            }
            nr::ENTRY_FLOOR => {
                let m = match r.below(3) {
                    0 => r.below(6),
                    _ => r.below(4),
                };
                let mut on = match r.below(3) {
                    0 => word(r),
                    _ => r.below(2),
                };
                // Never the floor of sysenter or syscall (see the module comment).
                let fast = m == Mechanism::Sysenter as u32 || m == Mechanism::Syscall as u32;
                if fast && on == 1 {
                    on = 0;
                }
                args[0] = m;
                args[1] = on;
                let usable =
                    Mechanism::from_u32(m).is_some_and(|k| self.usable & (1 << k as u32) != 0);
                if usable && on <= 1 {
                    Want::Value(0)
                } else {
                    Want::Errno(errno::EINVAL)
                }
            }
            nr::GETTID => Want::Value(self.tid),
            nr::GETPRIO => {
                // Its own tid (the base priority: nobody waits on what it
                // holds), or one no thread has.
                args[0] = match r.below(2) {
                    0 => self.tid,
                    _ => 0x8000_0000 | r.next(),
                };
                if args[0] == self.tid {
                    Want::Value(PRIO_USER)
                } else {
                    Want::Errno(errno::ESRCH)
                }
            }
            nr::SLEEP => {
                // Short naps only: a long one is a hang of our own making.
                args[0] = r.below(3);
                Want::Value(0)
            }
            nr::SLEEP_ON => {
                args[0] = main_chan(r);
                args[1] = 1 + r.below(3);
                Want::Errno(errno::ETIMEDOUT)
            }
            nr::WAKEUP => {
                args[0] = main_chan(r);
                Want::Value(0)
            }
            nr::THREAD_CREATE => {
                // Arguments it must refuse: a bad entry or stack, or a
                // priority past PRIO_MAX with good ones.
                let code = main as *const () as u32;
                // Addresses no program maps, or the kernel's, or past user space.
                let bad = |r: &mut Rng| {
                    let unmapped = IMAGE_LIMIT + (r.below(0x1000) & !3);
                    r.pick(&[
                        0,
                        4,
                        KERNEL_MAP_END - 4,
                        0x10_0000,
                        USER_BASE - 4,
                        unmapped,
                        STACK_BOTTOM - PAGE_SIZE,
                        USER_TOP,
                        u32::MAX & !3,
                    ])
                };
                let (eip, eip_ok) = match r.below(3) {
                    0 => (code, true),
                    1 => (READ_ONLY.as_ptr() as u32, true),
                    _ => (bad(r), false),
                };
                // The kernel checks [esp - 4, esp) writable.
                let (esp, esp_ok) = match r.below(3) {
                    0 => (scratch() + 4 + (r.below(MAX_SMALL) & !3), true),
                    1 => ((READ_ONLY.as_ptr() as u32 + 4) & !3, false),
                    _ => (bad(r).wrapping_add(4), false),
                };
                args[0] = eip;
                args[1] = esp;
                if !(eip_ok && esp_ok) {
                    Want::Errno(errno::EFAULT)
                } else {
                    args[3] = PRIO_MAX + 1 + r.below(u32::MAX - PRIO_MAX - 1);
                    Want::Errno(errno::EINVAL)
                }
            }
            nr::UMTX_LOCK | nr::UMTX_UNLOCK => {
                let w = (&raw const MAIN_UMTX) as u32;
                let addr = match r.below(4) {
                    0 | 1 => w,
                    2 => w + 1 + r.below(3),
                    _ => range(r, Some(4)).0,
                };
                args[0] = addr;
                let mine = self.umtx_mine;
                if addr % 4 != 0 {
                    Want::Errno(errno::EINVAL)
                } else if addr != w {
                    // Read-only, kernel, unmapped: never our writable words
                    // (range() keeps writable ones in the scratch buffer,
                    // which a fixed length of 4 marks Writable: avoid it).
                    if (scratch()..scratch() + SCRATCH_SIZE as u32).contains(&addr) {
                        args[0] = (READ_ONLY.as_ptr() as u32 + 3) & !3;
                    }
                    Want::Errno(errno::EFAULT)
                } else if number == nr::UMTX_LOCK {
                    if mine {
                        Want::Errno(errno::EDEADLK)
                    } else {
                        self.umtx_mine = true;
                        Want::Value(0)
                    }
                } else if mine {
                    self.umtx_mine = false;
                    Want::Value(0)
                } else {
                    Want::Errno(errno::EPERM)
                }
            }
            nr::POOL_ALIGN => {
                // A valid layout rarely: each prints the layout.
                args[0] = match r.below(64) {
                    0 => r.pick(&[128, 64, 0]),
                    _ => match word(r) {
                        128 | 64 | 0 => 1,
                        v => v,
                    },
                };
                match args[0] {
                    128 | 64 | 0 if self.crowd => Want::Errno(errno::EBUSY),
                    128 | 64 | 0 => Want::Value(0),
                    _ => Want::Errno(errno::EINVAL),
                }
            }
            nr::LOOKUP_BENCH => {
                args[0] = match r.below(8) {
                    0 => LOOKUP_BENCH_MAX + 1 + r.below(u32::MAX - LOOKUP_BENCH_MAX),
                    1 => u32::MAX,
                    2 if r.below(32) == 0 => LOOKUP_BENCH_MAX,
                    _ => r.below(257),
                };
                if self.crowd && args[0] <= LOOKUP_BENCH_MAX {
                    args[0] = LOOKUP_BENCH_MAX + 1;
                }
                if args[0] > LOOKUP_BENCH_MAX {
                    Want::Errno(errno::EINVAL)
                } else {
                    Want::Value(0)
                }
            }
            nr::RECORD => {
                let (p, len, kind) = range(r, None);
                let len = match r.below(8) {
                    0 => MAX_USER_RECORD as u32 + 1 + r.below(1 << 16),
                    _ => len,
                };
                args[0] = p;
                args[1] = len;
                if len == 0 || len as usize > MAX_USER_RECORD {
                    Want::Errno(errno::EINVAL)
                } else if !kind.readable() {
                    Want::Errno(errno::EFAULT)
                } else {
                    // SAFETY: a readable range of this program's memory.
                    let body = unsafe { user_bytes(p, len) };
                    if check_user_record(body).is_ok() {
                        // A body the kernel would print: send none instead.
                        args[1] = 0;
                    }
                    Want::Errno(errno::EINVAL)
                }
            }
            _ => Want::Errno(errno::ENOSYS),
        };
        Plan {
            mech,
            nr: number,
            args,
            flags,
            want,
            out,
        }
    }

    /// Checks what the kernel wrote to user memory for `p`; advances the ring.
    fn check_out(&mut self, p: &Plan) -> Result<(), &'static str> {
        let Some((at, n)) = p.out else {
            return Ok(());
        };
        // SAFETY: `at..at+n` lies in the scratch buffer (a writable range
        // the plan chose), which the kernel has just written.
        let got = unsafe { user_bytes(at, n as u32) };
        if p.nr == nr::CPUINFO {
            // SAFETY: the same bytes, as the struct the kernel copied out.
            let c = unsafe { (at as *const CpuInfo).read_unaligned() };
            return if c == self.info {
                Ok(())
            } else {
                Err("cpuinfo copied out something else")
            };
        }
        for &b in got {
            if b != self.ring[self.head] {
                return Err("the ring gave back other bytes");
            }
            self.head = (self.head + 1) % fd::RING_SIZE;
            self.len -= 1;
        }
        Ok(())
    }
}

/// The bytes at `[p, p+len)` of this program's memory.
///
/// # Safety
/// The range must be readable user memory of this program, or empty.
unsafe fn user_bytes(p: u32, len: u32) -> &'static [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { core::slice::from_raw_parts(p as *const u8, len as usize) }
}

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

/// The main thread's calls per round. Each round is solo or a crowd (one
/// to [`MAX_HELPERS`] helper threads run their own calls meanwhile).
const ROUND_CALLS: u32 = 1_000;
const MAX_HELPERS: u32 = 3;
/// Calls each helper makes, and how many times it takes [`SHARED`].
const HELPER_CALLS: u32 = 200;
const LOCK_ROUNDS: u32 = 4;
/// How long the main thread waits (sleeps of one tick, or yields) for the
/// helpers before it calls the round hung.
const MAX_WAITS: u32 = 10_000;

/// The helpers' mutex; [`COUNTER`] is what it guards.
static SHARED: Umtx = Umtx::new();
static mut COUNTER: u32 = 0;
/// What the helpers need from the main thread: a seed per round, the
/// mechanisms (`1 << Mechanism`), the pid.
static HELPER_SEED: AtomicU32 = AtomicU32::new(0);
static MECH_MASK: AtomicU32 = AtomicU32::new(0);
static PID: AtomicU32 = AtomicU32::new(0);
/// Helpers that saw a wrong result (each printed it), and calls made.
static HELPER_FAILS: AtomicU32 = AtomicU32::new(0);
static HELPER_MADE: AtomicU32 = AtomicU32::new(0);

fn mechs_of(mask: u32, out: &mut [Mechanism; 4]) -> usize {
    let mut n = 0;
    for m in Mechanism::ALL {
        if mask & (1 << m as u32) != 0 {
            out[n] = m;
            n += 1;
        }
    }
    n
}

/// A helper's call: the ones whose result does not depend on what the
/// main thread does, with hostile arguments.
fn helper_plan(r: &mut Rng, mechs: &[Mechanism], tid: u32, h: u32) -> Plan {
    let mech = r.pick(mechs);
    let flags = r.next() & HOSTILE;
    let mut args = [word(r), word(r), word(r), word(r), word(r), word(r)];
    let (number, want) = match r.below(12) {
        0 => (nr::NULL, Want::Value(0)),
        1 => (nr::GETPID, Want::Value(PID.load(SeqCst))),
        2 => (nr::GETEUID, Want::Value(DEFAULT_EUID)),
        3 => (nr::GETTID, Want::Value(tid)),
        4 => (nr::ARGSUM, Want::Value(argsum(args))),
        5 => {
            args[0] = 0x8000_0000 | r.next();
            (nr::GETPRIO, Want::Errno(errno::ESRCH))
        }
        6 => {
            // To the null device: only whether the range is readable counts.
            let (p, len, kind) = range(r, None);
            args[..3].copy_from_slice(&[fd::NULL, p, len]);
            let want = if kind.readable() {
                Want::Value(len)
            } else {
                Want::Errno(errno::EFAULT)
            };
            (nr::WRITE, want)
        }
        7 => {
            // From stdin: nothing is written, whether the range is writable counts.
            let (p, len, kind) = range(r, None);
            args[..3].copy_from_slice(&[fd::STDIN, p, len]);
            let want = if kind.writable() {
                Want::Value(0)
            } else {
                Want::Errno(errno::EFAULT)
            };
            (nr::READ, want)
        }
        8 => {
            // A mutex this thread does not hold: another may.
            args[0] = &SHARED.0 as *const AtomicU32 as u32;
            (nr::UMTX_UNLOCK, Want::Errno(errno::EPERM))
        }
        9 => {
            args[0] = HELPER_CHAN + h;
            args[1] = 1;
            (nr::SLEEP_ON, Want::Errno(errno::ETIMEDOUT))
        }
        10 => match r.below(4) {
            0 => {
                args[0] = 1;
                (nr::SLEEP, Want::Value(0))
            }
            _ => (nr::YIELD, Want::Value(0)),
        },
        _ => match r.below(2) {
            0 => {
                args[0] = LOOKUP_BENCH_MAX + 1 + r.below(0x1000);
                (nr::LOOKUP_BENCH, Want::Errno(errno::EINVAL))
            }
            _ => (nr::COUNT + r.below(64), Want::Errno(errno::ENOSYS)),
        },
    };
    Plan {
        mech,
        nr: number,
        args,
        flags,
        want,
        out: None,
    }
}

/// A helper thread of a crowd round: its calls, each checked; the shared
/// mutex taken [`LOCK_ROUNDS`] times around a read-yield-write of
/// [`COUNTER`]; then it sleeps on [`DONE_CHAN`] until the round ends.
/// The CPUs the helpers ran on (bit n: CPU n), for the record.
static HELPER_CPUS: AtomicU32 = AtomicU32::new(0);

fn helper(h: u32) {
    let me = threads::gettid();
    HELPER_CPUS.fetch_or(1 << threads::cpu(), SeqCst);
    let seed = HELPER_SEED.load(SeqCst) ^ (h + 1).wrapping_mul(0x9e37_79b9);
    let mut r = Rng::new(seed);
    let mut all = [Mechanism::Int80; 4];
    let n = mechs_of(MECH_MASK.load(SeqCst), &mut all);
    let mechs = &all[..n];
    let fail = |what: &str| {
        println!("fuzz: helper {h} (tid {me}) FAILED: {what}");
        HELPER_FAILS.fetch_add(1, SeqCst);
    };
    for i in 0..HELPER_CALLS {
        if i % (HELPER_CALLS / LOCK_ROUNDS) == 0 {
            if SHARED.lock(me).is_err() {
                fail("umtx_lock of the shared mutex failed");
                break;
            }
            // SAFETY: guarded by SHARED; the yield lets the others try it.
            let c = unsafe { COUNTER };
            threads::yield_now();
            unsafe { COUNTER = c + 1 };
            if SHARED.unlock(me).is_err() {
                fail("umtx_unlock of the shared mutex failed");
                break;
            }
        }
        let p = helper_plan(&mut r, mechs, me, h);
        let a = flagged::call(p.mech, p.nr, p.args, p.flags);
        HELPER_MADE.fetch_add(1, SeqCst);
        if let Err(why) = judge(&p, &a) {
            report_failure(seed, i, &p, &a, why);
            fail("a call's result");
            break;
        }
    }
    if threads::sleep_on(DONE_CHAN, 0).is_err() {
        fail("the sleep until the round's end timed out");
    }
}

/// Sleeps on [`DONE_CHAN`] until woken: the threads that fill the pools.
fn sleeper(_: u32) {
    if threads::sleep_on(DONE_CHAN, 0).is_err() {
        println!("fuzz: a sleeper's sleep without timeout timed out");
        HELPER_FAILS.fetch_add(1, SeqCst);
    }
}

/// Wakes the `n` threads that are, or will soon be, asleep on
/// [`DONE_CHAN`]; then waits until each of `tids` is gone (getprio gives
/// ESRCH).
/// Yields while joining a helper before the join sleeps between looks.
const YIELDS_BEFORE_SLEEP: u32 = 8;

fn wake_and_join(n: u32, tids: &[u32]) -> Result<(), &'static str> {
    let mut woken = 0;
    let mut waits = 0;
    while woken < n {
        let w = threads::wakeup(DONE_CHAN, true);
        if w > n - woken {
            return Err("wakeup woke more threads than sleep on the channel");
        }
        woken += w;
        if woken < n {
            threads::sleep(1);
            waits += 1;
            if waits > MAX_WAITS {
                return Err("the helpers never went to sleep at the round's end");
            }
        }
    }
    for &tid in tids {
        let mut waits = 0;
        loop {
            match decode(threads::getprio(tid)) {
                Err(errno::ESRCH) => break,
                Ok(_) if waits < MAX_WAITS => {
                    // A helper here exits after a yield or two; one on
                    // another CPU needs the scheduler lock, which a loop of
                    // yields would keep from it most of the time: sleep.
                    if waits < YIELDS_BEFORE_SLEEP {
                        threads::yield_now();
                    } else {
                        threads::sleep(1);
                    }
                    waits += 1;
                }
                Ok(_) => return Err("a woken thread never exited"),
                Err(_) => return Err("getprio of a thread gave an errno other than ESRCH"),
            }
        }
    }
    if HELPER_FAILS.load(SeqCst) != 0 {
        return Err("a helper thread saw a wrong result (printed above)");
    }
    Ok(())
}

/// Fills the kernel's thread pool with sleepers until `thread_create`
/// says EAGAIN; wakes and joins them. Returns how many it made.
fn exhaust() -> Result<u32, &'static str> {
    let mut tids = [0u32; MAX_THREADS];
    let mut n = 0;
    loop {
        match threads::spawn(sleeper, 0, PRIO_USER) {
            Ok(tid) if n < MAX_THREADS => {
                tids[n] = tid;
                n += 1;
            }
            Ok(_) => return Err("more threads than the kernel holds"),
            Err(errno::EAGAIN) => break,
            Err(_) => return Err("thread_create failed with an errno other than EAGAIN"),
        }
    }
    if n == 0 {
        return Err("not one thread could be created");
    }
    wake_and_join(n as u32, &tids[..n])?;
    Ok(n as u32)
}

/// A helper that naps: `sleep` must not be cut short by a `wakeup`.
fn napper(_: u32) {
    threads::sleep(NAP_TICKS);
}
const NAP_TICKS: u32 = 5;

/// `sleep` is no channel anyone can name: while a helper naps, `wakeup` of
/// every number a kernel might use for a thread's private channel (the
/// old `sleep` used `0xfffff000 | thread`) wakes nobody.
fn nap_unwakeable() -> Result<(), &'static str> {
    let tid = threads::spawn(napper, 0, PRIO_USER).map_err(|_| "no thread for the napper")?;
    // Let it start its nap.
    threads::sleep(1);
    for c in 0..MAX_THREADS as u32 {
        if threads::wakeup(0xffff_f000 | c, true) != 0 {
            return Err("a wakeup cut a sleep short");
        }
    }
    let mut waits = 0;
    while decode(threads::getprio(tid)) != Err(errno::ESRCH) {
        threads::sleep(1);
        waits += 1;
        if waits > MAX_WAITS {
            return Err("the napper never woke");
        }
    }
    Ok(())
}

/// The helpers of the running round.
struct Round {
    tids: [u32; MAX_HELPERS as usize],
    n: u32,
}

impl Round {
    const SOLO: Round = Round {
        tids: [0; MAX_HELPERS as usize],
        n: 0,
    };

    /// Starts a round: solo, or a crowd of helpers (always the first, so
    /// that even a short run has one).
    fn start(r: &mut Rng, model: &mut Model, first: bool) -> Result<Round, &'static str> {
        let mut round = Round::SOLO;
        model.crowd = r.below(2) == 0 || first;
        if !model.crowd {
            return Ok(round);
        }
        HELPER_SEED.store(r.next(), SeqCst);
        // SAFETY: no helper runs between rounds.
        unsafe { COUNTER = 0 };
        round.n = 1 + r.below(MAX_HELPERS);
        // Spread over the CPUs (with one, all here): with several the
        // helpers' calls and the shared mutex cross CPUs.
        for h in 0..round.n {
            round.tids[h as usize] =
                threads::spawn_on(helper, h, PRIO_USER, userland::abi::syscall::CPU_ANY)
                    .map_err(|_| "thread_create refused a helper")?;
        }
        Ok(round)
    }

    /// Ends it: every helper done and gone, the mutex's count right.
    fn end(&self, model: &mut Model) -> Result<(), &'static str> {
        if self.n == 0 {
            return Ok(());
        }
        wake_and_join(self.n, &self.tids[..self.n as usize])?;
        model.crowd = false;
        // SAFETY: every helper has exited.
        if unsafe { COUNTER } != self.n * LOCK_ROUNDS {
            return Err("the shared mutex let two threads in at once");
        }
        Ok(())
    }
}

/// Checks one call's outcome against its plan (result, registers, flags).
fn judge(p: &Plan, a: &After) -> Result<(), &'static str> {
    if a.eax != p.want.raw() {
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
    if has_tsc {
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
