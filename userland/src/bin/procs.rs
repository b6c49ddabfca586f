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

use userland::abi::syscall::{errno, procs_arg, wait, Mechanism, CPU_ANY, MAX_THREADS, PRIO_USER};
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
    space_keys(&mut t);
    println!("procs: {} passed, {} failed", t.passed, t.failed);
    t.failed as i32
}
