//! The 8259A pair: remapped off the exception vectors and masked.
//!
//! The testbed takes no interrupts yet (timed regions must not be disturbed),
//! but a loader may leave the PICs on their BIOS vectors 8..15, which collide
//! with the CPU's exceptions, so they are moved to 0x20..0x2f and masked.

use core::arch::global_asm;

use super::port::outb;

const PIC1_CMD: u16 = 0x20;
const PIC1_DATA: u16 = 0x21;
const PIC2_CMD: u16 = 0xa0;
const PIC2_DATA: u16 = 0xa1;
/// ICW1: initialise, ICW4 follows.
const ICW1_INIT_ICW4: u8 = 0x11;
/// ICW4: 8086 mode.
const ICW4_8086: u8 = 0x01;
pub const PIC1_VECTOR: u8 = 0x20;
pub const PIC2_VECTOR: u8 = 0x28;

pub fn init_masked() {
    // SAFETY: the 8259 ports belong to this driver; the sequence is the
    // standard ICW1..ICW4 initialisation, then OCW1 masks every line.
    unsafe {
        outb(PIC1_CMD, ICW1_INIT_ICW4);
        outb(PIC2_CMD, ICW1_INIT_ICW4);
        outb(PIC1_DATA, PIC1_VECTOR);
        outb(PIC2_DATA, PIC2_VECTOR);
        outb(PIC1_DATA, 4); // slave on IRQ2
        outb(PIC2_DATA, 2); // slave identity
        outb(PIC1_DATA, ICW4_8086);
        outb(PIC2_DATA, ICW4_8086);
        outb(PIC1_DATA, 0xff);
        outb(PIC2_DATA, 0xff);
    }
}

/// The master's IRQ 7 vector, where the 8259A puts a spurious interrupt: a
/// request that went away between the PIC raising INTR and the CPU's
/// acknowledge (IRQ 0 masked while a tick was pending, as `stop_ticks`
/// does). Nothing is in service at the PIC then, so it takes no EOI.
pub const VECTOR_SPURIOUS: u8 = PIC1_VECTOR + 7;

global_asm!(
    r#"
    .pushsection .text.irq, "ax"
    .global pic_spurious
    /* A spurious IRQ 7 through an interrupt gate: no EOI (nothing is in
       service), nothing to do; resume whatever was interrupted. */
pic_spurious:
    iret
    .popsection
    "#,
    options(att_syntax)
);

unsafe extern "C" {
    static pic_spurious: u8;
}

/// The spurious IRQ 7 stub, for its IDT gate.
pub fn spurious_address() -> u32 {
    &raw const pic_spurious as u32
}
