//! Trap dispatch: what an exception, a debug trap, a timer tick or an
//! inter-processor interrupt means for the kernel. The CPU's side (the
//! stubs, the descriptor tables, the frames, the exception table, the
//! register dump) is `arch`'s; the decisions are here, above the scheduler
//! and the tasks they act on, the way xv6 keeps `trap.c` apart from its
//! vectors and tables and FreeBSD keeps `trap()` and `hardclock()` apart
//! from the IDT.
//!
//! arch's stubs call these functions by their link names (the upcalls
//! `arch/mod.rs` lists, each checked here against the type arch declares
//! for it): a direct `call`, the instructions the stubs executed when the
//! handlers lived beside them, so no path length changed. A fast entry
//! that finds no user stack comes here the same way from `entry`.
//!
//! - An exception from ring 3 ends the user task with a report (vector,
//!   EIP, error code, CR2) and the kernel goes on ([`user_fault`]). One
//!   exception: an RDPMC that faults after the boot offered the counters
//!   turns them off and the program goes on (`pmu::user_fault`).
//! - A #NM from ring 3 with CR0.TS set (a hardware task switch, the debug
//!   task's, set it; the user's x87 context is live all the same) clears
//!   TS and runs the instruction again (`cpu::device_not_available_from_user`).
//! - A page fault goes through [`page_fault`], the one place that decides
//!   what a fault on a page means.
//! - An exception in ring 0 at a listed instruction resumes at its fixup
//!   (`exceptions::fix_up`); anything else in ring 0 is a kernel bug:
//!   report and exit with `EXCEPTION_BASE + vector`.
//! - A #DB: at an entry's first instruction (the user had TF set; SYSENTER,
//!   a call gate and SYSCALL do not clear it) it resumes at the entry's
//!   "traced" variant, which keeps the user's TF; in ring 3 it ends the
//!   task; anywhere else it is a kernel bug.
//! - A #DF reports the context it interrupted, says whether CR2 lies in a
//!   stack's guard page (a kernel stack overflow), and stops.
//! - The PIT's IRQ 0 is the scheduler's tick on CPU 0; an application
//!   processor's local APIC timer and the reschedule IPI let its scheduler
//!   look again. Each, when it interrupted ring 3, then delivers a caught
//!   signal pending for the running process (`proc::signal`: one load and
//!   a branch when none is pending anywhere).

use abi::eflags;
use abi::exit::{vector_name, EXCEPTION_BASE};

use crate::arch::exceptions::{self, TrapFrame};
use crate::arch::idt::vector;
use crate::arch::{apic, cpu, gdt, pit, pmu, power, upcall};
use crate::proc::signal;
use crate::syscall::usercopy::USER_MEM;
use crate::task::{self, sched};
use crate::{entry, kprintln};

// Each upcall has the type arch's stub expects.
const _: upcall::Exception = trap_exception;
const _: upcall::HandlerTask = trap_debug;
const _: upcall::Stop = trap_double_fault;
const _: upcall::Stop = trap_debug_kill;
const _: upcall::Interrupt = trap_timer;
const _: upcall::Interrupt = trap_reschedule;
const _: upcall::Interrupt = trap_apic_timer;
const _: upcall::Interrupt = trap_pacer_tick;
const _: entry::upcall::BadStack = trap_sysenter_bad_stack;
const _: entry::upcall::BadStack = trap_syscall_bad_stack;

/// One of the 32 exceptions, from `exc_common` with the saved frame.
#[unsafe(no_mangle)]
extern "fastcall" fn trap_exception(f: &mut TrapFrame) {
    let v = f.vector as u8;
    if v == vector::PAGE_FAULT {
        let (addr, err) = (cpu::cr2(), f.error);
        return page_fault(f, addr, err);
    }
    if f.from_user() {
        if v == vector::DEVICE_NOT_AVAILABLE && cpu::device_not_available_from_user() {
            return;
        }
        if (v == vector::GENERAL_PROTECTION || v == vector::INVALID_OPCODE) && pmu::user_fault(f) {
            return;
        }
        user_fault(f);
    }
    kernel_fault(f);
}

