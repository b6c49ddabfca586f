//! AMD `syscall`/`sysret` in legacy (32-bit protected) mode (AMD APM Vol. 2
//! §6.1.1; Vol. 3, SYSCALL and SYSRET).
//!
//! SYSCALL copies EIP into ECX, loads CS from STAR[47:32] (SS = CS+8) and EIP
//! from STAR[31:0], and clears IF, VM and RF. It does not touch ESP: the
//! kernel starts on the *user's* stack. SYSRET loads CS from STAR[63:48]
//! (RPL 3; SS = that+8), EIP from ECX, and sets IF; ESP is whatever the
//! kernel leaves there.
//!
//! ECX is consumed, so the stub pushes argument 2 and the kernel reads it at
//! the user's `[ESP]` (`abi::Mechanism::Syscall`).
//!
//! Only AMD CPUs run SYSCALL in 32-bit mode; Intel CPUs raise #UD outside
//! 64-bit mode. The kernel enables it by vendor and CPUID bit, never because
//! "it runs under QEMU" (TCG executes it on Intel models too).
//!
//! The hazard this path has: a user with TF set traps at the first
//! instruction of `syscall_full`, while ESP is still the user's. Through an
//! interrupt gate the #DB frame would be pushed there, in ring 0, wherever
//! the user pointed ESP. So #DB is delivered through a task gate
//! (arch::exceptions), which switches stacks in hardware and pushes nothing.

use abi::eflags;
use abi::layout::{selector, MAX_CPUS, USER_BASE, USER_TOP};

use super::{addr, frame};
use crate::arch::msr::{rdmsr, wrmsr, EFER, EFER_SCE, STAR};
use crate::arch::regs::frame_asm;

// Every CPU has its own copy of the full entry (and its traced variant),
// each naming that CPU's two slots; each CPU's STAR points at its copy.
// So the stub reaches its per-CPU data with the same instructions as with
// one global slot: SYSCALL leaves only SS usable (DS and GS are the
// user's), and SS is flat (STAR fixes its descriptor).
const _: () = assert!(MAX_CPUS == 8, "the .irp lists below name CPUs 0..8");

frame_asm!(
    r#"
    .pushsection .data
    .align 4
    .global syscall_slots
    /* Per CPU, two words: the ESP slot (the kernel stack top between
       entries, the user's ESP during one) and the running thread's kernel
       stack top (the scheduler keeps it). CPU 0 starts on the boot stack. */
syscall_slots:
    .long kernel_stack_top, kernel_stack_top
    .fill {ap_words}, 4, 0
    .popsection

    .pushsection .rodata.syscall_entries, "a"
    .align 4
    .global syscall_entries
    /* Per CPU: its full entry and its traced variant. */
syscall_entries:
    .irp cpu, 0,1,2,3,4,5,6,7
    .long syscall_full_\cpu, syscall_traced_\cpu
    .endr
    .popsection

    .pushsection .text.entry, "ax"
    .global syscall_floor

    /* Floor: SYSRET straight back; ESP never left the user's stack. */
syscall_floor:
    sysret

    .irp cpu, 0,1,2,3,4,5,6,7
syscall_full_\cpu:
    /* One instruction swaps in the kernel stack and keeps the user's ESP.
       SS is the kernel's (from STAR); DS may be anything the user loaded. */
    xchgl %esp, %ss:syscall_slots + {slot_bytes} * \cpu
    pushl ${udata}
    pushl %ss:syscall_slots + {slot_bytes} * \cpu
    pushfl
syscall_common_\cpu:
    pushl ${kernel_eflags}
    popfl
    pushl ${ucode}
    pushl %ecx
    /* Re-arm the slot for the next entry (ECX is saved now). */
    movl %ss:syscall_slots + {slot_bytes} * \cpu + 4, %ecx
    movl %ecx, %ss:syscall_slots + {slot_bytes} * \cpu
    /* The user's DS and ES (the IRET frame is complete below them). */
    frame_push_segments
    /* Argument 2 from the user's stack, which must lie in user space. */
    movl {user_esp}(%esp), %ecx
    cmpl ${user_base}, %ecx
    jb syscall_bad_stack
    cmpl ${user_top_minus4}, %ecx
    ja syscall_bad_stack
syscall_arg2_\cpu:
    movl %ss:(%ecx), %ecx
    /* The user's general registers, ECX now argument 2 (the Regs block),
       then the kernel's data segments. */
    frame_push_regs
    movl %esp, %ecx
    call syscall_dispatch
    testl ${dirty}, {eflags}(%esp)
    jnz syscall_iret
    frame_restore
    /* ECX = return EIP; ESP = the user's. IF=0 until SYSRET sets it. */
    movl {iret_eip}(%esp), %ecx
    movl {iret_esp}(%esp), %esp
    sysret

syscall_traced_\cpu:
    xchgl %esp, %ss:syscall_slots + {slot_bytes} * \cpu
    pushl ${udata}
    pushl %ss:syscall_slots + {slot_bytes} * \cpu
    pushfl
    orl ${tf}, (%esp)
    jmp syscall_common_\cpu

    .pushsection .extable, "a"
    .long syscall_arg2_\cpu, syscall_bad_stack
    .popsection
    .endr

    /* CPU 0's copy under the plain name (the trace, gdb's breakpoints). */
    .global syscall_full
    .set syscall_full, syscall_full_0

syscall_iret:
    orl ${eflags_if}, {eflags}(%esp)
    frame_restore
    iret

syscall_bad_stack:
    movl ${kdata}, %ecx
    movl %ecx, %ds
    movl %ecx, %es
    cld
    call trap_syscall_bad_stack
    .popsection
    "#,
    ap_words = const (MAX_CPUS - 1) * 2,
    slot_bytes = const core::mem::size_of::<[u32; 2]>(),
    user_base = const USER_BASE,
    user_top_minus4 = const USER_TOP - 4,
    ucode = const selector::USER_CODE,
    udata = const selector::USER_DATA,
    kdata = const selector::KERNEL_DATA,
    kernel_eflags = const eflags::KERNEL_ENTRY,
    dirty = const eflags::NOT_RESTORED_BY_FAST_RETURN,
    eflags_if = const eflags::IF,
    tf = const eflags::TF,
    user_esp = const frame::USER_ESP_ABOVE_SEGMENTS,
    eflags = const frame::EFLAGS,
    iret_eip = const frame::IRET_EIP,
    iret_esp = const frame::IRET_ESP,
    options(att_syntax)
);

