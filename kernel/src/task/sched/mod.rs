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
//!
//! One concern per file. Below the rest: `table` (the threads, their
//! stacks, which runs where), `lock` (the scheduler lock) and `frames`
//! (what a switch pops). This file: picking the next thread and switching
//! to it, blocking and making ready, and new threads. `end`: threads,
//! processes and tasks ending. Above the rest, called only from the trap
//! module and `ap_main`: `tick` (ticks and preemption) and `idle`.
//!
//! This file and `end` call each other (a deadlock ends the task from
//! `schedule`; an ending task schedules) and both call `proc` and the
//! turnstiles and sleepqueues, which call them back: with `proc` and
//! `task` they are the kernel's largest import circle (`cargo xtask
//! layers`). Everything else here stays out of it.

mod end;
mod frames;
pub mod idle;
mod lock;
mod table;
pub mod tick;

pub use end::{
    end_task, exit_current, reset_all, stop_current_of_process, stop_process, wait_for_task,
};
pub use lock::{held_here, lock, locked, unlock, Guard};
pub use table::{
    cpu, current_index, current_proc, current_tid, index_of, init, least_loaded, pid_by_stack,
    prio_of, stack_guards, thread, ticks, user_threads, CreateError, State, Thread, Tid, NO_PROC,
};

use abi::eflags;
use abi::layout::{selector, VECTOR_RESCHEDULE};
use abi::syscall::{MAX_THREADS, PRIO_MAX};

use crate::arch::cpu::X87State;
use crate::arch::regs::{EntryFrame, IretFrame};
use crate::arch::{gdt, pit};
use crate::entry;
use crate::task::{sleepqueue, turnstile};
use core::sync::atomic::Ordering;
use end::begin_end;
use frames::{push_frame, user_fs_gs, ForkStart, KernelStart, SwitchFrame, UserStart};
use table::{
    next_seq, sched, set_current, x87_slots, Sched, CURRENT, CURRENT_PROC, EMPTY, KSTACK_SIZE,
    QUANTUM, SLOT_PID, STACKS,
};

extern "C" fn start_unlock() {
    unlock();
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

/// Gives slot `i` to a thread of process `proc`.
fn set_slot_proc(i: usize, proc: usize) {
    let t = &mut sched().threads[i];
    t.proc = proc as u8;
    SLOT_PID[i].store(crate::proc::get(proc).pid, Ordering::Relaxed);
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
