//! Threads and the scheduler.
//!
//! A thread is a kernel stack, a saved ESP, a priority and a state. Thread 0
//! is the boot thread (kmain on the boot stack); user threads belong to the
//! processes of the one task that runs at a time (`proc`: each thread knows
//! its process, and a switch to another process's thread loads its CR3);
//! kernel threads run a Rust function.
//!
//! The kernel is not preemptible: it runs with IF clear, so a thread in ring
//! 0 keeps the CPU until it blocks, yields or returns to ring 3. The timer
//! (PIT, 1 kHz) preempts only user mode: a tick that finds ring 3 running
//! may switch to another ready thread of the same or a more urgent
//! priority. Priorities: 0 is the most urgent, 31 the least. With at most
//! 16 threads, picking the next one scans the table; ties go to the thread
//! that has waited longest (FIFO within a priority).
//!
//! With more than one CPU, every thread is pinned to the CPU it was created
//! for (user threads to the CPU `thread_create` names, or the least loaded
//! one), one spin lock guards the scheduler and the sync objects (taken at
//! the outermost entry, held across a switch and released by whichever
//! thread runs next), a CPU that makes a thread of another CPU ready sends
//! it a reschedule IPI, and each application processor has an idle thread
//! that waits for work. Each CPU preempts its own ring 3: CPU 0 on the PIT
//! tick, the others on their local APIC timer; a reschedule IPI that finds
//! ring 3 running lets a more urgent thread in.
//!
//! A task ends everywhere ([`end_task`]): the CPU that ends it marks the
//! task as ending (no CPU picks its threads again), wakes the boot thread,
//! and sends a reschedule IPI to every CPU running one of the task's
//! threads; each of those stops it at its next way back to ring 3, or when
//! it blocks. The boot thread waits until no CPU runs a user thread
//! ([`reset_all`]) before it returns the objects to the pools and clears
//! the user mappings; each CPU reloads CR3 before it runs the next task's
//! first thread, so no TLB keeps the old task's mappings.
//!
//! Each thread owns one turnstile and one sleepqueue from the pools
//! (`task::turnstile`, `task::sleepqueue`), FreeBSD's model: a thread that
//! blocks lends its object to the lock or channel.
//!
//! Locking key (FreeBSD's style: each field says what guards it):
//!   (s) the scheduler lock ([`lock`]): the thread table, every thread's
//!       fields, the run queue order, the ticks; also the turnstiles, the
//!       sleepqueues and the kernel mutexes (`sync`). [`sched`] asserts it.
//!   (c) this CPU only: written by its own CPU with interrupts off, read
//!       without a lock (which thread runs here).
//!   (b) boot: written before any other CPU runs, read-only afterwards.

use abi::eflags;
use abi::layout::{selector, MAX_CPUS, VECTOR_RESCHEDULE};
use abi::syscall::{MAX_THREADS, PRIO_MAX};

use crate::arch::cpu::X87State;
use crate::arch::regs::{EntryFrame, IretFrame};
use crate::arch::{gdt, pit};
use crate::entry;
use crate::sync::cell::BootCell;
use crate::task::{sleepqueue, turnstile};
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
    esp: u32,
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