/// A page fault (#PF) at linear address `addr` (CR2) with error code `err`
/// (present, write, user bits: SDM Vol. 3A §4.7). The process's memory
/// decides first (`proc::fault`): a write to a copy-on-write page copies
/// it, a touch of a demand-zero page (`.bss`, heap, stack) maps one, and
/// the instruction runs again. Otherwise, from ring 3 it is the program's
/// error and ends its process; in ring 0 only a listed instruction may
/// fault (an entry stub's read of the user stack), and one that met a page
/// the process may have is resolved the same way before its fixup is
/// taken; anything else is a kernel bug.
pub fn page_fault(f: &mut TrapFrame, addr: u32, err: u32) {
    let write = err & PF_WRITE != 0;
    let mendable = f.from_user() || exceptions::listed(f.iret.eip);
    if mendable && crate::proc::fault(addr, write) == crate::vm::Fault::Resolved {
        return;
    }
    if f.from_user() {
        user_fault(f);
    }
    kernel_fault(f);
}

/// The #PF error code's bit for a write access (SDM Vol. 3A §4.7).
const PF_WRITE: u32 = 1 << 1;

/// An exception in ring 3 that nothing mends: the task ends, reported.
fn user_fault(f: &TrapFrame) -> ! {
    let (pid, tid) = crate::proc::who();
    kprintln!("task {} (pid {pid}, tid {tid}):", task::current().name);
    exceptions::report(f, "user");
    task::end_current(task::End::Fault {
        vector: f.vector as u8,
        eip: f.iret.eip,
    })
}

/// An exception in ring 0: a listed instruction resumes at its fixup;
/// anything else stops the kernel.
fn kernel_fault(f: &mut TrapFrame) {
    if exceptions::fix_up(f) {
        return;
    }
    let v = f.vector as u8;
    exceptions::report(f, "kernel");
    kprintln!("kernel: unexpected {} in ring 0, stopping", vector_name(v));
    power::exit(EXCEPTION_BASE + v as u32);
}

/// Runs as a CPU's double-fault task. The faulting context was saved in
/// that CPU's main TSS by the task switch; report it and stop.
#[unsafe(no_mangle)]
extern "C" fn trap_double_fault() -> ! {
    let me = gdt::cpu();
    // SAFETY: this is CPU `me`'s double-fault task.
    let t = unsafe { gdt::interrupted_by_double_fault(me) };
    let cr2 = cpu::cr2();
    kprintln!(
        "#DF double fault (vector 8) on CPU {me}, taken through the task gate on its own stack"
    );
    exceptions::report_tss(t, vector::DOUBLE_FAULT, "kernel");
    let stacks = crate::boot::entry::stacks();
    if stacks
        .guards()
        .chain(sched::stack_guards())
        .any(|g| g != 0 && (g..g + abi::layout::PAGE_SIZE).contains(&cr2))
    {
        kprintln!("  CR2 is in a stack guard page: kernel stack overflow");
    }
    power::exit(EXCEPTION_BASE + vector::DOUBLE_FAULT as u32);
}

/// Where a #DB taken in ring 0 at `eip` resumes, if it is a trap ring 3
/// caused (the caller clears TF); `None` for anything else, a kernel bug.
///
/// - At a system-call entry's first instruction: SYSENTER, a call gate and
///   SYSCALL keep TF, and an `int` that a MOV SS or POP SS held the trap
///   over delivers it there (`entry::traced_entry`: the full entries go on
///   through their "traced" variant, which gives the user back its TF).
/// - At an exception stub's first instruction: the same held-off trap
///   (MOV SS / POP SS, SDM Vol. 3A §6.8.3) when the next instruction raised
///   an exception instead: `int3` (#BP, a DPL-3 gate), `into` or `int n`
///   through a DPL-0 gate (#GP), any fault. The CPU then delivers the #DB
///   after the transition, on the stub's first instruction in ring 0.
///   The stub simply goes on: the exception it is entering ends the task.
///   #DB and #DF are task gates, not stubs, so they are not in the list.
fn held_trap_resume(eip: u32) -> Option<u32> {
    if let Some(traced) = entry::traced_entry(eip) {
        return Some(traced);
    }
    exceptions::stubs()
        .iter()
        .enumerate()
        .any(|(v, &stub)| {
            stub == eip && v as u8 != vector::DEBUG && v as u8 != vector::DOUBLE_FAULT
        })
        .then_some(eip)
}

/// For the kernel tests: every exception stub's first instruction and each
/// system-call entry's resume, with whether a #DB there resumes.
pub fn held_trap_check() -> Result<(), &'static str> {
    let stubs = exceptions::stubs();
    for (v, &stub) in stubs.iter().enumerate() {
        let task_gate = v as u8 == vector::DEBUG || v as u8 == vector::DOUBLE_FAULT;
        if held_trap_resume(stub).is_some() == task_gate {
            return Err(if task_gate {
                "a trap at a task gate's unused stub would be resumed"
            } else {
                "a trap held off onto an exception stub (int3, into, a #GP) would power off"
            });
        }
    }
    if held_trap_resume(stubs[vector::BREAKPOINT as usize] + 1).is_some() {
        return Err("a trap inside a stub (not at its first instruction) would be resumed");
    }
    Ok(())
}

