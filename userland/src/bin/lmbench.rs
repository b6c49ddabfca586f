//! lmbench (`prog=lmbench`): lmbench's process-level rows, each a figure
//! with its per-batch samples, named as lmbench names them
//! (`abi::lmbench`): `lat_syscall.null`/`.write` (the `bench` program's
//! `null` and `write1` loops), `lat_sig.install`/`.catch`, `lat_proc.fork`,
//! `lat_ctx.<N>p.<K>k`, `lat_pipe`, `lat_pagefault.zero`/`.cow`,
//! `bw_pipe`, and the super-smack-like macro workload `smack.<mechanism>`.
//! `bench=` chooses the groups (all by default); `batches=` caps the
//! batches (at most [`MAX_BATCHES`]), `batch_size=` sizes the system-call
//! loops only: every process-level row has a fixed, small batch, so a boot
//! under icount takes seconds.
//!
//! Only this process (the parent) snapshots the model and reads the timer:
//! a child never executes a marker, so the plugin's count of user
//! snapshots on CPU 0 stays the parent's. A batch's figure is everything
//! the CPU did between the parent's two snapshots: the children's work
//! and the switches to them included, as lmbench's wall-clock figures
//! include them.
#![no_std]
#![no_main]

use core::fmt::Write as _;
use core::hint::black_box;
use core::sync::atomic::{AtomicU32, Ordering};

use userland::abi::lmbench::{self as lm, group};
use userland::abi::model::{Snaps, SNAP_USER};
use userland::abi::report::{kind, Figure, Measure};
use userland::abi::syscall::{decode, nr, wait, CpuInfo, PRIO_USER};
use userland::abi::Mechanism;
use userland::bench::{self, Fence, Summary};
use userland::{println, record, sys, threads, Line};

/// Batches per figure at most (`batches=` caps it lower).
const MAX_BATCHES: usize = 32;
/// Calibration runs per figure (their median is subtracted).
const CALIB_RUNS: usize = 5;
/// fork + exit + wait rounds per `lat_proc.fork` batch.
const FORK_ROUNDS: u32 = 4;
/// Fresh pages touched per `lat_pagefault` batch.
const FAULT_PAGES: u32 = 16;
/// Round trips per `lat_pipe` batch.
const PIPE_ROUNDS: u32 = 16;
/// Hand-offs per `lat_ctx` batch (laps × processes).
const CTX_HANDOFFS: u32 = 16;
/// Bytes per `bw_pipe` batch: four of lmbench's 64 KiB writes.
const BW_BYTES: usize = 4 * lm::BW_PIPE_CHUNK;
/// Queries per `smack` batch.
const SMACK_QUERIES: u32 = 16;
/// `sigaction` calls and caught signals per `lat_sig` batch.
const SIG_ROUNDS: u32 = 16;
/// How long the copy-on-write child sleeps (timer ticks): far longer than
/// the parent's timed writes, which check that it still lives afterwards.
const COW_CHILD_TICKS: u32 = 5;

/// What a row's closure is asked to do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before each batch, untimed.
    Setup,
    /// One calibration run, timed: the overhead subtracted from each batch.
    Calib,
    /// One batch, timed.
    Timed,
    /// After each batch, untimed.
    Teardown,
}

/// One row's names and size.
struct Row<'a> {
    name: &'a str,
    mech: &'a str,
    path: &'a str,
    call: &'a str,
    /// Operations per batch.
    ops: u32,
}

static mut SAMPLES: [u64; MAX_BATCHES] = [0; MAX_BATCHES];

/// The CPUs a row's processes ran on (bit per CPU), as the tokens and
/// buffers they hand back say; the parent's own CPU is added.
static RAN: AtomicU32 = AtomicU32::new(0);

/// Notes that a row's work ran on the CPUs of `bits`.
#[inline(always)]
fn ran_on(bits: u32) {
    RAN.fetch_or(bits, Ordering::Relaxed);
}

struct Run {
    info: CpuInfo,
    fence: Fence,
    batches: usize,
    /// Rows that could not be measured.
    failed: u32,
}

