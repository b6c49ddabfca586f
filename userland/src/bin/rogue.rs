//! A program that tries to outlive its task or to speak for the kernel
//! (`abi::cases::rogue` names its acts; the argument picks one).
//!
//! - `FORGE`: prints records on the console as the kernel would (a whole
//!   `clock`/`bench`/`samples` set, a malformed `bench`, an `end`), split
//!   across writes and mid-line; the kernel escapes each `@`, so none is a
//!   record. Then offers the `record` system call bodies it must refuse and
//!   two it must print, tagged `prog=rogue`: a `clock` record that says the
//!   TSC (the host, which booted icount, must refuse it) and a `check`.
//!   With more than one CPU it then races the kernel ([`race`]): a
//!   thread on another CPU rewrites a record's body while this one hands
//!   it to the `record` call, over and over.
//! - `SPOIL_*`: changes every piece of machine state a task can change
//!   (sysenter's and syscall's entries to their floors, the pools'
//!   alignment, the ring buffer, the x87 control word) and ends: by `exit`, a fault, or its last
//!   `thread_exit`. The entries and the x87 are each CPU's own: a thread on
//!   every other CPU changes them there too. The kernel must put it all
//!   back, on every CPU.
//!
//! Every call goes through int 0x80 (the others may be at their floors).
//! Exit status 0: every result was as expected; 1: one was not (a line
//! says which).
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use userland::abi::cases::rogue;
use userland::abi::report::{kind, MAX_USER_RECORD};
use userland::abi::syscall::{decode, errno, fd, nr, POOL_ALIGN_EVERY};
use userland::abi::Mechanism;
use userland::{println, record, sys, threads};

/// Lines a user program might print to pass for the kernel.
const FORGED: &[&str] = &[
    "@@tb1 clock clock=icount tsc_hz=1000000000 batches=1 batch_size=1\n",
    "@@tb1 bench name=forged.null mech=int80 path=full call=null measure=per_op n=1 min=1 p25=1 median=1 mean=1 p75=1 max=1 sd=0 outliers=0\n",
    "@@tb1 samples name=forged.null batch_size=1 values=1\n",
    "@@tb1 bench oops\n",
    "@@tb1 end status=failure\n",
    "text first, then @@tb1 bench name=midline\n",
];

/// Bodies the `record` call must refuse, with the errno.
const REFUSED: &[(&[u8], i32)] = &[
    (b"end status=failure", errno::EINVAL),
    (b"test name=forged result=pass", errno::EINVAL),
    (b"bench oops", errno::EINVAL),
    (b"check name=x prog=kernel", errno::EINVAL),
    // The process and thread are the kernel's to name.
    (b"check name=x pid=1", errno::EINVAL),
    (b"check name=x tid=1", errno::EINVAL),
    (b"check name=@@tb1", errno::EINVAL),
    (b"check name=x\n@@tb1 bench oops", errno::EINVAL),
    // A `%` that starts no escape would void the whole report on the host.
    (b"check name=%zz", errno::EINVAL),
    (b"check name=ab%4", errno::EINVAL),
    // Escapes of bytes that are no UTF-8: the host reads values as UTF-8.
    (b"check name=%FF", errno::EINVAL),
    (b"check name=%C3", errno::EINVAL),
    (b"", errno::EINVAL),
];

#[unsafe(no_mangle)]
extern "C" fn main(arg: u32) -> i32 {
    let r = match arg {
        rogue::FORGE if sys::cpuinfo().cpus > 1 => {
            forge().and_then(|()| race()).and_then(|()| copy_race())
        }
        rogue::FORGE => forge(),
        rogue::SPOIL_EXIT | rogue::SPOIL_FAULT | rogue::SPOIL_THREAD_EXIT => spoil(arg),
        _ => Err("no such act"),
    };
    match r {
        Ok(()) => 0,
        Err(why) => {
            println!("rogue: {why}");
            1
        }
    }
}

fn call(n: u32, a: [u32; 6]) -> u32 {
    sys::call(Mechanism::Int80, n, a)
}

