//! Processes, as a user sees them (`prog=procs`): fork, exit, waitpid,
//! getpid/getppid, sbrk, pipes and signals, each case checked from ring 3
//! and printed as
//! `procs: PASS <case>` or `procs: FAIL <case>: <why>`, then
//! `procs: N passed, M failed`; the exit status is the number of failures.
//!
//! `arg` [`procs_arg::ROUNDS`]: instead, that many fork/exit/wait rounds,
//! each passing a byte through a pipe whose ends the child's exit and the
//! parent's close let go (the kernel's test compares its frames and pages
//! before and after, and counts the pipes left open).
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use userland::abi::report::kind;
use userland::abi::syscall::{
    errno, fd, nr, procs_arg, sig, wait, Mechanism, MAX_THREADS, PRIO_USER,
};
use userland::sys::Handler;
use userland::{println, sys, threads};

struct Tally {
    passed: u32,
    failed: u32,
    skipped: u32,
}

impl Tally {
    /// A case that needs a second CPU: on one CPU it is skipped (printed,
    /// recorded and counted as such), never run on CPU 0 and called a pass.
    fn across(
        &mut self,
        info: &userland::abi::syscall::CpuInfo,
        name: &str,
        case: impl FnOnce() -> Result<(), &'static str>,
    ) {
        if info.cpus > 1 {
            self.check(name, case());
            return;
        }
        self.skipped += 1;
        println!("procs: SKIP {name}: needs a second CPU");
        userland::record!(kind::CHECK, "mech" => "procs",
            "name" => userland::abi::report::Escaped(name), "result" => "skip", "got" => 0);
    }

    fn check(&mut self, name: &str, r: Result<(), &str>) {
        match r {
            Ok(()) => {
                self.passed += 1;
                println!("procs: PASS {name}");
            }
            Err(why) => {
                self.failed += 1;
                println!("procs: FAIL {name}: {why}");
            }
        }
    }
}

/// Memory the cases write on both sides of a fork.
static mut SHARED: [u32; 2048] = [0; 2048];

fn read(i: usize) -> u32 {
    // SAFETY: a plain read of this process's own copy.
    unsafe { (&raw const SHARED[i]).read_volatile() }
}

fn write(i: usize, v: u32) {
    // SAFETY: a plain write to this process's own copy.
    unsafe { (&raw mut SHARED[i]).write_volatile(v) }
}

/// Forks; the child runs `child` and exits with its result.
fn spawn_child(child: impl FnOnce() -> i32) -> Result<u32, &'static str> {
    match sys::fork() {
        Ok(0) => sys::exit(child()),
        Ok(pid) => Ok(pid),
        Err(_) => Err("fork failed"),
    }
}

/// Waits for `pid`; its exit code, or why not.
fn exit_code_of(pid: u32) -> Result<i32, &'static str> {
    match sys::waitpid(pid as i32, 0) {
        Ok((p, status)) if p == pid => wait::exit_code(status).ok_or("the child did not exit"),
        Ok(_) => Err("waitpid reaped another child"),
        Err(_) => Err("waitpid failed"),
    }
}

fn expect_exit(pid: Result<u32, &'static str>, code: i32) -> Result<(), &'static str> {
    match exit_code_of(pid?)? {
        c if c == code => Ok(()),
        0 => Err("the child exited 0, not the code expected"),
        _ => Err("the child's check failed"),
    }
}

fn memory_at_fork() -> Result<(), &'static str> {
    for i in 0..2048 {
        write(i, i as u32 * 7 + 1);
    }
    let pid = spawn_child(|| {
        let same = (0..2048).all(|i| read(i) == i as u32 * 7 + 1);
        if same {
            0
        } else {
            1
        }
    });
    expect_exit(pid, 0)
}

fn writes_private() -> Result<(), &'static str> {
    write(0, 100);
    let pid = spawn_child(|| {
        // The child writes; the parent must not see it, and the parent's
        // write (below, maybe before this runs) must not reach here.
        write(0, 200);
        threads::yield_now();
        if read(0) == 200 {
            0
        } else {
            1
        }
    });
    write(0, 300);
    let r = expect_exit(pid, 0);
    if read(0) != 300 {
        return Err("the child's write reached the parent");
    }
    r
}

fn every_mechanism(info: &userland::abi::syscall::CpuInfo) -> Result<(), &'static str> {
    for m in Mechanism::ALL {
        if !info.has(m) {
            continue;
        }
        let before = sys::getpid();
        match sys::fork_via(m) {
            Ok(0) => {
                // The child comes back through IRET whatever the parent
                // entered by: its pid is new, its parent is the caller.
                let ok = sys::getpid() != before && sys::getppid() == before;
                sys::exit(if ok { 0 } else { 1 });
            }
            Ok(pid) => {
                if exit_code_of(pid)? != 0 {
                    return Err("a child forked through some mechanism saw the wrong pids");
                }
            }
            Err(_) => return Err("fork failed through some mechanism"),
        }
    }
    Ok(())
}

fn exit_status() -> Result<(), &'static str> {
    expect_exit(spawn_child(|| 42), 42)
}

fn wnohang() -> Result<(), &'static str> {
    let pid = spawn_child(|| {
        threads::sleep(20);
        0
    })?;
    match sys::waitpid(pid as i32, wait::WNOHANG) {
        Ok((0, _)) => {}
        _ => return Err("WNOHANG with a live child did not return 0"),
    }
    expect_exit(Ok(pid), 0)
}

