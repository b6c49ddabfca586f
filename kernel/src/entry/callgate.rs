//! `lcall` through a call gate of DPL 3 (Intel SDM Vol. 3A §5.8.3–5.8.6).
//!
//! Through the gate the CPU switches to TSS.SS0:ESP0 and pushes the user's
//! SS, ESP, CS, EIP (no parameters: the gate's count is 0). It does not touch
//! EFLAGS: IF is still on, and TF, DF, AC, NT are the user's. The return is
//! LRET, which pops EIP, CS, ESP, SS.

use abi::eflags;

use super::addr;
use crate::arch::regs::frame_asm;

frame_asm!(
    r#"
    .pushsection .text.entry, "ax"
    .global callgate_floor, callgate_full, callgate_traced

callgate_floor:
    lret

callgate_full:
    /* The user's EFLAGS, whole: a call gate changes none of them. */
    pushfl
callgate_common:
    /* Known EFLAGS: DF, AC, NT, TF clear, and IF off in the kernel. */
    pushl ${kernel_eflags}
    popfl
    /* The user's DS and ES and general registers (the Regs block), then
       the kernel's data segments. */
    frame_save
    movl %esp, %ecx
    call syscall_dispatch
    frame_restore
    /* The user's flags back (IF on again; a TF takes effect after LRET, in ring 3). */
    popfl
    lret

    /* From the #DB handler: the user's TF trapped at callgate_full's first
       instruction. Record TF in the saved flags and go on. */
callgate_traced:
    pushfl
    orl ${tf}, (%esp)
    jmp callgate_common
    .popsection
    "#,
    kernel_eflags = const eflags::KERNEL_ENTRY,
    tf = const eflags::TF,
    options(att_syntax)
);

/// (full gate target, floor gate target), for the GDT.
pub fn targets() -> (u32, u32) {
    (addr!(callgate_full), addr!(callgate_floor))
}

/// (full entry, traced variant).
pub fn traced() -> (u32, u32) {
    (addr!(callgate_full), addr!(callgate_traced))
}
