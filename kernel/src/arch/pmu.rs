//! Architectural performance counters (Intel SDM Vol. 3B §20.2): where CPUID
//! leaf 0xA reports version 2 or later with at least two fixed-function
//! counters, fixed counter 0 counts instructions retired and fixed counter 1
//! core cycles, in rings 0 and 3, and CR4.PCE lets ring 3 read them with
//! RDPMC. QEMU's TCG has no PMU: the figures are then "n/a".

use core::arch::asm;

use super::cpu::Features;
use super::msr::wrmsr;

/// IA32_FIXED_CTR_CTRL: 4 bits per fixed counter; 0b0011 = count in rings 0 and 3.
const IA32_FIXED_CTR_CTRL: u32 = 0x38D;
/// IA32_PERF_GLOBAL_CTRL: bit 32 + i enables fixed counter i.
const IA32_PERF_GLOBAL_CTRL: u32 = 0x38F;
const FIXED_0_AND_1_ALL_RINGS: u64 = 0x33;
const GLOBAL_FIXED_0_AND_1: u64 = (1 << 32) | (1 << 33);
/// CR4.PCE: RDPMC allowed at any privilege level.
const CR4_PCE: u32 = 1 << 8;

/// Enables the two fixed counters for ring-3 reading; true if it did.
pub fn init(f: &Features) -> bool {
    if f.perfmon_version < 2 || f.perfmon_fixed < 2 {
        return false;
    }
    // SAFETY: leaf 0xA version >= 2 guarantees these architectural MSRs and
    // at least the two fixed counters; setting CR4.PCE only permits RDPMC.
    unsafe {
        wrmsr(IA32_FIXED_CTR_CTRL, FIXED_0_AND_1_ALL_RINGS);
        wrmsr(IA32_PERF_GLOBAL_CTRL, GLOBAL_FIXED_0_AND_1);
        asm!("movl %cr4, {t}", "orl ${pce}, {t}", "movl {t}, %cr4",
             t = out(reg) _, pce = const CR4_PCE, options(att_syntax, nostack));
    }
    true
}
