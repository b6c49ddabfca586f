//! TSC frequency, measured against the 8254 PIT (channel 2, gated through
//! port 0x61 as on every PC), so reports can turn ticks into seconds.
//! Under QEMU's `-icount shift=0` both run on virtual time, one guest
//! instruction per nanosecond, so the answer is 1 GHz "virtual".

use core::arch::asm;

use super::port::{inb, outb};

/// The PIT's input clock (Hz).
const PIT_HZ: u64 = 1_193_182;
const PIT_CH2_DATA: u16 = 0x42;
const PIT_COMMAND: u16 = 0x43;
/// Port B: bit 0 gates channel 2, bit 1 drives the speaker, bit 5 reads OUT2.
const PORT_B: u16 = 0x61;
/// Channel 2, lobyte/hibyte, mode 0 (interrupt on terminal count), binary.
const CH2_ONESHOT: u8 = 0b1011_0000;
const CALIBRATION_HZ: u64 = 100; // a 10 ms window

fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: RDTSC reads a counter; the caller checked the TSC exists.
    unsafe { asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    ((hi as u64) << 32) | lo as u64
}

/// TSC ticks per second, or 0 without a TSC.
pub fn tsc_hz(has_tsc: bool) -> u64 {
    if !has_tsc {
        return 0;
    }
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