impl Run {
    /// Times a row: a warm-up batch, [`CALIB_RUNS`] calibration runs, then
    /// every batch between its setup and teardown; reports the figure
    /// (each batch less the calibration's median). `f` returns false when
    /// something failed: the row is then left out and said so.
    fn row(&mut self, r: &Row, mut f: impl FnMut(Phase) -> bool) -> Option<Summary> {
        let fence = self.fence;
        RAN.store(cpu_bit(), Ordering::Relaxed);
        if !(f(Phase::Setup) && f(Phase::Timed) && f(Phase::Teardown)) {
            return self.fail(r.name, "the warm-up batch failed");
        }
        let calib = userland::model::next_seq();
        let mut cal = [0u64; CALIB_RUNS];
        let mut ok = true;
        for c in cal.iter_mut() {
            *c = bench::timed_region(fence, || ok &= f(Phase::Calib));
        }
        cal.sort_unstable();
        let over = cal[CALIB_RUNS / 2];
        let first = userland::model::next_seq();
        // SAFETY: one thread; rows run one at a time.
        let samples = unsafe { &mut (&mut *(&raw mut SAMPLES))[..self.batches] };
        for v in samples.iter_mut() {
            ok &= f(Phase::Setup);
            let t = bench::timed_region(fence, || ok &= f(Phase::Timed));
            ok &= f(Phase::Teardown);
            *v = t.saturating_sub(over);
        }
        if !ok {
            return self.fail(r.name, "a timed batch failed");
        }
        let s = bench::report(&Figure {
            name: r.name,
            mech: r.mech,
            path: r.path,
            call: r.call,
            measure: Measure::PerOp,
            unit: "",
            batch_size: r.ops,
            samples,
            tsc_hz: self.info.tsc_hz,
            counters: None,
            cpus: RAN.load(Ordering::Relaxed),
            snaps: Some(Snaps {
                stream: SNAP_USER,
                calib,
                calib_runs: CALIB_RUNS as u32,
                batches: first,
            }),
        });
        println!(
            "lmbench: {:<20} median {:>10.1}  min {:>10.1} {} per {}",
            r.name,
            s.median,
            s.min,
            self.info.unit(),
            if lm::per_byte(r.name) { "byte" } else { "op" }
        );
        Some(s)
    }

    fn fail(&mut self, name: &str, why: &str) -> Option<Summary> {
        println!("lmbench: {name}: not measured: {why}");
        self.failed += 1;
        None
    }

    fn wants(&self, g: u32) -> bool {
        self.info.lmbench & g != 0
    }
}

/// Why the rows that go through a chosen mechanism were not measured.
const NO_MECHANISM: &str = "entry= allows no mechanism this CPU has";

/// Why a fork failed, for a row's "not measured" line: `EAGAIN` is the
/// kernel's process or thread table (each CPU's idle thread holds a
/// thread slot too), so a ring too large for the machine says so.
fn fork_failed(e: i32) -> &'static str {
    if e == userland::abi::errno::EAGAIN {
        "fork: EAGAIN (the kernel's process or thread table is full)"
    } else {
        "fork failed"
    }
}

/// This CPU's bit, for a figure's `cpus`.
fn cpu_bit() -> u32 {
    1 << threads::cpu().min(31)
}

// ---------------------------------------------------------------- pipes

/// The pipe calls (`abi::syscall::nr::PIPE` ...), through int 0x80.
mod p {
    use super::*;

    pub fn pipe() -> Result<(u32, u32), i32> {
        sys::pipe()
    }
    pub fn read(fd: u32, buf: &mut [u8]) -> Result<usize, i32> {
        sys::read(fd, buf)
    }
    pub fn write(fd: u32, buf: &[u8]) -> Result<usize, i32> {
        sys::write_fd(fd, buf)
    }
    pub fn close(fd: u32) {
        let _ = sys::close(fd);
    }
    /// Reads exactly `buf.len()` bytes; false at end of file or on an error.
    pub fn read_full_via(m: Mechanism, fd: u32, buf: &mut [u8]) -> bool {
        let mut got = 0;
        while got < buf.len() {
            let rest = &mut buf[got..];
            let r = sys::call(
                m,
                nr::READ,
                [fd, rest.as_mut_ptr() as u32, rest.len() as u32, 0, 0, 0],
            );
            match decode(r) {
                Ok(0) | Err(_) => return false,
                Ok(n) => got += n as usize,
            }
        }
        true
    }
    /// Writes all of `buf`; false on an error.
    pub fn write_all_via(m: Mechanism, fd: u32, buf: &[u8]) -> bool {
        let mut put = 0;
        while put < buf.len() {
            let rest = &buf[put..];
            let r = sys::call(
                m,
                nr::WRITE,
                [fd, rest.as_ptr() as u32, rest.len() as u32, 0, 0, 0],
            );
            match decode(r) {
                Ok(0) | Err(_) => return false,
                Ok(n) => put += n as usize,
            }
        }
        true
    }
}