fn errors() -> Result<(), &'static str> {
    if sys::waitpid(-1, 0) != Err(errno::ECHILD) {
        return Err("waitpid without children is not ECHILD");
    }
    if sys::waitpid(-1, 0x100) != Err(errno::EINVAL)
        && sys::waitpid(-1, 0x100) != Err(errno::ECHILD)
    {
        return Err("waitpid with unknown flags is neither EINVAL nor ECHILD");
    }
    let pid = spawn_child(|| 5)?;
    // A status pointer into the kernel: EFAULT, and the child stays to be reaped.
    if sys::waitpid_at(pid as i32, 0x1000, 0) != Err(errno::EFAULT) {
        return Err("a kernel status pointer was not EFAULT");
    }
    if sys::waitpid_at(pid as i32, 0, 0) != Ok(pid) {
        return Err("the child was not left for a later waitpid");
    }
    Ok(())
}

fn child_faults() -> Result<(), &'static str> {
    let pid = spawn_child(|| {
        // SAFETY: not safe: #UD on purpose; the kernel ends this process alone.
        unsafe { core::arch::asm!("ud2") };
        0
    })?;
    reaped_by_ud(pid)
}

/// Waits for child `pid` and checks that #UD (vector 6) ended it.
fn reaped_by_ud(pid: u32) -> Result<(), &'static str> {
    match sys::waitpid(pid as i32, 0) {
        Ok((p, status)) if p == pid => match wait::fault_vector(status) {
            Some(6) => Ok(()),
            _ => Err("the status does not say #UD"),
        },
        _ => Err("waitpid failed"),
    }
}

/// A forked child prints its pid and tid, a record and faults: the host
/// checks that all three name the child (`procs_arg::CHILD_SAYS`).
fn child_names_itself() -> Result<(), &'static str> {
    let pid = spawn_child(|| {
        let (pid, tid) = (sys::getpid(), threads::gettid());
        println!("{} pid {pid} tid {tid}", procs_arg::CHILD_SAYS);
        let name = userland::abi::report::Escaped(procs_arg::CHILD_RECORD);
        userland::record!(kind::CHECK, "mech" => "procs", "name" => name,
            "result" => "pass", "got" => pid);
        // SAFETY: not safe: #UD on purpose; the kernel ends this process alone.
        unsafe { core::arch::asm!("ud2") };
        0
    })?;
    if pid == sys::getpid() {
        return Err("the child has its parent's pid");
    }
    reaped_by_ud(pid)
}

fn orphans() -> Result<(), &'static str> {
    let me = sys::getpid();
    // A child that forks a grandchild and exits at once; the grandchild
    // outlives it, is handed to us (pid 1) and checks so.
    let pid = spawn_child(move || match sys::fork() {
        Ok(0) => {
            threads::sleep(10);
            sys::exit(if sys::getppid() == me { 7 } else { 8 });
        }
        Ok(_) => 0,
        Err(_) => 1,
    })?;
    if exit_code_of(pid)? != 0 {
        return Err("the middle child could not fork");
    }
    match sys::waitpid(-1, 0) {
        Ok((_, status)) => match wait::exit_code(status) {
            Some(7) => Ok(()),
            Some(8) => Err("the orphan's parent is not pid 1"),
            _ => Err("the orphan did not exit"),
        },
        Err(_) => Err("the orphan was not handed to pid 1"),
    }
}

static SPINS: AtomicU32 = AtomicU32::new(0);
static STOP: AtomicU32 = AtomicU32::new(0);

/// Counts in ring 3 until told to stop (no system call: a thread looping
/// on `yield` would hold the scheduler lock most of the time, and under
/// icount, where QEMU runs one CPU at a time in long turns, the other CPU
/// could find it taken at every turn).
fn spinner(_: u32) {
    while STOP.load(Ordering::Relaxed) == 0 {
        SPINS.fetch_add(1, Ordering::Relaxed);
        core::hint::spin_loop();
    }
}

/// A second thread spins, incrementing a counter, on the other CPU when
/// there is one; the first forks. The child has only the forking thread,
/// so its counter stands still. Under `fork=cow` it also checks the TLB
/// shootdown: the fork makes the page read-only, and only the flush of the
/// other CPU's TLB stops the spinner writing on through its old, writable
/// entry into the frame the child still shares (a kernel that skips the
/// flush fails here under every `pmap=`).
fn one_thread_copied(info: &userland::abi::syscall::CpuInfo) -> Result<(), &'static str> {
    STOP.store(0, Ordering::Relaxed);
    if threads::spawn_on(spinner, 0, PRIO_USER, far_cpu(info)).is_err() {
        return Err("no second thread");
    }
    while SPINS.load(Ordering::Relaxed) < 3 {
        threads::sleep(1);
    }
    let pid = spawn_child(|| {
        // Only the forking thread lives here: the counter stands still.
        let a = SPINS.load(Ordering::Relaxed);
        // Long enough for the other CPU to run many turns (the pacer's
        // grain is at most 100,000 instructions; a tick is 10^6).
        threads::sleep(2);
        if SPINS.load(Ordering::Relaxed) == a {
            0
        } else {
            1
        }
    });
    let r = expect_exit(pid, 0);
    STOP.store(1, Ordering::Relaxed);
    r
}

