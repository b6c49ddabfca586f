//! User threads, user mutexes (umtx) and sleep/wakeup on top of the system
//! calls. A mutex is one word: 0 when free, else the owner's tid, with
//! `UMTX_CONTESTED` set while others wait in the kernel. Lock and unlock try
//! a compare-and-swap first and enter the kernel only on contention, as
//! FreeBSD's umtx does.

use core::sync::atomic::{AtomicU32, Ordering};

use abi::syscall::{nr, MAX_THREADS};
use abi::Mechanism;

use crate::sys;

fn call(n: u32, a: [u32; 6]) -> u32 {
    sys::call(Mechanism::Int80, n, a)
}

/// The CPU the calling thread runs on.
pub fn cpu() -> u32 {
    call(nr::CPU, [0; 6])
}

pub fn gettid() -> u32 {
    call(nr::GETTID, [0; 6])
}

pub fn getprio(tid: u32) -> u32 {
    call(nr::GETPRIO, [tid, 0, 0, 0, 0, 0])
}

pub fn yield_now() {
    call(nr::YIELD, [0; 6]);
}

pub fn sleep(ticks: u32) {
    call(nr::SLEEP, [ticks, 0, 0, 0, 0, 0]);
}

/// Sleeps on `chan`; `Err(())` on a timeout.
pub fn sleep_on(chan: u32, timeout: u32) -> Result<(), ()> {
    match abi::syscall::decode(call(nr::SLEEP_ON, [chan, timeout, 0, 0, 0, 0])) {
        Ok(_) => Ok(()),
        Err(_) => Err(()),
    }
}

pub fn wakeup(chan: u32, all: bool) -> u32 {
    call(nr::WAKEUP, [chan, all as u32, 0, 0, 0, 0])
}

pub struct Umtx(pub AtomicU32);

impl Umtx {
    pub const fn new() -> Umtx {
        Umtx(AtomicU32::new(0))
    }

    fn addr(&self) -> u32 {
        &self.0 as *const AtomicU32 as u32
    }

    /// Ok, or the errno of the slow path (EDEADLK when we own it).
    pub fn lock(&self, me: u32) -> Result<(), i32> {
        if self
            .0
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(());
        }
        abi::syscall::decode(call(nr::UMTX_LOCK, [self.addr(), 0, 0, 0, 0, 0])).map(|_| ())
    }

    pub fn unlock(&self, me: u32) -> Result<(), i32> {
        if self
            .0
            .compare_exchange(me, 0, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(());
        }
        abi::syscall::decode(call(nr::UMTX_UNLOCK, [self.addr(), 0, 0, 0, 0, 0])).map(|_| ())
    }
}

/// Stacks for the threads a program creates, one per slot. A slot is
/// busy from `spawn` until the kernel clears its word at the thread's
/// `thread_exit` (when the thread no longer runs on the stack), so a
/// stack is never reused under a thread still on its way out, on any CPU.
const STACK: usize = 16 * 1024;
#[repr(C, align(16))]
struct Stacks([[u8; STACK]; MAX_THREADS]);
static mut STACKS: Stacks = Stacks([[0; STACK]; MAX_THREADS]);
static mut ENTRIES: [(usize, u32); MAX_THREADS] = [(0, 0); MAX_THREADS];
static BUSY: [AtomicU32; MAX_THREADS] = [const { AtomicU32::new(0) }; MAX_THREADS];

core::arch::global_asm!(
    r#"
    .pushsection .text.tb_thread_start, "ax"
    .global tb_thread_start
    /* A new thread: EAX = its slot; run its entry, then thread_exit with
       the slot's busy word (run_slot's result) for the kernel to clear. */
tb_thread_start:
    pushl %eax
    call {run}
    movl %eax, %ebx
    movl ${exit}, %eax
    int $0x80
    ud2
    .popsection
    "#,
    run = sym run_slot,
    exit = const nr::THREAD_EXIT,
    options(att_syntax)
);

unsafe extern "C" {
    fn tb_thread_start();
}

/// Runs slot `slot`'s entry; returns the address of its busy word.
extern "C" fn run_slot(slot: u32) -> u32 {
    // SAFETY: the slot was written before the thread was created.
    let (f, arg) = unsafe { (*(&raw const ENTRIES))[slot as usize] };
    // SAFETY: `f` was an `fn(u32)` when stored.
    let f: fn(u32) = unsafe { core::mem::transmute::<usize, fn(u32)>(f) };
    f(arg);
    &BUSY[slot as usize] as *const AtomicU32 as u32
}

/// Starts `f(arg)` in a new thread of priority `prio` on the caller's CPU:
/// its tid, or the errno (EAGAIN when the kernel's pools are exhausted, or
/// no stack is left here).
pub fn spawn(f: fn(u32), arg: u32, prio: u32) -> Result<u32, i32> {
    spawn_on(f, arg, prio, cpu())
}

/// As [`spawn`], on CPU `cpu` (or `abi::syscall::CPU_ANY`: the kernel
/// picks the least loaded). EINVAL for a CPU that does not run.
pub fn spawn_on(f: fn(u32), arg: u32, prio: u32, cpu: u32) -> Result<u32, i32> {
    let Some(slot) = BUSY.iter().position(|b| {
        b.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }) else {
        return Err(abi::syscall::errno::EAGAIN);
    };
    // SAFETY: the slot is ours (BUSY) until its thread exits.
    let top = unsafe {
        (*(&raw mut ENTRIES))[slot] = (f as usize, arg);
        (&raw mut STACKS) as usize + (slot + 1) * STACK
    };
    let r = abi::syscall::decode(call(
        nr::THREAD_CREATE,
        [
            tb_thread_start as *const () as u32,
            top as u32,
            slot as u32,
            prio,
            cpu,
            0,
        ],
    ));
    if r.is_err() {
        BUSY[slot].store(0, Ordering::Release);
    }
    r
}