/// Forks a child that runs `child` and exits with its result.
fn spawn(child: impl FnOnce() -> i32) -> Result<u32, i32> {
    match sys::fork() {
        Ok(0) => sys::exit(child()),
        r => r,
    }
}

/// Reaps `pid`; true when it exited with 0.
fn reap(pid: u32) -> bool {
    matches!(sys::waitpid(pid as i32, 0), Ok((p, s)) if p == pid && wait::exit_code(s) == Some(0))
}

// ---------------------------------------------------------------- rows

/// `lat_syscall.null` and `.write`: the `bench` program's `null` and
/// `write1` loops (a 1-byte write to the null device, lmbench's
/// `write(/dev/null)`) through the first mechanism `entry=` allows.
fn lat_syscall(run: &mut Run) {
    let Some(m) = Mechanism::ALL.into_iter().find(|&m| run.info.wanted(m)) else {
        for name in [lm::LAT_SYSCALL_NULL, lm::LAT_SYSCALL_WRITE] {
            run.fail(name, NO_MECHANISM);
        }
        return;
    };
    use userland::bench::*;
    let (null, write): (LoopFn, LoopFn) = match m {
        Mechanism::Int80 => (tb_loop_int80_null, tb_loop_int80_write),
        Mechanism::Sysenter => (tb_loop_sysenter_null, tb_loop_sysenter_write),
        Mechanism::CallGate => (tb_loop_callgate_null, tb_loop_callgate_write),
        Mechanism::Syscall => (tb_loop_syscall_null, tb_loop_syscall_write),
    };
    let size = run.info.batch_size.max(1);
    for (name, call, f) in [
        (lm::LAT_SYSCALL_NULL, "null", null),
        (lm::LAT_SYSCALL_WRITE, "write1", write),
    ] {
        // SAFETY: one thread; rows run one at a time.
        let samples = unsafe { &mut (&mut *(&raw mut SAMPLES))[..run.batches] };
        let snaps = bench::measure(run.fence, f, size, samples);
        let s = bench::report(&Figure {
            name,
            mech: m.key(),
            path: "full",
            call,
            measure: Measure::PerOp,
            unit: "",
            batch_size: size,
            samples,
            tsc_hz: run.info.tsc_hz,
            counters: None,
            cpus: 0,
            snaps: Some(snaps),
        });
        println!(
            "lmbench: {:<20} median {:>10.1}  min {:>10.1} {} per op ({})",
            name,
            s.median,
            s.min,
            run.info.unit(),
            m.title()
        );
    }
}

/// `lat_proc.fork`: fork, the child exits at once, the parent waits
/// (lmbench's `lat_proc fork`).
fn lat_proc(run: &mut Run) {
    let row = Row {
        name: lm::LAT_PROC_FORK,
        mech: lm::LAT_PROC_FORK,
        path: "fork_exit_wait",
        call: "fork",
        ops: FORK_ROUNDS,
    };
    run.row(&row, |ph| match ph {
        Phase::Timed => (0..FORK_ROUNDS).all(|_| match spawn(|| 0) {
            Ok(pid) => reap(pid),
            Err(_) => false,
        }),
        _ => true,
    });
}

/// Touches (writes) `pages` pages from `at`.
#[inline(always)]
fn touch_pages(at: u32, pages: u32) {
    for i in 0..pages {
        // SAFETY: the caller's heap pages, one word each.
        unsafe { ((at + i * 4096) as *mut u32).write_volatile(i) };
    }
}