const EMPTY: Thread = Thread {
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
struct Sched {
    threads: [Thread; MAX_THREADS],
    /// Each application processor's idle thread.
    idle: [usize; MAX_CPUS],
    /// The FIFO clock among equal priorities.
    seq: u64,
    next_tid: Tid,
    /// Ticks since the timer was started, and each CPU's running thread's share.
    ticks: u64,
    quantum_left: [u32; MAX_CPUS],
    switches: u64,
    /// The running task is ending: its threads are not picked again.
    ending: bool,
}

static SCHED: BootCell<Sched> = BootCell::new(Sched {
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
static X87: BootCell<[X87State; MAX_THREADS]> = BootCell::new([X87State::CLEAN; MAX_THREADS]);

/// The x87 contexts, under the scheduler lock (asserted).
fn x87_slots() -> &'static mut [X87State; MAX_THREADS] {
    debug_assert!(held_here(), "x87 contexts without the scheduler lock");
    // SAFETY: as in `sched`: the scheduler lock guards them.
    unsafe { X87.get_mut() }
}

/// The pid of each thread slot's process (0 for none): written when the
/// slot gets a user thread, before it runs; read by [`pid_by_stack`].
static SLOT_PID: [AtomicU32; MAX_THREADS] = [const { AtomicU32::new(0) }; MAX_THREADS];

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

/// Gives slot `i` to a thread of process `proc`.
fn set_slot_proc(i: usize, proc: usize) {
    let t = &mut sched().threads[i];
    t.proc = proc as u8;
    SLOT_PID[i].store(crate::proc::get(proc).pid, Ordering::Relaxed);
}

/// The process of each CPU's running thread (c), [`NO_PROC`] for none.
static CURRENT_PROC: [AtomicU8; MAX_CPUS] = [const { AtomicU8::new(NO_PROC) }; MAX_CPUS];

/// The running thread (table index) of each CPU (c): FreeBSD's curthread.
static CURRENT: [AtomicUsize; MAX_CPUS] = [const { AtomicUsize::new(0) }; MAX_CPUS];

fn set_current(cpu: usize, i: usize) {
    CURRENT[cpu].store(i, Ordering::Relaxed);
}

/// Ticks a user thread runs before an equal-priority thread gets the CPU.
const QUANTUM: u32 = 10;
const KSTACK_SIZE: usize = 8192;

/// The kernel stacks of threads 1.., each above a guard page.
#[repr(C, align(4096))]
struct KernelStack {
    guard: [u8; 4096],
    stack: [u8; KSTACK_SIZE],
}

#[unsafe(link_section = ".bss.thread_stacks")]
static STACKS: BootCell<[KernelStack; MAX_THREADS]> = BootCell::new(
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

/// The scheduler lock: the thread table, the run states, the turnstiles and
/// the sleepqueues. Holds this CPU's index + 1 while taken.
///
/// A test-and-set lock. Under QEMU's icount a CPU that waits for it ends
/// its turn at every `pause` and looks again only at its next turn, so it
/// can miss every moment the lock is free: the turn pacer (`arch::pacer`)
/// parks CPUs only where they hold no lock, so the CPU whose turn it is
/// finds the lock free (docs/threads.md, "Turns").
static LOCK: AtomicU32 = AtomicU32::new(0);

/// Takes the scheduler lock for this CPU.
#[track_caller]
pub fn lock() {
    let me = cpu() as u32 + 1;
    assert!(
        LOCK.load(Ordering::Relaxed) != me,
        "scheduler lock taken twice on one CPU"
    );
    while LOCK
        .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        // The holder may be waiting for this CPU to flush its TLB, which
        // the IPI cannot ask of it with interrupts off.
        crate::vm::pmap::shootdown::poll();
        core::hint::spin_loop();
    }
}

/// Lets the scheduler lock go; only its holder may (FreeBSD's
/// `mtx_assert(MA_OWNED)` before `mtx_unlock`).
#[track_caller]
pub fn unlock() {
    let me = cpu() as u32 + 1;
    let held = LOCK.load(Ordering::Relaxed);
    if held != me {
        crate::console::take_over();
        panic!(
            "scheduler lock released by CPU {} while it is held by {held} (0: nobody)",
            me - 1
        );
    }
    LOCK.store(0, Ordering::Release);
}

/// Whether this CPU holds the scheduler lock (what the sync objects assert).
pub fn held_here() -> bool {
    LOCK.load(Ordering::Relaxed) == cpu() as u32 + 1
}

/// The lock for a scope: released when the guard goes.
pub struct Guard(bool);

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0 {
            unlock();
        }
    }
}

/// Takes the lock unless this CPU holds it already (paths that end a task
/// are entered both ways).
pub fn locked() -> Guard {
    if held_here() {
        Guard(false)
    } else {
        lock();
        Guard(true)
    }
}

extern "C" fn start_unlock() {
    unlock();
}

/// The scheduler's state, under the scheduler lock (asserted).
fn sched() -> &'static mut Sched {
    debug_assert!(held_here(), "scheduler state without the scheduler lock");
    // SAFETY: this CPU holds the scheduler lock, so no other CPU touches the
    // state until it lets go; on this CPU one path runs at a time (IF is
    // clear in ring 0, and the idle wait drops the lock before STI).
    unsafe { SCHED.get_mut() }
}

