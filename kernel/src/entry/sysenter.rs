//! `sysenter`/`sysexit` (Intel SDM Vol. 2B, SYSENTER and SYSEXIT; Vol. 3A §5.8.7).
//!
//! SYSENTER saves nothing: it loads CS from IA32_SYSENTER_CS (SS = CS+8),
//! ESP from IA32_SYSENTER_ESP, EIP from IA32_SYSENTER_EIP, and clears IF
//! (and VM, RF). It does not clear TF. SYSEXIT loads CS = SYSENTER_CS+16 and
//! SS = SYSENTER_CS+24 with RPL 3, ESP from ECX and EIP from EDX, and leaves
//! EFLAGS as the kernel has it.
//!
//! So the user stub (userland `sys::sysenter`) has to tell the kernel where
//! to come back to and where its stack is, and it must give up ECX and EDX.
//! The convention (`abi::Mechanism::Sysenter`):
//!
//! ```text
//! user stack at sysenter:   EBP-4: return EIP       <- ESP
//!                           EBP+0: arg 6 (EBP)
//!                           EBP+4: arg 3 (EDX)      (restored by the stub)
//!                           EBP+8: arg 2 (ECX)      (restored by the stub)
//! ```
//!
//! ECX and EDX still hold arguments 2 and 3 on entry; only EBP has to be
//! fetched. The return goes to `[EBP-4]` with ESP = EBP.
//!
//! IA32_SYSENTER_ESP points 8 bytes below the top of the kernel stack, so
//! that the first push lands on the EFLAGS slot of an IRET frame (EIP, CS,
//! EFLAGS, ESP, SS): the slow return path is then a plain IRET.

use abi::eflags;
use abi::layout::{selector, USER_BASE, USER_TOP};

use super::{addr, frame};
use crate::arch::msr::{rdmsr, wrmsr, IA32_SYSENTER_CS, IA32_SYSENTER_EIP, IA32_SYSENTER_ESP};
use crate::arch::regs::frame_asm;

// The exercises (docs/exercises.md) each remove one piece of hygiene; the
// stub stays one string, and its `.if` blocks read these two (1: keep).

/// Known EFLAGS on entry (DF, AC, NT, TF clear).
const RESET_FLAGS: u32 = !cfg!(feature = "exercise-sysenter-no-flags-reset") as u32;
/// docs/measuring.md's A/B: the change a kernel developer benchmarks and
/// posts, an LFENCE after PUSHFL (0: not there). LFENCE is SSE2's: a CPU
/// without SSE2 raises #UD on it, so only a build with the feature has it.
const LFENCE_AFTER_PUSHFL: u32 = cfg!(feature = "example-lfence-after-pushfl") as u32;
/// The check that sends a dirty frame back through IRET.
const IRET_IF_DIRTY: u32 = !cfg!(feature = "exercise-sysexit-always") as u32;