/// `lat_pagefault.zero`: the first write to a fresh heap page (a
/// demand-zero fault); each batch grows the heap by [`FAULT_PAGES`],
/// writes one word per page, and gives the pages back.
/// `lat_pagefault.cow`: under `fork=cow`, the parent's first write to a
/// page it shares with a live child (a copy-on-write fault). Under
/// `fork=copy` the same writes find private pages (the copy was made in
/// `fork`): the row then holds the plain writes, path `no_fault`.
fn lat_pagefault(run: &mut Run) {
    let bytes = (FAULT_PAGES * 4096) as i32;
    let zero = Row {
        name: lm::LAT_PAGEFAULT_ZERO,
        mech: lm::LAT_PAGEFAULT_ZERO,
        path: "demand_zero",
        call: "write",
        ops: FAULT_PAGES,
    };
    let mut heap = 0;
    run.row(&zero, |ph| match ph {
        Phase::Setup => match sys::sbrk(bytes) {
            Ok(h) => {
                heap = h;
                true
            }
            Err(_) => false,
        },
        Phase::Timed => {
            touch_pages(heap, FAULT_PAGES);
            true
        }
        Phase::Teardown => sys::sbrk(-bytes).is_ok(),
        Phase::Calib => true,
    });

    let cow = run.info.fork_cow != 0;
    let Ok(heap) = sys::sbrk(bytes) else {
        run.fail(lm::LAT_PAGEFAULT_COW, "no heap");
        return;
    };
    touch_pages(heap, FAULT_PAGES);
    let row = Row {
        name: lm::LAT_PAGEFAULT_COW,
        mech: lm::LAT_PAGEFAULT_COW,
        path: if cow { "cow_fault" } else { "no_fault" },
        call: "write",
        ops: FAULT_PAGES,
    };
    let mut child = 0;
    run.row(&row, |ph| match ph {
        Phase::Setup => match spawn(|| {
            threads::sleep(COW_CHILD_TICKS);
            0
        }) {
            Ok(pid) => {
                child = pid;
                // The snapshot count's page is shared too: make it this
                // process's own before the timed writes, so a snapshot's
                // increment does not fault between the model's markers.
                userland::model::own_count();
                true
            }
            Err(_) => false,
        },
        Phase::Timed => {
            touch_pages(heap, FAULT_PAGES);
            true
        }
        // The child still sleeps: the writes found shared pages.
        Phase::Teardown => {
            matches!(sys::waitpid(child as i32, wait::WNOHANG), Ok((0, _))) && reap(child)
        }
        Phase::Calib => true,
    });
    let _ = sys::sbrk(-bytes);
}

/// `lat_pipe`: a one-byte round trip between two processes through two
/// pipes (lmbench's `lat_pipe`).
fn lat_pipe(run: &mut Run) {
    let (Ok((ar, aw)), Ok((br, bw))) = (p::pipe(), p::pipe()) else {
        run.fail(lm::LAT_PIPE, "pipe() failed");
        return;
    };
    let child = spawn(|| {
        p::close(aw);
        p::close(br);
        // The echo: each byte back with this CPU's bit, until end of file.
        let me = cpu_bit() as u8;
        let mut b = [0u8];
        while matches!(p::read(ar, &mut b), Ok(1)) {
            if p::write(bw, &[me]) != Ok(1) {
                return 1;
            }
        }
        0
    });
    p::close(ar);
    p::close(bw);
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            p::close(aw);
            p::close(br);
            run.fail(lm::LAT_PIPE, fork_failed(e));
            return;
        }
    };
    let row = Row {
        name: lm::LAT_PIPE,
        mech: lm::LAT_PIPE,
        path: "round_trip",
        call: "1byte",
        ops: PIPE_ROUNDS,
    };
    run.row(&row, |ph| match ph {
        Phase::Timed => (0..PIPE_ROUNDS).all(|_| {
            let mut b = [0u8];
            let ok = p::write(aw, b"x") == Ok(1) && p::read(br, &mut b) == Ok(1);
            ran_on(b[0] as u32);
            ok
        }),
        _ => true,
    });
    p::close(aw);
    p::close(br);
    if !reap(child) {
        run.fail(lm::LAT_PIPE, "the echo process failed");
    }
}

/// The buffer `bw_pipe` moves (each process its own copy).
static mut BW_BUF: [u8; lm::BW_PIPE_CHUNK] = [0; lm::BW_PIPE_CHUNK];

/// `bw_pipe`: a child writes 64 KiB chunks into a pipe, the parent reads
/// them (lmbench's `bw_pipe`); the figure is ticks per byte.
fn bw_pipe(run: &mut Run) {
    let Ok((r, w)) = p::pipe() else {
        run.fail(lm::BW_PIPE, "pipe() failed");
        return;
    };
    // Every batch, the warm-up's included.
    let total = BW_BYTES * (run.batches + 1);
    let child = spawn(|| {
        p::close(r);
        // SAFETY: this process's own copy; one thread.
        let buf = unsafe { &mut *(&raw mut BW_BUF) };
        buf.fill(cpu_bit() as u8);
        let mut sent = 0;
        while sent < total {
            let n = lm::BW_PIPE_CHUNK.min(total - sent);
            match p::write(w, &buf[..n]) {
                Ok(k) if k > 0 => sent += k,
                _ => return 1,
            }
        }
        0
    });
    p::close(w);
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            p::close(r);
            run.fail(lm::BW_PIPE, fork_failed(e));
            return;
        }
    };
    // SAFETY: this process's own copy; one thread.
    let buf = unsafe { &mut *(&raw mut BW_BUF) };
    let row = Row {
        name: lm::BW_PIPE,
        mech: lm::BW_PIPE,
        path: "64k_writes",
        call: "read",
        ops: BW_BYTES as u32,
    };
    run.row(&row, |ph| match ph {
        Phase::Timed => {
            let mut got = 0;
            while got < BW_BYTES {
                let want = lm::BW_PIPE_CHUNK.min(BW_BYTES - got);
                match p::read(r, &mut buf[..want]) {
                    Ok(k) if k > 0 => got += k,
                    _ => return false,
                }
            }
            ran_on(buf[0] as u32);
            true
        }
        _ => true,
    });
    p::close(r);
    if !reap(child) {
        run.fail(lm::BW_PIPE, "the writer failed");
    }
}