unsafe extern "C" {
    /// Per CPU: (ESP slot, kernel stack top).
    static mut syscall_slots: [[u32; 2]; MAX_CPUS];
    /// Per CPU: (full entry, traced variant).
    static syscall_entries: [[u32; 2]; MAX_CPUS];
}

/// SYSRET's CS base: user code is STAR[63:48] | 3, user data that + 8.
const SYSRET_CS_BASE: u64 = (selector::USER_CODE & !3) as u64;

/// Enables SYSCALL (EFER.SCE) on this CPU and points its STAR at its full
/// entry (every CPU runs this: EFER and STAR are per CPU).
pub fn init() {
    // SAFETY: only on AMD CPUs whose CPUID has the SYSCALL bit, where EFER exists.
    unsafe { wrmsr(EFER, rdmsr(EFER) | EFER_SCE) };
    select(false);
}

/// This CPU's entries (full, traced).
fn entries() -> [u32; 2] {
    // SAFETY: a read-only table of addresses.
    unsafe { syscall_entries[crate::arch::gdt::cpu()] }
}

pub fn select(floor: bool) {
    let target = if floor {
        addr!(syscall_floor)
    } else {
        entries()[0]
    };
    let star = (SYSRET_CS_BASE << 48) | ((selector::KERNEL_CODE as u64) << 32) | target as u64;
    // SAFETY: STAR exists (init ran on this CPU); CS values are ours.
    unsafe { wrmsr(STAR, star) };
}

/// The stack this CPU's next SYSCALL switches to (per thread).
pub fn set_kernel_stack(top: u32) {
    let cpu = crate::arch::gdt::cpu();
    // SAFETY: this CPU's slots, and it is not inside a SYSCALL entry (the
    // kernel is switching threads), so the slot holds a kernel stack top,
    // which is replaced. Other CPUs touch only their own slots.
    unsafe {
        let slots = &raw mut syscall_slots;
        (*slots)[cpu] = [top, top];
    }
}

/// For a debug trap at `eip`: the traced variant when `eip` is some CPU's
/// full entry.
pub fn traced_for(eip: u32) -> Option<u32> {
    // SAFETY: a read-only table of addresses.
    let table = unsafe { &*(&raw const syscall_entries) };
    table.iter().find(|e| e[0] == eip).map(|e| e[1])
}

/// Whether STAR's target is anything else than the full entry.
pub fn at_floor() -> bool {
    // SAFETY: STAR exists (the caller checked the mechanism is usable).
    unsafe { rdmsr(STAR) as u32 != entries()[0] }
}