frame_asm!(
    r#"
    .pushsection .text.entry, "ax"
    .global sysenter_floor, sysenter_full, sysenter_traced

    /* Floor: straight back. The stub put its ESP in ECX and the return EIP
       in EDX; STI so the user runs with interrupts on again (its shadow
       covers SYSEXIT). */
sysenter_floor:
    sti
    sysexit

sysenter_full:
    /* ESP = IA32_SYSENTER_ESP = kernel stack top - 8. The user's EFLAGS
       go to the IRET frame's EFLAGS slot (IF reads 0: SYSENTER cleared it). */
    pushfl
    .if {lfence_after_pushfl}
    lfence
    .endif
sysenter_common:
    /* Known EFLAGS: DF, AC, NT, TF clear. */
    .if {reset_flags}
    pushl ${kernel_eflags}
    popfl
    .endif
    /* IRET frame's ESP slot: the user's stack pointer, which the stub put in EBP. */
    movl %ebp, {esp_above_eflags}(%esp)
    /* EBP must leave [EBP-4, EBP+4) inside user space, or a hostile user
       could make the kernel read its own memory. */
    cmpl ${user_base_plus4}, %ebp
    jb sysenter_bad_stack
    cmpl ${user_top_minus4}, %ebp
    ja sysenter_bad_stack
    pushl ${ucode}
    /* IRET frame's EIP slot: the stub's return address. EBP-relative
       addressing uses SS (the kernel's), never the user's DS. An unmapped
       page faults here and the exception table sends us to the bad-stack exit. */
1:  pushl -4(%ebp)
    /* The user's DS and ES (the IRET frame is complete below them). */
    frame_push_segments
    /* Argument 6. */
2:  movl (%ebp), %ebp
    /* The user's general registers, EBP now argument 6 (the Regs block),
       then the kernel's data segments. */
    frame_push_regs
    movl %esp, %ecx
    call syscall_dispatch
    /* SYSEXIT keeps the kernel's EFLAGS: only a user whose flags need no
       more than IF may take it. Otherwise return through IRET. */
    .if {iret_if_dirty}
    testl ${dirty}, {eflags}(%esp)
    jnz sysenter_iret
    .endif
    frame_restore
    /* EDX = return EIP, ECX = return ESP (the IRET frame's slots). */
    movl {iret_eip}(%esp), %edx
    movl {iret_esp}(%esp), %ecx
    sti
    sysexit

sysenter_iret:
    /* Complete the IRET frame: user SS, and IF on in the flags to restore. */
    movl ${udata}, {ss}(%esp)
    orl ${eflags_if}, {eflags}(%esp)
    frame_restore
    iret

    /* Entered from the #DB handler when the user came in with TF set: the
       trap arrived before sysenter_full's first instruction. Keep TF in the
       saved flags (so the user single-steps on after the IRET return). */
sysenter_traced:
    pushfl
    orl ${tf}, (%esp)
    jmp sysenter_common

sysenter_bad_stack:
    movl ${kdata}, %ecx
    movl %ecx, %ds
    movl %ecx, %es
    cld
    call trap_sysenter_bad_stack

    .pushsection .extable, "a"
    .long 1b, sysenter_bad_stack
    .long 2b, sysenter_bad_stack
    .popsection
    .popsection
    "#,
    user_base_plus4 = const USER_BASE + 4,
    user_top_minus4 = const USER_TOP - 4,
    ucode = const selector::USER_CODE,
    udata = const selector::USER_DATA,
    kdata = const selector::KERNEL_DATA,
    reset_flags = const RESET_FLAGS,
    lfence_after_pushfl = const LFENCE_AFTER_PUSHFL,
    iret_if_dirty = const IRET_IF_DIRTY,
    kernel_eflags = const eflags::KERNEL_ENTRY,
    dirty = const eflags::NOT_RESTORED_BY_FAST_RETURN,
    eflags_if = const eflags::IF,
    tf = const eflags::TF,
    esp_above_eflags = const frame::IRET_ESP_ABOVE_EFLAGS,
    eflags = const frame::EFLAGS,
    ss = const frame::SS,
    iret_eip = const frame::IRET_EIP,
    iret_esp = const frame::IRET_ESP,
    options(att_syntax)
);

/// Room left above IA32_SYSENTER_ESP for the IRET frame's ESP and SS slots.
const IRET_SLOTS_ABOVE: u32 = 8;

/// Programs the three MSRs (only where CPUID says SEP works).
pub fn init(kernel_stack_top: u32) {
    // SAFETY: the caller checked SEP; the values name the kernel code
    // selector whose GDT neighbours are kernel data, user code, user data,
    // and a stack reserved for ring-3 entries.
    unsafe {
        wrmsr(IA32_SYSENTER_CS, selector::KERNEL_CODE as u64);
        wrmsr(
            IA32_SYSENTER_ESP,
            (kernel_stack_top - IRET_SLOTS_ABOVE) as u64,
        );
    }
    select(false);
}

/// The stack the next SYSENTER switches to (per thread).
pub fn set_kernel_stack(top: u32) {
    // SAFETY: SEP is present (init ran).
    unsafe { wrmsr(IA32_SYSENTER_ESP, (top - IRET_SLOTS_ABOVE) as u64) };
}

pub fn select(floor: bool) {
    let target = if floor {
        addr!(sysenter_floor)
    } else {
        addr!(sysenter_full)
    };
    // SAFETY: SEP is present (init ran); the target is an entry stub.
    unsafe { wrmsr(IA32_SYSENTER_EIP, target as u64) };
}

/// Whether IA32_SYSENTER_EIP points at the floor (anything else than the
/// full entry counts as not full).
pub fn at_floor() -> bool {
    // SAFETY: SEP is present (the caller checked the mechanism is usable).
    unsafe { rdmsr(IA32_SYSENTER_EIP) != addr!(sysenter_full) as u64 }
}

/// (full entry, traced variant).
pub fn traced() -> (u32, u32) {
    (addr!(sysenter_full), addr!(sysenter_traced))
}
