//! TSC frequency, measured against the 8254 PIT (channel 2, gated through
//! port 0x61 as on every PC), so reports can turn ticks into seconds.
//! Under QEMU's `-icount shift=0` both run on virtual time, one guest
//! instruction per nanosecond, so the answer is 1 GHz "virtual".

use core::arch::asm;

use super::port::{inb, outb};

use spin::Once;

/// The PIT's input clock (Hz).
const PIT_HZ: u64 = 1_193_182;
const PIT_CH2_DATA: u16 = 0x42;
const PIT_COMMAND: u16 = 0x43;
/// Port B: bit 0 gates channel 2, bit 1 drives the speaker, bit 5 reads OUT2.
const PORT_B: u16 = 0x61;
/// Channel 2, lobyte/hibyte, mode 0 (interrupt on terminal count), binary.
const CH2_ONESHOT: u8 = 0b1011_0000;
const CALIBRATION_HZ: u64 = 100; // a 10 ms window

/// RDTSC, written here: the calibration loop's instructions decide the
/// measured frequency under icount (see arch/mod.rs).
fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: RDTSC reads a counter; the caller checked the TSC exists.
    unsafe { asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    ((hi as u64) << 32) | lo as u64
}

/// TSC ticks per second as measured at boot (0: no TSC, or no PIT).
static TSC_HZ: Once<u64> = Once::new();

/// The boot's TSC frequency (0 before `measure_tsc_hz`, or without a TSC).
pub fn tsc_hz() -> u64 {
    TSC_HZ.get().copied().unwrap_or(0)
}

/// Measures TSC ticks per second once, at boot, and keeps the answer.
pub fn measure_tsc_hz(has_tsc: bool) -> u64 {
    let hz = if has_tsc { measure() } else { 0 };
    assert!(!TSC_HZ.is_completed(), "the TSC was measured twice");
    TSC_HZ.call_once(|| hz);
    hz
}

fn measure() -> u64 {
    let count = (PIT_HZ / CALIBRATION_HZ) as u16;
    // SAFETY: the PIT and port B belong to the kernel; the speaker stays off.
    unsafe {
        let b = inb(PORT_B);
        outb(PORT_B, (b & !0x02) | 0x01);
        outb(PIT_COMMAND, CH2_ONESHOT);
        outb(PIT_CH2_DATA, count as u8);
        outb(PIT_CH2_DATA, (count >> 8) as u8);
        let t0 = rdtsc();
        // OUT2 goes high at terminal count; bounded in case there is no PIT.
        let mut spins = 0u32;
        while inb(PORT_B) & 0x20 == 0 && spins < 50_000_000 {
            spins += 1;
        }
        let t1 = rdtsc();
        outb(PORT_B, b);
        if spins == 50_000_000 {
            return 0;
        }
        (t1 - t0) * CALIBRATION_HZ
    }
}

/// Channel 0 data port; IRQ 0 is its output.
const PIT_CH0_DATA: u16 = 0x40;
/// Channel 0, lobyte/hibyte, mode 2 (rate generator), binary.
const CH0_RATE: u8 = 0b0011_0100;
/// Timer ticks per second.
pub const TICK_HZ: u64 = 1000;
/// The PIC's IRQ 0 vector (arch::pic remaps it there).
pub const VECTOR_TIMER: u8 = super::pic::PIC1_VECTOR;
const PIC1_CMD: u16 = 0x20;
const PIC1_DATA: u16 = 0x21;
const EOI: u8 = 0x20;

/// Whether the tick runs. Guarded by the scheduler lock: the scheduler is
/// the only caller of `start_ticks` and `stop_ticks`, always holding it.
static mut TICKING: bool = false;

/// Starts the 1 kHz tick and unmasks IRQ 0. The kernel runs with IF clear,
/// so ticks arrive only in ring 3 or in the scheduler's idle wait.
pub fn start_ticks() {
    // SAFETY: the caller (the scheduler) holds the scheduler lock, which
    // guards TICKING; the PIT channel 0 and the PIC mask are the kernel's.
    unsafe {
        if TICKING {
            return;
        }
        TICKING = true;
        let div = (PIT_HZ / TICK_HZ) as u16;
        outb(PIT_COMMAND, CH0_RATE);
        outb(PIT_CH0_DATA, div as u8);
        outb(PIT_CH0_DATA, (div >> 8) as u8);
        outb(PIC1_DATA, inb(PIC1_DATA) & !1);
    }
}

/// Masks IRQ 0 again (between tasks, and while benchmarks time).
pub fn stop_ticks() {
    // SAFETY: as in start_ticks (the scheduler lock is held).
    unsafe {
        TICKING = false;
        outb(PIC1_DATA, inb(PIC1_DATA) | 1);
    }
}

super::regs::frame_asm!(
    r#"
    .pushsection .text.irq, "ax"
    .global irq0_entry
    /* IRQ 0 through an interrupt gate (IF now clear). From ring 3 the CPU
       switched to TSS.ESP0; from the idle HLT we are on the kernel stack. */
irq0_entry:
    /* The model's marker: a device interrupt's delivery. */
    nopl {marker}(%eax)
    /* The interrupted DS, ES and general registers, then the kernel's
       data segments; DF clear for Rust. */
    frame_save
    cld
    /* The interrupted CS: the same frame as a system-call entry. Up to
       the trap module's timer (arch/mod.rs lists the upcalls). */
    movl {cs}(%esp), %ecx
    call trap_timer
    frame_restore
    iret
    .popsection
    "#,
    cs = const super::regs::frame::CS,
    marker = const abi::model::marker_disp(abi::model::device_interrupt_marker(VECTOR_TIMER)),
    options(att_syntax)
);

unsafe extern "C" {
    static irq0_entry: u8;
}

pub fn irq0_address() -> u32 {
    &raw const irq0_entry as u32
}

/// Acknowledges IRQ 0 at the master PIC (the timer upcall does, before
/// anything can switch).
#[inline(always)]
pub fn ack() {
    // SAFETY: an end-of-interrupt to the master PIC, whose IRQ 0 is in service.
    unsafe { outb(PIC1_CMD, EOI) };
}