fn heap() -> Result<(), &'static str> {
    let base = sys::sbrk(0).map_err(|_| "sbrk(0) failed")?;
    let old = sys::sbrk(3 * 4096).map_err(|_| "sbrk grow failed")?;
    if old != base {
        return Err("sbrk did not return the old break");
    }
    let p = base as *mut u32;
    // SAFETY: [base, base + 12 KiB) is ours now, demand-zero.
    let zero = (0..3 * 1024).all(|i| unsafe { p.add(i).read_volatile() } == 0);
    if !zero {
        return Err("fresh heap pages are not zero");
    }
    // SAFETY: as above.
    unsafe { p.add(1024).write_volatile(9) };
    let pid = spawn_child(move || {
        // SAFETY: the child's copy of the heap.
        let v = unsafe { p.add(1024).read_volatile() };
        // SAFETY: as above.
        unsafe { p.add(1024).write_volatile(10) };
        if v == 9 {
            0
        } else {
            1
        }
    });
    expect_exit(pid, 0)?;
    // SAFETY: ours.
    if unsafe { p.add(1024).read_volatile() } != 9 {
        return Err("the child's heap write reached the parent");
    }
    if sys::sbrk(-(3 * 4096)) != Ok(base + 3 * 4096) || sys::sbrk(0) != Ok(base) {
        return Err("sbrk shrink did not come back to the base");
    }
    if sys::sbrk(-4096) != Err(errno::ENOMEM) || sys::sbrk(i32::MAX) != Err(errno::ENOMEM) {
        return Err("sbrk outside the heap is not ENOMEM");
    }
    Ok(())
}

fn fork_bomb() -> Result<(), &'static str> {
    let mut n = 0;
    let refused = loop {
        match sys::fork() {
            Ok(0) => {
                threads::sleep(5);
                sys::exit(0);
            }
            Ok(_) => n += 1,
            Err(e) => break e,
        }
        if n > 1000 {
            break 0;
        }
    };
    let mut reaped = 0;
    while sys::waitpid(-1, 0).is_ok() {
        reaped += 1;
    }
    if refused != errno::EAGAIN {
        return Err("fork did not end in EAGAIN");
    }
    if reaped != n || n == 0 {
        return Err("not every child of the bomb was reaped");
    }
    // Recovered: the next fork works.
    expect_exit(spawn_child(|| 3), 3)
}

/// Waits for `pid`: the signal that ended it, or why not.
fn signal_of(pid: u32) -> Result<u32, &'static str> {
    match sys::waitpid(pid as i32, 0) {
        Ok((p, status)) if p == pid => match wait::term_signal(status) {
            Some(s) => Ok(s),
            None if wait::exit_code(status).is_some() => {
                Err("the child exited, no signal ended it")
            }
            None => Err("the child faulted, no signal ended it"),
        },
        Ok(_) => Err("waitpid reaped another child"),
        Err(_) => Err("waitpid failed"),
    }
}

fn expect_signal(pid: Result<u32, &'static str>, want: u32) -> Result<(), &'static str> {
    match signal_of(pid?)? {
        s if s == want => Ok(()),
        _ => Err("the child was ended by another signal"),
    }
}

/// The CPU the far side of a cross-CPU case runs on: 1 when there is one.
fn far_cpu(info: &userland::abi::syscall::CpuInfo) -> u32 {
    if info.cpus > 1 {
        1
    } else {
        0
    }
}

static FAR: AtomicU32 = AtomicU32::new(0);
static FAR_ARG: AtomicU32 = AtomicU32::new(0);

/// In a child: runs `f(arg)` as the process's only thread on CPU `cpu`
/// (a thread there; the forked thread ends), which ends the process with
/// `f`'s result.
fn run_on(cpu: u32, f: fn(u32) -> i32, arg: u32) -> ! {
    FAR.store(f as usize as u32, Ordering::Relaxed);
    FAR_ARG.store(arg, Ordering::Relaxed);
    fn start(_: u32) {
        // SAFETY: FAR holds an `fn(u32) -> i32`, stored just above.
        let f: fn(u32) -> i32 =
            unsafe { core::mem::transmute(FAR.load(Ordering::Relaxed) as usize) };
        sys::exit(f(FAR_ARG.load(Ordering::Relaxed)));
    }
    if threads::spawn_on(start, 0, PRIO_USER, cpu).is_err() {
        sys::exit(100);
    }
    sys::call(Mechanism::Int80, nr::THREAD_EXIT, [0; 6]);
    unreachable!("thread_exit returned")
}

fn pipe_eof() -> Result<(), &'static str> {
    let (r, w) = sys::pipe().map_err(|_| "pipe failed")?;
    if r < fd::FIRST_PIPE || w < fd::FIRST_PIPE || r == w {
        return Err("pipe's descriptors are not new ones");
    }
    let pid = spawn_child(move || {
        let _ = sys::close(r);
        match sys::write_fd(w, b"hello, pipe") {
            Ok(11) => 0,
            _ => 1,
        }
    })?;
    sys::close(w).map_err(|_| "close failed")?;
    let mut got = [0u8; 32];
    let mut n = 0;
    loop {
        match sys::read(r, &mut got[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return Err("read failed"),
        }
    }
    let _ = sys::close(r);
    expect_exit(Ok(pid), 0)?;
    if &got[..n] != b"hello, pipe" {
        return Err("the bytes read are not the bytes written");
    }
    Ok(())
}

fn pipe_errors() -> Result<(), &'static str> {
    let (r, w) = sys::pipe().map_err(|_| "pipe failed")?;
    let mut b = [0u8; 4];
    let checks = [
        (
            sys::read(w, &mut b).err(),
            errno::EBADF,
            "read on the write end",
        ),
        (
            sys::write_fd(r, b"x").err(),
            errno::EBADF,
            "write on the read end",
        ),
        (
            sys::read(fd::FIRST_PIPE + 15, &mut b).err(),
            errno::EBADF,
            "read on a closed descriptor",
        ),
        (
            sys::close(2).err(),
            errno::EBADF,
            "close of a fixed descriptor",
        ),
        (
            sys::dup2(fd::FIRST_PIPE + 14, fd::FIRST_PIPE + 15).err(),
            errno::EBADF,
            "dup2 of a closed one",
        ),
        (sys::dup2(w, 99).err(), errno::EBADF, "dup2 past the table"),
    ];
    for (got, want, what) in checks {
        if got != Some(want) {
            println!("procs: {what}: {got:?}");
            return Err("a bad descriptor was not EBADF");
        }
    }
    let e = abi_decode(sys::call(
        Mechanism::Int80,
        nr::PIPE,
        [0x1000, 0, 0, 0, 0, 0],
    ));
    if e != Err(errno::EFAULT) {
        return Err("pipe with a kernel pointer was not EFAULT");
    }
    let e = abi_decode(sys::call(
        Mechanism::Int80,
        nr::READ,
        [r, 0x1000, 4, 0, 0, 0],
    ));
    if e != Err(errno::EFAULT) {
        return Err("read into the kernel was not EFAULT");
    }
    // dup2: the copy reads what the original end's pipe holds.
    let d = sys::dup2(w, fd::FIRST_PIPE + 12).map_err(|_| "dup2 failed")?;
    sys::close(w).map_err(|_| "close failed")?;
    if sys::write_fd(d, b"dup") != Ok(3) || sys::read(r, &mut b) != Ok(3) || &b[..3] != b"dup" {
        return Err("the dup2 copy does not write into the pipe");
    }
    sys::close(d).map_err(|_| "close failed")?;
    if sys::read(r, &mut b) != Ok(0) {
        return Err("no end of file once every write end closed");
    }
    sys::close(r).map_err(|_| "close failed")?;
    // The table fills up: EMFILE, and nothing is left open after.
    let mut open = [0u32; 18];
    let mut n = 0;
    let refused = loop {
        match sys::pipe() {
            Ok((a, b)) => {
                open[n] = a;
                open[n + 1] = b;
                n += 2;
            }
            Err(e) => break e,
        }
        if n + 2 > open.len() {
            break 0;
        }
    };
    for &f in &open[..n] {
        let _ = sys::close(f);
    }
    if refused != errno::EMFILE {
        return Err("a full descriptor table did not give EMFILE");
    }
    Ok(())
}

