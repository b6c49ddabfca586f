//! Processes, as a user sees them (`prog=procs`): fork, exit, waitpid,
//! getpid/getppid, sbrk, each case checked from ring 3 and printed as
//! `procs: PASS <case>` or `procs: FAIL <case>: <why>`, then
//! `procs: N passed, M failed`; the exit status is the number of failures.
//!
//! `arg` [`procs_arg::ROUNDS`]: instead, that many fork/exit/wait rounds
//! (the kernel's test compares its frames and pages before and after).
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use userland::abi::syscall::{errno, procs_arg, wait, Mechanism, CPU_ANY, PRIO_USER};
use userland::{println, sys, threads};

struct Tally {
    passed: u32,
    failed: u32,
}

impl Tally {
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
    match sys::waitpid(pid as i32, 0) {
        Ok((p, status)) if p == pid => match wait::fault_vector(status) {
            Some(6) => Ok(()),
            _ => Err("the status does not say #UD"),
        },
        _ => Err("waitpid failed"),
    }
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

fn one_thread_copied() -> Result<(), &'static str> {
    STOP.store(0, Ordering::Relaxed);
    if threads::spawn_on(spinner, 0, PRIO_USER, CPU_ANY).is_err() {
        return Err("no second thread");
    }
    while SPINS.load(Ordering::Relaxed) < 3 {
        threads::sleep(1);
    }
    let pid = spawn_child(|| {
        // Only the forking thread lives here: the counter stands still.
        let a = SPINS.load(Ordering::Relaxed);
        for _ in 0..20 {
            threads::yield_now();
        }
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

#[unsafe(no_mangle)]
extern "C" fn main(arg: u32) -> i32 {
    if arg & procs_arg::ROUNDS != 0 {
        let rounds = arg & !procs_arg::ROUNDS;
        for _ in 0..rounds {
            match sys::fork() {
                Ok(0) => sys::exit(0),
                Ok(pid) => {
                    if sys::waitpid(pid as i32, 0).is_err() {
                        return 1;
                    }
                }
                Err(_) => return 2,
            }
        }
        println!("procs: {rounds} fork/exit/wait rounds");
        return 0;
    }
    let info = sys::cpuinfo();
    let mut t = Tally {
        passed: 0,
        failed: 0,
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
    t.check("an orphan is handed to pid 1, which reaps it", orphans());
    t.check(
        "fork in a process with several threads copies one",
        one_thread_copied(),
    );
    t.check(
        "sbrk: demand-zero pages, private after fork, ENOMEM outside",
        heap(),
    );
    t.check(
        "a fork bomb ends in EAGAIN, and the system recovers",
        fork_bomb(),
    );
    println!("procs: {} passed, {} failed", t.passed, t.failed);
    t.failed as i32
}