crate::arch::regs::frame_asm!(
    r#"
    .pushsection .text.sched, "ax"
    .global switch_stacks, kthread_start, uthread_start, fork_start
    /* switch_stacks(save: *mut u32, next_esp: u32): the callee-saved
       registers go on this stack, ESP into *save; then the next thread's
       ESP is loaded and its registers popped: `ret` resumes it wherever it
       called switch_stacks (or at a start routine, for a new thread). */
switch_stacks:
    pushl %ebp
    pushl %ebx
    pushl %esi
    pushl %edi
    /* FS and GS too: no entry stub saves them (the kernel uses neither
       for itself on the way in), and SYSEXIT, SYSRET and an IRET that
       finds them valid reload nothing, so a thread that blocked in a
       system call would otherwise return with the last thread's. And
       EFLAGS: an interrupt from ring 3 keeps the user's AC (an interrupt
       gate clears IF, TF, NT and RF only: SDM Vol. 3A §6.12.1), and a
       switch in its handler would hand that AC to the next thread, whose
       SYSEXIT or SYSRET returns with the kernel's EFLAGS. */
    pushfl
    pushl %fs
    pushl %gs
    /* Above the SwitchFrame just pushed: the two arguments. */
    movl {arg_save}(%esp), %eax
    movl %esp, (%eax)
    movl {arg_next}(%esp), %esp
    popl %gs
    popl %fs
    popfl
    popl %edi
    popl %esi
    popl %ebx
    popl %ebp
    ret

    /* A new kernel thread: entry and argument are on its stack. */
kthread_start:
    /* Started by a switch: the scheduler lock is still held; let it go. */
    call {unlock}
    popl %eax
    popl %ecx
    pushl %ecx
    call *%eax
    call {kexit}

    /* A new user thread: an IRET frame to ring 3 is on its stack, with the
       argument above it for EAX. */
uthread_start:
    call {unlock}
    movl ${udata}, %eax
    movl %eax, %ds
    movl %eax, %es
    movl %eax, %fs
    movl %eax, %gs
    popl %eax
    xorl %ebx, %ebx
    xorl %ecx, %ecx
    xorl %edx, %edx
    xorl %esi, %esi
    xorl %edi, %edi
    xorl %ebp, %ebp
    iret

    /* A forked child's first run: the parent's entry frame (EntryFrame:
       PUSHAL's registers, ES, DS, an IRET frame) is on its stack. */
fork_start:
    call {unlock}
    frame_restore
    iret
    .popsection
    "#,
    udata = const selector::USER_DATA,
    arg_save = const core::mem::size_of::<SwitchFrame>(),
    arg_next = const core::mem::size_of::<SwitchFrame>() + 4,
    kexit = sym kthread_exit,
    unlock = sym start_unlock,
    options(att_syntax)
);

unsafe extern "C" {
    fn switch_stacks(save: *mut u32, next_esp: u32);
    static kthread_start: u8;
    static uthread_start: u8;
    static fork_start: u8;
}