fn abi_decode(v: u32) -> Result<u32, i32> {
    userland::abi::syscall::decode(v)
}

fn epipe_and_sigpipe() -> Result<(), &'static str> {
    // A child writing to a pipe nobody reads dies of SIGPIPE.
    let (r, w) = sys::pipe().map_err(|_| "pipe failed")?;
    sys::close(r).map_err(|_| "close failed")?;
    let pid = spawn_child(move || {
        let _ = sys::write_fd(w, b"x");
        0
    });
    expect_signal(pid, sig::SIGPIPE)?;
    // Ignoring SIGPIPE: the write says EPIPE.
    let pid = spawn_child(move || {
        let _ = sys::sigaction(sig::SIGPIPE, Handler::Ignore);
        match sys::write_fd(w, b"x") {
            Err(errno::EPIPE) => 0,
            _ => 1,
        }
    });
    expect_exit(pid, 0)?;
    // Pid 1 is not ended by a default action: it sees EPIPE too.
    let r = sys::write_fd(w, b"x");
    let _ = sys::close(w);
    if r != Err(errno::EPIPE) {
        return Err("pid 1's write to a pipe without readers is not EPIPE");
    }
    Ok(())
}

fn blocked_reader(fds: u32) -> i32 {
    let (r, w) = (fds & 0xffff, fds >> 16);
    let _ = sys::close(w);
    let mut b = [0u8; 8];
    // Blocks until the parent, on CPU 0, writes.
    match sys::read(r, &mut b) {
        Ok(1) if b[0] == b'!' => {}
        _ => return 1,
    }
    match sys::read(r, &mut b) {
        Ok(0) => 0,
        _ => 2,
    }
}

fn wake_across_cpus(info: &userland::abi::syscall::CpuInfo) -> Result<(), &'static str> {
    let (r, w) = sys::pipe().map_err(|_| "pipe failed")?;
    let far = far_cpu(info);
    let pid = spawn_child(move || run_on(far, blocked_reader, r | w << 16))?;
    let _ = sys::close(r);
    // Long enough for the reader to be asleep in read.
    threads::sleep(5);
    let wrote = sys::write_fd(w, b"!");
    let _ = sys::close(w);
    if wrote != Ok(1) {
        return Err("the write failed");
    }
    match exit_code_of(pid)? {
        0 => Ok(()),
        1 => Err("the reader did not get the byte"),
        2 => Err("the reader saw no end of file"),
        _ => Err("the reader could not run on the other CPU"),
    }
}

/// The byte stream of the million-byte case: xorshift32, one byte a step.
fn stream(x: &mut u32) -> u8 {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    (*x >> 24) as u8
}

const MILLION: usize = 1_000_000;

fn million_reader(fds: u32) -> i32 {
    let (r, w) = (fds & 0xffff, fds >> 16);
    let _ = sys::close(w);
    let (mut x, mut n, mut sum) = (0x1234_5678u32, 0usize, 0u32);
    let mut buf = [0u8; 3000];
    loop {
        match sys::read(r, &mut buf) {
            Ok(0) => break,
            Ok(k) => {
                for &b in &buf[..k] {
                    if n >= MILLION || b != stream(&mut x) {
                        return 1;
                    }
                    sum = sum.wrapping_mul(31).wrapping_add(b as u32);
                    n += 1;
                }
            }
            Err(_) => return 2,
        }
    }
    if n != MILLION {
        return 3;
    }
    // The checksum, for the log.
    println!(
        "procs: the reader on CPU {} got {n} bytes, checksum {sum:#010x}",
        threads::cpu()
    );
    0
}

