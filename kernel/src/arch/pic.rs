//! The 8259A pair: remapped off the exception vectors and masked.
//!
//! The testbed takes no interrupts yet (timed regions must not be disturbed),
//! but a loader may leave the PICs on their BIOS vectors 8..15, which collide
//! with the CPU's exceptions, so they are moved to 0x20..0x2f and masked.

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
