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

use core::arch::global_asm;

use abi::eflags;
use abi::layout::{selector, USER_BASE, USER_TOP};

use super::{addr, frame};
use crate::arch::msr::{rdmsr, wrmsr, EFER, EFER_SCE, STAR};
use crate::syscall::dispatch;
use crate::task;

global_asm!(
    r#"
    .pushsection .data
    .align 4
    .global syscall_esp_slot
    /* Holds the kernel stack top between entries, the user's ESP during one. */
syscall_esp_slot:
    .long kernel_stack_top
    /* The running thread's kernel stack top (the scheduler keeps it). */
    .global syscall_kstack_top
syscall_kstack_top:
    .long kernel_stack_top
    .popsection

    .pushsection .text.entry, "ax"
    .global syscall_floor, syscall_full, syscall_traced

    /* Floor: SYSRET straight back; ESP never left the user's stack. */
syscall_floor:
    sysret

syscall_full:
    /* One instruction swaps in the kernel stack and keeps the user's ESP.
       SS is the kernel's (from STAR); DS may be anything the user loaded. */
    xchgl %esp, %ss:syscall_esp_slot
    pushl ${udata}
    pushl %ss:syscall_esp_slot
    pushfl
syscall_common:
    pushl ${kernel_eflags}
    popfl
    pushl ${ucode}
    pushl %ecx
    /* Re-arm the slot for the next entry (ECX is saved now). */
    movl %ss:syscall_kstack_top, %ecx
    movl %ecx, %ss:syscall_esp_slot
    pushl %ds
    pushl %es
    /* Argument 2 from the user's stack, which must lie in user space. */
    movl {user_esp}(%esp), %ecx
    cmpl ${user_base}, %ecx
    jb syscall_bad_stack
    cmpl ${user_top_minus4}, %ecx
    ja syscall_bad_stack
1:  movl %ss:(%ecx), %ecx
    pushal
    movl ${kdata}, %ecx
    movl %ecx, %ds
    movl %ecx, %es
    movl %esp, %ecx
    call {dispatch}
    testl ${dirty}, {eflags}(%esp)
    jnz syscall_iret
    popal
    popl %es
    popl %ds
    /* ECX = return EIP; ESP = the user's. IF=0 until SYSRET sets it. */
    movl {iret_eip}(%esp), %ecx
    movl {iret_esp}(%esp), %esp
    sysret

syscall_iret:
    orl ${eflags_if}, {eflags}(%esp)
    popal
    popl %es
    popl %ds
    iret

syscall_traced:
    xchgl %esp, %ss:syscall_esp_slot
    pushl ${udata}
    pushl %ss:syscall_esp_slot
    pushfl
    orl ${tf}, (%esp)
    jmp syscall_common

syscall_bad_stack:
    movl ${kdata}, %ecx
    movl %ecx, %ds
    movl %ecx, %es
    cld
    call {bad_stack}

    .pushsection .extable, "a"
    .long 1b, syscall_bad_stack
    .popsection
    .popsection
    "#,
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
    dispatch = sym dispatch,
    bad_stack = sym bad_stack,
    options(att_syntax)
);

extern "C" fn bad_stack() -> ! {
    task::end_current(task::End::BadStack {
        mechanism: "syscall",
    })
}

/// SYSRET's CS base: user code is STAR[63:48] | 3, user data that + 8.
const SYSRET_CS_BASE: u64 = (selector::USER_CODE & !3) as u64;

/// Enables SYSCALL (EFER.SCE) and points STAR at the full entry.
pub fn init() {
    // SAFETY: only on AMD CPUs whose CPUID has the SYSCALL bit, where EFER exists.
    unsafe { wrmsr(EFER, rdmsr(EFER) | EFER_SCE) };
    select(false);
}

pub fn select(floor: bool) {
    let target = if floor {
        addr!(syscall_floor)
    } else {
        addr!(syscall_full)
    };
    let star = (SYSRET_CS_BASE << 48) | ((selector::KERNEL_CODE as u64) << 32) | target as u64;
    // SAFETY: STAR exists (init ran on this CPU); CS values are ours.
    unsafe { wrmsr(STAR, star) };
}

/// The stack the next SYSCALL switches to (per thread).
pub fn set_kernel_stack(top: u32) {
    unsafe extern "C" {
        static mut syscall_esp_slot: u32;
        static mut syscall_kstack_top: u32;
    }
    // SAFETY: not inside a SYSCALL entry (the kernel is switching threads),
    // so the slot holds a kernel stack top, which is replaced.
    unsafe {
        syscall_esp_slot = top;
        syscall_kstack_top = top;
    }
}

/// (full entry, traced variant).
pub fn traced() -> (u32, u32) {
    (addr!(syscall_full), addr!(syscall_traced))
}