fn million_bytes(info: &userland::abi::syscall::CpuInfo) -> Result<(), &'static str> {
    let (r, w) = sys::pipe().map_err(|_| "pipe failed")?;
    let far = far_cpu(info);
    let pid = spawn_child(move || run_on(far, million_reader, r | w << 16))?;
    let _ = sys::close(r);
    // Writes of every size from 1 to past two pages: atomic ones and ones
    // that go in piece by piece.
    let (mut x, mut sent, mut size) = (0x1234_5678u32, 0usize, 1usize);
    let mut buf = [0u8; 9000];
    while sent < MILLION {
        let k = size.min(MILLION - sent);
        for b in &mut buf[..k] {
            *b = stream(&mut x);
        }
        if sys::write_fd(w, &buf[..k]) != Ok(k) {
            let _ = sys::close(w);
            return Err("a write did not take every byte");
        }
        sent += k;
        size = size * 7 % 8999 + 1;
    }
    let _ = sys::close(w);
    match exit_code_of(pid)? {
        0 => Ok(()),
        1 => Err("a byte was lost, changed or reordered"),
        2 => Err("a read failed"),
        3 => Err("the count of bytes is wrong"),
        _ => Err("the reader could not run on the other CPU"),
    }
}

static CAUGHT: AtomicU32 = AtomicU32::new(0);
static LAST_SIG: AtomicU32 = AtomicU32::new(0);

extern "C" fn catch(s: u32) {
    CAUGHT.fetch_add(1, Ordering::Relaxed);
    LAST_SIG.store(s, Ordering::Relaxed);
}

fn interrupted(fds: u32) -> i32 {
    let (r, w) = (fds & 0xffff, fds >> 16);
    let _ = sys::close(w);
    // The handler came with fork (the parent installed it first), so no
    // signal can find the default action. A signal that comes before the
    // read blocks runs the handler there; the parent keeps sending until
    // this process ends, so a later one interrupts the read.
    let mut b = [0u8; 4];
    // The parent holds the write end open and writes nothing: only a
    // signal ends this read.
    if sys::read(r, &mut b) != Err(errno::EINTR) {
        return 2;
    }
    let caught = CAUGHT.load(Ordering::Relaxed);
    if caught == 0 || LAST_SIG.load(Ordering::Relaxed) != sig::SIGUSR1 {
        return 3;
    }
    // And a sleep (long: only a signal ends it in time).
    let slept = sys::call(Mechanism::Int80, nr::SLEEP, [100_000, 0, 0, 0, 0, 0]);
    if abi_decode(slept) != Err(errno::EINTR) || CAUGHT.load(Ordering::Relaxed) <= caught {
        return 4;
    }
    0
}

fn signal_interrupts_read(info: &userland::abi::syscall::CpuInfo) -> Result<(), &'static str> {
    let (r, w) = sys::pipe().map_err(|_| "pipe failed")?;
    let far = far_cpu(info);
    CAUGHT.store(0, Ordering::Relaxed);
    sys::sigaction(sig::SIGUSR1, Handler::Catch(catch)).map_err(|_| "sigaction failed")?;
    let pid = spawn_child(move || run_on(far, interrupted, r | w << 16));
    // Pid 1 takes its own SIGUSR1 by default again (which ignores it).
    let _ = sys::sigaction(sig::SIGUSR1, Handler::Default);
    let pid = pid?;
    let _ = sys::close(r);
    let mut code = Err("the child did not end after 200 signals");
    for _ in 0..200 {
        threads::sleep(5);
        if sys::kill(pid, sig::SIGUSR1).is_err() {
            code = Err("kill failed");
            break;
        }
        match sys::waitpid(pid as i32, wait::WNOHANG) {
            Ok((0, _)) => {}
            Ok((_, status)) => {
                code = wait::exit_code(status).ok_or("the child did not exit");
                break;
            }
            Err(_) => {
                code = Err("waitpid failed");
                break;
            }
        }
    }
    let _ = sys::close(w);
    match code? {
        0 => Ok(()),
        2 => Err("the read was not interrupted with EINTR"),
        3 => Err("the handler did not run with SIGUSR1 before the read returned"),
        4 => Err("the sleep was not interrupted with EINTR after the handler"),
        _ => Err("the reader could not run on the other CPU"),
    }
}

