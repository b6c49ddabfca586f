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

/// Stacks for the threads a program creates.
const STACK: usize = 16 * 1024;
#[repr(C, align(16))]
struct Stacks([[u8; STACK]; MAX_THREADS]);
static mut STACKS: Stacks = Stacks([[0; STACK]; MAX_THREADS]);
static mut ENTRIES: [(usize, u32); MAX_THREADS] = [(0, 0); MAX_THREADS];
static NEXT_SLOT: AtomicU32 = AtomicU32::new(0);

core::arch::global_asm!(
    r#"
    .pushsection .text.tb_thread_start, "ax"
    .global tb_thread_start
    /* A new thread: EAX = its slot; run its entry, then thread_exit. */
tb_thread_start:
    pushl %eax
    call {run}
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

extern "C" fn run_slot(slot: u32) {
    // SAFETY: the slot was written before the thread was created.
    let (f, arg) = unsafe { (*(&raw const ENTRIES))[slot as usize] };
    // SAFETY: `f` was an `fn(u32)` when stored.
    let f: fn(u32) = unsafe { core::mem::transmute::<usize, fn(u32)>(f) };
    f(arg);
}

/// Starts `f(arg)` in a new thread of priority `prio`: its tid, or the errno
/// (EAGAIN when the kernel's pools are exhausted, or no stack is left here).
pub fn spawn(f: fn(u32), arg: u32, prio: u32) -> Result<u32, i32> {
    let slot = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) as usize;
    if slot >= MAX_THREADS {
        return Err(abi::syscall::errno::EAGAIN);
    }
    // SAFETY: each slot and stack is used by one thread only.
    let top = unsafe {
        (*(&raw mut ENTRIES))[slot] = (f as usize, arg);
        (&raw mut STACKS) as usize + (slot + 1) * STACK
    };
    abi::syscall::decode(call(
        nr::THREAD_CREATE,
        [
            tb_thread_start as *const () as u32,
            top as u32,
            slot as u32,
            prio,
            0,
            0,
        ],
    ))
}

/// Makes the slots reusable (after every created thread has exited).
pub fn reset_slots() {
    NEXT_SLOT.store(0, Ordering::Relaxed);
}
