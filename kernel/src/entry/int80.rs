//! `int $0x80`: the classic entry, through a DPL-3 interrupt gate.
//!
//! What the CPU has done when `int80_full` runs (SDM Vol. 3A §6.12.1): it
//! checked the gate's DPL (3) against CPL, loaded SS:ESP from TSS.SS0:ESP0,
//! pushed the user's SS, ESP, EFLAGS, CS, EIP, and cleared TF, NT, RF and
//! (interrupt gate) IF. DF and AC are still the user's. DS and ES too.

use abi::eflags;
use abi::layout::{VECTOR_SYSCALL, VECTOR_SYSCALL_FLOOR};

use crate::arch::idt::{self, Gate, GateKind};
use crate::arch::regs::frame_asm;

frame_asm!(
    r#"
    .pushsection .text.entry, "ax"
    .global int80_floor, int80_full

    /* Floor: the hardware's round trip and nothing else. */
int80_floor:
    iret

int80_full:
    /* Above the CPU's IRET frame: the user's DS and ES, then its general
       registers (the Regs block the dispatcher reads); then the kernel's
       data segments, before any memory access through DS or ES. */
    frame_save
    /* Known EFLAGS: DF, AC, NT, TF clear (IF is already clear). */
    pushl ${kernel_eflags}
    popfl
    /* dispatch(&mut Regs), fastcall: the pointer travels in ECX. */
    movl %esp, %ecx
    call syscall_dispatch
    /* Back out: EAX now holds the result; IRET restores the user's EFLAGS
       (IF included) and SS:ESP, CS:EIP. */
    frame_restore
    iret
    .popsection
    "#,
    kernel_eflags = const eflags::KERNEL_ENTRY,
    options(att_syntax)
);

pub fn init() {
    let full = super::addr!(int80_full);
    let floor = super::addr!(int80_floor);
    // DPL 3 so `int` from ring 3 may use them; interrupt gates so IF is
    // clear in the kernel.
    idt::set(VECTOR_SYSCALL, Gate::new(full, GateKind::Interrupt, 3));
    idt::set(
        VECTOR_SYSCALL_FLOOR,
        Gate::new(floor, GateKind::Interrupt, 3),
    );
}