fn forge() -> Result<(), &'static str> {
    for line in FORGED {
        sys::write(fd::STDOUT, line.as_bytes());
    }
    // The marker split across writes, and across fds.
    sys::write(fd::STDOUT, b"@");
    sys::write(fd::STDOUT, b"@tb1 bench name=split\n");
    sys::write(fd::STDERR, b"@@");
    sys::write(fd::STDOUT, b"tb1 end status=failure\n");
    for &(body, e) in REFUSED {
        if sys::record(body) != Err(e) {
            return Err("the record call took a body it must refuse");
        }
    }
    let too_long = [b'x'; 16];
    let bad = [
        // Longer than any record.
        (
            too_long.as_ptr() as u32,
            MAX_USER_RECORD as u32 + 1,
            errno::EINVAL,
        ),
        // Kernel memory, and an unmapped page.
        (0x0010_0000, 16, errno::EFAULT),
        (
            userland::abi::cases::UNMAPPED_USER_ADDRESS,
            16,
            errno::EFAULT,
        ),
    ];
    for (p, len, e) in bad {
        if decode(call(nr::RECORD, [p, len, 0, 0, 0, 0])) != Err(e) {
            return Err("the record call took a bad buffer");
        }
    }
    // A clock record of its own: a kind a program may report, so the
    // kernel prints it, tagged; it says the TSC on a boot the host gave
    // icount, and the host must refuse the relabelling, naming it.
    record!(kind::CLOCK, "clock" => "tsc", "tsc_hz" => 3_000_000_000u32);
    record!(kind::CHECK, "mech" => "rogue", "name" => "forged%20records%20refused",
        "result" => "pass");
    Ok(())
}

/// CPUID leaf 1 EDX bit 0 (callers check that CPUID exists).
fn x87_present() -> bool {
    let edx: u32;
    // SAFETY: CPUID only reports; EBX is saved around it (LLVM reserves it).
    unsafe {
        core::arch::asm!(
            "pushl %ebx", "cpuid", "popl %ebx",
            inout("eax") 1u32 => _, out("ecx") _, out("edx") edx,
            options(att_syntax)
        )
    };
    edx & 1 != 0
}

/// The running CPU's own state a task can change: the MSR-based entries
/// to their floors, the x87 control word to every exception unmasked.
fn spoil_this_cpu() -> Result<(), &'static str> {
    let info = sys::cpuinfo();
    for m in [Mechanism::Sysenter, Mechanism::Syscall] {
        if info.has(m) && call(nr::ENTRY_FLOOR, [m as u32, 1, 0, 0, 0, 0]) != 0 {
            return Err("entry_floor refused a usable mechanism");
        }
    }
    // Every x87 exception unmasked, single precision (where there is one:
    // CPUID leaf 1 EDX bit 0; no program here uses it otherwise).
    if info.signature != 0 && x87_present() {
        let cw: u16 = 0x0000;
        // SAFETY: FLDCW reads two bytes of our stack; an FPU is present.
        unsafe { core::arch::asm!("fldcw ({})", in(reg) &cw, options(att_syntax, nostack)) };
    }
    Ok(())
}

/// Threads on other CPUs that have spoiled theirs (or failed: `FAILED`).
static SPOILED: AtomicU32 = AtomicU32::new(0);
const FAILED: u32 = 1 << 16;

/// A thread on another CPU: spoils that CPU's state, says so, and exits.
fn spoiler(_: u32) {
    let r = spoil_this_cpu();
    SPOILED.fetch_add(if r.is_ok() { 1 } else { FAILED }, Ordering::SeqCst);
}

