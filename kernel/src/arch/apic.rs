//! The local APIC (Intel SDM Vol. 3A ch. 10): its ID, end of interrupt, and
//! the interrupt command register that sends INIT, SIPI and fixed IPIs.
//! Memory-mapped at `LAPIC_BASE`, which the kernel maps uncached.

use core::ptr::{read_volatile, write_volatile};

pub const LAPIC_BASE: u32 = 0xFEE0_0000;
const ID: u32 = 0x20;
const EOI: u32 = 0xB0;
/// Spurious-interrupt vector register; bit 8 enables the APIC.
const SVR: u32 = 0xF0;
const SVR_ENABLE: u32 = 1 << 8;
const ICR_LOW: u32 = 0x300;
const ICR_HIGH: u32 = 0x310;
/// ICR: delivery status (1 while the IPI is being sent).
const ICR_PENDING: u32 = 1 << 12;
/// ICR delivery modes (bits 10:8) and level assert.
const ICR_INIT: u32 = 0b101 << 8;
const ICR_STARTUP: u32 = 0b110 << 8;
const ICR_ASSERT: u32 = 1 << 14;
/// The vector of spurious interrupts (low nibble all ones, as required on P6).
pub const SPURIOUS_VECTOR: u32 = 0xFF;

fn read(reg: u32) -> u32 {
    // SAFETY: the LAPIC page is mapped uncached (smp::init) before any call.
    unsafe { read_volatile((LAPIC_BASE + reg) as *const u32) }
}

fn write(reg: u32, v: u32) {
    // SAFETY: as in read.
    unsafe { write_volatile((LAPIC_BASE + reg) as *mut u32, v) }
}

/// This CPU's APIC ID.
pub fn id() -> u8 {
    (read(ID) >> 24) as u8
}

/// Software-enables this CPU's APIC.
pub fn enable() {
    write(SVR, SVR_ENABLE | SPURIOUS_VECTOR);
}

pub fn eoi() {
    write(EOI, 0);
}

fn send(apic_id: u8, low: u32) {
    write(ICR_HIGH, (apic_id as u32) << 24);
    write(ICR_LOW, low);
    while read(ICR_LOW) & ICR_PENDING != 0 {
        core::hint::spin_loop();
    }
}

/// INIT: puts the target in wait-for-SIPI (SDM Vol. 3A §8.4.4.1).
pub fn send_init(apic_id: u8) {
    send(apic_id, ICR_INIT | ICR_ASSERT);
}

/// STARTUP: the target starts in real mode at `page << 12`.
pub fn send_startup(apic_id: u8, page: u8) {
    send(apic_id, ICR_STARTUP | ICR_ASSERT | page as u32);
}

/// A fixed interrupt with `vector` to one CPU.
pub fn send_ipi(apic_id: u8, vector: u8) {
    send(apic_id, ICR_ASSERT | vector as u32);
}