/// Each process's working set for `lat_ctx` (its own copy after fork).
static mut WORKING_SET: [u32; lm::CTX_MAX_BYTES / 4] = [0; lm::CTX_MAX_BYTES / 4];

/// Sums the first `kib` KiB of this process's working set, as lmbench's
/// `lat_ctx` processes do between hand-offs.
#[inline(never)]
fn sum_working_set(kib: u32) -> u32 {
    // SAFETY: this process's own copy; one thread reads it.
    let ws = unsafe { &*(&raw const WORKING_SET) };
    ws[..(kib as usize * 256)]
        .iter()
        .fold(0u32, |s, &v| s.wrapping_add(v))
}

/// One hand-off's work in a ring member: read the token, sum the working
/// set, pass the token on with this CPU's bit.
#[inline(always)]
fn hand_off(from: u32, to: u32, kib: u32, me: u8) -> Option<u8> {
    let mut b = [0u8];
    if p::read(from, &mut b) != Ok(1) {
        return None;
    }
    black_box(sum_working_set(kib));
    let t = b[0] | me;
    (p::write(to, &[t]) == Ok(1)).then_some(t)
}

/// `lat_ctx.<N>p.<K>k`: `N` processes pass a token round a ring of pipes,
/// each summing `K` KiB of its own memory between hand-offs; one figure
/// per hand-off (a context switch), with the same hand-offs made by one
/// process through its own pipe (the pipe and the summing, no switch) as
/// the calibration, so the overhead lmbench subtracts is subtracted from
/// the ticks and the model's figures alike.
fn lat_ctx(run: &mut Run) {
    for n in lm::CTX_PROCS {
        for kib in lm::CTX_KIB {
            let mut name = Line::new();
            let _ = write!(name, "{}.{n}p.{kib}k", lm::LAT_CTX);
            if let Err(why) = ring(run, name.as_str(), n, kib) {
                run.fail(name.as_str(), why);
            }
        }
    }
}

/// One ring member's descriptors and work: it closes the ends it does not
/// use, writes its own working set, then hands the token on until its
/// input ends.
#[derive(Clone, Copy)]
struct Member {
    /// The parent's write end and this member's pipe's read end: closed.
    first_w: u32,
    unused_r: u32,
    /// The token comes from here and goes there.
    from: u32,
    to: u32,
    kib: u32,
    /// The member's index (its working set's fill value).
    k: u32,
}

/// Writes the first `kib` KiB of this process's working set.
fn fill_working_set(kib: u32, v: u32) {
    // SAFETY: this process's own copy; one thread.
    let ws = unsafe { &mut *(&raw mut WORKING_SET) };
    for (i, w) in ws[..kib as usize * 256].iter_mut().enumerate() {
        *w = v.wrapping_add(i as u32);
    }
}

fn ring_member(m: Member) -> i32 {
    p::close(m.first_w);
    p::close(m.unused_r);
    fill_working_set(m.kib, m.k);
    let me = cpu_bit() as u8;
    while hand_off(m.from, m.to, m.kib, me).is_some() {}
    0
}

/// The member a thread on another CPU forks ([`fork_member_on`]), and the
/// child's pid it hands back (0: not yet; `u32::MAX`: fork failed).
static mut MEMBER: Member = Member {
    first_w: 0,
    unused_r: 0,
    from: 0,
    to: 0,
    kib: 0,
    k: 0,
};
static FORKED: AtomicU32 = AtomicU32::new(0);

fn member_forker(_: u32) {
    // SAFETY: written before this thread was created; read once.
    let m = unsafe { *(&raw const MEMBER) };
    let r = spawn(|| ring_member(m));
    FORKED.store(r.unwrap_or(u32::MAX).max(1), Ordering::Release);
}