fn spoil(act: u32) -> Result<(), &'static str> {
    let info = sys::cpuinfo();
    let others = info.cpus.max(1) - 1;
    for c in 1..=others {
        if threads::spawn_on(spoiler, 0, userland::abi::syscall::PRIO_USER, c).is_err() {
            return Err("no thread on another CPU");
        }
    }
    while SPOILED.load(Ordering::SeqCst) & (FAILED - 1) < others {
        if SPOILED.load(Ordering::SeqCst) >= FAILED {
            return Err("a thread on another CPU could not spoil it");
        }
        // Sleep, not yield: a tight loop of system calls here would keep
        // the scheduler lock from the other CPUs most of the time.
        threads::sleep(1);
    }
    spoil_this_cpu()?;
    // Another layout than the boot's (128 unless pool_align= says).
    let other = match info.pool_align {
        0 => 64,
        POOL_ALIGN_EVERY | 64 | 128 => 0,
        _ => 128,
    };
    // The pools change only while one user thread lives (EBUSY else), and
    // a spoiler counts itself in SPOILED before it exits: on CPUs truly in
    // parallel this thread can get here first. So wait for them to be
    // gone, a tick at a time, for at most a second.
    let mut tries = 0;
    loop {
        match decode(call(nr::POOL_ALIGN, [other, 0, 0, 0, 0, 0])) {
            Ok(_) => break,
            Err(errno::EBUSY) if tries < 1000 => {
                tries += 1;
                threads::sleep(1);
            }
            Err(_) => return Err("pool_align refused a layout"),
        }
    }
    let left = b"left for the next task";
    if sys::write(fd::RING, left) != left.len() as u32 {
        return Err("the ring buffer took less");
    }
    match act {
        // SAFETY: raises #UD on purpose; the kernel ends the task.
        rogue::SPOIL_FAULT => unsafe { core::arch::asm!("ud2") },
        rogue::SPOIL_THREAD_EXIT => {
            call(nr::THREAD_EXIT, [0; 6]);
            return Err("thread_exit returned");
        }
        _ => {}
    }
    Ok(())
}

/// Record calls the race makes.
const RACE_CALLS: u32 = 2_000;
/// The race's record body: `FLIP` (at `FLIP_AT`) makes it a body the kernel
/// takes; `FORGE` there, a newline and a record marker that would start a
/// line of the body's choosing (a `cpu` record of a forged brand).
static mut RACE_BODY: [u8; 60] = *b"check name=race q=zzzzzzz brand=Forged%20CPU hypervisor=none";
const FLIP_AT: usize = 15;
const FLIP: &[u8; 10] = b" q=zzzzzzz";
const FORGE: &[u8; 10] = b"\n@@tb1 cpu";
static RACE_DONE: AtomicU32 = AtomicU32::new(0);
static FLIPPER_DONE: AtomicU32 = AtomicU32::new(0);

/// The race's other thread: flips the body between its two forms until
/// the record calls are done.
fn flipper(_: u32) {
    let mut forged = false;
    while RACE_DONE.load(Ordering::Acquire) == 0 {
        let with = if forged { FLIP } else { FORGE };
        for (i, &b) in with.iter().enumerate() {
            // SAFETY: a byte of RACE_BODY; the other thread only reads it
            // (the kernel copies it), so a torn view is the race itself.
            unsafe { core::ptr::addr_of_mut!(RACE_BODY[FLIP_AT + i]).write_volatile(b) };
        }
        forged = !forged;
    }
    FLIPPER_DONE.store(1, Ordering::Release);
}

/// Hands the kernel a record body that another thread, on another CPU,
/// rewrites meanwhile. The kernel must check and print one copy: every
/// line it prints is a whole `check` record or none (EINVAL), never a
/// line that starts a record the program could not have made. The host's
/// test counts the forged lines.
fn race() -> Result<(), &'static str> {
    let cpus = sys::cpuinfo().cpus;
    let me = threads::cpu();
    let other = (me + 1) % cpus;
    threads::spawn_on(flipper, 0, userland::abi::syscall::PRIO_USER, other)
        .map_err(|_| "no thread for the flipper")?;
    let (mut taken, mut refused) = (0u32, 0u32);
    for _ in 0..RACE_CALLS {
        let p = core::ptr::addr_of!(RACE_BODY) as u32;
        // SAFETY: only the body's length is read here.
        let len = unsafe { (*core::ptr::addr_of!(RACE_BODY)).len() } as u32;
        match decode(call(nr::RECORD, [p, len, 0, 0, 0, 0])) {
            Ok(_) => taken += 1,
            Err(errno::EINVAL) => refused += 1,
            Err(_) => return Err("the record call failed otherwise than EINVAL"),
        }
    }
    RACE_DONE.store(1, Ordering::Release);
    while FLIPPER_DONE.load(Ordering::Acquire) == 0 {
        threads::yield_now();
    }
    println!("rogue: race: {taken} bodies taken, {refused} refused, on CPUs {me} and {other}");
    Ok(())
}