fn catch_round_trip() -> Result<(), &'static str> {
    CAUGHT.store(0, Ordering::Relaxed);
    let mut old = 7u32;
    let h = Handler::Catch(catch).word();
    if sys::sigaction_raw(sig::SIGUSR2, h, &raw mut old as u32) != Ok(0) || old != sig::SIG_DFL {
        return Err("sigaction did not report SIG_DFL as the old handler");
    }
    let me = sys::getpid();
    // A signal to oneself is taken before kill returns.
    if sys::kill(me, sig::SIGUSR2).is_err() || CAUGHT.load(Ordering::Relaxed) != 1 {
        return Err("the handler did not run before kill returned");
    }
    if LAST_SIG.load(Ordering::Relaxed) != sig::SIGUSR2 {
        return Err("the handler got another signal number");
    }
    // Ignored: nothing runs.
    let _ = sys::sigaction_raw(sig::SIGUSR2, sig::SIG_IGN, &raw mut old as u32);
    if old != h {
        return Err("sigaction did not report the handler as the old one");
    }
    let _ = sys::kill(me, sig::SIGUSR2);
    let _ = sys::sigaction(sig::SIGUSR2, Handler::Default);
    if CAUGHT.load(Ordering::Relaxed) != 1 {
        return Err("an ignored signal ran the handler");
    }
    let bad = [
        (
            sys::sigaction(sig::SIGKILL, Handler::Catch(catch)),
            errno::EINVAL,
        ),
        (sys::sigaction(0, Handler::Ignore), errno::EINVAL),
        (sys::sigaction(sig::NSIG, Handler::Ignore), errno::EINVAL),
        (sys::kill(0, sig::SIGTERM), errno::EINVAL),
        (sys::kill(u32::MAX, sig::SIGTERM), errno::EINVAL),
        (sys::kill(me, sig::NSIG), errno::EINVAL),
        (sys::kill(0x7fff_0000, 0), errno::ESRCH),
    ];
    if bad.iter().any(|&(got, want)| got != Err(want)) {
        return Err("a bad sigaction or kill was not EINVAL or ESRCH");
    }
    if sys::kill(me, 0).is_err() {
        return Err("kill(self, 0) failed");
    }
    // A child: its handler runs, and a default action ends it.
    let pid = spawn_child(|| {
        CAUGHT.store(0, Ordering::Relaxed);
        let _ = sys::sigaction(sig::SIGUSR1, Handler::Catch(catch));
        let _ = sys::kill(sys::getpid(), sig::SIGUSR1);
        if CAUGHT.load(Ordering::Relaxed) != 1 {
            return 1;
        }
        let _ = sys::kill(sys::getpid(), sig::SIGTERM);
        2
    });
    expect_signal(pid, sig::SIGTERM)
}

fn spin_until_killed(_: u32) -> i32 {
    // Caught? Not SIGKILL: sigaction refuses it.
    if sys::sigaction(sig::SIGKILL, Handler::Catch(catch)) != Err(errno::EINVAL) {
        return 1;
    }
    STOP.store(0, Ordering::Relaxed);
    loop {
        SPINS.fetch_add(1, Ordering::Relaxed);
        core::hint::spin_loop();
    }
}

fn sigkill(info: &userland::abi::syscall::CpuInfo) -> Result<(), &'static str> {
    let far = far_cpu(info);
    // SIGTERM ignored from the start: the child inherits it with fork.
    sys::sigaction(sig::SIGTERM, Handler::Ignore).map_err(|_| "sigaction failed")?;
    let pid = spawn_child(move || run_on(far, spin_until_killed, 0));
    let _ = sys::sigaction(sig::SIGTERM, Handler::Default);
    let pid = pid?;
    threads::sleep(5);
    // Ignored, then killed.
    if sys::kill(pid, sig::SIGTERM).is_err()
        || sys::waitpid(pid as i32, wait::WNOHANG) != Ok((0, 0))
    {
        return Err("an ignored SIGTERM ended the child (or kill failed)");
    }
    if sys::kill(pid, sig::SIGKILL).is_err() {
        return Err("kill failed");
    }
    expect_signal(Ok(pid), sig::SIGKILL)?;
    // A child blocked in a pipe read dies too.
    let (r, w) = sys::pipe().map_err(|_| "pipe failed")?;
    let pid = spawn_child(move || {
        let mut b = [0u8; 1];
        let _ = sys::read(r, &mut b);
        1
    })?;
    threads::sleep(5);
    let _ = sys::kill(pid, sig::SIGKILL);
    let r2 = expect_signal(Ok(pid), sig::SIGKILL);
    let _ = sys::close(r);
    let _ = sys::close(w);
    r2
}

/// The stack a forged frame's landing runs on.
static mut LANDING_STACK: [u32; 1024] = [0; 1024];

/// Where a forged frame resumes: ends the process with 0 if it runs in
/// ring 3 with the user's selector, IOPL 0, NT clear and IF set.
extern "C" fn landing() -> ! {
    let (cs, flags): (u32, u32);
    // SAFETY: reads CS and EFLAGS.
    unsafe {
        core::arch::asm!("movl %cs, {0}", "pushfl", "popl {1}", out(reg) cs, out(reg) flags, options(att_syntax));
    }
    let iopl_nt = (3 << 12) | (1 << 14);
    let ok = cs == userland::abi::layout::selector::USER_CODE as u32
        && flags & iopl_nt == 0
        && flags & (1 << 9) != 0;
    sys::exit(if ok { 0 } else { 9 })
}

/// Calls `sigreturn` with ESP at `frame` (never returns).
fn sigreturn_at(frame: u32) -> ! {
    // SAFETY: not safe on purpose: the kernel takes the context from
    // `frame` or ends this process.
    unsafe {
        core::arch::asm!(
            "movl {sp}, %esp",
            "movl ${nr}, %eax",
            "int $0x80",
            "ud2",
            sp = in(reg) frame,
            nr = const nr::SIGRETURN,
            options(att_syntax, noreturn)
        )
    }
}

static mut FORGED: sig::Saved = sig::Saved {
    magic: 0,
    eip: 0,
    esp: 0,
    eflags: 0,
    eax: 0,
    ecx: 0,
    edx: 0,
    ebx: 0,
    ebp: 0,
    esi: 0,
    edi: 0,
};

/// A child that calls sigreturn on a frame `edit` made from a good one.
fn forged(edit: fn(&mut sig::Saved)) -> Result<u32, &'static str> {
    spawn_child(move || {
        let top = (&raw mut LANDING_STACK) as u32 + 4096 - 16;
        let mut f = sig::Saved {
            magic: sig::FRAME_MAGIC,
            eip: landing as *const () as u32,
            esp: top,
            eflags: 0x202,
            ..Default::default()
        };
        edit(&mut f);
        // SAFETY: one thread in this child.
        unsafe { *(&raw mut FORGED) = f };
        sigreturn_at((&raw const FORGED) as u32)
    })
}

