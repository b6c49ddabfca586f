//! The thread table: every thread's slot, kernel stack and state, which
//! thread runs on each CPU, and the lookups on them. Below the rest of the
//! scheduler: it imports nothing of it but the lock.

use abi::layout::MAX_CPUS;
use abi::syscall::{MAX_THREADS, PRIO_MAX};

use super::lock::{held_here, locked};
use crate::arch::cpu::X87State;
use crate::sync::cell::BootCell;
use core::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};

pub type Tid = u32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Free,
    Ready,
    Running,
    /// Waiting on a turnstile (a contested lock).
    OnTurnstile,
    /// Waiting on a sleepqueue (a wait channel), perhaps with a deadline.
    Sleeping,
    /// The boot thread while a task runs.
    WaitingForTask,
    /// An application processor's idle thread (never picked as ready).
    Idle,
    /// A thread of a task that ended, stopped where it was: never picked
    /// again; `reset_all` frees it.
    Stopped,
}

/// A thread; every field is (s).
#[derive(Clone, Copy, Debug)]
pub struct Thread {
    pub state: State,
    pub tid: Tid,
    /// Priority as created, and as lent by waiters (never less urgent).
    pub base_prio: u8,
    pub prio: u8,
    /// Saved ESP while not running.
    pub(super) esp: u32,
    pub kstack_top: u32,
    pub user: bool,
    /// Pool indices of the objects this thread owns right now.
    pub turnstile: Option<usize>,
    pub sleepqueue: Option<usize>,
    /// The turnstile or sleepqueue it waits on.
    pub blocked_on: Option<usize>,
    /// When it became ready or started waiting: FIFO order among equals.
    pub seq: u64,
    /// Sleeping: the tick to wake at (0 = none); set when the timeout fired.
    pub deadline: u64,
    pub timed_out: bool,
    /// The CPU this thread runs on.
    pub cpu: u8,
    /// The process of a user thread (its slot in `proc`), else [`NO_PROC`].
    pub proc: u8,
}

/// [`Thread::proc`] of the boot, idle and kernel threads.
pub const NO_PROC: u8 = u8::MAX;

pub(super) const EMPTY: Thread = Thread {
    state: State::Free,
    tid: 0,
    base_prio: PRIO_MAX as u8,
    prio: PRIO_MAX as u8,
    esp: 0,
    kstack_top: 0,
    user: false,
    turnstile: None,
    sleepqueue: None,
    blocked_on: None,
    seq: 0,
    deadline: 0,
    timed_out: false,
    cpu: 0,
    proc: NO_PROC,
};

/// The scheduler's state: all of it (s).
pub(super) struct Sched {
    pub(super) threads: [Thread; MAX_THREADS],
    /// Each application processor's idle thread.
    pub(super) idle: [usize; MAX_CPUS],
    /// The FIFO clock among equal priorities.
    pub(super) seq: u64,
    pub(super) next_tid: Tid,
    /// Ticks since the timer was started, and each CPU's running thread's share.
    pub(super) ticks: u64,
    pub(super) quantum_left: [u32; MAX_CPUS],
    pub(super) switches: u64,
    /// The running task is ending: its threads are not picked again.
    pub(super) ending: bool,
}

pub(super) static SCHED: BootCell<Sched> = BootCell::new(Sched {
    threads: [EMPTY; MAX_THREADS],
    idle: [0; MAX_CPUS],
    seq: 0,
    next_tid: 1,
    ticks: 0,
    quantum_left: [QUANTUM; MAX_CPUS],
    switches: 0,
    ending: false,
});

/// Each thread slot's x87 context while its user thread does not run,
/// saved and loaded by [`switch_to`]; a new user thread's is clean, a
/// forked one's a copy of its parent's (s). Apart from [`Thread`], which is
/// copied whole in places, so that those copies stay short.
pub(super) static X87: BootCell<[X87State; MAX_THREADS]> =
    BootCell::new([X87State::CLEAN; MAX_THREADS]);

/// The x87 contexts, under the scheduler lock (asserted).
pub(super) fn x87_slots() -> &'static mut [X87State; MAX_THREADS] {
    debug_assert!(held_here(), "x87 contexts without the scheduler lock");
    // SAFETY: as in `sched`: the scheduler lock guards them.
    unsafe { X87.get_mut() }
}

/// The pid of each thread slot's process (0 for none): written when the
/// slot gets a user thread, before it runs; read by [`pid_by_stack`].
pub(super) static SLOT_PID: [AtomicU32; MAX_THREADS] = [const { AtomicU32::new(0) }; MAX_THREADS];