/// The heap the copy race works on, and how much of it.
const COPY_BYTES: usize = 16 * 1024;
/// The copy race's calls (each a write and a read of the ring).
const COPY_CALLS: u32 = 1_000;
static COPY_DONE: AtomicU32 = AtomicU32::new(0);
static SHRINKER_DONE: AtomicU32 = AtomicU32::new(0);
/// The shrinker's rounds: shrinks of the heap under the copies.
static SHRINKS: AtomicU32 = AtomicU32::new(0);

/// The copy race's other thread: takes the heap's last `COPY_BYTES` away
/// and gives them back (fresh demand-zero pages), and with `fork=cow`
/// forks (every page of the process read-only until written), over and
/// over, under the other thread's copies.
fn shrinker(_: u32) {
    while COPY_DONE.load(Ordering::Acquire) == 0 {
        if sys::sbrk(-(COPY_BYTES as i32)).is_ok() {
            let _ = sys::sbrk(COPY_BYTES as i32);
        }
        if let Ok(0) = sys::fork() {
            sys::exit(0);
        }
        let _ = sys::waitpid(-1, 0);
        SHRINKS.fetch_add(1, Ordering::Relaxed);
    }
    SHRINKER_DONE.store(1, Ordering::Release);
}

/// Copies between the kernel and a heap buffer that another thread, on
/// another CPU, unmaps, maps again and makes copy-on-write meanwhile: the
/// ring's `write` copies from it, its `read` copies into it. Each call
/// must return a count or `EFAULT`, and the kernel must not stop: a copy
/// that meets a page gone is the exception table's, whatever the other
/// CPU did since the check.
fn copy_race() -> Result<(), &'static str> {
    let cpus = sys::cpuinfo().cpus;
    let me = threads::cpu();
    let other = (me + 1) % cpus;
    let heap = sys::sbrk(COPY_BYTES as i32).map_err(|_| "no heap for the copy race")?;
    threads::spawn_on(shrinker, 0, userland::abi::syscall::PRIO_USER, other)
        .map_err(|_| "no thread for the shrinker")?;
    let (mut done, mut faults) = (0u32, 0u32);
    for _ in 0..COPY_CALLS {
        let out = [
            call(nr::WRITE, [fd::RING, heap, COPY_BYTES as u32, 0, 0, 0]),
            call(nr::READ, [fd::RING, heap, COPY_BYTES as u32, 0, 0, 0]),
        ];
        for r in out {
            match decode(r) {
                Ok(n) if n as usize <= COPY_BYTES => done += 1,
                Err(errno::EFAULT) => faults += 1,
                _ => return Err("a copy race call returned neither a count nor EFAULT"),
            }
        }
    }
    COPY_DONE.store(1, Ordering::Release);
    while SHRINKER_DONE.load(Ordering::Acquire) == 0 {
        threads::yield_now();
    }
    // Empty the ring for whoever comes next.
    let mut sink = [0u8; 64];
    while matches!(decode(call(nr::READ, [fd::RING, sink.as_mut_ptr() as u32, 64, 0, 0, 0])), Ok(n) if n > 0)
    {
    }
    println!(
        "rogue: copy race: {done} copies whole or cut, {faults} answered EFAULT, {} shrinks and forks under them, on CPUs {me} and {other}",
        SHRINKS.load(Ordering::Relaxed)
    );
    Ok(())
}