extern "C" fn kthread_exit() -> ! {
    lock();
    exit_current()
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

fn next_seq() -> u64 {
    let s = sched();
    s.seq += 1;
    s.seq
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateError {
    /// No free thread slot, turnstile or sleepqueue.
    Exhausted,
}

/// Takes a slot and its pool objects; the stack is prepared by the caller.
fn new_thread(prio: u32, user: bool) -> Result<usize, CreateError> {
    let s = sched();
    // A free slot whose stack no CPU is still on. A thread that stops for
    // good frees its slot (`release`) while it still runs on its stack, and
    // leaves the stack only at the switch to the next thread; on CPU 0,
    // with nothing ready, `schedule` lets the lock go and halts before
    // that, still on the freed stack. Another CPU that took the slot then
    // wrote the new thread's start frame over the halted CPU's frames (the
    // fuzzer's threads phase stopped the kernel so: a forked child exited
    // on CPU 0, a fork on CPU 1 took its slot, and CPU 0 returned to EIP
    // 1). A CPU's CURRENT names the slot until that switch, which happens
    // under the lock held here: a slot no CPU names is on no CPU's stack.
    let on_a_cpu = |i: usize| CURRENT.iter().any(|c| c.load(Ordering::Relaxed) == i);
    let i = (1..MAX_THREADS)
        .find(|&i| s.threads[i].state == State::Free && !on_a_cpu(i))
        .ok_or(CreateError::Exhausted)?;
    let ts = turnstile::alloc().ok_or(CreateError::Exhausted)?;
    let Some(sq) = sleepqueue::alloc() else {
        turnstile::free(ts);
        return Err(CreateError::Exhausted);
    };
    let tid = s.next_tid;
    s.next_tid += 1;
    let top = {
        // SAFETY: slot i's stack is unused (its thread is Free), and the
        // scheduler lock (held) keeps another CPU from taking the slot.
        let st = unsafe { &mut STACKS.get_mut()[i] };
        st.stack.as_ptr() as u32 + KSTACK_SIZE as u32
    };
    let prio = prio.min(PRIO_MAX) as u8;
    s.threads[i] = Thread {
        state: State::Ready,
        tid,
        base_prio: prio,
        prio,
        esp: top,
        kstack_top: top,
        user,
        turnstile: Some(ts),
        sleepqueue: Some(sq),
        seq: next_seq(),
        ..EMPTY
    };
    if user {
        x87_slots()[i] = X87State::CLEAN;
    }
    Ok(i)
}

/// What `switch_stacks` pops when it resumes a thread: FS and GS, the
/// callee-saved registers, then the address `ret` goes to.
#[repr(C)]
struct SwitchFrame {
    gs: u32,
    fs: u32,
    eflags: u32,
    edi: u32,
    esi: u32,
    ebx: u32,
    ebp: u32,
    ret: u32,
}

impl SwitchFrame {
    /// A first switch to a new thread on `cpu`: zero registers, then
    /// `start`; FS the kernel's data and GS `cpu`'s per-CPU segment, as
    /// the boot left them (a new user thread's start routine loads its own).
    fn to(start: *const u8, cpu: usize) -> SwitchFrame {
        SwitchFrame {
            gs: (selector::PERCPU_BASE + 8 * cpu as u16) as u32,
            fs: selector::KERNEL_DATA as u32,
            // The kernel's known flags (interrupts off: the start routine
            // runs under the scheduler lock).
            eflags: abi::eflags::KERNEL_ENTRY,
            edi: 0,
            esi: 0,
            ebx: 0,
            ebp: 0,
            ret: start as u32,
        }
    }
}

/// A new kernel thread's stack: `kthread_start` pops the entry and its argument.
#[repr(C)]
struct KernelStart {
    switch: SwitchFrame,
    entry: u32,
    arg: u32,
}

/// A new user thread's stack: `uthread_start` pops the argument into EAX
/// and IRETs to ring 3.
#[repr(C)]
struct UserStart {
    switch: SwitchFrame,
    arg: u32,
    iret: IretFrame,
}

/// A forked thread's stack: `fork_start` restores the parent's registers
/// (EAX = 0) and segments and IRETs to ring 3.
#[repr(C)]
struct ForkStart {
    switch: SwitchFrame,
    frame: EntryFrame,
}

/// Pushes `frame` below the thread's saved ESP (a new thread's start frame).
fn push_frame<F>(i: usize, frame: F) {
    let t = &mut sched().threads[i];
    let new_esp = t.esp - core::mem::size_of::<F>() as u32;
    // SAFETY: inside the thread's own kernel stack, which nothing uses yet
    // (the thread has never run); u32-aligned like every frame here.
    unsafe { (new_esp as *mut F).write(frame) };
    t.esp = new_esp;
}

/// A kernel thread running `entry(arg)` on CPU 0; it is ready at once.
pub fn spawn_kernel(entry: extern "C" fn(u32), arg: u32, prio: u32) -> Result<Tid, CreateError> {
    spawn_kernel_on(0, entry, arg, prio)
}

/// A kernel thread running `entry(arg)` on CPU `cpu`.
pub fn spawn_kernel_on(
    cpu: usize,
    entry: extern "C" fn(u32),
    arg: u32,
    prio: u32,
) -> Result<Tid, CreateError> {
    let i = new_thread(prio, false)?;
    sched().threads[i].cpu = cpu as u8;
    push_frame(
        i,
        KernelStart {
            switch: SwitchFrame::to(&raw const kthread_start, cpu),
            entry: entry as *const () as u32,
            arg,
        },
    );
    let tid = sched().threads[i].tid;
    make_ready(i);
    Ok(tid)
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

/// A user thread of process `proc` on CPU `cpu` starting at `eip` with
/// ESP `esp` and EAX `arg`.
pub fn spawn_user(
    eip: u32,
    esp: u32,
    arg: u32,
    prio: u32,
    cpu: usize,
    proc: usize,
) -> Result<Tid, CreateError> {
    let i = new_thread(prio, true)?;
    sched().threads[i].cpu = cpu as u8;
    set_slot_proc(i, proc);
    crate::proc::thread_started(proc);
    push_frame(
        i,
        UserStart {
            switch: SwitchFrame::to(&raw const uthread_start, cpu),
            arg,
            iret: IretFrame {
                eip,
                cs: selector::USER_CODE as u32,
                eflags: eflags::USER_START,
                esp,
                ss: selector::USER_DATA as u32,
            },
        },
    );
    start_ticks_if_shared();
    let tid = sched().threads[i].tid;
    if cpu != self::cpu() {
        // Wake that CPU if it idles (new_thread made the thread ready).
        make_ready(i);
    }
    Ok(tid)
}

/// A second user thread is what needs the timer: preemption.
fn start_ticks_if_shared() {
    if sched()
        .threads
        .iter()
        .filter(|t| t.user && t.state != State::Free)
        .count()
        > 1
    {
        pit::start_ticks();
    }
}

/// A new process's only thread (`fork`): on this CPU, at the running
/// thread's priority, returning to ring 3 through `frame` (the parent's
/// registers at its entry, EAX already 0). The process counts it already.
pub fn spawn_fork(frame: &EntryFrame, proc: usize) -> Result<Tid, CreateError> {
    let prio = sched().threads[current_index()].base_prio;
    let i = new_thread(prio as u32, true)?;
    let me = cpu();
    set_slot_proc(i, proc);
    let t = &mut sched().threads[i];
    t.cpu = me as u8;
    let mut f = *frame;
    // Back to ring 3 by IRET whichever way the parent came in: the user's
    // selectors, interrupts on, no nested task (SDM Vol. 3A §7.4: IRET
    // with NT set would be a task return).
    f.iret.cs = selector::USER_CODE as u32;
    f.iret.ss = selector::USER_DATA as u32;
    f.iret.eflags = (f.iret.eflags & !eflags::NT) | eflags::IF | eflags::RESERVED_1;
    // The rest of the parent's context: its x87 registers and its FS and
    // GS, which no entry saved and the kernel has left as they were.
    x87_slots()[i] = crate::arch::cpu::copy_x87();
    let (fs, gs) = user_fs_gs();
    push_frame(
        i,
        ForkStart {
            switch: SwitchFrame {
                fs,
                gs,
                ..SwitchFrame::to(&raw const fork_start, me)
            },
            frame: f,
        },
    );
    start_ticks_if_shared();
    Ok(sched().threads[i].tid)
}

/// FS and GS as they are now: in a system call, the user's (the entries
/// leave them alone, and [`switch_stacks`] gives each thread its own back).
fn user_fs_gs() -> (u32, u32) {
    let (fs, gs): (u32, u32);
    // SAFETY: reading segment registers has no side effect; the upper
    // halves are zeroed first (MOV from a segment register to a 32-bit
    // register leaves them undefined before the Pentium Pro).
    unsafe {
        core::arch::asm!(
            "xorl {f}, {f}",
            "xorl {g}, {g}",
            "movw %fs, {f:x}",
            "movw %gs, {g:x}",
            f = out(reg) fs,
            g = out(reg) gs,
            options(att_syntax, nomem, nostack, preserves_flags)
        )
    };
    (fs, gs)
}

/// The process of this CPU's running thread (`None` in a kernel thread).
pub fn current_proc() -> Option<usize> {
    match CURRENT_PROC[cpu()].load(Ordering::Relaxed) {
        NO_PROC => None,
        p => Some(p as usize),
    }
}

/// Process `p` ends: none of its threads runs again. Those that wait
/// (ready, asleep, blocked on a user mutex) stop now, taken off their
/// sleepqueue or turnstile; those running on other CPUs are sent a
/// reschedule IPI and stop at their next way back to ring 3, or before
/// they wait on a user channel or mutex (`syscall::threads`). The caller's own thread stops with
/// [`stop_current_of_process`]. Under the lock.
pub fn stop_process(p: usize) {
    let s = sched();
    let me = current_index();
    for i in 1..MAX_THREADS {
        let t = s.threads[i];
        if i == me || !t.user || t.proc as usize != p || t.state == State::Free {
            continue;
        }
        match t.state {
            State::Ready => stop_thread(i),
            State::Sleeping => {
                sleepqueue::remove_waiter(i);
                stop_thread(i);
            }
            // Its lock is a word of this process, so nobody outside it
            // would ever hand it over: it leaves the turnstile unserved.
            State::OnTurnstile => {
                turnstile::remove_waiter(i);
                stop_thread(i);
            }
            State::Running => crate::arch::apic::send_ipi(
                crate::arch::smp::percpu(t.cpu as usize).apic_id as u8,
                VECTOR_RESCHEDULE,
            ),
            _ => {}
        }
    }
}

/// Thread `i` (not running) of an ending process is gone for good.
fn stop_thread(i: usize) {
    let p = sched().threads[i].proc as usize;
    release(i);
    crate::proc::thread_stopped(p);
}

/// The running thread of an ending process stops for good and this CPU runs
/// its next thread. Under the lock.
pub fn stop_current_of_process() -> ! {
    stop_thread(current_index());
    schedule();
    unreachable!("a stopped thread was resumed");
}

/// Whether thread `t` may run: not one of an ending task's or process's.
fn runnable(s: &Sched, t: &Thread) -> bool {
    !(t.user && (s.ending || crate::proc::exiting(t.proc as usize)))
}

/// The most urgent ready thread of this CPU, oldest first among equals.
/// While a task ends, none of its threads is picked.
fn pick() -> Option<usize> {
    let s = sched();
    let me = cpu() as u8;
    (0..MAX_THREADS)
        .filter(|&i| {
            let t = &s.threads[i];
            t.state == State::Ready && t.cpu == me && runnable(s, t)
        })
        .min_by_key(|&i| (s.threads[i].prio, s.threads[i].seq))
}

/// Makes thread `i` ready (from any waiting state).
pub fn make_ready(i: usize) {
    let seq = next_seq();
    let t = &mut sched().threads[i];
    t.state = State::Ready;
    t.blocked_on = None;
    t.seq = seq;
    let target = t.cpu as usize;
    crate::arch::smp::note_work(target);
    if target != cpu() {
        crate::arch::apic::send_ipi(
            crate::arch::smp::percpu(target).apic_id as u8,
            VECTOR_RESCHEDULE,
        );
    }
}

/// Switches to the next ready thread of this CPU; the current one must
/// already have its new state (Ready, waiting...). Called with the
/// scheduler lock held. On CPU 0, waits for an interrupt when nothing is
/// ready (lock released meanwhile); on another CPU, goes to its idle
/// thread. A state in which nothing anywhere can run again ends the task
/// (deadlock).
pub fn schedule() {
    debug_assert!(held_here(), "schedule without the scheduler lock");
    loop {
        // This CPU looks now: a thread made ready before this point is in
        // the pick (the turn pacer counts an idle CPU with a note as busy).
        crate::arch::smp::take_work();
        if let Some(next) = pick() {
            switch_to(next);
            return;
        }
        let me = cpu();
        let s = sched();
        if me != 0 {
            // Nothing for this CPU: its idle thread waits for work.
            let idle = s.idle[me];
            if CURRENT[me].load(Ordering::Relaxed) != idle {
                switch_to(idle);
            }
            return;
        }
        let alive = s.threads.iter().any(|t| {
            (t.state == State::Sleeping && t.deadline != 0)
                || (t.cpu != 0 && matches!(t.state, State::Ready | State::Running))
        });
        if !alive && !s.ending {
            crate::kprintln!("sched: every thread is blocked and none has a timeout: deadlock");
            crate::task::note_end(crate::task::End::Deadlock);
            begin_end();
            // The boot thread is ready now: the next pick finds it.
            continue;
        }
        pit::start_ticks();
        unlock();
        // Wait for the next interrupt (a tick, or another CPU's reschedule
        // IPI); the tick handler only counts and wakes sleepers, since it
        // interrupted ring 0.
        crate::arch::smp::halt_idle();
        lock();
    }
}

fn switch_to(next: usize) {
    let s = sched();
    let me = cpu();
    let prev = CURRENT[me].load(Ordering::Relaxed);
    if s.threads[prev].state == State::Running {
        s.threads[prev].state = State::Ready;
        s.threads[prev].seq = next_seq();
    }
    if s.threads[next].state != State::Idle {
        s.threads[next].state = State::Running;
    }
    if next == prev {
        return;
    }
    set_current(me, next);
    s.quantum_left[me] = QUANTUM;
    s.switches += 1;
    // The ring-0 stack for the next entry from ring 3, on this CPU:
    // interrupts and call gates read this CPU's TSS.ESP0; sysenter and
    // syscall have their own per-CPU copies. (The boot and idle threads
    // never enter from ring 3.)
    let top = if next == 0 {
        0
    } else {
        s.threads[next].kstack_top
    };
    if top != 0 {
        gdt::set_esp0_on(me, top);
        entry::set_kernel_stack(top);
    }
    // A user thread runs in its process's address space: CR3 is loaded
    // when (and only when) it differs. Any other thread keeps the space it
    // finds (Linux's lazy TLB): the kernel half is the same in all, and a
    // space is only freed once no CPU holds it (`vm::pmap`).
    if s.threads[next].user {
        let p = s.threads[next].proc;
        CURRENT_PROC[me].store(p, Ordering::Relaxed);
        if let Some(dir) = crate::proc::directory(p as usize) {
            crate::vm::pmap::activate_dir(dir);
        }
    } else {
        CURRENT_PROC[me].store(NO_PROC, Ordering::Relaxed);
    }
    // Each user thread has its own x87 context (kernel threads use none):
    // the one leaving is saved, the one coming loaded, so no thread (of
    // this process or another) sees another's registers.
    let slots = x87_slots();
    let (leaving, coming) = if prev < next {
        let (a, b) = slots.split_at_mut(next);
        (&mut a[prev], &b[0])
    } else {
        let (a, b) = slots.split_at_mut(prev);
        (&mut b[0], &a[next])
    };
    crate::arch::cpu::switch_x87(
        s.threads[prev].user.then_some(leaving),
        s.threads[next].user.then_some(coming),
    );
    let save = &raw mut s.threads[prev].esp;
    let to = s.threads[next].esp;
    // SAFETY: `to` is the saved ESP of a thread that is not running (or a
    // prepared start frame); `save` outlives the switch (a static).
    unsafe { switch_stacks(save, to) };
}

/// `yield()`: let another ready thread of the same or a more urgent priority run.
pub fn yield_now() {
    let s = sched();
    let me = current_index();
    s.threads[me].state = State::Ready;
    s.threads[me].seq = next_seq();
    schedule();
}

/// Blocks the current thread in `state` (set up by the caller) and runs
/// someone else until it is made ready.
pub fn block(state: State) {
    let s = sched();
    let me = current_index();
    s.threads[me].state = state;
    s.threads[me].seq = next_seq();
    schedule();
}

/// Blocks the current thread for `ticks` timer ticks (no sleepqueue: the
/// tick wakes it). Called with the lock held.
pub fn nap(ticks: u64) {
    let s = sched();
    let me = current_index();
    s.threads[me].deadline = s.ticks + ticks.max(1);
    s.threads[me].blocked_on = None;
    pit::start_ticks();
    block(State::Sleeping);
}

/// Ends the current thread. The task ends with its last user thread.
pub fn exit_current() -> ! {
    let s = sched();
    let me = current_index();
    let t = s.threads[me];
    if t.user {
        let p = t.proc as usize;
        let last = !s
            .threads
            .iter()
            .enumerate()
            .any(|(i, o)| i != me && o.user && o.proc == t.proc && o.state != State::Free);
        if last && crate::proc::is_init(p) {
            // pid 1's last thread: the task is over.
            crate::task::end_current(crate::task::End::Exit(0));
        }
        stop_current_of_process();
    }
    release(me);
    schedule();
    unreachable!("a dead thread was scheduled");
}

fn release(i: usize) {
    SLOT_PID[i].store(0, Ordering::Relaxed);
    let t = &mut sched().threads[i];
    if let Some(ts) = t.turnstile.take() {
        turnstile::free(ts);
    }
    if let Some(sq) = t.sleepqueue.take() {
        sleepqueue::free(sq);
    }
    *t = EMPTY;
}

/// Ends every thread but the boot thread and the idle threads, and resets
/// the pools (a task ended). First waits, the lock let go meanwhile, until
/// no CPU runs one of the task's threads: each stops its own (see
/// [`end_task`]).
pub fn reset_all() {
    let cpus = crate::arch::smp::cpus().started;
    loop {
        let s = sched();
        let busy = (0..cpus).any(|c| s.threads[CURRENT[c].load(Ordering::Relaxed)].user);
        if !busy {
            break;
        }
        unlock();
        core::hint::spin_loop();
        lock();
    }
    let s = sched();
    for i in 1..MAX_THREADS {
        if s.threads[i].state != State::Idle {
            s.threads[i] = EMPTY;
        }
    }
    s.ending = false;
    for q in s.quantum_left.iter_mut() {
        *q = QUANTUM;
    }
    turnstile::reset();
    sleepqueue::reset();
    pit::stop_ticks();
}

/// The boot thread waits here while a task runs; `end_task` wakes it.
pub fn wait_for_task() {
    block(State::WaitingForTask);
}

/// The first steps of a task's end, on whichever CPU: no CPU picks the
/// task's threads again, the boot thread is ready (on CPU 0), and every
/// other CPU running one of the task's threads gets a reschedule IPI, on
/// which it stops it ([`interrupt`]). Called with the lock held.
fn begin_end() {
    let s = sched();
    s.ending = true;
    if s.threads[0].state == State::WaitingForTask {
        make_ready(0);
    }
    let me = cpu();
    for c in 0..crate::arch::smp::cpus().started {
        if c != me && s.threads[CURRENT[c].load(Ordering::Relaxed)].user {
            crate::arch::apic::send_ipi(
                crate::arch::smp::percpu(c).apic_id as u8,
                VECTOR_RESCHEDULE,
            );
        }
    }
}

/// Ends the running task from one of its threads, on any CPU: stops this
/// thread for good (its objects go back with `reset_all`) and runs the
/// next thread of this CPU (on CPU 0 the boot thread, which resumes in
/// `wait_for_task` holding the lock). Called with the lock held.
pub fn end_task() -> ! {
    begin_end();
    stop_current();
    unreachable!("a thread of an ended task was resumed");
}

/// Parks the running user thread of an ending task and schedules.
fn stop_current() {
    let s = sched();
    let me = current_index();
    if s.threads[me].state != State::Free {
        s.threads[me].state = State::Stopped;
    }
    schedule();
}

/// The timer tick (IRQ 0, on CPU 0), with the interrupted context's privilege.
pub fn tick(from_user: bool) {
    let _g = locked();
    let s = sched();
    s.ticks += 1;
    let now = s.ticks;
    for i in 0..MAX_THREADS {
        let t = &mut s.threads[i];
        if t.state == State::Sleeping && t.deadline != 0 && t.deadline <= now {
            t.timed_out = true;
            sleepqueue::remove_waiter(i);
            make_ready(i);
        }
    }
    preempt(from_user, true);
}

/// What interrupts an application processor does for the scheduler: its
/// local timer (`timer`) counts down the quantum; a reschedule IPI (on any
/// CPU) lets a more urgent ready thread in. Only ring 3 is preempted.
pub fn interrupt(from_user: bool, timer: bool) {
    // Ring 0 (an idle HLT, a benchmark's wait) needs nothing: the
    // interrupt has woken it. No lock then, whatever it was doing.
    if !from_user {
        return;
    }
    let _g = locked();
    preempt(from_user, timer);
}

/// Preemption of ring 3 on this CPU: a thread of an ending task stops; a
/// more urgent ready thread, or an equal one when the quantum is over
/// (`timer` ticks count it down), takes the CPU.
fn preempt(from_user: bool, timer: bool) {
    if !from_user {
        return;
    }
    let s = sched();
    let c = cpu();
    let me = current_index();
    if s.ending && s.threads[me].user {
        stop_current();
        return;
    }
    if s.threads[me].user && crate::proc::exiting(s.threads[me].proc as usize) {
        stop_current_of_process();
    }
    if timer {
        s.quantum_left[c] = s.quantum_left[c].saturating_sub(1);
    }
    let left = s.quantum_left[c];
    let contender = pick().filter(|&n| {
        let (np, mp) = (s.threads[n].prio, s.threads[me].prio);
        np < mp || (np == mp && left == 0)
    });
    if contender.is_some() {
        yield_now();
    }
}

pub fn user_threads() -> usize {
    sched()
        .threads
        .iter()
        .filter(|t| t.user && t.state != State::Free)
        .count()
}

/// Makes the running context of application processor `cpu` its idle
/// thread (from `ap_main`, before it looks for work).
pub fn become_idle(cpu: usize) -> Result<(), CreateError> {
    let _g = locked();
    let s = sched();
    let i = (1..MAX_THREADS)
        .find(|&i| s.threads[i].state == State::Free)
        .ok_or(CreateError::Exhausted)?;
    s.threads[i] = Thread {
        state: State::Idle,
        tid: s.next_tid,
        cpu: cpu as u8,
        ..EMPTY
    };
    s.next_tid += 1;
    s.idle[cpu] = i;
    set_current(cpu, i);
    Ok(())
}

/// One look for work by an idle thread: runs the most urgent ready thread
/// of this CPU, and returns when this CPU has nothing else to run.
pub fn idle_once() {
    lock();
    if let Some(next) = pick() {
        switch_to(next);
    }
    unlock();
}