/// Runs as a CPU's debug task. Decides what the #DB meant from the
/// interrupted context in that CPU's main TSS, and edits that context
/// before switching back.
#[unsafe(no_mangle)]
extern "C" fn trap_debug() {
    let me = gdt::cpu();
    // SAFETY: this is CPU `me`'s debug task; the interrupted task (this
    // CPU's main task) is suspended while it runs.
    let t = unsafe { gdt::interrupted_by_debug_mut(me) };
    let single_step = cpu::take_dr6() & cpu::DR6_SINGLE_STEP != 0;
    if t.cs & 3 == 3 {
        // A single step in ring 3: the task ends, like any user fault. Leave
        // through `debug_kill`, in ring 0 on the thread's kernel stack.
        let (pid, tid) = crate::proc::who();
        kprintln!("task {} (pid {pid}, tid {tid}):", task::current().name);
        if single_step {
            kprintln!(
                "#DB debug (vector 1) in user mode: a single-step trap; the next instruction would be"
            );
        } else {
            // ICEBP (INT1) is the one #DB ring 3 can raise without TF (no
            // debug register is ever armed).
            kprintln!(
                "#DB debug (vector 1) in user mode: not a single step (ICEBP); the next instruction would be"
            );
        }
        exceptions::report_tss(t, vector::DEBUG, "user");
        exceptions::send_to_kill(me, t);
        return;
    }
    if let Some(resume) = held_trap_resume(t.eip) {
        // The trap came at an entry's or an exception stub's first
        // instruction: the user had TF set. Stop stepping the kernel and go
        // on (see `held_trap_resume`).
        t.eflags &= !eflags::TF;
        t.eip = resume;
        return;
    }
    kprintln!(
        "#DB debug (vector 1) in kernel mode at EIP {:#010x}, EFLAGS {:#010x}: not an entry stub",
        t.eip,
        t.eflags
    );
    power::exit(EXCEPTION_BASE + vector::DEBUG as u32);
}

/// A user thread that single-stepped: end its task (in the main task, ring 0).
#[unsafe(no_mangle)]
extern "C" fn trap_debug_kill() -> ! {
    task::end_current(task::End::Fault {
        vector: vector::DEBUG,
        eip: exceptions::killed_eip(),
    })
}

/// IRQ 0, the PIT (ECX = the interrupted CS): the scheduler's tick.
#[unsafe(no_mangle)]
extern "fastcall" fn trap_timer(cs: u32) {
    // Acknowledged at the master PIC before anything can switch.
    pit::ack();
    sched::tick::tick(cs & 3 == 3);
    if cs & 3 == 3 {
        signal::at_interrupt_return(&USER_MEM);
    }
}

/// Another CPU made a thread of ours ready, or ends the task (ECX = the
/// interrupted CS): the interrupt alone ends an idle HLT; from ring 3 the
/// scheduler looks again.
#[unsafe(no_mangle)]
extern "fastcall" fn trap_reschedule(cs: u32) {
    apic::eoi();
    sched::tick::interrupt(cs & 3 == 3, false);
    if cs & 3 == 3 {
        signal::at_interrupt_return(&USER_MEM);
    }
}

/// An application processor's local timer tick (ECX = the interrupted CS).
#[unsafe(no_mangle)]
extern "fastcall" fn trap_apic_timer(cs: u32) {
    apic::eoi();
    trap_pacer_tick(cs);
}

/// An application processor's scheduler tick when the turn pacer has its
/// local timer (`arch::pacer`, which has sent the end of interrupt).
#[unsafe(no_mangle)]
extern "fastcall" fn trap_pacer_tick(cs: u32) {
    sched::tick::interrupt(cs & 3 == 3, true);
    if cs & 3 == 3 {
        signal::at_interrupt_return(&USER_MEM);
    }
}

/// SYSENTER found no valid user stack to read the return address from
/// (its read faulted and the exception table sent it here): the task ends.
#[unsafe(no_mangle)]
extern "C" fn trap_sysenter_bad_stack() -> ! {
    task::end_current(task::End::BadStack {
        mechanism: "sysenter",
    })
}

/// The same for SYSCALL.
#[unsafe(no_mangle)]
extern "C" fn trap_syscall_bad_stack() -> ! {
    task::end_current(task::End::BadStack {
        mechanism: "syscall",
    })
}