/// The pid of the running user thread's process, from the kernel stack it
/// runs on (each thread slot has its own, at a fixed place): no lock, no
/// CPU number, as Linux i386 found `current` from ESP. `getpid`'s path.
#[inline(always)]
pub fn pid_by_stack() -> u32 {
    let esp: u32;
    // SAFETY: reads ESP only.
    unsafe {
        core::arch::asm!("movl %esp, {}", out(reg) esp, options(att_syntax, nomem, nostack, preserves_flags))
    };
    let slot =
        esp.wrapping_sub(STACKS.as_ptr() as u32) / core::mem::size_of::<KernelStack>() as u32;
    SLOT_PID
        .get(slot as usize)
        .map_or(0, |p| p.load(Ordering::Relaxed))
}

/// The process of each CPU's running thread (c), [`NO_PROC`] for none.
pub(super) static CURRENT_PROC: [AtomicU8; MAX_CPUS] = [const { AtomicU8::new(NO_PROC) }; MAX_CPUS];

/// The running thread (table index) of each CPU (c): FreeBSD's curthread.
pub(super) static CURRENT: [AtomicUsize; MAX_CPUS] = [const { AtomicUsize::new(0) }; MAX_CPUS];

pub(super) fn set_current(cpu: usize, i: usize) {
    CURRENT[cpu].store(i, Ordering::Relaxed);
}

/// Ticks a user thread runs before an equal-priority thread gets the CPU.
pub(super) const QUANTUM: u32 = 10;
pub(super) const KSTACK_SIZE: usize = 8192;

/// The kernel stacks of threads 1.., each above a guard page.
#[repr(C, align(4096))]
pub(super) struct KernelStack {
    pub(super) guard: [u8; 4096],
    pub(super) stack: [u8; KSTACK_SIZE],
}

#[unsafe(link_section = ".bss.thread_stacks")]
pub(super) static STACKS: BootCell<[KernelStack; MAX_THREADS]> = BootCell::new(
    [const {
        KernelStack {
            guard: [0; 4096],
            stack: [0; KSTACK_SIZE],
        }
    }; MAX_THREADS],
);

/// The guard page of each thread stack, for the paging setup to unmap.
pub fn stack_guards() -> impl Iterator<Item = u32> {
    let base = STACKS.as_ptr() as u32;
    (1..MAX_THREADS).map(move |i| base + (i * core::mem::size_of::<KernelStack>()) as u32)
}

/// This CPU's index (the CPU knows it: `arch::gdt::cpu`).
pub use crate::arch::gdt::cpu;

/// The scheduler's state, under the scheduler lock (asserted).
pub(super) fn sched() -> &'static mut Sched {
    debug_assert!(held_here(), "scheduler state without the scheduler lock");
    // SAFETY: this CPU holds the scheduler lock, so no other CPU touches the
    // state until it lets go; on this CPU one path runs at a time (IF is
    // clear in ring 0, and the idle wait drops the lock before STI).
    unsafe { SCHED.get_mut() }
}

/// Puts the boot thread in slot 0 (it runs on the boot stack already).
pub fn init() {
    let _g = locked();
    let s = sched();
    s.threads[0] = Thread {
        state: State::Running,
        tid: 0,
        base_prio: 0,
        prio: 0,
        ..EMPTY
    };
    for c in 0..MAX_CPUS {
        set_current(c, 0);
    }
}

/// The thread running on this CPU (no lock: see CURRENT).
pub fn current_index() -> usize {
    CURRENT[cpu()].load(Ordering::Relaxed)
}

pub fn current_tid() -> Tid {
    sched().threads[current_index()].tid
}

/// Thread `i`, under the scheduler lock (asserted in `sched`).
pub fn thread(i: usize) -> &'static mut Thread {
    &mut sched().threads[i]
}

/// Thread `i`'s current priority, for code that does not hold the lock.
pub fn prio_of(i: usize) -> u8 {
    let _g = locked();
    sched().threads[i].prio
}

pub fn index_of(tid: Tid) -> Option<usize> {
    sched()
        .threads
        .iter()
        .position(|t| t.state != State::Free && t.tid == tid)
}

pub fn ticks() -> u64 {
    sched().ticks
}

pub(super) fn next_seq() -> u64 {
    let s = sched();
    s.seq += 1;
    s.seq
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateError {
    /// No free thread slot, turnstile or sleepqueue.
    Exhausted,
}

/// The CPU for a new user thread that may run anywhere: the running CPU
/// with the fewest live user threads (the lowest index among equals).
pub fn least_loaded(cpus: usize) -> usize {
    let s = sched();
    (0..cpus)
        .min_by_key(|&c| {
            s.threads
                .iter()
                .filter(|t| t.user && t.state != State::Free && t.cpu as usize == c)
                .count()
        })
        .unwrap_or(0)
}

/// The process of this CPU's running thread (`None` in a kernel thread).
pub fn current_proc() -> Option<usize> {
    match CURRENT_PROC[cpu()].load(Ordering::Relaxed) {
        NO_PROC => None,
        p => Some(p as usize),
    }
}

pub fn user_threads() -> usize {
    sched()
        .threads
        .iter()
        .filter(|t| t.user && t.state != State::Free)
        .count()
}