/// Forks ring member `m` so that it runs on `cpu`: a child runs on the
/// CPU of the thread that forked it, so a thread started there forks it.
fn fork_member_on(cpu: u32, m: Member) -> Result<u32, i32> {
    if cpu == threads::cpu() {
        return spawn(|| ring_member(m));
    }
    // SAFETY: no forker thread runs now (each is waited for below).
    unsafe { *(&raw mut MEMBER) = m };
    FORKED.store(0, Ordering::Relaxed);
    threads::spawn_on(member_forker, 0, PRIO_USER, cpu)?;
    // Wait by sleeping, not yielding (see forktest): under icount QEMU
    // runs one CPU at a time.
    let pid = loop {
        match FORKED.load(Ordering::Acquire) {
            0 => threads::sleep(1),
            p => break p,
        }
    };
    if pid == u32::MAX {
        Err(userland::abi::errno::EAGAIN)
    } else {
        Ok(pid)
    }
}

fn ring(run: &mut Run, name: &str, n: u32, kib: u32) -> Result<(), &'static str> {
    // Every process writes its own working set first, so none shares a
    // frame with another (under fork=cow the first write copies it).
    fill_working_set(kib, 0);
    // Pipe k carries the token from member k to member k+1 (mod n); the
    // parent is member 0. Each child keeps its two ends only, so closing
    // the parent's write end ends the ring member by member. With several
    // CPUs the members go round them (member k on CPU k mod CPUs), so a
    // hand-off crosses CPUs as lmbench's processes do on an SMP kernel.
    let (first_r, first_w) = p::pipe().map_err(|_| "pipe() failed")?;
    let cpus = run.info.cpus.max(1);
    let home = threads::cpu();
    let mut prev_r = first_r;
    let mut pids = [0u32; 8];
    let mut why = None;
    for k in 1..n {
        let Ok((r, w)) = p::pipe() else {
            why = Some("pipe() failed");
            break;
        };
        let from = prev_r;
        let m = Member {
            first_w,
            unused_r: r,
            from,
            to: w,
            kib,
            k,
        };
        let child = fork_member_on((home + k) % cpus, m);
        p::close(from);
        p::close(w);
        prev_r = r;
        match child {
            Ok(pid) => pids[k as usize - 1] = pid,
            Err(e) => {
                why = Some(fork_failed(e));
                break;
            }
        }
    }
    let back = prev_r;
    // The one-process overhead: a pipe of the parent's own.
    let own = p::pipe();
    let laps = CTX_HANDOFFS / n;
    let row = Row {
        name,
        mech: lm::LAT_CTX,
        path: "ring",
        call: "handoff",
        ops: laps * n,
    };
    let me = cpu_bit() as u8;
    if why.is_none() {
        if let Ok((or, ow)) = own {
            run.row(&row, |ph| match ph {
                Phase::Timed => (0..laps).all(|_| {
                    // Member 0's hand-off: pass the token, wait for it.
                    if p::write(first_w, &[me]) != Ok(1) {
                        return false;
                    }
                    match hand_back(back, kib) {
                        Some(t) => {
                            ran_on(t as u32);
                            true
                        }
                        None => false,
                    }
                }),
                Phase::Calib => (0..laps * n)
                    .all(|_| p::write(ow, &[me]) == Ok(1) && hand_back(or, kib).is_some()),
                _ => true,
            });
        }
    }
    if let Ok((or, ow)) = own {
        p::close(or);
        p::close(ow);
    }
    p::close(first_w);
    p::close(back);
    let mut members_ok = true;
    for &pid in pids.iter().take(n as usize - 1) {
        if pid != 0 {
            members_ok &= reap(pid);
        }
    }
    match (why, members_ok) {
        (Some(why), _) => Err(why),
        (None, false) => Err("a ring member failed"),
        (None, true) => Ok(()),
    }
}

/// Member 0's half of a hand-off: read the token back, sum the working set.
#[inline(always)]
fn hand_back(from: u32, kib: u32) -> Option<u8> {
    let mut b = [0u8];
    if p::read(from, &mut b) != Ok(1) {
        return None;
    }
    black_box(sum_working_set(kib));
    Some(b[0])
}

// ---------------------------------------------------------------- smack

/// One row of the server's table: its key and a short name.
#[derive(Clone, Copy)]
struct Entry {
    key: u32,
    name: [u8; 12],
}

/// The server's in-memory index: [`lm::SMACK_ROWS`] rows sorted by key.
static mut INDEX: [Entry; lm::SMACK_ROWS as usize] = [Entry {
    key: 0,
    name: [0; 12],
}; lm::SMACK_ROWS as usize];

