//! Model-specific registers (Intel SDM Vol. 4; AMD APM Vol. 2 §6.1.1).
//!
//! The numbers are the `x86` crate's (`x86::msr`, named as in the manuals).
//! The two instructions stay written here: `x86::msr::{rdmsr, wrmsr}` are
//! not `#[inline]` and their `asm!` does not say `nomem, nostack`, so on
//! the thread switch (`wrmsr` of IA32_SYSENTER_ESP, in the timed lock and
//! yield paths) they would add a call and make the compiler reload
//! whatever it held from memory: longer icount path lengths.

use core::arch::asm;

/// AMD EFER, whose bit 0 (SCE) enables SYSCALL/SYSRET; AMD STAR: bits 31..0
/// target EIP, 47..32 SYSCALL CS, 63..48 SYSRET CS (APM Vol. 2 §6.1.1).
pub use x86::msr::{IA32_EFER as EFER, IA32_STAR as STAR};
/// EFER.SCE.
pub const EFER_SCE: u64 = 1;
/// SYSENTER target CS; SS, and SYSEXIT's CS/SS, follow from it (SDM Vol. 3A
/// §5.8.7). ESP and EIP: what SYSENTER loads.
pub use x86::msr::{IA32_SYSENTER_CS, IA32_SYSENTER_EIP, IA32_SYSENTER_ESP};

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
