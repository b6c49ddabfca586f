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

/// LVT timer register, initial count, current count, divide configuration.
const LVT_TIMER: u32 = 0x320;
const TIMER_INITIAL: u32 = 0x380;
const TIMER_CURRENT: u32 = 0x390;
const TIMER_DIVIDE: u32 = 0x3E0;
/// LVT timer mode bit 17: periodic.
const TIMER_PERIODIC: u32 = 1 << 17;
/// Divide configuration 0b0011: the bus clock divided by 16.
const DIVIDE_BY_16: u32 = 0b0011;
/// The local timer's vector.
pub const VECTOR_TIMER: u8 = 0xF3;

/// Starts this CPU's local timer at `hz`, calibrated against the TSC
/// (`tsc_hz` ticks a second): one millisecond of counting down tells its rate.
pub fn start_timer(hz: u32, tsc_hz: u64) {
    write(TIMER_DIVIDE, DIVIDE_BY_16);
    write(LVT_TIMER, 1 << 16); // masked while calibrating
    write(TIMER_INITIAL, u32::MAX);
    let t0 = super::cpu::rdtsc();
    while super::cpu::rdtsc().wrapping_sub(t0) < tsc_hz / 1000 {
        core::hint::spin_loop();
    }
    let per_ms = u32::MAX - read(TIMER_CURRENT);
    let count = (per_ms as u64 * 1000 / hz as u64).max(1) as u32;
    write(LVT_TIMER, TIMER_PERIODIC | VECTOR_TIMER as u32);
    write(TIMER_INITIAL, count);
}

/// Divide configuration 0b1011: the bus clock itself (QEMU's APIC counts
/// virtual nanoseconds, one per instruction under icount).
const DIVIDE_BY_1: u32 = 0b1011;

/// Makes this CPU's local timer one-shot with `vector` (the turn pacer's),
/// stopped until [`one_shot`] loads a count.
pub fn set_timer_vector(vector: u8) {
    write(TIMER_DIVIDE, DIVIDE_BY_1);
    write(LVT_TIMER, vector as u32);
}

/// Starts this CPU's one-shot timer: it fires `count + 1` bus clocks later.
pub fn one_shot(count: u32) {
    write(TIMER_INITIAL, count);
}