/// A query and an answer are fixed-size records on the pipes.
const QUERY: usize = 64;
const ANSWER: usize = 32;

/// Key of row `i`: sparse, so a lookup must search.
fn key_of(i: u32) -> u32 {
    i * 7 + 3
}

fn build_index() {
    // SAFETY: one thread, before any server forks.
    let ix = unsafe { &mut *(&raw mut INDEX) };
    for (i, e) in ix.iter_mut().enumerate() {
        e.key = key_of(i as u32);
        let mut n = [b' '; 12];
        let mut l = Line::new();
        let _ = write!(l, "row{:08}", i);
        n[..l.len().min(12)].copy_from_slice(&l.as_str().as_bytes()[..l.len().min(12)]);
        e.name = n;
    }
}

/// Formats `SELECT name FROM t WHERE id=<key>;` into a query record.
fn format_query(key: u32, q: &mut [u8; QUERY]) {
    q.fill(b' ');
    let mut l = Line::new();
    let _ = write!(l, "SELECT name FROM t WHERE id={key};");
    let n = l.len().min(QUERY);
    q[..n].copy_from_slice(&l.as_str().as_bytes()[..n]);
}

/// The server's work on one query: parse, look up, format the answer.
fn serve(q: &[u8; QUERY], a: &mut [u8; ANSWER]) {
    a.fill(b' ');
    let text = core::str::from_utf8(q).unwrap_or("");
    let key = text
        .strip_prefix("SELECT name FROM t WHERE id=")
        .and_then(|rest| rest.split(';').next())
        .and_then(|k| k.parse::<u32>().ok());
    // SAFETY: this process's own copy, read only.
    let ix = unsafe { &*(&raw const INDEX) };
    let found = key.and_then(|k| ix.binary_search_by_key(&k, |e| e.key).ok());
    match found {
        Some(i) => {
            a[..12].copy_from_slice(&ix[i].name);
            a[ANSWER - 1] = b'\n';
        }
        None => a[..6].copy_from_slice(b"EMPTY\n"),
    }
}

/// `smack.<mechanism>`: a client (this process) sends select-style
/// queries over a pipe to a server process, which parses each, looks it
/// up in an index of [`lm::SMACK_ROWS`] rows and answers over another;
/// every read and write on both sides goes through the mechanism.
fn smack(run: &mut Run) {
    if !Mechanism::ALL.into_iter().any(|m| run.info.wanted(m)) {
        run.fail(lm::SMACK, NO_MECHANISM);
        return;
    }
    build_index();
    for m in Mechanism::ALL {
        if !run.info.wanted(m) {
            continue;
        }
        let mut name = Line::new();
        let _ = write!(name, "{}.{}", lm::SMACK, m.key());
        if let Err(why) = smack_one(run, name.as_str(), m) {
            run.fail(name.as_str(), why);
        }
    }
}

fn smack_one(run: &mut Run, name: &str, m: Mechanism) -> Result<(), &'static str> {
    let (qr, qw) = p::pipe().map_err(|_| "pipe() failed")?;
    let Ok((ar, aw)) = p::pipe() else {
        p::close(qr);
        p::close(qw);
        return Err("pipe() failed");
    };
    let server = spawn(|| {
        p::close(qw);
        p::close(ar);
        let mut q = [0u8; QUERY];
        let mut a = [0u8; ANSWER];
        while p::read_full_via(m, qr, &mut q) {
            serve(&q, &mut a);
            if !p::write_all_via(m, aw, &a) {
                return 1;
            }
        }
        0
    });
    p::close(qr);
    p::close(aw);
    let server = match server {
        Ok(s) => s,
        Err(e) => {
            p::close(qw);
            p::close(ar);
            return Err(fork_failed(e));
        }
    };
    let row = Row {
        name,
        mech: m.key(),
        path: "query",
        call: "select",
        ops: SMACK_QUERIES,
    };
    let mut seed = 12345u32;
    let mut hits = 0u32;
    let mut q = [0u8; QUERY];
    let mut a = [0u8; ANSWER];
    run.row(&row, |ph| match ph {
        Phase::Timed => (0..SMACK_QUERIES).all(|_| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            format_query(key_of((seed >> 8) % lm::SMACK_ROWS), &mut q);
            let ok = p::write_all_via(m, qw, &q) && p::read_full_via(m, ar, &mut a);
            hits += (a[0] == b'r') as u32;
            ok
        }),
        _ => true,
    });
    p::close(qw);
    p::close(ar);
    if !reap(server) {
        return Err("the server failed");
    }
    // Every key asked for is in the index: a miss is a wrong answer.
    let asked = SMACK_QUERIES * (1 + run.batches as u32);
    if hits != asked {
        return Err("the server answered a query wrongly");
    }
    Ok(())
}