fn forged_frames() -> Result<(), &'static str> {
    // Good but hostile flags: IOPL 3, NT, VM, TF, IF clear: ring 3 gets IOPL 0.
    let pid = forged(|f| f.eflags = 0x0002_7102 | (3 << 12));
    expect_exit(pid, 0).map_err(|_| "IOPL, NT or a selector came back from a forged frame")?;
    // A bad magic word: SIGSEGV.
    expect_signal(forged(|f| f.magic ^= 1), sig::SIGSEGV)?;
    // A kernel EIP: only a page fault in ring 3.
    let pid = forged(|f| f.eip = 0x0010_0000)?;
    match sys::waitpid(pid as i32, 0) {
        Ok((_, s)) if wait::fault_vector(s) == Some(14) => {}
        _ => return Err("a kernel EIP did not end in a ring-3 page fault"),
    }
    // A bad ESP: the landing's first push faults in ring 3.
    let pid = forged(|f| f.esp = 0x0000_1000)?;
    match sys::waitpid(pid as i32, 0) {
        Ok((_, s)) if wait::fault_vector(s) == Some(14) => {}
        _ => return Err("a bad ESP did not end in a ring-3 page fault"),
    }
    // A frame address in the kernel, or unmapped: SIGSEGV.
    expect_signal(spawn_child(|| sigreturn_at(0x0010_0000)), sig::SIGSEGV)?;
    expect_signal(spawn_child(|| sigreturn_at(0xffff_fff0)), sig::SIGSEGV)?;
    // The parent goes on: its own calls still work.
    expect_exit(spawn_child(|| 4), 4)
}

// Wait channels and user mutexes across processes: a fork gives parent
// and child the same addresses, and neither may reach the other's
// sleepers or lock waiters through them.

/// A word whose address both sides sleep on.
static CHAN: AtomicU32 = AtomicU32::new(0);
/// A user mutex both sides lock at the same address.
static M: threads::Umtx = threads::Umtx::new();
/// What this process's helper thread saw: 0 nothing yet, 1 woken or got
/// the lock, 2 timed out or refused.
static SEEN: AtomicU32 = AtomicU32::new(0);

fn chan() -> u32 {
    CHAN.as_ptr() as u32
}

fn sleeper(_: u32) {
    let r = threads::sleep_on(chan(), 100);
    SEEN.store(if r.is_ok() { 1 } else { 2 }, Ordering::Release);
}

fn contender(_: u32) {
    let me = threads::gettid();
    let r = M.lock(me).and_then(|()| M.unlock(me));
    SEEN.store(if r.is_ok() { 1 } else { 2 }, Ordering::Release);
}

/// Until the helper thread says what it saw, at most `ticks` timer ticks.
fn seen_within(ticks: u32) -> u32 {
    for _ in 0..ticks {
        match SEEN.load(Ordering::Acquire) {
            0 => threads::sleep(1),
            s => return s,
        }
    }
    0
}

/// `pid`'s status once it is a zombie, polling for at most `ticks` timer
/// ticks (a child that never ends must fail the case, not hang the boot).
fn reap_within(pid: u32, ticks: u32) -> Result<u32, &'static str> {
    for _ in 0..ticks {
        match sys::waitpid(pid as i32, wait::WNOHANG) {
            Ok((0, _)) => threads::sleep(1),
            Ok((p, status)) if p == pid => return Ok(status),
            _ => return Err("waitpid failed"),
        }
    }
    Err("the child never became a zombie")
}

fn wakeup_stays_in_its_process() -> Result<(), &'static str> {
    SEEN.store(0, Ordering::Relaxed);
    // The child sleeps first on the address; nobody of its own wakes it,
    // so it must time out.
    let pid = spawn_child(|| match threads::sleep_on(chan(), 60) {
        Err(()) => 0,
        Ok(()) => 1,
    })?;
    threads::sleep(5);
    if threads::spawn(sleeper, 0, PRIO_USER).is_err() {
        return Err("no second thread");
    }
    threads::sleep(5);
    let woken = threads::wakeup(chan(), false);
    let seen = seen_within(200);
    let code = wait::exit_code(reap_within(pid, 200)?).ok_or("the child did not exit")?;
    match (code, seen, woken) {
        (0, 1, 1) => Ok(()),
        (1, _, _) => Err("the parent's wakeup woke the child's sleeper"),
        (_, 1, _) => Err("wakeup did not count the one thread it woke"),
        _ => Err("the parent's own sleeper was not woken"),
    }
}

/// Locks `M`, lets a second thread block on it for `hold` ticks, unlocks:
/// the second thread must get it.
fn hand_over(hold: u32) -> Result<(), &'static str> {
    SEEN.store(0, Ordering::Relaxed);
    let me = threads::gettid();
    M.lock(me).map_err(|_| "the mutex was not free")?;
    if threads::spawn(contender, 0, PRIO_USER).is_err() {
        return Err("no second thread");
    }
    threads::sleep(hold);
    M.unlock(me).map_err(|_| "unlock failed")?;
    match seen_within(200) {
        1 => Ok(()),
        0 => Err("the unlock handed the mutex to the other process's waiter"),
        _ => Err("the waiter's lock failed"),
    }
}

