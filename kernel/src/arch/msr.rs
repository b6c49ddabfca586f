//! Model-specific registers (Intel SDM Vol. 4; AMD APM Vol. 2 §6.1.1).

use core::arch::asm;

/// SYSENTER target CS; SS, and SYSEXIT's CS/SS, follow from it (SDM Vol. 3A §5.8.7).
pub const IA32_SYSENTER_CS: u32 = 0x174;
/// ESP loaded by SYSENTER.
pub const IA32_SYSENTER_ESP: u32 = 0x175;
/// EIP loaded by SYSENTER.
pub const IA32_SYSENTER_EIP: u32 = 0x176;
/// AMD EFER; bit 0 (SCE) enables SYSCALL/SYSRET.
pub const EFER: u32 = 0xC000_0080;
pub const EFER_SCE: u64 = 1;
/// AMD STAR: bits 31..0 target EIP, 47..32 SYSCALL CS, 63..48 SYSRET CS (APM Vol. 2 §6.1.1).
pub const STAR: u32 = 0xC000_0081;

/// `rdmsr` (SDM Vol. 2B).
///
/// # Safety
/// The MSR must exist on this CPU, or `rdmsr` raises #GP.
pub unsafe fn rdmsr(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: the caller checked the MSR exists.
    unsafe { asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    ((hi as u64) << 32) | lo as u64
}

/// `wrmsr` (SDM Vol. 2B).
///
/// # Safety
/// The MSR must exist, and the value must keep the machine sound.
pub unsafe fn wrmsr(msr: u32, value: u64) {
    // SAFETY: the caller vouches for the MSR and the value.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") value as u32, in("edx") (value >> 32) as u32,
             options(nomem, nostack))
    };
}