// ---------------------------------------------------------------- signals

static mut CAUGHT: u32 = 0;

extern "C" fn on_signal(_sig: u32) {
    // SAFETY: one thread; the handler runs on it.
    unsafe { (&raw mut CAUGHT).write_volatile((&raw const CAUGHT).read_volatile() + 1) };
}

/// `lat_sig.install`: `sigaction` installing a handler (lmbench's `lat_sig
/// install`); `lat_sig.catch`: a signal sent to this process with `kill`,
/// delivered on the way back to ring 3, its handler run and `sigreturn`
/// (lmbench's `lat_sig catch`).
fn lat_sig(run: &mut Run) {
    use userland::abi::syscall::sig::SIGUSR1;
    let install = Row {
        name: lm::LAT_SIG_INSTALL,
        mech: lm::LAT_SIG_INSTALL,
        path: "sigaction",
        call: "sigaction",
        ops: SIG_ROUNDS,
    };
    run.row(&install, |ph| match ph {
        Phase::Timed => {
            (0..SIG_ROUNDS).all(|_| sys::sigaction(SIGUSR1, sys::Handler::Catch(on_signal)).is_ok())
        }
        _ => true,
    });
    let catch = Row {
        name: lm::LAT_SIG_CATCH,
        mech: lm::LAT_SIG_CATCH,
        path: "kill_handler_sigreturn",
        call: "kill",
        ops: SIG_ROUNDS,
    };
    let me = sys::getpid();
    if sys::sigaction(SIGUSR1, sys::Handler::Catch(on_signal)).is_err() {
        run.fail(lm::LAT_SIG_CATCH, "sigaction failed");
        return;
    }
    let caught = || {
        // SAFETY: a plain read; the handler runs on this thread.
        unsafe { (&raw const CAUGHT).read_volatile() }
    };
    let before = caught();
    run.row(&catch, |ph| match ph {
        Phase::Timed => (0..SIG_ROUNDS).all(|_| sys::kill(me, SIGUSR1).is_ok()),
        _ => true,
    });
    let _ = sys::sigaction(SIGUSR1, sys::Handler::Default);
    let want = SIG_ROUNDS * (1 + run.batches as u32);
    if caught() - before != want {
        run.fail(lm::LAT_SIG_CATCH, "a signal was not caught");
    }
}

#[unsafe(no_mangle)]
extern "C" fn main(_arg: u32) -> i32 {
    let (info, fence, batches, _) = userland::timing_start!("lmbench", MAX_BATCHES, else 0);
    if info.batches as usize > MAX_BATCHES {
        println!(
            "lmbench: batches={} asked: lmbench keeps at most {MAX_BATCHES} per row",
            info.batches
        );
    }
    let mut run = Run {
        info,
        fence,
        batches,
        failed: 0,
    };
    let timer = bench::overhead(fence, userland::bench::tb_loop_empty);
    record!(kind::CLOCK, "clock" => info.clock_key(),
        "tsc_hz" => info.tsc_hz, "timer_overhead" => timer, "batches" => run.batches,
        "batch_size" => info.batch_size);
    println!(
        "lmbench: {} batches per row, {} per op (per byte for bw_pipe), fork={}",
        run.batches,
        info.unit(),
        if info.fork_cow != 0 { "cow" } else { "copy" }
    );
    // lmbench's summary order (abi::lmbench::ORDER).
    if run.wants(group::SYSCALL) {
        lat_syscall(&mut run);
    }
    if run.wants(group::SIG) {
        lat_sig(&mut run);
    }
    if run.wants(group::PROC) {
        lat_proc(&mut run);
    }
    if run.wants(group::CTX) {
        lat_ctx(&mut run);
    }
    if run.wants(group::PIPE) {
        lat_pipe(&mut run);
    }
    if run.wants(group::PAGEFAULT) {
        lat_pagefault(&mut run);
    }
    if run.wants(group::BW_PIPE) {
        bw_pipe(&mut run);
    }
    if run.wants(group::SMACK) {
        smack(&mut run);
    }
    if run.failed > 0 {
        println!("lmbench: {} row(s) not measured", run.failed);
        return 1;
    }
    0
}