fn umtx_stays_in_its_process() -> Result<(), &'static str> {
    // The child's waiter blocks first and longest: were the keys the
    // address alone, the parent's unlock would pick it.
    let pid = spawn_child(|| if hand_over(20).is_ok() { 0 } else { 1 })?;
    threads::sleep(3);
    let mine = hand_over(10);
    let code = wait::exit_code(reap_within(pid, 300)?).ok_or("the child did not exit")?;
    mine?;
    if code != 0 {
        return Err("the child's own unlock did not reach its waiter");
    }
    Ok(())
}

/// Children that end (exit, or #UD) while a second thread waits on a user
/// mutex their first holds: each becomes a zombie and is reaped, and more
/// rounds than there are threads (each thread owns a turnstile) show the
/// stopped waiters' threads and turnstiles were freed.
fn exit_with_a_lock_waiter() -> Result<(), &'static str> {
    for round in 0..MAX_THREADS as u32 + 2 {
        let fault = round % 2 == 1;
        let pid = spawn_child(move || {
            let me = threads::gettid();
            if M.lock(me).is_err() {
                return 90;
            }
            if threads::spawn(contender, 0, PRIO_USER).is_err() {
                return 91;
            }
            threads::sleep(2);
            if fault {
                // SAFETY: not safe: #UD on purpose, the process ends.
                unsafe { core::arch::asm!("ud2") };
            }
            33
        })
        .map_err(|_| "fork failed (threads or turnstiles not freed?)")?;
        let status = reap_within(pid, 300)?;
        match (wait::exit_code(status), wait::fault_vector(status)) {
            (Some(33), _) if !fault => {}
            (_, Some(6)) if fault => {}
            (Some(90 | 91), _) => {
                return Err(
                    "the child could not lock or start a thread (threads or turnstiles not freed?)",
                )
            }
            _ => return Err("the status does not say how the child ended"),
        }
    }
    Ok(())
}

/// Keys of wait channels and user mutexes: (address space, address).
fn space_keys(t: &mut Tally) {
    t.check(
        "sleep_on at one address in two processes: a wakeup stays in its process",
        wakeup_stays_in_its_process(),
    );
    t.check(
        "user mutexes at one address in two processes: an unlock stays in its process",
        umtx_stays_in_its_process(),
    );
    t.check(
        "a child ending while a thread waits on a user mutex is reaped, its turnstile freed",
        exit_with_a_lock_waiter(),
    );
}

#[unsafe(no_mangle)]
extern "C" fn main(arg: u32) -> i32 {
    if arg & procs_arg::ROUNDS != 0 {
        let rounds = arg & !procs_arg::ROUNDS;
        for _ in 0..rounds {
            let Ok((r, w)) = sys::pipe() else { return 3 };
            match sys::fork() {
                // The child keeps both ends: its exit closes them.
                Ok(0) => sys::exit(if sys::write_fd(w, b"r") == Ok(1) {
                    0
                } else {
                    1
                }),
                Ok(pid) => {
                    let mut b = [0u8; 2];
                    let ok = sys::close(w).is_ok()
                        && sys::read(r, &mut b) == Ok(1)
                        && sys::read(r, &mut b) == Ok(0)
                        && sys::close(r).is_ok();
                    if sys::waitpid(pid as i32, 0).is_err() || !ok {
                        return 1;
                    }
                }
                Err(_) => return 2,
            }
        }
        println!("procs: {rounds} fork/exit/wait rounds, a pipe each");
        return 0;
    }
    let info = sys::cpuinfo();
    let mut t = Tally {
        passed: 0,
        failed: 0,
        skipped: 0,
    };
    t.check(
        "the child sees the parent's memory as it was at fork",
        memory_at_fork(),
    );
    t.check(
        "writes after fork are private on both sides",
        writes_private(),
    );
    t.check(
        "fork through every mechanism returns through IRET",
        every_mechanism(&info),
    );
    t.check("the exit status reaches waitpid", exit_status());
    t.check("WNOHANG with a live child returns 0", wnohang());
    t.check("ECHILD, EFAULT (the child kept) and bad flags", errors());
    t.check(
        "a child that faults ends alone, its status says why",
        child_faults(),
    );
    t.check(
        "a forked child's record and fault name its own pid and tid",
        child_names_itself(),
    );
    t.check("an orphan is handed to pid 1, which reaps it", orphans());
    t.check(
        "fork in a process with several threads copies one",
        one_thread_copied(&info),
    );
    t.check(
        "sbrk: demand-zero pages, private after fork, ENOMEM outside",
        heap(),
    );
    t.check(
        "a fork bomb ends in EAGAIN, and the system recovers",
        fork_bomb(),
    );
    t.check(
        "pipe: bytes through, end of file once the writer exits",
        pipe_eof(),
    );
    t.check("pipe: EBADF, EFAULT, dup2, EMFILE", pipe_errors());
    t.check("pipe: EPIPE and SIGPIPE", epipe_and_sigpipe());
    t.across(&info, procs_arg::ACROSS_CASES[0], || {
        wake_across_cpus(&info)
    });
    t.across(&info, procs_arg::ACROSS_CASES[1], || million_bytes(&info));
    t.check(
        "signal: a caught signal interrupts a blocked read and a sleep (EINTR)",
        signal_interrupts_read(&info),
    );
    t.check(
        "signal: sigaction, kill, catch, ignore, default, errors",
        catch_round_trip(),
    );
    t.check(
        "signal: SIGKILL cannot be caught or ignored",
        sigkill(&info),
    );
    t.check(
        "signal: forged sigreturn frames end only their process",
        forged_frames(),
    );
    space_keys(&mut t);
    println!(
        "procs: {} passed, {} failed, {} skipped",
        t.passed, t.failed, t.skipped
    );
    t.failed as i32
}
